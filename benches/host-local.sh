#!/usr/bin/env bash
# host-local ADD/DEL latency: cnibox against Debian's Go reference (/usr/lib/cni/host-local,
# when installed), with an empty store and with STORE_SIZE reservations already on disk.
# Every figure is the median of N calls, timed in-process with $EPOCHREALTIME (no fork of a
# timer). Reservations are pre-created directly in the reference's file format, so both
# implementations start from byte-identical stores. This is a benchmark, not a test.
#
# usage: sudo benches/host-local.sh [path/to/cnibox]    (env: N=runs, STORE_SIZE=reservations, REF=reference binary)
set -euo pipefail

BIN=$(readlink -f "${1:-target/x86_64-unknown-linux-gnu/release/cnibox}")
REF=${REF:-/usr/lib/cni/host-local}
N=${N:-31}
STORE_SIZE=${STORE_SIZE:-60000}

[ "$(id -u)" = 0 ] || { echo "host-local bench: run as root" >&2; exit 1; }
[ -x "$BIN" ] || { echo "host-local bench: no binary at $BIN (cargo build --release)" >&2; exit 1; }
(( STORE_SIZE < 65000 )) || { echo "host-local bench: STORE_SIZE must fit a /16 range" >&2; exit 1; }

WORK=$(mktemp -d /tmp/cnibox-hl-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/bin"
ln -s "$BIN" "$WORK/bin/host-local"

# a /8 subnet with a /16-sized range: STORE_SIZE reservations leave room for the runs
conf() { # data_dir
    printf '{"cniVersion":"1.0.0","name":"bench","ipam":{"type":"host-local","dataDir":"%s","ranges":[[{"subnet":"10.0.0.0/8","rangeStart":"10.0.0.1","rangeEnd":"10.0.255.254"}]]}}' "$1"
}

# STORE_SIZE files `10.0.x.y` holding `pre<i>\r\neth0` (mode 0600, as cnibox and the
# reference ≥ 1.4 write them), plus last_reserved_ip.0 pointing at the last one
prefill() { # dir count
    mkdir -p "$1"
    python3 - "$1" "$2" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
last = None
for i in range(n):
    v = 2 + i                      # 10.0.0.1 is the gateway
    name = "10.0.%d.%d" % (v >> 8, v & 255)
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"pre%d\r\neth0" % i)
    os.close(fd)
    last = name
if last:
    with open(os.path.join(d, "last_reserved_ip.0"), "w") as f:
        f.write(last)
PY
}

call() { # plugin command id data_dir
    CNI_COMMAND=$2 CNI_CONTAINERID=$3 CNI_NETNS=/var/run/netns/bench CNI_IFNAME=eth0 CNI_PATH="$WORK/bin" \
        "$1" <<<"$(conf "$4")" >/dev/null
}

median() { sort -n | awk '{a[NR]=$1} END {printf "%.2f", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", (b-a)*1000}'; }

impls=("cnibox:$WORK/bin/host-local")
[ -x "$REF" ] && impls+=("reference:$REF")

echo "preparing a store with $STORE_SIZE reservations…" >&2
prefill "$WORK/template/bench" "$STORE_SIZE"

declare -A PLUGIN SAMPLES
rebuild_ms=""
for entry in "${impls[@]}"; do
    name=${entry%%:*} plugin=${entry#*:}
    PLUGIN[$name]=$plugin
    cp -a "$WORK/template" "$WORK/$name-full"
    mkdir -p "$WORK/$name-empty"
    if [ "$name" = cnibox ]; then
        # the first cnibox call after a foreign writer rebuilds the owner index (O(n), once)
        t0=$EPOCHREALTIME
        call "$plugin" DEL warmup "$WORK/$name-full"
        t1=$EPOCHREALTIME
        rebuild_ms=$(ms "$t0" "$t1")
    fi
done
sync
# every (implementation, store) pair runs in each round, so background load on the
# machine hits all figures alike
for ((i = 0; i < N; i++)); do
    for entry in "${impls[@]}"; do
        name=${entry%%:*}
        for s in empty full; do
            t0=$EPOCHREALTIME
            call "${PLUGIN[$name]}" ADD "bench$i" "$WORK/$name-$s"
            t1=$EPOCHREALTIME
            call "${PLUGIN[$name]}" DEL "bench$i" "$WORK/$name-$s"
            t2=$EPOCHREALTIME
            SAMPLES[$name,$s,ADD]+="$(ms "$t0" "$t1") "
            SAMPLES[$name,$s,DEL]+="$(ms "$t1" "$t2") "
        done
    done
done
for entry in "${impls[@]}"; do
    name=${entry%%:*}
    left=$(find "$WORK/$name-full/bench" -maxdepth 1 -name '10.*' | wc -l)
    [ "$left" = "$STORE_SIZE" ] || { echo "host-local bench: $name left $left reservations, expected $STORE_SIZE" >&2; exit 1; }
done

printf '\nhost-local latency, median of %d calls (ms)\n' "$N"
printf '%-12s %-18s %10s %10s\n' implementation store ADD DEL
for entry in "${impls[@]}"; do
    name=${entry%%:*}
    for s in empty full; do
        a=$(tr ' ' '\n' <<<"${SAMPLES[$name,$s,ADD]}" | grep . | median)
        d=$(tr ' ' '\n' <<<"${SAMPLES[$name,$s,DEL]}" | grep . | median)
        label=$([ $s = empty ] && echo "empty" || echo "$STORE_SIZE reservations")
        printf '%-12s %-18s %10s %10s\n' "$name" "$label" "$a" "$d"
    done
done
printf '\ncnibox first call on the %d-reservation store written by another writer (index rebuild): %s ms\n' \
    "$STORE_SIZE" "$rebuild_ms"
