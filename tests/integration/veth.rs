//! The veth (ptp) plugin: the reference ptp test inventory for every spec version, the DEL
//! idempotency matrix, error paths, GC, and differential runs against the Go ptp.
use crate::common;
use crate::plugin_state;

use common::routes::{
    default_route, make_network, multipath_check_case, tables_after_two_adds, two_networks_case, without_dad,
    DIFFERENTIAL_VERSIONS,
};
use common::{Netns, TestEnv, ALL_VERSIONS};
use plugin_state::*;
use serde_json::{json, Value};

const NET: &str = "ptpnet";

/// The reference tests' config: ipMasq, MTU 5000, host-local on 10.1.2.0/24.
fn conf(env: &TestEnv, version: &str, extra: Value) -> Value {
    let mut c = json!({
        "cniVersion": version,
        "name": NET,
        "type": "ptp",
        "ipMasq": true,
        "mtu": 5000,
        "ipam": {
            "type": "host-local",
            "dataDir": env.data_dir,
            "ranges": [[{"subnet": "10.1.2.0/24"}]],
        },
    });
    merge(&mut c, &extra);
    c
}

fn add(env: &TestEnv, c: &Value, ns: &Netns, id: &str) -> Value {
    env.call("ptp").exec("ADD", id, ns.path_str(), "eth0", c).success()
}

fn with_prev(c: &Value, prev: &Value) -> Value {
    let mut c = c.clone();
    c["prevResult"] = prev.clone();
    c
}

fn host_veths(env: &TestEnv) -> Vec<String> {
    link_names(&env.host)
        .into_iter()
        .filter(|l| l.starts_with("veth"))
        .collect()
}

/// Nothing of an attachment is left: container link, host veth, host addresses, masquerade
/// rules, reservations.
fn assert_clean(env: &TestEnv, ns: Option<&Netns>, what: &str) {
    if let Some(ns) = ns {
        assert!(!ns.has_link("eth0"), "{what}: container link left");
    }
    let left = wait_links_gone(&env.host, |l| l.starts_with("veth"));
    assert!(left.is_empty(), "{what}: host veths left: {left:?}");
    assert_eq!(addrs(&env.host), Vec::<String>::new(), "{what}: host addresses left");
    assert_eq!(
        masq_rules(&env.host),
        Vec::<String>::new(),
        "{what}: masquerade rules left"
    );
    assert_eq!(
        reservations(env, NET),
        Vec::<String>::new(),
        "{what}: reservations left"
    );
}

/// The result's container address (every version's shape).
fn container_ip(version: &str, r: &Value) -> String {
    if has_interfaces(version) {
        r["ips"][0]["address"].as_str().unwrap().to_string()
    } else {
        r["ip4"]["ip"].as_str().unwrap().to_string()
    }
}

/// One inventory case: STATUS (≥1.1.0), ADD, result shape, ping of the gateway, CHECK, DEL.
fn add_check_del(env: &TestEnv, version: &str, c: &Value) -> Value {
    let ns = env.container();
    if at_least(version, "1.1.0") {
        env.call("ptp").command("STATUS").config(c).run().success();
    }
    let r = add(env, c, &ns, "ctr1");
    assert_eq!(r["cniVersion"], json!(version));
    if has_interfaces(version) {
        let ifs = r["interfaces"].as_array().unwrap();
        assert_eq!(ifs.len(), 2, "{r}");
        let host_name = ifs[0]["name"].as_str().unwrap();
        assert!(is_random_veth(host_name), "{r}");
        assert!(ifs[0].get("sandbox").is_none(), "{r}");
        assert_eq!(ifs[1]["name"], "eth0");
        assert_eq!(ifs[1]["sandbox"], json!(ns.path_str()));
        let link = &ns.ip_json(&["link", "show", "eth0"])[0];
        assert_eq!(ifs[1]["mac"], link["address"], "container MAC");
        assert_eq!(link["mtu"], json!(5000));
        let host_link = &env.host.ip_json(&["link", "show", host_name])[0];
        assert_eq!(ifs[0]["mac"], host_link["address"], "host MAC");
        assert_eq!(host_link["mtu"], json!(5000));
        for ip in r["ips"].as_array().unwrap() {
            assert_eq!(ip["interface"], json!(1), "{r}");
        }
    }
    assert_eq!(container_ip(version, &r), "10.1.2.2/24");
    assert!(ns.ping("10.1.2.1"), "container cannot reach its gateway");
    assert!(env.host.ping("10.1.2.2"), "host cannot reach the container");
    let check = env
        .call("ptp")
        .exec("CHECK", "ctr1", ns.path_str(), "eth0", &with_prev(c, &r));
    if at_least(version, "0.4.0") {
        check.success();
    } else {
        assert_eq!(check.failure(1), "config version does not allow CHECK");
    }
    let del_conf = if at_least(version, "0.4.0") {
        with_prev(c, &r)
    } else {
        c.clone()
    };
    env.call("ptp")
        .exec("DEL", "ctr1", ns.path_str(), "eth0", &del_conf)
        .success();
    assert_clean(env, Some(&ns), &format!("{version} after DEL"));
    r
}

