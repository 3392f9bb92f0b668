//! The dummy plugin: ADD/CHECK/DEL in every spec version, DEL in every state, its
//! required IPAM. Debian ships no dummy, so the reference's answers (v1.9) are stated here.
//!
//! This kernel has no dummy links: the tests that need one say so (`SKIP …: dummy: the
//! kernel has no dummy support (modprobe dummy)`) and return; they run on a kernel with
//! the module. What happens before a link is made runs here.
use crate::common;
use crate::plugin_state;
use crate::stacked_support::World;

use common::link_kinds::{self, skip, skipped};
use common::ALL_VERSIONS;
use plugin_state::*;
use serde_json::json;

const IFNAME: &str = "net1";

fn world() -> World {
    World::new("dummy", "dumnet", IFNAME, json!({}))
}

#[test]
fn add_check_del_in_every_version() {
    if skipped("dummy::add_check_del_in_every_version", &link_kinds::dummy()) {
        return;
    }
    for version in ALL_VERSIONS {
        let w = world();
        let c = w.conf(version, json!({"ipam": {"routes": [{"dst": "10.9.0.0/16"}]}}));
        w.add_check_del(version, &c, |_| {
            assert_eq!(w.linkinfo()["info_kind"], "dummy", "{version}");
            let routes = routes(&w.ns);
            assert!(routes.iter().any(|r| r.starts_with("10.9.0.0/16")), "{routes:?}");
        });
    }
}

/// CHECK wants the dummy up, as ADD left it.
#[test]
fn check_fails_on_a_dummy_that_is_down() {
    if skipped("dummy::check_fails_on_a_dummy_that_is_down", &link_kinds::dummy()) {
        return;
    }
    let w = world();
    let c = w.conf("1.0.0", json!({}));
    let r = w.call("ADD", &c).success();
    w.ns.ip(&["link", "set", IFNAME, "down"]);
    assert_eq!(
        w.call("CHECK", &with_prev(&c, &r)).failure(999),
        format!("Interface {IFNAME} is down")
    );
    w.call("DEL", &with_prev(&c, &r)).success();
    w.assert_clean("down");
}

/// This kernel's case: ADD fails with the kind and the module named, the reference's code,
/// and nothing left (no link, no address reserved) in every version.
#[test]
fn without_kernel_support_add_names_the_module_and_leaves_nothing() {
    let Some(reason) = link_kinds::missing(&link_kinds::dummy()) else {
        skip(
            "dummy::without_kernel_support_add_names_the_module_and_leaves_nothing",
            "the kernel has dummy",
        );
        return;
    };
    World::refused_in_every_version("dummy", json!({}), &reason, None);
}

/// ADD and CHECK need IPAM: the reference's words, before anything is made.
#[test]
fn ipam_is_required() {
    let w = world();
    for ipam in [None, Some(json!({})), Some(json!({"type": ""}))] {
        let mut c = w.conf("1.0.0", json!({}));
        match &ipam {
            None => drop(c.as_object_mut().unwrap().remove("ipam")),
            Some(i) => c["ipam"] = i.clone(),
        }
        for verb in ["ADD", "CHECK"] {
            assert_eq!(
                w.call(verb, &c).failure(999),
                "dummy interface requires an IPAM configuration",
                "{verb} {ipam:?}"
            );
        }
        // DEL has nothing to release then (the reference fails it: `no plugin name provided`)
        w.call("DEL", &c).success();
    }
    w.assert_clean("no ipam");
}

/// DEL in every state it can find without a link, in every version.
#[test]
fn del_finds_nothing_and_succeeds_in_every_version() {
    for version in ALL_VERSIONS {
        let w = world();
        w.del_states(&w.conf(version, json!({})));
    }
}

#[test]
fn status_asks_ipam() {
    let w = world();
    let c = w.conf("1.1.0", json!({}));
    w.env.call("dummy").command("STATUS").config(&c).run().success();
}

/// DEL in every situation a runtime produces, in every spec version: the shared matrix
/// (`reliability::del_matrix`), on a kernel with dummy links.
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    if skipped("dummy::del_matrix", &link_kinds::dummy()) {
        return;
    }
    del_matrix::run(Subject {
        applet: "dummy",
        keys: json!({}),
        attachment: Attachment::Interface,
    });
}

/// The keys every config shares, mistyped: the reference v1.9 decodes its config as a
/// `types.NetConf` ("failed to parse network config: …"); `runtimeConfig` and `args` are
/// not in it, so those ADDs go on to make the dummy (succeeding, or on a kernel without
/// dummy links failing as cnibox says). Debian ships no dummy to ask, so here are its answers.
#[test]
fn common_keys() {
    let decoding = |what: &str| {
        (
            999,
            format!("failed to parse network config: json: cannot unmarshal {what}"),
        )
    };
    let made = match link_kinds::missing(&link_kinds::dummy()) {
        Some(reason) => (999, reason),
        None => (0, String::new()),
    };
    crate::common_keys::answers("dummy", &|_| {}, |key, value| match key {
        "capabilities" => decoding("string into Go struct field NetConf.capabilities of type bool"),
        "ipam" if value.is_number() => decoding("number into Go struct field NetConf.ipam of type types.IPAM"),
        "ipam" => decoding("number into Go struct field IPAM.ipam.type of type string"),
        "dns" if value.is_number() => decoding("number into Go struct field NetConf.dns of type types.DNS"),
        "dns" => decoding("string into Go struct field DNS.dns.nameservers of type []string"),
        "prevResult" => decoding("number into Go struct field NetConf.prevResult of type map[string]interface {}"),
        "runtimeConfig" | "args" => made.clone(),
        other => panic!("no stated answer for {other}"),
    });
}
