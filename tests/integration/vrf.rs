//! The vrf plugin, chained after veth: the container interface into a VRF and its routes
//! into the VRF's table, in every spec version it speaks (0.3.1 on); two attachments in one
//! VRF; IPv6 addresses back after enslaving; DEL in every state; the answers of the Go vrf
//! compared with cnibox's.
//!
//! This kernel has no VRF: the tests that need one say so (`SKIP …: vrf: the kernel has no
//! vrf support (modprobe vrf)`) and return; they run on a kernel with the module. What
//! happens before a VRF is made (config errors, a name that is not a VRF, every DEL that
//! finds no VRF) runs here.
use crate::common;

use common::link_kinds::{self, skip, skipped};
use common::{Netns, TestEnv};
use serde_json::{json, Value};

const NET: &str = "vrfnet";
/// The versions the plugin speaks.
const VERSIONS: &[&str] = &["0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// A host namespace and a container whose `eth0` (and, on request, `net1`) veth's ADD made.
struct World {
    env: TestEnv,
    ns: Netns,
}

impl World {
    fn new() -> World {
        let env = TestEnv::new();
        let ns = env.container();
        World { env, ns }
    }

    /// The veth attachment `ifname` in `version`, with a default route via its gateway and
    /// (`v6`) an IPv6 address; its result, the vrf plugin's prevResult.
    fn attach(&self, version: &str, ifname: &str, v6: bool) -> Value {
        let subnet = if ifname == "eth0" { "10.1.2.0/24" } else { "10.1.3.0/24" };
        let mut ranges = vec![json!([{"subnet": subnet}])];
        if v6 {
            ranges.push(json!([{"subnet": "fd00:7::/64"}]));
        }
        let c = json!({
            "cniVersion": version, "name": format!("{NET}-{ifname}"), "type": "veth",
            "ipam": {"type": "host-local", "dataDir": self.env.data_dir, "ranges": ranges,
                     "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.0.2.0/24"}]},
        });
        self.env
            .call("veth")
            .exec("ADD", "ctr1", self.ns.path_str(), ifname, &c)
            .success()
    }

    fn conf(&self, version: &str, prev: Option<&Value>, extra: Value) -> Value {
        let mut c = json!({"cniVersion": version, "name": NET, "type": "vrf", "vrfname": "blue"});
        if let Some(p) = prev {
            c["prevResult"] = p.clone();
        }
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    fn call(&self, verb: &str, ifname: &str, c: &Value) -> common::CallOutput {
        self.env.call("vrf").exec(verb, "ctr1", self.ns.path_str(), ifname, c)
    }

    /// The master of `dev` in the container, by name.
    fn master(&self, dev: &str) -> Option<String> {
        self.ns.ip_json(&["link", "show", dev])[0]["master"]
            .as_str()
            .map(str::to_string)
    }

    /// `ip route show table T` in the container, one route a line.
    fn table(&self, table: &str) -> Vec<String> {
        self.ns
            .ip(&["route", "show", "table", table])
            .lines()
            .map(|l| l.trim().to_string())
            .collect()
    }
}

#[test]
fn add_check_del_in_every_version() {
    if skipped("vrf::add_check_del_in_every_version", &link_kinds::vrf()) {
        return;
    }
    for version in VERSIONS {
        let w = World::new();
        let prev = w.attach(version, "eth0", false);
        let c = w.conf(version, Some(&prev), json!({}));
        let r = w.call("ADD", "eth0", &c).success();
        assert_eq!(r, prev, "{version}: the previous result passes through");
        let vrf = w.ns.ip_json(&["-d", "link", "show", "blue"])[0].clone();
        assert_eq!(vrf["linkinfo"]["info_kind"], "vrf", "{version}");
        assert_eq!(vrf["linkinfo"]["info_data"]["table"], json!(1), "the first free table");
        assert!(vrf["flags"].as_array().unwrap().contains(&json!("UP")));
        assert_eq!(w.master("eth0").as_deref(), Some("blue"));
        // the gateway routes moved into the VRF's table; the connected route is there too
        let t = w.table("1");
        assert!(
            t.iter().any(|l| l.starts_with("default via 10.1.2.1 dev eth0")),
            "{t:?}"
        );
        assert!(
            t.iter().any(|l| l.starts_with("192.0.2.0/24 via 10.1.2.1 dev eth0")),
            "{t:?}"
        );
        if version >= &"0.4.0" {
            w.call("CHECK", "eth0", &c).success();
        }
        w.call("DEL", "eth0", &c).success();
        assert!(!w.ns.has_link("blue"), "{version}: the empty VRF goes");
        assert_eq!(w.master("eth0"), None);
        w.call("DEL", "eth0", &c).success();
    }
}