#[test]
fn configures_and_deconfigures_a_ptp_link_with_add_check_del() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let c = conf(
            &env,
            version,
            json!({"dns": {"nameservers": ["10.1.2.123"], "domain": "some.domain.test", "search": ["search.test"], "options": ["option1:foo"]}}),
        );
        let r = add_check_del(&env, version, &c);
        assert_eq!(r["dns"]["nameservers"], json!(["10.1.2.123"]), "{version}: {r}");
        assert_eq!(r["dns"]["domain"], json!("some.domain.test"), "{version}");
        assert_eq!(r["dns"]["search"], json!(["search.test"]), "{version}");
        assert_eq!(r["dns"]["options"], json!(["option1:foo"]), "{version}");
        // forwarding is on in the host namespace for the family used
        assert_eq!(env.host.sysctl("net/ipv4/ip_forward"), "1");
    }
}

#[test]
fn the_veth_applet_is_the_same_plugin() {
    let env = TestEnv::new();
    let ns = env.container();
    let c = conf(&env, "1.0.0", json!({"type": "veth"}));
    let r = env
        .call("veth")
        .exec("ADD", "ctr1", ns.path_str(), "eth0", &c)
        .success();
    assert_eq!(r["ips"][0]["address"], "10.1.2.2/24");
    assert!(ns.ping("10.1.2.1"));
    env.call("veth")
        .exec("DEL", "ctr1", ns.path_str(), "eth0", &c)
        .success();
    assert_clean(&env, Some(&ns), "veth applet");
}

#[test]
fn ip_masq_backends() {
    for version in ALL_VERSIONS.iter().filter(|v| at_least(v, "0.3.0")) {
        for backend in ["iptables", "nftables"] {
            let env = TestEnv::new();
            let ns = env.container();
            let c = conf(&env, version, json!({"ipMasqBackend": backend}));
            add(&env, &c, &ns, "ctr1");
            let rules = masq_rules(&env.host);
            match backend {
                "iptables" => assert!(
                    rules.iter().any(|r| r.contains("-A POSTROUTING -s 10.1.2.2/32")),
                    "{rules:?}"
                ),
                _ => {
                    assert_eq!(rules.len(), 1, "{rules:?}");
                    assert!(
                        rules[0].contains("ip saddr 10.1.2.2 ip daddr != 10.1.2.0/24 masquerade"),
                        "{rules:?}"
                    );
                }
            }
            env.call("ptp").exec("DEL", "ctr1", ns.path_str(), "eth0", &c).success();
            assert_clean(&env, Some(&ns), &format!("{version} {backend}"));
        }
    }
}

#[test]
fn dual_stack_ptp_link_with_routes() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let c = conf(
            &env,
            version,
            json!({"ipam": {
                "ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "2001:db8:1::/66"}]],
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16"}, {"dst": "1.2.3.4/32"}],
            }}),
        );
        let ns = env.container();
        let r = add(&env, &c, &ns, "ctr1");
        if has_interfaces(version) {
            assert_eq!(r["ips"].as_array().unwrap().len(), 2, "{r}");
        } else {
            assert_eq!(r["ip6"]["ip"], "2001:db8:1::2/66", "{r}");
        }
        let routes = routes(&ns);
        for want in [
            "default via 10.1.2.1 dev eth0",
            "1.2.3.4 via 10.1.2.1 dev eth0",
            "192.168.0.0/16 via 10.1.2.1 dev eth0",
            "10.1.2.0/24 via 10.1.2.1 dev eth0 src 10.1.2.2",
            "10.1.2.1 dev eth0 scope link src 10.1.2.2",
            "2001:db8:1::/66 via 2001:db8:1::1 dev eth0 src 2001:db8:1::2 metric 1024",
            "2001:db8:1::1 dev eth0 src 2001:db8:1::2 metric 1024",
        ] {
            assert!(
                routes.iter().any(|r| r == want),
                "{version}: {want:?} not in {routes:#?}"
            );
        }
        assert!(
            !routes
                .iter()
                .any(|r| r.starts_with("10.1.2.0/24 dev eth0 proto kernel")),
            "kernel subnet route left: {routes:#?}"
        );
        let host_routes = plugin_state::routes(&env.host);
        for want in ["10.1.2.2 dev veth* scope host", "2001:db8:1::2 dev veth* metric 1024"] {
            assert!(
                host_routes.iter().any(|r| r == want),
                "{want:?} not in {host_routes:#?}"
            );
        }
        assert_eq!(
            addrs(&env.host),
            vec!["veth* 10.1.2.1/32 scope global", "veth* 2001:db8:1::1/128 scope global"]
        );
        assert!(ns.ping("10.1.2.1"));
        assert!(ns.ping("2001:db8:1::1"), "IPv6 gateway unreachable");
        assert_eq!(env.host.sysctl("net/ipv6/conf/all/forwarding"), "1");
        let del_conf = if at_least(version, "0.4.0") {
            with_prev(&c, &r)
        } else {
            c.clone()
        };
        if at_least(version, "0.4.0") {
            env.call("ptp")
                .exec("CHECK", "ctr1", ns.path_str(), "eth0", &del_conf)
                .success();
        }
        env.call("ptp")
            .exec("DEL", "ctr1", ns.path_str(), "eth0", &del_conf)
            .success();
        assert_clean(&env, Some(&ns), version);
    }
}

