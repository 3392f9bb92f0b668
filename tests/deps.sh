#!/bin/sh
# Install what the test suite needs, and only what is missing (Debian/Ubuntu, run as root).
# iproute2: namespaces and state checks; nftables/iptables: masquerade rules; crun: OCI hook
# tests (runc too); jq: test plugins; containernetworking-plugins: the Go reference plugins used as an
# oracle; busybox-static: container rootfs; iputils-ping: connectivity checks; golang-go and
# golang-github-appc-cni-dev: the libcni interop test; time/strace, go-cni (containerd's
# client library), netavark (podman's network backend) and gnuplot-nox (the growth curve's
# picture): make bench; docker.io: the Docker tests (dockerd 20.10 with containerd 1.6; the
# tests run their own daemons); qemu-user-static: the arm64 tests (make test-arm64; its binfmt
# entry is registered by tests/binfmt.sh); dnsmasq-base (the binary without its system
# service) and busybox-static's udhcpd: the DHCP servers of the dhcp tests.
set -eu
PKGS="iproute2 nftables iptables crun runc jq containernetworking-plugins busybox-static iputils-ping file dnsmasq-base \
golang-go golang-github-appc-cni-dev time strace golang-github-containerd-go-cni-dev netavark gnuplot-nox docker.io \
qemu-user-static"
[ "$#" -gt 0 ] && PKGS="$*"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# The musl target makes the smallest binary (the Makefile prefers it when installed);
# without it the build is static glibc, so failing to fetch it is not an error. The arm64
# and i686 targets are for make test-arm64 and test-i686, which name a missing one.
if command -v rustup >/dev/null 2>&1; then
    installed=$(rustup target list --installed 2>/dev/null || true)
    for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl i686-unknown-linux-musl; do
        echo "$installed" | grep -qx "$t" && continue
        timeout 180 rustup target add "$t" >/dev/null 2>&1 \
            || echo "deps: the Rust target $t is not available" >&2
    done
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "deps: missing packages:$missing (run as root: sudo make test)" >&2
    exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# Several test runs may install at once: wait for the dpkg lock instead of failing.
APT="apt-get -o DPkg::Lock::Timeout=600"
$APT update -qq
# docker.io and containerd start their system daemons from their postinst (through invoke-rc.d
# where there is no systemd). The tests run daemons of their own, isolated; a system dockerd
# would take over the host's network (docker0, iptables). A policy-rc.d that refuses every
# start keeps them down during the install (an existing one is left as it is).
POLICY=/usr/sbin/policy-rc.d
guard=""
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\n# written by cnibox tests/deps.sh for the duration of an install\nexit 101\n' >"$POLICY"
    chmod 0755 "$POLICY"
    guard=1
fi
status=0
# shellcheck disable=SC2086
$APT install -y -qq --no-install-recommends $missing >/dev/null || status=$?
if [ -n "$guard" ]; then rm -f "$POLICY"; fi
exit "$status"
