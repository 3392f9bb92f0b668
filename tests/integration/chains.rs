//! Real runtimes' chains through libcni (Debian's golang-github-appc-cni-dev, the tiny
//! runtime in tests/interop): podman's default network (bridge + portmap + firewall +
//! tuning, cniVersion 0.4.0) and containerd's CRI pair (its own loopback network on `lo`,
//! then bridge + portmap + bandwidth on `eth0`), with cnibox's bridge, host-local, tuning,
//! loopback and bandwidth and the reference's portmap and firewall (and once more with
//! cnibox's portmap and firewall too). ADD, CHECK, DEL through libcni; then the same chains
//! with every plugin from the reference, and the results and kernel state compared. The plugins.d examples that chain these applets run through
//! cnitool.
use crate::common;
use crate::plugin_state;

use common::{CallOutput, Netns, TestEnv};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which implementation provides each plugin.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    /// cnibox's bridge, host-local, tuning, loopback, bandwidth; the reference's portmap and firewall.
    Cnibox,
    /// Every plugin from cnibox, portmap and firewall included.
    AllCnibox,
    Reference,
}

struct World {
    env: TestEnv,
    conf_dir: PathBuf,
    bin: PathBuf,
    cache: PathBuf,
    tool: PathBuf,
}

const CNIBOX_APPLETS: &[&str] = &["bridge", "host-local", "tuning", "loopback", "bandwidth"];
const REFERENCE_ONLY: &[&str] = &["portmap", "firewall"];

impl World {
    fn new(side: Side) -> Option<World> {
        let reference = common::reference_dir()?;
        let env = TestEnv::new();
        let tool = common::libcni_tool(env.tmp.path())?;
        let conf_dir = env.tmp.path().join("net.d");
        let bin = env.tmp.path().join("chain-bin");
        let cache = env.tmp.path().join("chain-cache");
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        for name in CNIBOX_APPLETS {
            let target = match side {
                Side::Cnibox | Side::AllCnibox => common::cnibox(),
                Side::Reference => reference.join(name),
            };
            std::os::unix::fs::symlink(target, bin.join(name)).unwrap();
        }
        for name in REFERENCE_ONLY {
            let target = match side {
                Side::AllCnibox if cnibox::applets::plugin(name).is_some() => common::cnibox(),
                _ => reference.join(name),
            };
            std::os::unix::fs::symlink(target, bin.join(name)).unwrap();
        }
        Some(World {
            env,
            conf_dir,
            bin,
            cache,
            tool,
        })
    }

    fn write(&self, file: &str, v: &Value) {
        std::fs::write(self.conf_dir.join(file), serde_json::to_vec_pretty(v).unwrap()).unwrap();
    }

    fn libcni(&self, verb: &str, net: &str, netns: &str, cid: &str, ifname: &str, cap_args: &Value) -> CallOutput {
        let mut c = self.env.host.command(&self.tool);
        c.args([
            verb,
            self.conf_dir.to_str().unwrap(),
            net,
            netns,
            cid,
            self.cache.to_str().unwrap(),
        ])
        .arg(&self.bin)
        .env("CNI_IFNAME", ifname)
        .env("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web")
        .env("CAP_ARGS", cap_args.to_string());
        let out = c.output().unwrap();
        CallOutput {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.env.data_dir.clone()
    }

    fn tuning_dir(&self) -> PathBuf {
        self.env.tmp.path().join("tuning")
    }

    /// The firewall's address records (default /run/cni/firewall) stay in the temp dir too.
    fn firewall_dir(&self) -> PathBuf {
        self.env.tmp.path().join("firewall")
    }
}

/// The portmap v1.1.1 CHECK looks for an IPv6 DNAT chain even for an IPv4-only container,
/// so a chain with it never passes CHECK; its verdict is recorded (both sides must agree),
/// then CHECK runs again with the list minus portmap, which must pass.
/// (The attachment: network, netns, container ID, ifname, capability args.)
type Attachment<'a> = (&'a str, &'a str, &'a str, &'a str, &'a Value);

fn check_around_portmap(w: &World, file: &str, list: &Value, att: Attachment<'_>) -> Value {
    let (net, netns, cid, ifname, cap) = att;
    let full = w.libcni("check", net, netns, cid, ifname, cap);
    let verdict = json!({"code": full.code, "portmap_v6_bug": full.stderr.contains("could not check ipv6 dnat")});
    let mut without = list.clone();
    without["plugins"]
        .as_array_mut()
        .unwrap()
        .retain(|p| p["type"] != "portmap");
    w.write(file, &without);
    ok(w.libcni("check", net, netns, cid, ifname, cap), "CHECK without portmap");
    w.write(file, list);
    verdict
}

