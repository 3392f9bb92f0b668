//! flannel: the meta plugin every flannel and k3s node runs. Two "nodes" (host namespaces)
//! on an underlay bridge, each with a kernel vxlan VTEP `flannel.1` set up as flanneld's
//! vxlan backend sets it up and its own `subnet.env`; pods made on each node by `cnitool`
//! with k3s's default conflist (flannel delegating to bridge + host-local, portmap,
//! bandwidth) and containerd's loopback network talk across the overlay and reach a hostPort
//! on the other node. Plus the DEL matrix and the shared keys.
use crate::common;
use crate::plugin_state;
use crate::portmap_support::{sa, tcp_get, Server};

use common::{CallOutput, Netns, TestEnv};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The cluster network flanneld hands subnets out of.
const CLUSTER: &str = "10.42.0.0/16";
const VNI: &str = "1";
const VXLAN_PORT: &str = "8472";

/// One node: its host namespace, `subnet.env`, conf dir and VTEP.
struct Node {
    env: TestEnv,
    /// `n` of 10.42.n.0/24 and of the underlay address 192.168.77.n.
    n: u8,
    conf_dir: PathBuf,
}

impl Node {
    fn underlay_ip(&self) -> String {
        format!("192.168.77.{}", self.n)
    }

    fn vtep_mac(&self) -> String {
        format!("02:42:c0:a8:4d:{:02x}", self.n)
    }

    /// The VTEP's address: the subnet's network address, as flanneld gives it.
    fn vtep_ip(&self) -> String {
        format!("10.42.{}.0", self.n)
    }

    fn subnet(&self) -> String {
        format!("10.42.{}.0/24", self.n)
    }

    fn flannel_dir(&self) -> PathBuf {
        self.env.tmp.path().join("flannel")
    }

    /// cnitool in the node's namespace, with the node's conf dir, cache and bin dir.
    fn cnitool(&self, verb: &str, net: &str, pod: &Netns, caps: &Value) -> CallOutput {
        self.env
            .tool("cnitool")
            .args([verb, net, pod.path_str()])
            .env("NETCONFPATH", self.conf_dir.to_str().unwrap())
            .env("CNI_PATH", self.env.bin_dir.to_str().unwrap())
            .env("CNI_CACHE_DIR", self.env.cache_dir.to_str().unwrap())
            .env("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web")
            .env("CAP_ARGS", &caps.to_string())
            .run()
    }

    /// What a node keeps of its pods: links, addresses, routes, the firewall rules, the
    /// reservations and flannel's stored delegate configs.
    fn state(&self) -> Value {
        json!({
            "links": plugin_state::link_names(&self.env.host),
            "addrs": plugin_state::addrs(&self.env.host),
            "routes": plugin_state::routes(&self.env.host),
            // compared on its own after DEL: the plugins' tables stay
            "rules": plugin_state::rules(&self.env.host),
            "reservations": plugin_state::reservations(&self.env, "cbr0"),
            "flannel": common::read_dir_map(&self.flannel_dir()).into_keys().collect::<Vec<_>>(),
        })
    }
}

/// Two nodes on an underlay bridge, each with flanneld's vxlan VTEP, routes, neighbour and
/// FDB entries for the other, and a `subnet.env` with overlay MTU `mtu`.
fn cluster(mtu: u32) -> (Netns, Node, Node) {
    common::require_root();
    let underlay = Netns::new("ul");
    underlay.ip(&["link", "add", "ul0", "type", "bridge"]);
    underlay.ip(&["link", "set", "ul0", "up"]);
    let nodes: Vec<Node> = [1u8, 2].into_iter().map(|n| node(&underlay, n, mtu)).collect();
    let [a, b]: [Node; 2] = nodes.try_into().unwrap_or_else(|_| unreachable!());
    for (from, to) in [(&a, &b), (&b, &a)] {
        let h = &from.env.host;
        h.ip(&[
            "route",
            "add",
            &to.subnet(),
            "via",
            &to.vtep_ip(),
            "dev",
            "flannel.1",
            "onlink",
        ]);
        h.ip(&[
            "neigh",
            "add",
            &to.vtep_ip(),
            "lladdr",
            &to.vtep_mac(),
            "dev",
            "flannel.1",
            "nud",
            "permanent",
        ]);
        let mut fdb = h.command("bridge");
        fdb.args([
            "fdb",
            "append",
            &to.vtep_mac(),
            "dev",
            "flannel.1",
            "dst",
            &to.underlay_ip(),
        ]);
        common::run_ok(&mut fdb);
    }
    (underlay, a, b)
}

