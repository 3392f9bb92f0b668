//! The portmap plugin with real traffic, with each backend: from outside the node, from
//! the node itself (its own address and localhost), hairpin, UDP with stale conntrack
//! entries, two containers, duplicate host ports; the DEL matrix, CHECK, GC and bad input.
//! Everything happens inside the test's namespaces (see portmap_support).
use crate::common;
use crate::portmap_support;

use common::Netns;
use portmap_support::*;
use serde_json::{json, Value};

fn tcp(port: u32, container_port: u32) -> Value {
    json!({"hostPort": port, "containerPort": container_port, "protocol": "tcp"})
}

fn udp(port: u32, container_port: u32) -> Value {
    json!({"hostPort": port, "containerPort": container_port, "protocol": "udp"})
}

/// Runs `f` once per backend (skipping nftables where the kernel lacks nf_tables).
fn each_backend(f: impl Fn(&str)) {
    for b in BACKENDS {
        let probe = Netns::new("p");
        if *b == "nftables" && !have_nft(&probe) {
            eprintln!("skipping nftables: nf_tables is not available");
            continue;
        }
        drop(probe);
        eprintln!("backend {b}");
        f(b);
    }
}

/// A node with one container `ctr-a` serving on 80, its host port 8080 mapped.
fn one_container(backend: &str, v6: bool, mappings: Value) -> (Node, Netns, Value, Server) {
    let node = Node::new();
    let (ns, prev) = node.container("ctr-a", v6);
    let server = Server::start(&ns, 80, "ctr-a");
    let c = pm_conf(Some(backend), mappings, &prev, json!({}));
    let r = node.pm(Side::Cnibox, "ADD", "ctr-a", ns.path_str(), &c).success();
    assert_eq!(r, prev, "portmap passes the previous result through");
    (node, ns, c, server)
}

#[test]
fn outside_reaches_the_container_through_the_host_port() {
    each_backend(|b| {
        let (node, _ns, _c, _s) = one_container(b, true, json!([tcp(8080, 80), udp(8053, 80)]));
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
        assert_eq!(tcp_get(&node.client, sa(NODE_V6, 8080)).as_deref(), Some("ctr-a"));
        let u = UdpClient::new(&node.client, false);
        assert_eq!(u.ask(sa(NODE_V4, 8053)).as_deref(), Some("ctr-a"));
        let u6 = UdpClient::new(&node.client, true);
        assert_eq!(u6.ask(sa(NODE_V6, 8053)).as_deref(), Some("ctr-a"));
        // unmapped ports are not forwarded
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8081)), None);
    });
}

