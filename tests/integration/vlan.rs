//! The vlan plugin: ADD/CHECK/DEL in every spec version, VLAN ID and MTU, the master in
//! the host or the container namespace, DEL in every state, and the answers of the Go vlan
//! compared with cnibox's.
//!
//! This kernel has no 8021q: the tests that need a VLAN say so (`SKIP …: vlan: the kernel
//! has no vlan support (modprobe 8021q)`) and return; they run on a kernel with the
//! module. What happens before a link is made runs here.
use crate::common;
use crate::plugin_state;

use crate::stacked_support::World;
use common::link_kinds::{self, skip, skipped};
use common::ALL_VERSIONS;
use plugin_state::*;
use serde_json::{json, Value};

const IFNAME: &str = "net1";
/// The reference's answer when this kernel refuses the link.
const REFUSED: &str = "failed to create vlan: operation not supported";

fn world() -> World {
    World::new("vlan", "vlannet", IFNAME, json!({"vlanId": 100}))
}

#[test]
fn add_check_del_in_every_version() {
    if skipped("vlan::add_check_del_in_every_version", &link_kinds::vlan()) {
        return;
    }
    for version in ALL_VERSIONS {
        let w = world();
        w.add_check_del(version, &w.conf(version, json!({})), |_| {
            let info = w.linkinfo();
            assert_eq!(info["info_kind"], "vlan", "{version}");
            assert_eq!(info["info_data"]["id"], json!(100), "{version}");
            assert_eq!(info["info_data"]["protocol"], "802.1Q", "{version}");
        });
    }
}

/// CHECK compares the VLAN ID and a configured MTU with the link's.
#[test]
fn check_compares_the_vlan_id_and_the_mtu() {
    if skipped("vlan::check_compares_the_vlan_id_and_the_mtu", &link_kinds::vlan()) {
        return;
    }
    let w = world();
    let c = w.conf("1.0.0", json!({"vlanId": 4094, "mtu": 1400}));
    let r = w.call("ADD", &c).success();
    assert_eq!(w.linkinfo()["info_data"]["id"], json!(4094));
    assert_eq!(w.ns.ip_json(&["link", "show", IFNAME])[0]["mtu"], json!(1400));
    let checked = with_prev(&c, &r);
    w.call("CHECK", &checked).success();
    let mut other_id = checked.clone();
    other_id["vlanId"] = json!(7);
    assert_eq!(
        w.call("CHECK", &other_id).failure(999),
        format!("vlan: Container interface {IFNAME} has VLAN ID 4094, configured 7")
    );
    let mut other_mtu = checked.clone();
    other_mtu["mtu"] = json!(1300);
    assert_eq!(
        w.call("CHECK", &other_mtu).failure(999),
        format!("vlan: Container interface {IFNAME} has MTU 1400, configured 1300")
    );
    w.call("DEL", &checked).success();
    w.assert_clean("mtu");
}

/// `linkInContainer`: the master is a link of the container namespace.
#[test]
fn a_master_in_the_container() {
    if skipped("vlan::a_master_in_the_container", &link_kinds::vlan()) {
        return;
    }
    world().on_a_master_in_the_container();
}

/// This kernel's case: ADD fails with the kind and the module named, the reference's code,
/// and nothing left (no link, no address reserved) in every version.
#[test]
fn without_kernel_support_add_names_the_module_and_leaves_nothing() {
    let Some(reason) = link_kinds::missing(&link_kinds::vlan()) else {
        skip(
            "vlan::without_kernel_support_add_names_the_module_and_leaves_nothing",
            "the kernel has vlan",
        );
        return;
    };
    World::refused_in_every_version("vlan", json!({"vlanId": 100}), &reason, Some(REFUSED));
}

/// Every answer that comes before a link is made is the reference's.
#[test]
fn differential_errors_before_the_link_match_the_reference() {
    let w = world();
    let bad_ns = "/run/netns/cnibox-no-such-ns";
    let cases: Vec<(&str, &str, Value)> = vec![
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"vlanId": -1}))),
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"vlanId": 4095}))),
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"vlanId": "5"}))),
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"master": "nope"}))),
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"mtu": 1501}))),
        ("ADD", w.ns.path_str(), w.conf("1.0.0", json!({"mtu": -1}))),
        ("ADD", bad_ns, w.conf("1.0.0", json!({}))),
        ("CHECK", bad_ns, w.conf("1.0.0", json!({}))),
        // host-local finds no address of this container
        ("CHECK", w.ns.path_str(), w.conf("1.0.0", json!({}))),
    ];
    w.same_answers_as_the_reference(&cases);
    // v1.9's wording (v1.1.1 ends the sentence with a period)
    let mut no_master = w.conf("1.0.0", json!({}));
    no_master["master"] = json!("");
    assert_eq!(
        w.call("ADD", &no_master).failure(999),
        "\"master\" field is required. It specifies the host interface name to create the VLAN for"
    );
}

/// Without IPAM, ADD fails before it makes a link (the reference makes the VLAN, then
/// fails delegating to an empty IPAM type and leaves it).
#[test]
fn no_ipam_fails_before_the_link() {
    let w = world();
    let mut c = w.conf("1.0.0", json!({}));
    c.as_object_mut().unwrap().remove("ipam");
    assert_eq!(
        w.call("ADD", &c).failure(999),
        "failed to execute IPAM delegate: no plugin name provided"
    );
    w.assert_clean("no ipam");
}

/// DEL in every state it can find without a link, in every version; the master gone too
/// (the reference fails that DEL for ever: `Link not found`).
#[test]
fn del_finds_nothing_and_succeeds_in_every_version() {
    for version in ALL_VERSIONS {
        let w = world();
        let c = w.conf(version, json!({}));
        w.del_states(&c);
        if let Some(theirs) = w.reference("DEL", &c).filter(|_| !at_least(version, "1.1.0")) {
            assert_eq!(theirs.failure(999), "Link not found");
        }
    }
}

/// ADD compared with the Go vlan: result, link, addresses, routes.
#[test]
fn differential_add_matches_the_reference() {
    if skipped("vlan::differential_add_matches_the_reference", &link_kinds::vlan()) {
        return;
    }
    for version in reference_versions() {
        let Some(theirs) = world().outcome(version, true, json!({"mtu": 1400})) else {
            return;
        };
        assert_eq!(
            world().outcome(version, false, json!({"mtu": 1400})).unwrap(),
            theirs,
            "{version}"
        );
    }
}

/// DEL in every situation a runtime produces, in every spec version: the shared matrix
/// (`reliability::del_matrix`), on a kernel with 8021q.
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    if skipped("vlan::del_matrix", &link_kinds::vlan()) {
        return;
    }
    del_matrix::run(Subject {
        applet: "vlan",
        keys: json!({"master": del_matrix::MASTER, "vlanId": 100}),
        attachment: Attachment::InterfaceOnMaster,
    });
}

/// The keys every config shares, mistyped, answered as the reference answers them (where
/// the reference gets as far as the link on a kernel without 8021q, cnibox names the
/// module); this runs before any link is made.
#[test]
fn common_keys() {
    let missing = link_kinds::missing(&link_kinds::vlan());
    crate::common_keys::same_as_the_reference_or_missing_kind("vlan", REFUSED, missing.as_deref());
}
