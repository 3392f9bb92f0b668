#!/bin/sh
# Two containers on a bridge, entirely inside private network namespaces (run as root:
# `sudo make demo`). A private "host" namespace stands in for the host, so the real host
# network is never touched; IPAM data and the result cache go to a temp dir.
#
# usage: demo.sh [CNIBOX [CNI_BIN_DIR [CONFLIST]]]
set -eu

CNIBOX=${1:-/usr/local/bin/cnibox}
CNI_BIN_DIR=${2:-/opt/cni/bin}
CONFLIST=${3:-$(dirname "$0")/../plugins.d/10-bridge.conflist}

[ "$(id -u)" = 0 ] || { echo "demo: run as root (sudo make demo)" >&2; exit 1; }
[ -x "$CNIBOX" ] || { echo "demo: $CNIBOX not found (make install first)" >&2; exit 1; }

# What the demo runs besides cnibox: `ip` (iproute2) and a ping (iputils' or busybox's).
# Whatever is missing is installed as `make test` installs its dependencies. cnibox itself
# needs no tool: masquerade rules go to nf_tables over netlink.
DEPS="$(dirname "$0")/deps.sh"
command -v ip >/dev/null 2>&1 || sh "$DEPS" iproute2
if command -v ping >/dev/null 2>&1; then
    PING=ping
elif command -v busybox >/dev/null 2>&1 && busybox --list | grep -qx ping; then
    PING="busybox ping"
else
    sh "$DEPS" iputils-ping
    PING=ping
fi

tag="cnibox-demo-$$"
HOST="$tag-host"
A="$tag-a"
B="$tag-b"
TMP=$(mktemp -d /tmp/cnibox-demo.XXXXXX)
NETWORK=$(sed -n 's/^ *"name": *"\([^"]*\)".*/\1/p' "$CONFLIST" | head -n 1)

# run a command inside the private host namespace
in_host() { ip netns exec "$HOST" "$@"; }

cnitool() {
    in_host env NETCONFPATH="$TMP/net.d" CNI_PATH="$CNI_BIN_DIR" CNI_CACHE_DIR="$TMP/cache" \
        "$CNIBOX" cnitool "$@"
}

cleanup() {
    status=$?
    set +e
    for ns in "$A" "$B"; do
        [ -e "/run/netns/$ns" ] && cnitool del "$NETWORK" "/run/netns/$ns" >/dev/null 2>&1
        ip netns del "$ns" 2>/dev/null
    done
    ip netns del "$HOST" 2>/dev/null
    rm -rf "$TMP"
    [ "$status" = 0 ] && echo "demo: done, everything removed" || echo "demo: FAILED (status $status), everything removed" >&2
    exit "$status"
}
trap cleanup EXIT INT TERM

# the demo's copy of the network config: IPAM state under the temp dir
mkdir -p "$TMP/net.d"
sed "s|\"dataDir\": *\"[^\"]*\"|\"dataDir\": \"$TMP/ipam\"|" "$CONFLIST" >"$TMP/net.d/$(basename "$CONFLIST")"

for ns in "$HOST" "$A" "$B"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
done

echo "== ADD container A (network $NETWORK)"
cnitool add "$NETWORK" "/run/netns/$A"
echo
echo "== ADD container B"
cnitool add "$NETWORK" "/run/netns/$B"
echo

addr_of() { ip -n "$1" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1; }
ADDR_A=$(addr_of "$A")
ADDR_B=$(addr_of "$B")

echo "== host side (private namespace $HOST)"
ip -n "$HOST" -br link
ip -n "$HOST" -br addr
echo
echo "== A ($ADDR_A) pings B ($ADDR_B)"
ip netns exec "$A" $PING -c 3 -W 2 "$ADDR_B"
echo
echo "== B pings A"
ip netns exec "$B" $PING -c 1 -W 2 "$ADDR_A"
echo
echo "== CHECK both"
cnitool check "$NETWORK" "/run/netns/$A"
cnitool check "$NETWORK" "/run/netns/$B"
echo "ok"
echo
echo "== DEL both"
cnitool del "$NETWORK" "/run/netns/$A"
cnitool del "$NETWORK" "/run/netns/$B"
ip -n "$HOST" -br link