fn resolv_conf(env: &TestEnv) -> String {
    let p = env.tmp.path().join("resolv.conf");
    std::fs::write(
        &p,
        "nameserver 192.0.2.0\nnameserver 192.0.2.2\ndomain example.com\nsearch example.com test.com\noptions ndots:5\n",
    )
    .unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn ipam_dns_is_kept_without_plugin_dns() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let c = conf(&env, version, json!({"ipam": {"resolvConf": resolv_conf(&env)}}));
        let ns = env.container();
        let r = add(&env, &c, &ns, "ctr1");
        assert_eq!(
            r["dns"]["nameservers"],
            json!(["192.0.2.0", "192.0.2.2"]),
            "{version}: {r}"
        );
        assert_eq!(r["dns"]["domain"], json!("example.com"));
        assert_eq!(r["dns"]["search"], json!(["example.com", "test.com"]));
        assert_eq!(r["dns"]["options"], json!(["ndots:5"]));
    }
}

#[test]
fn any_plugin_dns_field_overrides_ipam_dns() {
    for version in ALL_VERSIONS {
        for field in [
            json!({"nameservers": ["10.1.2.123"]}),
            json!({"domain": "some.domain.test"}),
            json!({"search": ["search.test"]}),
            json!({"options": ["option1:foo"]}),
        ] {
            let env = TestEnv::new();
            let c = conf(
                &env,
                version,
                json!({"dns": field, "ipam": {"resolvConf": resolv_conf(&env)}}),
            );
            let ns = env.container();
            let r = add(&env, &c, &ns, "ctr1");
            let mut want = json!({});
            merge(&mut want, &field);
            assert_eq!(r["dns"], want, "{version}: {field}");
        }
    }
}

#[test]
fn empty_plugin_dns_lists_override_ipam_dns() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let c = conf(
            &env,
            version,
            json!({"dns": {"nameservers": [], "search": [], "options": []}, "ipam": {"resolvConf": resolv_conf(&env)}}),
        );
        let ns = env.container();
        let r = add(&env, &c, &ns, "ctr1");
        assert_eq!(r["dns"], json!({}), "{version}: {r}");
    }
}

#[test]
fn deconfigures_an_unconfigured_ptp_link_with_del() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let ns = env.container();
        let c = conf(&env, version, json!({}));
        env.call("ptp").exec("DEL", "ctr1", ns.path_str(), "eth0", &c).success();
        assert_clean(&env, Some(&ns), version);
    }
}

/// DEL in every state an attachment can be in, twice: each leaves nothing behind.
#[test]
fn del_is_idempotent_in_every_state() {
    #[derive(Debug, Clone, Copy)]
    enum State {
        Configured,
        NetnsPathEmpty,
        NetnsPathEmptyNoPrevResult,
        NetnsGone,
        LinkGone,
        NoPrevResult,
    }
    for version in ALL_VERSIONS {
        for state in [
            State::Configured,
            State::NetnsPathEmpty,
            State::NetnsPathEmptyNoPrevResult,
            State::NetnsGone,
            State::LinkGone,
            State::NoPrevResult,
        ] {
            let with_prev_result =
                at_least(version, "0.4.0") && !matches!(state, State::NoPrevResult | State::NetnsPathEmptyNoPrevResult);
            let env = TestEnv::new();
            let c = conf(&env, version, json!({"ipMasqBackend": "iptables"}));
            let ns = env.container();
            let r = add(&env, &c, &ns, "ctr1");
            assert!(!masq_rules(&env.host).is_empty());
            let del_conf = if with_prev_result { with_prev(&c, &r) } else { c.clone() };
            let ns_path = ns.path_str().to_string();
            let mut ns = Some(ns);
            let del_netns = match state {
                State::NetnsPathEmpty | State::NetnsPathEmptyNoPrevResult => String::new(),
                State::NetnsGone => {
                    drop(ns.take());
                    ns_path.clone()
                }
                State::LinkGone => {
                    ns.as_ref().unwrap().ip(&["link", "del", "eth0"]);
                    ns_path.clone()
                }
                State::Configured | State::NoPrevResult => ns_path.clone(),
            };
            for round in 1..=2 {
                env.call("ptp")
                    .exec("DEL", "ctr1", &del_netns, "eth0", &del_conf)
                    .success();
                let what = format!("{version} {state:?} DEL #{round}");
                if matches!(state, State::NetnsPathEmptyNoPrevResult)
                    || (matches!(state, State::NetnsPathEmpty) && !with_prev_result)
                {
                    // Nothing names the pair: the container link stays until the runtime
                    // removes the namespace; everything on the host side is gone.
                    assert_eq!(masq_rules(&env.host), Vec::<String>::new(), "{what}");
                    assert_eq!(reservations(&env, NET), Vec::<String>::new(), "{what}");
                    drop(ns.take());
                    let left = wait_links_gone(&env.host, |l| l.starts_with("veth"));
                    assert!(left.is_empty(), "{what}: {left:?}");
                } else {
                    assert_clean(&env, ns.as_ref(), &what);
                }
            }
        }
    }
}

