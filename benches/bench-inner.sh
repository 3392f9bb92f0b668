#!/usr/bin/env bash
# The body of make bench: runs inside the private host namespace (see bench.sh). Each
# section fills one table; the tables are printed together at the end.
set -euo pipefail
cd "$WORK"
ip link set lo up
# shellcheck source=benches/lib.sh
source "$BENCH_DIR/lib.sh"

# ---- configurations people run (templates: see `instantiate` in lib.sh) ----
IPAM='"ipam":{"type":"host-local","ranges":[[{"subnet":"@SUBNET@"}]],"dataDir":"@DATA@"}'
BRIDGE='{"cniVersion":"1.0.0","name":"@NET@","type":"bridge","bridge":"@BR@","isGateway":true,'$IPAM'}'
BRIDGE_MASQ='{"cniVersion":"1.0.0","name":"@NET@","type":"bridge","bridge":"@BR@","isGateway":true,"ipMasq":true,'$IPAM'}'
# what `podman network create` writes for its CNI backend (podman 4.3)
PODMAN_CHAIN='{"cniVersion":"0.4.0","name":"@NET@","plugins":[
 {"type":"bridge","bridge":"@BR@","isGateway":true,"ipMasq":true,"hairpinMode":true,
  "ipam":{"type":"host-local","routes":[{"dst":"0.0.0.0/0"}],"ranges":[[{"subnet":"@SUBNET@","gateway":"@GW@"}]],"dataDir":"@DATA@"}},
 {"type":"portmap","capabilities":{"portMappings":true}},
 {"type":"firewall","backend":"","dataDir":"@DATA@/firewall"},
 {"type":"tuning"}]}'
# containerd's example CRI conflist (IPv4 only); go-cni adds the loopback network itself
CONTAINERD_CHAIN='{"cniVersion":"1.0.0","name":"@NET@","plugins":[
 {"type":"bridge","bridge":"@BR@","isGateway":true,"ipMasq":true,"promiscMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"@SUBNET@"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":"@DATA@"}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}'
# the network podman 4.3 passes to netavark for its default bridge network `podman`
NETAVARK_NET='{"container_id":"@CID@","container_name":"bench","networks":{"@NET@":{"interface_name":"eth0","static_ips":["@IP@"]}},
 "network_info":{"@NET@":{"dns_enabled":false,"driver":"bridge","id":"53ce4390f2adb1681eb1a90ec8b48c49c015e0a8d336c197637e7f65e365fa9e",
  "internal":false,"ipv6_enabled":false,"name":"@NET@","network_interface":"@BR@","subnets":[{"gateway":"@GW@","subnet":"@SUBNET@"}]}}}'

