//! The firewall plugin: real traffic through a host namespace whose FORWARD policy is DROP
//! (as Docker leaves it), the ingress policies with traffic between bridges, the reference
//! layout rule for rule, differential runs against the Go reference (results, rule state,
//! each deleting and checking what the other made), bad inputs, and no process where
//! nothing is to change.
use crate::common;

use common::{CallOutput, Netns, TestEnv};
use serde_json::{json, Value};
use std::process::Command;

const NET: &str = "fwnet";

// ---------------------------------------------------------------------------------------
// Topology: containers on cnibox bridges in the host namespace, and an "outside" namespace
// routed through the host by a veth pair (the far side of forwarded traffic).

/// `/proc/sys/...` of a namespace, written (DAD off makes IPv6 addresses usable at once).
fn write_sysctl(ns: &Netns, key: &str, value: &str) {
    ns.exec(&["sh", "-c", &format!("echo {value} > /proc/sys/{key}")]);
}

fn no_dad(ns: &Netns) {
    for k in ["net/ipv6/conf/all/accept_dad", "net/ipv6/conf/default/accept_dad"] {
        write_sysctl(ns, k, "0");
    }
}

struct Lab {
    env: TestEnv,
    outside: Netns,
}

const OUTSIDE4: &str = "192.168.77.2";
const OUTSIDE6: &str = "fd77:ff::2";

impl Lab {
    /// A host namespace whose filter FORWARD policy is `policy` (both families), with an
    /// outside namespace behind a veth pair.
    fn new(policy: &str) -> Lab {
        let env = TestEnv::new();
        let outside = Netns::new("o");
        no_dad(&env.host);
        no_dad(&outside);
        env.host.ip(&[
            "link",
            "add",
            "fwout",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &outside.name,
        ]);
        env.host.ip(&["addr", "add", "192.168.77.1/24", "dev", "fwout"]);
        env.host.ip(&["addr", "add", "fd77:ff::1/64", "dev", "fwout"]);
        env.host.ip(&["link", "set", "fwout", "up"]);
        outside.ip(&["addr", "add", &format!("{OUTSIDE4}/24"), "dev", "eth0"]);
        outside.ip(&["addr", "add", &format!("{OUTSIDE6}/64"), "dev", "eth0"]);
        outside.ip(&["link", "set", "eth0", "up"]);
        outside.ip(&["route", "add", "default", "via", "192.168.77.1"]);
        outside.ip(&["-6", "route", "add", "default", "via", "fd77:ff::1"]);
        write_sysctl(&env.host, "net/ipv4/ip_forward", "1");
        write_sysctl(&env.host, "net/ipv6/conf/all/forwarding", "1");
        for tool in ["iptables", "ip6tables"] {
            env.host.exec(&[tool, "-w", "-P", "FORWARD", policy]);
        }
        Lab { env, outside }
    }

    fn bridge_conf(&self, net: &str, bridge: &str, n: u8) -> Value {
        json!({
            "cniVersion": "1.0.0", "name": net, "type": "bridge", "bridge": bridge, "isGateway": true,
            "ipam": {
                "type": "host-local",
                "dataDir": self.env.data_dir.to_str().unwrap(),
                "ranges": [[{"subnet": format!("10.77.{n}.0/24")}], [{"subnet": format!("fd77:{n}::/64")}]],
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
            }
        })
    }

    /// A container on `bridge` (network `net`, subnets 10.77.n.0/24 and fd77:n::/64):
    /// its namespace and the bridge plugin's result.
    fn container(&self, id: &str, net: &str, bridge: &str, n: u8) -> (Netns, Value) {
        let ns = self.env.container();
        no_dad(&ns);
        let r = self
            .env
            .call("bridge")
            .exec("ADD", id, ns.path_str(), "eth0", &self.bridge_conf(net, bridge, n))
            .success();
        (ns, r)
    }
}

fn addr_of(result: &Value, v6: bool) -> String {
    result["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["address"].as_str().unwrap().split('/').next().unwrap().to_string())
        .find(|a| a.contains(':') == v6)
        .unwrap()
}

pub(super) fn fw_conf(version: &str, extra: Value, prev: &Value) -> Value {
    let mut c = json!({"cniVersion": version, "name": NET, "type": "firewall"});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    if !prev.is_null() {
        c["prevResult"] = prev.clone();
    }
    c
}

/// The config with the iptables backend's records in the test's temp dir.
pub(super) fn confined(env: &TestEnv, conf: &Value) -> Value {
    let mut c = conf.clone();
    if c.get("dataDir").is_none() {
        c["dataDir"] = json!(env.data_dir.join("firewall"));
    }
    c
}

pub(super) fn fw(env: &TestEnv, verb: &str, id: &str, conf: &Value) -> CallOutput {
    env.call("firewall")
        .exec(verb, id, "/run/netns/gone", "eth0", &confined(env, conf))
}

/// `iptables-save -t filter` of the host namespace without comments and counters.
pub(super) fn filter_state(host: &Netns, tool: &str) -> Vec<String> {
    host.exec(&[tool, "-t", "filter"])
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match l.find(" [") {
            Some(i) if l.starts_with(':') => l[..i].to_string(),
            _ => l.to_string(),
        })
        .collect()
}

pub(super) fn state(host: &Netns) -> (Vec<String>, Vec<String>) {
    (
        filter_state(host, "iptables-save"),
        filter_state(host, "ip6tables-save"),
    )
}

// ---------------------------------------------------------------------------------------
// Traffic.

#[test]
fn forward_drop_is_overridden_for_the_container_after_add_and_again_after_del() {
    let lab = Lab::new("DROP");
    let (ctr, r) = lab.container("ctr1", NET, "fwbr0", 1);
    let conf = fw_conf("1.0.0", json!({}), &r);
    // Docker's DROP policy: nothing the container sends is forwarded
    assert!(
        !ctr.ping(OUTSIDE4),
        "forwarded before ADD: the DROP policy is not in force"
    );
    assert!(!ctr.ping(OUTSIDE6));

    assert_eq!(
        fw(&lab.env, "ADD", "ctr1", &conf).success(),
        r,
        "prevResult passes through"
    );
    assert!(ctr.ping(OUTSIDE4), "IPv4 still dropped after ADD");
    assert!(ctr.ping(OUTSIDE6), "IPv6 still dropped after ADD");
    // the rules open the container's own connections and their replies, not inbound ones
    assert!(
        !lab.outside.ping(&addr_of(&r, false)),
        "a new inbound connection was let through"
    );
    fw(&lab.env, "CHECK", "ctr1", &conf).success();
    // CNI-ADMIN comes first in CNI-FORWARD: the administrator's drop wins
    let ip = format!("{}/32", addr_of(&r, false));
    lab.env
        .host
        .exec(&["iptables", "-w", "-A", "CNI-ADMIN", "-s", &ip, "-j", "DROP"]);
    assert!(!ctr.ping(OUTSIDE4), "a CNI-ADMIN drop did not override the accept");
    lab.env.host.exec(&["iptables", "-w", "-F", "CNI-ADMIN"]);
    assert!(ctr.ping(OUTSIDE4));

    fw(&lab.env, "DEL", "ctr1", &conf).success();
    assert!(!ctr.ping(OUTSIDE4), "IPv4 still forwarded after DEL");
    assert!(!ctr.ping(OUTSIDE6), "IPv6 still forwarded after DEL");
    // idempotent, with or without prevResult
    fw(&lab.env, "DEL", "ctr1", &conf).success();
    fw(&lab.env, "DEL", "ctr1", &fw_conf("1.0.0", json!({}), &Value::Null)).success();
}

