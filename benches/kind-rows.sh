# Rows of make bench's "plugins" table for the plugins whose link kind a kernel may be
# built without (sourced by bench-inner.sh): dummy, ipvlan, vlan, vrf. Where the kernel has
# the kind they are measured as the other single plugins (cnibox alone where Debian ships
# no reference); where it has not, the row says why instead of a number. Their notes join
# PLUGIN_NOTES, which bench-inner.sh prints under the table.

# kind_missing KIND : prints why a link of KIND cannot be made here (the message cnibox's
# applet fails with) and succeeds; fails when the kernel has the kind
kind_missing() {
    local ns="${HOSTNS}kp" module=$1 args rc=0
    [ "$1" = vlan ] && module=8021q
    case $1 in
    dummy) args=(kp2 type dummy) ;;
    ipvlan) args=(link kp0 name kp2 type ipvlan) ;;
    vlan) args=(link kp0 name kp2 type vlan id 2) ;;
    vrf) args=(kp2 type vrf table 100) ;;
    esac
    ip netns add "$ns"
    ip -n "$ns" link add kp0 type veth peer name kp1
    ip -n "$ns" link add "${args[@]}" 2> /dev/null || rc=1
    ip netns del "$ns"
    (( rc )) && echo "$1: the kernel has no $1 support (modprobe $module)"
}

# run_vlan IMPL CONF VERB ID NETNS : run_plugin with a VLAN ID of the attachment's own (a
# master carries each ID once); the config is written before the measured call
run_vlan() {
    local cf="$WORK/vlan-$4.json" n=2
    if [ "$3" = ADD ]; then
        [ -s "$WORK/vlan-next" ] && read -r n < "$WORK/vlan-next"
        echo $((n + 1)) > "$WORK/vlan-next"
        jq ".vlanId = $n" "$2" > "$cf"
    fi
    run_plugin "$1" "$cf" "$3" "$4" "$5"
}

# run_vrf IMPL CONF VERB ID NETNS : vrf chained after a veth end `eth0` made in the
# container (unmeasured), with that interface in its prevResult
run_vrf() {
    local cf="$WORK/vrf-$4.json"
    if [ "$3" = ADD ]; then
        ip link add "vr${4//[^0-9]/}" type veth peer name eth0 netns "$5"
        jq --arg ns "/run/netns/$5" '.prevResult = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": $ns}]}' "$2" > "$cf"
    fi
    run_plugin "$1" "$cf" "$3" "$4" "$5"
}

# kind_row LABEL KIND TEMPLATE [RUNNER] : one plugin of KIND measured against its
# reference (RUNNER: run_plugin, or a wrapper above), or the reason it is not
kind_row() {
    local label=$1 kind=$2 runner=${4:-run_plugin} reason key="p$((++ROW_NO))" a b runners
    if reason=$(kind_missing "$kind"); then
        trow "$label ADD" - - - "not run"
        trow "$label DEL" - - - "not run"
        PLUGIN_NOTES+=("$label not run: $reason.")
        return 0
    fi
    a="$WORK/p$ROW_NO-cnibox.json"; b="$WORK/p$ROW_NO-reference.json"
    instantiate "$3" > "$a"; instantiate "$3" > "$b"
    runners=("$runner cnibox $a")
    [ -x "$REF/$kind" ] && runners+=("$runner reference $b")
    say "$label"
    compare "$key" "${runners[@]}"
    for verb in ADD DEL; do
        if [ -x "$REF/$kind" ]; then
            trow "$label $verb" "$(ms "${MED[$key,0,$verb]}")" "$(ms "${MED[$key,1,$verb]}")" - "${RAT[$key,1,$verb]}"
        else
            trow "$label $verb" "$(ms "${MED[$key,0,$verb]}")" "none" - -
        fi
    done
    [ -x "$REF/$kind" ] || PLUGIN_NOTES+=("$label: Debian ships no $kind reference plugin; cnibox alone.")
}

kind_row "ipvlan+host-local" ipvlan '{"cniVersion":"1.0.0","name":"@NET@","type":"ipvlan","master":"mvmaster",'"$IPAM"'}'
kind_row "vlan+host-local" vlan '{"cniVersion":"1.0.0","name":"@NET@","type":"vlan","master":"mvmaster","vlanId":2,'"$IPAM"'}' run_vlan
kind_row "dummy+host-local" dummy '{"cniVersion":"1.0.0","name":"@NET@","type":"dummy",'"$IPAM"'}'
kind_row "vrf (after a veth)" vrf '{"cniVersion":"1.0.0","name":"@NET@","type":"vrf","vrfname":"blue"}' run_vrf
