//! containerd's CRI as a CNI client: go-cni 1.1.7 (Debian's
//! golang-github-containerd-go-cni-dev; the client is tests/interop/gocni_tool.go) runs its
//! `cni-loopback` network on `lo` and a node's bridge + host-local + portmap + bandwidth
//! conflist on `eth0` with what CRI sends for a pod: the `K8S_POD_*` CNI_ARGS with
//! `IgnoreUnknown`, the pod's annotations, and the portMappings, bandwidth, dns and ipRanges
//! capabilities in go-cni's own types. Those types have no JSON tags, so the plugins read
//! `"HostPort"`, `"IngressRate"`, `"Servers"`, `"Subnet"`…, which Go's encoding/json matches
//! case-insensitively. Each scenario runs with every plugin from cnibox, then with every
//! plugin from the reference (/usr/lib/cni), and what the client got back and what the node
//! holds are compared: the pod reached through its hostPorts from a namespace outside the
//! node (portmap_support's client), the token buckets, and that the teardown leaves nothing
//! of the pod (links, addresses, qdiscs, nft/iptables rules, host-local reservations,
//! libcni's cache).
use crate::common::{self, CallOutput, Netns};
use crate::plugin_state;
use crate::portmap_support::{self, sa, Node, Server, Side, UdpClient};

use cnibox::util::sha512;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

/// What CRI names a sandbox: 64 hex digits (the ifb's name and the rules' hashes follow it).
const SANDBOX: &str = "5e0f8c4d2b7a9e13c6f0a8d4b2e7c9f1a3d5b7e9c1f3a5d7b9e1c3f5a7d9b1e3";
const OTHER_SANDBOX: &str = "9b1e3f5a7d9c1e3a5d7b9f1c3e5a7d9b1f3e5c7a9d1b3f5e7c9a1d3b5f7e9c1a";
const NET: &str = "containerd-net";
const PLUGINS: &[&str] = &["loopback", "bridge", "host-local", "portmap", "bandwidth"];

/// One node running one side's plugins, with go-cni's conf dir, bin dir and cache.
struct World {
    node: Node,
    conf_dir: PathBuf,
    bin: PathBuf,
    cache: PathBuf,
    tool: PathBuf,
    side: Side,
}

impl World {
    fn new(side: Side) -> Option<World> {
        let reference = common::reference_dir()?;
        let node = Node::new();
        let tmp = node.env.tmp.path();
        let tool = common::gocni_tool(tmp)?;
        let (conf_dir, bin, cache) = (tmp.join("net.d"), tmp.join("gocni-bin"), tmp.join("gocni-cache"));
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        for name in PLUGINS {
            let target = match side {
                Side::Cnibox => common::cnibox(),
                Side::Reference => reference.join(name),
            };
            std::os::unix::fs::symlink(target, bin.join(name)).unwrap();
        }
        Some(World {
            node,
            conf_dir,
            bin,
            cache,
            tool,
            side,
        })
    }

    fn host(&self) -> &Netns {
        &self.node.env.host
    }

