#!/usr/bin/env bash
# make bench, Docker part: what `docker run --rm` costs with cnibox's runtime (oci-wrap
# around runc, the hooks doing ADD and DEL) against plain runc with `--net none`, beside the
# hook's own ADD+DEL for the same network. Medians of N runs, the docker series interleaved
# so drift hits them alike. The daemon is isolated as in tests/integration/docker.rs: its
# own network namespace (no route out), a private mount namespace with a tmpfs over /run,
# every other path in a temp dir; it is ended by its PID. Its exec root (where containerd
# keeps the bundles and runc its state) is on that tmpfs, /run/docker, as a real dockerd's:
# on the temp dir's disk every bundle write would cost a journal commit that no real
# Docker host pays.
#
# Both daemon.json shapes of the README: the recommended `{"path": ".../oci-wrap"}` with the
# default directories (tests/dockerd-mountns.sh shows this run's there), and the
# `runtimeArgs` one, which dockerd turns into a shell script that runs for every runtime
# call. The `--net host` rows (the hooks find nothing to attach) show what the wrapper and
# the two hook processes cost by themselves.
#
# usage: sudo benches/docker.sh [path/to/cnibox]
# knobs (env): DOCKER_N runs per figure (9, or N when N is given), DOCKER_TRACE_N traced
# rounds (DOCKER_N), BENCH_DOCKER=0 skips it all
set -euo pipefail

[ "${BENCH_DOCKER:-1}" = 0 ] && { echo "bench: Docker rows skipped (BENCH_DOCKER=0)" >&2; exit 0; }
BIN=$(readlink -f "${1:-target/x86_64-unknown-linux-gnu/release/cnibox}")
N=${DOCKER_N:-${N:-9}}
START=$SECONDS
say() { echo "bench docker [$(( SECONDS - START ))s]: $*" >&2; }
HERE=$(cd "$(dirname "$0")/.." && pwd)
DOCKERD=/usr/sbin/dockerd
DOCKER=/usr/bin/docker
RUNC=/usr/sbin/runc

