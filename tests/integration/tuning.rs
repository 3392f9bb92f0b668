//! The tuning plugin: the reference tuning_test.go inventory (prevResult pass-through;
//! promisc, mtu, MAC from the config, `args.cni`, `CNI_ARGS` and `runtimeConfig`, all of them
//! with a custom dataDir; allmulti from the config and args; ADD then CHECK then DEL
//! restoring), for every spec version, each case run through cnibox and the Go tuning side
//! by side (results, link attributes, the saved file, sysctls), plus txQLen, sysctl rules,
//! error messages, the DEL matrix and rollback of a failed ADD.
//!
//! Every call uses a dataDir inside the test's temp dir; nothing touches /run/cni/tuning.
use crate::common;
use crate::plugin_state;

use common::{Call, CallOutput, Netns, TestEnv, ALL_VERSIONS};
use plugin_state::at_least;
use serde_json::{json, Value};
use std::path::PathBuf;

const IFNAME: &str = "eth0";
const MAC0: &str = "02:00:00:00:00:01";

/// A host namespace, a container with `eth0` (a veth with a fixed MAC, so both
/// implementations see the same original values), and a dataDir.
struct World {
    env: TestEnv,
    ns: Netns,
    data_dir: PathBuf,
}

impl World {
    fn new() -> World {
        let env = TestEnv::new();
        let ns = env.container();
        env.host.ip(&[
            "link", "add", "vhost0", "type", "veth", "peer", "name", IFNAME, "netns", &ns.name,
        ]);
        ns.ip(&["link", "set", IFNAME, "address", MAC0]);
        ns.ip(&["link", "set", IFNAME, "up"]);
        let data_dir = env.tmp.path().join("tuning");
        World { env, ns, data_dir }
    }

    fn conf(&self, version: &str, extra: &Value) -> Value {
        let mut c = json!({"cniVersion": version, "name": "tuning-test", "type": "tuning",
                           "dataDir": self.data_dir, "prevResult": prev_result(version, self.ns.path_str())});
        plugin_state::merge(&mut c, extra);
        c
    }

    fn call(&self, reference: bool) -> Option<Call> {
        if reference {
            self.env.reference("tuning")
        } else {
            Some(self.env.call("tuning"))
        }
    }

    fn run(&self, reference: bool, verb: &str, c: &Value, cni_args: &str) -> Option<CallOutput> {
        Some(
            self.call(reference)?
                .env("CNI_ARGS", cni_args)
                .exec(verb, "dummy", self.ns.path_str(), IFNAME, c),
        )
    }

    /// `mac mtu promisc allmulti qlen` of eth0.
    fn link_state(&self) -> String {
        let l = &self.ns.ip_json(&["-d", "link", "show", "dev", IFNAME])[0];
        let flags: Vec<&str> = l["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        format!(
            "mac {} mtu {} promisc {} allmulti {} qlen {}",
            l["address"].as_str().unwrap(),
            l["mtu"],
            l["promiscuity"].as_u64().unwrap_or(0) > 0 || flags.contains(&"PROMISC"),
            l["allmulti"].as_u64().unwrap_or(0) > 0 || flags.contains(&"ALLMULTI"),
            l["txqlen"]
        )
    }

    fn saved(&self) -> Option<String> {
        std::fs::read_to_string(self.data_dir.join(format!("dummy_{IFNAME}.json"))).ok()
    }

