//! The host-device plugin: a host link moved into the container and back, in every spec
//! version, selected by name, MAC, kernel device path, PCI address or `deviceID`; its MTU
//! and up state restored by DEL; DEL when the namespace died first (a virtual link dies
//! with it, a physical one comes back to the host); error paths; differential runs against
//! Debian's Go host-device (v1.1.1).
//!
//! The links moved are veth ends made in the test's private host namespace. The kernel
//! gives a physical link back to the *initial* namespace when its namespace dies, which no
//! test may touch; that case is reproduced by putting the link back the way the kernel
//! does (its container name, or `dev<N>` on a clash) before the namespace is deleted.
use crate::common;
use crate::plugin_state;

use common::{CallOutput, Netns, TestEnv, ALL_VERSIONS};
use plugin_state::*;
use serde_json::{json, Value};
use std::path::PathBuf;

const NET: &str = "hdnet";
const IFNAME: &str = "net1";
/// The host link a test moves: a veth end with a fixed MAC (results compare across runs);
/// its peer `hd0p` stays on the host.
const DEV: &str = "hd0";
const DEV_MAC: &str = "02:00:00:00:0d:01";

struct World {
    env: TestEnv,
    ns: Netns,
}

impl World {
    /// `hd0` up with MTU 1400 on the host.
    fn new() -> World {
        let env = TestEnv::new();
        let ns = env.container();
        add_dev(&env.host, DEV, DEV_MAC);
        env.host.ip(&["link", "set", DEV, "mtu", "1400", "up"]);
        World { env, ns }
    }

    /// Where the plugin keeps its records.
    fn state_dir(&self) -> PathBuf {
        self.env.tmp.path().join("hd-state")
    }

    fn conf(&self, version: &str, extra: Value) -> Value {
        let mut c = json!({
            "cniVersion": version,
            "name": NET,
            "type": "host-device",
            "device": DEV,
            "dataDir": self.state_dir(),
            "ipam": {"type": "host-local", "dataDir": self.env.data_dir, "ranges": [[{"subnet": "10.1.3.0/24"}]]},
        });
        merge(&mut c, &extra);
        c
    }

    fn l2_conf(&self, version: &str, extra: Value) -> Value {
        let mut c = self.conf(version, extra);
        c.as_object_mut().unwrap().remove("ipam");
        c
    }

    fn call(&self, verb: &str, c: &Value) -> CallOutput {
        self.call_in(verb, c, self.ns.path_str())
    }

    fn call_in(&self, verb: &str, c: &Value, netns: &str) -> CallOutput {
        self.env.call("host-device").exec(verb, "ctr1", netns, IFNAME, c)
    }

    /// DEL's config as a runtime sends it: with the ADD result as prevResult from 0.4.0 on.
    fn del_conf(&self, c: &Value, version: &str, result: &Value) -> Value {
        if at_least(version, "0.4.0") {
            with_prev(c, result)
        } else {
            c.clone()
        }
    }

    /// `name` is back on the host as it was: that MTU and state, no alias, nothing in the
    /// container, no record, no reservation.
    fn assert_home(&self, what: &str, name: &str, mtu: u64, up: bool) {
        let l = link_json(&self.env.host, name);
        assert_eq!(l["mtu"], json!(mtu), "{what}: {l}");
        assert_eq!(is_up(&l), up, "{what}: {l}");
        assert_eq!(l.get("ifalias"), None, "{what}: alias left: {l}");
        assert_eq!(l["address"], DEV_MAC, "{what}");
        assert!(!self.ns.has_link(IFNAME), "{what}: {IFNAME} left in the container");
        assert_eq!(records(&self.state_dir()), Vec::<String>::new(), "{what}: record left");
        assert_eq!(
            reservations(&self.env, NET),
            Vec::<String>::new(),
            "{what}: reservation left"
        );
    }
}

/// A veth pair `name`/`<name>p` on `ns`, `name` with MAC `mac`.
fn add_dev(ns: &Netns, name: &str, mac: &str) {
    ns.ip(&[
        "link",
        "add",
        name,
        "address",
        mac,
        "type",
        "veth",
        "peer",
        "name",
        &format!("{name}p"),
    ]);
}

