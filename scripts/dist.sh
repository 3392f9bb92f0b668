#!/bin/sh
# make dist: dist/cnibox-linux-<arch>-v<version>.tgz with .sha256 and .sha512 beside it,
# named as the reference names its releases (cni-plugins-linux-<arch>-v<version>.tgz) and
# with the same arch names (Go's GOARCH), one per architecture whose Rust standard library
# is installed (musl preferred to glibc: only musl links statically without a C toolchain).
# Each archive holds the static binary, its applet symlinks (relative, so the unpacked
# directory is a working CNI bin dir), README.md and LICENSE.
# Usage: scripts/dist.sh VERSION RUSTLIB HOST_BIN (HOST_BIN lists the applets).
set -eu
version=$1 rustlib=$2 host_bin=$3
out=dist
goarch() {
    case "$1" in
        x86_64) echo amd64 ;;
        aarch64) echo arm64 ;;
        arm | armv5te | armv7 | thumbv7neon) echo arm ;;
        i586 | i686) echo 386 ;;
        riscv64gc) echo riscv64 ;;
        powerpc64le) echo ppc64le ;;
        s390x) echo s390x ;;
        mips64el) echo mips64le ;;
        loongarch64) echo loong64 ;;
        *) return 1 ;;
    esac
}
# The installed Linux targets, musl first, one per architecture.
installed=$(for d in "$rustlib"/*-linux-*/lib; do [ -d "$d" ] && basename "$(dirname "$d")"; done)
targets="$(echo "$installed" | grep -- -musl) $(echo "$installed" | grep -- -gnu)"
applets=$("$host_bin" --list)
rm -rf "$out" && mkdir -p "$out"
seen=" "
for t in $targets; do
    arch=$(goarch "${t%%-*}") || { echo "dist: skipping $t (no reference arch name)"; continue; }
    case "$seen" in *" $arch "*) continue ;; esac
    case "$t" in
        *-musl*) ;;
        x86_64-unknown-linux-gnu) ;; # static glibc: .cargo/config.toml
        *) echo "dist: skipping $t (a glibc target other than the host's needs its C toolchain)"; continue ;;
    esac
    make --no-print-directory build TARGET="$t" >/dev/null
    seen="$seen$arch "
    stage=$(mktemp -d)
    install -m 0755 "target/$t/release/cnibox" "$stage/cnibox"
    for a in $applets; do ln -s cnibox "$stage/$a"; done
    install -m 0644 README.md LICENSE "$stage/"
    name="cnibox-linux-$arch-v$version.tgz"
    tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -czf "$out/$name" .
    rm -rf "$stage"
    (cd "$out" && sha256sum "$name" >"$name.sha256" && sha512sum "$name" >"$name.sha512")
    echo "dist: $out/$name ($t)"
done
[ "$seen" != " " ] || { echo "dist: no Linux target installed" >&2; exit 1; }
ls -l "$out"