    /// The node's conflist (go-cni loads the first of the conf dir): a dual-stack bridge
    /// with masquerade as containerd's example config, the static ranges given (none: the
    /// pod's ipRanges are its only ranges), the dns and ipRanges capabilities declared on
    /// the bridge (which hands them to host-local), then portmap and bandwidth.
    fn write_conflist(&self, ranges: Option<Value>) {
        let mut ipam = json!({"type": "host-local", "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}],
                              "dataDir": self.node.env.data_dir});
        if let Some(r) = ranges {
            ipam["ranges"] = r;
        }
        let list = json!({
            "cniVersion": "1.0.0",
            "name": NET,
            "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "promiscMode": true,
                 "capabilities": {"ipRanges": true, "dns": true},
                 "dns": {"nameservers": ["10.96.0.10"], "search": ["default.svc.cluster.local"], "options": ["ndots:5"]},
                 "ipam": ipam},
                {"type": "portmap", "capabilities": {"portMappings": true}},
                {"type": "bandwidth", "capabilities": {"bandwidth": true}}
            ]
        });
        std::fs::write(
            self.conf_dir.join("10-containerd-net.conflist"),
            serde_json::to_vec_pretty(&list).unwrap(),
        )
        .unwrap();
    }

    /// go-cni's Setup (with containerd's teardown when it fails) or Remove for sandbox `id`
    /// in `netns`, `pod` being the CRI pod config (see gocni_tool.go).
    fn gocni(&self, cmd: &str, netns: &str, id: &str, pod: &Value) -> CallOutput {
        let out = self
            .host()
            .command(&self.tool)
            .args([
                cmd,
                self.conf_dir.to_str().unwrap(),
                netns,
                id,
                self.cache.to_str().unwrap(),
            ])
            .arg(&self.bin)
            .env("POD", pod.to_string())
            .output()
            .unwrap();
        CallOutput {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// RunPodSandbox's network setup, which must succeed: what containerd keeps of it.
    fn setup(&self, ns: &Netns, id: &str, pod: &Value) -> Value {
        let out = self.gocni("setup", ns.path_str(), id, pod);
        assert!(out.ok(), "{:?}: go-cni Setup failed: {out:?}", self.side);
        masked(&out.json(), ns)
    }

    /// StopPodSandbox's teardown, which must succeed.
    fn remove(&self, ns: &Netns, id: &str, pod: &Value) {
        let out = self.gocni("remove", ns.path_str(), id, pod);
        assert!(out.ok(), "{:?}: go-cni Remove failed: {out:?}", self.side);
    }

    /// The node's links and qdiscs, and the container's links, addresses and routes.
    fn state(&self, ns: &Netns) -> Value {
        json!({
            "container_links": plugin_state::without_veth_qlen(plugin_state::links(ns)),
            "container_addrs": plugin_state::addrs(ns),
            "container_routes": plugin_state::routes(ns),
            "lo": ns.ip_json(&["link", "show", "dev", "lo"])[0]["flags"],
            "host_links": plugin_state::without_veth_qlen(plugin_state::links(self.host())),
            "host_addrs": plugin_state::addrs(self.host()),
            "qdiscs": self.qdiscs(),
        })
    }

    /// `tc` on the node: every qdisc, and the filters of every ingress qdisc (bandwidth's
    /// redirect of the host veth's ingress to its ifb).
    fn qdiscs(&self) -> Value {
        let qdiscs = tc_json(self.host(), &["qdisc", "show"]);
        let mut filters = vec![];
        for q in qdiscs.as_array().unwrap().iter().filter(|q| q["kind"] == "ingress") {
            let dev = q["dev"].as_str().unwrap();
            filters.push(tc_json(self.host(), &["filter", "show", "dev", dev, "ingress"]));
        }
        plugin_state::mask(&json!({"qdiscs": qdiscs, "ingress_filters": filters}))
    }

    /// Everything of sandbox `id` (with addresses `ips`) still on the node: rules of either
    /// firewall naming it (its addresses, its ID, the reference's chains for it, named
    /// `CNI-` and `CNI-DN-` + sha512(network + ID)), its host-local reservations and
    /// libcni's cached results.
    fn leftovers(&self, id: &str, ips: &[&str]) -> Value {
        let digest = sha512::digest(format!("{NET}{id}").as_bytes());
        let chain_hash = &sha512::hex(&digest)[..21];
        let mut rules = vec![];
        for (tool, args) in [
            ("iptables-save", &[][..]),
            ("ip6tables-save", &[][..]),
            ("nft", &["list", "ruleset"][..]),
        ] {
            let o = self.host().command(tool).args(args).output().unwrap();
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                if line.contains(chain_hash) || line.contains(id) || ips.iter().any(|ip| mentions(line, ip)) {
                    rules.push(format!("{tool}: {}", line.trim()));
                }
            }
        }
        // a reservation file holds the container ID it was made for
        let reserved: Vec<String> = self
            .node
            .env
            .store(NET)
            .into_iter()
            .filter(|(file, owner)| file.parse::<std::net::IpAddr>().is_ok() && owner.contains(id))
            .map(|(file, _)| file)
            .collect();
        let cached: Vec<String> = std::fs::read_dir(self.cache.join("results"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let cached: Vec<String> = cached.into_iter().filter(|f| f.contains(id)).collect();
        json!({"rules": rules, "reservations": reserved, "cache": cached})
    }
}

/// `line` names address `ip` (not merely a longer one starting with it).
fn mentions(line: &str, ip: &str) -> bool {
    line.match_indices(ip).any(|(at, _)| {
        let next = line[at + ip.len()..].chars().next();
        !matches!(next, Some(c) if c.is_ascii_hexdigit() || c == ':' || c == '.' && ip.contains('.'))
    })
}

fn tc_json(ns: &Netns, args: &[&str]) -> Value {
    let o = Command::new("tc")
        .args(["-j", "-n", &ns.name])
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout).unwrap_or(json!([]))
}

/// go-cni's answer with MACs, random veth names (also as the keys of its interface map)
/// and the sandbox's path masked.
fn masked(v: &Value, ns: &Netns) -> Value {
    fn keys(v: &Value) -> Value {
        match v {
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| match plugin_state::is_random_veth(k) {
                        true => ("veth*".to_string(), keys(v)),
                        false => (k.clone(), keys(v)),
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(keys).collect()),
            other => other.clone(),
        }
    }
    let s = v.to_string().replace(ns.path_str(), "<netns>");
    plugin_state::mask(&keys(&serde_json::from_str(&s).unwrap()))
}

/// Nothing of the pod is left: no rule, reservation or cache entry.
fn assert_nothing_left(left: &Value, side: Side) {
    assert_eq!(left, &json!({"rules": [], "reservations": [], "cache": []}), "{side:?}");
}

/// The qdisc of `kind` on a link whose name starts with `dev`, or Null.
fn qdisc<'a>(state: &'a Value, kind: &str, dev: &str) -> &'a Value {
    state["qdiscs"]["qdiscs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["kind"] == kind && q["dev"].as_str().unwrap().starts_with(dev))
        .unwrap_or(&Value::Null)
}