#[test]
fn the_node_reaches_the_container_by_its_own_address_and_localhost() {
    each_backend(|b| {
        let (node, _ns, _c, _s) = one_container(b, false, json!([tcp(8080, 80)]));
        let host = &node.env.host;
        assert_eq!(tcp_get(host, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
        assert_eq!(
            host.sysctl(&format!("net/ipv4/conf/{BRIDGE}/route_localnet")),
            "1",
            "route_localnet on the interface that routes to the container"
        );
        assert_eq!(tcp_get(host, sa("127.0.0.1", 8080)).as_deref(), Some("ctr-a"));
    });
}

#[test]
fn hairpin_a_container_reaches_itself_through_its_host_port() {
    each_backend(|b| {
        let (_node, ns, _c, _s) = one_container(b, false, json!([tcp(8080, 80)]));
        assert_eq!(tcp_get(&ns, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
    });
}

#[test]
fn without_snat_localhost_is_not_forwarded() {
    each_backend(|b| {
        let node = Node::new();
        let (ns, prev) = node.container("ctr-a", false);
        let _s = Server::start(&ns, 80, "ctr-a");
        let c = pm_conf(Some(b), json!([tcp(8080, 80)]), &prev, json!({"snat": false}));
        node.pm(Side::Cnibox, "ADD", "ctr-a", ns.path_str(), &c).success();
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
        assert_eq!(tcp_get(&node.env.host, sa("127.0.0.1", 8080)), None);
        let rules = format!("{}{}", node.ipt_nat(), node.nft_tables());
        assert!(!rules.contains("SETMARK") && !rules.contains("masquerade"), "{rules}");
    });
}

#[test]
fn udp_stale_conntrack_entries_are_removed_on_add() {
    use cnibox::netlink::conntrack::{Conntrack, PROTO_UDP};
    each_backend(|b| {
        let node = Node::new();
        // dual-stack: both families' entries come from one dump
        let (ns, prev) = node.container("ctr-a", true);
        let _s = Server::start(&ns, 53, "ctr-a");
        // A client keeps sending to the host port before it is mapped: the node tracks
        // that flow (unanswered), and without the cleanup it would keep bypassing DNAT.
        let u = UdpClient::new(&node.client, false);
        assert_eq!(u.ask(sa(NODE_V4, 5353)), None);
        let tracked = in_ns(&node.env.host, || {
            let ct = Conntrack::current().unwrap();
            ct.entries(cnibox::netlink::Family::V4)
                .unwrap()
                .into_iter()
                .any(|e| e.protocol == PROTO_UDP && e.dst_port == Some(5353))
        })
        .join()
        .unwrap();
        assert!(tracked, "the unanswered flow is tracked before the ADD");
        let c = pm_conf(Some(b), json!([udp(5353, 53)]), &prev, json!({}));
        node.pm(Side::Cnibox, "ADD", "ctr-a", ns.path_str(), &c).success();
        assert_eq!(u.ask(sa(NODE_V4, 5353)).as_deref(), Some("ctr-a"), "same source port");
    });
}

/// A node with `ctr-a` (host port 8080) and `ctr-b` (8081), both serving on 80.
struct Two {
    node: Node,
    a: Netns,
    ca: Value,
    _b: Netns,
    _servers: (Server, Server),
}

fn two_containers(backend: &str) -> Two {
    let node = Node::new();
    let (a, prev_a) = node.container("ctr-a", false);
    let (b, prev_b) = node.container("ctr-b", false);
    let servers = (Server::start(&a, 80, "ctr-a"), Server::start(&b, 80, "ctr-b"));
    let ca = pm_conf(Some(backend), json!([tcp(8080, 80)]), &prev_a, json!({}));
    let cb = pm_conf(Some(backend), json!([tcp(8081, 80)]), &prev_b, json!({}));
    node.pm(Side::Cnibox, "ADD", "ctr-a", a.path_str(), &ca).success();
    node.pm(Side::Cnibox, "ADD", "ctr-b", b.path_str(), &cb).success();
    Two {
        node,
        a,
        ca,
        _b: b,
        _servers: servers,
    }
}

#[test]
fn two_containers_on_different_host_ports() {
    each_backend(|b| {
        let two = two_containers(b);
        let (node, a, ca) = (&two.node, &two.a, &two.ca);
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8081)).as_deref(), Some("ctr-b"));
        // each container reaches the other through the node
        assert_eq!(tcp_get(a, sa(NODE_V4, 8081)).as_deref(), Some("ctr-b"));
        node.pm(Side::Cnibox, "DEL", "ctr-a", a.path_str(), ca).success();
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)), None);
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8081)).as_deref(), Some("ctr-b"));
    });
}

/// Regression: the nftables backend's DEL (and an ADD's rollback) removed every rule
/// commented with the container ID, so DEL of a container's attachment to one network
/// also took the forwards of its attachment to another.
#[test]
fn del_on_one_network_keeps_the_same_containers_forwards_on_another() {
    each_backend(|b| {
        let (node, a, one, _server) = one_container(b, false, json!([tcp(8080, 80)]));
        let two = pm_conf(
            Some(b),
            json!([tcp(8082, 80)]),
            &one["prevResult"],
            json!({"name": "othernet"}),
        );
        node.pm(Side::Cnibox, "ADD", "ctr-a", a.path_str(), &two).success();
        node.pm(Side::Cnibox, "DEL", "ctr-a", a.path_str(), &one).success();
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)), None);
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8082)).as_deref(), Some("ctr-a"));
        node.pm(Side::Cnibox, "CHECK", "ctr-a", a.path_str(), &two).success();
        node.pm(Side::Cnibox, "DEL", "ctr-a", a.path_str(), &two).success();
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8082)), None);
        assert_no_rules(&node, "ctr-a");
    });
}

