# Section of bench-inner.sh: where one headline ADD (cnibox, bridge+host-local with ipMasq)
# spends its time, from `strace -f -T -ttt -yy` of one call, and the floor below it.
table "Where the time goes: one cnibox bridge+host-local ADD with ipMasq" "ms" "share" "count"
bd_cf="$WORK/bd.json"; instantiate "$BRIDGE_MASQ" > "$bd_cf"
make_containers 2
run_plugin cnibox "$bd_cf" ADD bdwarm "${CTRS[1]}" > /dev/null  # the bridge and the store exist, as in the headline
CNI_COMMAND=ADD CNI_CONTAINERID=bd CNI_NETNS=/run/netns/${CTRS[0]} CNI_IFNAME=eth0 CNI_PATH="$WORK/cnibox" \
    strace -f -T -ttt -yy -o "$WORK/bd.trace" "$WORK/cnibox/bridge" < "$bd_cf" > /dev/null
run_plugin cnibox "$bd_cf" DEL bd "${CTRS[0]}" > /dev/null; run_plugin cnibox "$bd_cf" DEL bdwarm "${CTRS[1]}" > /dev/null
drop_containers
# classify every syscall of the trace; prints "class ms count" lines and "total ms"
awk -v data="$WORK/data" '
function dur(l) { if (match(l, /<[0-9.]+>$/)) return substr(l, RSTART + 1, RLENGTH - 2) * 1000; return 0 }
{
    pid = $1; ts = $2
    if (NR == 1) { main = pid; start = ts }
    call = $3; sub(/\(.*/, "", call); d = dur($0)
    if (pid != main) { next }                      # helpers are counted by the wait below
    end = ts + d / 1000
    if (call == "execve") { next }
    if (!stdin_seen && call == "read" && $0 ~ /read\(0/) { stdin_seen = 1; startup = (ts - start) * 1000 }
    if (!stdin_seen) next
    # a call interrupted by another process: classified by its start, timed by its end
    if ($0 ~ /<unfinished \.\.\.>$/) { pending = $0; next }
    line = $0
    if (call == "<...") { call = $4; line = pending }
    cls = "other syscalls"
    if (line ~ /NETLINK:\[NETFILTER/) { cls = "rule work: nf_tables netlink"; if (call ~ /^send/) req[cls]++ }
    else if (line ~ /NETLINK:/) { cls = "netlink: links, addresses, routes (rtnetlink)"; if (call ~ /^send/) req[cls]++ }
    else if (call ~ /^(wait4|waitid|clone|clone3|vfork|fork|pipe2|poll)$/ || line ~ /pipe:\[/) cls = "rule work: helper processes (nft/iptables)"
    else if (index(line, data)) cls = "IPAM files (host-local store)"
    else if (line ~ /\/proc\/sys\//) cls = "sysctls"
    else if (call == "setns" || line ~ /\/run\/netns\//) cls = "namespace switches"
    else if (call ~ /^(mmap|munmap|mprotect|brk|mremap)$/) cls = "memory (mmap/munmap)"
    t[cls] += d; n[cls]++; sys += d
}
END {
    total = (end - start) * 1000
    printf "process start (execve until stdin is read)\t%.2f\t1\n", startup
    for (c in t) printf "%s\t%.2f\t%d%s\n", c, t[c], n[c], (c in req) ? " (" req[c] " requests)" : ""
    printf "user space between syscalls (and tracing overhead)\t%.2f\t-\n", total - startup - sys
    printf "TOTAL\t%.2f\n", total
}' "$WORK/bd.trace" > "$WORK/bd.classes"
bd_total=$(awk -F'\t' '$1 == "TOTAL" {print $2}' "$WORK/bd.classes")
while IFS=$'\t' read -r cls t cnt; do
    [ "$cls" = TOTAL ] && continue
    trow "$cls" "$t" "$(awk -v a="$t" -v b="$bd_total" 'BEGIN {printf "%.0f%%", 100*a/b}')" "$cnt"
done < <(grep -v '^TOTAL' "$WORK/bd.classes" | sort -t$'\t' -k2 -rn)
trow "total under strace" "$bd_total" "100%" "$(grep -cv -e '+++' "$WORK/bd.trace") syscalls"
trow "total untraced (headline median)" "$(ms "${MED[h1,0,ADD]:-n/a}")" - -
# the floor: a static program that only exits, and the kernel work without the processes
if command -v gcc > /dev/null && echo 'int main(void){return 0;}' | gcc -static -O2 -x c -o "$WORK/hello" - 2> /dev/null; then
    hello=("$WORK/hello"); hello_name="a static C main(){return 0;}"
else
    hello=("$(command -v busybox)" true); hello_name="busybox true (static)"
fi
: > "$WORK/hello.t"
# shellcheck disable=SC2154  # stamp sets t0 and t1 (printf -v)
for ((i = 0; i < N; i++)); do stamp t0; "${hello[@]}"; stamp t1; echo $((t1 - t0)) >> "$WORK/hello.t"; done
hello_us=$(median < "$WORK/hello.t")
trow "floor: fork+exec+exit of $hello_name" "$(ms "$hello_us")" - 1
trow "floor: the same kernel work by ip -batch (2 processes)" "$(ms "${FLOOR_BRIDGE_ADD:-n/a}")" - 2
if [ -n "${FLOOR_BRIDGE_ADD:-}" ]; then
    trow "floor: that kernel work without the processes" \
        "$(awk -v f="$FLOOR_BRIDGE_ADD" -v h="$hello_us" 'BEGIN {printf "%.2f", (f - 2*h)/1000}')" - -
fi
tnote "strace -T inflates every syscall; read the shares, not the sums. The kernel floor has no" \
    "masquerade and no IPAM (the plugins table has the same floor beside the plain bridge)."