/// A second DEL that names a reused host veth of another attachment leaves it alone.
#[test]
fn del_without_netns_leaves_other_attachments_alone() {
    let env = TestEnv::new();
    let c = conf(&env, "1.0.0", json!({"ipMasq": false}));
    let a = env.container();
    let b = env.container();
    let ra = add(&env, &c, &a, "ctrA");
    let rb = add(&env, &c, &b, "ctrB");
    // ctrA's prevResult, but pointing at ctrB's host veth
    let mut forged = ra.clone();
    forged["interfaces"][0]["name"] = rb["interfaces"][0]["name"].clone();
    env.call("ptp")
        .exec("DEL", "ctrA", "", "eth0", &with_prev(&c, &forged))
        .success();
    assert!(b.has_link("eth0"), "ctrB's pair was deleted");
    assert!(b.ping("10.1.2.1"));
}

#[test]
fn container_name_collision_is_an_error_and_leaves_nothing() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let ns = env.container();
        ns.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "other0"]);
        let c = conf(&env, version, json!({}));
        let out = env.call("ptp").exec("ADD", "ctr1", ns.path_str(), "eth0", &c);
        assert_eq!(
            out.failure(999),
            "container veth name provided (eth0) already exists",
            "{version}"
        );
        assert!(host_veths(&env).is_empty(), "{version}");
        assert_eq!(
            reservations(&env, NET),
            Vec::<String>::new(),
            "{version}: address not released"
        );
        assert_eq!(masq_rules(&env.host), Vec::<String>::new());
    }
}

#[test]
fn add_error_paths() {
    let env = TestEnv::new();
    let ns = env.container();
    let run = |c: &Value, netns: &str| env.call("ptp").exec("ADD", "ctr1", netns, "eth0", c);

    let out = run(&conf(&env, "1.0.0", json!({})), "/run/netns/cnibox-does-not-exist");
    let msg = out.failure(999);
    assert!(
        msg.starts_with("failed to open netns \"/run/netns/cnibox-does-not-exist\": "),
        "{msg}"
    );

    let out = run(&conf(&env, "1.0.0", json!({"ipMasqBackend": "pf"})), ns.path_str());
    assert_eq!(out.failure(999), "ipMasqBackend: unknown ipmasq backend \"pf\"");

    let out = run(&conf(&env, "1.0.0", json!({"mtu": "big"})), ns.path_str());
    assert_eq!(
        out.failure(999),
        "failed to load netconf: json: cannot unmarshal string into Go struct field NetConf.mtu of type int"
    );

    let out = run(&conf(&env, "1.0.0", json!({"ipMasq": "yes"})), ns.path_str());
    assert_eq!(
        out.failure(999),
        "failed to load netconf: json: cannot unmarshal string into Go struct field NetConf.ipMasq of type bool"
    );

    // ipam is required: an empty type fails in delegation, as in the reference
    let mut c = conf(&env, "1.0.0", json!({}));
    c["ipam"] = json!({});
    assert_eq!(run(&c, ns.path_str()).failure(999), "no plugin name provided");

    // an MTU the kernel refuses: everything undone, the address released
    let out = run(&conf(&env, "1.0.0", json!({"mtu": 70000})), ns.path_str());
    out.failure(999);
    assert!(!ns.has_link("eth0"));
    assert!(host_veths(&env).is_empty());
    assert_eq!(reservations(&env, NET), Vec::<String>::new());
    assert_eq!(masq_rules(&env.host), Vec::<String>::new());
}

