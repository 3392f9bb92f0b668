#!/usr/bin/env bash
# Where an ADD and a DEL grow with the node: one bridge network (bridge+host-local with
# ipMasq) filled to N attachments, and the calls near the start compared with those at N.
# Counts do not depend on the machine's load, times do (read them as shares).
#
# usage: sudo benches/growth-profile.sh [path/to/cnibox] [N]     (N: 250)
#   For each of ADD and DEL, at 2 and at N attachments: every syscall by class (`strace -f -T
#   -yy` of one call: sysctl paths, store files, rtnetlink, nf_tables netlink, namespace
#   switches, memory, other; calls, requests and traced ms), the CPU time of five calls
#   (`perf stat -e task-clock`), and, where `perf record` works, the kernel and user symbols
#   whose samples grew most between ten calls at each end (cpu-clock at 20 kHz: one sample
#   is 50 µs of CPU, shown per call).
#   REF=1 profiles the reference plugins (/usr/lib/cni) instead; KEEP=1 keeps the traces.
set -euo pipefail
BIN=$(readlink -f "${1:-target/x86_64-unknown-linux-gnu/release/cnibox}")
N=${2:-250}
(( N >= 30 )) || { echo "growth-profile: N must be at least 30" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "growth-profile: run as root" >&2; exit 1; }
W=$(mktemp -d /tmp/cnibox-growth.XXXXXX)
HOSTNS=cbgp$$
cleanup() {
    for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep "^${HOSTNS}" || true); do ip netns del "$ns" 2> /dev/null || true; done
    [ -n "${KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/bin" "$W/out"
if [ -n "${REF:-}" ]; then
    for p in bridge host-local; do ln -s "/usr/lib/cni/$p" "$W/bin/$p"; done
else
    for p in bridge host-local; do ln -s "$BIN" "$W/bin/$p"; done
fi
printf '{"cniVersion":"1.0.0","name":"gp","type":"bridge","bridge":"cbgp0","isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.87.0.0/16"}]],"dataDir":"%s"}}' \
    "$W/data" > "$W/conf.json"
ip netns add "$HOSTNS"; ip -n "$HOSTNS" link set lo up
for ((i = 1; i <= N; i++)); do echo "netns add ${HOSTNS}c$i"; done | ip -batch -
python3 "$(dirname "$0")/lo-up.py" $(for ((i = 1; i <= N; i++)); do echo "${HOSTNS}c$i"; done)
perf_ok=""; perf record -q -o /dev/null true 2> /dev/null && perf_ok=1

# call VERB I [PREFIX...] : the attachment of container I, inside the host namespace
call() {
    local verb=$1 i=$2; shift 2
    CNI_COMMAND=$verb CNI_CONTAINERID="gp$i" CNI_NETNS="/run/netns/${HOSTNS}c$i" CNI_IFNAME=eth0 CNI_PATH="$W/bin" \
        ip netns exec "$HOSTNS" "$@" "$W/bin/bridge" < "$W/conf.json" > "$W/out/$verb.$i" 2>&1 \
        || { echo "growth-profile: $verb $i failed: $(cat "$W/out/$verb.$i")" >&2; exit 1; }
}
trace() { call "$1" "$2" strace -f -T -yy -o "$W/trace.$1.$3"; }
cpu() { call "$1" "$2" perf stat -x, -e task-clock -o "$W/cpu.$1.$3" --append; }
record() {  # VERB TAG I... : ten calls in one perf record
    local verb=$1 tag=$2; shift 2
    if [ -z "$perf_ok" ]; then for i in "$@"; do call "$verb" "$i"; done; return; fi
    perf record -q -F 20000 -g -o "$W/perf.$verb.$tag" -- bash -c \
        "for i in $*; do CNI_COMMAND=$verb CNI_CONTAINERID=gp\$i CNI_NETNS=/run/netns/${HOSTNS}c\$i CNI_IFNAME=eth0 CNI_PATH=$W/bin ip netns exec $HOSTNS $W/bin/bridge < $W/conf.json > /dev/null || exit 1; done"
}
echo "growth-profile: ADD 1-$N" >&2
call ADD 1; trace ADD 2 first; for i in 3 4 5 6 7; do cpu ADD "$i" first; done
record ADD first $(seq 8 17)
for ((i = 18; i <= N - 16; i++)); do call ADD "$i"; done
record ADD last $(seq $((N - 15)) $((N - 6)))
for ((i = N - 5; i < N; i++)); do cpu ADD "$i" last; done
trace ADD "$N" last
echo "growth-profile: DEL $N-1" >&2
trace DEL "$N" last; for ((i = N - 1; i > N - 6; i--)); do cpu DEL "$i" last; done
record DEL last $(seq $((N - 6)) -1 $((N - 15)))
for ((i = N - 16; i >= 18; i--)); do call DEL "$i"; done
record DEL first $(seq 17 -1 8)
for i in 7 6 5 4 3; do cpu DEL "$i" first; done
trace DEL 2 first; call DEL 1

classes() {  # TRACE : class calls requests ms, from one strace of one call
    awk -v data="$W/data" '
    function dur(l) { if (match(l, /<[0-9.]+>$/)) return substr(l, RSTART + 1, RLENGTH - 2) * 1000; return 0 }
    { call = $2; sub(/\(.*/, "", call); if (call == "execve" || call == "+++" || call == "---") next
      c = "other"
      if ($0 ~ /NETLINK:\[NETFILTER/) { c = "nf_tables netlink"; if (call ~ /^send/) req[c]++ }
      else if ($0 ~ /NETLINK:/) { c = "rtnetlink"; if (call ~ /^send/) req[c]++ }
      else if (index($0, data)) c = "store files"
      else if ($0 ~ /\/proc\/sys\// || $0 ~ /fsopen|fsconfig|fsmount/ || $0 ~ /"sys\/net\//) c = "sysctl paths"
      else if (call == "setns" || $0 ~ /\/run\/netns\//) c = "namespace switches"
      else if (call ~ /^(mmap|munmap|mprotect|brk|mremap)$/) c = "memory"
      t[c] += dur($0); n[c]++; N++ }
    END { for (c in n) printf "%s\t%d\t%s\t%.3f\n", c, n[c], (c in req) ? req[c] : "-", t[c]; printf "all\t%d\t-\t-\n", N }' "$1" | sort
}
median_cpu() { grep task-clock "$1" | cut -d, -f1 | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
for verb in ADD DEL; do
    echo
    echo "== $verb: one call at 2 attachments vs at $N (strace -f -T; calls, requests, traced ms)"
    join -t $'\t' -a1 -a2 -e - -o 0,1.2,1.3,1.4,2.2,2.3,2.4 <(classes "$W/trace.$verb.first") <(classes "$W/trace.$verb.last") \
        | awk -F'\t' 'BEGIN {printf "%-20s %16s %16s\n", "class", "at 2", "at N"} {printf "%-20s %6s %4s %6s %6s %4s %6s\n", $1, $2, $3, $4, $5, $6, $7}'
    echo "CPU per call (perf stat task-clock, median of five): $(median_cpu "$W/cpu.$verb.first") ms near the start, $(median_cpu "$W/cpu.$verb.last") ms at $N"
    if [ -n "$perf_ok" ]; then
        echo "symbols whose samples grew most (µs of CPU per call, ten calls each end; [k] kernel, [.] user):"
        for tag in first last; do
            perf report -i "$W/perf.$verb.$tag" --comm bridge --no-children --sort sym --stdio -g none -n 2> /dev/null \
                | awk '/%/ && !/^#/ {print $3 $4, $2}' | sort > "$W/syms.$verb.$tag"
        done
        join -a1 -a2 -e 0 -o 0,1.2,2.2 "$W/syms.$verb.first" "$W/syms.$verb.last" \
            | awk '{d = ($3 - $2) * 5; if (d >= 10 || d <= -10) printf "  %+7.0f  %s\n", d, $1}' | sort -rn | awk 'NR <= 15'
    fi
done
