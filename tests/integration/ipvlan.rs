//! The ipvlan plugin: ADD/CHECK/DEL in every spec version and mode, the master in the host
//! or the container namespace, chained without IPAM, DEL in every state, and the answers
//! of the Go ipvlan compared with cnibox's.
//!
//! This kernel has no ipvlan: the tests that need a link say so (`SKIP …: ipvlan: the
//! kernel has no ipvlan support (modprobe ipvlan)`) and return; they run on a kernel with
//! the module. What happens before a link is made (config and master errors, every DEL
//! that finds nothing, the kernel's refusal itself) runs here.
use crate::common;
use crate::plugin_state;
use crate::stacked_support::World;

use common::link_kinds::{self, skip, skipped};
use common::ALL_VERSIONS;
use plugin_state::*;
use serde_json::{json, Value};

const IFNAME: &str = "net1";
/// The reference's answer when this kernel refuses the link.
const REFUSED: &str = "failed to create ipvlan: operation not supported";

fn world() -> World {
    World::new("ipvlan", "ipvnet", IFNAME, json!({}))
}

#[test]
fn add_check_del_in_every_version() {
    if skipped("ipvlan::add_check_del_in_every_version", &link_kinds::ipvlan()) {
        return;
    }
    for version in ALL_VERSIONS {
        let w = world();
        w.add_check_del(version, &w.conf(version, json!({})), |_| {
            let info = w.linkinfo();
            assert_eq!(info["info_kind"], "ipvlan", "{version}");
            assert_eq!(info["info_data"]["mode"], "l2", "{version}");
            assert_eq!(w.ns.sysctl(&format!("net/ipv4/conf/{IFNAME}/arp_notify")), "1");
            assert_eq!(w.ns.sysctl(&format!("net/ipv6/conf/{IFNAME}/ndisc_notify")), "1");
        });
    }
}

#[test]
fn every_mode_is_created_and_checked() {
    if skipped("ipvlan::every_mode_is_created_and_checked", &link_kinds::ipvlan()) {
        return;
    }
    for (mode, shown) in [("", "l2"), ("l2", "l2"), ("l3", "l3"), ("l3s", "l3s")] {
        let w = world();
        let c = w.conf("1.0.0", json!({ "mode": mode }));
        let r = w.call("ADD", &c).success();
        assert_eq!(w.linkinfo()["info_data"]["mode"], shown, "{mode:?}");
        w.call("CHECK", &with_prev(&c, &r)).success();
        let other = if shown == "l3" { "l2" } else { "l3" };
        let mut wrong = with_prev(&c, &r);
        wrong["mode"] = json!(other);
        assert_eq!(
            w.call("CHECK", &wrong).failure(999),
            format!("Container IPVlan mode {shown} does not match expected value: {other}")
        );
        w.call("DEL", &with_prev(&c, &r)).success();
        w.assert_clean(mode);
    }
}

/// `linkInContainer`: the master is a link of the container namespace.
#[test]
fn a_master_in_the_container() {
    if skipped("ipvlan::a_master_in_the_container", &link_kinds::ipvlan()) {
        return;
    }
    let w = world();
    let c = w.on_a_master_in_the_container();
    // a master of that name on the host is not the one
    let mut host = c.clone();
    host["linkInContainer"] = json!(false);
    assert_eq!(
        w.call("ADD", &host).failure(999),
        "failed to lookup master \"eth1\": Link not found"
    );
}

/// Chained without IPAM or master: the previous result's one interface is the master and
/// its addresses are the ipvlan's.
#[test]
fn chained_it_takes_the_previous_results_master_and_addresses() {
    if skipped(
        "ipvlan::chained_it_takes_the_previous_results_master_and_addresses",
        &link_kinds::ipvlan(),
    ) {
        return;
    }
    let w = world();
    w.container_master("eth1");
    let prev = json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth1", "sandbox": w.ns.path_str()}],
                      "ips": [{"address": "10.1.3.5/24", "interface": 0}]});
    let mut c = w.conf("1.0.0", json!({"linkInContainer": true, "prevResult": prev}));
    c.as_object_mut().unwrap().remove("master");
    c.as_object_mut().unwrap().remove("ipam");
    let r = w.call("ADD", &c).success();
    assert_eq!(r["interfaces"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["interfaces"][0]["name"], IFNAME);
    assert_eq!(r["ips"][0]["address"], "10.1.3.5/24");
    assert!(addrs(&w.ns).contains(&format!("{IFNAME} 10.1.3.5/24 scope global")));
    w.call("DEL", &c).success();
    assert!(!w.ns.has_link(IFNAME));
}

/// This kernel's case: ADD fails with the kind and the module named, the reference's code,
/// and nothing left (no link, no address reserved) in every version.
#[test]
fn without_kernel_support_add_names_the_module_and_leaves_nothing() {
    let Some(reason) = link_kinds::missing(&link_kinds::ipvlan()) else {
        skip(
            "ipvlan::without_kernel_support_add_names_the_module_and_leaves_nothing",
            "the kernel has ipvlan",
        );
        return;
    };
    World::refused_in_every_version("ipvlan", json!({}), &reason, Some(REFUSED));
}

