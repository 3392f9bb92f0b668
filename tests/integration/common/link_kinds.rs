//! Link kinds a kernel may be built without (this one has no dummy, ipvlan, vlan or vrf).
//! A test that needs one starts with [`skipped`]: where the kernel lacks the kind, the test
//! prints that it did not run and why, and returns; on a kernel with the kind it runs.
use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

use cnibox::netlink::{IpvlanData, LinkKind, VlanData, VrfData};
use cnibox::plugin_kit::kernel_support;

use super::Netns;

/// The kinds probed so far: the reason a test of each cannot run, None where it can.
static PROBED: Mutex<Option<HashMap<String, Option<String>>>> = Mutex::new(None);

pub fn dummy() -> LinkKind {
    LinkKind::Dummy
}

pub fn ipvlan() -> LinkKind {
    LinkKind::Ipvlan(IpvlanData::default())
}

pub fn vlan() -> LinkKind {
    LinkKind::Vlan(VlanData::default())
}

pub fn vrf() -> LinkKind {
    LinkKind::Vrf(VrfData::default())
}

/// Why a link of `kind` cannot be made here: the message cnibox's applet fails with
/// (`ipvlan: the kernel has no ipvlan support (modprobe ipvlan)`); None when the kernel
/// has the kind. `ip link add` tries one in a namespace of its own, once per process.
pub fn missing(kind: &LinkKind) -> Option<String> {
    let mut probed = PROBED.lock().unwrap_or_else(|e| e.into_inner());
    let probed = probed.get_or_insert_with(HashMap::new);
    probed
        .entry(kind.name().to_string())
        .or_insert_with(|| probe(kind).then(|| kernel_support::message(kind)))
        .clone()
}

/// True when the kernel refuses `kind` as unknown.
fn probe(kind: &LinkKind) -> bool {
    let ns = Netns::new("kp");
    ns.ip(&["link", "add", "kp0", "type", "veth", "peer", "name", "kp1"]);
    let args: &[&str] = match kind {
        LinkKind::Dummy => &["link", "add", "kp2", "type", "dummy"],
        LinkKind::Ipvlan(_) => &["link", "add", "link", "kp0", "name", "kp2", "type", "ipvlan"],
        LinkKind::Vlan(_) => &["link", "add", "link", "kp0", "name", "kp2", "type", "vlan", "id", "2"],
        LinkKind::Vrf(_) => &["link", "add", "kp2", "type", "vrf", "table", "100"],
        other => panic!("no probe for {other:?}"),
    };
    let out = ns.ip_raw(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || stderr.contains("Unknown device type"),
        "probing {}: {stderr}",
        kind.name()
    );
    !out.status.success()
}

/// Prints that `test` did not run and why, on the process's stderr itself: the harness
/// captures what `eprintln!` writes and shows it only for failures, and a skipped test
/// passes, so this line is what tells it from one that ran.
pub fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
}

/// [`missing`], and [`skip`] with its reason: true when `test` must return at once.
pub fn skipped(test: &str, kind: &LinkKind) -> bool {
    match missing(kind) {
        Some(reason) => {
            skip(test, &reason);
            true
        }
        None => false,
    }
}