/// Two attachments in one VRF: the table is configured; the VRF stays until the last
/// leaves; a VRF of another table is refused.
#[test]
fn two_interfaces_share_the_vrf_until_the_last_leaves() {
    if skipped(
        "vrf::two_interfaces_share_the_vrf_until_the_last_leaves",
        &link_kinds::vrf(),
    ) {
        return;
    }
    let w = World::new();
    let (a, b) = (w.attach("1.0.0", "eth0", false), w.attach("1.0.0", "net1", false));
    let ca = w.conf("1.0.0", Some(&a), json!({"table": 100}));
    let cb = w.conf("1.0.0", Some(&b), json!({"table": 100}));
    w.call("ADD", "eth0", &ca).success();
    let mut other_table = cb.clone();
    other_table["table"] = json!(101);
    assert_eq!(
        w.call("ADD", "net1", &other_table).failure(999),
        "cmdAdd failed: VRF blue already exist with different routing table 100"
    );
    w.call("ADD", "net1", &cb).success();
    assert_eq!(w.master("net1").as_deref(), Some("blue"));
    w.call("CHECK", "net1", &cb).success();
    w.call("DEL", "eth0", &ca).success();
    assert!(w.ns.has_link("blue"), "net1 is still in it");
    assert_eq!(
        w.call("CHECK", "eth0", &ca).failure(999),
        "failed to find eth0 associated to vrf blue"
    );
    w.call("DEL", "net1", &cb).success();
    assert!(!w.ns.has_link("blue"));
}

/// A global IPv6 address the kernel drops on enslaving comes back, with its local route in
/// the VRF's table.
#[test]
fn ipv6_addresses_come_back_after_enslaving() {
    if skipped("vrf::ipv6_addresses_come_back_after_enslaving", &link_kinds::vrf()) {
        return;
    }
    let w = World::new();
    w.ns.ip(&["link", "set", "lo", "up"]);
    let prev = w.attach("1.0.0", "eth0", true);
    let v6 = prev["ips"]
        .as_array()
        .unwrap()
        .iter()
        .find(|ip| ip["address"].as_str().unwrap().contains(':'))
        .unwrap()["address"]
        .as_str()
        .unwrap()
        .to_string();
    // veth's ADD keeps addresses on down; without that, enslaving drops them
    w.ns.exec(&["sysctl", "-qw", "net.ipv6.conf.eth0.keep_addr_on_down=0"]);
    let c = w.conf("1.0.0", Some(&prev), json!({"table": 42}));
    w.call("ADD", "eth0", &c).success();
    let addrs = w.ns.addrs("eth0");
    assert!(addrs.contains(&v6), "{v6} not in {addrs:?}");
    let local = w.ns.ip(&["-6", "route", "show", "table", "42", "type", "local"]);
    assert!(local.contains(v6.split('/').next().unwrap()), "{local}");
    w.call("DEL", "eth0", &c).success();
}

/// This kernel's case: ADD fails naming the kind and the module, and the interface is as
/// it was (no master, its routes in the main table).
#[test]
fn without_kernel_support_add_names_the_module_and_leaves_the_interface_alone() {
    let Some(reason) = link_kinds::missing(&link_kinds::vrf()) else {
        skip(
            "vrf::without_kernel_support_add_names_the_module_and_leaves_the_interface_alone",
            "the kernel has vrf",
        );
        return;
    };
    for version in VERSIONS {
        let w = World::new();
        let prev = w.attach(version, "eth0", false);
        let before = (w.table("main"), w.ns.links());
        let c = w.conf(version, Some(&prev), json!({}));
        assert_eq!(
            w.call("ADD", "eth0", &c).failure(999),
            format!("cmdAdd failed: {reason}")
        );
        assert_eq!((w.table("main"), w.ns.links()), before, "{version}");
        assert_eq!(w.master("eth0"), None);
    }
}

