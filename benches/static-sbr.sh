# shellcheck shell=bash
# The static-sbr section of make bench (sourced by bench-inner.sh; uses lib.sh): static IPAM
# and the sbr meta plugin, each exec'd alone, cnibox and the reference round by round.
table "static and sbr, each plugin alone (ms; ratio = median of per-round cnibox/reference)" \
    "cnibox" "reference" "ratio"
STATIC_CONF='{"cniVersion":"1.0.0","name":"@NET@","type":"static","ipam":{"type":"static",
 "addresses":[{"address":"10.251.0.5/24","gateway":"10.251.0.1"},{"address":"2001:db8:251::5/64"}],
 "routes":[{"dst":"0.0.0.0/0"},{"dst":"192.168.0.0/16","gw":"10.251.0.254"}],"dns":{"nameservers":["10.251.0.53"]}}}'
# what bridge+host-local hands sbr in a chain: eth0 with one address per family
SBR_CONF='{"cniVersion":"1.0.0","name":"@NET@","type":"sbr","prevResult":{"cniVersion":"1.0.0",
 "interfaces":[{"name":"eth0"}],
 "ips":[{"address":"10.251.0.5/24","gateway":"10.251.0.1","interface":0},{"address":"2001:db8:251::5/64","gateway":"2001:db8:251::1","interface":0}]}}'
# run_sbr IMPL CONF VERB ID NETNS: before an ADD (unmeasured, the same for both sides) the
# container gets what the interface plugin would have made: eth0 (a veth whose peer stays in
# the container) with its carrier, its addresses and default routes; then the plugin alone
# is timed
run_sbr() {
    if [ "$3" = ADD ]; then
        ip -n "$5" -batch - <<EOB || die "sbr: could not give $5 its eth0"
link add eth0 type veth peer name eth1
link set eth1 up
link set eth0 up
addr add 10.251.0.5/24 dev eth0
addr add 2001:db8:251::5/64 dev eth0 nodad
route add default via 10.251.0.1 dev eth0
route add ::/0 via 2001:db8:251::1 dev eth0
EOB
        # the kernel brings the carrier up later, from a worker that holds the rtnl lock
        # (and adds the IPv6 link-local route): wait for it, or the timed call waits instead
        local k
        for ((k = 0; k < 200; k++)); do
            [[ $(ip -n "$5" -6 route show dev eth0) == *fe80::/64* ]] && break
            sleep 0.01
        done
    fi
    run_plugin "$@"
}
# alone_rows LABEL TEMPLATE RUNNER
alone_rows() {
    local key="s$((++ROW_NO))" a="$WORK/s$ROW_NO-cnibox.json" b="$WORK/s$ROW_NO-reference.json" verb
    instantiate "$2" > "$a"; instantiate "$2" > "$b"
    say "$1"
    compare "$key" "$3 cnibox $a" "$3 reference $b"
    for verb in ADD DEL; do
        trow "$1 $verb" "$(ms "${MED[$key,0,$verb]}")" "$(ms "${MED[$key,1,$verb]}")" "${RAT[$key,1,$verb]}"
    done
}
alone_rows "static (two addresses, routes, dns)" "$STATIC_CONF" run_plugin
alone_rows "sbr (eth0 with an IPv4 and an IPv6 address)" "$SBR_CONF" run_sbr
tnote "static allocates nothing: its DEL only reads the config. sbr ADD adds a rule and a table" \
    "per address and moves eth0's routes into them; DEL removes the rules (cnibox: and the" \
    "tables' routes)."