fn records(dir: &std::path::Path) -> Vec<String> {
    common::read_dir_map(dir).into_keys().collect()
}

/// The global addresses of the container interface.
fn global_addrs(ns: &Netns) -> Vec<String> {
    ns.addrs(IFNAME)
        .into_iter()
        .filter(|a| !a.starts_with("fe80"))
        .collect()
}

#[test]
fn moves_the_link_in_and_back_in_every_version() {
    for version in ALL_VERSIONS {
        let w = World::new();
        let c = w.conf(version, json!({}));
        if at_least(version, "1.1.0") {
            w.env.call("host-device").command("STATUS").config(&c).run().success();
        }
        let r = w.call("ADD", &c).success();
        assert_eq!(r["cniVersion"], json!(version));
        if has_interfaces(version) {
            assert_eq!(
                r["interfaces"],
                json!([{"name": IFNAME, "mac": DEV_MAC, "sandbox": w.ns.path_str()}]),
                "{version}"
            );
            assert_eq!(r["ips"][0]["address"], "10.1.3.2/24", "{r}");
            assert_eq!(r["ips"][0]["interface"], json!(0), "{r}");
        } else {
            assert_eq!(r["ip4"]["ip"], "10.1.3.2/24", "{r}");
        }
        // in the container under CNI_IFNAME, up, addressed, its host name as its alias
        assert!(!w.env.host.has_link(DEV), "{version}");
        let l = link_json(&w.ns, IFNAME);
        assert_eq!(
            (l["address"].clone(), l["ifalias"].clone()),
            (json!(DEV_MAC), json!(DEV)),
            "{l}"
        );
        assert!(is_up(&l), "{l}");
        assert_eq!(global_addrs(&w.ns), ["10.1.3.2/24"], "{version}");
        assert_eq!(records(&w.state_dir()), ["ctr1_net1.json"], "{version}");
        let check = w.call("CHECK", &with_prev(&c, &r));
        if at_least(version, "0.4.0") {
            check.success();
        } else {
            assert_eq!(check.failure(1), "config version does not allow CHECK");
        }
        w.call("DEL", &w.del_conf(&c, version, &r)).success();
        w.assert_home(version, DEV, 1400, true);
        // a second DEL finds nothing to do
        w.call("DEL", &w.del_conf(&c, version, &r)).success();
        w.assert_home(&format!("{version} again"), DEV, 1400, true);
    }
}

#[test]
fn l2_moves_the_link_without_addresses() {
    for version in ALL_VERSIONS {
        let w = World::new();
        let c = w.l2_conf(version, json!({}));
        let out = w.call("ADD", &c);
        if !has_interfaces(version) {
            // deliberate: the reference leaves the link in the container here
            assert_eq!(out.failure(999), "cannot convert: no valid IP addresses", "{version}");
            w.assert_home(version, DEV, 1400, true);
            continue;
        }
        let r = out.success();
        assert_eq!(r.get("ips"), None, "{r}");
        assert_eq!(r["interfaces"][0]["name"], IFNAME);
        assert!(global_addrs(&w.ns).is_empty());
        if at_least(version, "0.4.0") {
            w.call("CHECK", &with_prev(&c, &r)).success();
        }
        w.call("DEL", &w.del_conf(&c, version, &r)).success();
        w.assert_home(version, DEV, 1400, true);
    }
}

/// The reference leaves the link down after DEL, with whatever MTU the container gave it;
/// cnibox puts back the MTU and the state it had before ADD.
#[test]
fn del_restores_the_mtu_and_the_state_the_link_had() {
    for (mtu, up) in [(1400, true), (1280, false)] {
        let w = World::new();
        w.env.host.ip(&["link", "set", DEV, "mtu", &mtu.to_string()]);
        if !up {
            w.env.host.ip(&["link", "set", DEV, "down"]);
        }
        let c = w.l2_conf("1.0.0", json!({}));
        let r = w.call("ADD", &c).success();
        // in the container it is up whatever it was (as in the reference)
        assert!(is_up(&link_json(&w.ns, IFNAME)));
        w.ns.ip(&["link", "set", IFNAME, "mtu", "1300"]);
        w.call("DEL", &with_prev(&c, &r)).success();
        w.assert_home(&format!("mtu {mtu} up {up}"), DEV, mtu, up);
    }
}