/// Every answer that comes before a link is made is the reference's.
#[test]
fn differential_errors_before_the_link_match_the_reference() {
    let w = world();
    let bad_ns = "/run/netns/cnibox-no-such-ns";
    let other = w.env.container();
    let prev = json!({"cniVersion": "1.0.0", "interfaces": [{"name": IFNAME, "sandbox": w.ns.path_str()}]});
    let prev_elsewhere = json!({"cniVersion": "1.0.0", "interfaces": [{"name": IFNAME, "sandbox": other.path_str()}]});
    let no_ipam = |c: Value| {
        let mut c = c;
        c.as_object_mut().unwrap().remove("ipam");
        c
    };
    let cases: Vec<(&str, &str, Value)> = vec![
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"mode": "l4"}))),
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"master": "nope"}))),
        // no master, no default route on the host
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"master": ""}))),
        (
            "ADD",
            w.ns.path_str(),
            w.conf("1.0.0", json!({"master": "", "prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "a"}, {"name": "b"}]}})),
        ),
        ("ADD", bad_ns, w.conf("1.0.0", json!({}))),
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"mtu": "x"}))),
        ("CHECK", w.ns.path_str(), no_ipam(w.conf("1.0.0", json!({})))),
        ("CHECK", w.ns.path_str(), no_ipam(w.conf("1.0.0", json!({"prevResult": prev_elsewhere})))),
        ("CHECK", w.ns.path_str(), no_ipam(w.conf("1.0.0", json!({"master": "nope", "prevResult": prev.clone()})))),
        // the container has no net1
        ("CHECK", w.ns.path_str(), no_ipam(w.conf("1.0.0", json!({"prevResult": prev})))),
    ];
    w.same_answers_as_the_reference(&cases);
}

/// CHECK without `master` (ADD took the default route's interface or a chained result's)
/// goes on to the container interface; the reference looks the empty name up and fails.
#[test]
fn check_without_master_goes_on_to_the_link() {
    let w = world();
    let prev = json!({"cniVersion": "1.0.0", "interfaces": [{"name": IFNAME, "sandbox": w.ns.path_str()}]});
    let mut c = w.conf("1.0.0", json!({"master": "", "prevResult": prev}));
    c.as_object_mut().unwrap().remove("ipam");
    assert_eq!(
        w.call("CHECK", &c).failure(999),
        format!("Container Interface name in prevResult: {IFNAME} not found")
    );
    if let Some(theirs) = w.reference("CHECK", &c) {
        assert_eq!(theirs.failure(999), "failed to lookup master \"\": Link not found");
    }
}

/// Without IPAM and nothing to chain, ADD fails before it makes a link (the reference
/// makes the ipvlan, then fails delegating to an empty IPAM type and leaves it).
#[test]
fn no_ipam_and_nothing_chained_fails_before_the_link() {
    let w = world();
    let mut c = w.conf("1.0.0", json!({}));
    c.as_object_mut().unwrap().remove("ipam");
    assert_eq!(w.call("ADD", &c).failure(999), "no plugin name provided");
    w.assert_clean("no ipam");
}

/// DEL in every state it can find without a link: nothing there, no netns, the netns
/// gone, the master gone, no master and no default route (the reference fails that DEL:
/// `no default route interface found`). The address ADD's IPAM reserved is released.
#[test]
fn del_finds_nothing_and_succeeds_in_every_version() {
    for version in ALL_VERSIONS {
        let w = world();
        let c = w.conf(version, json!({}));
        w.del_states(&c);
        let mut no_master = c.clone();
        no_master["master"] = json!("");
        w.call("DEL", &no_master).success();
        if let Some(theirs) = w.reference("DEL", &no_master).filter(|_| !at_least(version, "1.1.0")) {
            assert_eq!(theirs.failure(999), "no default route interface found");
        }
    }
}

#[test]
fn status_asks_ipam_and_is_ready_without() {
    let w = world();
    let c = w.conf("1.1.0", json!({}));
    w.env.call("ipvlan").command("STATUS").config(&c).run().success();
    let mut no_ipam = c.clone();
    no_ipam.as_object_mut().unwrap().remove("ipam");
    w.env.call("ipvlan").command("STATUS").config(&no_ipam).run().success();
}

/// ADD, CHECK and DEL compared with the Go ipvlan: result, link, addresses, routes.
#[test]
fn differential_add_matches_the_reference() {
    if skipped("ipvlan::differential_add_matches_the_reference", &link_kinds::ipvlan()) {
        return;
    }
    for version in reference_versions() {
        let extra = json!({"mode": "l3", "mtu": 1400});
        let Some(theirs) = world().outcome(version, true, extra.clone()) else {
            return;
        };
        assert_eq!(world().outcome(version, false, extra).unwrap(), theirs, "{version}");
    }
}

/// DEL in every situation a runtime produces, in every spec version: the shared matrix
/// (`reliability::del_matrix`), on a kernel with ipvlan.
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    if skipped("ipvlan::del_matrix", &link_kinds::ipvlan()) {
        return;
    }
    del_matrix::run(Subject {
        applet: "ipvlan",
        keys: json!({"master": del_matrix::MASTER}),
        attachment: Attachment::InterfaceOnMaster,
    });
}

/// The keys every config shares, mistyped, answered as the reference answers them (where
/// the reference gets as far as the link on a kernel without ipvlan, cnibox names the
/// module); this runs before any link is made.
#[test]
fn common_keys() {
    let missing = link_kinds::missing(&link_kinds::ipvlan());
    crate::common_keys::same_as_the_reference_or_missing_kind("ipvlan", REFUSED, missing.as_deref());
}