    fn reset(&self) {
        self.ns.ip(&[
            "link",
            "set",
            IFNAME,
            "address",
            MAC0,
            "mtu",
            "1500",
            "promisc",
            "off",
            "allmulticast",
            "off",
            "txqueuelen",
            "1000",
        ]);
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

fn prev_result(version: &str, netns: &str) -> Value {
    if at_least(version, "0.3.0") {
        let mut p = json!({"cniVersion": version,
                           "interfaces": [{"name": IFNAME, "sandbox": netns}],
                           "ips": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1", "interface": 0}]});
        if !at_least(version, "1.0.0") {
            p["ips"][0]["version"] = json!("4");
        }
        p
    } else {
        json!({"cniVersion": version, "ip4": {"ip": "10.0.0.2/24", "gateway": "10.0.0.1"}})
    }
}

/// What one implementation did with one case.
#[derive(Debug, PartialEq)]
struct Trace {
    add: Value,
    after_add: String,
    saved: Option<String>,
    check: Option<i32>,
    after_del: String,
    saved_after_del: Option<String>,
}

fn trace(w: &World, reference: bool, version: &str, extra: &Value, cni_args: &str) -> Option<Trace> {
    w.reset();
    let c = w.conf(version, extra);
    let add = w.run(reference, "ADD", &c, cni_args)?;
    let after_add = w.link_state();
    let saved = w.saved();
    let check = at_least(version, "0.4.0").then(|| {
        let mut cc = c.clone();
        if add.ok() {
            cc["prevResult"] = add.json();
        }
        w.run(reference, "CHECK", &cc, cni_args).unwrap().code
    });
    let add = add.json();
    w.run(reference, "DEL", &c, cni_args).unwrap().success();
    Some(Trace {
        add,
        after_add,
        saved,
        check,
        after_del: w.link_state(),
        saved_after_del: w.saved(),
    })
}

/// The cases of tuning_test.go (plus txQLen, which v1.1.1 does not know).
fn cases() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "passes prevResult through unchanged",
            json!({"sysctl": {"net.ipv4.conf.all.log_martians": "1"}}),
            "",
        ),
        ("promiscuous mode", json!({"promisc": true}), ""),
        (
            "promiscuous mode from args",
            json!({"args": {"cni": {"promisc": true}}}),
            "",
        ),
        ("mtu", json!({"mtu": 1454}), ""),
        ("mtu from args", json!({"args": {"cni": {"mtu": 1454}}}), ""),
        ("mac from the config", json!({"mac": "c2:11:22:33:44:55"}), ""),
        (
            "mac from args",
            json!({"args": {"cni": {"mac": "c2:11:22:33:44:66"}}}),
            "",
        ),
        (
            "mac from CNI_ARGS",
            json!({"mac": "c2:11:22:33:44:55"}),
            "IgnoreUnknown=true;MAC=c2:11:22:33:44:77",
        ),
        (
            "mac from runtimeConfig",
            json!({"mac": "c2:11:22:33:44:55", "runtimeConfig": {"mac": "c2:11:22:33:44:88"}}),
            "MAC=c2:11:22:33:44:77",
        ),
        (
            "mac, promisc and mtu with custom dataDir",
            json!({"mac": "c2:11:22:33:44:99", "promisc": true, "mtu": 1400}),
            "",
        ),
        ("all-multicast mode", json!({"allmulti": true}), ""),
        (
            "all-multicast mode from args",
            json!({"args": {"cni": {"allmulti": true}}}),
            "",
        ),
        (
            "sysctl on IFNAME",
            json!({"sysctl": {"net.ipv4.conf.IFNAME.arp_notify": "1"}}),
            "",
        ),
    ]
}

/// Every reference case, every version v1.1.1 speaks: cnibox does what the Go tuning does
/// (result, link attributes after ADD, saved file, CHECK, restore on DEL).
#[test]
fn reference_inventory_side_by_side_every_version() {
    let w = World::new();
    for v in plugin_state::reference_versions() {
        for (name, extra, cni_args) in cases() {
            let ours = trace(&w, false, v, &extra, cni_args).unwrap();
            assert_eq!(
                ours.after_del,
                format!("mac {MAC0} mtu 1500 promisc false allmulti false qlen 1000"),
                "{v} {name}"
            );
            assert_eq!(ours.saved_after_del, None, "{v} {name}");
            if let Some(check) = ours.check {
                assert_eq!(check, 0, "{v} {name}: CHECK after ADD");
            }
            // with IFNAME the reference CHECK reads the literal path (fixed after v1.1.1)
            let Some(mut theirs) = trace(&w, true, v, &extra, cni_args) else {
                continue;
            };
            if name == "sysctl on IFNAME" {
                theirs.check = ours.check;
            }
            assert_eq!(ours, theirs, "{v} {name}");
        }
    }
}

/// 1.1.0 (which v1.1.1 does not speak) behaves as 1.0.0 does.
#[test]
fn every_case_in_1_1_0() {
    let w = World::new();
    for (name, extra, cni_args) in cases() {
        let ours = trace(&w, false, "1.1.0", &extra, cni_args).unwrap();
        let mut as_1_0 = trace(&w, false, "1.0.0", &extra, cni_args).unwrap();
        as_1_0.add["cniVersion"] = json!("1.1.0");
        assert_eq!(ours, as_1_0, "{name}");
    }
}

#[test]
fn result_reports_the_new_mac_every_version() {
    let w = World::new();
    for v in ALL_VERSIONS {
        w.reset();
        let r = w
            .run(false, "ADD", &w.conf(v, &json!({"mac": "c2:11:22:33:44:55"})), "")
            .unwrap()
            .success();
        assert_eq!(r["cniVersion"], *v);
        if at_least(v, "0.3.0") {
            assert_eq!(r["interfaces"][0]["mac"], "c2:11:22:33:44:55", "{v}");
        } else {
            assert_eq!(r["ip4"]["ip"], "10.0.0.2/24", "{v}");
        }
        assert!(w.link_state().starts_with("mac c2:11:22:33:44:55"), "{v}");
        w.run(false, "DEL", &w.conf(v, &json!({})), "").unwrap().success();
        assert!(w.link_state().starts_with(&format!("mac {MAC0}")), "{v}");
    }
}

/// txQLen (the current reference's key; v1.1.1 ignores it): set, saved, checked, restored.
#[test]
fn txqlen_is_set_checked_and_restored() {
    let w = World::new();
    w.reset();
    let c = w.conf("1.0.0", &json!({"txQLen": 333}));
    w.run(false, "ADD", &c, "").unwrap().success();
    assert!(w.link_state().ends_with("qlen 333"), "{}", w.link_state());
    assert_eq!(w.saved().unwrap(), "{\n \"txQLen\": 1000\n}");
    w.run(false, "CHECK", &c, "").unwrap().success();
    let other = w.conf("1.0.0", &json!({"txQLen": 334}));
    assert_eq!(
        w.run(false, "CHECK", &other, "").unwrap().failure(999),
        "Error: Tuning configured Transmit Queue Length of eth0 is 334, current value is 333"
    );
    w.run(false, "DEL", &c, "").unwrap().success();
    assert!(w.link_state().ends_with("qlen 1000"));
    assert_eq!(w.saved(), None);
}

/// CHECK finds each kind of drift, with the reference's message.
#[test]
fn check_reports_drift() {
    let w = World::new();
    let cases: Vec<(Value, &str, Value, String)> = vec![
        (
            json!({"mtu": 1400}),
            "mtu",
            json!(1450),
            "Error: Tuning configured MTU of eth0 is 1400, current value is 1450".into(),
        ),
        (
            json!({"mac": "c2:11:22:33:44:55"}),
            "address",
            json!("c2:11:22:33:44:56"),
            "Error: Tuning configured Ethernet of eth0 is c2:11:22:33:44:55, current value is c2:11:22:33:44:56".into(),
        ),
        (
            json!({"promisc": true}),
            "promisc",
            json!("off"),
            "Error: Tuning link eth0 configured promisc is true, current value is 0".into(),
        ),
        (
            json!({}),
            "promisc",
            json!("on"),
            "Error: Tuning link eth0 configured promisc is false, current value is 1".into(),
        ),
        (
            json!({"allmulti": true}),
            "allmulticast",
            json!("off"),
            "Error: Tuning configured all-multicast mode of eth0 is true, current value is false".into(),
        ),
        (
            json!({"sysctl": {"net.ipv4.conf.eth0.arp_notify": "1"}}),
            "",
            json!(null),
            "Error: Tuning configured value of /proc/sys/net/ipv4/conf/eth0/arp_notify is 1, current value is 0".into(),
        ),
    ];
    for (extra, ip_key, value, msg) in cases {
        w.reset();
        let c = w.conf("1.0.0", &extra);
        w.run(false, "ADD", &c, "").unwrap().success();
        match value {
            Value::Null => w.ns.exec(&["sysctl", "-q", "-w", "net.ipv4.conf.eth0.arp_notify=0"]),
            v => w.ns.ip(&[
                "link",
                "set",
                IFNAME,
                ip_key,
                &v.as_str().map(str::to_string).unwrap_or(v.to_string()),
            ]),
        };
        let ours = w.run(false, "CHECK", &c, "").unwrap().failure(999);
        assert_eq!(ours, msg);
        if let Some(theirs) = w.run(true, "CHECK", &c, "") {
            if !msg.contains("all-multicast") {
                // the reference prints a pointer for allmulti
                assert_eq!(theirs.failure(999), msg);
            }
        }
        w.run(false, "DEL", &c, "").unwrap().success();
    }
    let gone = w.conf("1.0.0", &json!({}));
    w.ns.ip(&["link", "set", IFNAME, "down"]);
    w.ns.ip(&["link", "set", IFNAME, "name", "eth9"]);
    assert_eq!(
        w.run(false, "CHECK", &gone, "").unwrap().failure(999),
        "Cannot find container link eth0"
    );
}

/// Bad configs and inputs: the reference's messages, and nothing changed or saved.
#[test]
fn errors_like_the_reference_and_nothing_left() {
    let w = World::new();
    let cases: Vec<(Value, &str, String)> = vec![
        (json!({"sysctl": {"kernel.hostname": "x"}}), "", "invalid net sysctl key: \"kernel.hostname\"".into()),
        (json!({"sysctl": {"net.ipv4.nonexist": "x"}}), "", "open /proc/sys/net/ipv4/nonexist: no such file or directory".into()),
        (json!({"sysctl": {"net.ipv4.ip_forward": "x"}}), "", "write /proc/sys/net/ipv4/ip_forward: invalid argument".into()),
        (json!({"sysctl": {"net.ipv4.ip_forward": 1}}), "",
         "failed to load netconf: json: cannot unmarshal number into Go struct field TuningConf.sysctl of type string".into()),
        (json!({"mtu": "x"}), "", "failed to load netconf: json: cannot unmarshal string into Go struct field TuningConf.mtu of type int".into()),
        (json!({"mac": "zz"}), "", "invalid args zz for MAC addr: address zz: invalid MAC address".into()),
        (json!({"mtu": 99999, "promisc": true}), "", "invalid argument".into()),
        (json!({"prevResult": null}), "", "Required prevResult missing".into()),
        (json!({}), "K8S_POD_NAME=x", "ARGS: unknown args [\"K8S_POD_NAME=x\"]".into()),
    ];
    for (extra, cni_args, msg) in cases {
        w.reset();
        let before = (w.link_state(), w.ns.sysctl("net/ipv4/ip_forward"));
        let mut c = w.conf("1.0.0", &extra);
        if extra.get("prevResult").is_some() {
            c.as_object_mut().unwrap().remove("prevResult");
        }
        let ours = w.run(false, "ADD", &c, cni_args).unwrap();
        assert_eq!(ours.failure(999), msg, "{extra}");
        assert_eq!(
            (w.link_state(), w.ns.sysctl("net/ipv4/ip_forward")),
            before,
            "{extra}: left changed"
        );
        assert_eq!(w.saved(), None, "{extra}: left a saved file");
        if let Some(theirs) = w.run(true, "ADD", &c, cni_args) {
            assert_eq!(theirs.failure(999), msg, "{extra} (reference)");
        }
    }
    let missing = w.env.call("tuning").exec(
        "ADD",
        "dummy",
        "/run/netns/cnibox-missing",
        IFNAME,
        &w.conf("1.0.0", &json!({})),
    );
    assert_eq!(
        missing.failure(999),
        "failed to Statfs \"/run/netns/cnibox-missing\": no such file or directory"
    );
}

/// A failed ADD after changes puts back the sysctls and link attributes it changed.
#[test]
fn failed_add_rolls_back() {
    let w = World::new();
    w.reset();
    let before = (w.link_state(), w.ns.sysctl("net/ipv4/conf/eth0/arp_notify"));
    let c = w.conf(
        "1.0.0",
        &json!({"sysctl": {"net.ipv4.conf.eth0.arp_notify": "1"},
                                     "mac": "c2:11:22:33:44:55", "promisc": true, "mtu": 70000}),
    );
    w.run(false, "ADD", &c, "").unwrap().failure(999);
    assert_eq!((w.link_state(), w.ns.sysctl("net/ipv4/conf/eth0/arp_notify")), before);
    assert_eq!(w.saved(), None);
}

/// The saved file is the reference's, in the reference's place: DEL of either
/// implementation restores what the other's ADD saved.
#[test]
fn saved_state_is_interchangeable_with_the_reference() {
    let w = World::new();
    let extra = json!({"mac": "c2:11:22:33:44:55", "promisc": true, "mtu": 1400, "allmulti": true});
    for (add_ref, del_ref) in [(false, true), (true, false)] {
        w.reset();
        let c = w.conf("1.0.0", &extra);
        let Some(add) = w.run(add_ref, "ADD", &c, "") else {
            return;
        };
        add.success();
        assert_eq!(
            w.saved().unwrap(),
            format!("{{\n \"mac\": \"{MAC0}\",\n \"promisc\": false,\n \"mtu\": 1500,\n \"allmulti\": false\n}}")
        );
        w.run(del_ref, "DEL", &c, "").unwrap().success();
        assert_eq!(
            w.link_state(),
            format!("mac {MAC0} mtu 1500 promisc false allmulti false qlen 1000")
        );
        assert_eq!(w.saved(), None);
    }
}

/// The DEL matrix: twice, netns gone, no CNI_NETNS, interface gone, no saved state, no
/// prevResult; every version. DEL never fails and a saved file never outlives what it is for.
#[test]
fn del_matrix() {
    let w = World::new();
    let extra = json!({"mtu": 1400});
    for v in ALL_VERSIONS {
        w.reset();
        let c = w.conf(v, &extra);
        w.run(false, "ADD", &c, "").unwrap().success();
        let mut no_prev = c.clone();
        no_prev.as_object_mut().unwrap().remove("prevResult");
        w.run(false, "DEL", &no_prev, "").unwrap().success();
        assert_eq!(w.saved(), None, "{v}");
        w.run(false, "DEL", &c, "").unwrap().success();
        // no CNI_NETNS: nothing reachable to restore; the saved values are kept for later
        w.run(false, "ADD", &c, "").unwrap().success();
        let out = w
            .env
            .call("tuning")
            .command("DEL")
            .env("CNI_CONTAINERID", "dummy")
            .env("CNI_IFNAME", IFNAME)
            .config(&c)
            .run();
        out.success();
        assert!(w.saved().is_some(), "{v}");
        // the interface is gone: nothing to restore, the file goes
        w.ns.ip(&["link", "set", IFNAME, "name", "eth9"]);
        w.run(false, "DEL", &c, "").unwrap().success();
        assert_eq!(w.saved(), None, "{v}");
        w.ns.ip(&["link", "set", "eth9", "name", IFNAME]);
        // the namespace is gone: nothing to restore, the file goes
        w.run(false, "ADD", &c, "").unwrap().success();
        let gone = w.env.container().path_str().to_string();
        w.env.call("tuning").exec("DEL", "dummy", &gone, IFNAME, &c).success();
        assert_eq!(w.saved(), None, "{v}");
    }
}

/// DEL reads the config (its errors are the reference's), but nothing else can fail it.
#[test]
/// A config ADD refuses does not stop DEL (the reference's DEL fails on it, for ever):
/// the refusal goes to stderr and the saved values are put back from the default dataDir.
fn del_config_errors() {
    let w = World::new();
    let c = w.conf("1.0.0", &json!({"mtu": "x"}));
    let out = w.run(false, "DEL", &c, "").unwrap();
    out.success();
    assert!(
        out.stderr.contains(
            "failed to load netconf: json: cannot unmarshal string into Go struct field TuningConf.mtu of type int"
        ),
        "{out:?}"
    );
    std::fs::create_dir_all(&w.data_dir).unwrap();
    std::fs::write(w.data_dir.join("dummy_eth0.json"), "not json").unwrap();
    w.run(false, "DEL", &w.conf("1.0.0", &json!({})), "").unwrap().success();
    assert_eq!(w.saved(), None);
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("tuning");
}

// ---- the sysctl allowlist (/etc/cni/tuning/allowlist.conf, as the reference since v1.2.0) --

/// An /etc for one call: the machine's, with `cni/tuning/allowlist.conf` holding `content`
/// (no file when `None`) laid over it in a private mount namespace of that call.
fn etc_with_allowlist(w: &World, content: Option<&str>) -> common::PrivateMount {
    let etc = w.env.tmp.path().join(format!("etc-{}", common::unique("")));
    std::fs::create_dir_all(etc.join("cni/tuning")).unwrap();
    if let Some(text) = content {
        std::fs::write(etc.join("cni/tuning/allowlist.conf"), text).unwrap();
    }
    common::PrivateMount::overlay(&etc, "/etc")
}

/// What one ADD under an allowlist did.
struct Added {
    out: CallOutput,
    /// The sysctls and link attributes before and after it.
    before: String,
    after: String,
}

/// ADD with that allowlist.
fn add_under(w: &World, etc: common::PrivateMount, version: &str, extra: &Value) -> Added {
    w.reset();
    let state = || format!("{} {}", w.sysctls(), w.link_state());
    let before = state();
    let out = w
        .env
        .call("tuning")
        .mount(etc)
        .exec("ADD", "dummy", w.ns.path_str(), IFNAME, &w.conf(version, extra));
    Added {
        out,
        before,
        after: state(),
    }
}

impl World {
    /// The sysctls the allowlist tests set.
    fn sysctls(&self) -> String {
        [
            "net/ipv4/conf/eth0/arp_filter",
            "net/ipv4/ip_forward",
            "net/core/somaxconn",
        ]
        .map(|k| format!("{k}={}", self.ns.sysctl(k)))
        .join(" ")
    }
}

const ALLOWLIST: &str = "^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]*$\n^net\\.ipv4\\.ip_forward$\n";

#[test]
fn an_allowed_sysctl_is_set() {
    let w = World::new();
    for version in ALL_VERSIONS {
        let sysctl = json!({"sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1", "net.ipv4.ip_forward": "1"}});
        let added = add_under(&w, etc_with_allowlist(&w, Some(ALLOWLIST)), version, &sysctl);
        added.out.success();
        assert!(
            added.after.contains("arp_filter=1") && added.after.contains("ip_forward=1"),
            "{version}: {}",
            added.after
        );
        // no allowlist file at all: no restriction, as in the reference
        let somaxconn = json!({"sysctl": {"net.core.somaxconn": "77"}});
        let added = add_under(&w, etc_with_allowlist(&w, None), version, &somaxconn);
        added.out.success();
        assert!(added.after.contains("somaxconn=77"), "{version}: {}", added.after);
    }
}

