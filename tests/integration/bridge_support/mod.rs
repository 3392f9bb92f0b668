//! Helpers shared by the bridge test files: configs, ADD/DEL/CHECK calls, and the
//! "nothing of the attachment is left" assertion.
#![allow(dead_code)]

use crate::common::{CallOutput, Netns, TestEnv};
use serde_json::{json, Value};
use std::net::IpAddr;

pub const NET: &str = "testConfig";
pub const BR: &str = "bridge0";
pub const IFNAME: &str = "eth0";

/// A bridge config: `extra` keys are merged over the defaults; `ipam` (when given) gets the
/// env's data dir.
pub fn conf(env: &TestEnv, version: &str, extra: Value) -> Value {
    let mut c = json!({
        "cniVersion": version,
        "name": NET,
        "type": "bridge",
        "bridge": BR,
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    if let Some(ipam) = c.get_mut("ipam").and_then(Value::as_object_mut) {
        if ipam.get("type").and_then(Value::as_str) == Some("host-local") && !ipam.contains_key("dataDir") {
            ipam.insert("dataDir".into(), env.data_dir.to_str().unwrap().into());
        }
    }
    c
}

/// host-local IPAM over `subnets` (one range set each).
pub fn ipam(subnets: &[&str]) -> Value {
    let ranges: Vec<Value> = subnets.iter().map(|s| json!([{ "subnet": s }])).collect();
    json!({"type": "host-local", "ranges": ranges})
}

pub fn add(env: &TestEnv, id: &str, ns: &Netns, c: &Value) -> CallOutput {
    env.call("bridge")
        .verb("ADD", id, ns.path_str(), IFNAME)
        .config(c)
        .run()
}

pub fn add_args(env: &TestEnv, id: &str, ns: &Netns, c: &Value, cni_args: &str) -> CallOutput {
    env.call("bridge")
        .verb("ADD", id, ns.path_str(), IFNAME)
        .env("CNI_ARGS", cni_args)
        .config(c)
        .run()
}

pub fn del(env: &TestEnv, id: &str, netns: &str, c: &Value) -> CallOutput {
    env.call("bridge").verb("DEL", id, netns, IFNAME).config(c).run()
}

/// CHECK with `prev` as prevResult.
pub fn check(env: &TestEnv, id: &str, ns: &Netns, c: &Value, prev: &Value) -> CallOutput {
    let mut c = c.clone();
    c["prevResult"] = prev.clone();
    env.call("bridge")
        .verb("CHECK", id, ns.path_str(), IFNAME)
        .config(&c)
        .run()
}

/// Spec versions with the `interfaces` result shape.
pub fn has_interfaces(version: &str) -> bool {
    !matches!(version, "0.1.0" | "0.2.0")
}

pub fn check_allowed(version: &str) -> bool {
    !matches!(version, "0.1.0" | "0.2.0" | "0.3.0" | "0.3.1")
}

/// The addresses of a result in any version's shape.
pub fn result_addrs(r: &Value) -> Vec<String> {
    if let Some(ips) = r["ips"].as_array() {
        return ips.iter().map(|i| i["address"].as_str().unwrap().to_string()).collect();
    }
    ["ip4", "ip6"]
        .iter()
        .filter_map(|k| r[k]["ip"].as_str().map(str::to_string))
        .collect()
}

/// The host veths in the host namespace.
pub fn host_veths(host: &Netns) -> Vec<String> {
    links_of_kind(host, "veth")
}

pub fn links_of_kind(ns: &Netns, kind: &str) -> Vec<String> {
    ns.ip_json(&["-d", "link", "show"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["linkinfo"]["info_kind"].as_str() == Some(kind))
        .map(|l| l["ifname"].as_str().unwrap().to_string())
        .collect()
}

/// `ip -d -j link show dev NAME` of one link.
pub fn link_details(ns: &Netns, name: &str) -> Value {
    ns.ip_json(&["-d", "link", "show", "dev", name])[0].clone()
}

/// The address reservations host-local holds for the network.
pub fn reservations(env: &TestEnv) -> Vec<String> {
    env.store(NET)
        .keys()
        .filter(|k| k.parse::<IpAddr>().is_ok())
        .cloned()
        .collect()
}

pub fn sh_in(ns: &Netns, cmd: &str) -> String {
    let out = ns.command("sh").arg("-c").arg(cmd).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn nft_ruleset(ns: &Netns) -> String {
    sh_in(ns, "nft list ruleset 2>/dev/null")
}

pub fn iptables_nat(ns: &Netns) -> String {
    sh_in(
        ns,
        "iptables-save -t nat 2>/dev/null; ip6tables-save -t nat 2>/dev/null",
    )
}

/// The container addresses with a masquerade rule on the host, of either backend.
pub fn masqueraded(host: &Netns) -> Vec<String> {
    let ipt = iptables_nat(host);
    let mut out: Vec<String> = ipt
        .lines()
        .filter_map(|l| {
            // -A POSTROUTING -s IP/32 ... -j CHAIN, where CHAIN masquerades
            let rest = l.strip_prefix("-A POSTROUTING -s ")?;
            let (src, _) = rest.split_once(' ')?;
            let chain = l.rsplit(' ').next()?;
            let masq = ipt
                .lines()
                .any(|r| r.starts_with(&format!("-A {chain} ")) && r.ends_with("-j MASQUERADE"));
            masq.then(|| src.split('/').next().unwrap().to_string())
        })
        .collect();
    out.extend(nft_ruleset(host).lines().filter_map(|l| {
        let rest = l.trim().strip_prefix("ip saddr ")?;
        rest.contains("masquerade")
            .then(|| rest.split(' ').next().unwrap().to_string())
    }));
    out.sort();
    out
}

/// Nothing of attachment `id` is left: no veth on the host, no container link, no address
/// reservation, no masquerade or spoof-check rule, no bridge port.
pub fn assert_clean(env: &TestEnv, id: &str, ctr: Option<&Netns>) {
    assert!(
        host_veths(&env.host).is_empty(),
        "veths left: {:?}",
        host_veths(&env.host)
    );
    if let Some(c) = ctr {
        assert!(!c.has_link(IFNAME), "{IFNAME} left in the container");
    }
    assert!(reservations(env).is_empty(), "reservations left: {:?}", env.store(NET));
    let nft = nft_ruleset(&env.host);
    assert!(!nft.contains(&format!("id: {id}\"")), "masquerade rule left:\n{nft}");
    assert!(
        !nft.contains(&format!("macspoofchk-{id}-")),
        "spoof-check rule left:\n{nft}"
    );
    assert!(
        !nft.contains(&format!("cni-br-iface-{id}-")),
        "spoof-check chain left:\n{nft}"
    );
    let ipt = iptables_nat(&env.host);
    assert!(
        !ipt.contains(&format!("id: \\\"{id}\\\"")),
        "iptables rule left:\n{ipt}"
    );
    assert!(!ipt.contains(":CNI-"), "iptables chain left:\n{ipt}");
}

/// Poll `cond` for up to 5 s (for kernel work that completes asynchronously).
pub fn wait_until(cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !cond() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The config of network `n` (0 → a on bridge `bra`, 1 → b on `brb`) of one family, with
/// IPAM `routes`.
pub fn network_conf(env: &TestEnv, version: &str, n: usize, v6: bool, routes: Value) -> Value {
    let mut c = conf(env, version, json!({"ipam": {"type": "host-local"}}));
    crate::common::routes::make_network(&mut c, n, v6, routes);
    c["bridge"] = json!(["bra", "brb"][n]);
    c
}
