#!/usr/bin/env bash
# make bench, Docker part: what `docker run --rm` costs with cnibox's runtime (oci-wrap
# around runc, the hooks doing ADD and DEL) against plain runc with `--net none`, beside the
# hook's own ADD+DEL for the same network. Medians of N runs, the two docker figures
# interleaved so drift hits both alike. The daemon is isolated as in tests/integration/docker.rs: its
# own network namespace (no route out), a private mount namespace with a tmpfs over /run,
# every path in a temp dir; it is ended by its PID.
#
# usage: sudo benches/docker.sh [path/to/cnibox]
# knobs (env): DOCKER_N runs per figure (9, or N when N is given), BENCH_DOCKER=0 skips it all
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
    [ -n "${SLEEPER:-}" ] && kill "$SLEEPER" 2>/dev/null
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
{"runtimes": {"cnibox": {"path": "$BIN",
  "runtimeArgs": ["oci-wrap", "--runtime", "$RUNC", $(printf '"%s", ' $HOOK_ARGS)"--"]}}}
EOF

D="$WORK/docker"
nsenter --net="/run/netns/$HOSTNS" unshare -m --propagation private sh -c '
    umount /sys/fs/cgroup/unified 2>/dev/null
    mount -t tmpfs -o mode=0755 cnibox-bench-run /run && mkdir -p /run/docker/plugins /run/containerd && exec "$@"' \
    sh "$DOCKERD" --data-root "$D/data" --exec-root "$D/exec" --pidfile "$D/dockerd.pid" \
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

# microseconds since the epoch, into VAR, without a fork (inside the measured window)
stamp() { printf -v "$1" %s "${EPOCHREALTIME/./}"; }

# warm both paths (image layers, runtime script, first plugin exec)
for _ in 1 2; do
    dk run --rm --net none cnibox-bench:1 true
    dk run --rm --runtime cnibox --net none cnibox-bench:1 true
done
: >"$WORK/plain"; : >"$WORK/cnibox"
say "docker run: $N rounds"
for _ in $(seq "$N"); do
    stamp t0; dk run --rm --net none cnibox-bench:1 true; stamp t1; echo $((t1 - t0)) >>"$WORK/plain"
    stamp t0; dk run --rm --runtime cnibox --net none cnibox-bench:1 true; stamp t1; echo $((t1 - t0)) >>"$WORK/cnibox"
done

# the hook's own ADD+DEL on the same network, for a process in a fresh namespace, each
# call exec'd from one shell in the daemon's namespace (as runc execs a hook)
nsenter --net="/run/netns/$HOSTNS" unshare -n sleep 600 &
SLEEPER=$!
sleep 0.2
export BIN HOOK_ARGS N WORK PID=$SLEEPER
say "oci-hook add+del: $N rounds"
nsenter --net="/run/netns/$HOSTNS" bash -c '
    : >"$WORK/hook"
    for i in $(seq "$N"); do
        t0=${EPOCHREALTIME/./}
        echo "{\"id\":\"bench$i\",\"status\":\"creating\",\"pid\":$PID}" | "$BIN" oci-hook add $HOOK_ARGS 2>/dev/null
        echo "{\"id\":\"bench$i\",\"status\":\"stopped\",\"pid\":0}" | "$BIN" oci-hook del $HOOK_ARGS 2>/dev/null
        t1=${EPOCHREALTIME/./}
        echo $((t1 - t0)) >>"$WORK/hook"
    done'

# medians, and minimums (less disturbed by a busy machine), for each figure
stats() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.1f %.1f", a[int((NR+1)/2)]/1000, a[1]/1000}'; }
read -r plain plain_min <<<"$(stats "$WORK/plain")"
read -r cnibox cnibox_min <<<"$(stats "$WORK/cnibox")"
read -r hook hook_min <<<"$(stats "$WORK/hook")"
awk -v p="$plain" -v c="$cnibox" -v h="$hook" -v pm="$plain_min" -v cm="$cnibox_min" -v hm="$hook_min" -v n="$N" 'BEGIN {
    printf "\nDocker 20.10 (docker run --rm … true; ms, median and minimum of %d)\n", n
    printf "  %-52s %8s %8s\n", "", "median", "min"
    printf "  %-52s %8.1f %8.1f\n", "plain runc, --net none", p, pm
    printf "  %-52s %8.1f %8.1f\n", "cnibox oci-wrap + runc, --net none (bridge+ipMasq)", c, cm
    printf "  %-52s %8.1f %8.1f\n", "  added by the cnibox runtime", c - p, cm - pm
    printf "  %-52s %8.1f %8.1f\n", "oci-hook add + del alone, same network", h, hm
    printf "  %-52s %8.1f %8.1f   (target: at most 5.0)\n", "  runtime overhead beyond the hook ADD+DEL", c - p - h, cm - pm - hm
}'