/// Regression: the iptables backend named an attachment's chain after network and
/// container alone, so the ADD of a container's second interface on the same network
/// replaced the first interface's forwards (CHECK of eth0 then failed), and the DEL of
/// either interface removed both; the nftables backend's DEL also removed both.
#[test]
fn each_interface_on_one_network_keeps_its_own_forwards() {
    each_backend(|b| {
        let (node, ns, c0, _server) = one_container(b, false, json!([tcp(8080, 80)]));
        let prev1 = node.attach("ctr-a", &ns, "eth1", false);
        let c1 = pm_conf(Some(b), json!([tcp(9090, 80)]), &prev1, json!({}));
        let mut c1_no_prev = c1.clone();
        c1_no_prev.as_object_mut().unwrap().remove("prevResult");
        let mut c0_no_prev = c0.clone();
        c0_no_prev.as_object_mut().unwrap().remove("prevResult");
        let eth1 = |verb: &str, conf: &Value| {
            node.portmap(Side::Cnibox)
                .exec(verb, "ctr-a", ns.path_str(), "eth1", conf)
        };
        let eth0 = |verb: &str, conf: &Value| node.pm(Side::Cnibox, verb, "ctr-a", ns.path_str(), conf);
        let reach = |port| tcp_get(&node.client, sa(NODE_V4, port));

        eth1("ADD", &c1).success();
        assert_eq!(reach(8080).as_deref(), Some("ctr-a"), "eth0's forward after eth1's ADD");
        assert_eq!(reach(9090).as_deref(), Some("ctr-a"));
        eth0("CHECK", &c0).success();
        eth1("CHECK", &c1).success();

        eth1("DEL", &c1).success();
        assert_eq!(reach(9090), None);
        assert_eq!(reach(8080).as_deref(), Some("ctr-a"), "eth0's forward after eth1's DEL");
        eth0("CHECK", &c0).success();
        // repeated without prevResult (a runtime's cache is gone after the first DEL)
        eth1("DEL", &c1_no_prev).success();
        assert_eq!(reach(8080).as_deref(), Some("ctr-a"), "after eth1's second DEL");
        eth0("CHECK", &c0).success();

        // the other way round: eth0 goes first, without prevResult
        eth1("ADD", &c1).success();
        eth0("DEL", &c0_no_prev).success();
        assert_eq!(reach(8080), None);
        assert_eq!(reach(9090).as_deref(), Some("ctr-a"), "eth1's forward after eth0's DEL");
        eth1("CHECK", &c1).success();
        eth0("DEL", &c0_no_prev).success();
        assert_eq!(reach(9090).as_deref(), Some("ctr-a"), "after eth0's second DEL");
        eth1("DEL", &c1_no_prev).success();
        assert_eq!(reach(9090), None);
        assert_no_rules(&node, "ctr-a");
    });
}

