# ipMasq rows of make bench (sourced by bench-inner.sh, which provides conf, invoke,
# make_containers, drop_containers, settle, median, ms, ratio and row).
#
# masq_latency NAME PLUGIN EXTRA: per-container ADD, DEL with the netns present and DEL
# with the netns gone, with masquerade on, cnibox and the reference pair by pair; and in
# the same rounds the same ADD/DEL of cnibox without masquerade, for what masquerade adds
# (the median of the per-round differences).
masq_latency() {
    local name=$1 plugin=$2 extra=$3 i a b p
    local cfa="$WORK/masq-$plugin-cnibox.json" cfb="$WORK/masq-$plugin-reference.json" cfp="$WORK/masq-$plugin-plain.json"
    conf "masq-$plugin-a" "$plugin" "10.$((60+${#ROWS[@]})).0.0/16" "$WORK/data" "${extra//BR/cbma},\"ipMasq\":true" > "$cfa"
    conf "masq-$plugin-b" "$plugin" "10.$((90+${#ROWS[@]})).0.0/16" "$WORK/data" "${extra//BR/cbmb},\"ipMasq\":true" > "$cfb"
    conf "masq-$plugin-p" "$plugin" "10.$((120+${#ROWS[@]})).0.0/16" "$WORK/data" "${extra//BR/cbmp}" > "$cfp"
    local f; for f in add_a add_b add_r add_d gadd_a gadd_b gadd_r gadd_d del_a del_b del_r del_d gone_a gone_b gone_r gone_d; do : > "$f"; done
    # one round: ADD of the three (order rotating), then later their DELs; containers
    # 3i (cnibox), 3i+1 (reference), 3i+2 (cnibox without masquerade)
    three() {  # VERB PREFIX I NETNS-ARRAY-NAME OUT-PREFIX
        local verb=$1 id=$2$3 k=$3 o=$5
        local -n cs=$4
        case $((k % 3)) in
        0) a=$(invoke cnibox "$verb" "$cfa" "$id" "${cs[3*k]}"); b=$(invoke reference "$verb" "$cfb" "$id" "${cs[3*k+1]}"); p=$(invoke cnibox "$verb" "$cfp" "$id" "${cs[3*k+2]}") ;;
        1) b=$(invoke reference "$verb" "$cfb" "$id" "${cs[3*k+1]}"); p=$(invoke cnibox "$verb" "$cfp" "$id" "${cs[3*k+2]}"); a=$(invoke cnibox "$verb" "$cfa" "$id" "${cs[3*k]}") ;;
        2) p=$(invoke cnibox "$verb" "$cfp" "$id" "${cs[3*k+2]}"); a=$(invoke cnibox "$verb" "$cfa" "$id" "${cs[3*k]}"); b=$(invoke reference "$verb" "$cfb" "$id" "${cs[3*k+1]}") ;;
        esac
        echo "$a" >> "${o}_a"; echo "$b" >> "${o}_b"; ratio "$a" "$b" >> "${o}_r"; echo $((a - p)) >> "${o}_d"
    }
    make_containers $(( 3 * N + 3 )); settle
    local live=("${CTRS[@]}")
    invoke cnibox ADD "$cfa" warm "${live[3*N]}" >/dev/null; invoke reference ADD "$cfb" warm "${live[3*N+1]}" >/dev/null
    invoke cnibox ADD "$cfp" warm "${live[3*N+2]}" >/dev/null
    for i in $(seq 0 $((N - 1))); do three ADD a "$i" live add; done
    for i in $(seq 0 $((N - 1))); do three DEL a "$i" live del; done
    # the same containers again, then their namespaces go before DEL
    for i in $(seq 0 $((N - 1))); do three ADD g "$i" live gadd; done
    drop_containers
    for i in $(seq 0 $((N - 1))); do three DEL g "$i" live gone; done
    invoke cnibox DEL "$cfa" warm "${live[3*N]}" >/dev/null; invoke reference DEL "$cfb" warm "${live[3*N+1]}" >/dev/null
    invoke cnibox DEL "$cfp" warm "${live[3*N+2]}" >/dev/null
    row "$name ipMasq ADD (ms)" "$(ms "$(median < add_a)")" "$(ms "$(median < add_b)")" - "$(median < add_r)"
    row "$name ipMasq DEL, netns present (ms)" "$(ms "$(median < del_a)")" "$(ms "$(median < del_b)")" - "$(median < del_r)"
    row "$name ipMasq DEL, netns gone (ms)" "$(ms "$(median < gone_a)")" "$(ms "$(median < gone_b)")" - "$(median < gone_r)"
    row "$name ipMasq minus plain, cnibox ADD (ms)" "$(ms "$(median < add_d)")" - - -
    row "$name ipMasq minus plain, cnibox DEL (ms)" "$(ms "$(median < del_d)")" - - -
    row "$name ipMasq minus plain, DEL netns gone (ms)" "$(ms "$(median < gone_d)")" - - -
}