/// Regression: the DEL of a config without an IPAM type (`"ipam": {}`, `null`, mistyped),
/// which ADD refuses, delegated to an empty plugin name and failed with "no plugin name
/// provided", so a runtime's cleanup DEL after the refused ADD failed for ever (README: DEL
/// succeeds on a config ADD refuses). Found by the generated key tests (`go_keys`).
#[test]
fn del_of_a_config_without_an_ipam_type_succeeds() {
    let env = TestEnv::new();
    let ns = env.container();
    for ipam in [json!({}), json!(null), json!("x"), json!({"type": 5})] {
        let mut c = conf(&env, "1.0.0", json!({}));
        c["ipam"] = ipam.clone();
        let add = env.call("ptp").exec("ADD", "ctr1", ns.path_str(), "eth0", &c);
        assert!(!add.ok(), "{ipam}: {add:?}");
        env.call("ptp").exec("DEL", "ctr1", ns.path_str(), "eth0", &c).success();
        assert!(host_veths(&env).is_empty(), "{ipam}");
    }
}

#[test]
fn check_error_paths() {
    for version in ALL_VERSIONS.iter().filter(|v| at_least(v, "0.4.0")) {
        let env = TestEnv::new();
        let ns = env.container();
        let c = conf(&env, version, json!({}));
        let r = add(&env, &c, &ns, "ctr1");
        let check = |cfg: &Value| env.call("ptp").exec("CHECK", "ctr1", ns.path_str(), "eth0", cfg);
        assert_eq!(check(&c).failure(999), "ptp: Required prevResult missing");

        let mut bad = r.clone();
        bad["interfaces"][1]["mac"] = json!("02:00:00:00:00:01");
        let mac = ns.ip_json(&["link", "show", "eth0"])[0]["address"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            check(&with_prev(&c, &bad)).failure(999),
            format!("ptp: Interface eth0 Mac 02:00:00:00:00:01 doesn't match container Mac: {mac}")
        );

        let mut bad = r.clone();
        bad["interfaces"][1]["sandbox"] = json!("/run/netns/elsewhere");
        assert_eq!(
            check(&with_prev(&c, &bad)).failure(999),
            format!(
                "Sandbox in prevResult  doesn't match configured netns: {}",
                ns.path_str()
            )
        );

        let mut bad = r.clone();
        bad["ips"][0]["address"] = json!("10.1.2.99/24");
        assert_eq!(
            check(&with_prev(&c, &bad)).failure(999),
            "Failed to match addr 10.1.2.99/24 on interface eth0"
        );

        let mut bad = r.clone();
        bad["routes"] = json!([{"dst": "10.200.0.0/16", "gw": "10.1.2.1"}]);
        assert_eq!(
            check(&with_prev(&c, &bad)).failure(999),
            "Expected Route 10.200.0.0/16 via 10.1.2.1 not found in routing table"
        );

        ns.ip(&["link", "set", "eth0", "name", "eth9"]);
        assert_eq!(
            check(&with_prev(&c, &r)).failure(999),
            "ptp: Container Interface name in prevResult: eth0 not found"
        );
        ns.ip(&["link", "set", "eth9", "name", "eth0"]);
        check(&with_prev(&c, &r)).success();
    }
}

#[test]
fn status_delegates_to_ipam() {
    let env = TestEnv::new();
    let c = conf(&env, "1.1.0", json!({}));
    env.call("ptp").command("STATUS").config(&c).run().success();
    let mut bad = c.clone();
    bad["ipam"]["type"] = json!("no-such-ipam");
    let msg = env.call("ptp").command("STATUS").config(&bad).run().failure(999);
    assert!(msg.starts_with("failed to find plugin \"no-such-ipam\""), "{msg}");
}

#[test]
fn gc_removes_rules_and_reservations_of_stale_attachments() {
    let env = TestEnv::new();
    let c = conf(&env, "1.1.0", json!({"ipMasqBackend": "nftables"}));
    let a = env.container();
    let b = env.container();
    add(&env, &c, &a, "ctrA");
    add(&env, &c, &b, "ctrB");
    assert_eq!(masq_rules(&env.host).len(), 2);
    let mut gc = c.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "ctrA", "ifname": "eth0"}]);
    env.call("ptp").command("GC").config(&gc).run().success();
    let rules = masq_rules(&env.host);
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert!(rules[0].contains("id: ctrA"), "{rules:?}");
    assert_eq!(reservations(&env, NET), vec!["10.1.2.2".to_string()]);
}

// ---- differential runs against the Go ptp (v1.1.1) ----

/// What an ADD leaves: the masked result and the kernel state of both namespaces.
#[derive(Debug, PartialEq)]
struct Outcome {
    result: Value,
    container_links: Vec<String>,
    container_addrs: Vec<String>,
    container_routes: Vec<String>,
    host_links: Vec<String>,
    host_addrs: Vec<String>,
    host_routes: Vec<String>,
    sysctls: Vec<(String, String)>,
    masq: Vec<String>,
}