#[test]
fn a_host_port_mapped_by_another_attachment_is_an_error() {
    each_backend(|b| {
        let node = Node::new();
        let (a, prev_a) = node.container("ctr-a", false);
        let (bns, prev_b) = node.container("ctr-b", false);
        let _sa = Server::start(&a, 80, "ctr-a");
        let ca = pm_conf(Some(b), json!([tcp(8080, 80)]), &prev_a, json!({}));
        node.pm(Side::Cnibox, "ADD", "ctr-a", a.path_str(), &ca).success();
        let before = (node.ipt_nat(), node.nft_tables());
        let cb = pm_conf(Some(b), json!([udp(8080, 80), tcp(8080, 81)]), &prev_b, json!({}));
        let msg = node.pm(Side::Cnibox, "ADD", "ctr-b", bns.path_str(), &cb).failure(999);
        assert!(msg.starts_with("host port 8080/tcp is already mapped by "), "{msg}");
        assert!(msg.contains(&format!("container ctr-a of network {NET}")), "{msg}");
        assert_eq!(
            (node.ipt_nat(), node.nft_tables()),
            before,
            "the failed ADD changed nothing"
        );
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
        // the same attachment again is no clash (a runtime may repeat an ADD) ...
        node.pm(Side::Cnibox, "ADD", "ctr-a", a.path_str(), &ca).success();
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
        // ... nor is the same port on another protocol or limited to another host address
        let other = pm_conf(
            Some(b),
            json!([udp(8080, 80), {"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "10.99.0.1"}]),
            &prev_b,
            json!({}),
        );
        let msg = node
            .pm(Side::Cnibox, "ADD", "ctr-b", bns.path_str(), &other)
            .failure(999);
        assert!(
            msg.contains("on 10.99.0.1"),
            "an address-limited mapping still overlaps a wildcard one: {msg}"
        );
        let other = pm_conf(Some(b), json!([udp(8080, 80)]), &prev_b, json!({}));
        node.pm(Side::Cnibox, "ADD", "ctr-b", bns.path_str(), &other).success();
        // once the first is gone the port is free
        node.pm(Side::Cnibox, "DEL", "ctr-a", a.path_str(), &ca).success();
        node.pm(Side::Cnibox, "ADD", "ctr-b", bns.path_str(), &cb).success();
    });
}

/// Regression: the taken-port check and the rules were not under one lock, so concurrent
/// ADDs of different containers asking for the same host port could all pass the check and
/// all install their forwards.
#[test]
fn concurrent_adds_of_one_host_port_let_exactly_one_win() {
    const N: usize = 8;
    each_backend(|b| {
        let node = Node::new();
        let ids: Vec<String> = (0..N).map(|i| format!("race-{i}")).collect();
        let containers: Vec<(Netns, Value)> = ids.iter().map(|id| node.container(id, false)).collect();
        let start = std::sync::Barrier::new(N);
        let outs: Vec<_> = std::thread::scope(|s| {
            let runs: Vec<_> = ids
                .iter()
                .zip(&containers)
                .map(|(id, (ns, prev))| {
                    let (node, start) = (&node, &start);
                    s.spawn(move || {
                        let c = pm_conf(Some(b), json!([tcp(8080, 80)]), prev, json!({}));
                        start.wait();
                        node.pm(Side::Cnibox, "ADD", id, ns.path_str(), &c)
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let winners: Vec<usize> = (0..N).filter(|i| outs[*i].ok()).collect();
        let said: Vec<(i32, &str)> = outs.iter().map(|o| (o.code, o.stdout.trim())).collect();
        assert_eq!(winners.len(), 1, "exactly one ADD takes the port: {said:#?}");
        let winner = &ids[winners[0]];
        for (id, out) in ids.iter().zip(&outs).filter(|(id, _)| *id != winner) {
            let msg = out.failure(999);
            assert_eq!(
                msg,
                format!("host port 8080/tcp is already mapped by container {winner} of network {NET}"),
                "{id}"
            );
            assert_no_rules(&node, id);
        }
        let (ns, _) = &containers[winners[0]];
        let _s = Server::start(ns, 80, winner);
        assert_eq!(
            tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(),
            Some(winner.as_str())
        );
    });
}

#[test]
fn host_ip_limits_the_forwarded_destination() {
    each_backend(|b| {
        let node = Node::new();
        node.env.host.ip(&["addr", "add", "192.168.77.3/24", "dev", "ext0"]);
        let (ns, prev) = node.container("ctr-a", false);
        let _s = Server::start(&ns, 80, "ctr-a");
        let m = json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": NODE_V4},
                       {"hostPort": 8090, "containerPort": 80, "protocol": "tcp", "hostIP": "0.0.0.0"},
                       {"hostPort": 8443, "containerPort": 80, "protocol": "tcp", "hostIP": "fd77::1"}]);
        let c = pm_conf(Some(b), m, &prev, json!({}));
        node.pm(Side::Cnibox, "ADD", "ctr-a", ns.path_str(), &c).success();
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
        assert_eq!(tcp_get(&node.client, sa("192.168.77.3", 8080)), None);
        // 0.0.0.0 means every address
        assert_eq!(
            tcp_get(&node.client, sa("192.168.77.3", 8090)).as_deref(),
            Some("ctr-a")
        );
        // an IPv6 host IP does not apply to an IPv4-only container
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8443)), None);
    });
}

/// Nothing of portmap is left for `id`.
fn assert_no_rules(node: &Node, id: &str) {
    use cnibox::plugins::portmap::{iptables, Attachment};
    let ipt = node.ipt_nat();
    assert!(
        !ipt.contains(&format!("id: \\\"{id}\\\"")),
        "iptables rules left:\n{ipt}"
    );
    for ifname in [IFNAME, "eth1"] {
        let att = Attachment {
            network: NET,
            container_id: id,
            ifname,
        };
        for chain in [iptables::chain_name("DN-", att), iptables::interface_chain(att)] {
            assert!(!ipt.contains(&chain), "iptables chain left:\n{ipt}");
        }
    }
    let nft = node.nft_tables();
    assert!(
        !nft.contains(&format!("comment \"{id}\"")),
        "nftables rules left:\n{nft}"
    );
}

#[test]
fn del_matrix() {
    each_backend(|b| {
        let node = Node::new();
        let (ns, prev) = node.container("ctr-a", true);
        let _s = Server::start(&ns, 80, "ctr-a");
        let c = pm_conf(Some(b), json!([tcp(8080, 80), udp(8053, 53)]), &prev, json!({}));
        let add = |node: &Node| node.pm(Side::Cnibox, "ADD", "ctr-a", ns.path_str(), &c).success();
        let mut no_prev = c.clone();
        no_prev.as_object_mut().unwrap().remove("prevResult");
        let mut no_maps = c.clone();
        no_maps.as_object_mut().unwrap().remove("runtimeConfig");
        let mut other_backend = c.clone();
        other_backend["backend"] = json!(if b == "iptables" { "nftables" } else { "iptables" });
        let cases: [(&str, &str, &Value); 5] = [
            ("netns given", ns.path_str(), &c),
            ("no netns", "", &c),
            ("no prevResult", "", &no_prev),
            ("no portMappings", "", &no_maps),
            ("config names the other backend", "", &other_backend),
        ];
        for (what, netns, conf) in cases {
            add(&node);
            assert_eq!(
                tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(),
                Some("ctr-a"),
                "{what}"
            );
            node.pm(Side::Cnibox, "DEL", "ctr-a", netns, conf).success();
            assert_no_rules(&node, "ctr-a");
            assert_eq!(
                tcp_get(&node.client, sa(NODE_V4, 8080)),
                None,
                "{what}: still forwarded"
            );
            // idempotent
            node.pm(Side::Cnibox, "DEL", "ctr-a", netns, conf).success();
        }
        // DEL of something never added
        node.pm(Side::Cnibox, "DEL", "never", "", &c).success();
    });
}

#[test]
fn check_verifies_the_rules() {
    each_backend(|b| {
        let (node, ns, c, _s) = one_container(b, false, json!([tcp(8080, 80), udp(8053, 53)]));
        // IPv4-only: the reference 1.1.1 fails this on the missing ip6tables chain
        node.pm(Side::Cnibox, "CHECK", "ctr-a", ns.path_str(), &c).success();
        let mut no_prev = c.clone();
        no_prev.as_object_mut().unwrap().remove("prevResult");
        let msg = node
            .pm(Side::Cnibox, "CHECK", "ctr-a", ns.path_str(), &no_prev)
            .failure(999);
        assert_eq!(msg, "Required prevResult missing");
        // a CHECK for a container whose rules are gone fails
        let msg = node.pm(Side::Cnibox, "CHECK", "ctr-z", ns.path_str(), &c).failure(999);
        assert!(!msg.is_empty());
        node.pm(Side::Cnibox, "DEL", "ctr-a", ns.path_str(), &c).success();
        let msg = node.pm(Side::Cnibox, "CHECK", "ctr-a", ns.path_str(), &c).failure(999);
        assert!(!msg.is_empty());
    });
}

/// Regression: the iptables backend's CHECK looked for the entry rule's words in the order
/// ADD wrote them, but iptables-save puts an address condition (`-s`) before `-p`, so the
/// CHECK of every config with such a `conditionsV4` failed with "rule … not found" (the
/// generated key tests found it: `go_keys`).
#[test]
fn check_finds_the_entry_rule_of_an_address_condition() {
    let node = Node::new();
    let (ns, prev) = node.container("ctr-a", false);
    let conditions = json!({"conditionsV4": ["-s", "192.0.2.0/24"]});
    let c = pm_conf(Some("iptables"), json!([tcp(8080, 80)]), &prev, conditions);
    node.pm(Side::Cnibox, "ADD", "ctr-a", ns.path_str(), &c).success();
    assert!(node.ipt_nat().contains("-A CNI-HOSTPORT-DNAT -s 192.0.2.0/24 -p tcp"));
    node.pm(Side::Cnibox, "CHECK", "ctr-a", ns.path_str(), &c).success();
    node.pm(Side::Cnibox, "DEL", "ctr-a", ns.path_str(), &c).success();
    let msg = node.pm(Side::Cnibox, "CHECK", "ctr-a", ns.path_str(), &c).failure(999);
    assert!(msg.starts_with("could not check ipv4 dnat: chain CNI-DN-"), "{msg}");
}

#[test]
fn gc_removes_the_rules_of_attachments_no_longer_valid() {
    each_backend(|b| {
        let two = two_containers(b);
        let node = &two.node;
        let gc = json!({
            "cniVersion": "1.1.0", "name": NET, "type": "portmap", "backend": b,
            "cni.dev/valid-attachments": [{"containerID": "ctr-a", "ifname": IFNAME}],
        });
        node.portmap(Side::Cnibox).command("GC").config(&gc).run().success();
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8081)), None);
        assert_no_rules(node, "ctr-b");
        // GC of another network touches nothing of this one
        let mut other = gc.clone();
        other["name"] = json!("othernet");
        other["cni.dev/valid-attachments"] = json!([]);
        node.portmap(Side::Cnibox).command("GC").config(&other).run().success();
        assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("ctr-a"));
    });
}