fn node(underlay: &Netns, n: u8, mtu: u32) -> Node {
    let env = TestEnv::new();
    let port = format!("ul{n}");
    underlay.ip(&[
        "link",
        "add",
        &port,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &env.host.name,
    ]);
    underlay.ip(&["link", "set", &port, "master", "ul0", "up"]);
    let node = Node {
        conf_dir: env.tmp.path().join("net.d"),
        env,
        n,
    };
    let h = &node.env.host;
    h.ip(&["addr", "add", &format!("{}/24", node.underlay_ip()), "dev", "eth0"]);
    h.ip(&["link", "set", "eth0", "up"]);
    h.ip(&[
        "link",
        "add",
        "flannel.1",
        "address",
        &node.vtep_mac(),
        "type",
        "vxlan",
        "id",
        VNI,
        "local",
        &node.underlay_ip(),
        "dev",
        "eth0",
        "dstport",
        VXLAN_PORT,
        "nolearning",
    ]);
    h.ip(&["link", "set", "flannel.1", "mtu", &mtu.to_string(), "up"]);
    h.ip(&["addr", "add", &format!("{}/32", node.vtep_ip()), "dev", "flannel.1"]);
    let subnet_env = node.env.tmp.path().join("subnet.env");
    std::fs::write(
        &subnet_env,
        format!("FLANNEL_NETWORK={CLUSTER}\nFLANNEL_SUBNET=10.42.{n}.1/24\nFLANNEL_MTU={mtu}\nFLANNEL_IPMASQ=true\n"),
    )
    .unwrap();
    std::fs::create_dir_all(&node.conf_dir).unwrap();
    // k3s's default conflist, with flannel's paths in the test's temp dir, and the loopback
    // network containerd adds for every pod
    let k3s = json!({
        "name": "cbr0",
        "cniVersion": "1.0.0",
        "plugins": [
            {"type": "flannel", "subnetFile": subnet_env, "dataDir": node.flannel_dir(),
             "ipam": {"dataDir": node.env.data_dir},
             "delegate": {"hairpinMode": true, "forceAddress": true, "isDefaultGateway": true}},
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "bandwidth", "capabilities": {"bandwidth": true}}
        ]
    });
    let lo = json!({"cniVersion": "1.0.0", "name": "cni-loopback", "plugins": [{"type": "loopback"}]});
    std::fs::write(node.conf_dir.join("10-flannel.conflist"), k3s.to_string()).unwrap();
    std::fs::write(node.conf_dir.join("99-loopback.conflist"), lo.to_string()).unwrap();
    node
}

/// A pod on `node`: its loopback and its flannel attachment (with `caps`); its address.
fn pod(node: &Node, pod: &Netns, caps: &Value) -> String {
    let lo = node.cnitool("add", "cni-loopback", pod, &json!({}));
    assert!(lo.ok(), "loopback: {lo:?}");
    let out = node.cnitool("add", "cbr0", pod, caps);
    assert!(out.ok(), "flannel ADD on node {}: {out:?}", node.n);
    let r = out.json();
    r["ips"][0]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string()
}

fn unpod(node: &Node, pod: &Netns, caps: &Value) {
    for net in ["cbr0", "cni-loopback"] {
        let out = node.cnitool("del", net, pod, caps);
        assert!(out.ok(), "DEL {net} on node {}: {out:?}", node.n);
    }
}