#[test]
fn rules_of_one_container_leave_the_others_alone() {
    let lab = Lab::new("DROP");
    let (a, ra) = lab.container("ctrA", NET, "fwbr0", 1);
    let (b, rb) = lab.container("ctrB", NET, "fwbr0", 1);
    let (ca, cb) = (fw_conf("1.0.0", json!({}), &ra), fw_conf("1.0.0", json!({}), &rb));
    fw(&lab.env, "ADD", "ctrA", &ca).success();
    fw(&lab.env, "ADD", "ctrB", &cb).success();
    assert!(a.ping(OUTSIDE4) && b.ping(OUTSIDE4));
    fw(&lab.env, "DEL", "ctrA", &ca).success();
    assert!(!a.ping(OUTSIDE4), "A's rules survived its DEL");
    assert!(b.ping(OUTSIDE4), "A's DEL removed B's rules");
    fw(&lab.env, "CHECK", "ctrB", &cb).success();
    let msg = fw(&lab.env, "CHECK", "ctrA", &ca).failure(999);
    assert!(msg.starts_with("expected rule [-d 10.77.1."), "{msg}");
}

/// The reference's integration test (ns0, ns1 on foo; ns2 on bar), with traffic.
#[test]
fn same_bridge_policy_lets_the_bridge_talk_and_keeps_other_bridges_out() {
    let lab = Lab::new("ACCEPT");
    let (foo0, r0) = lab.container("foo0", "foo", "fwfoo", 3);
    let (foo1, r1) = lab.container("foo1", "foo", "fwfoo", 3);
    let (bar0, r2) = lab.container("bar0", "bar", "fwbar", 4);
    assert!(foo0.ping(&addr_of(&r2, false)), "no connectivity to start with");
    for (id, r) in [("foo0", &r0), ("foo1", &r1), ("bar0", &r2)] {
        let mut c = fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), r);
        c["name"] = r["interfaces"][0]["name"].clone();
        fw(&lab.env, "ADD", id, &c).success();
        fw(&lab.env, "CHECK", id, &c).success();
    }
    assert!(foo0.ping(&addr_of(&r1, false)), "foo0 cannot reach foo1");
    assert!(foo1.ping(&addr_of(&r0, true)), "foo1 cannot reach foo0 over IPv6");
    assert!(!foo0.ping(&addr_of(&r2, false)), "foo0 reached bar0");
    assert!(!bar0.ping(&addr_of(&r0, false)), "bar0 reached foo0");
    assert!(!bar0.ping(&addr_of(&r1, true)), "bar0 reached foo1 over IPv6");
    // the outside is not a bridge: leaving the bridge is still allowed
    assert!(foo0.ping(OUTSIDE4));
}

#[test]
fn isolated_policy_keeps_containers_of_one_bridge_apart() {
    let lab = Lab::new("ACCEPT");
    let (foo0, r0) = lab.container("foo0", "foo", "fwfoo", 3);
    let (_foo1, r1) = lab.container("foo1", "foo", "fwfoo", 3);
    let (bar0, r2) = lab.container("bar0", "bar", "fwbar", 4);
    assert!(foo0.ping(&addr_of(&r1, false)));
    for (id, r) in [("foo0", &r0), ("foo1", &r1), ("bar0", &r2)] {
        fw(
            &lab.env,
            "ADD",
            id,
            &fw_conf("1.0.0", json!({"ingressPolicy": "isolated"}), r),
        )
        .success();
    }
    // bridged traffic reaches iptables through br_netfilter (bridge-nf-call-iptables=1)
    assert!(!foo0.ping(&addr_of(&r1, false)), "foo0 reached foo1 on the same bridge");
    assert!(!foo0.ping(&addr_of(&r2, false)), "foo0 reached bar0");
    assert!(!bar0.ping(&addr_of(&r0, false)), "bar0 reached foo0");
    assert!(foo0.ping(OUTSIDE4), "leaving the bridge is allowed");
}

// ---------------------------------------------------------------------------------------
// Rule state: the reference's layout, its tests, differential runs.

pub(super) fn prev(version: &str) -> Value {
    let v = |n: &str| if version == "0.4.0" { json!(n) } else { Value::Null };
    let mut p = json!({
        "cniVersion": version,
        "interfaces": [{"name": "cni0"}, {"name": "veth1", "mac": "aa:bb:cc:dd:ee:ff"}, {"name": "eth0", "sandbox": "/x"}],
        "ips": [
            {"address": "10.88.0.2/24", "gateway": "10.88.0.1", "interface": 2},
            {"address": "fd00::2/64", "interface": 2}
        ],
        "dns": {"nameservers": ["10.88.0.1"]}
    });
    if version == "0.4.0" {
        p["ips"][0]["version"] = v("4");
        p["ips"][1]["version"] = v("6");
    }
    p
}

pub(super) const REFERENCE_V4: &[&str] = &[
    "*filter",
    ":INPUT ACCEPT",
    ":FORWARD ACCEPT",
    ":OUTPUT ACCEPT",
    ":CNI-ADMIN -",
    ":CNI-FORWARD -",
    "-A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD",
    "-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN",
    "-A CNI-FORWARD -d 10.88.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
    "-A CNI-FORWARD -s 10.88.0.2/32 -j ACCEPT",
    "COMMIT",
];

/// Ports of the reference's firewall_iptables_test.go, for every version it applies to.
#[test]
fn passes_prev_result_through_and_installs_checks_and_cleans_up_per_version() {
    for version in ["0.4.0", "1.0.0", "1.1.0"] {
        let env = TestEnv::new();
        let conf = fw_conf(version, json!({"backend": "iptables"}), &prev(version));
        let r = fw(&env, "ADD", "dummy", &conf).success();
        assert_eq!(r["cniVersion"], version);
        assert_eq!(r["interfaces"], prev(version)["interfaces"], "{version}");
        assert_eq!(r["ips"][0]["address"], "10.88.0.2/24");
        assert_eq!(r["ips"][1]["address"], "fd00::2/64");
        assert_eq!(filter_state(&env.host, "iptables-save"), REFERENCE_V4, "{version}");
        let v6 = filter_state(&env.host, "ip6tables-save");
        assert!(
            v6.contains(&"-A CNI-FORWARD -s fd00::2/128 -j ACCEPT".to_string()),
            "{v6:?}"
        );
        fw(&env, "CHECK", "dummy", &conf).success();
        fw(&env, "DEL", "dummy", &conf).success();
        let (v4, v6) = state(&env.host);
        for s in [&v4, &v6] {
            assert!(
                !s.iter().any(|l| l.contains("fd00::2") || l.contains("10.88.0.2")),
                "{s:?}"
            );
            // the shared chains stay, as the reference leaves them
            assert!(s.contains(&":CNI-FORWARD -".to_string()), "{s:?}");
        }
    }
}

#[test]
fn custom_admin_chain_name() {
    let env = TestEnv::new();
    let conf = fw_conf("1.0.0", json!({"iptablesAdminChainName": "CNI-foobar"}), &prev("1.0.0"));
    fw(&env, "ADD", "dummy", &conf).success();
    for s in [state(&env.host).0, state(&env.host).1] {
        assert!(s.contains(&":CNI-foobar -".to_string()), "{s:?}");
        assert!(
            s.contains(
                &"-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-foobar"
                    .to_string()
            ),
            "{s:?}"
        );
    }
    fw(&env, "CHECK", "dummy", &conf).success();
    // CHECK with the default name misses the admin jump, in the reference's words
    let msg = fw(&env, "CHECK", "dummy", &fw_conf("1.0.0", json!({}), &prev("1.0.0"))).failure(999);
    assert_eq!(
        msg,
        "expected CNI-FORWARD rule [-m comment --comment CNI firewall plugin admin overrides -j CNI-ADMIN] not found"
    );
}

