//! Differential tests: cnibox's portmap against Debian's Go reference (/usr/lib/cni/portmap,
//! v1.1.1, iptables only) on the same inputs, each side in its own fresh node namespace:
//! results and error objects compared as JSON, the iptables state compared line for line,
//! and each side's DEL run on the other's ADD. The nftables layout is compared with the
//! reference's nftables backend through the text it hands nft (Debian's 1.1.1 predates it).
//! Deliberate differences are asserted one test each.
use crate::common;
use crate::portmap_support;

use common::{CallOutput, Netns};
use portmap_support::*;
use serde_json::{json, Value};

const ID: &str = "ctr1";
/// portmap never opens the netns; ADD and CHECK only need the variable set.
const NETNS: &str = "/var/run/netns/x";

fn prev(ips: &[&str]) -> Value {
    prev_on(IFNAME, ips)
}

/// A prevResult whose addresses are on the container interface `ifname`.
fn prev_on(ifname: &str, ips: &[&str]) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": ifname, "sandbox": "/var/run/netns/x"}],
        "ips": ips.iter().map(|a| json!({"address": a, "interface": 0})).collect::<Vec<_>>(),
        "dns": {},
    })
}

fn dual() -> Value {
    prev(&["10.0.0.2/24", "fd00::2/64"])
}

fn conf(mappings: Value, prev: &Value, extra: Value) -> Value {
    pm_conf(None, mappings, prev, extra)
}

fn with_backend(c: &Value, b: &str) -> Value {
    let mut c = c.clone();
    c["backend"] = json!(b);
    c
}

/// The result or error object, as compared (error objects: cnibox adds `cniVersion`, as
/// the spec asks; the reference prints none).
fn outcome(o: &CallOutput) -> Value {
    if o.stdout.trim().is_empty() {
        return json!({"exit": o.code});
    }
    let mut v = o.json();
    if v.get("code").is_some() {
        v.as_object_mut().unwrap().remove("cniVersion");
    }
    json!({"exit": o.code, "out": v})
}

/// One side's node, with the chain an `externalSetMarkChain` config jumps to.
fn node() -> Node {
    let n = Node::new();
    for tool in ["iptables", "ip6tables"] {
        sh(&n.env.host, &format!("{tool} -t nat -N KUBE-MARK-MASQ"));
    }
    n
}

/// The same verb on both sides; (reference, cnibox) outcomes.
fn both(r: &Node, c: &Node, verb: &str, conf: &Value) -> (Value, Value) {
    let a = outcome(&r.pm(Side::Reference, verb, ID, NETNS, conf));
    let b = outcome(&c.pm(Side::Cnibox, verb, ID, NETNS, &with_backend(conf, "iptables")));
    (a, b)
}

fn cases() -> Vec<(&'static str, Value)> {
    let basic = json!([
        {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
        {"hostPort": 8081, "containerPort": 81, "protocol": "udp", "hostIP": "10.0.0.1"},
        {"hostPort": 8443, "containerPort": 443, "protocol": "tcp", "hostIP": "fd00::1"},
        {"hostPort": 9000, "containerPort": 9000, "protocol": "sctp", "hostIP": "0.0.0.0"},
    ]);
    let many: Vec<Value> = (1..=17)
        .map(|p| json!({"hostPort": 7000 + p, "containerPort": 80, "protocol": "tcp"}))
        .collect();
    vec![
        ("dual-stack, host IPs, sctp", conf(basic.clone(), &dual(), json!({}))),
        ("snat off", conf(basic.clone(), &dual(), json!({"snat": false}))),
        ("markMasqBit 5", conf(basic.clone(), &dual(), json!({"markMasqBit": 5}))),
        (
            "externalSetMarkChain",
            conf(
                basic.clone(),
                &dual(),
                json!({"externalSetMarkChain": "KUBE-MARK-MASQ"}),
            ),
        ),
        (
            "conditions",
            conf(
                basic,
                &dual(),
                json!({"conditionsV4": ["-s", "192.168.0.0/16"], "conditionsV6": ["!", "-s", "fd99::/64"]}),
            ),
        ),
        ("17 ports (multiport groups)", conf(json!(many), &dual(), json!({}))),
        ("no mappings", conf(json!([]), &dual(), json!({}))),
        ("several addresses per family, version 0.4.0", {
            let mut p = prev(&["10.0.0.2/24", "10.0.0.3/24", "fd00::2/64"]);
            p["cniVersion"] = json!("0.4.0");
            for (ip, v) in p["ips"].as_array_mut().unwrap().iter_mut().zip(["4", "4", "6"]) {
                ip["version"] = json!(v);
            }
            let mut c = conf(
                json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]),
                &p,
                json!({}),
            );
            c["cniVersion"] = json!("0.4.0");
            c
        }),
    ]
}