/// Regression: cnibox set any sysctl it was given, allowlist or not.
#[test]
fn a_sysctl_the_allowlist_does_not_name_is_refused_before_anything_changes() {
    let w = World::new();
    for version in ALL_VERSIONS {
        // one allowed, one not, and link attributes: none of them may change
        let extra = json!({"sysctl": {"net.ipv4.ip_forward": "1", "net.core.somaxconn": "77"},
                           "mtu": 1400, "promisc": true});
        let added = add_under(&w, etc_with_allowlist(&w, Some(ALLOWLIST)), version, &extra);
        assert_eq!(
            added.out.failure(999),
            "Sysctl net.core.somaxconn is not allowed. Only the following sysctls are allowed: \
             [^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]*$ ^net\\.ipv4\\.ip_forward$]",
            "{version}"
        );
        assert_eq!(added.after, added.before, "{version}: something changed");
        assert_eq!(w.saved(), None, "{version}: left a saved file");
    }
}

#[test]
fn an_empty_allowlist_allows_no_sysctl() {
    let w = World::new();
    for content in ["", "\n  \n"] {
        let sysctl = json!({"sysctl": {"net.ipv4.ip_forward": "1"}});
        let added = add_under(&w, etc_with_allowlist(&w, Some(content)), "1.1.0", &sysctl);
        assert_eq!(
            added.out.failure(999),
            "Sysctl net.ipv4.ip_forward is not allowed. Only the following sysctls are allowed: []"
        );
        assert_eq!(added.after, added.before);
        // a config without sysctls asks for nothing the allowlist could refuse
        let mtu = json!({"mtu": 1400});
        add_under(&w, etc_with_allowlist(&w, Some(content)), "1.1.0", &mtu)
            .out
            .success();
    }
}

