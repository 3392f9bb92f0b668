# shellcheck shell=bash
# The ipMasq section of make bench (sourced by bench-inner.sh; uses lib.sh): per container,
# bridge and veth with masquerade, ADD, DEL with the netns present and DEL with the netns
# gone, cnibox and the reference round by round; and in the same rounds the same cnibox call
# without masquerade, for what masquerade costs cnibox.
table "ipMasq per container (ms; ratio = median of per-round cnibox/reference)" \
    "cnibox" "reference" "ratio" "cnibox plain" "ipMasq cost"
# masq_rows LABEL TEMPLATE-WITH-MASQ TEMPLATE-WITHOUT
masq_rows() {
    local label=$1 key="m$((++ROW_NO))" i r j t
    local a="$WORK/$key-cnibox.json" b="$WORK/$key-reference.json" p="$WORK/$key-plain.json"
    instantiate "$2" > "$a"; instantiate "$2" > "$b"; instantiate "$3" > "$p"
    local runners=("run_plugin cnibox $a" "run_plugin reference $b" "run_plugin cnibox $p")
    say "$label, ipMasq"
    compare "$key" "${runners[@]}"
    local verb
    for verb in ADD DEL; do
        trow "$label, ipMasq $verb$([ $verb = DEL ] && echo ', netns present')" \
            "$(ms "${MED[$key,0,$verb]}")" "$(ms "${MED[$key,1,$verb]}")" "${RAT[$key,1,$verb]}" \
            "$(ms "${MED[$key,2,$verb]}")" "$(ms $(( ${MED[$key,0,$verb]%.*} - ${MED[$key,2,$verb]%.*} )))"
    done
    # DEL after the namespaces are gone (the runtime deleted them first)
    make_containers $(( 3 * N ))
    for ((i = 0; i < N; i++)); do
        for ((j = 0; j < 3; j++)); do ${runners[j]} ADD "g$i-$j" "${CTRS[3*i+j]}" > /dev/null; done
    done
    local gone=("${CTRS[@]}"); drop_containers
    : > "$WORK/g0"; : > "$WORK/g1"; : > "$WORK/g2"; : > "$WORK/grounds"
    for ((i = 0; i < N; i++)); do
        local times=()
        for ((r = 0; r < 3; r++)); do
            j=$(( (r + i) % 3 ))
            t=$(${runners[j]} DEL "g$i-$j" "${gone[3*i+j]}") || exit 1
            times[j]=$t; echo "$t" >> "$WORK/g$j"
        done
        echo "${times[*]}" >> "$WORK/grounds"
    done
    local g0 g1 g2
    g0=$(median < "$WORK/g0"); g1=$(median < "$WORK/g1"); g2=$(median < "$WORK/g2")
    trow "$label, ipMasq DEL, netns gone" "$(ms "$g0")" "$(ms "$g1")" \
        "$(awk '$2 > 0 {printf "%.3f\n", $1/$2}' "$WORK/grounds" | median)" "$(ms "$g2")" "$(ms $(( ${g0%.*} - ${g2%.*} )))"
}
masq_rows "bridge+host-local" "$BRIDGE_MASQ" "$BRIDGE"
masq_rows "veth+host-local" '{"cniVersion":"1.0.0","name":"@NET@","type":"veth","ipMasq":true,'"$IPAM"'}' \
    '{"cniVersion":"1.0.0","name":"@NET@","type":"veth",'"$IPAM"'}'
tnote "ipMasq cost = cnibox median with ipMasq minus without. Without a netns the reference" \
    "leaves its masquerade rules behind (it finds them by the container's addresses), so its" \
    "DEL does less there; cnibox finds them by attachment and removes them."