#[test]
fn iptables_results_and_rules_match_the_reference() {
    if common::reference_dir().is_none() {
        return;
    }
    for (what, c) in cases() {
        let (r, cn) = (node(), node());
        let (a, b) = both(&r, &cn, "ADD", &c);
        assert_eq!(a, b, "{what}: ADD results differ");
        assert_eq!(r.ipt_nat(), cn.ipt_nat(), "{what}: iptables state differs after ADD");
        // a repeated ADD changes nothing on either side
        let (a, b) = both(&r, &cn, "ADD", &c);
        assert_eq!(a, b, "{what}: second ADD");
        assert_eq!(
            r.ipt_nat(),
            cn.ipt_nat(),
            "{what}: iptables state differs after a second ADD"
        );
        // CHECK: see the deliberate difference
        let (a, b) = both(&r, &cn, "DEL", &c);
        assert_eq!(a, b, "{what}: DEL");
        assert_eq!(r.ipt_nat(), cn.ipt_nat(), "{what}: iptables state differs after DEL");
        assert!(
            !cn.ipt_nat().contains("CNI-DN-"),
            "{what}: chain left:\n{}",
            cn.ipt_nat()
        );
    }
}

#[test]
fn each_side_deletes_what_the_other_added() {
    if common::reference_dir().is_none() {
        return;
    }
    for (what, c) in cases() {
        let (r, cn) = (node(), node());
        let empty = r.ipt_nat();
        r.pm(Side::Reference, "ADD", ID, NETNS, &c).success();
        cn.pm(Side::Cnibox, "ADD", ID, NETNS, &with_backend(&c, "iptables"))
            .success();
        // cnibox's DEL on the reference's rules, without netns, prevResult or backend key
        let mut bare = c.clone();
        bare.as_object_mut().unwrap().remove("prevResult");
        r.pm(Side::Cnibox, "DEL", ID, "", &bare).success();
        cn.pm(Side::Reference, "DEL", ID, "", &c).success();
        assert_eq!(
            r.ipt_nat(),
            cn.ipt_nat(),
            "{what}: states differ after the crossed DELs"
        );
        for n in [&r, &cn] {
            let left = n.ipt_nat();
            assert!(!left.contains("CNI-DN-"), "{what}: chain left:\n{left}");
            assert!(
                !left.contains(&format!("id: \\\"{ID}\\\"")),
                "{what}: entry rule left:\n{left}"
            );
        }
        // the shared chains stay, as the reference leaves them
        if c["runtimeConfig"]["portMappings"]
            .as_array()
            .is_some_and(|m| !m.is_empty())
        {
            assert_ne!(r.ipt_nat(), empty, "{what}");
        }
    }
}

