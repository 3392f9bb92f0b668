//! The bandwidth plugin: the reference bandwidth_linux_test.go inventory (veth pair with
//! ingress and egress, each direction disabled, invalid config, runtime config, static over
//! runtime config, DEL, finding the host veth among several, no veth peer, no interfaces,
//! no matching host interface, the 4 GB burst limit), every spec version it speaks, run
//! through cnibox and the Go bandwidth side by side: results and the tc objects (`tc -j
//! qdisc/filter show`) and links left. Plus CHECK drift, the DEL matrix, rollback, and the
//! version gate (0.3.0 on, as the reference).
use crate::common;
use crate::plugin_state;

use common::{Call, CallOutput, Netns, TestEnv, ALL_VERSIONS};
use plugin_state::at_least;
use serde_json::{json, Value};
use std::process::Command;

const IFNAME: &str = "eth0";
const HOST_VETH: &str = "vethbw0";
const NET: &str = "bwnet";
const ID: &str = "bwctr";

/// The versions the plugin speaks (the reference's, 0.3.0 on, and 1.1.0).
fn versions() -> Vec<&'static str> {
    ALL_VERSIONS.iter().copied().filter(|v| at_least(v, "0.3.0")).collect()
}

struct World {
    env: TestEnv,
    ns: Netns,
}

impl World {
    fn new() -> World {
        let env = TestEnv::new();
        let ns = env.container();
        env.host.ip(&[
            "link", "add", HOST_VETH, "type", "veth", "peer", "name", IFNAME, "netns", &ns.name,
        ]);
        env.host.ip(&["link", "set", HOST_VETH, "up"]);
        ns.ip(&["link", "set", IFNAME, "up"]);
        World { env, ns }
    }

    fn prev(&self, version: &str) -> Value {
        let mut p = json!({"cniVersion": version,
                           "interfaces": [{"name": HOST_VETH}, {"name": IFNAME, "sandbox": self.ns.path_str()}],
                           "ips": [{"address": "10.9.0.2/24", "interface": 1}]});
        if !at_least(version, "1.0.0") {
            p["ips"][0]["version"] = json!("4");
        }
        p
    }

    fn conf(&self, version: &str, extra: &Value) -> Value {
        let mut c = json!({"cniVersion": version, "name": NET, "type": "bandwidth", "prevResult": self.prev(version)});
        plugin_state::merge(&mut c, extra);
        c
    }

    fn call(&self, reference: bool) -> Option<Call> {
        if reference {
            self.env.reference("bandwidth")
        } else {
            Some(self.env.call("bandwidth"))
        }
    }

    fn run(&self, reference: bool, verb: &str, c: &Value) -> Option<CallOutput> {
        Some(self.call(reference)?.exec(verb, ID, self.ns.path_str(), IFNAME, c))
    }

    fn tc(&self, args: &[&str]) -> Value {
        let out = common::run_ok(Command::new("tc").args(["-j", "-n", &self.env.host.name]).args(args));
        if out.trim().is_empty() {
            return json!([]);
        }
        serde_json::from_str(&out).unwrap()
    }

    /// Qdiscs of the host namespace, the filters on the host veth's ingress, and the links:
    /// the kernel state to compare (MACs masked).
    fn tc_state(&self) -> Value {
        let qdiscs = self.tc(&["qdisc", "show"]);
        let mut filters = if self
            .tc(&["qdisc", "show", "dev", HOST_VETH, "ingress"])
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            self.tc(&["filter", "show", "dev", HOST_VETH, "ingress"])
        } else {
            json!([])
        };
        // action indexes are per namespace and freed asynchronously: not part of the shape
        for f in filters.as_array_mut().unwrap() {
            if let Some(acts) = f["options"]["actions"].as_array_mut() {
                for a in acts {
                    a.as_object_mut().unwrap().remove("index");
                }
            }
        }
        json!({"qdiscs": qdiscs, "filters": filters, "links": plugin_state::links(&self.env.host)})
    }

    /// Back to the start: no qdiscs on the veth, no ifb.
    fn reset(&self) {
        for args in [
            ["qdisc", "del", "dev", HOST_VETH, "root"],
            ["qdisc", "del", "dev", HOST_VETH, "ingress"],
        ] {
            let _ = Command::new("tc").args(["-n", &self.env.host.name]).args(args).output();
        }
        for l in plugin_state::link_names(&self.env.host) {
            if l.starts_with("bwp") {
                self.env.host.ip(&["link", "del", &l]);
            }
        }
    }
}