ROW_NO=0
BENCH_SECTIONS="headline peers growth plugins ipmasq static-sbr dhcp breakdown host-local resources"
# SECTIONS="headline growth" runs only those sections (all by default)
want() { [ -z "${SECTIONS:-}" ] || [[ " $SECTIONS " == *" $1 "* ]]; }
# section NAME : whether NAME runs; its tables are NAME's
section() { SECTION=$1; want "$1"; }
# shellcheck source=benches/host-local-rows.sh
source "$BENCH_DIR/host-local-rows.sh"
headline_row() {  # KEY LABEL WHOSE
    trow "$2" "$(ms "${MED[$1,0,ADD]}")" "$(ms "${MED[$1,1,ADD]}")" "${RAT[$1,1,ADD]}" \
        "$(ms "${MED[$1,0,DEL]}")" "$(ms "${MED[$1,1,DEL]}")" "${RAT[$1,1,DEL]}" "$3"
}
# headline_plugin LABEL TEMPLATE : one plugin configuration, exec'd directly
headline_plugin() {
    local label=$1 key="h$((++ROW_NO))"
    local a="$WORK/$key-cnibox.json" b="$WORK/$key-reference.json"
    instantiate "$2" > "$a"; instantiate "$2" > "$b"
    say "$label"
    compare "$key" "run_plugin cnibox $a" "run_plugin reference $b"
    headline_row "$key" "$label" "$(whose "$a")"
}
# headline_list RUNTIME LABEL TEMPLATE : a conflist run the way RUNTIME runs it
# (podman: libcni with one published port; libcni: libcni, no capabilities; containerd: go-cni)
headline_list() {
    local rt=$1 label=$2 key="h$((++ROW_NO))" impl d net runners=() extra=() tool=libcni_tool
    [ "$rt" = containerd ] && { tool=gocni_tool; extra=(loopback); }
    if [ ! -x "$WORK/$tool" ]; then
        trow "$label" n/a n/a n/a n/a n/a n/a "not run: $(cat "$WORK/$tool.missing")"
        return
    fi
    for impl in cnibox reference; do
        d="$WORK/$key-$impl"; mkdir -p "$d"
        instantiate "$3" > "$d/net.conflist"; net=$(jq -r .name "$d/net.conflist")
        case $rt in
        podman) runners+=("run_podman $impl $d $net") ;;
        cnitool)  # cnibox's own runtime against the reference as podman runs it
            if [ "$impl" = cnibox ]; then runners+=("run_cnitool $d $net"); else runners+=("run_podman $impl $d $net"); fi ;;
        libcni) runners+=("run_libcni $impl $d $net") ;;
        containerd) runners+=("run_gocni $impl $d") ;;
        esac
    done
    say "$label"
    compare "$key" "${runners[@]}"
    headline_row "$key" "$label" "$(whose "$WORK/$key-cnibox/net.conflist" "${extra[@]}")"
}

# ======================= the headline: what a node does per pod =======================
if section headline; then
    table "Per pod on a realistic node (ms; ratio = median of per-round cnibox/reference)" \
        "ADD cnibox" "ADD ref" "ADD ratio" "DEL cnibox" "DEL ref" "DEL ratio" "cnibox column runs"
    # rows: one line each (headline_plugin LABEL TEMPLATE | headline_list RUNTIME LABEL TEMPLATE)
    headline_plugin "bridge+host-local, ipMasq" "$BRIDGE_MASQ"
    headline_list podman "podman: bridge+portmap+firewall+tuning, -p (libcni)" "$PODMAN_CHAIN"
    headline_list cnitool "podman's chain, -p: cnibox cnitool (in-process) vs reference (libcni)" "$PODMAN_CHAIN"
    headline_list containerd "containerd: loopback + bridge+portmap (go-cni)" "$CONTAINERD_CHAIN"
    tnote "Every plugin is a process per call, as runtimes run them (but in the cnitool row, where one" \
        "cnitool process runs every applet of the chain in-process and its own start is counted). The cnibox column uses cnibox's" \
        "applet for each plugin it has and the reference plugin otherwise (last column). libcni and" \
        "go-cni rows time the library call inside a Go client (its own start-up excluded: podman" \
        "and containerd are long-running)."
fi

# ======================= peers: netavark =======================
if section peers; then
    table "Peers: one container on a bridge network with masquerade (ms; ratios per round)" \
        "cnibox" "reference" "netavark" "cnibox/ref" "cnibox/netavark"
    if [ -n "${NETAVARK:-}" ]; then
        a="$WORK/peer-cnibox.json"; b="$WORK/peer-reference.json"; nv="$WORK/peer-netavark.json"
        instantiate "$BRIDGE_MASQ" > "$a"; instantiate "$BRIDGE_MASQ" > "$b"; instantiate "$NETAVARK_NET" > "$nv"
        mkdir -p "$WORK/netavark"
        say "peers: netavark"
        compare peer "run_plugin cnibox $a" "run_plugin reference $b" "run_netavark $nv"
        for verb in ADD DEL; do
            trow "bridge+masquerade $verb (netavark: $([ $verb = ADD ] && echo setup || echo teardown))" \
                "$(ms "${MED[peer,0,$verb]}")" "$(ms "${MED[peer,1,$verb]}")" "$(ms "${MED[peer,2,$verb]}")" \
                "${RAT[peer,1,$verb]}" "${RAT[peer,2,$verb]}"
        done
        tnote "netavark $("$NETAVARK" --version | awk '{print $2}') with its default firewall driver (iptables), given the" \
            "network JSON podman passes (static_ips: podman allocates addresses itself, so netavark" \
            "does no IPAM while cnibox and the reference run host-local)."
    else
        trow "bridge+masquerade" - - n/a - -
        tnote "netavark not run: $NETAVARK_MISSING"
    fi