#[test]
fn add_is_idempotent_and_an_address_family_without_addresses_is_left_alone() {
    let env = TestEnv::new();
    let conf = fw_conf("1.0.0", json!({}), &prev("1.0.0"));
    fw(&env, "ADD", "dummy", &conf).success();
    let once = state(&env.host);
    fw(&env, "ADD", "dummy", &conf).success();
    assert_eq!(state(&env.host), once, "a second ADD changed the rules");

    let env = TestEnv::new();
    let mut v4only = prev("1.0.0");
    v4only["ips"].as_array_mut().unwrap().pop();
    fw(&env, "ADD", "dummy", &fw_conf("1.0.0", json!({}), &v4only)).success();
    let v6 = filter_state(&env.host, "ip6tables-save");
    assert!(
        !v6.iter().any(|l| l.contains("CNI-")),
        "ip6tables touched for an IPv4-only pod: {v6:?}"
    );
    fw(&env, "CHECK", "dummy", &fw_conf("1.0.0", json!({}), &v4only)).success();
}

/// Run the same calls through the reference and through cnibox in two host namespaces;
/// results, errors and the rule state after each call must be the same.
#[test]
fn differential_against_the_reference() {
    let (cn, rf) = (TestEnv::new(), TestEnv::new());
    let Some(_) = rf.reference("firewall") else { return };
    let mut second = prev("1.0.0");
    second["ips"][0]["address"] = json!("10.88.0.3/24");
    second["ips"][1]["address"] = json!("fd00::3/64");
    let steps: Vec<(&str, &str, Value)> = vec![
        (
            "ADD",
            "a",
            fw_conf("1.0.0", json!({"backend": "iptables"}), &prev("1.0.0")),
        ),
        ("ADD", "a", fw_conf("1.0.0", json!({}), &prev("1.0.0"))),
        (
            "ADD",
            "b",
            fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), &second),
        ),
        (
            "CHECK",
            "b",
            fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), &second),
        ),
        (
            "ADD",
            "c",
            fw_conf("0.4.0", json!({"iptablesAdminChainName": "CNI-foobar"}), &prev("0.4.0")),
        ),
        ("DEL", "a", fw_conf("1.0.0", json!({}), &prev("1.0.0"))),
        ("CHECK", "a", fw_conf("1.0.0", json!({}), &prev("1.0.0"))),
        ("DEL", "a", fw_conf("1.0.0", json!({}), &prev("1.0.0"))),
        (
            "DEL",
            "b",
            fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), &Value::Null),
        ),
        ("CHECK", "b", fw_conf("1.0.0", json!({}), &second)),
        ("DEL", "b", fw_conf("1.0.0", json!({}), &second)),
    ];
    for (verb, id, conf) in &steps {
        if *verb == "DEL" && conf.get("prevResult").is_none() {
            // the one deliberate difference: cnibox finds b's rules by its record, the
            // reference cannot find them without prevResult; its DEL with prevResult
            // then brings both to the same state
            fw(&cn, verb, id, conf).success();
            let theirs = rf.reference("firewall").unwrap();
            theirs.exec(verb, id, "/run/netns/gone", "eth0", conf).success();
            assert!(state(&rf.host).0.iter().any(|l| l.contains("10.88.0.3")));
            assert!(
                !state(&cn.host).0.iter().any(|l| l.contains("10.88.0.3")),
                "DEL without prevResult left b"
            );
            let with_prev = fw_conf("1.0.0", json!({}), &second);
            let theirs = rf.reference("firewall").unwrap();
            theirs.exec(verb, id, "/run/netns/gone", "eth0", &with_prev).success();
            assert_eq!(state(&cn.host), state(&rf.host), "rule state differs after {verb} {id}");
            continue;
        }
        let ours = fw(&cn, verb, id, conf);
        let theirs = rf
            .reference("firewall")
            .unwrap()
            .exec(verb, id, "/run/netns/gone", "eth0", conf);
        assert_eq!(ours.code, theirs.code, "{verb} {id}: {ours:?} vs {theirs:?}");
        if ours.ok() {
            assert_eq!(ours.success(), theirs.success(), "{verb} {id}: results differ");
        } else if ours.json()["msg"] != theirs.json()["msg"] {
            // the reference checks the families in Go's random map order: the first
            // missing rule it names may be of either family
            let family_neutral = |m: &Value| {
                let m = m.as_str().unwrap_or_default();
                m.starts_with("expected rule [-d ")
                    && m.ends_with(" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT] not found")
            };
            assert!(
                family_neutral(&ours.json()["msg"]) && family_neutral(&theirs.json()["msg"]),
                "{verb} {id}: {ours:?} vs {theirs:?}"
            );
        }
        assert_eq!(state(&cn.host), state(&rf.host), "rule state differs after {verb} {id}");
    }
}

/// A node switched between the reference and cnibox: each checks and deletes what the
/// other made.
#[test]
fn cnibox_and_the_reference_check_and_delete_each_others_rules() {
    let env = TestEnv::new();
    let Some(_) = env.reference("firewall") else { return };
    let reference = || env.reference("firewall").unwrap();
    let policies = [json!({}), json!({"ingressPolicy": "same-bridge"})];
    let before = state(&env.host);
    for extra in policies {
        let conf = fw_conf("1.0.0", extra, &prev("1.0.0"));
        // reference ADD → cnibox CHECK, DEL
        reference().exec("ADD", "x", "/run/netns/gone", "eth0", &conf).success();
        let made = state(&env.host);
        fw(&env, "ADD", "x", &conf).success();
        assert_eq!(state(&env.host), made, "cnibox ADD duplicated the reference's rules");
        fw(&env, "CHECK", "x", &conf).success();
        fw(&env, "DEL", "x", &conf).success();
        let after_ours = state(&env.host);
        // cnibox ADD → reference CHECK, DEL: the same state as the other way round
        fw(&env, "ADD", "x", &conf).success();
        assert_eq!(state(&env.host), made);
        reference()
            .exec("CHECK", "x", "/run/netns/gone", "eth0", &conf)
            .success();
        reference().exec("DEL", "x", "/run/netns/gone", "eth0", &conf).success();
        assert_eq!(state(&env.host), after_ours);
    }
    assert_ne!(state(&env.host), before);
}

// ---------------------------------------------------------------------------------------
// Bad input: the reference's codes and messages, and nothing changes.

