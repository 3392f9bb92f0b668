# shellcheck shell=bash
# The dhcp section of make bench (sourced by bench-inner.sh; uses lib.sh): macvlan with dhcp
# IPAM, cnibox's plugins and daemon against the reference's plugins and daemon, both taking
# their leases from one dnsmasq in a LAN namespace behind a veth (its other end the macvlan
# master); and each daemon's memory, idle and with 100 leases. The servers and daemons run
# in mount namespaces of their own with every path in the work directory, and are ended by
# PID.
table "dhcp: macvlan + dhcp IPAM from a local dnsmasq (ms; ratio = median of per-round cnibox/reference)" \
    "cnibox" "reference" "ratio"
LAN="${HOSTNS}lan"
ip netns add "$LAN"
ip link add dhup0 type veth peer name srv0 netns "$LAN"
ip -n "$LAN" addr add 10.66.0.1/16 dev srv0
ip -n "$LAN" link set srv0 up; ip -n "$LAN" link set lo up; ip link set dhup0 up
: > "$WORK/dnsmasq.leases"
ip netns exec "$LAN" unshare -m --propagation private dnsmasq --keep-in-foreground --port=0 --conf-file=/dev/null \
    --interface=srv0 --bind-interfaces --user=root --no-ping --dhcp-authoritative \
    --dhcp-range=10.66.0.10,10.66.255.250,255.255.0.0,1h --dhcp-lease-max=100000 \
    --dhcp-leasefile="$WORK/dnsmasq.leases" --pid-file= --log-facility="$WORK/dnsmasq.log" 2> "$WORK/dnsmasq.err" &
DNSMASQ_PID=$!
unshare -m --propagation slave "$BIN" dhcp daemon -socketpath "$WORK/dhcp-cnibox.sock" \
    -statedir "$WORK/dhcp-cnibox.leases" -timeout 2s 2> "$WORK/dhcp-cnibox.log" &
CNIBOX_DAEMON=$!
unshare -m --propagation slave "$REF/dhcp" daemon -socketpath "$WORK/dhcp-reference.sock" -timeout 2s \
    2> "$WORK/dhcp-reference.log" &
REFERENCE_DAEMON=$!
dhcp_stop() {
    kill "$CNIBOX_DAEMON" "$REFERENCE_DAEMON" "$DNSMASQ_PID" 2> /dev/null || true
    wait "$CNIBOX_DAEMON" "$REFERENCE_DAEMON" "$DNSMASQ_PID" 2> /dev/null || true
}
trap dhcp_stop EXIT
for ((k = 0; k < 100; k++)); do
    [ -S "$WORK/dhcp-cnibox.sock" ] && [ -S "$WORK/dhcp-reference.sock" ] && grep -q started "$WORK/dnsmasq.log" 2> /dev/null && break
    sleep 0.1
done
MACVLAN_DHCP='{"cniVersion":"1.0.0","name":"@NET@","type":"macvlan","master":"dhup0","ipam":{"type":"dhcp","daemonSocketPath":"@SOCK@"}}'
dhcp_conf() { local t; t=$(instantiate "$MACVLAN_DHCP"); echo "${t//@SOCK@/$WORK/dhcp-$1.sock}"; }
a="$WORK/dhcp-cnibox.json"; b="$WORK/dhcp-reference.json"
dhcp_conf cnibox > "$a"; dhcp_conf reference > "$b"
say "dhcp: macvlan + dhcp"
compare dh "run_plugin cnibox $a" "run_plugin reference $b"
trow "macvlan+dhcp ADD (DISCOVER to ACK)" "$(ms "${MED[dh,0,ADD]}")" "$(ms "${MED[dh,1,ADD]}")" "${RAT[dh,1,ADD]}"
trow "macvlan+dhcp DEL (RELEASE)" "$(ms "${MED[dh,0,DEL]}")" "$(ms "${MED[dh,1,DEL]}")" "${RAT[dh,1,DEL]}"

# memory: each daemon's resident set idle, then holding 100 leases
rss_of() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
idle_a=$(rss_of "$CNIBOX_DAEMON"); idle_b=$(rss_of "$REFERENCE_DAEMON")
say "dhcp: 100 leases on each daemon"
make_containers 200
for ((i = 0; i < 100; i++)); do
    run_plugin cnibox "$a" ADD "m$i" "${CTRS[i]}" > /dev/null
    run_plugin reference "$b" ADD "m$i" "${CTRS[100 + i]}" > /dev/null
done
full_a=$(rss_of "$CNIBOX_DAEMON"); full_b=$(rss_of "$REFERENCE_DAEMON")
threads_a=$(awk '/^Threads/ {print $2}' "/proc/$CNIBOX_DAEMON/status")
threads_b=$(awk '/^Threads/ {print $2}' "/proc/$REFERENCE_DAEMON/status")
for ((i = 0; i < 100; i++)); do
    run_plugin cnibox "$a" DEL "m$i" "${CTRS[i]}" > /dev/null
    run_plugin reference "$b" DEL "m$i" "${CTRS[100 + i]}" > /dev/null
done
drop_containers
trow "daemon RSS, idle (KiB)" "$idle_a" "$idle_b" "$(ratio "$idle_a" "$idle_b")"
trow "daemon RSS, 100 leases (KiB)" "$full_a" "$full_b" "$(ratio "$full_a" "$full_b")"
trow "daemon threads, 100 leases" "$threads_a" "$threads_b" -
tnote "One dnsmasq $(dnsmasq --version | awk 'NR==1 {print $3}') (--no-ping) serves both sides; each side's" \
    "plugins and daemon are its own (the reference: Debian's macvlan, dhcp and dhcp daemon," \
    "one thread per lease). ADD is the whole exchange with the server; DEL sends DHCPRELEASE."
dhcp_stop
trap - EXIT
ip netns del "$LAN"