#[test]
fn add_without_mappings_or_prev_result() {
    let node = Node::new();
    let (ns, prev) = node.container("ctr-a", false);
    let c = pm_conf(None, json!([]), &prev, json!({}));
    let r = node.pm(Side::Cnibox, "ADD", "ctr-a", ns.path_str(), &c).success();
    assert_eq!(r, prev);
    assert_no_rules(&node, "ctr-a");
    let mut no_prev = pm_conf(None, json!([tcp(1, 1)]), &prev, json!({}));
    no_prev.as_object_mut().unwrap().remove("prevResult");
    let msg = node
        .pm(Side::Cnibox, "ADD", "ctr-a", ns.path_str(), &no_prev)
        .failure(999);
    assert_eq!(msg, "must be called as chained plugin");
}

#[test]
fn bad_input_changes_nothing() {
    let node = Node::new();
    let (ns, prev) = node.container("ctr-a", false);
    let before = (node.ipt_nat(), node.nft_tables());
    let cases = [
        (
            json!([tcp(70000, 80)]),
            json!({}),
            "failed to parse config: Invalid host port number: 70000",
        ),
        (
            json!([tcp(80, 0)]),
            json!({}),
            "failed to parse config: Invalid container port number: 0",
        ),
        (
            json!([{"hostPort": 80, "containerPort": 80, "protocol": "icmp"}]),
            json!({}),
            "failed to parse config: Invalid protocol \"icmp\" for host port 80 (tcp, udp or sctp)",
        ),
        (
            json!([{"hostPort": 80, "containerPort": 80, "protocol": "tcp", "hostIP": "nope"}]),
            json!({}),
            "failed to parse config: Invalid host IP \"nope\" for host port 80",
        ),
        (
            json!([tcp(80, 80)]),
            json!({"markMasqBit": 32}),
            "failed to parse config: MasqMarkBit must be between 0 and 31",
        ),
        (
            json!([tcp(80, 80)]),
            json!({"backend": "pf"}),
            "failed to parse config: unrecognized backend \"pf\"",
        ),
    ];
    for (m, extra, want) in cases {
        let c = pm_conf(None, m, &prev, extra);
        for verb in ["ADD", "CHECK"] {
            let msg = node.pm(Side::Cnibox, verb, "ctr-a", ns.path_str(), &c).failure(999);
            // the reference's CHECK returns parse errors without the prefix
            let want = match verb {
                "CHECK" => want.trim_start_matches("failed to parse config: "),
                _ => want,
            };
            assert_eq!(msg, want, "{verb}");
        }
        // DEL reports the refusal and succeeds (the reference's DEL fails: README, Differences)
        let del = node.pm(Side::Cnibox, "DEL", "ctr-a", ns.path_str(), &c);
        del.success();
        assert!(del.stderr.contains(want), "{del:?}");
    }
    assert_eq!((node.ipt_nat(), node.nft_tables()), before);
}

