//! The steps of the end-to-end set for other architectures (the Makefile's FOREIGN_TESTS:
//! `make test-arm64` runs the arm64 binary under qemu-user, `make test-i686` the 32-bit
//! one natively) that reach kernel interfaces qemu-user does not emulate: tc (bandwidth)
//! and netfilter netlink (portmap, firewall, masquerade) in a cnitool chain. They run in
//! full natively, with the x86_64 binary and the i686 one; under qemu-user each step the
//! emulator refuses is named (`NOT EXERCISED under qemu-user: …`, see
//! `common::emulation`) and every other check still applies.
use crate::common;
use crate::portmap_support::{sa, tcp_get, Node, Server, NODE_V4};

use common::emulation::{not_exercised, NETFILTER_REFUSED, RTNETLINK_REFUSED};
use common::TestEnv;
use serde_json::{json, Value};

/// A bridge network with masquerade, portmap and firewall, through cnitool: a port of the
/// node forwards to the container; CHECK passes; DEL removes the forward and the rules.
#[test]
fn cnitool_chain_of_bridge_portmap_and_firewall() {
    let node = Node::new();
    let conf_dir = node.env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let ipam = json!({"type": "host-local", "subnet": "10.96.0.0/24", "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": node.env.data_dir});
    let list = json!({"cniVersion": "1.0.0", "name": "chain", "plugins": [
        {"type": "bridge", "bridge": "cni-ch0", "isGateway": true, "ipMasq": true, "ipam": ipam},
        {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
        {"type": "firewall", "backend": "iptables"},
    ]});
    std::fs::write(conf_dir.join("10-chain.conflist"), list.to_string()).unwrap();
    let ns = node.env.container();
    let _server = Server::start(&ns, 80, "chained");
    let caps = json!({"portMappings": [{"hostPort": 8081, "containerPort": 80, "protocol": "tcp"}]});
    let tool = |verb: &str| {
        let call = node.env.cnitool(&conf_dir, verb, "chain", ns.path_str());
        call.env("CAP_ARGS", &caps.to_string()).run()
    };
    let added = tool("add");
    if not_exercised(
        &added,
        NETFILTER_REFUSED,
        "masquerade, portmap and firewall (netfilter netlink: nf_tables, iptables-nft, conntrack)",
        "bridge::behaviour::ip_masquerade_with_both_backends, portmap::behaviour::, firewall::",
    ) {
        // DEL needs the same sockets: it is refused alike (the namespaces go with the test)
        let deleted = tool("del");
        let named = not_exercised(
            &deleted,
            NETFILTER_REFUSED,
            "the chain's DEL (portmap, firewall)",
            "portmap::behaviour::del_matrix, firewall::behaviour::del_matrix",
        );
        assert!(named, "DEL: {deleted:?}");
        return;
    }
    let r = added.success();
    assert_eq!(r["interfaces"][0]["name"], "cni-ch0", "{r}");
    assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8081)).as_deref(), Some("chained"));
    let filter = node.env.host.exec(&["iptables-save", "-t", "filter"]);
    assert!(filter.contains("CNI-FORWARD"), "firewall rules: {filter}");
    tool("check").success();
    tool("del").success();
    assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8081)), None, "the forward is gone");
    assert!(!ns.has_link("eth0"));
    let filter = node.env.host.exec(&["iptables-save", "-t", "filter"]);
    assert!(!filter.contains("10.96.0."), "no rule names the container: {filter}");
}

const HOST_VETH: &str = "bwhost0";

fn bandwidth_conf(version: &str, ns: &common::Netns) -> Value {
    json!({"cniVersion": version, "name": "bwnet", "type": "bandwidth",
        "ingressRate": 800_000, "ingressBurst": 80_000, "egressRate": 400_000, "egressBurst": 40_000,
        "prevResult": {"cniVersion": version,
            "interfaces": [{"name": HOST_VETH}, {"name": "eth0", "sandbox": ns.path_str()}],
            "ips": [{"address": "10.9.0.2/24", "interface": 1}]}})
}

/// `tc -j qdisc show dev DEV` in the host namespace, as (kind, handle) pairs.
fn qdiscs(env: &TestEnv, dev: &str) -> Vec<(String, String)> {
    let out = env.host.exec(&["tc", "-j", "qdisc", "show", "dev", dev]);
    let v: Value = serde_json::from_str(&out).unwrap_or(json!([]));
    v.as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["kind"].as_str().unwrap().to_string(),
                q["handle"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Bandwidth shapes both directions with tc: a tbf on the host veth (ingress of the
/// container), and an ingress qdisc redirecting to an ifb with its own tbf (egress);
/// CHECK passes; DEL removes the ifb and the qdiscs.
#[test]
fn bandwidth_shapes_both_directions_with_tc() {
    let env = TestEnv::new();
    let ns = env.container();
    env.host.ip(&[
        "link", "add", HOST_VETH, "type", "veth", "peer", "name", "eth0", "netns", &ns.name,
    ]);
    env.host.ip(&["link", "set", HOST_VETH, "up"]);
    ns.ip(&["link", "set", "eth0", "up"]);
    for version in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
        let conf = bandwidth_conf(version, &ns);
        let call = |verb: &str| env.call("bandwidth").exec(verb, "bw", ns.path_str(), "eth0", &conf);
        let added = call("ADD");
        if not_exercised(
            &added,
            RTNETLINK_REFUSED,
            "bandwidth's tc qdiscs and filters (RTM_NEWQDISC)",
            "bandwidth::",
        ) {
            let ifbs: Vec<String> = env.host.links().into_iter().filter(|l| l.starts_with("bwp")).collect();
            assert!(ifbs.is_empty(), "{version}: a failed ADD leaves no ifb: {ifbs:?}");
            call("DEL").success();
            return;
        }
        let r = added.success();
        let ifb = r["interfaces"][2]["name"].as_str().unwrap().to_string();
        assert!(ifb.starts_with("bwp"), "{version}: {r}");
        let host = qdiscs(&env, HOST_VETH);
        assert!(host.iter().any(|(k, _)| k == "tbf"), "{version}: {host:?}");
        assert!(
            host.iter().any(|(k, h)| k == "ingress" && h == "ffff:"),
            "{version}: {host:?}"
        );
        let on_ifb = qdiscs(&env, &ifb);
        assert!(on_ifb.iter().any(|(k, _)| k == "tbf"), "{version}: {on_ifb:?}");
        let filters = env
            .host
            .exec(&["tc", "filter", "show", "dev", HOST_VETH, "parent", "ffff:"]);
        assert!(
            filters.contains(&format!("Redirect to device {ifb}")),
            "{version}: {filters}"
        );
        if version != "0.3.1" {
            call("CHECK").success();
        }
        call("DEL").success();
        assert!(!env.host.has_link(&ifb), "{version}: DEL removes the ifb");
        let host = qdiscs(&env, HOST_VETH);
        assert!(
            !host.iter().any(|(k, _)| k == "tbf" || k == "ingress"),
            "{version}: {host:?}"
        );
    }
}