/// A scenario's observations with every plugin from cnibox, then from the reference, equal
/// (nothing runs without the reference plugins or Go). cnibox's are printed (`--nocapture`
/// shows them): the evidence of a run.
fn same_on_both_sides(run: fn(Side) -> Option<Vec<Value>>) {
    let Some(ours) = run(Side::Cnibox) else { return };
    eprintln!(
        "cnibox through go-cni: {}",
        serde_json::to_string_pretty(&ours).unwrap()
    );
    let Some(theirs) = run(Side::Reference) else {
        return;
    };
    assert_eq!(ours, theirs);
}

/// A pod as kubelet describes it to CRI: a web server on 80 published on the node's port
/// 8080, a DNS server on 53 published on 5353 of one node address only, both bandwidth
/// annotations and the cluster's DNS config.
fn web_pod() -> Value {
    json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "0c7a4d2e-5b1f-4e8a-9c3d-7f6b2a1e0d9c"},
        "annotations": {"kubernetes.io/ingress-bandwidth": "100M", "kubernetes.io/egress-bandwidth": "20M"},
        "portMappings": [
            {"protocol": "TCP", "containerPort": 80, "hostPort": 8080},
            {"protocol": "UDP", "containerPort": 53, "hostPort": 5353, "hostIp": portmap_support::NODE_V4}
        ],
        "dnsConfig": {"servers": ["10.96.0.10"], "searches": ["default.svc.cluster.local", "svc.cluster.local"],
                      "options": ["ndots:5"]}
    })
}

fn dual_stack_ranges() -> Value {
    json!([[{"subnet": "10.22.0.0/16"}], [{"subnet": "fd22::/64"}]])
}