#[test]
fn bad_inputs_get_the_references_codes_and_messages() {
    let env = TestEnv::new();
    let rf = TestEnv::new();
    let has_reference = env.reference("firewall").is_some();
    let mut no_ifaces = prev("1.0.0");
    no_ifaces["interfaces"] = json!([]);
    let cases: Vec<(&str, Value)> = vec![
        ("ADD", fw_conf("1.0.0", json!({}), &Value::Null)),
        ("CHECK", fw_conf("1.0.0", json!({}), &Value::Null)),
        ("ADD", fw_conf("0.3.1", json!({}), &prev("0.3.1"))),
        ("DEL", fw_conf("0.3.1", json!({}), &prev("0.3.1"))),
        ("ADD", fw_conf("1.0.0", json!({"backend": 4}), &prev("1.0.0"))),
        ("ADD", fw_conf("1.0.0", json!({"ingressPolicy": true}), &prev("1.0.0"))),
        (
            "ADD",
            fw_conf("1.0.0", json!({}), &json!({"cniVersion": "1.0.0", "ips": "x"})),
        ),
        (
            "ADD",
            fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), &no_ifaces),
        ),
    ];
    let before = state(&env.host);
    for (verb, conf) in &cases {
        let ours = fw(&env, verb, "bad", conf);
        assert_ne!(ours.code, 0, "{verb} {conf}: accepted");
        assert_eq!(
            state(&env.host),
            before,
            "{verb} {conf}: a failed call left rules behind"
        );
        if has_reference {
            let theirs = rf
                .reference("firewall")
                .unwrap()
                .exec(verb, "bad", "/run/netns/gone", "eth0", conf);
            let (o, t) = (ours.json(), theirs.json());
            // Go names a list field's element type ("[]*types100.IPConfig"); cnibox's
            // shared decoder says "[]"
            let msg = |v: &Value| {
                let m = v["msg"].as_str().unwrap().to_string();
                m.find(" of type []").map_or(m.clone(), |i| m[..i].to_string())
            };
            assert_eq!((&o["code"], msg(&o)), (&t["code"], msg(&t)), "{verb} {conf}");
        }
    }
    // where the reference changes rules before failing, cnibox fails first
    let msg = fw(
        &env,
        "ADD",
        "bad",
        &fw_conf("1.0.0", json!({"ingressPolicy": "closed"}), &prev("1.0.0")),
    )
    .failure(999);
    assert_eq!(msg, "unknown ingress policy: \"closed\"");
    assert_eq!(state(&env.host), before, "an unknown policy left rules behind");
    // cnibox's own refusals
    let msg = fw(
        &env,
        "ADD",
        "bad",
        &fw_conf("1.0.0", json!({"backend": "firewalld"}), &prev("1.0.0")),
    )
    .failure(2);
    assert!(msg.contains("\"firewalld\"") && msg.contains("D-Bus"), "{msg}");
    fw(
        &env,
        "CHECK",
        "bad",
        &fw_conf("1.0.0", json!({"backend": "firewalld"}), &prev("1.0.0")),
    )
    .failure(2);
    fw(
        &env,
        "DEL",
        "bad",
        &fw_conf("1.0.0", json!({"backend": "firewalld"}), &prev("1.0.0")),
    )
    .success();
    let msg = fw(
        &env,
        "ADD",
        "bad",
        &fw_conf("1.0.0", json!({"backend": "pf"}), &prev("1.0.0")),
    )
    .failure(7);
    assert!(msg.contains("\"pf\""), "{msg}");
    let long = "A".repeat(29);
    fw(
        &env,
        "ADD",
        "bad",
        &fw_conf("1.0.0", json!({ "iptablesAdminChainName": long }), &prev("1.0.0")),
    )
    .failure(7);
    let mut evil = prev("1.0.0");
    evil["interfaces"][0]["name"] = json!("br0\n-A FORWARD -j DROP");
    let msg = fw(
        &env,
        "ADD",
        "bad",
        &fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), &evil),
    )
    .failure(999);
    assert!(msg.starts_with("invalid bridge name"), "{msg}");
    assert_eq!(state(&env.host), before);
    let e = fw(&env, "ADD", "bad", &fw_conf("0.3.1", json!({}), &prev("0.3.1")));
    assert_eq!(
        e.json()["details"],
        "config is \"0.3.1\", plugin supports [\"0.4.0\" \"1.0.0\" \"1.1.0\"]"
    );
}

// ---------------------------------------------------------------------------------------
// Processes on an iptables-legacy host (an iptables-nft host starts none: see
// `iptables_nft::no_process_on_an_iptables_nft_host`): one iptables-save per family to
// read, one iptables-restore per family and change, none where there is nothing to read.

/// A PATH whose plain iptables-save/-restore are iptables-legacy's, as on a legacy host.
fn legacy_path(env: &TestEnv) -> String {
    let dir = env.tmp.path().join("legacy-bin");
    std::fs::create_dir_all(&dir).unwrap();
    for v in ["iptables", "ip6tables"] {
        for tool in ["save", "restore"] {
            std::os::unix::fs::symlink(format!("/usr/sbin/{v}-legacy-{tool}"), dir.join(format!("{v}-{tool}")))
                .unwrap();
        }
    }
    format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", dir.display())
}

/// The programs a call executed (strace -f), other than the plugin itself.
fn execs(env: &TestEnv, path: &str, verb: &str, conf: &Value) -> Vec<String> {
    let log = env.tmp.path().join(format!("strace-{verb}"));
    let out = env
        .tool("firewall")
        .env("PATH", path)
        .env("CNI_COMMAND", verb)
        .env("CNI_CONTAINERID", "dummy")
        .env("CNI_NETNS", "/run/netns/gone")
        .env("CNI_IFNAME", "eth0")
        .config(&confined(env, conf))
        .run_under(&["strace", "-f", "-qq", "-e", "trace=execve", "-o", log.to_str().unwrap()]);
    assert!(out.ok(), "{out:?}");
    std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("execve(\"") && !l.contains("= -1"))
        .skip(1)
        .map(|l| {
            let p = &l[l.find("execve(\"").unwrap() + 8..];
            let p = &p[..p.find('"').unwrap()];
            p.rsplit('/').next().unwrap().to_string()
        })
        .collect()
}

#[test]
fn on_an_iptables_legacy_host_processes_only_where_something_is_read_or_changed() {
    if Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is missing: run sh tests/deps.sh");
    }
    let env = TestEnv::new();
    let path = legacy_path(&env);
    let conf = fw_conf("1.0.0", json!({}), &prev("1.0.0"));
    // nothing was ever set up: DEL finds that out without a process
    assert!(execs(&env, &path, "DEL", &conf).is_empty());
    let first = execs(&env, &path, "ADD", &conf);
    assert_eq!(
        first,
        [
            "iptables-save",
            "iptables-restore",
            "ip6tables-save",
            "ip6tables-restore"
        ]
        .map(String::from)
    );
    // the rules are in the legacy tables, none in nf_tables
    assert_eq!(filter_state(&env.host, "iptables-legacy-save"), REFERENCE_V4);
    assert!(!state(&env.host).0.iter().any(|l| l.contains("CNI")));
    assert_eq!(
        execs(&env, &path, "ADD", &conf),
        ["iptables-save", "ip6tables-save"].map(String::from)
    );
    assert_eq!(
        execs(&env, &path, "CHECK", &conf),
        ["iptables-save", "ip6tables-save"].map(String::from)
    );
    assert_eq!(execs(&env, &path, "DEL", &conf).len(), 4);
    assert!(!filter_state(&env.host, "iptables-legacy-save")
        .iter()
        .any(|l| l.contains("10.88.0.2")));
    assert_eq!(
        execs(&env, &path, "DEL", &conf),
        ["iptables-save", "ip6tables-save"].map(String::from)
    );
    assert!(execs(&env, &path, "DEL", &fw_conf("1.0.0", json!({}), &Value::Null)).is_empty());
    let mut no_ips = prev("1.0.0");
    no_ips["ips"] = json!([]);
    assert!(execs(&env, &path, "ADD", &fw_conf("1.0.0", json!({}), &no_ips)).is_empty());
}