fn ok(out: CallOutput, what: &str) -> Value {
    assert!(out.ok(), "{what} failed: {out:?}");
    if out.stdout.trim().is_empty() {
        Value::Null
    } else {
        out.json()
    }
}

/// podman 4.3's generated network (cniVersion 0.4.0), with the dataDirs in the test's temp dir.
fn podman_network(w: &World) -> Value {
    json!({
        "cniVersion": "0.4.0",
        "name": "podman",
        "plugins": [
            {"type": "bridge", "bridge": "cni-podman0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
             "ipam": {"type": "host-local", "routes": [{"dst": "0.0.0.0/0"}],
                      "ranges": [[{"subnet": "10.88.0.0/16", "gateway": "10.88.0.1"}]], "dataDir": w.data_dir()}},
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "firewall", "backend": "", "dataDir": w.firewall_dir()},
            {"type": "tuning", "dataDir": w.tuning_dir(), "capabilities": {"mac": true},
             "sysctl": {"net.ipv4.conf.eth0.arp_notify": "1"}}
        ]
    })
}

/// containerd's CRI: its own loopback network and the node's conflist.
fn containerd_networks(w: &World) -> (Value, Value) {
    let lo = json!({"cniVersion": "1.0.0", "name": "cni-loopback", "plugins": [{"type": "loopback"}]});
    let pod = json!({
        "cniVersion": "1.0.0",
        "name": "containerd-net",
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "promiscMode": true,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.22.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}],
                      "dataDir": w.data_dir()}},
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "bandwidth", "capabilities": {"bandwidth": true}}
        ]
    });
    (lo, pod)
}

/// A result with MACs, random veth names and the sandbox path masked.
fn masked_result(v: &Value, ns: &Netns) -> Value {
    let s = v.to_string().replace(ns.path_str(), "<netns>");
    plugin_state::mask(&serde_json::from_str(&s).unwrap())
}