/// Two pods on two nodes ping each other over the vxlan overlay, a pod reaches a hostPort
/// on the other node, the pods' MTU is flanneld's `FLANNEL_MTU`, and DEL leaves both nodes
/// as they were.
fn two_nodes_one_overlay(mtu: u32) {
    let (_underlay, a, b) = cluster(mtu);
    let (before_a, before_b) = (a.state(), b.state());
    let (pod_a, pod_b) = (a.env.container(), b.env.container());
    let caps_b = json!({
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
        "bandwidth": {"ingressRate": 100000000, "ingressBurst": 1000000, "egressRate": 100000000, "egressBurst": 1000000}
    });
    let ip_a = pod(&a, &pod_a, &json!({}));
    let ip_b = pod(&b, &pod_b, &caps_b);
    assert!(
        ip_a.starts_with("10.42.1.") && ip_b.starts_with("10.42.2."),
        "{ip_a} {ip_b}"
    );
    for p in [&pod_a, &pod_b] {
        let eth0 = p.ip_json(&["link", "show", "dev", "eth0"]);
        assert_eq!(eth0[0]["mtu"], mtu, "the pod's MTU is FLANNEL_MTU: {eth0}");
    }
    // flanneld masquerades itself here (FLANNEL_IPMASQ=true): the delegate must not
    assert!(
        !plugin_state::rules(&a.env.host).contains("masquerade"),
        "{}",
        plugin_state::rules(&a.env.host)
    );
    assert!(
        pod_a.ping(&ip_b),
        "pod A cannot reach pod B ({ip_b}) across the overlay"
    );
    assert!(
        pod_b.ping(&ip_a),
        "pod B cannot reach pod A ({ip_a}) across the overlay"
    );
    let _server = Server::start(&pod_b, 80, "flannel-b");
    assert_eq!(
        tcp_get(&pod_a, sa(&b.underlay_ip(), 8080)).as_deref(),
        Some("flannel-b"),
        "pod A cannot reach node B's hostPort"
    );
    let qdiscs = b.env.host.command("tc").args(["qdisc", "show"]).output().unwrap();
    let qdiscs = String::from_utf8_lossy(&qdiscs.stdout).to_string();
    assert!(qdiscs.contains("tbf"), "no bandwidth limit on node B");
    // the run's record (`--nocapture`), for the closing note of issue 28
    eprintln!(
        "two nodes, FLANNEL_MTU={mtu}: pod A {ip_a} on node A, pod B {ip_b} on node B, eth0 MTU {mtu} \
         on both; A pings B and B pings A across flannel.1; node B's hostPort {}:8080 answers \
         pod A with \"flannel-b\"; node B's qdiscs:\n{}",
        b.underlay_ip(),
        qdiscs
            .lines()
            .filter(|l| !l.contains("noqueue"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    unpod(&a, &pod_a, &json!({}));
    unpod(&b, &pod_b, &caps_b);
    // the delegate's bridge and the plugins' own tables stay, as with the reference; no rule
    // names a pod or the host port, and everything else is as before
    let after = |n: &Node, before: &Value| {
        let mut now = n.state();
        let rules = now["rules"].as_str().unwrap().to_string();
        for gone in [ip_a.as_str(), ip_b.as_str(), "8080"] {
            assert!(
                !rules.contains(gone),
                "node {}: a rule names {gone} after DEL:\n{rules}",
                n.n
            );
        }
        let without = |key: &str, pred: &dyn Fn(&str) -> bool| {
            json!(now[key]
                .as_array()
                .unwrap()
                .iter()
                .filter(|l| !pred(l.as_str().unwrap()))
                .collect::<Vec<_>>())
        };
        let (links, addrs, routes) = (
            without("links", &|l| l == "cni0"),
            without("addrs", &|l| l.starts_with("cni0")),
            without("routes", &|l| l.contains("cni0")),
        );
        (now["links"], now["addrs"], now["routes"]) = (links, addrs, routes);
        now["rules"] = before["rules"].clone();
        assert_eq!(&now, before, "node {} after DEL", n.n);
    };
    after(&a, &before_a);
    after(&b, &before_b);
    assert!(
        tcp_get(&pod_a, sa(&b.underlay_ip(), 8080)).is_none(),
        "the hostPort outlived DEL"
    );
}

#[test]
fn two_nodes_one_overlay_k3s_default() {
    two_nodes_one_overlay(1450);
}

#[test]
fn the_overlay_mtu_comes_from_flannel_mtu() {
    two_nodes_one_overlay(1400);
}

/// The DEL matrix, with flannel's `subnet.env` for the matrix's subnet and its delegate's
/// IPAM in the matrix's data dir.
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("subnet.env");
    std::fs::write(
        &env_file,
        "FLANNEL_NETWORK=10.1.0.0/16\nFLANNEL_SUBNET=10.1.2.1/24\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=false\n",
    )
    .unwrap();
    del_matrix::run(Subject {
        applet: "flannel",
        keys: json!({"subnetFile": env_file, "dataDir": dir.path().join("flannel"),
                     "ipam": {"dataDir": del_matrix::DATA_DIR}}),
        attachment: Attachment::InterfaceOnBridge("cni0"),
    });
}

/// Debian ships no flannel binary to compare with: flannel's own answers, from its source
/// (its `NetConf` embeds `types.NetConf` and declares `ipam` and `runtimeConfig` as maps).
#[test]
fn common_keys() {
    let decode = |field: &str, kind: &str, ty: &str| {
        (
            999,
            format!(
                "failed to load flannel netconf file: failed to load netconf: json: cannot unmarshal {kind} into Go struct field {field} of type {ty}"
            ),
        )
    };
    // flannel's ranges come from subnet.env: an `ipam.subnet` too would be a second range set
    let no_subnet = |c: &mut Value| {
        c["ipam"].as_object_mut().unwrap().remove("subnet");
    };
    crate::common_keys::answers("flannel", &no_subnet, |key, value| {
        match (key, value) {
        ("capabilities", _) => decode("NetConf.capabilities", "string", "bool"),
        ("ipam", Value::Number(_)) => decode("NetConf.ipam", "number", "map[string]interface {}"),
        // a map to flannel: its `type` reaches the delegate, whose decoding refuses it
        ("ipam", _) => (
            999,
            "failed to delegate add: failed to load netconf: json: cannot unmarshal number into Go struct field IPAM.ipam.type of type string".into(),
        ),
        ("dns", Value::Number(_)) => decode("NetConf.dns", "number", "types.DNS"),
        ("dns", _) => decode("DNS.dns.nameservers", "string", "[]string"),
        ("runtimeConfig", _) => decode("NetConf.runtimeConfig", "number", "map[string]interface {}"),
        // not a key of flannel's; the delegate gets no `args`
        ("args", _) => (0, String::new()),
        ("prevResult", _) => decode("NetConf.prevResult", "number", "map[string]interface {}"),
        (other, _) => panic!("no answer for {other}"),
    }
    });
}
