# Helpers of make bench, sourced by bench-inner.sh inside the private host namespace.
#
# A *runner* is a command prefix that performs one attachment step and prints the
# microseconds it took: `$runner VERB CONTAINER-ID NETNS-NAME` (VERB is ADD or DEL).
# `compare` measures two or three runners round by round on fresh container namespaces,
# and the table helpers print the results. To add a row, see the "rows" blocks of
# bench-inner.sh: a row is one line naming its configuration and runner kind.

now_us() { local t=$EPOCHREALTIME; echo $(( 10#${t/./} )); }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "n/a"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m}'; }
ms() { awk -v u="$1" 'BEGIN { if (u=="n/a" || u=="") print "n/a"; else printf "%.2f", u/1000 }'; }
secs() { awk -v u="$1" 'BEGIN { if (u=="n/a" || u=="") print "n/a"; else printf "%.2f", u/1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a=="n/a"||b=="n/a"||a==""||b==""||b==0) print "n/a"; else printf "%.3f\n", a/b }'; }
say() { echo "bench [$(( $(date +%s) - ${BENCH_START:-$(date +%s)} ))s]: $*" >&2; }
die() { echo "bench: $*" >&2; exit 1; }

# ---- tables: each is a file of markdown lines, printed in order at the end ----
TABLE_NO=0
# table TITLE COLUMN... : start a table; the first column (the figure) is left-aligned and wide
table() {
    TABLE_NO=$((TABLE_NO + 1))
    TABLE="$WORK/tables/$(printf %02d $TABLE_NO)"
    mkdir -p "$WORK/tables"
    { echo "### $1"; echo; shift
      local h="| $(printf '%-52s' figure) |" s="|$(printf -- '-%.0s' {1..54})|"
      local c; for c in "$@"; do h+=" $(printf '%12s' "$c") |"; s+="$(printf -- '-%.0s' {1..14})|"; done
      echo "$h"; echo "$s"; } > "$TABLE"
}
# trow FIRST CELL... : a row of the current table
trow() {
    local r="| $(printf '%-52s' "$1") |"; shift
    local c; for c in "$@"; do r+=" $(printf '%12s' "$c") |"; done
    echo "$r" >> "$TABLE"
}
# tnote TEXT : a line under the current table
tnote() { printf '\n%s\n' "$*" >> "$TABLE"; }
print_tables() { local t; for t in "$WORK"/tables/*; do cat "$t"; echo; done; }

# ---- container namespaces ----
seq_no=0
# make_containers COUNT -> CTRS: fresh container namespaces with lo up
make_containers() {
    CTRS=(); local i c
    for ((i = 0; i < $1; i++)); do
        seq_no=$((seq_no + 1)); c="${HOSTNS}c${seq_no}"
        ip netns add "$c"; ip -n "$c" link set lo up; CTRS+=("$c")
    done
}
# Deleting a namespace leaves the kernel work (destroying its links) to a background worker
# that holds the rtnl lock; measuring while it runs would add its time to whichever call
# comes next. So namespaces are made before and deleted after each measured series, with a
# pause for that background work.
settle() { sleep "${SETTLE:-1}"; }
drop_containers() { local c; for c in "${CTRS[@]}"; do ip netns del "$c"; done; settle; }

# ---- configurations: templates with @NET@ @BR@ @SUBNET@ @GW@ @DATA@, one instance per implementation ----
NET_NO=0
# instantiate TEMPLATE -> prints the template for a new network (own name, bridge, /16, data dir)
instantiate() {
    NET_NO=$((NET_NO + 1))
    local oct=$((NET_NO % 200 + 20))
    local t=${1//@NET@/bench$NET_NO}
    t=${t//@BR@/cbb$NET_NO}; t=${t//@SUBNET@/10.$oct.0.0/16}; t=${t//@GW@/10.$oct.0.1}
    echo "${t//@DATA@/$WORK/data}"
}
# plugin types a configuration (or conflist) uses, in order, without repeats
plugin_types() { jq -r '[.. | objects | .type? // empty] | unique[]' "$1"; }
# whose CONF [EXTRA-TYPE...] : which implementation the "cnibox" side runs for each plugin
# (cnibox's applet where it has one, the reference plugin otherwise)
whose() {
    local cf=$1 t ours=() refs=(); shift
    for t in "$@" $(plugin_types "$cf"); do
        if [ "$(readlink -f "$WORK/cnibox/$t")" = "$BIN" ]; then ours+=("$t"); else refs+=("$t"); fi
    done
    local IFS=,
    if [ ${#refs[@]} -eq 0 ]; then echo "all cnibox"; else echo "cnibox: ${ours[*]:-none}; reference: ${refs[*]}"; fi
}

# ---- runners ----
# direct exec of one plugin, as a runtime execs it: run_plugin IMPL CONF VERB ID NETNS
run_plugin() {
    local impl=$1 cf=$2 verb=$3 id=$4 ns=$5 plugin t0 t1
    plugin=$(jq -r .type "$cf")
    t0=$(now_us)
    CNI_COMMAND=$verb CNI_CONTAINERID=$id CNI_NETNS=/run/netns/$ns CNI_IFNAME=eth0 CNI_PATH="$WORK/$impl" \
        "$WORK/$impl/$plugin" < "$cf" > "$WORK/out.$BASHPID" 2> "$WORK/err.$BASHPID" \
        || die "$impl $plugin $verb failed: $(cat "$WORK/out.$BASHPID" "$WORK/err.$BASHPID")"
    t1=$(now_us)
    rm -f "$WORK/out.$BASHPID" "$WORK/err.$BASHPID"
    echo $(( t1 - t0 ))
}
# podman 4 (CNI backend): libcni execs every plugin of the conflist; the tool reports the
# time of the libcni call alone. run_libcni IMPL CONFDIR NETWORK VERB ID NETNS
run_libcni() {
    local impl=$1 dir=$2 net=$3 verb=$4 id=$5 ns=$6
    TIMING_FILE="$WORK/timing" CNI_IFNAME=eth0 CAP_ARGS="${LIBCNI_CAP_ARGS:-}" "$WORK/libcni_tool" "${verb,,}" "$dir" "$net" \
        "/run/netns/$ns" "$id" "$WORK/cache-$impl" "$WORK/$impl" > "$WORK/out.json" 2> "$WORK/err.txt" \
        || die "libcni $impl $verb failed: $(cat "$WORK/err.txt")"
    cat "$WORK/timing"
}
# cnibox's own runtime: one `cnitool` process runs the whole chain, cnibox's applets
# in-process; the same published port as run_podman. run_cnitool CONFDIR NETWORK VERB ID NETNS
run_cnitool() {
    local dir=$1 net=$2 verb=$3 id=$4 ns=$5 port t0 t1
    port=$(( 10000 + $(cksum <<< "cnitool$id" | cut -d' ' -f1) % 50000 ))
    t0=$(now_us)
    NETCONFPATH="$dir" CNI_PATH="$WORK/cnibox" CNI_CACHE_DIR="$WORK/cache-cnitool" CNI_IFNAME=eth0 \
        CAP_ARGS="{\"portMappings\":[{\"hostPort\":$port,\"containerPort\":80,\"protocol\":\"tcp\",\"hostIP\":\"\"}]}" \
        "$WORK/cnibox/cnitool" "${verb,,}" "$net" "/run/netns/$ns" --container-id "$id" \
        > "$WORK/out.$BASHPID" 2> "$WORK/err.$BASHPID" \
        || die "cnitool $verb failed: $(cat "$WORK/out.$BASHPID" "$WORK/err.$BASHPID")"
    t1=$(now_us)
    rm -f "$WORK/out.$BASHPID" "$WORK/err.$BASHPID"
    echo $(( t1 - t0 ))
}
# containerd 1.6 CRI: go-cni attaches its loopback network and the first conflist of
# CONFDIR. run_gocni IMPL CONFDIR VERB ID NETNS
run_gocni() {
    local impl=$1 dir=$2 verb=$3 id=$4 ns=$5 cmd=setup
    [ "$verb" = DEL ] && cmd=remove
    TIMING_FILE="$WORK/timing" "$WORK/gocni_tool" "$cmd" "$dir" "/run/netns/$ns" "$id" "$WORK/cache-gocni-$impl" "$WORK/$impl" \
        > "$WORK/out.json" 2> "$WORK/err.txt" || die "go-cni $impl $verb failed: $(cat "$WORK/err.txt")"
    cat "$WORK/timing"
}

# ---- measuring ----
# compare KEY RUNNER... : N rounds of ADD (a fresh container namespace per runner and round)
# then N rounds of DEL of the same attachments; the runners' order rotates every round so
# none always runs on a warmer cache. One warm-up attachment per runner is not counted.
# Sets MED[KEY,i,VERB] (median µs of runner i) and RAT[KEY,i,VERB] (median of the per-round
# ratios runner 0 / runner i), i from 0.
declare -A MED RAT
compare() {
    local key=$1; shift
    local runners=("$@") k=$# i j r verb t
    make_containers $(( k * (N + 1) )); settle
    for ((j = 0; j < k; j++)); do ${runners[j]} ADD "w$j" "${CTRS[k*N+j]}" > /dev/null; done
    for verb in ADD DEL; do
        for ((j = 0; j < k; j++)); do : > "$WORK/s$j"; done
        : > "$WORK/rounds"
        for ((i = 0; i < N; i++)); do
            local times=()
            for ((r = 0; r < k; r++)); do
                j=$(( (r + i) % k ))
                t=$(${runners[j]} "$verb" "r$i-$j" "${CTRS[k*i+j]}") || exit 1
                times[j]=$t; echo "$t" >> "$WORK/s$j"
            done
            echo "${times[*]}" >> "$WORK/rounds"
        done
        for ((j = 0; j < k; j++)); do
            MED[$key,$j,$verb]=$(median < "$WORK/s$j")
            RAT[$key,$j,$verb]=$(awk -v j=$((j + 1)) '$j > 0 {printf "%.3f\n", $1/$j}' "$WORK/rounds" | median)
        done
    done
    for ((j = 0; j < k; j++)); do ${runners[j]} DEL "w$j" "${CTRS[k*N+j]}" > /dev/null; done
    drop_containers
}
# podman 4 with its CNI backend and one published port (`-p PORT:80`, the port derived from
# the attachment so ADD and DEL agree): run_podman IMPL CONFDIR NETWORK VERB ID NETNS
run_podman() {
    local port=$(( 10000 + $(cksum <<< "$1$5" | cut -d' ' -f1) % 50000 ))
    LIBCNI_CAP_ARGS="{\"portMappings\":[{\"hostPort\":$port,\"containerPort\":80,\"protocol\":\"tcp\",\"hostIP\":\"\"}]}" \
        run_libcni "$@"
}
# podman 4 with netavark (its default backend): podman allocates the address itself and
# passes it in static_ips; netavark is exec'd once per container, as podman does.
# run_netavark NETWORK-TEMPLATE-FILE VERB ID NETNS (the file has @CID@ and @IP@)
run_netavark() {
    local tpl=$1 verb=$2 id=$3 ns=$4 f="$WORK/nv-$3.json" cmd=setup t0 t1
    if [ "$verb" = ADD ]; then
        local n gw; n=$(cat "$WORK/nv-next" 2>/dev/null || echo 2); echo $((n + 1)) > "$WORK/nv-next"
        gw=$(jq -r '.network_info[].subnets[0].gateway' "$tpl")
        sed -e "s/@CID@/$(sha256sum <<< "$id" | cut -c1-64)/" -e "s/@IP@/${gw%.*.*}.$((n >> 8)).$((n & 255))/" "$tpl" > "$f"
    else
        cmd=teardown
    fi
    t0=$(now_us)
    "$NETAVARK" --config "$WORK/netavark" "$cmd" "/run/netns/$ns" < "$f" > "$WORK/out.json" 2> "$WORK/err.txt" \
        || die "netavark $cmd failed: $(cat "$WORK/err.txt")"
    t1=$(now_us)
    echo $(( t1 - t0 ))
}