/// Every answer that comes before a VRF is made is the reference's. Where v1.1.1's CHECK
/// answers success whatever it found (it drops its own error; fixed upstream), the current
/// reference's answer is stated.
#[test]
fn differential_errors_before_the_vrf_match_the_reference() {
    let w = World::new();
    let prev = w.attach("1.0.0", "eth0", false);
    let bad_ns = "/run/netns/cnibox-no-such-ns";
    let with = |extra: Value| w.conf("1.0.0", Some(&prev), extra);
    let current = |msg: &str| Some((999, msg.to_string()));
    type Stated = Option<(u64, String)>;
    let cases: Vec<(&str, &str, Value, Stated)> = vec![
        ("ADD", w.ns.path_str(), with(json!({"vrfname": ""})), None),
        ("ADD", w.ns.path_str(), w.conf("1.0.0", None, json!({})), None),
        // a link of that name that is not a VRF
        ("ADD", w.ns.path_str(), with(json!({"vrfname": "eth0"})), None),
        ("ADD", w.ns.path_str(), with(json!({"table": -1})), None),
        ("ADD", w.ns.path_str(), with(json!({"table": 4294967296u64})), None),
        ("ADD", w.ns.path_str(), with(json!({"table": "1"})), None),
        ("ADD", bad_ns, with(json!({})), None),
        ("ADD", w.ns.path_str(), w.conf("0.3.0", Some(&prev), json!({})), None),
        ("CHECK", w.ns.path_str(), w.conf("1.0.0", None, json!({})), None),
        // no VRF of that name
        ("CHECK", w.ns.path_str(), with(json!({})), current("Link not found")),
        (
            "CHECK",
            w.ns.path_str(),
            with(json!({"vrfname": "eth0"})),
            current("Netlink eth0 is not a VRF"),
        ),
        (
            "CHECK",
            bad_ns,
            with(json!({})),
            current("failed to Statfs \"/run/netns/cnibox-no-such-ns\": no such file or directory"),
        ),
        // Deliberate: DEL succeeds on a config ADD refuses (none of it can be this
        // attachment's); the reference fails it for ever
        (
            "DEL",
            w.ns.path_str(),
            with(json!({"vrfname": ""})),
            Some((0, String::new())),
        ),
    ];
    for (verb, netns, c, stated) in cases {
        let Some(theirs) = w.env.reference("vrf") else {
            return;
        };
        let theirs = theirs.exec(verb, "ctr1", netns, "eth0", &c).answer();
        let ours = w.env.call("vrf").exec(verb, "ctr1", netns, "eth0", &c).answer();
        match stated {
            Some(answer) if verb == "CHECK" => {
                assert_eq!(theirs, (0, String::new()), "v1.1.1's CHECK: {c}");
                assert_eq!(ours, answer, "{verb} {c}");
            }
            Some(answer) => {
                assert_ne!(theirs.0, 0, "{verb} {c}");
                assert_eq!(ours, answer, "{verb} {c}");
            }
            None => assert_eq!(ours, theirs, "{verb} {c}"),
        }
        assert_eq!(w.master("eth0"), None);
    }
}

/// DEL in every state it can meet without a VRF, in every version: nothing there, again,
/// no `CNI_NETNS`, the netns gone; a name that is not a VRF (the reference fails that DEL
/// for ever: `Netlink eth0 is not a VRF`), which stays.
#[test]
fn del_finds_nothing_and_succeeds_in_every_version() {
    for version in VERSIONS {
        let w = World::new();
        let prev = w.attach(version, "eth0", false);
        let c = w.conf(version, Some(&prev), json!({}));
        w.call("DEL", "eth0", &c).success();
        w.call("DEL", "eth0", &c).success();
        w.env.call("vrf").exec("DEL", "ctr1", "", "eth0", &c).success();
        let gone = w.env.container().path_str().to_string();
        w.env.call("vrf").exec("DEL", "ctr1", &gone, "eth0", &c).success();
        let mut not_a_vrf = c.clone();
        not_a_vrf["vrfname"] = json!("eth0");
        w.call("DEL", "eth0", &not_a_vrf).success();
        assert!(w.ns.has_link("eth0"));
        if let Some(theirs) = w.env.reference("vrf").filter(|_| version != &"1.1.0") {
            let out = theirs.exec("DEL", "ctr1", w.ns.path_str(), "eth0", &not_a_vrf);
            assert_eq!(out.failure(999), "Netlink eth0 is not a VRF");
        }
    }
}

/// DEL in every situation a runtime produces, in every version the plugin speaks: normal,
/// repeated, no `CNI_NETNS`, the netns gone, the interface gone (the VRF, empty, goes),
/// the VRF gone, no prevResult, a prevResult of another version. Every cell succeeds and
/// leaves no VRF.
#[test]
fn del_matrix() {
    if skipped("vrf::del_matrix", &link_kinds::vrf()) {
        return;
    }
    let cells = [
        "normal",
        "repeated",
        "no netns",
        "netns gone",
        "interface gone",
        "vrf gone",
        "no prevResult",
        "prevResult of another version",
    ];
    for version in VERSIONS {
        for cell in cells {
            let w = World::new();
            let prev = w.attach(version, "eth0", false);
            let c = w.conf(version, Some(&prev), json!({}));
            w.call("ADD", "eth0", &c).success();
            let del = |c: &Value| w.call("DEL", "eth0", c).success();
            match cell {
                "normal" => del(&c),
                "repeated" => {
                    del(&c);
                    del(&c)
                }
                "no netns" => {
                    w.env.call("vrf").exec("DEL", "ctr1", "", "eth0", &c).success();
                    // the runtime then removes the namespace, and the VRF with it
                    continue;
                }
                "netns gone" => {
                    let gone = w.env.container().path_str().to_string();
                    w.env.call("vrf").exec("DEL", "ctr1", &gone, "eth0", &c).success();
                    continue;
                }
                "interface gone" => {
                    w.ns.ip(&["link", "del", "eth0"]);
                    del(&c)
                }
                "vrf gone" => {
                    w.ns.ip(&["link", "del", "blue"]);
                    del(&c)
                }
                "no prevResult" => del(&w.conf(version, None, json!({}))),
                _ => {
                    let other = if version == &"1.0.0" { "0.4.0" } else { "1.0.0" };
                    let mut p = prev.clone();
                    p["cniVersion"] = json!(other);
                    del(&w.conf(version, Some(&p), json!({})))
                }
            };
            assert!(!w.ns.has_link("blue"), "{version} {cell}: VRF left");
        }
    }
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("vrf");
}
