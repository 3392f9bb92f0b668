//! What plugin tests look at after a call: links, addresses, routes, sysctls, masquerade
//! rules and IPAM reservations, as plain comparable values with random names and MACs
//! masked (so cnibox and the reference plugins can be compared side by side).
#![allow(dead_code)]

use crate::common::{Netns, TestEnv};
use serde_json::{json, Value};

/// `veth` + 8 hex digits (a random host veth name).
pub fn is_random_veth(s: &str) -> bool {
    s.len() == 12 && s.starts_with("veth") && s[4..].chars().all(|c| c.is_ascii_hexdigit())
}

pub fn is_mac(s: &str) -> bool {
    s.len() == 17
        && s.split(':').count() == 6
        && s.split(':')
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Random names become `veth*`, MACs become `mac*`, everywhere in the value.
pub fn mask(v: &Value) -> Value {
    match v {
        Value::String(s) if is_random_veth(s) => json!("veth*"),
        Value::String(s) if is_mac(s) => json!("mac*"),
        Value::String(s) => Value::String(mask_words(s)),
        Value::Array(a) => Value::Array(a.iter().map(mask).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), mask(v))).collect()),
        other => other.clone(),
    }
}

fn mask_words(s: &str) -> String {
    s.split(' ')
        .map(|w| {
            if is_random_veth(w) {
                "veth*"
            } else if is_mac(w) {
                "mac*"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Links other than `lo`: `name kind mtu up|down [mode M]`, masked and sorted.
pub fn links(ns: &Netns) -> Vec<String> {
    let mut out = vec![];
    for l in ns.ip_json(&["-d", "link", "show"]).as_array().unwrap() {
        let name = l["ifname"].as_str().unwrap();
        if name == "lo" {
            continue;
        }
        let flags: Vec<&str> = l["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        let kind = l["linkinfo"]["info_kind"].as_str().unwrap_or("device");
        let mut s = format!(
            "{name} {kind} mtu {} {}",
            l["mtu"],
            if flags.contains(&"UP") { "up" } else { "down" }
        );
        if let Some(mode) = l["linkinfo"]["info_data"]["mode"].as_str() {
            s.push_str(&format!(" mode {mode}"));
        }
        s.push_str(&format!(" qlen {}", l["txqlen"].as_u64().unwrap_or(0)));
        out.push(mask_words(&s));
    }
    out.sort();
    out
}

/// The reference bridge gives one veth end txqueuelen 0 where cnibox's bridge keeps the
/// kernel's 1000 (a bridge difference, outside these plugins): veth queue lengths are left
/// out; the ifb's (bandwidth's own) stays.
pub fn without_veth_qlen(links: Vec<String>) -> Vec<String> {
    links
        .into_iter()
        .map(|l| match l.contains(" veth ") {
            true => l.split(" qlen ").next().unwrap().to_string(),
            false => l,
        })
        .collect()
}

/// `conf` with `prev` as its prevResult (what a runtime sends on CHECK, and on DEL from 0.4.0).
pub fn with_prev(conf: &Value, prev: &Value) -> Value {
    let mut c = conf.clone();
    c["prevResult"] = prev.clone();
    c
}

/// `ip -d -j link show NAME` in `ns`.
pub fn link_json(ns: &Netns, name: &str) -> Value {
    ns.ip_json(&["-d", "link", "show", name])[0].clone()
}

/// The link of [`link_json`] is administratively up.
pub fn is_up(link: &Value) -> bool {
    link["flags"].as_array().unwrap().contains(&json!("UP"))
}

/// Link names other than `lo`.
pub fn link_names(ns: &Netns) -> Vec<String> {
    ns.links().into_iter().filter(|l| l != "lo").collect()
}

/// Addresses other than on `lo` and other than link-local: `dev ip/prefix scope S`.
pub fn addrs(ns: &Netns) -> Vec<String> {
    let mut out = vec![];
    for l in ns.ip_json(&["addr", "show"]).as_array().unwrap() {
        let dev = l["ifname"].as_str().unwrap();
        if dev == "lo" {
            continue;
        }
        for a in l["addr_info"].as_array().unwrap() {
            let scope = a["scope"].as_str().unwrap_or("?");
            if scope == "link" {
                continue;
            }
            out.push(mask_words(&format!(
                "{dev} {}/{} scope {scope}",
                a["local"].as_str().unwrap(),
                a["prefixlen"]
            )));
        }
    }
    out.sort();
    out
}

/// Main-table routes of both families as `ip route` would print them (fields in a fixed
/// order), masked and sorted; IPv6 link-local routes are left out.
pub fn routes(ns: &Netns) -> Vec<String> {
    let mut out = vec![];
    for fam in ["-4", "-6"] {
        for r in ns.ip_json(&[fam, "route", "show", "table", "main"]).as_array().unwrap() {
            let dst = r["dst"].as_str().unwrap();
            if dst.starts_with("fe80::") {
                continue;
            }
            let mut s = dst.to_string();
            for (key, label) in [
                ("gateway", "via"),
                ("dev", "dev"),
                ("protocol", "proto"),
                ("scope", "scope"),
                ("prefsrc", "src"),
                ("metric", "metric"),
            ] {
                match &r[key] {
                    Value::Null => {}
                    Value::String(v) => s.push_str(&format!(" {label} {v}")),
                    v => s.push_str(&format!(" {label} {v}")),
                }
            }
            out.push(mask_words(&s));
        }
    }
    out.sort();
    out
}

/// Masquerade rules of both backends in the namespace (rule text without counters).
pub fn masq_rules(ns: &Netns) -> Vec<String> {
    let mut out = vec![];
    let nft = ns
        .command("nft")
        .args(["list", "table", "inet", "cni_plugins_masquerade"])
        .output()
        .unwrap();
    for line in String::from_utf8_lossy(&nft.stdout).lines() {
        if line.contains("masquerade comment") {
            out.push(format!("nft {}", line.trim()));
        }
    }
    for tool in ["iptables-save", "ip6tables-save"] {
        let o = ns.command(tool).args(["-t", "nat"]).output().unwrap();
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            if line.starts_with("-A") {
                out.push(format!("{tool} {line}"));
            }
        }
    }
    out
}

/// host-local reservation files of a network: the files named by an address.
pub fn reservations(env: &TestEnv, network: &str) -> Vec<String> {
    env.store(network)
        .into_keys()
        .filter(|k| k.parse::<std::net::IpAddr>().is_ok())
        .collect()
}

/// Waits (up to 5 s) until no link of the host namespace satisfies `pred`: links of a
/// deleted namespace are destroyed asynchronously by the kernel.
pub fn wait_links_gone(ns: &Netns, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left: Vec<String> = link_names(ns).into_iter().filter(|l| pred(l)).collect();
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Merge `extra` into `base` (objects recursively, anything else replaces).
pub fn merge(base: &mut Value, extra: &Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                match b.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, e) => *b = e.clone(),
    }
}

/// Versions that have `interfaces` in results (0.3.0 on).
pub fn has_interfaces(version: &str) -> bool {
    !matches!(version, "0.1.0" | "0.2.0")
}

pub fn at_least(version: &str, min: &str) -> bool {
    let p = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap()).collect() };
    p(version) >= p(min)
}

/// The versions the installed reference plugins (v1.1.1) support.
pub fn reference_versions() -> Vec<&'static str> {
    crate::common::ALL_VERSIONS
        .iter()
        .copied()
        .filter(|v| !at_least(v, "1.1.0"))
        .collect()
}

/// `nft list ruleset`.
pub const NFT_RULESET: &[&str] = &["nft", "list", "ruleset"];
/// `iptables-save` (IPv4).
pub const IPTABLES_SAVE: &[&str] = &["iptables-save"];
/// `ip6tables-save`.
pub const IP6TABLES_SAVE: &[&str] = &["ip6tables-save"];

/// The firewall rules of a namespace as `nft list ruleset` and `iptables-save` print
/// them: what DEL, crash and concurrency tests compare before and after.
pub fn rules(ns: &Netns) -> String {
    rules_dumped(ns, &[NFT_RULESET, IPTABLES_SAVE])
}

/// What each of `dumps` prints in `ns`, without comment lines and counters (counters
/// change with traffic; the rules themselves must not). A dump that cannot run adds
/// nothing.
pub fn rules_dumped(ns: &Netns, dumps: &[&[&str]]) -> String {
    let mut s = String::new();
    for tool in dumps {
        if let Ok(o) = ns.command(tool[0]).args(&tool[1..]).output() {
            s += &String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| l.split(" [").next().unwrap().to_string() + "\n")
                .collect::<String>();
        }
    }
    s
}
