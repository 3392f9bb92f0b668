//! sbr (source-based routing, chained) in namespaces: the rules and tables ADD lays out,
//! side by side with Debian's reference for the same container (results, `ip rule`, every
//! routing table), the keys the reference gained after v1.1.1 (`table`, `gateways`,
//! `addSourceHints`), CHECK, DEL in every state and version, the lock two concurrent runs
//! share, and a failed ADD leaving nothing behind.
use crate::common;
use crate::plugin_state;

use common::{Call, CallOutput, Netns, TestEnv, ALL_VERSIONS};
use plugin_state::{at_least, reference_versions};
use serde_json::{json, Value};

const IFNAME: &str = "eth0";

/// A container with `eth0` (a veth whose other end is up in the host namespace): IPv4
/// 10.1.0.5/24 (and 2001:db8:1::5/64 when `dual`), default routes via .1 and ::1, a link
/// route and a gateway route of the IPAM kind.
struct World {
    env: TestEnv,
    ns: Netns,
}

impl World {
    fn new(dual: bool) -> World {
        let env = TestEnv::new();
        let ns = env.container();
        add_link(&env, &ns, "vsb0", IFNAME, dual);
        ns.ip(&["addr", "add", "10.1.0.5/24", "dev", IFNAME]);
        ns.ip(&["route", "add", "default", "via", "10.1.0.1", "dev", IFNAME]);
        ns.ip(&["route", "add", "192.168.0.0/16", "dev", IFNAME]);
        ns.ip(&["route", "add", "172.16.0.0/16", "via", "10.1.0.254", "dev", IFNAME]);
        if dual {
            ns.ip(&["addr", "add", "2001:db8:1::5/64", "dev", IFNAME, "nodad"]);
            ns.ip(&["-6", "route", "add", "default", "via", "2001:db8:1::1", "dev", IFNAME]);
        }
        World { env, ns }
    }

    fn call(&self, reference: bool) -> Call {
        match reference {
            true => self.env.reference("sbr").unwrap(),
            false => self.env.call("sbr"),
        }
    }

    fn run(&self, reference: bool, verb: &str, conf: &Value) -> CallOutput {
        self.call(reference).exec(verb, "c1", self.ns.path_str(), IFNAME, conf)
    }

    /// Rules and every table but `local`, as `ip` prints them.
    fn state(&self) -> String {
        routing_state(&self.ns)
    }
}

