#!/bin/sh
# Test plugin for runtime tests: appends one JSON line describing the call (its CNI
# environment and stdin) to $RECORD_FILE, then answers like a chained plugin.
#
# Config keys it reads:
#   tag        names this plugin instance in the records and in the interface it adds
#   ip         the address it reports (default 10.99.0.2/24)
#   fail       {"ADD": {"code":…,"msg":…}, …}: print that error object and exit 1
#   result     print this exact value on ADD instead of building one
#   sleep      seconds to sleep after recording (to test serialisation)
#   rendezvous {"dir": D, "count": N}: create D/$CNI_CONTAINERID, then wait (up to 10 s)
#              until N such files exist; fails if they never do (to prove parallelism)
set -eu
stdin=$(cat)
tag=$(printf '%s' "$stdin" | jq -r '.tag // "untagged"')
cni_env=$(env | grep '^CNI_' | cut -d= -f1 | sort | tr '\n' ' ')
jq -cn \
    --arg tag "$tag" --arg command "${CNI_COMMAND-}" --arg containerId "${CNI_CONTAINERID-}" \
    --arg netns "${CNI_NETNS-}" --arg ifname "${CNI_IFNAME-}" --arg args "${CNI_ARGS-}" \
    --arg path "${CNI_PATH-}" --arg stdin "$stdin" --arg cniEnv "$cni_env" \
    '{tag: $tag, command: $command, containerId: $containerId, netns: $netns, ifname: $ifname,
      args: $args, path: $path, cniEnv: $cniEnv, stdin: $stdin, conf: ($stdin | fromjson)}' \
    >>"${RECORD_FILE:?RECORD_FILE must be set}"

sleep_for=$(printf '%s' "$stdin" | jq -r '.sleep // 0')
[ "$sleep_for" = 0 ] || sleep "$sleep_for"

rdv_dir=$(printf '%s' "$stdin" | jq -r '.rendezvous.dir // empty')
if [ -n "$rdv_dir" ]; then
    rdv_count=$(printf '%s' "$stdin" | jq -r '.rendezvous.count')
    touch "$rdv_dir/${CNI_CONTAINERID-}"
    tries=0
    while [ "$(ls "$rdv_dir" | wc -l)" -lt "$rdv_count" ]; do
        tries=$((tries + 1))
        if [ "$tries" -gt 100 ]; then
            printf '{"code":999,"msg":"rendezvous: only %s of %s calls arrived"}' "$(ls "$rdv_dir" | wc -l)" "$rdv_count"
            exit 1
        fi
        sleep 0.1
    done
fi

failure=$(printf '%s' "$stdin" | jq -c --arg c "${CNI_COMMAND-}" '.fail[$c] // empty')
if [ -n "$failure" ]; then
    printf '%s' "$failure"
    exit 1
fi

[ "${CNI_COMMAND-}" = ADD ] || exit 0

printf '%s' "$stdin" | jq --arg tag "$tag" --arg netns "${CNI_NETNS-}" '
    (.cniVersion // "") as $v
    | (.ip // "10.99.0.2/24") as $ip
    | if has("result") then .result
      elif has("prevResult") then
        .prevResult
        | if has("interfaces") or has("ips") then .interfaces = ((.interfaces // []) + [{name: $tag}]) else . end
      elif ($v == "" or $v == "0.1.0" or $v == "0.2.0") then
        {cniVersion: $v, ip4: {ip: $ip}, dns: {}}
      elif ($v == "0.3.0" or $v == "0.3.1" or $v == "0.4.0") then
        {cniVersion: $v, interfaces: [{name: $tag, sandbox: $netns}],
         ips: [{version: (if ($ip | contains(":")) then "6" else "4" end), address: $ip, interface: 0}], dns: {}}
      else
        {cniVersion: $v, interfaces: [{name: $tag, sandbox: $netns}], ips: [{address: $ip, interface: 0}], dns: {}}
      end'