fn outcome(env: &TestEnv, ns: &Netns, result: &Value) -> Outcome {
    let host_veth = host_veths(env).pop().unwrap_or_default();
    let mut sysctls = vec![];
    for key in ["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"] {
        sysctls.push((format!("host {key}"), env.host.sysctl(key)));
    }
    if !host_veth.is_empty() {
        for leaf in ["accept_ra", "accept_dad", "disable_ipv6"] {
            let key = format!("net/ipv6/conf/{host_veth}/{leaf}");
            sysctls.push((format!("host veth {leaf}"), env.host.sysctl(&key)));
        }
    }
    for leaf in ["disable_ipv6", "accept_ra", "accept_dad", "keep_addr_on_down"] {
        let key = format!("net/ipv6/conf/eth0/{leaf}");
        sysctls.push((format!("container eth0 {leaf}"), ns.sysctl(&key)));
    }
    sysctls.push((
        "container lo disable_ipv6".into(),
        ns.sysctl("net/ipv6/conf/lo/disable_ipv6"),
    ));
    let mut result = mask(result);
    if result["interfaces"][1]["sandbox"] == json!(ns.path_str()) {
        result["interfaces"][1]["sandbox"] = json!("<netns>");
    }
    Outcome {
        result,
        container_links: links(ns),
        container_addrs: addrs(ns),
        container_routes: routes(ns),
        host_links: links(&env.host),
        host_addrs: addrs(&env.host),
        host_routes: routes(&env.host),
        sysctls,
        masq: masq_rules(&env.host)
            .into_iter()
            .map(|r| r.replace("iptables-save ", "").replace("ip6tables-save ", "ip6 "))
            .collect(),
    }
}

/// Runs the same config through cnibox and the reference, each in its own world; returns
/// (cnibox, reference) outcomes, or None when the reference is not installed.
fn differential(version: &str, extra: &Value) -> Option<(Outcome, Outcome)> {
    let ref_env = TestEnv::new();
    let reference = ref_env.reference("ptp")?;
    let ref_ns = ref_env.container();
    let ref_conf = conf(&ref_env, version, extra.clone());
    let ref_result = reference
        .exec("ADD", "ctr1", ref_ns.path_str(), "eth0", &ref_conf)
        .success();
    let theirs = outcome(&ref_env, &ref_ns, &ref_result);

    let env = TestEnv::new();
    let ns = env.container();
    // the reference v1.1.1 only has iptables masquerading
    let mut ours_extra = extra.clone();
    merge(&mut ours_extra, &json!({"ipMasqBackend": "iptables"}));
    let c = conf(&env, version, ours_extra);
    let result = add(&env, &c, &ns, "ctr1");
    let ours = outcome(&env, &ns, &result);

    // and DEL of each leaves nothing
    let del = |e: &TestEnv, call: common::Call, cfg: &Value, ns: &Netns, r: &Value| {
        let cfg = if at_least(version, "0.4.0") {
            with_prev(cfg, r)
        } else {
            cfg.clone()
        };
        call.exec("DEL", "ctr1", ns.path_str(), "eth0", &cfg).success();
        assert_clean(e, Some(ns), &format!("{version} DEL"));
    };
    del(&ref_env, ref_env.reference("ptp")?, &ref_conf, &ref_ns, &ref_result);
    del(&env, env.call("ptp"), &c, &ns, &result);
    Some((ours, theirs))
}

/// The differences cnibox makes on purpose: each is asserted on the reference's outcome
/// and then replaced by what cnibox does.
fn expect_deliberate_differences(theirs: &mut Outcome, ipv6: bool) {
    // The reference v1.1.1 creates veths with TXQLEN 0 (fixed upstream in 3a49cff1);
    // cnibox leaves the kernel default.
    for l in theirs.container_links.iter_mut().chain(theirs.host_links.iter_mut()) {
        if l.contains(" veth ") {
            assert!(l.ends_with(" qlen 0"), "{l}");
            *l = l.replace(" qlen 0", " qlen 1000");
        }
    }
    for (k, v) in &mut theirs.sysctls {
        match k.as_str() {
            // No DAD on either end of the point-to-point link: nothing else is on it, and
            // DAD made every IPv6 ADD of the reference wait.
            "container eth0 accept_dad" | "host veth accept_dad" if ipv6 => {
                assert_eq!(v, "1", "{k}");
                *v = "0".into();
            }
            // Addresses survive a link down/up (upstream since v1.7.0).
            "container eth0 keep_addr_on_down" if ipv6 => {
                assert_eq!(v, "0", "{k}");
                *v = "1".into();
            }
            _ => {}
        }
    }
}