[ "$(id -u)" = 0 ] || { echo "bench: run as root" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench: no binary at $BIN (run make first)" >&2; exit 1; }
[ -x "$DOCKERD" ] || { echo "bench: docker.io is missing: run 'sudo make test-deps'" >&2; exit 1; }

WORK=$(mktemp -d /tmp/cnibox-dockerbench.XXXXXX)
HOSTNS=cbdockbench$$
DPID=""
cleanup() {
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        kill "$DPID"
        for _ in $(seq 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
    fi
    ip netns del "$HOSTNS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$HOSTNS"
ip -n "$HOSTNS" link set lo up

mkdir -p "$WORK/bin" "$WORK/net.d" "$WORK/rootfs/bin" "$WORK/docker"
for a in $("$BIN" --list); do ln -s "$BIN" "$WORK/bin/$a"; done
# the shipped network, with its bridge, subnet and data dir private to this run
sed -e "s|\"cnibox0\"|\"cbdock0\"|; s|10.88.0.0/24|10.99.0.0/24|; s|/var/lib/cni/networks|$WORK/ipam|" \
    "$HERE/plugins.d/10-bridge.conflist" >"$WORK/net.d/10-bridge.conflist"
HOOK_ARGS="--conf-dir $WORK/net.d --bin-dir $WORK/bin --cache-dir $WORK/cache"
cat >"$WORK/docker/daemon.json" <<EOF
{"runtimes": {
  "cnibox": {"path": "$WORK/bin/oci-wrap"},
  "cnibox-args": {"path": "$BIN",
    "runtimeArgs": ["oci-wrap", "--runtime", "$RUNC", $(printf '"%s", ' $HOOK_ARGS)"--"]}}}
EOF

D="$WORK/docker"
# the daemon's mount namespace: the defaults of oci-wrap and the hook show this run's
# directories (nothing is created on the host), a tmpfs over /run
nsenter --net="/run/netns/$HOSTNS" unshare -m --propagation private \
    sh "$HERE/tests/dockerd-mountns.sh" "$WORK/net.d" "$WORK/bin" "$WORK/cache" "$WORK/scratch" \
    "$DOCKERD" --data-root "$D/data" --exec-root /run/docker --pidfile "$D/dockerd.pid" \
    --config-file "$D/daemon.json" -H "unix://$D/docker.sock" --bridge=none --iptables=false \
    --ip6tables=false --ip-masq=false --shutdown-timeout 2 >"$D/dockerd.log" 2>&1 &
DPID=$!
say "dockerd starting"
dk() { DOCKER_CONFIG="$D/client" "$DOCKER" -H "unix://$D/docker.sock" "$@"; }
for _ in $(seq 300); do dk version >/dev/null 2>&1 && break; sleep 0.1; done
dk version >/dev/null || { tail -20 "$D/dockerd.log" >&2; exit 1; }

cp /bin/busybox "$WORK/rootfs/bin/"
ln -s busybox "$WORK/rootfs/bin/true"
tar -C "$WORK/rootfs" -cf "$WORK/rootfs.tar" .
dk import "$WORK/rootfs.tar" cnibox-bench:1 >/dev/null

# stamp VAR : microseconds since the epoch into VAR, without a fork (inside the measured window)
stamp() { printf -v "$1" %s "${EPOCHREALTIME/./}"; }

# each series: its name, then its `docker run` options
SERIES=(
    "plain|--net none"
    "cnibox|--runtime cnibox --net none"
    "args|--runtime cnibox-args --net none"
    "plain_host|--net host"
    "cnibox_host|--runtime cnibox --net host"
)
run() {
    # shellcheck disable=SC2086 # the options are words
    dk run --rm ${1#*|} cnibox-bench:1 true
}
# warm every path (image layers, runtime script, first plugin exec)
for _ in 1 2; do
    for s in "${SERIES[@]}"; do run "$s"; done
done
for s in "${SERIES[@]}"; do : >"$WORK/${s%%|*}"; done
say "docker run: $N rounds of ${#SERIES[@]} series"
# shellcheck disable=SC2154  # stamp sets t0 and t1 (printf -v)
for _ in $(seq "$N"); do
    for s in "${SERIES[@]}"; do
        stamp t0; run "$s"; stamp t1; echo $((t1 - t0)) >>"$WORK/${s%%|*}"
    done
done

# the hook's own ADD+DEL on the same network, each call exec'd from one shell in the
# daemon's namespace (as runc execs a hook), as Docker calls them: ADD for a process in a
# fresh namespace, DEL as soon as that process has ended (poststop runs right after the
# container's last process exited). The process's end is not timed. The kernel is then
# still destroying the namespace and the veth in it, holding the rtnl lock, and the DEL
# waits for that (~15 ms here) in Docker and here alike; a DEL after the teardown takes
# ~9 ms.
# hook_pair ID TIMES-FILE: one such ADD and DEL, their time summed into TIMES-FILE
hook_pair() {
    unshare -n sleep 60 & local pid=$! t0 t1 t2 t3
    while [ "$(readlink /proc/$pid/ns/net)" = "$(readlink /proc/self/ns/net)" ]; do sleep 0.01; done
    t0=${EPOCHREALTIME/./}
    echo "{\"id\":\"$1\",\"status\":\"creating\",\"pid\":$pid}" | "$BIN" oci-hook add $HOOK_ARGS 2>/dev/null
    t1=${EPOCHREALTIME/./}
    kill $pid; wait $pid 2>/dev/null
    t2=${EPOCHREALTIME/./}
    echo "{\"id\":\"$1\",\"status\":\"stopped\",\"pid\":0}" | "$BIN" oci-hook del $HOOK_ARGS 2>/dev/null
    t3=${EPOCHREALTIME/./}
    echo $((t1 - t0 + t3 - t2)) >>"$2"
}
export -f hook_pair
export BIN HOOK_ARGS N WORK D DOCKER
say "oci-hook add+del: $N rounds"
nsenter --net="/run/netns/$HOSTNS" bash -c '
    : >"$WORK/hook"; : >"$WORK/noop"
    for i in $(seq "$N"); do
        hook_pair "bench$i" "$WORK/hook"
        # the loop'"'"'s own cost: the same two calls to a static no-op
        t0=${EPOCHREALTIME/./}
        echo "{\"id\":\"bench$i\",\"status\":\"creating\",\"pid\":1}" | /bin/busybox true
        echo "{\"id\":\"bench$i\",\"status\":\"stopped\",\"pid\":0}" | /bin/busybox true
        t1=${EPOCHREALTIME/./}; echo $((t1 - t0)) >>"$WORK/noop"
    done'

# The runtime's work traced: the same cnibox runs and hook pairs again under perf's process
# events (see benches/runtime-trace.py), for a figure that docker run's spread cannot blur.
export TRACE_N=${DOCKER_TRACE_N:-$N}
if command -v perf >/dev/null && perf record -q -e sched:sched_process_exec -o "$WORK/probe.data" true 2>/dev/null; then
    say "traced: $TRACE_N rounds of a cnibox docker run and a hook pair under perf"
    perf record -q -e sched:sched_process_fork,sched:sched_process_exec,sched:sched_process_exit -a \
        -o "$WORK/trace.data" -- nsenter --net="/run/netns/$HOSTNS" bash -c '
        for i in $(seq "$TRACE_N"); do
            DOCKER_CONFIG="$D/client" "$DOCKER" -H "unix://$D/docker.sock" run --rm --runtime cnibox --net none cnibox-bench:1 true
            hook_pair "trace$i" /dev/null
        done' >/dev/null 2>&1
    TRACED=$(python3 "$HERE/benches/runtime-trace.py" "$WORK/trace.data")
else
    TRACED=""
    say "traced figures skipped: perf is missing or cannot record sched events here"
fi

# medians, and minimums (less disturbed by a busy machine), for each figure
stats() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.1f %.1f", a[int((NR+1)/2)]/1000, a[1]/1000}'; }
figures=()
for f in plain cnibox args plain_host cnibox_host hook noop; do
    read -r med min <<<"$(stats "$WORK/$f")"
    figures+=(-v "$f=$med" -v "${f}_min=$min")
done
# What the runtime adds, from the pairs of one round (cnibox's run and the plain run just
# before it): `docker run` itself spreads ±50 ms, and the difference of two series' medians
# carries both spreads, while a pair shares the machine's state of the moment. The
# quartiles of the pairs' differences show how finely this run resolves the figure.
paste -d' ' "$WORK/cnibox" "$WORK/plain" | awk '{print $1 - $2}' | sort -n >"$WORK/pairs"
read -r pair_q1 pair_med pair_q3 <<<"$(awk '{a[NR]=$1} END {printf "%.1f %.1f %.1f", a[int((NR+3)/4)]/1000, a[int((NR+1)/2)]/1000, a[int((3*NR+3)/4)]/1000}' "$WORK/pairs")"
figures+=(-v "pair_q1=$pair_q1" -v "pair_med=$pair_med" -v "pair_q3=$pair_q3")
awk "${figures[@]}" -v n="$N" '
function row(label, med, min, note) { printf "  %-58s %8.1f %8.1f%s\n", label, med, min, note }
BEGIN {
    printf "\nDocker 20.10 (docker run --rm … true; ms, median and minimum of %d)\n", n
    printf "  %-58s %8s %8s\n", "", "median", "min"
    row("plain runc, --net none", plain, plain_min)
    row("cnibox oci-wrap + runc, --net none (bridge+ipMasq)", cnibox, cnibox_min)
    row("  added by the cnibox runtime (median of paired rounds)", pair_med, cnibox_min - plain_min,
        sprintf("   (quartiles %.1f .. %.1f)", pair_q1, pair_q3))
    row("oci-hook add + del alone (DEL after the netns ended)", hook, hook_min)
    row("  runtime overhead beyond the hook ADD+DEL", pair_med - hook, cnibox_min - plain_min - hook_min, "   (target: at most 5.0)")
    row("the hook row'\''s loop with a static no-op for the hook", noop, noop_min)
    row("the same through runtimeArgs (dockerd'\''s sh script)", args, args_min)
    row("  added by its shell (one for each of the 4 runtime calls)", args - cnibox, args_min - cnibox_min)
    row("plain runc, --net host", plain_host, plain_host_min)
    row("cnibox oci-wrap + runc, --net host (nothing to attach)", cnibox_host, cnibox_host_min)
    row("  the wrapper and two hook processes by themselves", cnibox_host - plain_host, cnibox_host_min - plain_host_min)
}'
if [ -n "$TRACED" ]; then
    echo "$TRACED" | awk '
    { ms[$1] = $2; if ($1 == "runs") n = $2 }
    function row(label, v, note) { printf "  %-58s %8.2f%s\n", label, v, note }
    END {
        printf "\nThe same runtime traced (perf process events, %d rounds; ms per docker run, medians)\n", n
        row("oci-wrap until it execs runc (all 4 runtime calls)", ms["wrapper"])
        row("runc forking the two hooks", ms["hook_spawn"])
        row("the hooks inside Docker", ms["hook_docker"])
        row("the same hooks run alone (ADD+DEL)", ms["hook_alone"])
        row("runtime overhead beyond the hook ADD+DEL", ms["wrapper"] + ms["hook_spawn"] + ms["hook_docker"] - ms["hook_alone"], "   (target: at most 5.0)")
    }'
fi