/// A veth `host` ↔ `inner` (in `ns`), both ends up; returns once the kernel has set up the
/// container end (its IPv6 link-local route, which sbr moves too, appears with the carrier).
fn add_link(env: &TestEnv, ns: &Netns, host: &str, inner: &str, v6: bool) {
    env.host.ip(&[
        "link", "add", host, "type", "veth", "peer", "name", inner, "netns", &ns.name,
    ]);
    env.host.ip(&["link", "set", host, "up"]);
    ns.ip(&["link", "set", inner, "up"]);
    if !v6 {
        return;
    }
    for _ in 0..200 {
        if ns.ip(&["-6", "route", "show", "dev", inner]).contains("fe80::/64") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("no link-local route on {inner}");
}

fn routing_state(ns: &Netns) -> String {
    let mut s = String::new();
    for fam in ["-4", "-6"] {
        s += &ns.ip(&[fam, "rule", "show"]);
        s += &ns
            .ip(&[fam, "route", "show", "table", "all"])
            .lines()
            .filter(|l| !l.contains("table local") && !l.starts_with("local ") && !l.starts_with("multicast "))
            .map(|l| l.to_string() + "\n")
            .collect::<String>();
    }
    s
}

/// prevResult for the world: eth0 in the sandbox and its addresses, in `version`'s shape.
fn prev_result(version: &str, netns: &str, dual: bool) -> Value {
    if !at_least(version, "0.3.0") {
        let mut p = json!({"cniVersion": version, "ip4": {"ip": "10.1.0.5/24", "gateway": "10.1.0.1"}});
        if dual {
            p["ip6"] = json!({"ip": "2001:db8:1::5/64", "gateway": "2001:db8:1::1"});
        }
        return p;
    }
    let mut ips = vec![json!({"address": "10.1.0.5/24", "gateway": "10.1.0.1", "interface": 0})];
    if dual {
        ips.push(json!({"address": "2001:db8:1::5/64", "gateway": "2001:db8:1::1", "interface": 0}));
    }
    if !at_least(version, "1.0.0") {
        ips[0]["version"] = json!("4");
        if dual {
            ips[1]["version"] = json!("6");
        }
    }
    json!({"cniVersion": version, "interfaces": [{"name": IFNAME, "sandbox": netns}], "ips": ips})
}

fn conf(version: &str, prev: Value) -> Value {
    json!({"cniVersion": version, "name": "sbrnet", "type": "sbr", "prevResult": prev})
}

/// A result without an empty `dns` (the reference prints `"dns": {}`), or an error's code
/// and message.
fn answer(out: &CallOutput) -> Value {
    if out.stdout.trim().is_empty() {
        return Value::Null;
    }
    let mut j = out.json();
    if !out.ok() {
        return json!({"code": j["code"], "msg": j["msg"]});
    }
    if j.get("dns") == Some(&json!({})) {
        j.as_object_mut().unwrap().remove("dns");
    }
    j
}

/// ADD in a fresh world by cnibox and by the reference: the same answer and the same rules
/// and tables; then DEL: the same rules left (none of ADD's), and no route of cnibox's
/// tables left while the reference's stay.
fn same_as_the_reference(dual: bool, version: &str, prepare: impl Fn(&World), prev: impl Fn(&World) -> Value) {
    let mut outcome = vec![];
    for reference in [false, true] {
        let w = World::new(dual);
        prepare(&w);
        let conf = conf(version, prev(&w));
        let add = w.run(reference, "ADD", &conf);
        let after_add = w.state();
        let del = w.run(reference, "DEL", &conf);
        // each world has its own namespace path, which the result's sandbox names
        let add = answer(&add).to_string().replace(w.ns.path_str(), "NETNS");
        outcome.push((
            add,
            after_add,
            answer(&del),
            w.ns.ip(&["rule", "show"]) + &w.ns.ip(&["-6", "rule", "show"]),
        ));
        if !reference {
            let left = w.ns.ip(&["route", "show", "table", "all"]) + &w.ns.ip(&["-6", "route", "show", "table", "all"]);
            assert!(
                !left.contains("table 10"),
                "{version}: routes of sbr's tables left by DEL:\n{left}"
            );
        }
    }
    assert_eq!(outcome[0], outcome[1], "{version} (left: cnibox, right: the reference)");
}

#[test]
fn differential_tables_and_rules_in_every_version() {
    if common::reference_dir().is_none() {
        return;
    }
    for version in reference_versions() {
        for dual in [false, true] {
            same_as_the_reference(dual, version, |_| {}, |w| prev_result(version, w.ns.path_str(), dual));
        }
    }
}

/// Two addresses of one subnet each get a table, both with the subnet's routes; an address
/// of another interface of prevResult is left alone; a table a rule already names is
/// skipped; an address without a gateway gets no default route.
#[test]
fn differential_addresses_interfaces_and_taken_tables() {
    if common::reference_dir().is_none() {
        return;
    }
    let v = "1.0.0";
    same_as_the_reference(
        false,
        v,
        |w| {
            w.ns.ip(&["addr", "add", "10.1.0.6/24", "dev", IFNAME]);
        },
        |w| {
            json!({"cniVersion": v, "interfaces": [{"name": IFNAME, "sandbox": w.ns.path_str()}, {"name": "vsb0"}],
                   "ips": [{"address": "10.1.0.5/24", "gateway": "10.1.0.1", "interface": 0},
                           {"address": "10.1.0.6/24", "interface": 0},
                           {"address": "10.1.0.7/24", "gateway": "10.1.0.1", "interface": 1}]})
        },
    );
    same_as_the_reference(
        true,
        v,
        |w| {
            w.ns.ip(&["rule", "add", "from", "10.9.9.9", "lookup", "100"]);
            w.ns.ip(&["-6", "rule", "add", "from", "2001:db8:9::9", "lookup", "101"]);
        },
        |w| prev_result(v, w.ns.path_str(), true),
    );
}

#[test]
fn differential_errors_and_check() {
    if common::reference_dir().is_none() {
        return;
    }
    let w = World::new(false);
    let ns = w.ns.path_str().to_string();
    let prev = prev_result("1.0.0", &ns, false);
    let mut no_version = prev_result("0.4.0", &ns, false);
    no_version.as_object_mut().unwrap().remove("cniVersion");
    let cases = [
        json!({"cniVersion": "1.0.0", "name": "sbrnet", "type": "sbr"}),
        conf("1.0.0", json!({"cniVersion": "1.0.0"})),
        // (the result types of the 0.x configs: a 1.0.0 config's refusal lists 1.0.0's
        // versions, of which the reference v1.1.1 knows fewer)
        conf("0.4.0", no_version),
        conf("0.4.0", prev_result("0.2.0", &ns, false)),
        conf("0.2.0", prev),
        conf("1.0.0", json!(5)),
    ];
    for c in &cases {
        let (ours, theirs) = (w.run(false, "ADD", c), w.run(true, "ADD", c));
        assert_eq!(answer(&ours), answer(&theirs), "{c}");
        assert_eq!(ours.code, 1, "{c}: {ours:?}");
    }
    // a link prevResult names but the namespace lacks
    let mut prev = prev_result("1.0.0", &ns, false);
    prev["interfaces"][0]["name"] = json!("eth9");
    let c = conf("1.0.0", prev);
    let (ours, theirs) = (
        w.call(false).exec("ADD", "c1", &ns, "eth9", &c),
        w.call(true).exec("ADD", "c1", &ns, "eth9", &c),
    );
    assert_eq!(answer(&ours), answer(&theirs));
    assert_eq!(
        answer(&ours)["msg"],
        "Cannot find network interface eth9: Link not found"
    );
    // CHECK looks at nothing, in either implementation
    for c in cases.iter().chain([&c]) {
        if c["cniVersion"] == "1.0.0" {
            assert!(w.run(false, "CHECK", c).ok() && w.run(true, "CHECK", c).ok(), "{c}");
        }
    }
    assert_eq!(
        routing_state(&w.ns),
        World::new(false).state(),
        "failed ADDs changed nothing"
    );
}

/// prevResult gives the interface no address (they are all another interface's): there is
/// nothing to route by source, and its routes stay in the main table (the reference moves
/// them out all the same, to no table).
#[test]
fn an_interface_without_addresses_keeps_its_routes() {
    let prev = |w: &World| {
        json!({"cniVersion": "1.0.0", "interfaces": [{"name": IFNAME, "sandbox": w.ns.path_str()}, {"name": "net1"}],
               "ips": [{"address": "10.1.0.5/24", "gateway": "10.1.0.1", "interface": 1}]})
    };
    let w = World::new(false);
    let before = w.state();
    w.run(false, "ADD", &conf("1.0.0", prev(&w))).success();
    assert_eq!(w.state(), before);
    if common::reference_dir().is_some() {
        let w = World::new(false);
        w.run(true, "ADD", &conf("1.0.0", prev(&w))).success();
        assert_eq!(
            w.ns.ip(&["route", "show", "table", "main"]),
            "",
            "the reference empties main"
        );
    }
}

/// A default route the kernel refuses (a gateway off every subnet) fails ADD with the
/// reference's message; cnibox then takes back the rule it had added (the reference leaves
/// it, pointing at an empty table).
#[test]
fn a_failed_add_leaves_nothing_behind() {
    let prev = |w: &World| {
        json!({"cniVersion": "1.0.0", "interfaces": [{"name": IFNAME, "sandbox": w.ns.path_str()}],
               "ips": [{"address": "10.1.0.5/24", "gateway": "10.1.0.1", "interface": 0},
                       {"address": "10.1.0.6/24", "gateway": "203.0.113.1", "interface": 0}]})
    };
    let w = World::new(false);
    let before = w.state();
    let c = conf("1.0.0", prev(&w));
    let msg = w.run(false, "ADD", &c).failure(999);
    assert_eq!(
        msg,
        "Failed to add default route to 203.0.113.1: network is unreachable"
    );
    assert_eq!(w.state(), before, "the first address's rule and table are gone again");
    if common::reference_dir().is_some() {
        let w = World::new(false);
        assert_eq!(w.run(true, "ADD", &conf("1.0.0", prev(&w))).failure(999), msg);
        assert!(
            w.ns.ip(&["rule", "show"]).contains("from 10.1.0.6 lookup 101"),
            "the reference leaves its rules"
        );
    }
}

/// `table` (the reference's since v1.6): rules only, to that table, routes untouched; DEL
/// removes that table's rules of the interface's addresses and nothing else.
#[test]
fn table_key_adds_rules_only() {
    for (table, shown) in [(200, "200"), (1000, "1000")] {
        let w = World::new(true);
        let before = w.ns.ip(&["route", "show", "table", "all"]) + &w.ns.ip(&["-6", "route", "show", "table", "all"]);
        let mut c = conf("1.1.0", prev_result("1.1.0", w.ns.path_str(), true));
        c["table"] = json!(table);
        // gateways are for the tables ADD fills, which it does not with `table`: unread
        c["gateways"] = json!(["bogus"]);
        w.run(false, "ADD", &c).success();
        assert!(w
            .ns
            .ip(&["rule", "show"])
            .contains(&format!("32765:\tfrom 10.1.0.5 lookup {shown}")));
        assert!(w
            .ns
            .ip(&["-6", "rule", "show"])
            .contains(&format!("32765:\tfrom 2001:db8:1::5 lookup {shown}")));
        let after = w.ns.ip(&["route", "show", "table", "all"]) + &w.ns.ip(&["-6", "route", "show", "table", "all"]);
        assert_eq!(before, after, "routes untouched");
        // a rule of another table for the same address is not this network's
        w.ns.ip(&["rule", "add", "from", "10.1.0.5", "lookup", "300"]);
        w.run(false, "DEL", &c).success();
        assert_eq!(
            w.ns.ip(&["rule", "show"]),
            "0:\tfrom all lookup local\n32764:\tfrom 10.1.0.5 lookup 300\n32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n"
        );
        assert!(!w.ns.ip(&["-6", "rule", "show"]).contains("2001:db8:1::5"));
    }
    let w = World::new(false);
    let mut c = conf("1.1.0", prev_result("1.1.0", w.ns.path_str(), false));
    c["table"] = json!(-1);
    assert_eq!(
        w.run(false, "ADD", &c).failure(999),
        "table -1 is not a routing table id (0 to 4294967295)"
    );
    c["table"] = json!("x");
    assert_eq!(
        w.run(false, "ADD", &c).failure(999),
        "failed to parse network configuration: json: cannot unmarshal string into Go struct field PluginConf.table of type int"
    );
}

/// `gateways` (the current reference's): the default route of each table goes via the
/// configured gateway of its family instead of prevResult's.
#[test]
fn gateways_key_replaces_prev_results_gateways() {
    let w = World::new(true);
    let mut c = conf("1.1.0", prev_result("1.1.0", w.ns.path_str(), true));
    c["gateways"] = json!(["10.1.0.254", "2001:db8:1::fe"]);
    w.run(false, "ADD", &c).success();
    assert!(w
        .ns
        .ip(&["route", "show", "table", "100"])
        .contains("default via 10.1.0.254 dev eth0"));
    assert!(w
        .ns
        .ip(&["-6", "route", "show", "table", "101"])
        .contains("default via 2001:db8:1::fe dev eth0"));
    w.run(false, "DEL", &c).success();
    for (gateways, msg) in [
        (
            json!(["10.1.0.1", "10.1.0.2", "2001:db8:1::1"]),
            "gateways list cannot contain more than 2 entries (one IPv4, one IPv6)",
        ),
        (json!(["bogus"]), "invalid static gateway IP address: bogus"),
        (
            json!(["10.1.0.1", "10.1.0.2"]),
            "gateways list contains multiple IPv4 addresses: 10.1.0.1 and 10.1.0.2",
        ),
        (
            json!(["::1", "2001:db8:1::1"]),
            "gateways list contains multiple IPv6 addresses: ::1 and 2001:db8:1::1",
        ),
    ] {
        let w = World::new(false);
        let before = w.state();
        let mut c = conf("1.1.0", prev_result("1.1.0", w.ns.path_str(), false));
        c["gateways"] = gateways;
        assert_eq!(w.run(false, "ADD", &c).failure(999), msg);
        assert_eq!(w.state(), before, "{msg}: nothing changed");
    }
}

/// `addSourceHints` (the current reference's): the subnet route stays in main with the
/// address as preferred source, the link's routes with a wider scope leave it.
#[test]
fn add_source_hints_keeps_subnet_routes_in_main() {
    let w = World::new(false);
    let mut c = conf("1.1.0", prev_result("1.1.0", w.ns.path_str(), false));
    c["addSourceHints"] = json!(true);
    w.run(false, "ADD", &c).success();
    assert_eq!(
        w.ns.ip(&["route", "show", "table", "main"]),
        "10.1.0.0/24 dev eth0 scope link src 10.1.0.5 \n192.168.0.0/16 dev eth0 scope link \n"
    );
    let table = w.ns.ip(&["route", "show", "table", "100"]);
    for r in [
        "default via 10.1.0.1",
        "10.1.0.0/24 dev eth0 proto kernel scope link src 10.1.0.5",
        "172.16.0.0/16 via 10.1.0.254",
    ] {
        assert!(table.contains(r), "{r} in table 100:\n{table}");
    }
}

/// CHECK succeeds whatever the state, as the reference's (which looks at nothing).
#[test]
fn check_succeeds_as_the_references_does() {
    let w = World::new(false);
    for version in ALL_VERSIONS.iter().filter(|v| at_least(v, "0.4.0")) {
        let c = conf(version, prev_result(version, w.ns.path_str(), false));
        w.run(false, "CHECK", &c).success();
        let mut bare = c.clone();
        bare.as_object_mut().unwrap().remove("prevResult");
        w.run(false, "CHECK", &bare).success();
    }
}

/// DEL in every state, every version: twice, without prevResult, without CNI_NETNS, with
/// the interface gone (prevResult still names its rules; the reference leaves them), with
/// the namespace gone (nothing to do, and no file is created at its path, which the
/// reference does). DEL never fails and no rule of ADD's stays. Each cell has a world of
/// its own: ADD moves the interface's routes out of the main table, so a second ADD on the
/// same interface has no route to its gateway.
#[test]
fn del_matrix() {
    let rules = |w: &World| w.ns.ip(&["rule", "show"]) + &w.ns.ip(&["-6", "rule", "show"]);
    for version in ALL_VERSIONS {
        let clean = rules(&World::new(true));
        let added = |dual: bool| {
            let w = World::new(dual);
            let c = conf(version, prev_result(version, w.ns.path_str(), dual));
            w.run(false, "ADD", &c).success();
            assert_ne!(rules(&w), clean, "{version}");
            (w, c)
        };
        // twice, and without prevResult
        let (w, c) = added(true);
        let mut bare = c.clone();
        bare.as_object_mut().unwrap().remove("prevResult");
        for del in [&c, &c, &bare] {
            w.run(false, "DEL", del).success();
            assert_eq!(rules(&w), clean, "{version}");
        }
        let (w, _) = added(true);
        w.run(false, "DEL", &bare).success();
        assert_eq!(rules(&w), clean, "{version}: without prevResult");
        // no CNI_NETNS: nothing reachable, nothing done, until the runtime retries
        let (w, c) = added(true);
        w.call(false).exec("DEL", "c1", "", IFNAME, &c).success();
        assert_ne!(rules(&w), clean, "{version}");
        w.run(false, "DEL", &c).success();
        assert_eq!(rules(&w), clean, "{version}");
        // the interface gone, its routes with it: prevResult names the rules (none of the
        // 0.1.0/0.2.0 shape's addresses name an interface, so all are this one's)
        let (w, c) = added(true);
        w.ns.ip(&["link", "del", IFNAME]);
        w.run(false, "DEL", &c).success();
        assert_eq!(rules(&w), clean, "{version}: interface gone");
        w.run(false, "DEL", &c).success();
        // the namespace gone
        let (w, c) = added(false);
        let path = w.ns.path.clone();
        let env = w.env;
        drop(w.ns);
        for _ in 0..2 {
            env.call("sbr")
                .exec("DEL", "c1", path.to_str().unwrap(), IFNAME, &c)
                .success();
        }
        assert!(!path.exists(), "{version}: DEL created {}", path.display());
    }
}

/// Two ADDs at once in one namespace, one per interface, cnibox's and the reference's:
/// the namespace lock they share gives each its own table.
#[test]
fn concurrent_adds_in_one_namespace_pick_distinct_tables() {
    let w = World::new(false);
    add_link(&w.env, &w.ns, "vsb1", "eth1", false);
    w.ns.ip(&["addr", "add", "10.2.0.5/24", "dev", "eth1"]);
    let with_reference = common::reference_dir().is_some();
    for round in 0..5 {
        let c0 = conf("1.0.0", prev_result("1.0.0", w.ns.path_str(), false));
        let c1 = conf(
            "1.0.0",
            json!({"cniVersion": "1.0.0", "ips": [{"address": "10.2.0.5/24", "gateway": "10.2.0.1"}]}),
        );
        std::thread::scope(|s| {
            let a = s.spawn(|| w.call(false).exec("ADD", "c1", w.ns.path_str(), IFNAME, &c0));
            let b = s.spawn(|| w.call(with_reference).exec("ADD", "c2", w.ns.path_str(), "eth1", &c1));
            a.join().unwrap().success();
            b.join().unwrap().success();
        });
        let rules = w.ns.ip(&["rule", "show"]);
        let table = |addr: &str| {
            rules
                .lines()
                .find(|l| l.contains(&format!("from {addr} lookup")))
                .and_then(|l| l.rsplit(' ').next())
                .map(String::from)
        };
        let (t0, t1) = (table("10.1.0.5"), table("10.2.0.5"));
        assert!(t0.is_some() && t1.is_some() && t0 != t1, "round {round}: {rules}");
        w.run(false, "DEL", &c0).success();
        w.call(with_reference)
            .exec("DEL", "c2", w.ns.path_str(), "eth1", &c1)
            .success();
        // the interfaces' main routes are in the tables now: put them back for the next round
        w.ns.ip(&["route", "flush", "table", "100"]);
        w.ns.ip(&["route", "flush", "table", "101"]);
        w.ns.ip(&["link", "set", IFNAME, "down"]);
        w.ns.ip(&["link", "set", IFNAME, "up"]);
        w.ns.ip(&["link", "set", "eth1", "down"]);
        w.ns.ip(&["link", "set", "eth1", "up"]);
        w.ns.ip(&["route", "replace", "default", "via", "10.1.0.1", "dev", IFNAME]);
    }
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("sbr");
}