/// The web pod's whole life on one side: Setup, its hostPorts reached from outside the node,
/// Remove, Remove again (StopPodSandbox is retried); what each step returned and left.
fn web_pod_run(side: Side) -> Option<Vec<Value>> {
    let w = World::new(side)?;
    w.write_conflist(Some(dual_stack_ranges()));
    let ns = w.node.env.container();
    ns.ip(&["link", "set", "lo", "down"]);
    let pod = web_pod();
    let setup = w.setup(&ns, SANDBOX, &pod);
    // what kubelet gets as the pod's IPs, and the pod network's DNS in go-cni's result
    assert_eq!(setup["podIP"], "10.22.0.2", "{side:?}: {setup}");
    assert_eq!(setup["additionalIPs"], json!(["fd22::2"]), "{side:?}");
    assert_eq!(
        setup["result"]["DNS"][1]["nameservers"],
        json!(["10.96.0.10"]),
        "{side:?}"
    );
    portmap_support::wait_v6_ready(&ns);
    portmap_support::wait_v6_ready(w.host());
    let up = w.state(&ns);
    assert!(
        up["lo"].to_string().contains("\"UP\""),
        "{side:?}: cni-loopback left lo down"
    );
    // the ingress limit on the host veth, the egress limit on the ifb its ingress is
    // redirected to; CRI's bursts are math.MaxUint32 bits
    assert_eq!(
        qdisc(&up, "tbf", "veth")["options"]["rate"],
        12_500_000,
        "{side:?}: {up}"
    );
    assert_eq!(qdisc(&up, "tbf", "bwp")["options"]["rate"], 2_500_000, "{side:?}: {up}");
    assert!(
        up["qdiscs"]["ingress_filters"].to_string().contains("\"to_dev\":\"bwp"),
        "{side:?}"
    );
    let reached = {
        let _web = Server::start(&ns, 80, "web");
        let _dns = Server::start(&ns, 53, "dns");
        let client = &w.node.client;
        let udp = UdpClient::new(client, false);
        let udp6 = UdpClient::new(client, true);
        json!({
            "tcp 192.168.77.1:8080": portmap_support::tcp_get(client, sa(portmap_support::NODE_V4, 8080)),
            "tcp [fd77::1]:8080": portmap_support::tcp_get(client, sa(portmap_support::NODE_V6, 8080)),
            "udp 192.168.77.1:5353": udp.ask(sa(portmap_support::NODE_V4, 5353)),
            // published on the IPv4 hostIP only
            "udp [fd77::1]:5353": udp6.ask(sa(portmap_support::NODE_V6, 5353)),
        })
    };
    assert_eq!(reached["tcp 192.168.77.1:8080"], "web", "{side:?}: {reached}");
    assert_eq!(reached["udp 192.168.77.1:5353"], "dns", "{side:?}: {reached}");
    w.remove(&ns, SANDBOX, &pod);
    let down = w.state(&ns);
    let left = w.leftovers(SANDBOX, &["10.22.0.2", "fd22::2"]);
    assert_nothing_left(&left, side);
    // the pod's host veth (a random name, masked) and its ifb are gone
    assert_eq!(
        down["host_links"],
        json!(["cni0 bridge mtu 1500 up qlen 1000", "ext0 veth mtu 1500 up"]),
        "{side:?}"
    );
    w.remove(&ns, SANDBOX, &pod);
    Some(vec![setup, up, reached, down, left])
}

/// Regression: containerd's pods failed on cnibox. go-cni sends `{"HostPort": 8080,
/// "ContainerPort": 80, …}`, which portmap read as port 0 (`Invalid container port number:
/// 0`: every hostPort pod failed to start, and its teardown failed the same way), and
/// `{"IngressRate": …}`, which bandwidth ignored (no qdisc, no error).
#[test]
fn containerd_pod_with_host_ports_bandwidth_and_dns_through_gocni_same_as_reference() {
    same_on_both_sides(web_pod_run);
}

