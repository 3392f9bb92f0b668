#!/usr/bin/env bash
# The body of make bench: runs inside the private host namespace (see bench.sh).
set -euo pipefail
cd "$WORK"
ip link set lo up

now_us() { local t=$EPOCHREALTIME; echo $(( ${t/./} )); }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "n/a"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m}'; }
ms() { awk -v u="$1" 'BEGIN { if (u=="n/a") print "n/a"; else printf "%.2f", u/1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b==0||a=="n/a"||b=="n/a") print "n/a"; else printf "%.3f\n", a/b }'; }
ROWS=()
row() { ROWS+=("$(printf '| %-44s | %12s | %12s | %12s | %10s |' "$@")"); }

seq_no=0
# new_container: a fresh container namespace, named in $CTR (no subshell, so the counter sticks)
new_container() { seq_no=$((seq_no+1)); CTR="${HOSTNS}c${seq_no}"; ip netns add "$CTR"; ip -n "$CTR" link set lo up; }

# conf NAME TYPE SUBNET DATADIR [extra plugin keys]
conf() {
    cat <<J
{"cniVersion":"1.0.0","name":"$1","type":"$2"$5,
 "ipam":{"type":"host-local","ranges":[[{"subnet":"$3"}]],"dataDir":"$4"}}
J
}

# invoke IMPL VERB CONF CONTAINER-ID NETNS  -> prints elapsed microseconds
invoke() {
    local impl=$1 verb=$2 cf=$3 id=$4 ns=$5 plugin t0 t1
    plugin=$(jq -r .type "$cf")
    t0=$(now_us)
    CNI_COMMAND=$verb CNI_CONTAINERID=$id CNI_NETNS=/run/netns/$ns CNI_IFNAME=eth0 CNI_PATH="$WORK/$impl" \
        "$WORK/$impl/$plugin" < "$cf" > "$WORK/out.json" 2> "$WORK/err.txt" \
        || { echo "bench: $impl $plugin $verb failed: $(cat "$WORK/out.json" "$WORK/err.txt")" >&2; exit 1; }
    t1=$(now_us)
    echo $(( t1 - t0 ))
}

ip link add mvmaster type veth peer name mvpeer
ip link set mvmaster up; ip link set mvpeer up

# Deleting a namespace leaves the kernel work (destroying its links) to a background
# worker that holds the rtnl lock: measuring while it runs would add its time to whichever
# call comes next. So namespaces are made before and deleted after each measured series,
# with a pause for that background work.
settle() { sleep 1; }
make_containers() {  # COUNT -> CTRS array
    CTRS=(); local i; for i in $(seq "$1"); do new_container; CTRS+=("$CTR"); done
}
drop_containers() { local c; for c in "${CTRS[@]}"; do ip netns del "$c"; done; settle; }

# ---- per-container ADD/DEL latency, cnibox vs reference, pair by pair ----
latency() {  # NAME PLUGIN EXTRA
    local name=$1 plugin=$2 extra=$3 i a b
    local cfa="$WORK/$plugin-cnibox.json" cfb="$WORK/$plugin-reference.json"
    conf "bench-$plugin-a" "$plugin" "10.$((100+${#ROWS[@]})).0.0/16" "$WORK/data" "${extra//BR/cbba}" > "$cfa"
    conf "bench-$plugin-b" "$plugin" "10.$((150+${#ROWS[@]})).0.0/16" "$WORK/data" "${extra//BR/cbbb}" > "$cfb"
    : > add_a; : > add_b; : > del_a; : > del_b; : > add_r; : > del_r
    # container i of cnibox is CTRS[2i], of the reference CTRS[2i+1]; the last pair warms up
    # (creates the bridge and the store dir, fills the page cache) and is not counted
    make_containers $(( 2 * N + 2 )); settle
    invoke cnibox ADD "$cfa" warm "${CTRS[2*N]}" >/dev/null; invoke reference ADD "$cfb" warm "${CTRS[2*N+1]}" >/dev/null
    for verb in ADD DEL; do
        for i in $(seq 0 $((N - 1))); do
            # alternate who goes first, so neither always runs on a warmer cache
            if (( i % 2 )); then a=$(invoke cnibox $verb "$cfa" "a$i" "${CTRS[2*i]}"); b=$(invoke reference $verb "$cfb" "b$i" "${CTRS[2*i+1]}")
            else b=$(invoke reference $verb "$cfb" "b$i" "${CTRS[2*i+1]}"); a=$(invoke cnibox $verb "$cfa" "a$i" "${CTRS[2*i]}"); fi
            local lv=${verb,,}
            echo "$a" >> "${lv}_a"; echo "$b" >> "${lv}_b"; ratio "$a" "$b" >> "${lv}_r"
        done
    done
    invoke cnibox DEL "$cfa" warm "${CTRS[2*N]}" >/dev/null; invoke reference DEL "$cfb" warm "${CTRS[2*N+1]}" >/dev/null
    drop_containers
    row "$name ADD (ms)" "$(ms "$(median < add_a)")" "$(ms "$(median < add_b)")" "$FLOOR_ADD" "$(median < add_r)"
    row "$name DEL (ms)" "$(ms "$(median < del_a)")" "$(ms "$(median < del_b)")" "$FLOOR_DEL" "$(median < del_r)"
}

