# shellcheck shell=bash
# The growth section of make bench (sourced by bench-inner.sh; uses lib.sh): ADD and DEL of
# one attachment as one bridge network fills up, at each of GROWTH_POINTS attachments, for
# cnibox and the reference (bridge+host-local with ipMasq), netavark (setup/teardown with
# the network JSON podman passes) and the kernel floor (the same links, addresses and routes
# made by `ip -batch`, as the plugins section's floor), each on its own network; then the
# table, the curve as a picture (gnuplot), and GROWTH parallel ADDs and DELs.
#
# "At N": the median of the GROWTH_EDGE ADDs that bring the network to N attachments (at 1:
# the first GROWTH_EDGE), and of the GROWTH_EDGE DELs from N attached down (at 1: the last
# ones). Measured calls run one at a time, one of every implementation per round in an order
# drawn anew, so all of them share the same moments of the machine and none always follows
# the same one; the attachments between the measured windows are made and removed by
# WORKERS parallel workers, every implementation at once, unmeasured.
#
# growth_series [ADD-COMPANION WHILE-FULL DEL-COMPANION] : the commands run in the background
# beside the last ADD fill and the first DEL fill (unmeasured work of other sections), and in
# the foreground while the network is full, between the measured calls.

# gr_step IMPL VERB I NS : attachment I of IMPL (its namespace NS); prints the µs it took
gr_step() {
    local impl=$1 verb=$2 i=$3 ns=$4 t0 t1
    case $impl in
    cnibox | reference) run_plugin "$impl" "$WORK/gr-$impl.json" "$verb" "g$i" "$ns" ;;
    netavark) gr_netavark "$verb" "$i" "$ns" ;;
    floor)
        stamp t0
        if [ "$verb" = ADD ]; then
            floor_attach "gf$i" "$ns" cbgfloor "$(gr_ip 10.76 "$i")/16" 10.76.0.1 || die "floor: ADD $i failed"
        else
            ip link del "gf$i" || die "floor: DEL $i failed"
        fi
        stamp t1; echo $((t1 - t0)) ;;
    esac
}
# gr_ip PREFIX I : the address of attachment I in PREFIX.0.0/16 (the gateway is .0.1)
gr_ip() { echo "$1.$((($2 + 2) >> 8)).$((($2 + 2) & 255))"; }
# netavark, as run_netavark runs it, with the address derived from the attachment (parallel
# workers share no counter)
gr_netavark() {
    local verb=$1 i=$2 ns=$3 f="$WORK/gr-nv-$2.json" cmd=setup t0 t1 out="$WORK/out.${RUN_SLOT:-seq}"
    if [ "$verb" = ADD ]; then
        sed -e "s/@CID@/$(sha256sum <<< "gr$i" | cut -c1-64)/" -e "s/@IP@/$(gr_ip "$GR_NV_PREFIX" "$i")/" \
            "$WORK/gr-netavark.json" > "$f"
    else
        cmd=teardown
    fi
    stamp t0
    "$NETAVARK" --config "$WORK/netavark" "$cmd" "/run/netns/$ns" < "$f" > "$out" 2> "$out.err" \
        || die "netavark $cmd $i failed: $(cat "$out.err")"
    stamp t1
    echo $((t1 - t0))
}