/// eth0's arp_notify, or None once eth0 is gone.
fn arp_notify(ns: &Netns) -> Option<String> {
    let o = ns
        .command("cat")
        .arg("/proc/sys/net/ipv4/conf/eth0/arp_notify")
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The container's interfaces and addresses, the host's links, and the tc objects.
fn state(w: &World, ns: &Netns) -> Value {
    let tc = Command::new("tc")
        .args(["-j", "-n", &w.env.host.name, "qdisc", "show"])
        .output()
        .unwrap();
    let qdiscs: Value = serde_json::from_slice(&tc.stdout).unwrap_or(json!([]));
    json!({
        "container_links": plugin_state::without_veth_qlen(plugin_state::links(ns)),
        "container_addrs": plugin_state::addrs(ns),
        "container_routes": plugin_state::routes(ns),
        "lo": ns.ip_json(&["link", "show", "dev", "lo"])[0]["flags"],
        "host_links": plugin_state::without_veth_qlen(plugin_state::links(&w.env.host)),
        "qdiscs": plugin_state::mask(&qdiscs),
        "arp_notify": arp_notify(ns),
    })
}

/// One run of podman's chain: ADD, CHECK, DEL through libcni; what each step returned and left.
fn podman_run(side: Side) -> Option<Vec<Value>> {
    let w = World::new(side)?;
    let list = podman_network(&w);
    w.write("87-podman.conflist", &list);
    let ns = w.env.container();
    let cap = json!({"mac": "c2:00:00:00:00:07", "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]});
    let add = ok(
        w.libcni("add", "podman", ns.path_str(), "podctr", "eth0", &cap),
        "podman ADD",
    );
    let mut seen = vec![masked_result(&add, &ns), state(&w, &ns)];
    // what podman relies on: the MAC from the capability, the sysctl, the default route
    let eth0 = ns.ip_json(&["link", "show", "dev", "eth0"]);
    assert_eq!(eth0[0]["address"], "c2:00:00:00:00:07", "{side:?}");
    assert_eq!(ns.sysctl("net/ipv4/conf/eth0/arp_notify"), "1", "{side:?}");
    // and what `-p 8080:80` is for: the node reaches the container through the host port
    let server = crate::portmap_support::Server::start(&ns, 80, "podctr");
    let host_port = "10.88.0.1:8080".parse().unwrap();
    let answer = crate::portmap_support::tcp_get(&w.env.host, host_port);
    assert_eq!(
        answer.as_deref(),
        Some("podctr"),
        "{side:?}: 10.88.0.1:8080 from the node"
    );
    drop(server);
    seen.push(check_around_portmap(
        &w,
        "87-podman.conflist",
        &list,
        ("podman", ns.path_str(), "podctr", "eth0", &cap),
    ));
    ok(
        w.libcni("del", "podman", ns.path_str(), "podctr", "eth0", &cap),
        "podman DEL",
    );
    seen.push(state(&w, &ns));
    // tuning restored the MAC it changed and removed its saved file
    assert!(!ns.ip_json(&["link", "show"]).to_string().contains("c2:00:00:00:00:07"));
    assert_eq!(
        std::fs::read_dir(w.tuning_dir()).map(|d| d.count()).unwrap_or(0),
        0,
        "{side:?}"
    );
    ok(
        w.libcni("del", "podman", ns.path_str(), "podctr", "eth0", &cap),
        "podman DEL again",
    );
    Some(seen)
}

#[test]
fn podman_default_chain_through_libcni_same_as_reference() {
    let Some(ours) = podman_run(Side::Cnibox) else { return };
    let Some(theirs) = podman_run(Side::Reference) else {
        return;
    };
    assert_eq!(ours, theirs);
    same_but_check_passes(podman_run(Side::AllCnibox).unwrap(), theirs);
}

/// With cnibox's own portmap too, the chain ends as the reference's does, and CHECK of the
/// whole list passes (no IPv6 chain looked for).
fn same_but_check_passes(mut all: Vec<Value>, theirs: Vec<Value>) {
    let at = theirs.iter().position(|v| v.get("portmap_v6_bug").is_some()).unwrap();
    assert_eq!(all[at], json!({"code": 0, "portmap_v6_bug": false}));
    all[at] = theirs[at].clone();
    assert_eq!(all, theirs);
}

fn containerd_run(side: Side) -> Option<Vec<Value>> {
    let w = World::new(side)?;
    let (lo, pod) = containerd_networks(&w);
    w.write("99-loopback.conflist", &lo);
    w.write("10-containerd-net.conflist", &pod);
    let ns = w.env.container();
    ns.ip(&["link", "set", "lo", "down"]);
    let cap = json!({"portMappings": [{"hostPort": 8081, "containerPort": 80, "protocol": "tcp"}],
                     "bandwidth": {"ingressRate": 8000000, "ingressBurst": 16000000, "egressRate": 8000000, "egressBurst": 16000000}});
    // containerd adds the loopback network first, then the pod network
    let lo_add = ok(
        w.libcni("add", "cni-loopback", ns.path_str(), "sandbox1", "lo", &json!({})),
        "loopback ADD",
    );
    let pod_add = ok(
        w.libcni("add", "containerd-net", ns.path_str(), "sandbox1", "eth0", &cap),
        "pod ADD",
    );
    let mut seen = vec![
        masked_result(&lo_add, &ns),
        masked_result(&pod_add, &ns),
        state(&w, &ns),
    ];
    let lo_flags = ns.ip_json(&["link", "show", "dev", "lo"])[0]["flags"].to_string();
    assert!(lo_flags.contains("\"UP\""), "{side:?}: {lo_flags}");
    assert!(
        seen[2]["qdiscs"].to_string().contains("\"tbf\""),
        "{side:?}: no shaping"
    );
    // CRI never calls CHECK, but libcni may: both networks pass
    ok(
        w.libcni("check", "cni-loopback", ns.path_str(), "sandbox1", "lo", &json!({})),
        "loopback CHECK",
    );
    let verdict = check_around_portmap(
        &w,
        "10-containerd-net.conflist",
        &pod,
        ("containerd-net", ns.path_str(), "sandbox1", "eth0", &cap),
    );
    // teardown in reverse
    ok(
        w.libcni("del", "containerd-net", ns.path_str(), "sandbox1", "eth0", &cap),
        "pod DEL",
    );
    ok(
        w.libcni("del", "cni-loopback", ns.path_str(), "sandbox1", "lo", &json!({})),
        "loopback DEL",
    );
    seen.push(verdict);
    seen.push(state(&w, &ns));
    assert!(!seen[4]["host_links"].to_string().contains("bwp"), "{side:?}: ifb left");
    // the sandbox is gone: DEL still succeeds
    let path = ns.path_str().to_string();
    drop(ns);
    ok(
        w.libcni("del", "containerd-net", &path, "sandbox1", "eth0", &cap),
        "pod DEL, netns gone",
    );
    ok(
        w.libcni("del", "cni-loopback", &path, "sandbox1", "lo", &json!({})),
        "loopback DEL, netns gone",
    );
    Some(seen)
}

#[test]
fn containerd_loopback_and_bridge_portmap_bandwidth_through_libcni_same_as_reference() {
    let Some(ours) = containerd_run(Side::Cnibox) else {
        return;
    };
    let Some(theirs) = containerd_run(Side::Reference) else {
        return;
    };
    assert_eq!(ours, theirs);
    same_but_check_passes(containerd_run(Side::AllCnibox).unwrap(), theirs);
}

/// The plugins.d examples chaining the new applets work as shipped (dataDirs moved into the
/// temp dir): ADD, CHECK, DEL through cnitool.
#[test]
fn plugins_d_examples_chain() {
    let env = TestEnv::new();
    let conf_dir = env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    for (file, net) in [
        ("50-bridge-tuning.conflist", "cnibox-tuned"),
        ("70-ptp-bandwidth.conflist", "cnibox-shaped"),
        ("99-loopback.conf", "cni-loopback"),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins.d").join(file);
        let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if let Some(plugins) = v["plugins"].as_array_mut() {
            for p in plugins {
                if p.get("ipam").is_some() {
                    p["ipam"]["dataDir"] = json!(env.data_dir);
                }
                if p["type"] == "tuning" || p["type"] == "firewall" {
                    p["dataDir"] = json!(env.tmp.path().join(p["type"].as_str().unwrap()));
                }
            }
        }
        std::fs::write(conf_dir.join(file), serde_json::to_vec(&v).unwrap()).unwrap();
        let ns = env.container();
        let run = |verb: &str| {
            env.tool("cnitool")
                .args([verb, net, ns.path_str()])
                .env("NETCONFPATH", conf_dir.to_str().unwrap())
                .env("CNI_PATH", env.bin_dir.to_str().unwrap())
                .env("CNI_CACHE_DIR", env.cache_dir.to_str().unwrap())
                .env("CAP_ARGS", r#"{"mac":"c2:00:00:00:00:09"}"#)
                .run()
        };
        let add = run("add");
        assert!(add.ok(), "{file}: {add:?}");
        match net {
            "cnibox-tuned" => {
                assert_eq!(ns.ip_json(&["link", "show", "dev", "eth0"])[0]["mtu"], 1450, "{file}");
                assert_eq!(ns.sysctl("net/ipv4/conf/eth0/arp_notify"), "1", "{file}");
            }
            "cnibox-shaped" => {
                let tc = Command::new("tc")
                    .args(["-n", &env.host.name, "qdisc", "show"])
                    .output()
                    .unwrap();
                assert!(String::from_utf8_lossy(&tc.stdout).contains("tbf"), "{file}");
            }
            _ => assert!(ns.ip_json(&["link", "show", "dev", "lo"])[0]["flags"]
                .to_string()
                .contains("\"UP\"")),
        }
        let check = run("check");
        assert!(check.ok(), "{file}: {check:?}");
        let del = run("del");
        assert!(del.ok(), "{file}: {del:?}");
    }
}

/// Everything of the node an attachment can leave: host links, addresses and routes, the
/// nf_tables and iptables rules, tc objects, reservations, tuning's and the firewall's
/// files. Compared after DEL with what a clean ADD and DEL of another container leave (the
/// bridge and the plugins' shared tables and chains stay, as in the reference).
fn node_state(w: &World, network: &str) -> Value {
    let tc = Command::new("tc")
        .args(["-j", "-n", &w.env.host.name, "qdisc", "show"])
        .output()
        .unwrap();
    let nft = w.env.host.command("nft").args(["list", "ruleset"]).output().unwrap();
    let ipt = w.env.host.command("iptables-save").output().unwrap();
    let files = |dir: PathBuf| common::read_dir_map(&dir).into_keys().collect::<Vec<_>>();
    json!({
        "host_links": plugin_state::links(&w.env.host),
        "host_addrs": plugin_state::addrs(&w.env.host),
        "host_routes": plugin_state::routes(&w.env.host),
        "qdiscs": serde_json::from_slice::<Value>(&tc.stdout).unwrap_or(json!([])),
        "nft": String::from_utf8_lossy(&nft.stdout).lines().filter(|l| l.contains("cni") || l.contains("CNI")).collect::<Vec<_>>(),
        "iptables": String::from_utf8_lossy(&ipt.stdout).lines().filter(|l| !l.starts_with('#')).map(|l| l.split(" [").next().unwrap().to_string()).collect::<Vec<_>>(),
        "reservations": plugin_state::reservations(&w.env, network),
        "tuning": files(w.tuning_dir()),
        "firewall": files(w.firewall_dir()),
    })
}

/// The node after a clean ADD and DEL of a warm-up container on the valid chain.
fn warm_baseline(w: &World) -> Value {
    w.write("10-refused.conflist", &refusing_chain(w, false));
    let ns = w.env.container();
    ok(
        w.libcni("add", "refused", ns.path_str(), "warm", "eth0", &refusing_caps(false)),
        "warm ADD",
    );
    ok(
        w.libcni("del", "refused", ns.path_str(), "warm", "eth0", &refusing_caps(false)),
        "warm DEL",
    );
    node_state(w, "refused")
}

/// A chain of every cnibox plugin with valid settings, and the same chain with a value
/// each plugin's ADD refuses: a VLAN id out of range (bridge), a `txQLen` of the wrong type
/// (tuning), an unknown ingress policy (firewall).
fn refusing_chain(w: &World, refuse: bool) -> Value {
    let mut list = json!({
        "cniVersion": "1.0.0",
        "name": "refused",
        "plugins": [
            {"type": "bridge", "bridge": "cnirf0", "isGateway": true, "ipMasq": true,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.23.0.0/24"}]], "dataDir": w.data_dir()}},
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "bandwidth", "capabilities": {"bandwidth": true}},
            {"type": "tuning", "dataDir": w.tuning_dir(), "mtu": 1400},
            {"type": "firewall", "backend": "iptables", "dataDir": w.firewall_dir()}
        ]
    });
    if refuse {
        list["plugins"][0]["vlan"] = json!(99999);
        list["plugins"][3]["txQLen"] = json!("long");
        list["plugins"][4]["ingressPolicy"] = json!("bogus");
    }
    list
}

/// Capability args ADD accepts, or ones portmap and bandwidth refuse: a container port 0,
/// an unknown protocol, a rate of the wrong type.
fn refusing_caps(refuse: bool) -> Value {
    match refuse {
        false => json!({
            "portMappings": [{"hostPort": 8181, "containerPort": 80, "protocol": "tcp"}],
            "bandwidth": {"ingressRate": 1000000, "ingressBurst": 100000, "egressRate": 1000000, "egressBurst": 100000}
        }),
        true => json!({
            "portMappings": [{"hostPort": 8181, "containerPort": 0, "protocol": "tcpx"}],
            "bandwidth": {"ingressRate": "fast", "ingressBurst": 100000}
        }),
    }
}

/// Before: a DEL whose config held a value ADD refuses failed (as the reference's does, for
/// ever), so containerd's retries never ended and the attachment's veth, address, rules,
/// qdiscs and records stayed. Now DEL undoes everything and succeeds.
#[test]
fn a_del_whose_config_add_would_refuse_still_removes_everything() {
    let Some(w) = World::new(Side::AllCnibox) else {
        return;
    };
    let before = warm_baseline(&w);
    let ns = w.env.container();
    ok(
        w.libcni("add", "refused", ns.path_str(), "rf1", "eth0", &refusing_caps(false)),
        "ADD",
    );
    assert_ne!(node_state(&w, "refused"), before, "ADD made nothing");
    w.write("10-refused.conflist", &refusing_chain(&w, true));
    let out = w.libcni("del", "refused", ns.path_str(), "rf1", "eth0", &refusing_caps(true));
    ok(out, "DEL with a config ADD refuses");
    assert_eq!(node_state(&w, "refused"), before, "DEL left something behind");
    assert_eq!(ns.links(), ["lo"]);
}

/// Before: containerd's cleanup DEL after a failed ADD failed the same way as the ADD
/// (portmap: "Invalid container port number: 0"), so the bridge's veth and the address
/// bridge had reserved before portmap failed stayed. Now the cleanup DEL succeeds and
/// leaves the node as it was.
#[test]
fn the_cleanup_del_after_a_refused_add_succeeds_and_leaves_nothing() {
    let Some(w) = World::new(Side::AllCnibox) else {
        return;
    };
    let before = warm_baseline(&w);
    let ns = w.env.container();
    let add = w.libcni("add", "refused", ns.path_str(), "rf2", "eth0", &refusing_caps(true));
    assert!(!add.ok(), "ADD with a container port 0 succeeded: {add:?}");
    assert!(add.stderr.contains("Invalid container port number: 0"), "{add:?}");
    let del = w.libcni("del", "refused", ns.path_str(), "rf2", "eth0", &refusing_caps(true));
    ok(del, "the cleanup DEL");
    assert_eq!(
        node_state(&w, "refused"),
        before,
        "the failed ADD and its DEL left something behind"
    );
    assert_eq!(ns.links(), ["lo"]);
}
