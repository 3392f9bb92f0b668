#!/bin/sh
# Lets this kernel exec arm64 binaries by name (the applet symlinks of a CNI bin dir, the
# plugins a runtime or hook execs), as an arm64 node would: binfmt_misc hands them to
# qemu-user. Mounts binfmt_misc where it is missing and registers Debian's qemu-aarch64
# entry (qemu-user-static's /usr/lib/binfmt.d file) where no entry for arm64 ELF files is
# enabled. Its flags are OPF: F opens the interpreter at registration, so exec works in
# any mount namespace (a container's rootfs, a call's private tmpfs over /usr/sbin); P
# keeps argv[0], which names the applet.
# Exit 0: arm64 binaries exec by name. Exit 1: they cannot here, and why is on stderr.
set -eu
dir=/proc/sys/fs/binfmt_misc
conf=/usr/lib/binfmt.d/qemu-aarch64.conf
fail() { echo "binfmt: $*" >&2; exit 1; }
[ -f "$conf" ] || fail "$conf is missing (apt-get install qemu-user-static)"
if [ ! -e "$dir/register" ]; then
    mount -t binfmt_misc binfmt_misc "$dir" 2>/dev/null \
        || fail "cannot mount binfmt_misc on $dir (not root, or a container without CAP_SYS_ADMIN)"
fi
[ "$(cat "$dir/status")" = enabled ] || fail "binfmt_misc is disabled on this host ($dir/status)"
# An entry of another name (binfmt-support's, a distribution's) that already handles arm64
# ELF files is used as it is when it has the F flag; without F it would fail inside mount
# namespaces that do not have its interpreter.
magic=$(cut -d: -f5 "$conf" | sed 's/\\x//g')
for entry in "$dir"/*; do
    case "$entry" in */register | */status) continue ;; esac
    grep -qx "magic $magic" "$entry" || continue
    grep -qx enabled "$entry" || continue
    grep -q '^flags:.*F' "$entry" && exit 0
    fail "$entry handles arm64 ELF files without the F flag; remove it (echo -1 > $entry) to let this script register one with F"
done
cat "$conf" >"$dir/register" 2>/dev/null || fail "cannot register $conf in $dir/register"
echo "binfmt: registered $(cut -d: -f2 "$conf") from $conf"