#[test]
fn the_link_is_found_by_mac_in_any_notation() {
    for hwaddr in [DEV_MAC, "02-00-00-00-0D-01", "0200.0000.0d01"] {
        let w = World::new();
        let c = w.l2_conf("1.0.0", json!({"device": "", "hwaddr": hwaddr}));
        let r = w.call("ADD", &c).success();
        assert_eq!(r["interfaces"][0]["mac"], DEV_MAC);
        assert_eq!(link_json(&w.ns, IFNAME)["ifalias"], DEV);
        w.call("DEL", &with_prev(&c, &r)).success();
        w.assert_home(hwaddr, DEV, 1400, true);
    }
}

/// `kernelpath` lists the device's `net` directory in the sysfs the plugin sees; the tests
/// mount one of the host namespace (a virtual link's is /sys/devices/virtual/net, where
/// `hd0` sorts before `hd0p` and `lo`).
#[test]
fn the_link_is_found_by_kernel_device_path() {
    let w = World::new();
    let c = w.l2_conf("1.0.0", json!({"device": "", "kernelpath": "/sys/devices/virtual"}));
    let call = |verb: &str, c: &Value| {
        w.env
            .call("host-device")
            .with_own_sysfs()
            .exec(verb, "ctr1", w.ns.path_str(), IFNAME, c)
    };
    let r = call("ADD", &c).success();
    assert_eq!(r["interfaces"][0]["mac"], DEV_MAC);
    assert_eq!(link_json(&w.ns, IFNAME)["ifalias"], DEV);
    call("DEL", &with_prev(&c, &r)).success();
    w.assert_home("kernelpath", DEV, 1400, true);
    for (path, msg) in [
        (
            "/sys/class/net",
            "failed to find host device: kernel device path \"/sys/class/net\" must be absolute and begin with /sys/devices/",
        ),
        (
            "/sys/devices/nope",
            "failed to find host device: failed to read directory /sys/devices/nope/net: \"open /sys/devices/nope/net: no such file or directory\"",
        ),
    ] {
        let c = w.l2_conf("1.0.0", json!({"device": "", "kernelpath": path}));
        assert_eq!(call("ADD", &c).failure(999), msg);
    }
    w.assert_home("kernelpath errors", DEV, 1400, true);
}

/// The first PCI device with a network device of its own or under a virtio child (this VM's
/// virtio-net), and the first one without a driver, from the machine's sysfs.
fn pci_devices() -> (Option<String>, Option<String>) {
    let mut with_net = None;
    let mut without_driver = None;
    let mut ids: Vec<String> = std::fs::read_dir("/sys/bus/pci/devices")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    for id in ids {
        let dir = std::path::Path::new("/sys/bus/pci/devices").join(&id);
        let virtio_net = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("virtio") && e.path().join("net").exists())
            })
            .unwrap_or(false);
        if with_net.is_none() && dir.join("driver").exists() && (dir.join("net").exists() || virtio_net) {
            with_net = Some(id.clone());
        }
        if without_driver.is_none() && !dir.join("driver").exists() {
            without_driver = Some(id);
        }
    }
    (with_net, without_driver)
}