/// A legacy host's PATH (see [`legacy_path`]) whose `iptables-restore` succeeds for its
/// first `ok4` runs and then fails, and `ip6tables-restore` likewise after `ok6`: a
/// failure where the kernel would give one (a restore applies all of its lines or none).
fn failing_legacy_path(env: &TestEnv, name: &str, ok4: u32, ok6: u32) -> String {
    use std::os::unix::fs::PermissionsExt;
    let dir = env.tmp.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (v, ok) in [("iptables", ok4), ("ip6tables", ok6)] {
        std::os::unix::fs::symlink(format!("/usr/sbin/{v}-legacy-save"), dir.join(format!("{v}-save"))).unwrap();
        let script = dir.join(format!("{v}-restore"));
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nn=$(cat \"$0.runs\" 2>/dev/null || echo 0)\necho $((n + 1)) > \"$0.runs\"\n\
                 [ \"$n\" -lt {ok} ] || {{ echo \"$0: injected failure\" >&2; exit 1; }}\n\
                 exec /usr/sbin/{v}-legacy-restore \"$@\"\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", dir.display())
}

/// Regression: a failed ADD removed the attachment's record even when undoing its rules
/// failed (DEL without prevResult and GC then could not find them), and even when the
/// record was an earlier successful ADD's whose rules stay.
#[test]
fn a_failed_add_leaves_nothing_or_the_record_its_rules_need() {
    let env = TestEnv::new();
    let call = |path: &str, verb: &str, conf: &Value| {
        env.tool("firewall")
            .env("PATH", path)
            .exec(verb, "ctr", "/run/netns/gone", "eth0", &confined(&env, conf))
    };
    let record = env.data_dir.join("firewall").join(NET).join("ctr-eth0");
    let rules = || -> Vec<String> {
        filter_state(&env.host, "iptables-legacy-save")
            .into_iter()
            .filter(|l| l.contains("10.88.0.2"))
            .collect()
    };
    let dual = fw_conf("1.0.0", json!({}), &prev("1.0.0"));
    let want = "ip6tables-restore --noflush: ";

    // IPv4's rules are made, IPv6's fail, IPv4's are undone: nothing is left
    let out = call(&failing_legacy_path(&env, "undo-works", 2, 0), "ADD", &dual);
    assert!(out.failure(999).contains(want), "{out:?}");
    assert_eq!(rules(), Vec::<String>::new());
    assert!(!record.exists(), "the record of a fully undone ADD stays");

    // the undo fails too: the rules stay, and so does the record that finds them
    let out = call(&failing_legacy_path(&env, "undo-fails", 1, 0), "ADD", &dual);
    assert!(out.failure(999).contains(want), "{out:?}");
    assert_eq!(rules().len(), 2, "IPv4's accept rules were made");
    assert!(record.exists(), "the record went while its rules stayed");
    let good = legacy_path(&env);
    call(&good, "DEL", &fw_conf("1.0.0", json!({}), &Value::Null)).success();
    assert_eq!(
        rules(),
        Vec::<String>::new(),
        "DEL without prevResult found them by the record"
    );
    assert!(!record.exists());

    // an earlier ADD's record stays when a later ADD of the attachment fails and is undone
    let mut v4_only = prev("1.0.0");
    v4_only["ips"].as_array_mut().unwrap().truncate(1);
    call(&good, "ADD", &fw_conf("1.0.0", json!({}), &v4_only)).success();
    let earlier = std::fs::read_to_string(&record).unwrap();
    let out = call(&failing_legacy_path(&env, "again", 2, 0), "ADD", &dual);
    assert!(out.failure(999).contains(want), "{out:?}");
    assert_eq!(std::fs::read_to_string(&record).ok(), Some(earlier));
    assert_eq!(rules().len(), 2, "the earlier ADD's rules stay");
    call(&good, "DEL", &fw_conf("1.0.0", json!({}), &Value::Null)).success();
    assert_eq!(rules(), Vec::<String>::new());
    assert!(!record.exists());
}

/// Regression: the iptables backend's record was named after the network, container ID and
/// interface as given, and a file name is at most 255 bytes: a valid 250-character container
/// ID failed ADD (`File name too long`), and a DEL without prevResult on a 300-character
/// network name failed on every retry.
#[test]
fn records_of_long_container_ids_and_network_names() {
    let env = TestEnv::new();
    let (long_id, long_net) = ("c".repeat(250), "n".repeat(300));
    let accepts = || {
        let (v4, v6) = state(&env.host);
        v4.iter()
            .chain(&v6)
            .filter(|l| l.contains("10.88.0.2/32") || l.contains("fd00::2/128"))
            .count()
    };
    for (id, net) in [(&*long_id, NET), ("ctr", &*long_net), (&*long_id, &*long_net)] {
        for v in ["0.4.0", "1.0.0", "1.1.0"] {
            let what = format!("{v}: {} / {}", id.len(), net.len());
            fw(&env, "ADD", id, &fw_conf(v, json!({"name": net}), &prev(v))).success();
            assert_eq!(accepts(), 4, "{what}");
            let bare = fw_conf(v, json!({"name": net}), &Value::Null);
            fw(&env, "DEL", id, &bare).success();
            assert_eq!(
                accepts(),
                0,
                "{what}: DEL without prevResult found the rules by the record"
            );
            fw(&env, "DEL", id, &bare).success();
        }
    }
    // a DEL without prevResult of an attachment ADD never recorded
    let bare = fw_conf("1.0.0", json!({"name": long_net}), &Value::Null);
    fw(&env, "DEL", &long_id, &bare).success();
    // the same result and rules as the reference
    let rf = TestEnv::new();
    if let Some(theirs) = rf.reference("firewall") {
        let conf = fw_conf("1.0.0", json!({"name": long_net}), &prev("1.0.0"));
        let ours = fw(&env, "ADD", &long_id, &conf).success();
        assert_eq!(
            ours,
            theirs.exec("ADD", &long_id, "/run/netns/gone", "eth0", &conf).success()
        );
        assert_eq!(state(&env.host), state(&rf.host));
    }
}

/// Regression: the last DEL of a network (and the GC of its last attachment) left the
/// network's empty record directory behind (`/run/cni/firewall/<network>`, one for every
/// network a node ever had).
#[test]
fn the_last_record_of_a_network_takes_its_directory_along() {
    let env = TestEnv::new();
    let dir = env.data_dir.join("firewall").join(NET);
    let mut second = prev("1.1.0");
    second["ips"][0]["address"] = json!("10.88.0.3/24");
    second["ips"][1]["address"] = json!("fd00::3/64");
    fw(&env, "ADD", "a", &fw_conf("1.1.0", json!({}), &prev("1.1.0"))).success();
    fw(&env, "ADD", "b", &fw_conf("1.1.0", json!({}), &second)).success();
    fw(&env, "DEL", "a", &fw_conf("1.1.0", json!({}), &Value::Null)).success();
    assert!(dir.is_dir(), "b's record is still there");
    fw(&env, "DEL", "b", &fw_conf("1.1.0", json!({}), &second)).success();
    assert!(!dir.exists(), "the last DEL left the directory");
    fw(&env, "DEL", "b", &fw_conf("1.1.0", json!({}), &Value::Null)).success();

    fw(&env, "ADD", "c", &fw_conf("1.1.0", json!({}), &prev("1.1.0"))).success();
    assert!(dir.is_dir());
    let gc = fw_conf("1.1.0", json!({"cni.dev/valid-attachments": []}), &Value::Null);
    env.call("firewall")
        .command("GC")
        .config(&confined(&env, &gc))
        .run()
        .success();
    assert!(!dir.exists(), "GC of the last attachment left the directory");
}

/// An ADD writes its record under the xtables lock, with its rules, so a DEL removing the
/// network's last record and directory cannot run between the ADD making the directory and
/// writing the record into it (the ADD would fail on the vanished directory).
#[test]
fn the_record_is_written_under_the_xtables_lock() {
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let id = format!("locked{}", std::process::id());
    let record = env.data_dir.join("firewall").join(NET).join(format!("{id}-eth0"));
    let held = cnibox::firewall_rules::iptables::save_restore::lock().unwrap();
    let lock_file = std::fs::metadata("/run/cnibox/xtables.lock").unwrap();
    let inode = format!(":{} ", lock_file.ino());
    // the ADD's process waiting for the lock (other tests' processes may wait too)
    let add_waits = || {
        std::fs::read_to_string("/proc/locks").unwrap().lines().any(|l| {
            let pid = l.split_whitespace().nth(5).unwrap_or_default();
            l.contains(" -> FLOCK ")
                && l.contains(&inode)
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| String::from_utf8_lossy(&env).contains(&format!("CNI_CONTAINERID={id}\0")))
        })
    };
    std::thread::scope(|s| {
        let add = s.spawn(|| fw(&env, "ADD", &id, &fw_conf("1.0.0", json!({}), &prev("1.0.0"))));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !add_waits() {
            assert!(
                std::time::Instant::now() < deadline,
                "the ADD never waited for the lock"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(!record.exists(), "the record was written before the lock was taken");
        drop(held);
        add.join().unwrap().success();
    });
    assert!(record.exists());
    fw(&env, "DEL", &id, &fw_conf("1.0.0", json!({}), &Value::Null)).success();
}

#[test]
fn gc_and_status_succeed() {
    let env = TestEnv::new();
    let conf = fw_conf("1.1.0", json!({"cni.dev/valid-attachments": []}), &Value::Null);
    env.call("firewall")
        .command("GC")
        .config(&confined(&env, &conf))
        .run()
        .success();
    env.call("firewall")
        .command("STATUS")
        .config(&confined(&env, &conf))
        .run()
        .success();
    let v = env.call("firewall").command("VERSION").run().success();
    assert_eq!(v["supportedVersions"], json!(["0.4.0", "1.0.0", "1.1.0"]));
}

// ---------------------------------------------------------------------------------------
// The DEL matrix: every situation a runtime can produce, per version and policy.

#[derive(Clone, Copy, Debug)]
enum Cell {
    Normal,
    Repeated,
    EmptyNetns,
    NetnsDeleted,
    PrevResultOfAnotherVersion,
    /// cnitool's chain (bridge + firewall) with its cache: prevResult from the cache.
    ThroughCnitool,
    /// A corrupt cache: the chain's DEL comes without prevResult.
    CorruptCache,
    /// DEL without prevResult, called directly.
    NoPrevResult,
}

fn cnitool(lab: &Lab, conf_dir: &std::path::Path, verb: &str, id: &str, ns: &Netns) -> CallOutput {
    lab.env
        .tool("cnitool")
        .args([verb, NET, ns.path_str(), "--container-id", id])
        .env("NETCONFPATH", conf_dir.to_str().unwrap())
        .env("CNI_PATH", lab.env.bin_dir.to_str().unwrap())
        .env("CNI_CACHE_DIR", lab.env.cache_dir.to_str().unwrap())
        .run()
}

#[test]
fn del_matrix() {
    let lab = Lab::new("DROP");
    let conf_dir = lab.env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    // the baseline: what a clean ADD+DEL leaves (the shared chains and jumps, as the reference)
    let warm = fw_conf("1.0.0", json!({}), &prev("1.0.0"));
    fw(&lab.env, "ADD", "warm", &warm).success();
    fw(&lab.env, "DEL", "warm", &warm).success();
    let baseline = state(&lab.env.host);
    let cells = [
        Cell::Normal,
        Cell::Repeated,
        Cell::EmptyNetns,
        Cell::NetnsDeleted,
        Cell::PrevResultOfAnotherVersion,
        Cell::ThroughCnitool,
        Cell::CorruptCache,
        Cell::NoPrevResult,
    ];
    let mut n = 0;
    let combos = ["0.4.0", "1.0.0", "1.1.0"]
        .into_iter()
        .flat_map(|v| ["open", "same-bridge"].into_iter().map(move |p| (v, p)))
        .flat_map(|(v, p)| ["iptables", "nftables"].into_iter().map(move |b| (v, p, b)));
    for (version, policy, backend) in combos {
        {
            for cell in cells {
                n += 1;
                let id = format!("dm{n}");
                let what = format!("{version} {policy} {backend} {cell:?}");
                let extra = json!({ "ingressPolicy": policy, "backend": backend });
                let nft = backend == "nftables";
                let c = fw_conf(version, extra.clone(), &prev(version));
                // the per-bridge isolation rules stay on DEL (other containers may use the bridge)
                let now = || {
                    let mut now = state(&lab.env.host);
                    now.0.retain(|l| !l.contains("ISOLATION"));
                    now.1.retain(|l| !l.contains("ISOLATION"));
                    now
                };
                let del = |netns: &str, conf: &Value| {
                    let out = lab
                        .env
                        .call("firewall")
                        .exec("DEL", &id, netns, "eth0", &confined(&lab.env, conf));
                    assert!(out.ok(), "{what}: {out:?}");
                };
                match cell {
                    Cell::ThroughCnitool | Cell::CorruptCache => {
                        let mut bridge = lab.bridge_conf(NET, "fwbr0", 5);
                        bridge.as_object_mut().unwrap().remove("name");
                        let mut firewall = confined(&lab.env, &extra);
                        firewall["type"] = json!("firewall");
                        let list = json!({"cniVersion": version, "name": NET, "plugins": [bridge, firewall]});
                        std::fs::write(conf_dir.join("fw.conflist"), list.to_string()).unwrap();
                        let ns = lab.env.container();
                        let added = cnitool(&lab, &conf_dir, "add", &id, &ns);
                        assert!(added.ok(), "{what}: {added:?}");
                        // (an nftables accept cannot open iptables' DROP policy: see above)
                        assert_eq!(ns.ping(OUTSIDE4), !nft, "{what}: traffic after the chain's ADD");
                        let cached = lab.env.cache_dir.join("results").join(format!("{NET}-{id}-eth0"));
                        let corrupt = matches!(cell, Cell::CorruptCache);
                        if corrupt {
                            let bytes = std::fs::read(&cached).unwrap();
                            std::fs::write(&cached, &bytes[..bytes.len() / 2]).unwrap();
                        }
                        let out = cnitool(&lab, &conf_dir, "del", &id, &ns);
                        assert!(out.ok(), "{what}: {out:?}");
                        // without prevResult the rules are still found: nftables by the
                        // attachment in their comment, iptables by cnibox's record
                        assert_eq!(now(), baseline, "{what}: rules left behind");
                        assert!(accepts(&lab.env.host).is_empty(), "{what}: nftables rules left behind");
                        continue;
                    }
                    _ => {}
                }
                fw(&lab.env, "ADD", &id, &c).success();
                match cell {
                    Cell::Normal => del("/run/netns/gone", &c),
                    Cell::Repeated => {
                        del("/run/netns/gone", &c);
                        del("/run/netns/gone", &c);
                        del("/run/netns/gone", &fw_conf(version, extra.clone(), &Value::Null));
                    }
                    Cell::EmptyNetns => del("", &c),
                    Cell::NoPrevResult => del("/run/netns/gone", &fw_conf(version, extra.clone(), &Value::Null)),
                    Cell::NetnsDeleted => {
                        let ns = lab.env.container();
                        let path = ns.path_str().to_string();
                        drop(ns);
                        del(&path, &c);
                    }
                    Cell::PrevResultOfAnotherVersion => {
                        let other = if version == "0.4.0" { "1.0.0" } else { "0.4.0" };
                        let p = cnibox::cni::CniResult::from_json(&cnibox::cni::json::Json::from(&prev(version)))
                            .unwrap()
                            .to_json(other)
                            .unwrap();
                        del("/run/netns/gone", &fw_conf(version, extra.clone(), &p));
                    }
                    Cell::ThroughCnitool | Cell::CorruptCache => unreachable!(),
                }
                assert_eq!(now(), baseline, "{what}: rules left behind");
                assert!(accepts(&lab.env.host).is_empty(), "{what}: nftables rules left behind");
            }
        }
    }
    // configs older than 0.4.0 are refused on DEL too, as the reference does
    let old = fw_conf("0.3.1", json!({}), &prev("0.3.1"));
    fw(&lab.env, "DEL", "old", &old).failure(1);
}

/// plugins.d/60-bridge-firewall.conflist through cnitool on a Docker-style host.
#[test]
fn plugins_d_example_opens_a_forward_drop_host() {
    let lab = Lab::new("DROP");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/plugins.d/60-bridge-firewall.conflist");
    let mut list: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    list["plugins"][0]["ipam"]["dataDir"] = json!(lab.env.data_dir);
    list["plugins"][1]["dataDir"] = json!(lab.env.data_dir.join("firewall"));
    let conf_dir = lab.env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    std::fs::write(conf_dir.join("60-bridge-firewall.conflist"), list.to_string()).unwrap();
    let ns = lab.env.container();
    let tool = |verb: &str| lab.env.cnitool(&conf_dir, verb, "cnibox-firewall", ns.path_str()).run();
    let r = tool("add").success();
    assert_eq!(r["interfaces"][0]["name"], "cnibox2", "{r}");
    assert!(ns.ping(OUTSIDE4), "the example's chain did not open the DROP policy");
    tool("check").success();
    tool("del").success();
    let v4 = filter_state(&lab.env.host, "iptables-save");
    assert!(!v4.iter().any(|l| l.contains("10.91.0.")), "{v4:?}");
}

/// Runtimes may call plugins with a PATH without the sbin dirs (cron, `env -i`).
#[test]
fn iptables_is_found_without_sbin_on_path() {
    let env = TestEnv::new();
    let conf = fw_conf("1.0.0", json!({}), &prev("1.0.0"));
    let call = |verb: &str| {
        env.call("firewall").env("PATH", "/usr/bin:/bin").exec(
            verb,
            "dummy",
            "/run/netns/gone",
            "eth0",
            &confined(&env, &conf),
        )
    };
    call("ADD").success();
    assert_eq!(filter_state(&env.host, "iptables-save"), REFERENCE_V4);
    call("CHECK").success();
    call("DEL").success();
    assert!(!filter_state(&env.host, "iptables-save")
        .iter()
        .any(|l| l.contains("10.88.0.2")));
}

// ---------------------------------------------------------------------------------------
// The nftables backend.

fn nft_table(host: &Netns) -> String {
    host.command("nft")
        .args(["list", "table", "inet", "cni_plugins_firewall"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn accepts(host: &Netns) -> Vec<String> {
    let t = nft_table(host);
    let Some(start) = t.find("chain accepts {") else {
        return vec![];
    };
    t[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().starts_with('}'))
        .map(|l| l.trim().to_string())
        .collect()
}

/// A Docker-style host: the nftables backend's accepts cannot override iptables' DROP
/// policy (another table's base chain on the same hook); ADD says so and traffic stays
/// dropped. The documented limit, proven.
#[test]
fn nftables_accepts_cannot_override_a_drop_policy_of_another_table() {
    let lab = Lab::new("DROP");
    let (ctr, r) = lab.container("ctr1", NET, "fwbr0", 1);
    let conf = fw_conf("1.0.0", json!({"backend": "nftables"}), &r);
    let out = fw(&lab.env, "ADD", "ctr1", &conf);
    assert_eq!(out.success(), r);
    assert!(
        out.stderr
            .contains("ip filter FORWARD drops forwarded packets by policy"),
        "{out:?}"
    );
    assert!(out.stderr.contains("ip6 filter FORWARD"), "{out:?}");
    assert_eq!(accepts(&lab.env.host).len(), 4, "{}", nft_table(&lab.env.host));
    assert!(
        !ctr.ping(OUTSIDE4),
        "an accept in inet cni_plugins_firewall overrode ip filter's DROP"
    );
    // iptables-nft still reads its own tables next to ours
    assert!(filter_state(&lab.env.host, "iptables-save").contains(&":FORWARD DROP".to_string()));
    fw(&lab.env, "DEL", "ctr1", &conf).success();
    assert!(accepts(&lab.env.host).is_empty());
}

/// A host whose default-drop forward filter is the firewall table's own `forward` policy:
/// the container's traffic flows after ADD and stops after DEL; later ADDs keep the policy.
#[test]
fn nftables_backend_opens_its_own_tables_drop_policy_after_add_and_closes_it_after_del() {
    let lab = Lab::new("ACCEPT");
    lab.env.host.exec(&["nft", "add table inet cni_plugins_firewall"]);
    lab.env.host.exec(&[
        "nft",
        "add chain inet cni_plugins_firewall forward { type filter hook forward priority filter ; policy drop ; }",
    ]);
    let (ctr, r) = lab.container("ctr1", NET, "fwbr0", 1);
    let (other, ro) = lab.container("ctr2", NET, "fwbr0", 1);
    assert!(!ctr.ping(OUTSIDE4), "forwarded before ADD");
    let conf = fw_conf("1.0.0", json!({"backend": "nftables"}), &r);
    let out = fw(&lab.env, "ADD", "ctr1", &conf);
    assert_eq!(out.success(), r);
    assert!(!out.stderr.contains("warning"), "{out:?}");
    assert!(
        nft_table(&lab.env.host).contains("policy drop"),
        "ADD reset the administrator's policy"
    );
    assert!(ctr.ping(OUTSIDE4), "IPv4 dropped after ADD");
    assert!(ctr.ping(OUTSIDE6), "IPv6 dropped after ADD");
    assert!(!other.ping(OUTSIDE4), "ADD of ctr1 opened ctr2");
    assert!(
        !lab.outside.ping(&addr_of(&r, false)),
        "a new inbound connection was let through"
    );
    fw(&lab.env, "CHECK", "ctr1", &conf).success();
    let conf2 = fw_conf("1.0.0", json!({"backend": "nftables"}), &ro);
    fw(&lab.env, "ADD", "ctr2", &conf2).success();
    assert!(other.ping(OUTSIDE4));
    // the admin chain comes first: a drop there wins over the plugin's accepts
    let ip2 = addr_of(&ro, false);
    lab.env.host.exec(&[
        "nft",
        &format!("add rule inet cni_plugins_firewall admin ip saddr {ip2} drop"),
    ]);
    assert!(!other.ping(OUTSIDE4), "an admin drop did not override the accept");
    fw(&lab.env, "ADD", "ctr2", &conf2).success();
    assert!(!other.ping(OUTSIDE4), "ADD removed the admin's rule");
    lab.env
        .host
        .exec(&["nft", "flush chain inet cni_plugins_firewall admin"]);
    assert!(other.ping(OUTSIDE4));
    // DEL needs neither netns nor prevResult: the rules carry the attachment
    fw(
        &lab.env,
        "DEL",
        "ctr1",
        &fw_conf("1.0.0", json!({"backend": "nftables"}), &Value::Null),
    )
    .success();
    assert!(!ctr.ping(OUTSIDE4), "IPv4 still forwarded after DEL");
    assert!(!ctr.ping(OUTSIDE6), "IPv6 still forwarded after DEL");
    assert!(other.ping(OUTSIDE4), "ctr1's DEL closed ctr2");
    let msg = fw(&lab.env, "CHECK", "ctr1", &conf).failure(999);
    assert!(msg.contains("accept rules of") && msg.contains("found 0"), "{msg}");
    fw(&lab.env, "DEL", "ctr1", &conf).success();
    assert!(nft_table(&lab.env.host).contains("policy drop"));
}

/// The layout, rule for rule as `nft` prints it; idempotent ADD; nft deletes what netlink
/// made and CHECK notices.
#[test]
fn nftables_layout_rule_for_rule() {
    let env = TestEnv::new();
    let mut p = prev("1.0.0");
    p["interfaces"][0]["name"] = json!("cni0");
    let conf = fw_conf("1.0.0", json!({"backend": "nftables", "ingressPolicy": "isolated"}), &p);
    let out = env
        .call("firewall")
        .exec("ADD", "ctrA", "/run/netns/gone", "eth0", &conf);
    out.success();
    let once = nft_table(&env.host);
    env.call("firewall")
        .exec("ADD", "ctrA", "/run/netns/gone", "eth0", &conf)
        .success();
    assert_eq!(nft_table(&env.host), once, "a second ADD changed the table");
    let want = [
        "chain forward {",
        "type filter hook forward priority filter; policy accept;",
        "jump isolation_stage_1",
        "jump admin",
        "jump accepts",
        "ip daddr 10.88.0.2 ct state established,related accept comment \"",
        "ip saddr 10.88.0.2 accept comment \"",
        "ip6 daddr fd00::2 ct state established,related accept comment \"",
        "ip6 saddr fd00::2 accept comment \"",
        "iifname \"cni0\" oifname \"cni0\" drop comment \"bridge cni0 (ingressPolicy: isolated)\"",
        "iifname \"cni0\" oifname != \"cni0\" jump isolation_stage_2 comment \"bridge cni0\"",
        "oifname \"cni0\" drop comment \"bridge cni0\"",
    ];
    for w in want {
        assert!(once.contains(w), "missing {w:?} in\n{once}");
    }
    assert!(
        accepts(&env.host)
            .iter()
            .all(|l| l.ends_with(", net: fwnet, if: eth0, id: ctrA\"")),
        "{once}"
    );
    // nft itself can delete what netlink made
    env.host.exec(&["nft", "flush chain inet cni_plugins_firewall accepts"]);
    let msg = env
        .call("firewall")
        .exec("CHECK", "ctrA", "/run/netns/gone", "eth0", &conf)
        .failure(999);
    assert!(msg.starts_with("expected 4 accept rules of"), "{msg}");
}

#[test]
fn nftables_gc_removes_accepts_of_gone_attachments_only() {
    let env = TestEnv::new();
    let mut second = prev("1.1.0");
    second["ips"][0]["address"] = json!("10.88.0.3/24");
    second["ips"][1]["address"] = json!("fd00::3/64");
    let nft = json!({"backend": "nftables"});
    fw(&env, "ADD", "keep", &fw_conf("1.1.0", nft.clone(), &prev("1.1.0"))).success();
    fw(&env, "ADD", "gone", &fw_conf("1.1.0", nft.clone(), &second)).success();
    // another network's rules are not this GC's business
    let mut other = fw_conf("1.1.0", nft.clone(), &second);
    other["name"] = json!("othernet");
    fw(&env, "ADD", "x", &other).success();
    assert_eq!(accepts(&env.host).len(), 12);
    let mut gc = fw_conf("1.1.0", nft.clone(), &Value::Null);
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "keep", "ifname": "eth0"}]);
    env.call("firewall").command("GC").config(&gc).run().success();
    let left = accepts(&env.host);
    assert_eq!(left.len(), 8, "{left:?}");
    assert!(
        left.iter()
            .all(|l| l.contains("id: keep") || l.contains("net: othernet")),
        "{left:?}"
    );
}

#[test]
fn nftables_backend_starts_no_process() {
    let env = TestEnv::new();
    let conf = fw_conf(
        "1.0.0",
        json!({"backend": "nftables", "ingressPolicy": "same-bridge"}),
        &prev("1.0.0"),
    );
    let path = "/usr/sbin:/usr/bin:/sbin:/bin";
    for verb in ["ADD", "ADD", "CHECK", "DEL", "DEL"] {
        assert!(execs(&env, path, verb, &conf).is_empty(), "{verb} started a process");
    }
}

/// The reference's same-bridge integration test, with the nftables backend.
#[test]
fn nftables_same_bridge_policy_keeps_other_bridges_out() {
    let lab = Lab::new("ACCEPT");
    let (foo0, r0) = lab.container("foo0", "foo", "fwfoo", 3);
    let (foo1, r1) = lab.container("foo1", "foo", "fwfoo", 3);
    let (bar0, r2) = lab.container("bar0", "bar", "fwbar", 4);
    for (id, r) in [("foo0", &r0), ("foo1", &r1), ("bar0", &r2)] {
        let mut c = fw_conf(
            "1.0.0",
            json!({"backend": "nftables", "ingressPolicy": "same-bridge"}),
            r,
        );
        c["name"] = r["interfaces"][0]["name"].clone();
        fw(&lab.env, "ADD", id, &c).success();
        fw(&lab.env, "CHECK", id, &c).success();
    }
    assert!(foo0.ping(&addr_of(&r1, false)), "foo0 cannot reach foo1");
    assert!(!foo0.ping(&addr_of(&r2, false)), "foo0 reached bar0");
    assert!(!bar0.ping(&addr_of(&r1, true)), "bar0 reached foo1 over IPv6");
    assert!(foo1.ping(OUTSIDE4), "leaving the bridge is allowed");
}

/// Parallel ADDs and DELs (a runtime starting many pods): every call succeeds, the shared
/// chains and jumps exist once, every address gets its pair, and DELs leave the baseline.
#[test]
fn parallel_adds_and_dels_keep_one_copy_of_the_shared_rules() {
    let env = TestEnv::new();
    let confs: Vec<(String, Value)> = (0..8)
        .map(|i| {
            let mut p = prev("1.0.0");
            p["ips"][0]["address"] = json!(format!("10.88.0.{}/24", 10 + i));
            p["ips"][1]["address"] = json!(format!("fd00::{:x}/64", 16 + i));
            (
                format!("par{i}"),
                fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), &p),
            )
        })
        .collect();
    let run_all = |verb: &'static str| {
        std::thread::scope(|s| {
            let handles: Vec<_> = confs.iter().map(|(id, c)| s.spawn(|| fw(&env, verb, id, c))).collect();
            for h in handles {
                let out = h.join().unwrap();
                assert!(out.ok(), "{verb}: {out:?}");
            }
        })
    };
    run_all("ADD");
    let (v4, v6) = state(&env.host);
    for s in [&v4, &v6] {
        for shared in [
            "-j CNI-FORWARD",
            "-j CNI-ADMIN",
            "-j CNI-ISOLATION-STAGE-1",
            "-j RETURN",
        ] {
            let n = s.iter().filter(|l| l.ends_with(shared)).count();
            let want = if shared == "-j RETURN" { 2 } else { 1 };
            assert_eq!(n, want, "{shared} appears {n} times: {s:?}");
        }
        assert_eq!(s.iter().filter(|l| l.ends_with("-j ACCEPT")).count(), 16, "{s:?}");
    }
    run_all("DEL");
    let (v4, v6) = state(&env.host);
    for s in [&v4, &v6] {
        assert!(!s.iter().any(|l| l.ends_with("-j ACCEPT")), "{s:?}");
    }
}