#[test]
fn bad_inputs_give_the_reference_codes_and_messages() {
    if common::reference_dir().is_none() {
        return;
    }
    let p = dual();
    let m = |v: Value| json!([v]);
    let mut no_prev = conf(
        m(json!({"hostPort": 1, "containerPort": 1, "protocol": "tcp"})),
        &p,
        json!({}),
    );
    no_prev.as_object_mut().unwrap().remove("prevResult");
    let bad = vec![
        (
            "snat of the wrong type",
            "ADD",
            conf(json!([]), &p, json!({"snat": "yes"})),
        ),
        (
            "hostPort string",
            "ADD",
            conf(m(json!({"hostPort": "1"})), &p, json!({})),
        ),
        (
            "hostPort fraction",
            "ADD",
            conf(m(json!({"hostPort": 1.5})), &p, json!({})),
        ),
        (
            "containerPort 0",
            "ADD",
            conf(m(json!({"hostPort": 1, "containerPort": 0})), &p, json!({})),
        ),
        (
            "hostPort negative",
            "ADD",
            conf(m(json!({"hostPort": -3, "containerPort": 1})), &p, json!({})),
        ),
        ("markMasqBit 32", "ADD", conf(json!([]), &p, json!({"markMasqBit": 32}))),
        (
            "markMasqBit -1",
            "CHECK",
            conf(json!([]), &p, json!({"markMasqBit": -1})),
        ),
        (
            "markMasqBit with externalSetMarkChain",
            "ADD",
            conf(json!([]), &p, json!({"markMasqBit": 3, "externalSetMarkChain": "X"})),
        ),
        (
            "conditions of the wrong type",
            "ADD",
            conf(json!([]), &p, json!({"conditionsV4": "-s 1.2.3.4"})),
        ),
        ("prevResult a number", "ADD", conf(json!([]), &json!(5), json!({}))),
        // Go names the innermost struct (the anonymous runtimeConfig: no name) and the path
        ("portMappings an object", "ADD", conf(json!({"a": 1}), &p, json!({}))),
        ("a mapping a number", "ADD", conf(json!([5]), &p, json!({}))),
        ("ADD without prevResult", "ADD", no_prev.clone()),
        ("CHECK without prevResult", "CHECK", no_prev),
    ];
    for (what, verb, c) in bad {
        let (r, cn) = (Node::new(), Node::new());
        let a = outcome(&r.pm(Side::Reference, verb, ID, NETNS, &c));
        let b = outcome(&cn.pm(Side::Cnibox, verb, ID, NETNS, &c));
        assert_eq!(a, b, "{what}");
        assert_eq!(b["exit"], 1, "{what}: must fail");
        assert_eq!(cn.ipt_nat(), Node::new().ipt_nat(), "{what}: cnibox left state");
    }
}

/// Deliberate: a DEL whose config holds a value ADD refuses fails in the reference, every
/// time; cnibox's DEL removes the attachment's rules and succeeds, so a runtime's cleanup
/// DEL after a refused ADD ends.
#[test]
fn difference_del_succeeds_on_a_config_add_refuses() {
    let p = dual();
    let m = |e: Value| json!([e]);
    for (what, c) in [
        (
            "hostPort negative",
            conf(m(json!({"hostPort": -3, "containerPort": 1})), &p, json!({})),
        ),
        (
            "containerPort 0",
            conf(m(json!({"hostPort": 1, "containerPort": 0})), &p, json!({})),
        ),
        (
            "hostPort of the wrong type",
            conf(m(json!({"hostPort": "80", "containerPort": 1})), &p, json!({})),
        ),
    ] {
        let (r, cn) = (Node::new(), Node::new());
        if common::reference_dir().is_some() {
            assert_eq!(
                outcome(&r.pm(Side::Reference, "DEL", ID, NETNS, &c))["exit"],
                1,
                "{what}"
            );
        }
        assert_eq!(
            outcome(&cn.pm(Side::Cnibox, "DEL", ID, NETNS, &c)),
            json!({"exit": 0}),
            "{what}"
        );
    }
}

