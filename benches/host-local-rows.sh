# shellcheck shell=bash
# host-local alone (sourced by bench-inner.sh; uses lib.sh), with an empty store and with
# STORE_SIZE reservations that another writer left (the reference's file format, synced to
# disk, as on a node that has run for a while). The first call after that foreign change is
# reported apart (cnibox rebuilds its owner index then, once); HOST_LOCAL_N rounds of the
# steady state follow (fewer than N by default: the reference takes ~1 s per call on the
# full store).
#
# Writing the two full stores (2 x 60,000 files) and removing them is the bench's longest
# piece of unmeasured work: ~10 s to write each, and 20-60 s to remove both on this VM, where
# every freed data block is discarded (ext4 mounted with `discard`; 20,000 empty files go in
# 0.5 s, 20,000 of these in ~9-17 s). So the section is four steps: hl_setup, hl_fill_stores
# and hl_remove_stores (unmeasured: bench-inner.sh runs them beside the growth series'
# unmeasured fills when both sections run) and hl_measure.
hl_conf() {  # NAME OCTET
    printf '{"cniVersion":"1.0.0","name":"%s","ipam":{"type":"host-local","ranges":[[{"subnet":"10.%s.0.0/16"}]],"dataDir":"%s"}}' \
        "$1" "$2" "$WORK/hl"
}
run_ipam() {  # IMPL CONF VERB ID
    local t0 t1
    stamp t0
    CNI_COMMAND=$3 CNI_CONTAINERID=$4 CNI_NETNS=/run/netns/$HL_NS CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" \
        "$WORK/$1/host-local" < "$2" > "$WORK/out.json" 2>&1 || die "host-local $1 $3 failed: $(cat "$WORK/out.json")"
    stamp t1; echo $((t1 - t0))
}
hl_med() { median < "$WORK/hl-$1-$2-$3"; }
hl_ratio() { paste "$WORK/hl-cnibox-$1-$2" "$WORK/hl-reference-$1-$2" | awk '$2 > 0 {printf "%.3f\n", $1/$2}' | median; }
# full/empty of one implementation, round by round (the two stores run back to back)
hl_growth() { paste "$WORK/hl-$1-full-$2" "$WORK/hl-$1-empty-$2" | awk '$2 > 0 {printf "%.3f\n", $1/$2}' | median; }
declare -A HLC HL_FIRST
# hl_setup : the four configurations (cnibox and reference, empty and full store)
hl_setup() {
    local impl s oct=29
    for impl in cnibox reference; do
        for s in empty full; do
            oct=$((oct + 1))
            HLC[$impl,$s]="$WORK/hl-$impl-$s.json"; hl_conf "hl-$impl-$s" "$oct" > "${HLC[$impl,$s]}"
            HLC[$impl,$s,prefix]="10.$oct"
        done
    done
}
# hl_fill_stores : both full stores written at once, then synced (safe in the background)
hl_fill_stores() {
    local impl pids=() p
    for impl in cnibox reference; do
        python3 "$BENCH_DIR/fill-store.py" "$WORK/hl/hl-$impl-full" "$STORE_SIZE" "${HLC[$impl,full,prefix]}" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || die "host-local: fill-store.py failed"; done
    sync
}
# hl_remove_stores : the stores removed, and synced so that no journal commit of theirs is
# left for a measured call to wait behind (safe in the background)
hl_remove_stores() { rm -rf "$WORK/hl"; sync; }
# hl_measure : the table, from the filled stores (CTRS and the current table are kept: it
# may run inside another section's series)
hl_measure() {
    # shellcheck disable=SC2034  # table and trow read them (bash's dynamic scope)
    local SECTION=host-local TABLE keep=("${CTRS[@]}") impl s v i order left
    table "host-local alone: empty store vs $STORE_SIZE reservations (ms)" "cnibox" "reference" "ratio"
    make_containers 1; HL_NS=${CTRS[0]}  # a container namespace that nothing is attached to
    for impl in cnibox reference; do
        for s in empty full; do HL_FIRST[$impl,$s]=$(run_ipam "$impl" "${HLC[$impl,$s]}" DEL first); done
    done
    for s in empty full; do for impl in cnibox reference; do for v in ADD DEL; do : > "$WORK/hl-$impl-$s-$v"; done; done; done
    say "host-local: $HOST_LOCAL_N rounds"
    for ((i = 0; i < HOST_LOCAL_N; i++)); do
        order=(cnibox reference); (( i % 2 )) && order=(reference cnibox)
        for impl in "${order[@]}"; do
            for s in empty full; do
                run_ipam "$impl" "${HLC[$impl,$s]}" ADD "h$i" >> "$WORK/hl-$impl-$s-ADD"
                run_ipam "$impl" "${HLC[$impl,$s]}" DEL "h$i" >> "$WORK/hl-$impl-$s-DEL"
            done
        done
    done
    left=$(find "$WORK/hl/hl-cnibox-full" -maxdepth 1 -name '10.*' | wc -l)
    [ "$left" = "$STORE_SIZE" ] || die "host-local: cnibox left $left reservations, expected $STORE_SIZE"
    drop_containers; CTRS=("${keep[@]}")
    trow "first call after another writer filled the store" "$(ms "${HL_FIRST[cnibox,full]}")" "$(ms "${HL_FIRST[reference,full]}")" \
        "$(ratio "${HL_FIRST[cnibox,full]}" "${HL_FIRST[reference,full]}")"
    for v in ADD DEL; do
        trow "$v, empty store" "$(ms "$(hl_med cnibox empty $v)")" "$(ms "$(hl_med reference empty $v)")" "$(hl_ratio empty $v)"
        trow "$v, $STORE_SIZE reservations" "$(ms "$(hl_med cnibox full $v)")" "$(ms "$(hl_med reference full $v)")" "$(hl_ratio full $v)"
    done
    for v in ADD DEL; do
        trow "$v, $STORE_SIZE reservations / empty (per round)" "$(hl_growth cnibox $v)" "$(hl_growth reference $v)" -
    done
    tnote "Steady state: $HOST_LOCAL_N rounds of ADD+DEL on each store after the first call; the first call" \
        "after a foreign change is where cnibox rebuilds its owner index (once)."
}