/// GC with the iptables backend: cnibox's records name the attachments the reference's
/// rules cannot; an address a valid attachment also holds keeps its rules.
#[test]
fn iptables_gc_removes_rules_of_attachments_that_are_not_valid() {
    let env = TestEnv::new();
    let mut second = prev("1.1.0");
    second["ips"][0]["address"] = json!("10.88.0.3/24");
    second["ips"][1]["address"] = json!("fd00::3/64");
    fw(&env, "ADD", "keep", &fw_conf("1.1.0", json!({}), &prev("1.1.0"))).success();
    fw(&env, "ADD", "gone", &fw_conf("1.1.0", json!({}), &second)).success();
    // a stale attachment that shared keep's address (re-used after a crash)
    fw(&env, "ADD", "stale", &fw_conf("1.1.0", json!({}), &prev("1.1.0"))).success();
    let mut gc = fw_conf("1.1.0", json!({}), &Value::Null);
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "keep", "ifname": "eth0"}]);
    env.call("firewall")
        .command("GC")
        .config(&confined(&env, &gc))
        .run()
        .success();
    let (v4, v6) = state(&env.host);
    assert!(
        v4.contains(&"-A CNI-FORWARD -s 10.88.0.2/32 -j ACCEPT".to_string()),
        "{v4:?}"
    );
    assert!(!v4.iter().any(|l| l.contains("10.88.0.3")), "{v4:?}");
    assert!(!v6.iter().any(|l| l.contains("fd00::3")), "{v6:?}");
    let records: Vec<_> = std::fs::read_dir(env.data_dir.join("firewall").join(NET))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(records, ["keep-eth0"]);
    fw(&env, "CHECK", "keep", &fw_conf("1.1.0", json!({}), &prev("1.1.0"))).success();
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("firewall");
}