/// Regression: the nftables backend parsed conditionsV4/V6 only when it came to each
/// family, so a bad conditionsV6 failed a dual-stack ADD after the IPv4 table was made
/// (and DEL and CHECK did not notice it at all); now loading refuses it.
#[test]
fn bad_nftables_conditions_fail_in_loading_before_any_change() {
    let node = Node::new();
    if !have_nft(&node.env.host) {
        eprintln!("skipping: nf_tables is not available");
        return;
    }
    let (ns, prev) = node.container("ctr-a", true);
    let before = (node.ipt_nat(), node.nft_tables());
    let conditions = json!({
        "conditionsV4": ["ip saddr 192.168.77.0/24"],
        "conditionsV6": ["ip6 saddr fd77::/64", "ip saddr 10.0.0.0/8"],
    });
    let c = pm_conf(None, json!([tcp(8080, 80)]), &prev, conditions);
    let want = "conditionsV6: ip matches do not apply to the ip6 table";
    for verb in ["ADD", "DEL", "CHECK"] {
        let out = node.pm(Side::Cnibox, verb, "ctr-a", ns.path_str(), &c);
        if verb == "DEL" {
            // reported, and DEL still succeeds
            out.success();
            assert!(out.stderr.contains(want), "{out:?}");
        } else {
            // the reference's CHECK returns parse errors without the prefix
            let prefix = if verb == "CHECK" {
                ""
            } else {
                "failed to parse config: "
            };
            assert_eq!(out.failure(999), format!("{prefix}{want}"), "{verb}");
        }
        assert_eq!((node.ipt_nat(), node.nft_tables()), before, "{verb} changed something");
    }
}

