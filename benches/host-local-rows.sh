# Section of bench-inner.sh: host-local alone, with an empty store and with STORE_SIZE
# reservations that another writer left (the reference's file format, synced to disk, as on
# a node that has run for a while). The first call after that foreign change is reported
# apart (cnibox rebuilds its owner index then, once); the steady state follows.
table "host-local alone: empty store vs $STORE_SIZE reservations (ms)" "cnibox" "reference" "ratio"
hl_conf() {  # NAME OCTET
    printf '{"cniVersion":"1.0.0","name":"%s","ipam":{"type":"host-local","ranges":[[{"subnet":"10.%s.0.0/16"}]],"dataDir":"%s"}}' \
        "$1" "$2" "$WORK/hl"
}
run_ipam() {  # IMPL CONF VERB ID
    local t0 t1
    t0=$(now_us)
    CNI_COMMAND=$3 CNI_CONTAINERID=$4 CNI_NETNS=/run/netns/$HL_NS CNI_IFNAME=eth0 CNI_PATH="$WORK/$1" \
        "$WORK/$1/host-local" < "$2" > "$WORK/out.json" 2>&1 || die "host-local $1 $3 failed: $(cat "$WORK/out.json")"
    t1=$(now_us); echo $((t1 - t0))
}
make_containers 1; HL_NS=${CTRS[0]}  # a container namespace that nothing is attached to
say "host-local: filling two stores with $STORE_SIZE reservations"
declare -A HLC HL_FIRST
oct=29
for impl in cnibox reference; do
    for s in empty full; do
        oct=$((oct + 1))
        HLC[$impl,$s]="$WORK/hl-$impl-$s.json"; hl_conf "hl-$impl-$s" "$oct" > "${HLC[$impl,$s]}"
        [ $s = full ] && python3 "$BENCH_DIR/fill-store.py" "$WORK/hl/hl-$impl-$s" "$STORE_SIZE" "10.$oct"
    done
done
sync
for impl in cnibox reference; do
    for s in empty full; do HL_FIRST[$impl,$s]=$(run_ipam "$impl" "${HLC[$impl,$s]}" DEL first); done
done
for s in empty full; do for impl in cnibox reference; do for v in ADD DEL; do : > "$WORK/hl-$impl-$s-$v"; done; done; done
say "host-local: $N rounds"
for ((i = 0; i < N; i++)); do
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
drop_containers
hl_med() { median < "$WORK/hl-$1-$2-$3"; }
hl_ratio() { paste "$WORK/hl-cnibox-$1-$2" "$WORK/hl-reference-$1-$2" | awk '$2 > 0 {printf "%.3f\n", $1/$2}' | median; }
trow "first call after another writer filled the store" "$(ms "${HL_FIRST[cnibox,full]}")" "$(ms "${HL_FIRST[reference,full]}")" \
    "$(ratio "${HL_FIRST[cnibox,full]}" "${HL_FIRST[reference,full]}")"
for v in ADD DEL; do
    trow "$v, empty store" "$(ms "$(hl_med cnibox empty $v)")" "$(ms "$(hl_med reference empty $v)")" "$(hl_ratio empty $v)"
    trow "$v, $STORE_SIZE reservations" "$(ms "$(hl_med cnibox full $v)")" "$(ms "$(hl_med reference full $v)")" "$(hl_ratio full $v)"
done
# full/empty of one implementation, round by round (the two stores run back to back)
hl_growth() { paste "$WORK/hl-$1-full-$2" "$WORK/hl-$1-empty-$2" | awk '$2 > 0 {printf "%.3f\n", $1/$2}' | median; }
for v in ADD DEL; do
    trow "$v, $STORE_SIZE reservations / empty (per round)" "$(hl_growth cnibox $v)" "$(hl_growth reference $v)" -
done
tnote "Steady state: $N rounds of ADD+DEL on each store after the first call; the first call" \
    "after a foreign change is where cnibox rebuilds its owner index (once)."