/// `pciBusID` and a PCI `deviceID` against this machine's real PCI devices, with a sysfs of
/// the test's host namespace: the NIC's `net` directory lists no device there (its netdev
/// is in the initial namespace), so the lookup runs to the end and finds nothing to move.
#[test]
fn pci_addresses_are_looked_up_in_sysfs() {
    let w = World::new();
    let call = |c: &Value| {
        w.env
            .call("host-device")
            .with_own_sysfs()
            .exec("ADD", "ctr1", w.ns.path_str(), IFNAME, c)
            .failure(999)
    };
    let (with_net, without_driver) = pci_devices();
    match &with_net {
        Some(id) => {
            let dir = format!("/sys/bus/pci/devices/{id}");
            let net = if std::path::Path::new(&dir).join("net").exists() {
                format!("{dir}/net")
            } else {
                let mut v: Vec<String> = std::fs::read_dir(&dir)
                    .unwrap()
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("virtio"))
                    .collect();
                v.sort();
                format!("{dir}/{}/net", v[0])
            };
            let want = format!("failed to find host device: failed to find network device in path {net}");
            assert_eq!(call(&w.l2_conf("1.0.0", json!({"device": "", "pciBusID": id}))), want);
            // the runtime's deviceID names the same PCI device (and wins over pciBusID)
            let c = w.l2_conf(
                "1.0.0",
                json!({"device": "", "pciBusID": "0000:ff:1f.7", "runtimeConfig": {"deviceID": id}}),
            );
            assert_eq!(call(&c), want);
        }
        None => eprintln!("SKIP part: no PCI device with a network device on this machine"),
    }
    match &without_driver {
        Some(id) => {
            let msg = call(&w.l2_conf("1.0.0", json!({"device": "", "pciBusID": id})));
            assert!(msg.starts_with("error with host device: lstat /sys/devices/"), "{msg}");
            assert!(
                msg.ends_with(&format!("{id}/driver: no such file or directory")),
                "{msg}"
            );
        }
        None => eprintln!("SKIP part: every PCI device on this machine has a driver"),
    }
    assert_eq!(
        call(&w.l2_conf("1.0.0", json!({"device": "", "pciBusID": "0000:ff:1f.7"}))),
        "error with host device: lstat /sys/bus/pci/devices/0000:ff:1f.7: no such file or directory"
    );
    // v1.9: a deviceID that is neither a PCI nor an auxiliary device
    assert_eq!(
        call(&w.l2_conf("1.0.0", json!({"runtimeConfig": {"deviceID": "0000:ff:1f.7"}}))),
        "runtime config DeviceID 0000:ff:1f.7 not found or unsupported"
    );
    w.assert_home("pci", DEV, 1400, true);
}

/// `DPDKMode` (the Go field has no JSON tag): a device bound to a userspace driver has no
/// netdev to move; the result names the interface, nothing moves, DEL moves nothing.
#[test]
fn dpdk_mode_moves_nothing() {
    let w = World::new();
    let c = w.l2_conf("1.0.0", json!({"dpdkMode": true}));
    let r = w.call("ADD", &c).success();
    assert_eq!(r["interfaces"], json!([{"name": IFNAME, "sandbox": w.ns.path_str()}]));
    assert!(w.env.host.has_link(DEV));
    assert_eq!(w.ns.links(), ["lo"]);
    w.call("CHECK", &with_prev(&c, &r)).success();
    w.call("DEL", &with_prev(&c, &r)).success();
    w.assert_home("dpdk", DEV, 1400, true);
}