fi

# ======================= growth: one network filling up =======================
if section growth; then
    # shellcheck source=benches/growth.sh
    source "$BENCH_DIR/growth.sh"
fi

# ======================= single plugins without masquerade, and the kernel floor =======================
if section plugins; then
    table "Single plugins without masquerade (ms; the floor: the same kernel work by ip -batch)" \
        "cnibox" "reference" "kernel floor" "ratio"
    ip link add mvmaster type veth peer name mvpeer
    ip link set mvmaster up; ip link set mvpeer up
    # floor KIND : the link, address and route work of one attachment done by one `ip -batch`
    # process per namespace (two per container), no IPAM
    floor() {
        local kind=$1 i c t0 t1; : > fadd; : > fdel
        ip link add cbfloor type bridge 2>/dev/null || true; ip link set cbfloor up
        make_containers "$N"
        for ((i = 1; i <= N; i++)); do
            c=${CTRS[i-1]}
            # host-device moves a link that exists: made before the clock starts
            [ "$kind" != host-device ] || ip link add "fl$i" type veth peer name "fl${i}p"
            stamp t0
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
            host-device)
                printf 'link set fl%s netns %s name eth0\n' "$i" "$c" | ip -batch -
                printf 'addr add 10.80.0.%s/24 dev eth0\nlink set eth0 up\n' "$((i+1))" | ip -n "$c" -batch - ;;
            tap)
                printf 'tuntap add mode tap name eth0\naddr add 10.81.0.%s/24 dev eth0\nlink set eth0 up\n' "$((i+1))" | ip -n "$c" -batch - ;;
            esac
            stamp t1; echo $((t1 - t0)) >> fadd
        done
        for ((i = 1; i <= N; i++)); do
            c=${CTRS[i-1]}
            stamp t0
            case $kind in
            macvlan|tap) ip -n "$c" link del eth0 ;;
            host-device) ip -n "$c" link set eth0 netns "$HOSTNS" name "fl$i" ;;
            *) ip link del "fl$i" ;;
            esac
            stamp t1; echo $((t1 - t0)) >> fdel
        done
        drop_containers
        FLOOR_ADD=$(median < fadd); FLOOR_DEL=$(median < fdel)
    }
    plain_row() {  # LABEL TEMPLATE FLOOR-KIND
        local key="p$((++ROW_NO))" a="$WORK/p$ROW_NO-cnibox.json" b="$WORK/p$ROW_NO-reference.json"
        instantiate "$2" > "$a"; instantiate "$2" > "$b"
        say "$1"
        floor "$3"
        compare "$key" "run_plugin cnibox $a" "run_plugin reference $b"
        trow "$1 ADD" "$(ms "${MED[$key,0,ADD]}")" "$(ms "${MED[$key,1,ADD]}")" "$(ms "$FLOOR_ADD")" "${RAT[$key,1,ADD]}"
        trow "$1 DEL" "$(ms "${MED[$key,0,DEL]}")" "$(ms "${MED[$key,1,DEL]}")" "$(ms "$FLOOR_DEL")" "${RAT[$key,1,DEL]}"
        [ "$3" = bridge ] && FLOOR_BRIDGE_ADD=$FLOOR_ADD
        return 0
    }
    plain_row "bridge+host-local" "$BRIDGE" bridge
    plain_row "veth+host-local" '{"cniVersion":"1.0.0","name":"@NET@","type":"veth",'$IPAM'}' veth
    plain_row "macvlan+host-local" '{"cniVersion":"1.0.0","name":"@NET@","type":"macvlan","master":"mvmaster",'$IPAM'}' macvlan
    # the notes go under the table, after its last row
    PLUGIN_NOTES=()
    # host-device: each attachment moves a veth end made for it before the clock starts
    run_hostdev() {  # IMPL TEMPLATE-FILE VERB ID NETNS
        local dev="hd${4//[^0-9a-z]/}" cf="$WORK/hd-$1-$4.json"
        if [ "$3" = ADD ]; then
            ip link add "$dev" type veth peer name "${dev}p"; ip link set "$dev" up
            sed "s/@DEV@/$dev/" "$2" > "$cf"
        fi
        run_plugin "$1" "$cf" "$3" "$4" "$5"
    }
    key="p$((++ROW_NO))"; a="$WORK/p$ROW_NO-cnibox.json"; b="$WORK/p$ROW_NO-reference.json"
    HOSTDEV='{"cniVersion":"1.0.0","name":"@NET@","type":"host-device","device":"@DEV@","dataDir":"@DATA@/host-device",'$IPAM'}'
    instantiate "$HOSTDEV" > "$a"; instantiate "$HOSTDEV" > "$b"
    say "host-device+host-local"
    floor host-device
    compare "$key" "run_hostdev cnibox $a" "run_hostdev reference $b"
    trow "host-device+host-local ADD" "$(ms "${MED[$key,0,ADD]}")" "$(ms "${MED[$key,1,ADD]}")" "$(ms "$FLOOR_ADD")" "${RAT[$key,1,ADD]}"
    trow "host-device+host-local DEL" "$(ms "${MED[$key,0,DEL]}")" "$(ms "${MED[$key,1,DEL]}")" "$(ms "$FLOOR_DEL")" "${RAT[$key,1,DEL]}"
    # tap: Debian ships no tap plugin, so cnibox stands beside the floor alone
    key="p$((++ROW_NO))"; a="$WORK/p$ROW_NO-cnibox.json"
    instantiate '{"cniVersion":"1.0.0","name":"@NET@","type":"tap",'$IPAM'}' > "$a"
    say "tap+host-local"
    floor tap
    compare "$key" "run_plugin cnibox $a"
    trow "tap+host-local ADD" "$(ms "${MED[$key,0,ADD]}")" "n/a" "$(ms "$FLOOR_ADD")" "n/a"
    trow "tap+host-local DEL" "$(ms "${MED[$key,0,DEL]}")" "n/a" "$(ms "$FLOOR_DEL")" "n/a"
    PLUGIN_NOTES+=("host-device: each attachment moves a veth end made for it before the measured call. tap: Debian's"
        "containernetworking-plugins 1.1.1 has no tap plugin, so there is no reference column.")
    # shellcheck source=benches/kind-rows.sh
    source "$BENCH_DIR/kind-rows.sh"
    (( ${#PLUGIN_NOTES[@]} == 0 )) || tnote "${PLUGIN_NOTES[@]}"
fi

# ======================= masquerade: bridge and veth with ipMasq =======================
if section ipmasq; then
    source "$BENCH_DIR/ipmasq.sh"
fi

# ======================= static and sbr, each alone =======================
if section static-sbr; then
    source "$BENCH_DIR/static-sbr.sh"
fi

# ======================= dhcp: leases from the LAN's server, through a daemon =======================
if section dhcp; then
    source "$BENCH_DIR/dhcp.sh"
fi

# ======================= where the time goes: one headline bridge ADD =======================
if section breakdown; then
    say "breakdown"
    source "$BENCH_DIR/breakdown.sh"
fi

# ======================= host-local alone, as the store fills =======================
if section host-local && [ -z "${HL_DONE:-}" ]; then
    say "host-local: filling two stores with $STORE_SIZE reservations"
    hl_setup; hl_fill_stores; hl_measure; hl_remove_stores
fi

# ======================= memory, size, syscalls =======================
if section resources; then
    say "resources"
    table "Resources of one bridge+host-local ADD (no masquerade)" "cnibox" "reference" "ratio"
    rss() {  # IMPL -> RSS_KIB
        local cf="$WORK/rss-$1.json"; instantiate "$BRIDGE" > "$cf"; make_containers 1
        CNI_COMMAND=ADD CNI_CONTAINERID=rss CNI_NETNS=/run/netns/${CTRS[0]} CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" \
            /usr/bin/time -f %M -o "$WORK/rss" "$WORK/$1/bridge" < "$cf" > /dev/null
        run_plugin "$1" "$cf" DEL rss "${CTRS[0]}" > /dev/null
        ip netns del "${CTRS[0]}"; RSS_KIB=$(tail -1 "$WORK/rss")
    }
    rss cnibox; ra=$RSS_KIB; rss reference; rb=$RSS_KIB
    trow "peak RSS, one bridge ADD (KiB)" "$ra" "$rb" "$(ratio "$ra" "$rb")"
    sa=$(stat -L -c %s "$BIN"); sb=0 nb=0
    # the reference binaries cnibox's applets replace: those of their names (veth's is ptp,
    # which is an applet name too)
    for p in $("$BIN" --list); do
        [ -x "$REF/$p" ] || continue
        sb=$((sb + $(stat -L -c %s "$REF/$p"))); nb=$((nb + 1))
    done
    trow "binary size (KiB; reference = its $nb binaries)" "$((sa / 1024))" "$((sb / 1024))" "$(ratio "$sa" "$sb")"
    syscalls() {  # IMPL -> SC_TOTAL SC_SENDS SC_PROCS
        local cf="$WORK/st-$1.json"; instantiate "$BRIDGE" > "$cf"; make_containers 1
        CNI_COMMAND=ADD CNI_CONTAINERID=st CNI_NETNS=/run/netns/${CTRS[0]} CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" \
            strace -f -qq -o "$WORK/strace-$1" "$WORK/$1/bridge" < "$cf" > /dev/null
        run_plugin "$1" "$cf" DEL st "${CTRS[0]}" > /dev/null
        ip netns del "${CTRS[0]}"
        SC_TOTAL=$(grep -cv -e '+++ exited' -e '--- SIG' "$WORK/strace-$1")
        SC_SENDS=$(grep -cE '(sendto|sendmsg)\(' "$WORK/strace-$1" || true)
        SC_PROCS=$(cut -d' ' -f1 "$WORK/strace-$1" | sort -u | wc -l)
    }
    syscalls cnibox; ta=$SC_TOTAL na=$SC_SENDS pa=$SC_PROCS
    syscalls reference; tb=$SC_TOTAL nb=$SC_SENDS pb=$SC_PROCS
    trow "syscalls, one bridge ADD (all processes)" "$ta" "$tb" "$(ratio "$ta" "$tb")"
    trow "netlink requests (sendto/sendmsg)" "$na" "$nb" "$(ratio "$na" "$nb")"
    trow "processes/threads traced" "$pa" "$pb" -
fi

echo
echo "cnibox bench: N=$N rounds per figure (median), HOST_LOCAL_N=$HOST_LOCAL_N, GROWTH_POINTS=${GROWTH_POINTS// /,}, GROWTH=$GROWTH, WORKERS=$WORKERS, STORE_SIZE=$STORE_SIZE;" \
    "$(nproc) cores, kernel $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - BENCH_START )) s"
echo
print_tables