# ---- the kernel floor: one ip -batch per namespace ----
floor() {  # KIND
    local kind=$1 i c t0 t1; : > fadd; : > fdel
    ip link add cbfloor type bridge 2>/dev/null || true; ip link set cbfloor up
    make_containers "$N"; settle
    for i in $(seq "$N"); do
        c=${CTRS[i-1]}
        t0=$(now_us)
        case $kind in
        bridge)
            printf 'link add fl%s type veth peer name eth0 netns %s\nlink set fl%s master cbfloor up\n' "$i" "$c" "$i" | ip -batch -
            printf 'addr add 10.77.0.%s/24 dev eth0\nlink set eth0 up\nroute add default via 10.77.0.1\n' "$((i+1))" | ip -n "$c" -batch - ;;
        veth)
            printf 'link add fl%s type veth peer name eth0 netns %s\nlink set fl%s up\naddr add 10.78.0.1/32 dev fl%s\nroute add 10.78.0.%s/32 dev fl%s scope host\n' "$i" "$c" "$i" "$i" "$((i+1))" "$i" | ip -batch -
            printf 'addr add 10.78.0.%s/24 dev eth0\nlink set eth0 up\nroute add default via 10.78.0.1\n' "$((i+1))" | ip -n "$c" -batch - ;;
        macvlan)
            printf 'link add link mvmaster name fl%s netns %s type macvlan mode bridge\n' "$i" "$c" | ip -batch -
            printf 'link set fl%s name eth0\naddr add 10.79.0.%s/24 dev eth0\nlink set eth0 up\nroute add default via 10.79.0.1\n' "$i" "$((i+1))" | ip -n "$c" -batch - ;;
        esac
        t1=$(now_us); echo $((t1-t0)) >> fadd
    done
    for i in $(seq "$N"); do
        c=${CTRS[i-1]}
        t0=$(now_us)
        case $kind in
        macvlan) ip -n "$c" link del eth0 ;;
        *) ip link del "fl$i" ;;
        esac
        t1=$(now_us); echo $((t1-t0)) >> fdel
    done
    drop_containers
    FLOOR_ADD=$(ms "$(median < fadd)"); FLOOR_DEL=$(ms "$(median < fdel)")
}

floor bridge;  latency "bridge+host-local" bridge ',"bridge":"BR","isGateway":true'
floor veth;    latency "veth+host-local" veth ''
floor macvlan; latency "macvlan+host-local" macvlan ',"master":"mvmaster"'
FLOOR_ADD=-; FLOOR_DEL=-

source "${BASH_SOURCE%/*}/ipmasq.sh"
masq_latency "bridge+host-local" bridge ',"bridge":"BR","isGateway":true'
masq_latency "veth+host-local" veth ''

