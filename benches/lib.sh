# Helpers of make bench, sourced by bench-inner.sh inside the private host namespace.
#
# A *runner* is a command prefix that performs one attachment step and prints the
# microseconds it took: `$runner VERB CONTAINER-ID NETNS-NAME` (VERB is ADD or DEL).
# `compare` measures two or three runners round by round on fresh container namespaces,
# and the table helpers print the results. To add a row, see the "rows" blocks of
# bench-inner.sh: a row is one line naming its configuration and runner kind.

# stamp VAR : the time in µs into VAR, without a fork (a `$(...)` around the clock forks a
# subshell, ~0.7 ms on this VM, which a measured window must not contain)
stamp() { printf -v "$1" %s "${EPOCHREALTIME/./}"; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "n/a"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m}'; }
ms() { awk -v u="$1" 'BEGIN { if (u=="n/a" || u=="") print "n/a"; else printf "%.2f", u/1000 }'; }
secs() { awk -v u="$1" 'BEGIN { if (u=="n/a" || u=="") print "n/a"; else printf "%.2f", u/1e6 }'; }
# floor_attach HOST-VETH NETNS BRIDGE ADDRESS/PLEN GATEWAY : the kernel floor of a bridge
# attachment, the same veth, port, address and route as the plugin makes, by two ip -batch
floor_attach() {
    printf 'link add %s type veth peer name eth0 netns %s\nlink set %s master %s up\n' "$1" "$2" "$1" "$3" | ip -batch - \
        && printf 'addr add %s dev eth0\nlink set eth0 up\nroute add default via %s\n' "$4" "$5" | ip -n "$2" -batch -
}
# added_ms A B : A - B (µs) in ms, signed
added_ms() { awk -v a="$1" -v b="$2" 'BEGIN { if (a=="n/a"||b=="n/a"||a==""||b=="") print "n/a"; else printf "%+.2f", (a-b)/1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a=="n/a"||b=="n/a"||a==""||b==""||b==0) print "n/a"; else printf "%.3f\n", a/b }'; }
say() { echo "bench [$(( $(date +%s) - ${BENCH_START:-$(date +%s)} ))s]: $*" >&2; }
die() { echo "bench: $*" >&2; exit 1; }

