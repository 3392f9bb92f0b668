#!/usr/bin/env bash
# make bench: cnibox against Debian's Go reference plugins (/usr/lib/cni), netavark and the
# kernel floor, all inside a private host namespace with fresh container namespaces. Prints
# the tables of docs/benchmarks.md; every figure is a median, and each ratio is computed
# round by round within this run (absolute times on a shared VM are not comparable across runs).
#
# usage: sudo benches/bench.sh [path/to/cnibox]
# knobs (env, or make arguments: `sudo make bench N=15`; the defaults take ~2.5 minutes with
# the Docker rows on a quiet 2-core VM, `N=15` is the long run):
#   N             rounds per figure of the comparison tables and floors (9)
#   HOST_LOCAL_N  rounds of the host-local steady state (5, or N when N is given: the
#                 reference takes ~1 s per call on the full store)
#   GROWTH        the growth curve's largest network before the long run, and the parallel
#                 ADDs (250)
#   GROWTH_POINTS network sizes of the growth curve (1, 50, 100 and GROWTH, and 1000 when N
#                 is 15 or more: the long run)
#   GROWTH_EDGE   calls measured at each size of the growth curve (10)
#   GROWTH_PLOT   the growth curve's picture (target/bench/growth.svg; its data beside it)
#   GROWTH_SETTLE seconds of pause after each unmeasured ADD fill of the growth curve, for
#                 the new interfaces' IPv6 start-up to end (10)
#   WORKERS       parallel workers (10)
#   STORE_SIZE    host-local reservations (60000)
#   SETTLE        seconds of pause once a deleted namespace's links are gone (0.3)
#   SECTIONS      sections to run (all: headline peers growth plugins ipmasq static-sbr dhcp breakdown
#                 host-local resources); KEEP=1 keeps the work directory
#   (make bench then runs benches/docker.sh: DOCKER_N runs per figure (9, or N when N is
#   given); BENCH_DOCKER=0 skips it)
set -euo pipefail

BIN=$(readlink -f "${1:-target/x86_64-unknown-linux-gnu/release/cnibox}")
REF=/usr/lib/cni
HOST_LOCAL_N=${HOST_LOCAL_N:-${N:-5}}
N=${N:-9}
GROWTH=${GROWTH:-250}
GROWTH_EDGE=${GROWTH_EDGE:-10}
GROWTH_SETTLE=${GROWTH_SETTLE:-10}
if [ -z "${GROWTH_POINTS:-}" ]; then
    GROWTH_POINTS=""
    for p in 1 50 100; do (( p < GROWTH )) && GROWTH_POINTS+="$p "; done
    GROWTH_POINTS+=$GROWTH
    (( N >= 15 && GROWTH < 1000 )) && GROWTH_POINTS+=" 1000"
fi
WORKERS=${WORKERS:-10}
STORE_SIZE=${STORE_SIZE:-60000}
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
BENCH_START=$(date +%s)
ROOT=$(cd "$BENCH_DIR/.." && pwd)

[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench: no binary at $BIN (run make first)" >&2; exit 1; }
[ -x "$REF/bridge" ] || { echo "bench: the reference plugins are missing: run 'sudo make test-deps'" >&2; exit 1; }
(( GROWTH_EDGE <= GROWTH )) || { echo "bench: GROWTH_EDGE must not exceed GROWTH" >&2; exit 1; }
# ascending network sizes from 1 to 1,000 (a bridge holds 1,024 ports)
prev=0
for p in $GROWTH_POINTS; do
    [[ $p =~ ^[0-9]+$ ]] && (( p > prev && p <= 1000 )) \
        || { echo "bench: GROWTH_POINTS must be ascending network sizes from 1 to 1000 (got: $GROWTH_POINTS)" >&2; exit 1; }
    prev=$p
done
GROWTH_PLOT=${GROWTH_PLOT:-$(cd "$(dirname "$0")/.." && pwd)/target/bench/growth.svg}

WORK=$(mktemp -d /tmp/cnibox-bench.XXXXXX)
HOSTNS=cbbench$$
cleanup() {
    # container namespaces first, then the host namespace that holds every bridge, veth and rule
    for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep "^${HOSTNS}" || true); do ip netns del "$ns" 2>/dev/null || true; done
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$HOSTNS"

# Two plugin dirs: the reference's plugins, and "cnibox": cnibox's applet under each name it
# has, the reference plugin under every other name (the table says which ran).
mkdir -p "$WORK/cnibox" "$WORK/reference"
for p in "$REF"/*; do ln -s "$p" "$WORK/reference/${p##*/}"; ln -s "$p" "$WORK/cnibox/${p##*/}"; done
ln -s "$REF/ptp" "$WORK/reference/veth"
applets=$("$BIN" --list) || { echo "bench: $BIN --list failed (the binary must be named cnibox)" >&2; exit 1; }
for a in $applets; do ln -sfn "$BIN" "$WORK/cnibox/$a"; done

# The runtimes' client libraries, built offline from Debian's Go sources
build_go() {  # NAME SOURCE PACKAGE-DIR DEBIAN-PACKAGE
    if ! command -v go > /dev/null; then echo "Go is not installed (golang-go)" > "$WORK/$1.missing"; return; fi
    if [ ! -d "/usr/share/gocode/src/$3" ]; then echo "$4 is not installed" > "$WORK/$1.missing"; return; fi
    GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS='' GOCACHE="$WORK/go-cache" \
        go build -o "$WORK/$1" "$2" 2> "$WORK/$1.missing" || { sed -i '1s/^/go build failed: /' "$WORK/$1.missing"; rm -f "$WORK/$1"; }
}
build_go libcni_tool "$ROOT/tests/interop/libcni_tool.go" github.com/containernetworking/cni/libcni golang-github-appc-cni-dev
build_go gocni_tool "$ROOT/tests/interop/gocni_tool.go" github.com/containerd/go-cni golang-github-containerd-go-cni-dev

# netavark: Debian installs it for podman under /usr/lib/podman
NETAVARK=""
NETAVARK_MISSING="not installed (apt-get install netavark)"
for nv in /usr/lib/podman/netavark /usr/libexec/podman/netavark "$(command -v netavark || true)"; do
    if [ -x "$nv" ]; then NETAVARK=$nv; NETAVARK_MISSING=""; break; fi
done

export BIN REF N HOST_LOCAL_N GROWTH GROWTH_POINTS GROWTH_EDGE GROWTH_PLOT GROWTH_SETTLE WORKERS STORE_SIZE WORK HOSTNS BENCH_DIR BENCH_START NETAVARK NETAVARK_MISSING
ip netns exec "$HOSTNS" bash "$BENCH_DIR/bench-inner.sh"