# ---- throughput: THROUGHPUT containers from WORKERS parallel workers ----
throughput() {  # IMPL SUBNET
    local impl=$1 cf="$WORK/tp-$1.json" i t0 t1 add del
    conf "tp-$impl" bridge "$2" "$WORK/data" ",\"bridge\":\"cbtp${impl:0:1}\",\"isGateway\":true" > "$cf"
    for i in $(seq "$THROUGHPUT"); do ip netns add "${HOSTNS}t$impl$i"; done
    settle
    one() { CNI_COMMAND=$2 CNI_CONTAINERID="tp$3" CNI_NETNS="/run/netns/${HOSTNS}t$1$3" CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" \
            "$WORK/$1/bridge" < "$WORK/tp-$1.json" > /dev/null || { echo "bench: throughput $1 $2 $3 failed" >&2; exit 1; }; }
    export -f one
    t0=$(now_us); seq "$THROUGHPUT" | xargs -P "$WORKERS" -I{} bash -c "one $impl ADD {}"; t1=$(now_us); add=$((t1-t0))
    t0=$(now_us); seq "$THROUGHPUT" | xargs -P "$WORKERS" -I{} bash -c "one $impl DEL {}"; t1=$(now_us); del=$((t1-t0))
    for i in $(seq "$THROUGHPUT"); do ip netns del "${HOSTNS}t$impl$i"; done
    settle
    echo "$add $del"
}
read -r tpa_add tpa_del < <(throughput cnibox 10.200.0.0/16)
read -r tpb_add tpb_del < <(throughput reference 10.201.0.0/16)
row "$THROUGHPUT bridge ADDs, $WORKERS workers (s)" "$(awk -v u="$tpa_add" 'BEGIN{printf "%.2f", u/1e6}')" "$(awk -v u="$tpb_add" 'BEGIN{printf "%.2f", u/1e6}')" - "$(ratio "$tpa_add" "$tpb_add")"
row "$THROUGHPUT bridge DELs, $WORKERS workers (s)" "$(awk -v u="$tpa_del" 'BEGIN{printf "%.2f", u/1e6}')" "$(awk -v u="$tpb_del" 'BEGIN{printf "%.2f", u/1e6}')" - "$(ratio "$tpa_del" "$tpb_del")"

# ---- host-local alone, empty store and STORE_SIZE reservations ----
ipam_conf() { printf '{"cniVersion":"1.0.0","name":"%s","ipam":{"type":"host-local","ranges":[[{"subnet":"10.%s.0.0/16"}]],"dataDir":"%s"}}' "$1" "$2" "$3"; }
fill_store() {  # DIR COUNT: reference-format reservations 10.x.0.2 upwards
    local dir=$1 n=$2 i=0 a b
    mkdir -p "$dir"
    for ((a=0; a<256 && i<n; a++)); do for ((b=0; b<256 && i<n; b++)); do
        ((a==0 && b<2)) && continue
        printf 'fill%s\r\neth0' "$i" > "$dir/10.$3.$a.$b"; i=$((i+1))
    done; done
    printf '10.%s.%s.%s' "$3" "$((a-1))" "$((b-1))" > "$dir/last_reserved_ip.0"
}
hostlocal() {  # LABEL SIZE
    local label=$1 size=$2 impl i a_add b_add a_del b_del
    : > add_a; : > add_b; : > del_a; : > del_b; : > add_r; : > del_r
    for impl in cnibox reference; do
        local oct=40
        [ "$impl" = cnibox ] && oct=30
        ipam_conf "hl-$size" "$oct" "$WORK/hl-$impl" > "$WORK/hl-$impl-$size.json"
        rm -rf "$WORK/hl-$impl/hl-$size"
        [ "$size" -gt 0 ] && fill_store "$WORK/hl-$impl/hl-$size" "$size" "$oct"
    done
    local c; new_container; c=$CTR
    for i in $(seq "$N"); do
        a_add=$(invoke_ipam cnibox ADD "$WORK/hl-cnibox-$size.json" "h$i" "$c")
        b_add=$(invoke_ipam reference ADD "$WORK/hl-reference-$size.json" "h$i" "$c")
        a_del=$(invoke_ipam cnibox DEL "$WORK/hl-cnibox-$size.json" "h$i" "$c")
        b_del=$(invoke_ipam reference DEL "$WORK/hl-reference-$size.json" "h$i" "$c")
        echo "$a_add" >> add_a; echo "$b_add" >> add_b; echo "$a_del" >> del_a; echo "$b_del" >> del_b
        ratio "$a_add" "$b_add" >> add_r; ratio "$a_del" "$b_del" >> del_r
    done
    ip netns del "$c"
    HL_ADD_A=$(median < add_a); HL_DEL_A=$(median < del_a)
    row "host-local ADD, $label (ms)" "$(ms "$HL_ADD_A")" "$(ms "$(median < add_b)")" - "$(median < add_r)"
    row "host-local DEL, $label (ms)" "$(ms "$HL_DEL_A")" "$(ms "$(median < del_b)")" - "$(median < del_r)"
}
invoke_ipam() {
    local impl=$1 verb=$2 cf=$3 id=$4 ns=$5 t0 t1
    t0=$(now_us)
    CNI_COMMAND=$verb CNI_CONTAINERID=$id CNI_NETNS=/run/netns/$ns CNI_IFNAME=eth0 CNI_PATH="$WORK/$impl" \
        "$WORK/$impl/host-local" < "$cf" > "$WORK/out.json" 2>&1 || { echo "bench: host-local $impl $verb failed: $(cat "$WORK/out.json")" >&2; exit 1; }
    t1=$(now_us); echo $((t1-t0))
}
hostlocal "empty store" 0; E_ADD=$HL_ADD_A; E_DEL=$HL_DEL_A
hostlocal "$STORE_SIZE reservations" "$STORE_SIZE"; F_ADD=$HL_ADD_A; F_DEL=$HL_DEL_A
row "host-local ADD full/empty, cnibox" "$(ratio "$F_ADD" "$E_ADD")" - - -
row "host-local DEL full/empty, cnibox" "$(ratio "$F_DEL" "$E_DEL")" - - -

# ---- memory, size, syscalls ----
rss() {  # IMPL -> KiB
    local c cf="$WORK/bridge-$1.json" plugin=bridge; new_container; c=$CTR
    CNI_COMMAND=ADD CNI_CONTAINERID=rss CNI_NETNS=/run/netns/$c CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" \
        /usr/bin/time -f %M -o "$WORK/rss" "$WORK/$1/$plugin" < "$cf" > /dev/null
    CNI_COMMAND=DEL CNI_CONTAINERID=rss CNI_NETNS=/run/netns/$c CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" "$WORK/$1/$plugin" < "$cf" > /dev/null
    ip netns del "$c"; tail -1 "$WORK/rss"
}
ra=$(rss cnibox); rb=$(rss reference)
row "peak RSS, one bridge ADD (KiB)" "$ra" "$rb" - "$(ratio "$ra" "$rb")"
sa=$(stat -L -c %s "$BIN"); sb=0
for p in bridge ptp macvlan host-local; do sb=$((sb + $(stat -L -c %s "$REF/$p"))); done
row "binary size (KiB; reference = 4 binaries)" "$((sa/1024))" "$((sb/1024))" - "$(ratio "$sa" "$sb")"

syscalls() {  # IMPL -> "total netlink-sends"
    local c cf="$WORK/bridge-$1.json"; new_container; c=$CTR
    CNI_COMMAND=ADD CNI_CONTAINERID=st CNI_NETNS=/run/netns/$c CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" \
        strace -f -qq -o "$WORK/strace-$1" "$WORK/$1/bridge" < "$cf" > /dev/null
    CNI_COMMAND=DEL CNI_CONTAINERID=st CNI_NETNS=/run/netns/$c CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" "$WORK/$1/bridge" < "$cf" > /dev/null
    ip netns del "$c"
    local total sends procs
    total=$(grep -cv -e '+++ exited' -e '--- SIG' "$WORK/strace-$1")
    sends=$(grep -cE '(sendto|sendmsg)\(' "$WORK/strace-$1" || true)
    procs=$(cut -d' ' -f1 "$WORK/strace-$1" | sort -u | wc -l)
    echo "$total $sends $procs"
}
read -r ta na pa < <(syscalls cnibox); read -r tb nb pb < <(syscalls reference)
row "syscalls, one bridge ADD (all processes)" "$ta" "$tb" - "$(ratio "$ta" "$tb")"
row "netlink requests (sendto/sendmsg)" "$na" "$nb" - "$(ratio "$na" "$nb")"
row "processes/threads traced" "$pa" "$pb" - -

echo
echo "cnibox bench: N=$N runs per figure (median), $(nproc) cores, kernel $(uname -r), $(date -u +%Y-%m-%d)"
printf '| %-44s | %12s | %12s | %12s | %10s |\n' "figure" "cnibox" "reference" "kernel floor" "ratio"
printf '|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..14})" "$(printf -- '-%.0s' {1..14})" "$(printf -- '-%.0s' {1..14})" "$(printf -- '-%.0s' {1..12})"
printf '%s\n' "${ROWS[@]}"
echo
echo "ratio = median of per-pair cnibox/reference ratios (sizes and counts: plain ratio)."