#[test]
fn a_malformed_allowlist_expression_is_an_error_naming_it() {
    let w = World::new();
    let sysctl = json!({"sysctl": {"net.ipv4.ip_forward": "1"}});
    let added = add_under(&w, etc_with_allowlist(&w, Some("^net\\.(ipv4\n")), "1.0.0", &sysctl);
    assert_eq!(
        added.out.failure(999),
        "error parsing regexp: missing closing ): `^net\\.(ipv4`"
    );
    assert_eq!(added.after, added.before);
    // valid Go, but outside what cnibox matches: refused, never taken as allowing
    let added = add_under(&w, etc_with_allowlist(&w, Some("(?i)IP_FORWARD\n")), "1.0.0", &sysctl);
    assert_eq!(
        added.out.failure(999),
        "unsupported regexp syntax: flags and named groups `(?` (cnibox matches a subset of Go's regexp syntax)"
    );
    assert_eq!(added.after, added.before);
    // Go compiles the lines in order, each when it gets to it: a malformed line after the
    // one that allows the sysctl is never read
    let added = add_under(
        &w,
        etc_with_allowlist(&w, Some("ip_forward$\n[z-a]\n")),
        "1.0.0",
        &sysctl,
    );
    added.out.success();
    assert!(added.after.contains("ip_forward=1"), "{}", added.after);
}