#[test]
fn differential_ipv4_matches_the_reference() {
    for version in reference_versions() {
        let Some((ours, mut theirs)) = differential(version, &json!({})) else {
            eprintln!("skipped: reference plugins not installed");
            return;
        };
        expect_deliberate_differences(&mut theirs, false);
        assert_eq!(ours, theirs, "{version}");
    }
}

#[test]
fn differential_dual_stack_matches_the_reference() {
    let extra = json!({"ipam": {
        "ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "2001:db8:1::/66"}]],
        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}, {"dst": "192.168.0.0/16"}],
    }, "dns": {"nameservers": ["10.1.2.123"]}});
    for version in reference_versions() {
        let Some((ours, mut theirs)) = differential(version, &extra) else {
            eprintln!("skipped: reference plugins not installed");
            return;
        };
        expect_deliberate_differences(&mut theirs, true);
        assert!(
            theirs.masq.iter().any(|r| r.contains("2001:db8:1::2/128")),
            "{:?}",
            theirs.masq
        );
        assert_eq!(ours, theirs, "{version}");
    }
}

#[test]
fn differential_errors_match_the_reference() {
    let env = TestEnv::new();
    let Some(reference) = env.reference("ptp") else {
        eprintln!("skipped: reference plugins not installed");
        return;
    };
    let ns = env.container();
    ns.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "other0"]);
    let c = conf(&env, "1.0.0", json!({}));
    let theirs = reference.exec("ADD", "ctr1", ns.path_str(), "eth0", &c);
    let ours = env.call("ptp").exec("ADD", "ctr1", ns.path_str(), "eth0", &c);
    assert_eq!(ours.failure(999), theirs.failure(999));
    let theirs = env
        .reference("ptp")
        .unwrap()
        .exec("CHECK", "ctr1", ns.path_str(), "eth0", &c);
    let ours = env.call("ptp").exec("CHECK", "ctr1", ns.path_str(), "eth0", &c);
    assert_eq!(ours.failure(999), theirs.failure(999));
}

/// The shipped example network runs through cnitool (reservations kept in the test's dir).
#[test]
fn example_conflist_works_with_cnitool() {
    let env = TestEnv::new();
    let ns = env.container();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/plugins.d/20-veth.conflist");
    let mut list: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(list["plugins"][0]["type"], "veth");
    list["plugins"][0]["ipam"]["dataDir"] = json!(env.data_dir);
    let conf_dir = env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    std::fs::write(conf_dir.join("20-veth.conflist"), list.to_string()).unwrap();
    let tool = |verb: &str| {
        env.tool("cnitool")
            .args([verb, "cnibox-veth", ns.path_str()])
            .env("NETCONFPATH", conf_dir.to_str().unwrap())
            .env("CNI_PATH", env.bin_dir.to_str().unwrap())
            .env("CNI_CACHE_DIR", env.cache_dir.to_str().unwrap())
            .run()
    };
    let r = tool("add").success();
    assert_eq!(r["ips"][0]["address"], "10.89.0.2/24", "{r}");
    assert_eq!(ns.ip_json(&["link", "show", "eth0"])[0]["mtu"], json!(1400));
    assert!(ns.ping("10.89.0.1"));
    assert!(routes(&ns).iter().any(|r| r == "default via 10.89.0.1 dev eth0"));
    assert_eq!(masq_rules(&env.host).len(), 1);
    tool("check").success();
    tool("del").success();
    assert!(!ns.has_link("eth0"));
    assert!(host_veths(&env).is_empty());
    assert_eq!(masq_rules(&env.host), Vec::<String>::new());
    assert_eq!(reservations(&env, "cnibox-veth"), Vec::<String>::new());
}

/// An IPAM plugin (a script in the CNI_PATH) that records its verbs and answers ADD with
/// `result`.
fn fake_ipam(env: &TestEnv, result: &Value) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let record = env.tmp.path().join("ipam-calls");
    let script = env.bin_dir.join("fake-ipam");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$CNI_COMMAND\" >> {}\n[ \"$CNI_COMMAND\" = ADD ] && echo '{}'\nexit 0\n",
            record.display(),
            result
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    record
}

#[test]
fn ipam_results_without_gateway_or_addresses_are_released() {
    for (result, want) in [
        (
            json!({"cniVersion": "1.0.0", "ips": [{"address": "10.5.0.2/24"}]}),
            "IPAM result address 10.5.0.2/24 has no gateway; veth (ptp) routes through the gateway",
        ),
        (
            json!({"cniVersion": "1.0.0", "ips": []}),
            "IPAM plugin returned missing IP config",
        ),
    ] {
        let env = TestEnv::new();
        let ns = env.container();
        let record = fake_ipam(&env, &result);
        let c = conf(&env, "1.0.0", json!({"ipam": {"type": "fake-ipam"}}));
        let out = env.call("ptp").exec("ADD", "ctr1", ns.path_str(), "eth0", &c);
        assert_eq!(out.failure(999), want);
        assert_eq!(std::fs::read_to_string(&record).unwrap(), "ADD\nDEL\n", "{want}");
        assert!(!ns.has_link("eth0"));
        assert!(host_veths(&env).is_empty());
    }
}