/// Deliberate: the reference 1.1.1's CHECK looks for the IPv4 rules in ip6tables too, so
/// it fails every pod it set up (IPv4-only and dual-stack alike); cnibox checks each family
/// with that family's rules.
#[test]
fn deliberate_check_passes_on_what_add_made() {
    if common::reference_dir().is_none() {
        return;
    }
    for p in [prev(&["10.0.0.2/24"]), dual()] {
        let c = conf(
            json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]),
            &p,
            json!({}),
        );
        let (r, cn) = (node(), node());
        r.pm(Side::Reference, "ADD", ID, NETNS, &c).success();
        cn.pm(Side::Cnibox, "ADD", ID, NETNS, &with_backend(&c, "iptables"))
            .success();
        assert_eq!(r.ipt_nat(), cn.ipt_nat());
        let msg = r.pm(Side::Reference, "CHECK", ID, NETNS, &c).failure(999);
        assert!(msg.contains("could not check ipv6 dnat"), "{msg}");
        cn.pm(Side::Cnibox, "CHECK", ID, NETNS, &with_backend(&c, "iptables"))
            .success();
    }
}

/// Deliberate: the reference names its chain after network and container alone, so a
/// container's second interface on the same network adds its forwards to the first one's
/// chain, and the DEL of either removes both. cnibox gives the second interface a chain of
/// its own and keeps the reference's chain for the first, so each implementation still
/// deletes the other's first interface.
#[test]
fn deliberate_a_second_interface_on_the_network_gets_a_chain_of_its_own() {
    if common::reference_dir().is_none() {
        return;
    }
    let tcp = |port: u16| json!([{"hostPort": port, "containerPort": 80, "protocol": "tcp"}]);
    let eth0 = with_backend(&conf(tcp(8080), &prev(&["10.0.0.2/24"]), json!({})), "iptables");
    let eth1 = with_backend(
        &conf(tcp(9090), &prev_on("eth1", &["10.0.0.3/24"]), json!({})),
        "iptables",
    );
    let on_eth1 = |n: &Node, side: Side, verb: &str| n.portmap(side).exec(verb, ID, NETNS, "eth1", &eth1);
    let chains = |n: &Node| n.ipt_nat().lines().filter(|l| l.starts_with(":CNI-DN-")).count();

    let (r, cn) = (node(), node());
    for (n, side) in [(&r, Side::Reference), (&cn, Side::Cnibox)] {
        n.pm(side, "ADD", ID, NETNS, &eth0).success();
        on_eth1(n, side, "ADD").success();
        let both = n.ipt_nat();
        assert!(
            both.contains("10.0.0.2:80") && both.contains("10.0.0.3:80"),
            "{side:?}:\n{both}"
        );
    }
    assert_eq!((chains(&r), chains(&cn)), (1, 2));
    on_eth1(&r, Side::Reference, "DEL").success();
    on_eth1(&cn, Side::Cnibox, "DEL").success();
    assert!(
        !r.ipt_nat().contains("10.0.0.2:80"),
        "the reference kept eth0's forward"
    );
    assert!(cn.ipt_nat().contains("10.0.0.2:80"), "{}", cn.ipt_nat());
    cn.pm(Side::Cnibox, "CHECK", ID, NETNS, &eth0).success();

    // cnibox's second interface next to the reference's first
    let mixed = node();
    mixed.pm(Side::Reference, "ADD", ID, NETNS, &eth0).success();
    let reference_only = mixed.ipt_nat();
    on_eth1(&mixed, Side::Cnibox, "ADD").success();
    on_eth1(&mixed, Side::Cnibox, "CHECK").success();
    on_eth1(&mixed, Side::Cnibox, "DEL").success();
    assert_eq!(
        mixed.ipt_nat(),
        reference_only,
        "cnibox's DEL of eth1 kept the reference's eth0"
    );
    on_eth1(&mixed, Side::Cnibox, "ADD").success();
    mixed.pm(Side::Reference, "DEL", ID, NETNS, &eth0).success();
    let left = mixed.ipt_nat();
    assert!(left.contains("10.0.0.3:80") && !left.contains("10.0.0.2:80"), "{left}");
    on_eth1(&mixed, Side::Cnibox, "DEL").success();
    assert!(!mixed.ipt_nat().contains("CNI-DN-"), "{}", mixed.ipt_nat());
}