growth_series() {
    local impl i j k p r lo hi prev_hi verb
    GR_IMPLS=(cnibox reference)
    [ -n "${NETAVARK:-}" ] && GR_IMPLS+=(netavark)
    GR_IMPLS+=(floor)
    k=${#GR_IMPLS[@]}
    read -ra GR_POINTS <<< "$GROWTH_POINTS"
    GR_MAX=${GR_POINTS[${#GR_POINTS[@]}-1]}
    instantiate "$BRIDGE_MASQ" > "$WORK/gr-cnibox.json"; instantiate "$BRIDGE_MASQ" > "$WORK/gr-reference.json"
    instantiate "$NETAVARK_NET" > "$WORK/gr-netavark.json"
    jq_once "$WORK/gr-netavark.json" gw '.network_info[].subnets[0].gateway'; GR_NV_PREFIX=${REPLY%.*.*}
    mkdir -p "$WORK/netavark"
    ip link add cbgfloor type bridge; ip link set cbgfloor up
    make_containers $((k * GR_MAX))
    local ctrs=("${CTRS[@]}")
    ns_of() { echo "${ctrs[$1 * GR_MAX + $2]}"; }  # IMPL-INDEX ATTACHMENT
    # one line per step for xargs: IMPL VERB I NS
    fill() {  # VERB FROM TO [COMPANION] : attachments FROM..TO-1 (ADD up, DEL down)
        local verb=$1 from=$2 to=$3 bg="" x
        (( from < to )) || { [ -z "${4:-}" ] || "$4"; return 0; }
        say "growth: $verb of attachments $((from + 1))-$to, $WORKERS workers (unmeasured)${4:+, beside $4}"
        if [ -n "${4:-}" ]; then "$4" & bg=$!; fi
        for ((x = from; x < to; x++)); do
            if [ "$verb" = ADD ]; then i=$x; else i=$((to - 1 - x + from)); fi
            for ((j = 0; j < k; j++)); do echo "${GR_IMPLS[j]} $verb $i $(ns_of "$j" "$i")"; done
        done > "$WORK/gr-fill"
        export -f gr_step gr_ip gr_netavark run_plugin jq_once stamp die floor_attach
        export WORK NETAVARK GR_NV_PREFIX
        # netavark's calls one after another (podman serializes them, and netavark 1.4 takes
        # no lock of its own), beside the others' workers
        local nv=""
        if grep -q '^netavark ' "$WORK/gr-fill"; then
            # shellcheck disable=SC2016  # expanded by the worker
            grep '^netavark ' "$WORK/gr-fill" | RUN_SLOT=nv xargs -L 1 bash -c 'gr_step "$1" "$2" "$3" "$4" > /dev/null' fill & nv=$!
        fi
        # shellcheck disable=SC2016  # expanded by the worker
        grep -v '^netavark ' "$WORK/gr-fill" \
            | xargs -P "$WORKERS" --process-slot-var=RUN_SLOT -L 1 bash -c 'gr_step "$1" "$2" "$3" "$4" > /dev/null' fill
        if [ -n "$nv" ]; then wait "$nv" || die "growth: netavark's fill failed"; fi
        if [ -n "$bg" ]; then wait "$bg" || die "growth: $4 failed"; fi
        settle
        # Every new interface starts IPv6 (DAD, router solicitations, MLD reports: ~10 s of
        # multicast), which each bridge floods to all its ports: right after a fill of a few
        # hundred, every call is slower, the first ten as much as any. The measured calls
        # wait until the network is quiet, as the first ten find it.
        if [ "$verb" = ADD ]; then sleep "$GROWTH_SETTLE"; fi
    }
    # measure VERB P I... : the calls of attachments I..., every implementation's in an
    # order drawn anew for each, into gr.IMPL.VERB.P
    measure() {
        local verb=$1 p=$2; shift 2
        for ((j = 0; j < k; j++)); do : > "$WORK/gr.${GR_IMPLS[j]}.$verb.$p"; done
        for i in "$@"; do
            # A new order every round: a call inherits its predecessor's deferred kernel work
            # (a new interface's IPv6 announcements, flooded to every port of its bridge), so
            # no implementation may always follow the same one (a rotation put cnibox after
            # the floor every time).
            for j in $(shuf -i "0-$((k - 1))"); do
                impl=${GR_IMPLS[j]}
                gr_step "$impl" "$verb" "$i" "$(ns_of "$j" "$i")" >> "$WORK/gr.$impl.$verb.$p" || exit 1
            done
        done
    }
    # the window of point P: attachments LO..HI-1 (0-based), HI = max(P, GROWTH_EDGE)
    prev_hi=0
    for p in "${GR_POINTS[@]}"; do
        hi=$(( p > GROWTH_EDGE ? p : GROWTH_EDGE )); lo=$(( hi - GROWTH_EDGE > prev_hi ? hi - GROWTH_EDGE : prev_hi ))
        GR_WIN[$p]="$lo $hi"; prev_hi=$hi
    done
    say "growth: ADD up to $GR_MAX attachments: ${GR_IMPLS[*]}"
    prev_hi=0
    for p in "${GR_POINTS[@]}"; do
        read -r lo hi <<< "${GR_WIN[$p]}"
        if [ "$p" = "$GR_MAX" ]; then fill ADD "$prev_hi" "$lo" "${1:-}"; else fill ADD "$prev_hi" "$lo"; fi
        measure ADD "$p" $(seq "$lo" $((hi - 1)))
        prev_hi=$hi
    done
    [ -z "${2:-}" ] || "$2"
    local top=$GR_MAX n_points=${#GR_POINTS[@]} idx
    for ((idx = n_points - 1; idx >= 0; idx--)); do
        p=${GR_POINTS[idx]}; read -r lo hi <<< "${GR_WIN[$p]}"
        if (( idx == n_points - 1 )); then fill DEL "$hi" "$top"; else fill DEL "$hi" "$top" "$([ "$idx" = $((n_points - 2)) ] && echo "${3:-}")"; fi
        measure DEL "$p" $(seq $((hi - 1)) -1 "$lo")
        top=$lo
    done
    fill DEL 0 "$top"
    CTRS=("${ctrs[@]}"); drop_containers
    ip link del cbgfloor
}

# growth_table : the curve as a table and a picture
growth_table() {
    local p v impl j med lo hi first last cols=() row
    local names=(cnibox reference netavark "kernel floor")
    table "Growth: one bridge network filling up (ms per call: the median of the $GROWTH_EDGE calls at each size)" \
        "cnibox" "reference" "netavark" "kernel floor" "cnibox/ref"
    : > "$WORK/growth.dat"
    for v in ADD DEL; do
        for p in "${GR_POINTS[@]}"; do
            read -r lo hi <<< "${GR_WIN[$p]}"
            cols=()
            for impl in cnibox reference netavark floor; do
                if [ -f "$WORK/gr.$impl.$v.$p" ]; then med=$(median < "$WORK/gr.$impl.$v.$p"); else med=n/a; fi
                GR_MED[$impl,$v,$p]=$med; cols+=("$(ms "$med")")
            done
            if [ "$v" = ADD ]; then row="ADD, attachments $((lo + 1))-$hi"; else row="DEL, from $hi attached to $((lo + 1))"; fi
            trow "$row" "${cols[@]}" "$(ratio "${GR_MED[cnibox,$v,$p]}" "${GR_MED[reference,$v,$p]}")"
        done
        first=${GR_POINTS[0]}
        for p in "${GR_POINTS[@]:1}"; do
            cols=()
            for impl in cnibox reference netavark floor; do cols+=("$(ratio "${GR_MED[$impl,$v,$p]}" "${GR_MED[$impl,$v,$first]}")"); done
            trow "$v growth, $p / $first attached" "${cols[@]}" -
        done
        # the same growth in ms: what the fuller network adds to a call, whatever the call's
        # own size (a ratio makes the same added kernel work look larger on a faster call)
        for p in "${GR_POINTS[@]:1}"; do
            cols=()
            for impl in cnibox reference netavark floor; do cols+=("$(added_ms "${GR_MED[$impl,$v,$p]}" "${GR_MED[$impl,$v,$first]}")"); done
            trow "$v added ms, $p vs $first attached" "${cols[@]}" -
        done
        for p in "${GR_POINTS[@]:1}"; do
            trow "$v growth minus the kernel floor's, $p / $first" \
                "$(awk -v a="$(ratio "${GR_MED[cnibox,$v,$p]}" "${GR_MED[cnibox,$v,$first]}")" \
                       -v f="$(ratio "${GR_MED[floor,$v,$p]}" "${GR_MED[floor,$v,$first]}")" \
                       'BEGIN { if (a == "n/a" || f == "n/a") print "n/a"; else printf "%+.3f", a - f }')" - - - -
        done
    done
    # the picture's data: one line per size, ADD then DEL columns of the four
    for p in "${GR_POINTS[@]}"; do
        row="$p"
        for v in ADD DEL; do for impl in cnibox reference netavark floor; do row+=" $(ms "${GR_MED[$impl,$v,$p]}")"; done; done
        echo "$row" >> "$WORK/growth.dat"
    done
    [ -n "${NETAVARK:-}" ] || tnote "netavark not run: $NETAVARK_MISSING"
    tnote "At N: the $GROWTH_EDGE ADDs that bring the network to N attachments (at ${GR_POINTS[0]}: the first $GROWTH_EDGE)," \
        "and the $GROWTH_EDGE DELs from N attached down (at ${GR_POINTS[0]}: the last $GROWTH_EDGE), one at a time, each" \
        "implementation on its own network and their calls in an order drawn anew each round; the attachments in" \
        "between made and removed by $WORKERS parallel workers, unmeasured. cnibox and the reference:" \
        "bridge+host-local with ipMasq; netavark: setup/teardown with the JSON podman passes (static_ips, no IPAM);" \
        "kernel floor: the same veth, bridge port, address and route by two ip -batch processes, no IPAM, no rules." \
        "Growth: the median at N over the median at ${GR_POINTS[0]}, each implementation against itself."
    growth_plot
}

# growth_plot : the curves as an SVG (GROWTH_PLOT), when gnuplot is installed
growth_plot() {
    mkdir -p "$(dirname "$GROWTH_PLOT")"
    cp "$WORK/growth.dat" "${GROWTH_PLOT%.*}.dat"
    if ! command -v gnuplot > /dev/null; then
        tnote "Picture not drawn: gnuplot is not installed (apt-get install gnuplot-nox; tests/deps.sh installs it). Data: ${GROWTH_PLOT%.*}.dat"
        return 0
    fi
    gnuplot -e "DAT='$WORK/growth.dat'; OUT='$GROWTH_PLOT'; TITLE='$(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1 /proc/loadavg)'" \
        "$BENCH_DIR/growth.gp" || die "gnuplot failed"
    tnote "Picture: $GROWTH_PLOT (data: ${GROWTH_PLOT%.*}.dat)."
}

# parallel: GROWTH ADDs then DELs from WORKERS workers, one network per side
parallel_rows() {
    local pa_add pa_del pb_add pb_del
    parallel_run() {  # IMPL -> PAR_ADD PAR_DEL (µs)
        local impl=$1 cf="$WORK/par-$1.json" t0 t1
        instantiate "$BRIDGE_MASQ" > "$cf"
        make_containers "$GROWTH"
        printf '%s\n' "${CTRS[@]}" > "$WORK/par-ctrs"
        one() { run_plugin "$1" "$2" "$3" "p$4" "$4" > /dev/null; }
        export -f one run_plugin jq_once stamp die; export WORK
        jq_once "$cf" type .type  # as every other runner does, before its measured calls
        # RUN_SLOT (0..WORKERS-1): each running worker's own output file in run_plugin
        stamp t0; xargs -P "$WORKERS" --process-slot-var=RUN_SLOT -I{} bash -c "one $impl $cf ADD {}" < "$WORK/par-ctrs"; stamp t1; PAR_ADD=$((t1 - t0))
        stamp t0; xargs -P "$WORKERS" --process-slot-var=RUN_SLOT -I{} bash -c "one $impl $cf DEL {}" < "$WORK/par-ctrs"; stamp t1; PAR_DEL=$((t1 - t0))
        drop_containers
    }
    table "Parallel: $GROWTH attachments on one network from $WORKERS workers (s)" "cnibox" "reference" "ratio"
    say "parallel: $GROWTH ADDs, $WORKERS workers"
    parallel_run cnibox; pa_add=$PAR_ADD; pa_del=$PAR_DEL
    parallel_run reference; pb_add=$PAR_ADD; pb_del=$PAR_DEL
    trow "$GROWTH parallel ADDs, $WORKERS workers (s)" "$(secs "$pa_add")" "$(secs "$pb_add")" "$(ratio "$pa_add" "$pb_add")"
    trow "$GROWTH parallel DELs, $WORKERS workers (s)" "$(secs "$pa_del")" "$(secs "$pb_del")" "$(ratio "$pa_del" "$pb_del")"
}

declare -A GR_MED GR_WIN
say "growth: ${GROWTH_POINTS// /, } attachments"
if want host-local; then
    # host-local's two full stores are written beside the last ADD fill and removed beside the
    # first DEL fill (disk work against plugin processes; none of it measured), and its rows
    # are measured while the networks are full, with nothing in the background
    hl_setup
    growth_series hl_fill_stores hl_measure hl_remove_stores
    HL_DONE=1
else
    growth_series
fi
growth_table
parallel_rows