#[test]
fn add_error_paths_leave_nothing_behind() {
    let w = World::new();
    let err = |c: &Value| w.call("ADD", c).failure(999);
    for (extra, msg) in [
        (
            json!({"device": ""}),
            r#"specify either "device", "hwaddr", "kernelpath" or "pciBusID""#,
        ),
        (json!({"device": "nope0"}), "failed to find host device: Link not found"),
        (
            json!({"device": "", "hwaddr": "zz"}),
            "failed to find host device: failed to parse MAC address \"zz\": address zz: invalid MAC address",
        ),
        (
            json!({"device": "", "hwaddr": "02:00:00:00:0d:99"}),
            "failed to find host device: failed to find physical interface",
        ),
        (
            json!({"device": 5}),
            "failed to load netconf: json: cannot unmarshal number into Go struct field NetConf.device of type string",
        ),
        (
            json!({"DPDKMode": "yes"}),
            "failed to load netconf: json: cannot unmarshal string into Go struct field NetConf.DPDKMode of type bool",
        ),
        (
            json!({"runtimeConfig": {"deviceID": 5}}),
            "failed to load netconf: json: cannot unmarshal number into Go struct field .runtimeConfig.deviceID of type string",
        ),
    ] {
        assert_eq!(err(&w.conf("1.0.0", extra.clone())), msg, "{extra}");
    }
    w.assert_home("config errors", DEV, 1400, true);

    // CNI_IFNAME taken in the container: the link stays on the host as it was
    w.ns.ip(&["link", "add", IFNAME, "type", "veth", "peer", "name", "taken0"]);
    assert_eq!(
        err(&w.conf("1.0.0", json!({}))),
        "failed to move link failed to move \"net1\" (host: \"hd0\") to container NS: file exists"
    );
    w.ns.ip(&["link", "del", IFNAME]);
    w.assert_home("ifname taken", DEV, 1400, true);

    // a link that cannot change namespace (a bridge): refused by the kernel, put back
    w.env.host.ip(&["link", "add", "hdbr0", "type", "bridge"]);
    w.env.host.ip(&["link", "set", "hdbr0", "up"]);
    let msg = err(&w.conf("1.0.0", json!({"device": "hdbr0"})));
    assert!(
        msg.starts_with("failed to move link failed to move \"net1\" (host: \"hdbr0\") to container NS: "),
        "{msg}"
    );
    let br = link_json(&w.env.host, "hdbr0");
    assert_eq!((br.get("ifalias"), is_up(&br)), (None, true), "{br}");
    w.assert_home("bridge refused", DEV, 1400, true);

    // a failure after IPAM ADD (a route that cannot be added): the link goes back, the
    // address is released (the reference leaves the link in the container)
    let c = w.conf(
        "1.0.0",
        json!({"ipam": {"routes": [{"dst": "10.9.0.0/16", "gw": "203.0.113.1"}]}}),
    );
    let msg = err(&c);
    assert!(
        msg.starts_with("failed to add route '10.9.0.0/16 via 203.0.113.1 dev net1': "),
        "{msg}"
    );
    w.assert_home("failure after IPAM", DEV, 1400, true);

    // a missing netns
    let msg = w
        .call_in("ADD", &w.conf("1.0.0", json!({})), "/run/netns/cnibox-nope")
        .failure(999);
    assert!(
        msg.starts_with("failed to open netns \"/run/netns/cnibox-nope\""),
        "{msg}"
    );
    w.assert_home("missing netns", DEV, 1400, true);
}

#[test]
fn check_error_paths() {
    for version in ALL_VERSIONS.iter().filter(|v| at_least(v, "0.4.0")) {
        let w = World::new();
        let c = w.conf(version, json!({}));
        let r = w.call("ADD", &c).success();
        let check = |cfg: &Value| w.call("CHECK", cfg).failure(999);
        common::shared_answers::check_preamble_errors(check, &c, &r, w.ns.path_str(), IFNAME, DEV_MAC);
        w.call("CHECK", &with_prev(&c, &r)).success();
        w.ns.ip(&["link", "set", IFNAME, "name", "other0"]);
        assert_eq!(
            check(&with_prev(&c, &r)),
            "Container Interface name in prevResult: net1 not found"
        );
    }
}

/// How the kernel hands a physical link back when its namespace dies: to the host under
/// its container name, or `dev<ifindex>` when that name is taken there (here: the test's
/// host namespace plays the initial namespace).
fn give_back_as_the_kernel_does(w: &World, name: &str) {
    w.ns.ip(&["link", "set", IFNAME, "netns", &w.env.host.name, "name", name]);
    common::run_ok(std::process::Command::new("ip").args(["netns", "del", &w.ns.name]));
}