/// Deliberate: bad ports, protocols and host IPs fail before anything changes; the
/// reference creates chains first and fails in iptables (or ignores a bad host IP).
#[test]
fn deliberate_bad_mappings_fail_before_any_change() {
    if common::reference_dir().is_none() {
        return;
    }
    let p = prev(&["10.0.0.2/24"]);
    for (m, ours) in [
        (
            json!({"hostPort": 70000, "containerPort": 80, "protocol": "tcp"}),
            "failed to parse config: Invalid host port number: 70000",
        ),
        (
            json!({"hostPort": 80, "containerPort": 80, "protocol": "foo"}),
            "failed to parse config: Invalid protocol \"foo\" for host port 80 (tcp, udp or sctp)",
        ),
        (
            json!({"hostPort": 80, "containerPort": 80, "protocol": ""}),
            "failed to parse config: Invalid protocol \"\" for host port 80 (tcp, udp or sctp)",
        ),
    ] {
        let c = conf(json!([m]), &p, json!({}));
        let (r, cn) = (node(), node());
        let before = cn.ipt_nat();
        let theirs = r.pm(Side::Reference, "ADD", ID, NETNS, &c).failure(999);
        assert!(theirs.starts_with("unable to setup DNAT: running ["), "{theirs}");
        assert_ne!(r.ipt_nat(), before, "the reference leaves chains behind");
        assert_eq!(cn.pm(Side::Cnibox, "ADD", ID, NETNS, &c).failure(999), ours);
        assert_eq!(cn.ipt_nat(), before);
    }
    // a host IP that is no address: the reference skips it for IPv4 (nothing forwarded)
    let c = conf(
        json!([{"hostPort": 80, "containerPort": 80, "protocol": "tcp", "hostIP": "nope"}]),
        &p,
        json!({}),
    );
    let r = node();
    r.pm(Side::Reference, "ADD", ID, NETNS, &c).success();
    let cn = node();
    assert_eq!(
        cn.pm(Side::Cnibox, "ADD", ID, NETNS, &c).failure(999),
        "failed to parse config: Invalid host IP \"nope\" for host port 80"
    );
}

/// What the reference's nftables backend hands nft (knftables) for `mappings` and a
/// container at 10.0.0.2 / fd00::2, snat on.
fn reference_nft_text() -> String {
    let mut t = String::new();
    for (fam, ip, port_ip, local) in [
        ("ip", "10.0.0.2", "10.0.0.2", true),
        ("ip6", "fd00::2", "[fd00::2]", false),
    ] {
        t.push_str(&format!(
            "add table {fam} cni_hostport {{ comment \"CNI portmap plugin\" ; }}\n\
             add chain {fam} cni_hostport hostports\n\
             add chain {fam} cni_hostport hostip_hostports\n\
             add chain {fam} cni_hostport hostports_all\n\
             flush chain {fam} cni_hostport hostports_all\n\
             add rule {fam} cni_hostport hostports_all jump hostip_hostports\n\
             add rule {fam} cni_hostport hostports_all jump hostports\n\
             add chain {fam} cni_hostport prerouting {{ type nat hook prerouting priority -100 ; }}\n\
             flush chain {fam} cni_hostport prerouting\n\
             add rule {fam} cni_hostport prerouting fib daddr type local jump hostports_all\n\
             add chain {fam} cni_hostport output {{ type nat hook output priority -100 ; }}\n\
             flush chain {fam} cni_hostport output\n\
             add rule {fam} cni_hostport output fib daddr type local jump hostports_all\n\
             add chain {fam} cni_hostport masquerading {{ type nat hook postrouting priority 100 ; }}\n\
             add rule {fam} cni_hostport hostports tcp dport 8080 dnat to {port_ip}:80 comment \"{ID}\"\n"
        ));
        if fam == "ip" {
            t.push_str(&format!(
                "add rule ip cni_hostport hostports ip daddr 10.0.0.1 udp dport 8081 dnat to 10.0.0.2:81 comment \"{ID}\"\n"
            ));
        } else {
            t.push_str(&format!(
                "add rule ip6 cni_hostport hostports ip6 daddr fd00::1 tcp dport 8443 dnat to [fd00::2]:443 comment \"{ID}\"\n"
            ));
        }
        if local {
            // hostIP 0.0.0.0 is IPv4: every local address, of that family only
            t.push_str(&format!(
                "add rule ip cni_hostport hostports sctp dport 9000 dnat to {port_ip}:9000 comment \"{ID}\"\n"
            ));
        }
        t.push_str(&format!(
            "add rule {fam} cni_hostport masquerading {fam} saddr {ip} {fam} daddr {ip} masquerade comment \"{ID}\"\n"
        ));
        if local {
            t.push_str(&format!(
                "add rule ip cni_hostport masquerading ip saddr 127.0.0.1 ip daddr {ip} masquerade comment \"{ID}\"\n"
            ));
        }
    }
    t
}