/// plugins.d/80-bridge-portmap.conflist through cnitool, the mapping from CAP_ARGS (the
/// `portMappings` capability), with a connection from outside the node.
#[test]
fn plugins_d_example_forwards_a_port_through_cnitool() {
    let node = Node::new();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/plugins.d/80-bridge-portmap.conflist");
    let mut list: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    list["plugins"][0]["ipam"]["dataDir"] = json!(node.env.data_dir);
    let conf_dir = node.env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    std::fs::write(conf_dir.join("80-bridge-portmap.conflist"), list.to_string()).unwrap();
    let ns = node.env.container();
    let _s = Server::start(&ns, 80, "example");
    let caps = json!({"portMappings": [tcp(8080, 80)]}).to_string();
    let tool = |verb: &str| {
        let call = node.env.cnitool(&conf_dir, verb, "cnibox-portmap", ns.path_str());
        call.env("CAP_ARGS", &caps).run()
    };
    let r = tool("add").success();
    assert_eq!(r["interfaces"][0]["name"], "cnibox4", "{r}");
    assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)).as_deref(), Some("example"));
    tool("check").success();
    tool("del").success();
    assert_eq!(tcp_get(&node.client, sa(NODE_V4, 8080)), None);
    assert!(!node.nft_tables().contains("dnat to"), "{}", node.nft_tables());
}

/// ADD reads its nftables table once per family, for both the host-port check and the
/// forwards (it dumped the table's rules twice: a millisecond more per ADD on a node with
/// a few hundred forwards).
#[test]
fn add_dumps_the_nftables_rules_once() {
    let node = Node::new();
    let (a, prev) = node.container("ctr-a", false);
    let c = pm_conf(Some("nftables"), json!([tcp(8080, 80)]), &prev, json!({}));
    for round in ["first ADD (no table yet)", "repeated ADD"] {
        let log = node.env.tmp.path().join(common::unique("strace"));
        let out = node
            .portmap(Side::Cnibox)
            .verb("ADD", "ctr-a", a.path_str(), IFNAME)
            .config(&c)
            .run_under(&["strace", "-qq", "-e", "trace=sendto", "-o", log.to_str().unwrap()]);
        out.success();
        let sent = std::fs::read_to_string(&log).unwrap();
        let dumps = sent.lines().filter(|l| l.contains("NFT_MSG_GETRULE")).count();
        assert_eq!(dumps, 1, "{round}: rule dumps:\n{sent}");
    }
    node.pm(Side::Cnibox, "DEL", "ctr-a", a.path_str(), &c).success();
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("portmap");
}