/// The container namespace dies before DEL. A virtual link (this veth end; a tap) dies with
/// it, its peer too: DEL succeeds. A physical one comes back to the host without its name:
/// DEL renames it back and restores it, found by its alias (with the record, or from the
/// config alone).
#[test]
fn del_after_the_namespace_died() {
    for version in ALL_VERSIONS {
        // virtual: destroyed with the namespace
        let w = World::new();
        let c = w.conf(version, json!({}));
        let r = w.call("ADD", &c).success();
        common::run_ok(std::process::Command::new("ip").args(["netns", "del", &w.ns.name]));
        let gone = wait_links_gone(&w.env.host, |l| l.starts_with(DEV));
        assert!(gone.is_empty(), "{version}: {gone:?}");
        for _ in 0..2 {
            w.call("DEL", &w.del_conf(&c, version, &r)).success();
        }
        assert_eq!(records(&w.state_dir()), Vec::<String>::new(), "{version}");
        assert_eq!(reservations(&w.env, NET), Vec::<String>::new(), "{version}");

        // physical: back on the host, under its container name or dev<N>; found with the
        // record, or (no record: an ADD by the reference) by the configured name or MAC
        for (back_as, keep_record, selector) in [
            (IFNAME, true, json!({})),
            ("dev7", true, json!({})),
            ("dev7", false, json!({})),
            ("dev7", false, json!({"device": "", "hwaddr": DEV_MAC})),
        ] {
            let w = World::new();
            w.env.host.ip(&["link", "set", DEV, "mtu", "1280"]);
            let c = w.conf(version, selector.clone());
            let r = w.call("ADD", &c).success();
            w.ns.ip(&["link", "set", IFNAME, "mtu", "1300"]);
            give_back_as_the_kernel_does(&w, back_as);
            if !keep_record {
                std::fs::remove_dir_all(w.state_dir()).unwrap();
            }
            let what = format!("{version} back as {back_as}, record {keep_record}, {selector}");
            for _ in 0..2 {
                w.call("DEL", &w.del_conf(&c, version, &r)).success();
                let l = link_json(&w.env.host, DEV);
                assert_eq!(l.get("ifalias"), None, "{what}: {l}");
                // the record brings back the MTU and the up state; without it the link
                // stays as the kernel returned it (down), as the reference leaves it
                let (mtu, up) = if keep_record { (1280, true) } else { (1300, false) };
                assert_eq!((l["mtu"].clone(), is_up(&l)), (json!(mtu), up), "{what}: {l}");
                assert!(!w.env.host.has_link(back_as), "{what}");
                assert_eq!(records(&w.state_dir()), Vec::<String>::new(), "{what}");
                assert_eq!(reservations(&w.env, NET), Vec::<String>::new(), "{what}");
            }
        }
    }
}

/// DEL when the link is not where ADD left it: gone from the container (deleted), or a
/// link of that name that host-device did not move in (no alias: another plugin's).
#[test]
fn del_when_the_link_is_gone_or_not_ours() {
    for version in ALL_VERSIONS {
        let w = World::new();
        let c = w.conf(version, json!({}));
        let r = w.call("ADD", &c).success();
        w.ns.ip(&["link", "del", IFNAME]);
        for _ in 0..2 {
            w.call("DEL", &w.del_conf(&c, version, &r)).success();
        }
        assert_eq!(records(&w.state_dir()), Vec::<String>::new(), "{version}");
        assert_eq!(reservations(&w.env, NET), Vec::<String>::new(), "{version}");

        let w = World::new();
        w.ns.ip(&["link", "add", IFNAME, "type", "veth", "peer", "name", "other0"]);
        w.call("DEL", &w.conf(version, json!({}))).success();
        assert!(w.ns.has_link(IFNAME), "{version}: another plugin's link was moved");
        assert!(w.env.host.has_link(DEV));
    }
}

#[test]
fn status_delegates_to_ipam() {
    let w = World::new();
    common::shared_answers::status_delegates_to_ipam(
        || w.env.call("host-device").command("STATUS"),
        &w.conf("1.1.0", json!({})),
        &w.l2_conf("1.1.0", json!({})),
    );
}

// ---- differential runs against Debian's Go host-device (v1.1.1) ----