fn nft_f(ns: &Netns, text: &str) {
    use std::io::Write;
    let mut child = ns
        .command("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "nft -f:\n{text}");
}

/// `nft -j list` of both tables, without handles (the same rules may get other numbers).
fn nft_json(ns: &Netns) -> Value {
    let mut out = vec![];
    for fam in ["ip", "ip6"] {
        let o = ns
            .command("nft")
            .args(["-j", "list", "table", fam, "cni_hostport"])
            .output()
            .unwrap();
        let mut v: Value = serde_json::from_slice(&o.stdout).unwrap_or(json!({"nftables": []}));
        for item in v["nftables"].as_array_mut().unwrap() {
            for (_, o) in item.as_object_mut().unwrap() {
                if let Some(o) = o.as_object_mut() {
                    o.remove("handle");
                }
            }
            if item.get("metainfo").is_none() {
                out.push(item.clone());
            }
        }
    }
    Value::Array(out)
}

fn nft_case() -> Value {
    let m = json!([
        {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
        {"hostPort": 8081, "containerPort": 81, "protocol": "udp", "hostIP": "10.0.0.1"},
        {"hostPort": 8443, "containerPort": 443, "protocol": "tcp", "hostIP": "fd00::1"},
        {"hostPort": 9000, "containerPort": 9000, "protocol": "sctp", "hostIP": "0.0.0.0"},
    ]);
    with_backend(&conf(m, &dual(), json!({})), "nftables")
}

#[test]
fn nftables_rules_list_exactly_like_the_reference_backend() {
    let (ours, theirs) = (Node::new(), Node::new());
    if !have_nft(&ours.env.host) {
        eprintln!("skipping: nf_tables is not available");
        return;
    }
    ours.pm(Side::Cnibox, "ADD", ID, NETNS, &nft_case()).success();
    nft_f(&theirs.env.host, &reference_nft_text());
    assert_eq!(nft_json(&ours.env.host), nft_json(&theirs.env.host));
    assert_eq!(ours.nft_tables(), theirs.nft_tables(), "nft list text");
    // CHECK accepts the reference's rules as this attachment's
    theirs.pm(Side::Cnibox, "CHECK", ID, NETNS, &nft_case()).success();
}

#[test]
fn nftables_each_side_deletes_what_the_other_added() {
    let (ours, theirs) = (Node::new(), Node::new());
    if !have_nft(&ours.env.host) {
        eprintln!("skipping: nf_tables is not available");
        return;
    }
    // cnibox's DEL (no netns, no prevResult) removes the reference's rules
    nft_f(&theirs.env.host, &reference_nft_text());
    let mut bare = nft_case();
    bare.as_object_mut().unwrap().remove("prevResult");
    theirs.pm(Side::Cnibox, "DEL", ID, "", &bare).success();
    assert!(
        !theirs.nft_tables().contains(&format!("comment \"{ID}\"")),
        "{}",
        theirs.nft_tables()
    );
    // the reference's DEL (knftables: list the chains as JSON, delete by handle the rules
    // whose comment is the container ID) removes cnibox's
    ours.pm(Side::Cnibox, "ADD", ID, NETNS, &nft_case()).success();
    for fam in ["ip", "ip6"] {
        for chain in ["hostports", "hostip_hostports", "masquerading"] {
            let o = ours
                .env
                .host
                .command("nft")
                .args(["-j", "list", "chain", fam, "cni_hostport", chain])
                .output()
                .unwrap();
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            for item in v["nftables"].as_array().unwrap() {
                let r = &item["rule"];
                if r["comment"] == ID {
                    let h = r["handle"].to_string();
                    sh(
                        &ours.env.host,
                        &format!("nft delete rule {fam} cni_hostport {chain} handle {h}"),
                    );
                }
            }
        }
    }
    assert!(
        !ours.nft_tables().contains(&format!("comment \"{ID}\"")),
        "{}",
        ours.nft_tables()
    );
    // and both leave the same (empty) layout
    assert_eq!(nft_json(&ours.env.host), nft_json(&theirs.env.host));
}

/// A host port the reference forwards (its iptables-nft rules in the node's `ip nat`) is
/// refused to another container by either backend, naming the reference's attachment, and
/// the check reads those rules over netlink: it runs no process (it ran `iptables-save -t
/// nat`, milliseconds of every ADD on a node the reference's portmap had been on).
#[test]
fn ports_the_reference_forwards_are_refused_without_a_process() {
    if common::reference_dir().is_none() {
        return;
    }
    let n = node();
    let (_, c) = &cases()[0];
    n.pm(Side::Reference, "ADD", ID, NETNS, c).success();
    let other = prev(&["10.0.0.3/24", "fd00::3/64"]);
    let taken = format!("container {ID} of network {NET}");
    for (mapping, msg) in [
        (
            json!({"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}),
            format!("host port 8080/tcp is already mapped by {taken}"),
        ),
        (
            json!({"hostPort": 8081, "containerPort": 80, "protocol": "udp", "hostIP": "10.0.0.1"}),
            format!("host port 8081/udp on 10.0.0.1 is already mapped by {taken} on 10.0.0.1"),
        ),
        (
            json!({"hostPort": 8443, "containerPort": 80, "protocol": "tcp"}),
            format!("host port 8443/tcp is already mapped by {taken} on fd00::1"),
        ),
    ] {
        for backend in BACKENDS {
            let log = n.env.tmp.path().join(format!("strace-{}", common::unique("pm")));
            let out = n
                .portmap(Side::Cnibox)
                .verb("ADD", "ctr2", NETNS, IFNAME)
                .config(&pm_conf(Some(backend), json!([mapping]), &other, json!({})))
                .run_under(&["strace", "-f", "-qq", "-e", "trace=execve", "-o", log.to_str().unwrap()]);
            assert_eq!(out.failure(999), msg, "{backend} {mapping}");
            let execs = std::fs::read_to_string(&log).unwrap();
            assert_eq!(
                execs.lines().count(),
                1,
                "{backend} {mapping}: only portmap itself ran:\n{execs}"
            );
        }
    }
    // a port the reference does not forward is free
    let free = pm_conf(
        Some("nftables"),
        json!([{"hostPort": 8082, "containerPort": 80, "protocol": "tcp"}]),
        &other,
        json!({}),
    );
    n.pm(Side::Cnibox, "ADD", "ctr2", NETNS, &free).success();
    n.pm(Side::Cnibox, "DEL", "ctr2", NETNS, &free).success();
}
