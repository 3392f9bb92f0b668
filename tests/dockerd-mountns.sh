#!/bin/sh
# The private mount namespace of a test's or the bench's dockerd (run under
# `unshare -m --propagation private`), then exec the daemon:
#
#   dockerd-mountns.sh CONF_DIR BIN_DIR CACHE_DIR SCRATCH DOCKERD [ARGS…]
#
# * The defaults of oci-wrap and the hook (/etc/cni/net.d, /opt/cni/bin, /var/lib/cni) show
#   the given directories, so `{"path": ".../oci-wrap"}` (no options, the shape the README
#   recommends) runs against the caller's network, plugins and cache. A directory the host
#   lacks gets an overlay on its nearest existing parent first, with its layers in SCRATCH,
#   so nothing is created on the host.
# * A tmpfs over /run, with the paths dockerd 20.10 and containerd 1.6 hard-code.
# * cgroup v1's `unified` mount, which confuses runc, is unmounted (here only).
set -e
conf=$1 bin=$2 cache=$3 scratch=$4
shift 4

show_at() {
    mkdir -p "$1"
    p=$2
    while [ ! -d "$p" ]; do p=$(dirname "$p"); done
    if [ "$p" != "$2" ]; then
        o="$scratch/overlay$(echo "$p" | tr / _)"
        mkdir -p "$o/upper" "$o/work"
        mount -t overlay cnibox-defaults -o "lowerdir=$p,upperdir=$o/upper,workdir=$o/work" "$p"
        mkdir -p "$2"
    fi
    mount --bind "$1" "$2"
}
show_at "$conf" /etc/cni/net.d
show_at "$bin" /opt/cni/bin
show_at "$cache" /var/lib/cni

umount /sys/fs/cgroup/unified 2>/dev/null || true
mount -t tmpfs -o mode=0755 cnibox-docker-run /run
mkdir -p /run/docker/plugins /run/containerd
exec "$@"