/// What an ADD left: the result (sandbox masked), the container's links with their alias,
/// addresses and routes, the host's `hd0`.
#[derive(Debug, PartialEq)]
struct Outcome {
    result: Value,
    container: Vec<String>,
    addrs: Vec<String>,
    routes: Vec<String>,
    host_dev: Option<String>,
}

fn alias_of(ns: &Netns, name: &str) -> String {
    link_json(ns, name)["ifalias"].as_str().unwrap_or("-").to_string()
}

/// `result`: the ADD's answer (Null after DEL, whose answers differ on purpose: cnibox's DEL
/// succeeds on a config ADD refuses).
fn outcome(w: &World, result: Value) -> Outcome {
    let mut result = result;
    if result["interfaces"][0]["sandbox"] == json!(w.ns.path_str()) {
        result["interfaces"][0]["sandbox"] = json!("<netns>");
    }
    let container = links(&w.ns)
        .into_iter()
        .map(|l| {
            let name = l.split(' ').next().unwrap().to_string();
            format!("{l} alias {}", alias_of(&w.ns, &name))
        })
        .collect();
    Outcome {
        result,
        container,
        addrs: addrs(&w.ns),
        routes: routes(&w.ns),
        host_dev: w.env.host.has_link(DEV).then(|| {
            let l = link_json(&w.env.host, DEV);
            format!("mtu {} up {} alias {}", l["mtu"], is_up(&l), alias_of(&w.env.host, DEV))
        }),
    }
}

/// The same ADD (then DEL) by both, each in its own world; the outcomes after ADD and after
/// DEL. None without the reference.
fn differential(version: &str, extra: Value, l2: bool) -> Option<[(Outcome, Outcome); 2]> {
    let run = |reference: bool| -> Option<(Outcome, Outcome)> {
        let w = World::new();
        let c = if l2 {
            w.l2_conf(version, extra.clone())
        } else {
            w.conf(version, extra.clone())
        };
        let call = |verb: &str, c: &Value| -> Option<CallOutput> {
            let call = match reference {
                true => w.env.reference("host-device")?,
                false => w.env.call("host-device"),
            };
            Some(call.with_own_sysfs().exec(verb, "ctr1", w.ns.path_str(), IFNAME, c))
        };
        let out = call("ADD", &c)?;
        let answer = match out.ok() {
            true => out.json(),
            false => json!({"code": out.json()["code"], "msg": out.json()["msg"]}),
        };
        let del = match out.ok() {
            true => w.del_conf(&c, version, &answer),
            false => c.clone(),
        };
        let added = outcome(&w, answer);
        let out = call("DEL", &del)?;
        if !reference {
            assert!(out.ok(), "{version} {extra}: DEL {out:?}");
        }
        Some((added, outcome(&w, Value::Null)))
    };
    let theirs = run(true)?;
    let ours = run(false)?;
    Some([(ours.0, theirs.0), (ours.1, theirs.1)])
}

/// The reference v1.1.1 leaves the link down after DEL with its alias set; cnibox
/// restores the state (up) and removes the alias, as v1.9 removes it.
fn deliberate_del_differences(theirs: &mut Outcome) {
    if let Some(h) = &mut theirs.host_dev {
        assert_eq!(h, "mtu 1400 up false alias hd0");
        *h = "mtu 1400 up true alias -".into();
    }
}

#[test]
fn differential_add_and_del_match_the_reference() {
    for version in reference_versions() {
        for l2 in [false, true] {
            let Some([(ours_add, theirs_add), (ours_del, mut theirs_del)]) = differential(version, json!({}), l2)
            else {
                eprintln!("skipped: reference plugins not installed");
                return;
            };
            if l2 && !has_interfaces(version) {
                // Deliberate: a result the version cannot express fails before the link
                // is kept; the reference leaves it in the container.
                assert_eq!(
                    theirs_add.container,
                    ["net1 veth mtu 1400 up qlen 1000 alias hd0"],
                    "{version}"
                );
                assert_eq!(ours_add.container, Vec::<String>::new(), "{version}");
                assert_eq!(ours_add.host_dev.as_deref(), Some("mtu 1400 up true alias -"));
                assert_eq!(ours_add.result, theirs_add.result, "{version}");
                continue;
            }
            assert_eq!(ours_add, theirs_add, "{version} l2 {l2}");
            deliberate_del_differences(&mut theirs_del);
            assert_eq!(ours_del, theirs_del, "{version} l2 {l2}");
        }
    }
}