/// The result with the ifb's random MAC masked.
fn masked(v: &Value) -> Value {
    plugin_state::mask(v)
}

#[derive(Debug, PartialEq)]
struct Trace {
    add: Value,
    after_add: Value,
    check: Option<Value>,
    del: i32,
    after_del: Value,
}

fn trace(w: &World, reference: bool, version: &str, extra: &Value) -> Option<Trace> {
    w.reset();
    let c = w.conf(version, extra);
    let add = w.run(reference, "ADD", &c)?;
    let after_add = w.tc_state();
    let check = at_least(version, "0.4.0").then(|| {
        let mut cc = c.clone();
        if add.ok() {
            cc["prevResult"] = add.json();
        }
        let out = w.run(reference, "CHECK", &cc).unwrap();
        if out.stdout.trim().is_empty() && !out.ok() {
            return json!({"crashed": out.code});
        }
        json!({"code": out.code, "msg": if out.ok() { Value::Null } else { out.json()["msg"].clone() }})
    });
    let add = if add.ok() {
        masked(&add.json())
    } else {
        json!({"code": add.json()["code"], "msg": add.json()["msg"]})
    };
    // a config ADD refuses: the reference's DEL fails too, cnibox's undoes the attachment and
    // succeeds (README, Differences)
    let del = w.run(reference, "DEL", &c).unwrap().code;
    // cnibox also removes the veth's qdiscs on DEL; the reference leaves them to the veth's
    // deletion: compare what is left on the ifb side only
    let mut after_del = w.tc_state();
    after_del["qdiscs"] = json!(after_del["qdiscs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["dev"] != HOST_VETH)
        .collect::<Vec<_>>());
    after_del["filters"] = json!([]);
    Some(Trace {
        add,
        after_add,
        check,
        del,
        after_del,
    })
}

fn cases() -> Vec<(&'static str, Value)> {
    let both = json!({"ingressRate": 8000000, "ingressBurst": 16000000, "egressRate": 4000000, "egressBurst": 8000000});
    vec![
        ("works with a veth pair", both.clone()),
        (
            "does not apply ingress when disabled",
            json!({"ingressRate": 0, "ingressBurst": 0, "egressRate": 8000, "egressBurst": 80}),
        ),
        (
            "does not apply egress when disabled",
            json!({"egressRate": 0, "egressBurst": 0, "ingressRate": 8000, "ingressBurst": 80}),
        ),
        (
            "fails an invalid ingress config",
            json!({"egressRate": 0, "egressBurst": 0, "ingressRate": 8000, "ingressBurst": 0}),
        ),
        (
            "works with a veth pair using runtime config",
            json!({"runtimeConfig": {"bandwidth": both}}),
        ),
        (
            "static config over runtime config",
            json!({"ingressRate": 2000, "ingressBurst": 1000, "egressRate": 2000, "egressBurst": 1000,
                   "runtimeConfig": {"bandwidth": {"ingressRate": 8000, "ingressBurst": 800, "egressRate": 8000, "egressBurst": 800}}}),
        ),
        ("no limits: passes prevResult through", json!({})),
        (
            "a rate above 4 Gbit/s (64-bit rate attribute)",
            json!({"ingressRate": 80_000_000_000u64, "ingressBurst": 80_000_000u64}),
        ),
    ]
}

/// Every reference case in every version both speak: same result, same tc objects, same
/// CHECK verdict, same links after DEL.
#[test]
fn reference_inventory_side_by_side_every_version() {
    let w = World::new();
    for v in plugin_state::reference_versions()
        .into_iter()
        .filter(|v| at_least(v, "0.3.0"))
    {
        for (name, extra) in cases() {
            let ours = trace(&w, false, v, &extra).unwrap();
            let Some(mut theirs) = trace(&w, true, v, &extra) else {
                continue;
            };
            if name.starts_with("fails") {
                assert_eq!(
                    (ours.del, theirs.del),
                    (0, 1),
                    "{v} {name}: DEL of a config ADD refuses"
                );
                theirs.del = ours.del;
            }
            if name.starts_with("no limits") && theirs.check.is_some() {
                // v1.1.1's CHECK dereferences the absent limits and crashes (fixed later)
                assert_eq!(theirs.check, Some(json!({"crashed": 2})), "{v}");
                assert_eq!(ours.check, Some(json!({"code": 0, "msg": null})), "{v}");
                theirs.check = ours.check.clone();
            }
            assert_eq!(ours, theirs, "{v} {name}");
        }
    }
}

#[test]
fn shapes_both_directions_with_the_reference_tc_objects() {
    let w = World::new();
    let t = trace(&w, false, "1.0.0", &cases()[0].1).unwrap();
    let ifb = t.add["interfaces"][2]["name"].as_str().unwrap().to_string();
    assert!(ifb.starts_with("bwp") && ifb.len() == 15, "{ifb}");
    assert_eq!(t.add["interfaces"][2]["mac"], "mac*");
    let q = &t.after_add["qdiscs"];
    let find = |dev: &str, kind: &str| {
        q.as_array()
            .unwrap()
            .iter()
            .find(|x| x["dev"] == dev && x["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} on {dev}: {q}"))
    };
    assert_eq!(
        find(HOST_VETH, "tbf")["options"],
        json!({"rate": 1000000, "burst": 2000000, "lat": 25000})
    );
    assert_eq!(find(HOST_VETH, "ingress")["handle"], "ffff:");
    assert_eq!(
        find(&ifb, "tbf")["options"],
        json!({"rate": 500000, "burst": 1000000, "lat": 25000})
    );
    let filters = t.after_add["filters"].to_string();
    assert!(filters.contains(&format!("\"to_dev\":\"{ifb}\"")), "{filters}");
    assert!(filters.contains("\"flowid\":\"1:1\""), "{filters}");
    assert_eq!(t.check, Some(json!({"code": 0, "msg": null})));
    assert!(!t.after_del["links"].to_string().contains("bwp"));
}

#[test]
fn the_1_1_0_results_are_the_1_0_0_ones() {
    let w = World::new();
    for (name, extra) in cases() {
        let ours = trace(&w, false, "1.1.0", &extra).unwrap();
        let mut as_1_0 = trace(&w, false, "1.0.0", &extra).unwrap();
        if as_1_0.add.get("cniVersion").is_some() {
            as_1_0.add["cniVersion"] = json!("1.1.0");
        }
        assert_eq!(ours, as_1_0, "{name}");
    }
}

#[test]
fn versions_before_0_3_0_are_refused_like_the_reference() {
    let w = World::new();
    for v in ["0.1.0", "0.2.0"] {
        let c = json!({"cniVersion": v, "name": NET, "type": "bandwidth", "ingressRate": 8, "ingressBurst": 8});
        let ours = w.run(false, "ADD", &c).unwrap();
        assert_eq!(ours.failure(1), "incompatible CNI versions");
        assert_eq!(
            ours.json()["details"],
            format!("config is \"{v}\", plugin supports [\"0.3.0\" \"0.3.1\" \"0.4.0\" \"1.0.0\" \"1.1.0\"]")
        );
        if let Some(theirs) = w.run(true, "ADD", &c) {
            assert_eq!(theirs.failure(1), "incompatible CNI versions");
        }
    }
    let out = w.env.call("bandwidth").command("VERSION").run();
    assert_eq!(
        out.success()["supportedVersions"],
        json!(["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"])
    );
}

/// Finding the host end: among several host veths in prevResult, the container's peer.
#[test]
fn picks_the_peer_among_several_host_veths() {
    let w = World::new();
    let other = w.env.container();
    w.env.host.ip(&[
        "link",
        "add",
        "vethbw1",
        "type",
        "veth",
        "peer",
        "name",
        IFNAME,
        "netns",
        &other.name,
    ]);
    for reference in [false, true] {
        w.reset();
        let mut c = w.conf("1.0.0", &json!({"ingressRate": 8000, "ingressBurst": 800}));
        c["prevResult"]["interfaces"] =
            json!([{"name": "vethbw1"}, {"name": HOST_VETH}, {"name": IFNAME, "sandbox": w.ns.path_str()}]);
        let Some(out) = w.run(reference, "ADD", &c) else { return };
        out.success();
        let q = w.tc(&["qdisc", "show", "dev", HOST_VETH]).to_string();
        assert!(q.contains("\"kind\":\"tbf\""), "{q}");
        let q1 = w.tc(&["qdisc", "show", "dev", "vethbw1"]).to_string();
        assert!(!q1.contains("\"kind\":\"tbf\""), "{q1}");
    }
}

/// Errors with the reference's codes and messages, nothing left behind.
#[test]
fn errors_like_the_reference() {
    let w = World::new();
    let limits = json!({"ingressRate": 8000, "ingressBurst": 800, "egressRate": 8000, "egressBurst": 800});
    let bridge_ns = w.env.container();
    bridge_ns.ip(&["link", "add", IFNAME, "type", "bridge"]);
    let mut cases: Vec<(Value, String, &str)> = vec![
        (json!({"prevResult": {"interfaces": []}}), "no interfaces provided".into(), ""),
        (json!({"prevResult": {"interfaces": [{"name": "vethzz"}]}}), "no veth peer of container interface found in host ns".into(), ""),
        (json!({"ingressRate": 8000, "ingressBurst": 0}), "if rate is set, burst must also be set".into(), ""),
        (json!({"egressBurst": 8000, "egressRate": 0}), "if burst is set, rate must also be set".into(), ""),
        (json!({"ingressRate": 1, "ingressBurst": 40_000_000_000u64}), "burst cannot be more than 4GB".into(), ""),
        (json!({"egressRate": -1}),
         "failed to parse network configuration: json: cannot unmarshal number -1 into Go struct field PluginConf.egressRate of type uint64".into(), ""),
        (json!({"prevResult": null}), "must be called as chained plugin".into(), ""),
        (json!({}), "container interface eth0 has no veth peer: interface \"eth0\" was not a veth interface".into(), "bridge"),
    ];
    for (extra, msg, special) in cases.drain(..) {
        w.reset();
        let mut c = w.conf("1.0.0", &limits);
        plugin_state::merge(&mut c, &extra);
        if extra.get("prevResult").is_some_and(Value::is_null) {
            c.as_object_mut().unwrap().remove("prevResult");
        }
        let netns = if special == "bridge" {
            bridge_ns.path_str()
        } else {
            w.ns.path_str()
        };
        let before = w.tc_state();
        for reference in [false, true] {
            let Some(call) = w.call(reference) else { continue };
            let out = call.exec("ADD", ID, netns, IFNAME, &c);
            assert_eq!(out.failure(999), msg, "{extra} reference={reference}");
            if !reference {
                assert_eq!(w.tc_state(), before, "{extra}: left something");
            }
            w.reset();
        }
    }
    let out = w.env.call("bandwidth").exec(
        "ADD",
        ID,
        "/run/netns/cnibox-missing",
        IFNAME,
        &w.conf("1.0.0", &limits),
    );
    assert_eq!(
        out.failure(999),
        "failed to open netns \"/run/netns/cnibox-missing\": failed to Statfs \"/run/netns/cnibox-missing\": no such file or directory"
    );
}

/// Regression: a burst whose bucket passes 32 bits of psched ticks at its rate was capped
/// silently (1,000 bits/s with a 1,000,000-bit burst became a 34,359-byte bucket; the
/// reference wraps around to another). Now ADD and CHECK refuse it before anything changes,
/// naming the largest burst at that rate, and the largest is taken.
#[test]
fn a_burst_the_kernel_cannot_hold_is_refused_naming_the_largest() {
    let w = World::new();
    // at 125 bytes/s with this kernel's psched clock (15.625 ticks per µs), 34,359 bytes
    let largest = 274_879u64;
    for v in versions() {
        for dir in ["ingress", "egress"] {
            let limit = |burst: u64| {
                let mut l = serde_json::Map::new();
                l.insert(format!("{dir}Rate"), json!(1000));
                l.insert(format!("{dir}Burst"), json!(burst));
                w.conf(v, &Value::Object(l))
            };
            w.reset();
            let before = w.tc_state();
            let want = format!(
                "{dir}Burst 1000000 is more than the kernel's token bucket holds at {dir}Rate 1000: \
                 at most {largest} bits at that rate"
            );
            let msg = w.run(false, "ADD", &limit(1_000_000)).unwrap().failure(999);
            assert_eq!(msg, want, "{v}");
            assert_eq!(w.tc_state(), before, "{v} {dir}: the failed ADD left something");
            w.run(false, "ADD", &limit(largest)).unwrap().success();
            let tbf = w.tc_state().to_string();
            assert!(tbf.contains(r#""burst":34359,"#), "{v} {dir}: {tbf}");
            if at_least(v, "0.4.0") {
                w.run(false, "CHECK", &limit(largest)).unwrap().success();
                let msg = w.run(false, "CHECK", &limit(1_000_000)).unwrap().failure(999);
                assert_eq!(msg, want, "{v}");
            }
            w.run(false, "DEL", &limit(largest)).unwrap().success();
            // containerd's CRI sends 4294967295 bits with every rate an annotation sets: it
            // gets the largest bucket (refusing it would keep such pods from starting)
            let cri = limit(u64::from(u32::MAX));
            w.run(false, "ADD", &cri).unwrap().success();
            let tbf = w.tc_state().to_string();
            assert!(tbf.contains(r#""burst":34359,"#), "{v} {dir}: {tbf}");
            if at_least(v, "0.4.0") {
                w.run(false, "CHECK", &cri).unwrap().success();
            }
            w.run(false, "DEL", &cri).unwrap().success();
        }
    }
    // a rate below a byte per second has no bucket at all (the kernel's "invalid argument")
    w.reset();
    let c = w.conf("1.0.0", &json!({"ingressRate": 7, "ingressBurst": 800}));
    assert_eq!(
        w.run(false, "ADD", &c).unwrap().failure(999),
        "ingressRate 7 is less than 8 bits per second: the kernel's token bucket counts whole bytes"
    );
    // the reference shapes with whatever its arithmetic wrapped around to
    let c = w.conf("1.0.0", &json!({"ingressRate": 1000, "ingressBurst": 1_000_000}));
    if let Some(out) = w.run(true, "ADD", &c) {
        out.success();
        let tbf = w.tc_state().to_string();
        assert!(
            tbf.contains(r#""kind":"tbf""#) && !tbf.contains(r#""burst":125000,"#),
            "{tbf}"
        );
        w.reset();
    }
}

/// A failed ADD half way (the ifb's name is taken by another kind of link) removes the
/// token bucket it already put on the veth.
#[test]
fn failed_add_rolls_back() {
    let w = World::new();
    w.reset();
    let c = w.conf(
        "1.0.0",
        &json!({"ingressRate": 8000, "ingressBurst": 800, "egressRate": 8000, "egressBurst": 800}),
    );
    let ifb = cnibox::plugins::bandwidth::ifb_name(NET, ID);
    w.env.host.ip(&["link", "add", &ifb, "type", "bridge"]);
    let before = w.tc_state();
    let msg = w.run(false, "ADD", &c).unwrap().failure(999);
    assert!(msg.starts_with("adding link: create ifb"), "{msg}");
    assert_eq!(w.tc_state(), before);
    w.env.host.ip(&["link", "del", &ifb]);
}

/// CHECK finds a changed rate and a missing ifb, with the reference's messages.
#[test]
fn check_reports_drift() {
    let w = World::new();
    w.reset();
    let c = w.conf(
        "1.0.0",
        &json!({"ingressRate": 8000000, "ingressBurst": 16000000, "egressRate": 4000000, "egressBurst": 8000000}),
    );
    let mut cc = c.clone();
    cc["prevResult"] = w.run(false, "ADD", &c).unwrap().success();
    w.run(false, "CHECK", &cc).unwrap().success();
    common::run_ok(Command::new("tc").args([
        "-n",
        &w.env.host.name,
        "qdisc",
        "replace",
        "dev",
        HOST_VETH,
        "root",
        "handle",
        "1:",
        "tbf",
        "rate",
        "1mbit",
        "burst",
        "10kb",
        "latency",
        "25ms",
    ]));
    for reference in [false, true] {
        if let Some(call) = w.call(reference) {
            let out = call.exec("CHECK", ID, w.ns.path_str(), IFNAME, &cc);
            assert_eq!(out.failure(999), "Rate doesn't match", "reference={reference}");
        }
    }
    w.env
        .host
        .ip(&["link", "del", &cnibox::plugins::bandwidth::ifb_name(NET, ID)]);
    let mut egress_only = w.conf("1.0.0", &json!({"egressRate": 4000000, "egressBurst": 8000000}));
    egress_only["prevResult"] = w.prev("1.0.0");
    assert_eq!(
        w.run(false, "CHECK", &egress_only).unwrap().failure(999),
        "get ifb device: Link not found"
    );
    let no_prev = json!({"cniVersion": "1.0.0", "name": NET, "type": "bandwidth"});
    assert_eq!(
        w.run(false, "CHECK", &no_prev).unwrap().failure(999),
        "must be called as a chained plugin"
    );
    // no limits configured: nothing to check (the reference v1.1.1 crashes here)
    w.run(false, "CHECK", &w.conf("1.0.0", &json!({}))).unwrap().success();
}

/// The DEL matrix, every version: twice, without prevResult, without CNI_NETNS, with the
/// netns gone; DEL always succeeds and leaves no ifb and no qdisc of its own.
#[test]
fn del_matrix() {
    let w = World::new();
    let limits = json!({"ingressRate": 8000, "ingressBurst": 800, "egressRate": 8000, "egressBurst": 800});
    let clean = |what: &str| {
        let s = w.tc_state();
        assert!(!s["links"].to_string().contains("bwp"), "{what}: ifb left: {s}");
    };
    for v in versions() {
        w.reset();
        let c = w.conf(v, &limits);
        w.run(false, "ADD", &c).unwrap().success();
        for _ in 0..2 {
            w.run(false, "DEL", &c).unwrap().success();
            clean(v);
        }
        let veth_qdiscs = w.tc(&["qdisc", "show", "dev", HOST_VETH]).to_string();
        assert!(
            !veth_qdiscs.contains("tbf") && !veth_qdiscs.contains("ingress"),
            "{v}: {veth_qdiscs}"
        );
        w.run(false, "ADD", &c).unwrap().success();
        let mut no_prev = c.clone();
        no_prev.as_object_mut().unwrap().remove("prevResult");
        w.run(false, "DEL", &no_prev).unwrap().success();
        clean(v);
        // without prevResult the veth cannot be found: its qdiscs go with it (here: by hand)
        w.reset();
        w.run(false, "ADD", &c).unwrap().success();
        let out = w
            .env
            .call("bandwidth")
            .command("DEL")
            .env("CNI_CONTAINERID", ID)
            .env("CNI_IFNAME", IFNAME)
            .config(&c)
            .run();
        out.success();
        clean(v);
        w.reset();
        let gone = w.env.container().path_str().to_string();
        w.run(false, "ADD", &c).unwrap().success();
        w.env.call("bandwidth").exec("DEL", ID, &gone, IFNAME, &c).success();
        clean(v);
    }
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("bandwidth");
}