# ---- tables: each is a file of markdown lines, printed in order at the end ----
TABLE_NO=0
# table TITLE COLUMN... : start a table of the current SECTION; the first column (the figure)
# is left-aligned and wide. Tables print in the order of BENCH_SECTIONS, whichever order the
# sections ran in, and within a section in the order they were started.
table() {
    local rank=0 s
    for s in $BENCH_SECTIONS; do rank=$((rank + 1)); [ "$s" = "${SECTION:-}" ] && break; done
    TABLE_NO=$((TABLE_NO + 1))
    TABLE="$WORK/tables/$(printf %02d-%03d "$rank" "$TABLE_NO")"
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
# make_containers COUNT -> CTRS: fresh container namespaces with lo up (one `ip -batch` and
# one lo-up.py for all of them: a process or two per namespace was seconds of wall time)
make_containers() {
    CTRS=(); local i
    for ((i = 0; i < $1; i++)); do seq_no=$((seq_no + 1)); CTRS+=("${HOSTNS}c${seq_no}"); done
    (( $1 > 0 )) || return 0
    printf 'netns add %s\n' "${CTRS[@]}" | ip -batch - || die "could not create container namespaces"
    python3 "$BENCH_DIR/lo-up.py" "${CTRS[@]}" || die "could not bring lo up in the container namespaces"
}
# Deleting a namespace leaves the kernel work (destroying its links) to a background worker
# that holds the rtnl lock; measuring while it runs would add its time to whichever call
# comes next. So namespaces are made before and deleted after each measured series, and
# drop_containers waits for that work: until the host ends of the veths whose other end was
# in a deleted namespace are gone (the links the kernel destroys with it; none when the
# series deleted its attachments), then SETTLE seconds more.
drop_containers() {
    local -A dropping=(); local c line waiting=()
    (( ${#CTRS[@]} )) || { settle; return; }
    for c in "${CTRS[@]}"; do dropping[$c]=1; done
    while read -r line; do  # "7: veth0a1b2c@if2: <...> ... link-netns NAME"
        [[ $line =~ ^[0-9]+:\ ([^@:]+)[@:].*\ link-netns\ ([^ ]+) ]] || continue
        [ -z "${dropping[${BASH_REMATCH[2]}]:-}" ] || waiting+=("${BASH_REMATCH[1]}")
    done < <(ip -o link show type veth 2> /dev/null)
    printf 'netns del %s\n' "${CTRS[@]}" | ip -batch - || die "could not delete container namespaces"
    settle "${waiting[@]}"
}
# settle [LINK...] : wait until those links of the host namespace are gone (sysfs is this
# namespace's: `ip netns exec` mounted it), then SETTLE seconds
settle() {
    local l k
    for l in "$@"; do for ((k = 0; k < 400; k++)); do [ -e "/sys/class/net/$l" ] || break; sleep 0.05; done; done
    sleep "${SETTLE:-0.3}"
}

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
# jq_once FILE NAME FILTER -> REPLY: `jq -r FILTER FILE`, computed once per configuration file
# and kept beside it as FILE.NAME (a jq process per call costs 5-30 ms of wall time)
jq_once() {
    [ -s "$1.$2" ] || jq -r "$3" "$1" > "$1.$2" || die "jq $3 $1 failed"
    read -r REPLY < "$1.$2"
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
# (its output goes to out.$RUN_SLOT, the worker's slot under xargs -P, else out.seq)
run_plugin() {
    local impl=$1 cf=$2 verb=$3 id=$4 ns=$5 plugin t0 t1 out="$WORK/out.${RUN_SLOT:-seq}"
    jq_once "$cf" type .type; plugin=$REPLY
    stamp t0
    CNI_COMMAND=$verb CNI_CONTAINERID=$id CNI_NETNS=/run/netns/$ns CNI_IFNAME=eth0 CNI_PATH="$WORK/$impl" \
        "$WORK/$impl/$plugin" < "$cf" > "$out" 2> "$out.err" \
        || die "$impl $plugin $verb failed: $(cat "$out" "$out.err")"
    stamp t1
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
    stamp t0
    NETCONFPATH="$dir" CNI_PATH="$WORK/cnibox" CNI_CACHE_DIR="$WORK/cache-cnitool" CNI_IFNAME=eth0 \
        CAP_ARGS="{\"portMappings\":[{\"hostPort\":$port,\"containerPort\":80,\"protocol\":\"tcp\",\"hostIP\":\"\"}]}" \
        "$WORK/cnibox/cnitool" "${verb,,}" "$net" "/run/netns/$ns" --container-id "$id" \
        > "$WORK/out.seq" 2> "$WORK/out.seq.err" \
        || die "cnitool $verb failed: $(cat "$WORK/out.seq" "$WORK/out.seq.err")"
    stamp t1
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
    make_containers $(( k * (N + 1) ))
    for ((j = 0; j < k; j++)); do ${runners[j]} ADD "w$j" "${CTRS[k*N+j]}" > /dev/null; done
    for verb in ADD DEL; do
        for ((j = 0; j < k; j++)); do : > "$WORK/s$j"; done
        : > "$WORK/rounds.$key.$verb"  # one line per round: the runners' µs (kept with KEEP=1)
        for ((i = 0; i < N; i++)); do
            local times=()
            for ((r = 0; r < k; r++)); do
                j=$(( (r + i) % k ))
                t=$(${runners[j]} "$verb" "r$i-$j" "${CTRS[k*i+j]}") || exit 1
                times[j]=$t; echo "$t" >> "$WORK/s$j"
            done
            echo "${times[*]}" >> "$WORK/rounds.$key.$verb"
        done
        for ((j = 0; j < k; j++)); do
            MED[$key,$j,$verb]=$(median < "$WORK/s$j")
            RAT[$key,$j,$verb]=$(awk -v j=$((j + 1)) '$j > 0 {printf "%.3f\n", $1/$j}' "$WORK/rounds.$key.$verb" | median)
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
        local n=2 gw; [ -s "$WORK/nv-next" ] && read -r n < "$WORK/nv-next"; echo $((n + 1)) > "$WORK/nv-next"
        jq_once "$tpl" gw '.network_info[].subnets[0].gateway'; gw=$REPLY
        sed -e "s/@CID@/$(sha256sum <<< "$id" | cut -c1-64)/" -e "s/@IP@/${gw%.*.*}.$((n >> 8)).$((n & 255))/" "$tpl" > "$f"
    else
        cmd=teardown
    fi
    stamp t0
    "$NETAVARK" --config "$WORK/netavark" "$cmd" "/run/netns/$ns" < "$f" > "$WORK/out.json" 2> "$WORK/err.txt" \
        || die "netavark $cmd failed: $(cat "$WORK/err.txt")"
    stamp t1
    echo $(( t1 - t0 ))
}