#[test]
fn differential_selectors_and_errors_match_the_reference() {
    let (_, without_driver) = pci_devices();
    let mut cases = vec![
        json!({"device": "", "hwaddr": DEV_MAC}),
        json!({"device": "", "hwaddr": "02-00-00-00-0D-01"}),
        json!({"device": "", "kernelpath": "/sys/devices/virtual"}),
        json!({"device": ""}),
        json!({"device": "nope0"}),
        json!({"device": "", "hwaddr": "zz"}),
        json!({"device": "", "hwaddr": "02:00:00:00:0d:99"}),
        json!({"device": "", "kernelpath": "/sys/class/net"}),
        json!({"device": "", "pciBusID": "0000:ff:1f.7"}),
        json!({"device": 5}),
        json!({"DPDKMode": 5}),
        json!({"runtimeConfig": {"deviceID": 5}}),
        json!({"runtimeConfig": 5}),
    ];
    if let Some(id) = without_driver {
        cases.push(json!({"device": "", "pciBusID": id}));
    }
    for extra in cases {
        let Some([(ours, theirs), (ours_del, mut theirs_del)]) = differential("1.0.0", extra.clone(), true) else {
            eprintln!("skipped: reference plugins not installed");
            return;
        };
        assert_eq!(ours, theirs, "{extra}");
        if ours.result.get("code").is_none() {
            deliberate_del_differences(&mut theirs_del);
        }
        assert_eq!(ours_del, theirs_del, "{extra}");
    }
}

/// Deliberate differences from v1.1.1, each v1.9's behaviour: a `kernelpath` whose `net`
/// directory is missing (v1.1.1: `failed to find network devices at …`), a `deviceID` sysfs
/// does not know (v1.1.1 takes it for a PCI address: `lstat …`), DPDK mode's result (v1.9
/// names the interface), and a second DEL (v1.1.1 fails once the link is gone).
#[test]
fn differential_where_v1_9_differs_from_v1_1_1() {
    let w = World::new();
    if w.env.reference("host-device").is_none() {
        return;
    }
    let theirs = |verb: &str, c: &Value| {
        w.env
            .reference("host-device")
            .unwrap()
            .exec(verb, "ctr1", w.ns.path_str(), IFNAME, c)
    };
    let c = w.l2_conf("1.0.0", json!({"device": "", "kernelpath": "/sys/devices/nope"}));
    assert_eq!(
        theirs("ADD", &c).failure(999),
        "failed to find host device: failed to find network devices at \"/sys/devices/nope/net\""
    );
    let c = w.l2_conf("1.0.0", json!({"runtimeConfig": {"deviceID": "0000:ff:1f.7"}}));
    assert_eq!(
        theirs("ADD", &c).failure(999),
        "error with host device: lstat /sys/bus/pci/devices/0000:ff:1f.7: no such file or directory"
    );
    let c = w.l2_conf("1.0.0", json!({"DPDKMode": true}));
    assert_eq!(theirs("ADD", &c).success(), json!({"cniVersion": "1.0.0", "dns": {}}));
    let c = w.l2_conf("1.0.0", json!({}));
    let del = with_prev(&c, &theirs("ADD", &c).success());
    theirs("DEL", &del).success();
    assert_eq!(
        theirs("DEL", &del).failure(999),
        "failed to find \"net1\": Link not found"
    );
    w.call("DEL", &del).success();
}

/// DEL in every situation a runtime produces, in every spec version: the shared matrix
/// (`reliability::del_matrix`).
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    del_matrix::run(Subject {
        applet: "host-device",
        keys: json!({"device": del_matrix::HOST_LINK}),
        attachment: Attachment::HostLink,
    });
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("host-device");
}
