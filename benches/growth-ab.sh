#!/usr/bin/env bash
# Two or more cnibox builds (and the kernel floor) side by side as one bridge network fills:
# the ADD of the last M attachments to N, every variant on its own network and their calls
# interleaved, so the machine's moments are shared. Resolves ~0.3 ms where make bench's
# growth rows (ten calls per size, beside the reference's and netavark's long calls) swing
# by a millisecond from run to run. For comparing a change, not for the issue's targets.
#
# usage: sudo benches/growth-ab.sh N M NAME=PATH [NAME=PATH ...] [floor]
#   PATH: a cnibox binary, or a directory of plugins (ref=/usr/lib/cni: the reference)
#   e.g. sudo benches/growth-ab.sh 250 40 before=/tmp/cnibox-main after=target/x86_64-unknown-linux-musl/release/cnibox floor
#   Run it at a small N too (N = M + 1) and compare the medians: the growth is the difference.
#   Each variant: bridge+host-local with ipMasq (host-local's store on a tmpfs, so the file
#   system's own history does not enter); `floor`: the same veth, port, address and route by
#   two `ip -batch` processes. Prints each variant's median ADD in ms.
set -euo pipefail
(( $# >= 3 )) || { sed -n 2,13p "$0" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "growth-ab: run as root" >&2; exit 1; }
N=$1; M=$2; shift 2
(( M >= 1 && N > M && N <= 1000 )) || { echo "growth-ab: need 1 <= M < N <= 1000" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /tmp/cnibox-growth-ab.XXXXXX)
HOSTNS=cbab$$
cleanup() {
    umount "$W/data" 2> /dev/null || true
    for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep "^${HOSTNS}" || true); do ip netns del "$ns" 2> /dev/null || true; done
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/data"; mount -t tmpfs tmpfs "$W/data"
ip netns add "$HOSTNS"; ip -n "$HOSTNS" link set lo up
names=(); k=0
for v in "$@"; do
    name=${v%%=*}; names+=("$name"); mkdir -p "$W/$name"
    if [ "$v" = floor ]; then
        ip -n "$HOSTNS" link add "cbab$k" type bridge; ip -n "$HOSTNS" link set "cbab$k" up
        ip -n "$HOSTNS" addr add "10.$((80 + k)).0.1/16" dev "cbab$k"
    else
        bin=$(readlink -f "${v#*=}")
        if [ -d "$bin" ]; then  # a plugin directory (e.g. /usr/lib/cni: the reference)
            for p in bridge host-local; do ln -s "$bin/$p" "$W/$name/$p"; done
        else
            [ -x "$bin" ] || { echo "growth-ab: $bin is not a binary" >&2; exit 1; }
            for p in bridge host-local; do ln -s "$bin" "$W/$name/$p"; done
        fi
        printf '{"cniVersion":"1.0.0","name":"ab%s","type":"bridge","bridge":"cbab%s","isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.%s.0.0/16"}]],"dataDir":"%s"}}' \
            "$k" "$k" "$((80 + k))" "$W/data" > "$W/$name/conf.json"
    fi
    for ((i = 1; i <= N; i++)); do echo "netns add ${HOSTNS}n${k}c$i"; done | ip -batch -
    python3 "$HERE/lo-up.py" $(for ((i = 1; i <= N; i++)); do echo "${HOSTNS}n${k}c$i"; done)
    k=$((k + 1))
done
# inside the host namespace: fill every network to N-M, settle, then the last M in rotation
ip netns exec "$HOSTNS" bash -s "$HERE" "$W" "$N" "$M" "$HOSTNS" "${names[@]}" << 'INNER'
# shellcheck source=benches/lib.sh
. "$1/lib.sh"
W=$2; N=$3; M=$4; H=$5; shift 5; names=("$@"); nv=${#names[@]}
add() {  # K NAME I
    local ns=${H}n$1c$3
    if [ "$2" = floor ]; then
        floor_attach "ab$3" "$ns" "cbab$1" "10.$((80 + $1)).$((($3 + 2) >> 8)).$((($3 + 2) & 255))/16" "10.$((80 + $1)).0.1" \
            || { echo "growth-ab: floor ADD $3 failed" >&2; exit 1; }
        return
    fi
    CNI_COMMAND=ADD CNI_CONTAINERID="ab$3" CNI_NETNS="/run/netns/$ns" CNI_IFNAME=eth0 CNI_PATH="$W/$2" \
        "$W/$2/bridge" < "$W/$2/conf.json" > /dev/null || { echo "growth-ab: $2 ADD $3 failed" >&2; exit 1; }
}
for ((i = 1; i <= N - M; i++)); do for ((k = 0; k < nv; k++)); do add "$k" "${names[k]}" "$i"; done; done
# the fill's IPv6 announcements (flooded to every port) die down first, as in make bench
sleep 3
for ((i = N - M + 1; i <= N; i++)); do
    for ((r = 0; r < nv; r++)); do
        k=$(((r + i) % nv)); t0=$EPOCHREALTIME; add "$k" "${names[k]}" "$i"; t1=$EPOCHREALTIME
        echo "${names[k]} $((${t1/./} - ${t0/./}))"
    done
done > "$W/times"
printf 'growth-ab: ADD of attachments %s-%s (median of %s, ms):' "$((N - M + 1))" "$N" "$M"
for n in "${names[@]}"; do
    grep "^$n " "$W/times" | awk '{print $2}' | sort -n | awk -v n="$n" '{a[NR] = $1} END {printf " %s %.2f", n, a[int((NR + 1) / 2)] / 1000}'
done
echo
INNER