/// Network `n` (0 or 1) of one family for the tests of a container on two networks: its
/// own name and subnet, IPAM `routes`, no masquerade.
fn network_conf(env: &TestEnv, version: &str, n: usize, v6: bool, routes: Value) -> Value {
    let mut c = conf(env, version, json!({"ipMasq": false}));
    make_network(&mut c, n, v6, routes);
    c
}

/// Two veth networks whose IPAM both carry the default route: the second ADD succeeds and
/// the container has a default route via each gateway (see `two_networks_case`).
#[test]
fn a_container_on_two_networks_gets_a_default_route_from_each() {
    for v in ALL_VERSIONS {
        for v6 in [false, true] {
            let env = TestEnv::new();
            let ctr = env.container();
            two_networks_case(&|| env.call("ptp"), &ctr, v, v6, &|n| {
                network_conf(&env, v, n, v6, default_route(n, v6))
            });
            assert_clean(&env, Some(&ctr), v);
        }
    }
}

#[test]
fn check_passes_after_the_default_route_became_multipath() {
    for v in ALL_VERSIONS.iter().filter(|v| at_least(v, "0.4.0")) {
        let env = TestEnv::new();
        let ctr = env.container();
        let c = network_conf(&env, v, 0, true, json!([{"dst": "::/0", "gw": "2001:db8:a::1"}]));
        multipath_check_case(&|| env.call("ptp"), &ctr, &c);
    }
}

/// Both implementations succeed on the second network and leave the same routing tables.
#[test]
fn differential_two_networks_with_default_routes_match_the_reference() {
    if common::reference_dir().is_none() {
        return;
    }
    for v in DIFFERENTIAL_VERSIONS.iter().copied() {
        for v6 in [false, true] {
            let tables = [true, false].map(|ours| {
                let env = TestEnv::new();
                let ctr = env.container();
                without_dad(&ctr);
                let call = || {
                    if ours {
                        env.call("ptp")
                    } else {
                        env.reference("ptp").expect("checked above")
                    }
                };
                tables_after_two_adds(&call, &ctr, v6, &|n| network_conf(&env, v, n, v6, default_route(n, v6)))
            });
            assert_eq!(tables[0], tables[1], "{v} v6={v6}: cnibox, then the reference");
        }
    }
}

/// On a machine without nft, iptables or any other sbin tool: masquerade over nf_tables
/// needs none; the iptables backend fails ADD saying what to install and leaves nothing.
#[test]
fn masquerade_on_a_machine_without_firewall_tools() {
    for v in ALL_VERSIONS {
        for backend in ["nftables", "iptables"] {
            let env = TestEnv::new();
            let ns = env.container();
            let c = conf(&env, v, json!({"ipMasqBackend": backend}));
            let out = env
                .call("ptp")
                .without_sbin_tools()
                .exec("ADD", "bare", ns.path_str(), "eth0", &c);
            if backend == "iptables" {
                assert_eq!(
                    out.failure(999),
                    common::missing_iptables_message("iptables-restore"),
                    "{v}"
                );
            } else {
                out.success();
                assert_eq!(masq_rules(&env.host).len(), 1, "{v}");
            }
            env.call("ptp")
                .without_sbin_tools()
                .exec("DEL", "bare", ns.path_str(), "eth0", &c)
                .success();
            assert_clean(&env, Some(&ns), v);
        }
    }
}

/// Both ends get their MACs in the create request: the kernel records them as set (3),
/// not random (1), so udev's `MACAddressPolicy=persistent` leaves them alone.
#[test]
fn both_veth_macs_are_set_at_creation_so_udev_keeps_them() {
    for v in ALL_VERSIONS {
        let env = TestEnv::new();
        let ns = env.container();
        let c = conf(&env, v, json!({}));
        add(&env, &c, &ns, "macs");
        let host_veth = host_veths(&env).pop().unwrap();
        assert_eq!(env.host.addr_assign_type(&host_veth), "3", "{v}: host end");
        assert_eq!(ns.addr_assign_type("eth0"), "3", "{v}: container end");
        env.call("ptp").exec("DEL", "macs", ns.path_str(), "eth0", &c).success();
        assert_clean(&env, Some(&ns), v);
    }
}

/// DEL in every situation a runtime produces, in every spec version: the shared matrix
/// (`reliability::del_matrix`).
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    del_matrix::run(Subject {
        applet: "veth",
        keys: json!({"ipMasq": true}),
        attachment: Attachment::Interface,
    });
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("veth");
}