/// A pod whose addresses come from the ipRanges capability alone (go-cni's IPRanges:
/// `"Subnet"`, `"RangeStart"`, `"RangeEnd"`, `"Gateway"`), one range set per family.
fn ip_ranges_run(side: Side) -> Option<Vec<Value>> {
    let w = World::new(side)?;
    w.write_conflist(None);
    let ns = w.node.env.container();
    let pod = json!({
        "metadata": {"name": "ranged", "namespace": "default", "uid": "uid-ranged"},
        "ipRanges": [
            [{"Subnet": "10.30.0.0/24", "RangeStart": "10.30.0.10", "RangeEnd": "10.30.0.20", "Gateway": "10.30.0.1"}],
            [{"Subnet": "fd30::/64", "RangeStart": "fd30::10", "RangeEnd": "fd30::20", "Gateway": "fd30::1"}]
        ]
    });
    let setup = w.setup(&ns, SANDBOX, &pod);
    assert_eq!(setup["podIP"], "10.30.0.10", "{side:?}: {setup}");
    assert_eq!(setup["additionalIPs"], json!(["fd30::10"]), "{side:?}");
    let up = w.state(&ns);
    let reserved = plugin_state::reservations(&w.node.env, NET);
    assert_eq!(reserved, ["10.30.0.10", "fd30::10"], "{side:?}");
    w.remove(&ns, SANDBOX, &pod);
    let left = w.leftovers(SANDBOX, &["10.30.0.10", "fd30::10"]);
    assert_nothing_left(&left, side);
    Some(vec![setup, up, json!(reserved), w.state(&ns), left])
}

/// Regression: go-cni's IPRanges reached host-local as `{"Subnet": …}`, which it read as a
/// range without a subnet (`invalid range set 0: IP <nil> not v4 nor v6`), in ADD and DEL.
#[test]
fn containerd_pod_addressed_by_gocni_ip_ranges_same_as_reference() {
    same_on_both_sides(ip_ranges_run);
}

/// go-cni's own WithCapabilityIPRanges sends a flat list of ranges where the capability is
/// a list of range sets: host-local refuses it with Go's type error (not a pod on some other
/// range), and what the failed setup made goes with containerd's teardown. (The teardown's
/// own verdict is left out: the reference's fails on the same type error.)
fn flat_ip_ranges_run(side: Side) -> Option<Vec<Value>> {
    let w = World::new(side)?;
    w.write_conflist(None);
    let ns = w.node.env.container();
    let pod = json!({"ipRangesFlat": [{"Subnet": "10.30.0.0/24", "Gateway": "10.30.0.1"}]});
    let out = w.gocni("setup", ns.path_str(), SANDBOX, &pod);
    assert_eq!(out.code, 1, "{side:?}: {out:?}");
    let failed = out.json();
    let setup_error = failed["setupError"].as_str().unwrap();
    // Go's wording names the field by its path; compared up to it
    let (before, after) = setup_error.split_once("Go struct field ").unwrap();
    assert_eq!(
        before,
        "plugin type=\"bridge\" failed (add): json: cannot unmarshal object into "
    );
    assert!(
        after.ends_with("ipRanges of type allocator.RangeSet"),
        "{side:?}: {setup_error}"
    );
    let left = w.leftovers(SANDBOX, &[]);
    assert_nothing_left(&left, side);
    Some(vec![w.state(&ns), left])
}

#[test]
fn gocni_flat_ip_ranges_refused_as_by_the_reference_and_nothing_left() {
    same_on_both_sides(flat_ip_ranges_run);
}

