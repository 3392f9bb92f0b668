#!/usr/bin/env bash
# make bench: cnibox against Debian's Go reference plugins (/usr/lib/cni) and the kernel
# floor (the same link/address/route work done by one `ip -batch` process per namespace),
# all inside a private host namespace. Prints one table; every figure is a median, and
# each cnibox/reference ratio is computed pair by pair within this run.
#
# usage: sudo benches/bench.sh [path/to/cnibox]     (env: N=runs per figure, THROUGHPUT=containers)
set -euo pipefail

BIN=$(readlink -f "${1:-target/x86_64-unknown-linux-gnu/release/cnibox}")
REF=/usr/lib/cni
N=${N:-15}
THROUGHPUT=${THROUGHPUT:-200}
WORKERS=${WORKERS:-10}
STORE_SIZE=${STORE_SIZE:-60000}
HERE=$(cd "$(dirname "$0")" && pwd)

[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench: no binary at $BIN (run make first)" >&2; exit 1; }
[ -x "$REF/bridge" ] || { echo "bench: the reference plugins are missing: run 'sudo make test-deps'" >&2; exit 1; }

WORK=$(mktemp -d /tmp/cnibox-bench.XXXXXX)
HOSTNS=cbbench$$
cleanup() {
    # container namespaces first, then the host namespace that holds every bridge and veth
    for ns in $(ip netns list | awk '{print $1}' | grep "^${HOSTNS}" || true); do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$HOSTNS"

mkdir -p "$WORK/cnibox" "$WORK/reference"
for a in $("$BIN" --list); do ln -s "$BIN" "$WORK/cnibox/$a"; done
for p in bridge ptp macvlan host-local; do ln -s "$REF/$p" "$WORK/reference/$p"; done
ln -s "$REF/ptp" "$WORK/reference/veth"

export BIN REF N THROUGHPUT WORKERS STORE_SIZE WORK HOSTNS
ip netns exec "$HOSTNS" bash "$HERE/bench-inner.sh"