/// Two pods on a node whose IPv4 range holds one address: the second pod's Setup fails in
/// host-local, containerd tears it down (Remove with the same options), and the first pod
/// keeps everything: its address, its hostPort, its token bucket.
fn failed_setup_run(side: Side) -> Option<Vec<Value>> {
    let w = World::new(side)?;
    w.write_conflist(Some(json!([
        [{"subnet": "10.22.0.0/24", "rangeStart": "10.22.0.2", "rangeEnd": "10.22.0.2"}],
        [{"subnet": "fd22::/64"}]
    ])));
    let first = w.node.env.container();
    let second = w.node.env.container();
    let pod = |name: &str, port: u16| {
        json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "annotations": {"kubernetes.io/ingress-bandwidth": "100M"},
            "portMappings": [{"protocol": "TCP", "containerPort": 80, "hostPort": port}]
        })
    };
    let (web, late) = (pod("web", 8080), pod("late", 8081));
    w.setup(&first, SANDBOX, &web);
    let out = w.gocni("setup", second.path_str(), OTHER_SANDBOX, &late);
    assert_eq!(out.code, 1, "{side:?}: {out:?}");
    let failed = out.json();
    assert_eq!(
        failed,
        json!({
            "setupError": "plugin type=\"bridge\" failed (add): failed to allocate for range 0: \
                           no IP addresses available in range set: 10.22.0.2-10.22.0.2",
            "teardownError": null
        }),
        "{side:?}"
    );
    let after_teardown = json!({
        "second": w.state(&second),
        "second_left": w.leftovers(OTHER_SANDBOX, &[]),
        "first_reserved": plugin_state::reservations(&w.node.env, NET),
    });
    assert_nothing_left(&after_teardown["second_left"], side);
    assert!(
        !after_teardown["second"]["container_links"].to_string().contains("eth0"),
        "{side:?}"
    );
    assert!(
        qdisc(&after_teardown["second"], "tbf", "veth").is_object(),
        "{side:?}: the first pod's bucket went with the second's teardown"
    );
    let reached = {
        let _web = Server::start(&first, 80, "web");
        json!({
            "first 8080": portmap_support::tcp_get(&w.node.client, sa(portmap_support::NODE_V4, 8080)),
            "second 8081": portmap_support::tcp_get(&w.node.client, sa(portmap_support::NODE_V4, 8081)),
        })
    };
    assert_eq!(reached["first 8080"], "web", "{side:?}: {reached}");
    w.remove(&first, SANDBOX, &web);
    let left = w.leftovers(SANDBOX, &["10.22.0.2", "fd22::2"]);
    assert_nothing_left(&left, side);
    Some(vec![failed, after_teardown, reached, w.state(&first), left])
}

/// Regression: on cnibox the first pod failed already (its hostPort, as in
/// [`containerd_pod_with_host_ports_bandwidth_and_dns_through_gocni_same_as_reference`]).
#[test]
fn containerd_tears_down_a_failed_pod_setup_and_the_running_pod_keeps_its_network() {
    same_on_both_sides(failed_setup_run);
}

/// `kubernetes.io/ingress-bandwidth: 1M` (Kubernetes' own example): CRI asks for 1 Mbit/s
/// with a math.MaxUint32-bit burst, more than the kernel's token bucket holds at that rate
/// (its time in psched ticks passes 32 bits). The reference's arithmetic wraps around (a
/// 21,474,835-byte bucket); cnibox gives the largest bucket the kernel holds. Both shape the
/// pod at its rate and start it, as containerd needs: refusing the burst would fail every
/// pod with an annotation below about 15.6 Mbit/s.
fn low_rate_run(side: Side) -> Option<Vec<Value>> {
    let w = World::new(side)?;
    w.write_conflist(Some(dual_stack_ranges()));
    let ns = w.node.env.container();
    let pod = json!({
        "metadata": {"name": "slow", "namespace": "default", "uid": "uid-slow"},
        "annotations": {"kubernetes.io/ingress-bandwidth": "1M", "kubernetes.io/egress-bandwidth": "1M"}
    });
    w.setup(&ns, SANDBOX, &pod);
    let up = w.state(&ns);
    let buckets = json!({
        "veth": qdisc(&up, "tbf", "veth")["options"]["rate"],
        "ifb": qdisc(&up, "tbf", "bwp")["options"]["rate"],
    });
    assert_eq!(buckets, json!({"veth": 125_000, "ifb": 125_000}), "{side:?}: {up}");
    w.remove(&ns, SANDBOX, &pod);
    let left = w.leftovers(SANDBOX, &["10.22.0.2", "fd22::2"]);
    assert_nothing_left(&left, side);
    Some(vec![buckets, w.state(&ns)])
}

/// Regression: bandwidth ignored go-cni's `{"IngressRate": …}`; the pod went unshaped.
#[test]
fn containerd_pod_with_a_low_bandwidth_annotation_starts_shaped_at_its_rate() {
    same_on_both_sides(low_rate_run);
}
