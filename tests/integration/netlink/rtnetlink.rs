//! The netlink layer against the real kernel. Each test runs on its own thread, unshares a
//! private network namespace for that thread (its "host"), and creates container namespaces
//! with the harness; `ip -j` checks what the kernel really holds.
use crate::common;

use std::net::IpAddr;
use std::process::Command;

use cnibox::netlink::{
    AddrOptions, BridgeSpec, ErrorKind, Family, Handle, Heard, Ipv4Conf, Ipv6Conf, Link, LinkEvents, LinkKind, MacAddr,
    MacvlanMode, MacvlanSpec, OperState, PortFlags, PortVlan, RouteSpec, Scope, SourceRule, VethSpec, TABLE_MAIN,
};
use cnibox::netns::Netns;
use ipnetwork::IpNetwork;
use serde_json::Value;

/// A macvlan's mode as the kernel reports it.
fn macvlan_mode(l: &Link) -> Option<MacvlanMode> {
    match &l.kind {
        Some(LinkKind::Macvlan(data)) => data.mode,
        _ => None,
    }
}

/// Moves this test's thread into a fresh network namespace and returns a handle for it.
fn private_host() -> Handle {
    common::require_root();
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
    let h = Handle::current().unwrap();
    h.set_up("lo").unwrap();
    h
}

/// `ip -j ARGS` in this thread's namespace (a child inherits the forking thread's netns).
fn ip_json(args: &[&str]) -> Value {
    let out = common::run_ok(Command::new("ip").arg("-j").args(args));
    if out.trim().is_empty() {
        return Value::Array(vec![]);
    }
    serde_json::from_str(&out).unwrap()
}

fn link_json(dev: &str) -> Value {
    ip_json(&["-d", "link", "show", "dev", dev])[0].clone()
}

fn container(c: &common::Netns) -> (Netns, Handle) {
    let ns = Netns::open(&c.path).unwrap();
    let h = Handle::open(&ns).unwrap();
    (ns, h)
}

fn mac(s: &str) -> MacAddr {
    s.parse().unwrap()
}

fn net(s: &str) -> IpNetwork {
    s.parse().unwrap()
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

// ---------------------------------------------------------------- veth

#[test]
fn veth_peer_is_born_in_the_container_with_name_mtu_and_macs() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, ch) = container(&c);
    let host = h
        .create_veth(&VethSpec {
            name: "vethab12cd34",
            peer_name: "eth0",
            peer_netns: Some(&cns),
            mtu: Some(1400),
            mac: Some(mac("0a:00:00:00:00:01")),
            peer_mac: Some(mac("0a:00:00:00:00:02")),

            ..Default::default()
        })
        .unwrap();
    assert_eq!(host.name, "vethab12cd34");
    assert_eq!(host.kind_name(), Some("veth"));
    assert_eq!(host.mtu, 1400);
    assert_eq!(host.mac, Some(mac("0a:00:00:00:00:01")));
    assert!(host.link_netnsid.is_some(), "peer lives in another namespace: {host:?}");

    let peer = ch.link_by_name("eth0").unwrap().expect("peer in the container");
    assert_eq!(host.peer_index, Some(peer.index));
    assert_eq!(peer.peer_index, Some(host.index));
    assert_eq!(peer.mtu, 1400);
    assert_eq!(peer.mac, Some(mac("0a:00:00:00:00:02")));
    // what the kernel holds, seen by iproute2
    assert_eq!(
        c.ip_json(&["link", "show", "dev", "eth0"])[0]["address"],
        "0a:00:00:00:00:02"
    );
    assert_eq!(c.ip_json(&["link", "show", "dev", "eth0"])[0]["mtu"], 1400);
    assert_eq!(link_json("vethab12cd34")["address"], "0a:00:00:00:00:01");
    assert!(!c.has_link("vethab12cd34"));
    assert!(!Command::new("ip")
        .args(["link", "show", "dev", "eth0"])
        .output()
        .unwrap()
        .status
        .success());
}

/// A host veth whose peer comes up is announced with oper state up: the notification
/// (subscribed before) answers without asking for the link, and carries the link as
/// RTM_GETLINK would show it.
#[test]
fn link_events_hear_a_port_come_up_and_say_nothing_otherwise() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, ch) = container(&c);
    h.create_bridge(&BridgeSpec {
        name: "br0",
        ..Default::default()
    })
    .unwrap();
    h.set_up("br0").unwrap();
    let br = h.link("br0").unwrap();
    let host = h
        .create_veth(&VethSpec {
            name: "vethev000001",
            peer_name: "eth0",
            peer_netns: Some(&cns),
            master: Some(br.index),
            ..Default::default()
        })
        .unwrap();
    h.set_up(host.index).unwrap();
    let events = LinkEvents::subscribe().unwrap();
    let up = |l: &Link| l.oper_state == OperState::Up;
    // the peer is down: no carrier, so nothing to hear
    let t = std::time::Instant::now();
    assert!(matches!(
        events.wait_for(host.index, std::time::Duration::from_millis(150), up),
        Heard::Nothing
    ));
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(150),
        "waited the time given"
    );
    ch.set_up("eth0").unwrap();
    match events.wait_for(host.index, std::time::Duration::from_secs(5), up) {
        Heard::Link(l) => {
            assert_eq!(l.name, "vethev000001");
            assert_eq!(l.master, Some(br.index));
            assert_eq!(l.mac, h.link(host.index).unwrap().mac);
            assert_eq!(link_json("vethev000001")["operstate"], "UP");
        }
        Heard::Nothing => panic!("no notification of the port coming up"),
    }
    // a deleted link ends the wait at once (the caller then asks, and learns it is gone)
    let other = LinkEvents::subscribe().unwrap();
    h.delete_link(host.index).unwrap();
    let t = std::time::Instant::now();
    assert!(matches!(
        other.wait_for(host.index, std::time::Duration::from_secs(5), up),
        Heard::Nothing
    ));
    assert!(t.elapsed() < std::time::Duration::from_secs(2), "{:?}", t.elapsed());
}

#[test]
fn veth_host_end_is_enslaved_at_creation() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, _ch) = container(&c);
    let br = h
        .create_bridge(&BridgeSpec {
            name: "cni0",
            ..Default::default()
        })
        .unwrap();
    let host = h
        .create_veth(&VethSpec {
            name: "veth0",
            peer_name: "eth0",
            peer_netns: Some(&cns),
            master: Some(br.index),

            ..Default::default()
        })
        .unwrap();
    assert_eq!(host.master, Some(br.index));
    assert_eq!(host.slave_kind.as_deref(), Some("bridge"));
    assert_eq!(link_json("veth0")["master"], "cni0");
}

#[test]
fn fifteen_byte_names_work_on_both_ends() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, ch) = container(&c);
    let (name, peer) = ("abcdefghijklmno", "ponmlkjihgfedcb");
    assert_eq!(name.len(), 15);
    let host = h
        .create_veth(&VethSpec {
            name,
            peer_name: peer,
            peer_netns: Some(&cns),

            ..Default::default()
        })
        .unwrap();
    assert_eq!(host.name, name);
    assert_eq!(ch.link(peer).unwrap().name, peer);
    assert!(c.has_link(peer));
    // and a 16-byte name is refused by the kernel, not truncated
    let e = h
        .create_bridge(&BridgeSpec {
            name: "abcdefghijklmnop",
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Kernel, "{e}");
}

#[test]
fn veth_in_the_same_namespace_when_no_peer_netns() {
    let h = private_host();
    let host = h
        .create_veth(&VethSpec {
            name: "va",
            peer_name: "vb",
            mtu: Some(9000),

            ..Default::default()
        })
        .unwrap();
    let peer = h.link("vb").unwrap();
    assert_eq!(host.peer_index, Some(peer.index));
    assert_eq!(host.link_netnsid, None);
    assert_eq!(peer.mtu, 9000);
}

#[test]
fn veth_whose_container_name_is_taken_names_the_peer() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, _ch) = container(&c);
    c.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "other"]);
    let e = h
        .create_veth(&VethSpec {
            name: "vethab12cd34",
            peer_name: "eth0",
            peer_netns: Some(&cns),

            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Exists);
    assert_eq!(e.to_string(), "create veth peer eth0: File exists");
    assert!(
        h.link_by_name("vethab12cd34").unwrap().is_none(),
        "nothing left behind on the host"
    );
}

#[test]
fn creating_an_existing_name_is_exists_and_names_op_and_object() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, _ch) = container(&c);
    let spec = VethSpec {
        name: "vethab12cd34",
        peer_name: "eth0",
        peer_netns: Some(&cns),

        ..Default::default()
    };
    h.create_veth(&spec).unwrap();
    let e = h
        .create_veth(&VethSpec {
            peer_name: "eth1",
            ..spec
        })
        .unwrap_err();
    assert!(e.is_exists());
    assert_eq!(e.errno(), Some(libc::EEXIST));
    assert_eq!(e.to_string(), "create veth vethab12cd34: File exists");

    h.create_bridge(&BridgeSpec {
        name: "br0",
        ..Default::default()
    })
    .unwrap();
    let e = h
        .create_bridge(&BridgeSpec {
            name: "br0",
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.to_string(), "create bridge br0: File exists");
}

// ---------------------------------------------------------------- lookups and changes

#[test]
fn lookups_by_name_and_index_and_missing_links() {
    let h = private_host();
    let lo = h.link_by_name("lo").unwrap().unwrap();
    assert_eq!(lo.index, 1);
    assert_eq!(h.link_by_index(1).unwrap().unwrap().name, "lo");
    assert!(h.link_by_name("nosuchlink").unwrap().is_none());
    assert!(h.link_by_index(4242).unwrap().is_none());
    let e = h.link("nosuchlink").unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.to_string(), "get nosuchlink: not found");
    assert_eq!(h.link(4242).unwrap_err().to_string(), "get link index 4242: not found");
}

#[test]
fn dump_lists_every_link() {
    let h = private_host();
    h.create_bridge(&BridgeSpec {
        name: "br0",
        ..Default::default()
    })
    .unwrap();
    h.create_veth(&VethSpec {
        name: "va",
        peer_name: "vb",

        ..Default::default()
    })
    .unwrap();
    let mut names: Vec<String> = h.links().unwrap().into_iter().map(|l| l.name).collect();
    names.sort();
    assert_eq!(names, ["br0", "lo", "va", "vb"]);
    let from_ip: Vec<String> = ip_json(&["link", "show"])
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["ifname"].as_str().unwrap().into())
        .collect();
    assert_eq!(from_ip.len(), 4);
}

#[test]
fn up_down_mtu_mac_promisc_and_name() {
    let h = private_host();
    let br = h
        .create_bridge(&BridgeSpec {
            name: "br0",
            mtu: Some(1450),
            mac: Some(mac("0a:58:0a:00:00:01")),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(br.mtu, 1450);
    assert_eq!(br.mac, Some(mac("0a:58:0a:00:00:01")));
    assert!(!br.up);

    h.set_up("br0").unwrap();
    let l = h.link(br.index).unwrap();
    assert!(l.up);
    assert!(link_json("br0")["flags"].as_array().unwrap().contains(&"UP".into()));

    h.set_mtu(br.index, 1300).unwrap();
    h.set_mac("br0", mac("0a:58:0a:00:00:02")).unwrap();
    h.set_promisc("br0", true).unwrap();
    let l = h.link("br0").unwrap();
    assert_eq!((l.mtu, l.mac, l.promisc), (1300, Some(mac("0a:58:0a:00:00:02")), true));
    assert_eq!(link_json("br0")["mtu"], 1300);
    assert!(link_json("br0")["flags"]
        .as_array()
        .unwrap()
        .contains(&"PROMISC".into()));
    h.set_promisc("br0", false).unwrap();
    assert!(!h.link("br0").unwrap().promisc);

    h.set_down(br.index).unwrap();
    h.set_name(br.index, "br1").unwrap();
    let l = h.link("br1").unwrap();
    assert_eq!(l.index, br.index);
    assert!(!l.up);
    assert_eq!(l.oper_state, OperState::Down);
    assert!(h.link_by_name("br0").unwrap().is_none());
}

#[test]
fn set_master_and_release() {
    let h = private_host();
    let br = h
        .create_bridge(&BridgeSpec {
            name: "br0",
            ..Default::default()
        })
        .unwrap();
    h.create_veth(&VethSpec {
        name: "va",
        peer_name: "vb",

        ..Default::default()
    })
    .unwrap();
    h.set_master("va", Some(br.index)).unwrap();
    assert_eq!(h.link("va").unwrap().master, Some(br.index));
    assert_eq!(link_json("va")["master"], "br0");
    h.set_master("va", None).unwrap();
    assert_eq!(h.link("va").unwrap().master, None);
    let e = h.set_master("nosuch", Some(br.index)).unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

#[test]
fn move_to_namespace_and_delete() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, ch) = container(&c);
    h.create_veth(&VethSpec {
        name: "va",
        peer_name: "vb",

        ..Default::default()
    })
    .unwrap();
    h.set_netns("vb", &cns).unwrap();
    assert!(h.link_by_name("vb").unwrap().is_none());
    assert!(ch.link_by_name("vb").unwrap().is_some());
    assert!(c.has_link("vb"));

    h.delete_link("va").unwrap();
    assert!(h.link_by_name("va").unwrap().is_none());
    assert!(!c.has_link("vb"), "deleting one veth end removes the peer too");
}

/// host-device's move: into the container under another name in one request, its alias
/// read back, cleared, and back out under the first name.
#[test]
fn move_and_rename_and_alias() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, ch) = container(&c);
    h.create_veth(&VethSpec {
        name: "hd0",
        peer_name: "hd0p",
        ..Default::default()
    })
    .unwrap();
    let dev = h.link("hd0").unwrap();
    assert_eq!(dev.alias, None);
    h.set_alias(dev.index, "hd0").unwrap();
    assert_eq!(h.link("hd0").unwrap().alias.as_deref(), Some("hd0"));
    h.move_and_rename(dev.index, &cns, "net1").unwrap();
    assert!(h.link_by_name("hd0").unwrap().is_none());
    let moved = ch.link("net1").unwrap();
    assert_eq!((moved.alias.as_deref(), moved.mac), (Some("hd0"), dev.mac));
    assert_eq!(c.ip_json(&["link", "show", "net1"])[0]["ifalias"], "hd0");
    // the name is taken in the target: the kernel moves the link, then refuses the rename,
    // and the link is left there under its old name, alias and all (host-device checks
    // the name first, and its DEL finds such a link by the alias)
    h.create_veth(&VethSpec {
        name: "hd0",
        peer_name: "other0",
        ..Default::default()
    })
    .unwrap();
    let e = ch
        .move_and_rename(moved.index, &Netns::current().unwrap(), "hd0")
        .unwrap_err();
    assert!(e.is_exists(), "{e}");
    assert!(ch.link_by_name("net1").unwrap().is_none());
    let half = h.link("net1").unwrap();
    assert_eq!((half.alias.as_deref(), half.mac), (Some("hd0"), dev.mac));
    h.delete_link("hd0").unwrap();
    h.set_name(half.index, "hd0").unwrap();
    let back = h.link("hd0").unwrap();
    h.set_alias(back.index, "").unwrap();
    assert_eq!(h.link("hd0").unwrap().alias, None);
    assert_eq!(link_json("hd0").get("ifalias"), None);
}

/// A tap made by `ip tuntap` decodes as `LinkKind::Tun` with its data.
#[test]
fn a_tap_decodes_with_its_tun_data() {
    let h = private_host();
    common::run_ok(Command::new("ip").args(["tuntap", "add", "mode", "tap", "name", "t0", "multi_queue", "user", "7"]));
    let l = h.link("t0").unwrap();
    let Some(LinkKind::Tun(t)) = l.kind else {
        panic!("not a tun: {l:?}");
    };
    assert!(t.tap && t.persist && t.multi_queue && !t.pi && !t.vnet_hdr, "{t:?}");
    assert_eq!((t.owner, t.group), (Some(7), None));
    assert_eq!(l.kind_name(), Some("tun"));
}

#[test]
fn deleting_a_missing_link_is_not_found() {
    let h = private_host();
    let e = h.delete_link("nosuchlink").unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.errno(), Some(libc::ENODEV));
    assert_eq!(e.to_string(), "delete nosuchlink: No such device");
    let e = h.delete_link(4242).unwrap_err();
    assert_eq!(e.to_string(), "delete link index 4242: No such device");
}

// ---------------------------------------------------------------- bridge

#[test]
fn bridge_vlan_filtering_is_set_or_reported_as_missing_feature() {
    let h = private_host();
    match h.create_bridge(&BridgeSpec {
        name: "br0",
        vlan_filtering: true,
        ..Default::default()
    }) {
        Ok(_) => {
            let d = &link_json("br0")["linkinfo"]["info_data"];
            assert_eq!(d["vlan_filtering"], 1);
        }
        Err(e) => {
            assert!(e.is_unsupported(), "{e}");
            assert_eq!(
                e.kind(),
                &ErrorKind::Unsupported {
                    feature: "bridge vlan_filtering".into()
                }
            );
            assert!(
                e.to_string()
                    .starts_with("create bridge br0: bridge vlan_filtering is not supported by this kernel"),
                "{e}"
            );
            assert!(h.link_by_name("br0").unwrap().is_none());
            eprintln!("skipped: bridge vlan_filtering is not supported by this kernel");
        }
    }
}

#[test]
fn bridge_port_flags_hairpin_and_isolated() {
    let h = private_host();
    let br = h
        .create_bridge(&BridgeSpec {
            name: "br0",
            ..Default::default()
        })
        .unwrap();
    h.create_veth(&VethSpec {
        name: "va",
        peer_name: "vb",
        master: Some(br.index),

        ..Default::default()
    })
    .unwrap();
    h.set_port_flags(
        "va",
        PortFlags {
            hairpin: Some(true),
            isolated: None,
        },
    )
    .unwrap();
    let d = &link_json("va")["linkinfo"]["info_slave_data"];
    assert_eq!(d["hairpin"], true);
    assert_eq!(d["isolated"], false);
    h.set_port_flags(
        "va",
        PortFlags {
            hairpin: Some(false),
            isolated: Some(true),
        },
    )
    .unwrap();
    let d = &link_json("va")["linkinfo"]["info_slave_data"];
    assert_eq!(d["hairpin"], false);
    assert_eq!(d["isolated"], true);
    // a link that is no bridge port
    let e = h
        .set_port_flags(
            "vb",
            PortFlags {
                hairpin: Some(true),
                isolated: None,
            },
        )
        .unwrap_err();
    assert!(e.to_string().starts_with("set bridge port flags of link index"), "{e}");
}

#[test]
fn bridge_port_vlans_are_added_or_reported_as_missing_feature() {
    let h = private_host();
    let br = h
        .create_bridge(&BridgeSpec {
            name: "br0",
            ..Default::default()
        })
        .unwrap();
    h.create_veth(&VethSpec {
        name: "va",
        peer_name: "vb",
        master: Some(br.index),

        ..Default::default()
    })
    .unwrap();
    match h.add_port_vlan(
        "va",
        PortVlan {
            vid: 100,
            pvid: true,
            untagged: true,
        },
    ) {
        Ok(()) => {
            let v = ip_json(&["-d", "link", "show", "dev", "va"]);
            assert!(v.is_array());
            h.delete_port_vlan("va", 100).unwrap();
        }
        Err(e) => {
            assert_eq!(
                e.kind(),
                &ErrorKind::Unsupported {
                    feature: "bridge VLAN filtering".into()
                },
                "{e}"
            );
            assert!(
                e.to_string()
                    .contains("bridge VLAN filtering is not supported by this kernel"),
                "{e}"
            );
            eprintln!("skipped: bridge VLAN filtering is not supported by this kernel");
        }
    }
}

// ---------------------------------------------------------------- macvlan

#[test]
fn macvlan_is_born_in_the_container() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (cns, ch) = container(&c);
    // no dummy driver here: a veth end is the parent
    let parent = h
        .create_veth(&VethSpec {
            name: "up0",
            peer_name: "up1",
            mtu: Some(1500),

            ..Default::default()
        })
        .unwrap();
    // the same name on the host does not clash
    h.create_bridge(&BridgeSpec {
        name: "eth0",
        ..Default::default()
    })
    .unwrap();
    h.create_macvlan(&MacvlanSpec {
        name: "eth0",
        parent: parent.index,
        mode: MacvlanMode::Bridge,
        netns: Some(&cns),
        mtu: Some(1400),
        mac: Some(mac("0a:00:00:00:00:09")),
        bcqueuelen: Some(100),
    })
    .unwrap();
    let l = ch.link("eth0").unwrap();
    assert_eq!(l.kind_name(), Some("macvlan"));
    assert_eq!(macvlan_mode(&l), Some(MacvlanMode::Bridge));
    assert_eq!(l.mtu, 1400);
    assert_eq!(l.mac, Some(mac("0a:00:00:00:00:09")));
    assert!(l.link_netnsid.is_some());
    let j = c.ip_json(&["-d", "link", "show", "dev", "eth0"]);
    assert_eq!(j[0]["linkinfo"]["info_data"]["mode"], "bridge");
    assert_eq!(j[0]["linkinfo"]["info_data"]["bcqueuelen"], 100);

    for mode in [MacvlanMode::Private, MacvlanMode::Vepa, MacvlanMode::Passthru] {
        let name = format!("mv{}", mode.as_str());
        if mode == MacvlanMode::Passthru {
            // passthru takes the whole parent: only one on it, so use the other veth end
            let up1 = h.link("up1").unwrap();
            h.create_macvlan(&MacvlanSpec {
                name: &name,
                parent: up1.index,
                mode,
                netns: None,
                mtu: None,
                mac: None,
                bcqueuelen: None,
            })
            .unwrap();
        } else {
            h.create_macvlan(&MacvlanSpec {
                name: &name,
                parent: parent.index,
                mode,
                netns: None,
                mtu: None,
                mac: None,
                bcqueuelen: None,
            })
            .unwrap();
        }
        assert_eq!(macvlan_mode(&h.link(name.as_str()).unwrap()), Some(mode));
        assert_eq!(link_json(&name)["linkinfo"]["info_data"]["mode"], mode.as_str());
    }
}

#[test]
fn macvlan_on_a_missing_parent_fails() {
    let h = private_host();
    let e = h
        .create_macvlan(&MacvlanSpec {
            name: "mv0",
            parent: 4242,
            mode: MacvlanMode::Bridge,
            netns: None,
            mtu: None,
            mac: None,
            bcqueuelen: None,
        })
        .unwrap_err();
    assert!(e.to_string().starts_with("create macvlan mv0: "), "{e}");
}

// ---------------------------------------------------------------- addresses

fn veth_pair_up(h: &Handle) -> (u32, u32) {
    let a = h
        .create_veth(&VethSpec {
            name: "va",
            peer_name: "vb",

            ..Default::default()
        })
        .unwrap();
    let b = h.link("vb").unwrap();
    h.set_up(a.index).unwrap();
    h.set_up(b.index).unwrap();
    (a.index, b.index)
}

#[test]
fn addresses_add_list_by_family_and_delete() {
    let h = private_host();
    let (va, vb) = veth_pair_up(&h);
    h.add_address(va, net("10.1.2.3/24"), AddrOptions::default()).unwrap();
    h.add_address(
        va,
        net("fd00::3/64"),
        AddrOptions {
            nodad: true,
            ..Default::default()
        },
    )
    .unwrap();
    h.add_address(vb, net("10.9.9.9/31"), AddrOptions::default()).unwrap();

    let v4 = h.addresses(Some(va), Family::V4).unwrap();
    assert_eq!(v4.len(), 1);
    assert_eq!(v4[0].address, net("10.1.2.3/24"));
    assert_eq!(v4[0].broadcast, Some("10.1.2.255".parse().unwrap()));
    assert_eq!(v4[0].scope, Scope::Universe);
    assert!(v4[0].is_permanent());
    let j = ip_json(&["addr", "show", "dev", "va"]);
    assert_eq!(j[0]["addr_info"][0]["broadcast"], "10.1.2.255");

    let v6: Vec<_> = h.addresses(Some(va), Family::V6).unwrap();
    let global: Vec<_> = v6.iter().filter(|a| a.scope == Scope::Universe).collect();
    assert_eq!(global.len(), 1);
    assert_eq!(global[0].address, net("fd00::3/64"));
    assert!(!global[0].is_tentative(), "nodad: usable at once");
    assert!(global[0].flags & cnibox::netlink::IFA_F_NODAD != 0);

    let all = h.addresses(Some(va), Family::All).unwrap();
    assert_eq!(all.len(), v4.len() + v6.len());
    assert!(all.iter().all(|a| a.index == va));
    let everywhere = h.addresses(None, Family::V4).unwrap();
    assert!(everywhere
        .iter()
        .any(|a| a.address == net("10.9.9.9/31") && a.index == vb && a.broadcast.is_none()));
    assert!(everywhere.iter().any(|a| a.address == net("127.0.0.1/8")));

    // an identical address again: Exists
    let e = h
        .add_address(va, net("10.1.2.3/24"), AddrOptions::default())
        .unwrap_err();
    assert!(e.is_exists(), "{e}");
    // the kernel may add its extended-ack text after the errno text
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("add address 10.1.2.3/24 on link index {va}: File exists")),
        "{msg}"
    );

    h.delete_address(va, net("10.1.2.3/24")).unwrap();
    assert!(h.addresses(Some(va), Family::V4).unwrap().is_empty());
    let e = h.delete_address(va, net("10.1.2.3/24")).unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

#[test]
fn ipv6_address_without_nodad_is_tentative_first() {
    let h = private_host();
    let (va, _vb) = veth_pair_up(&h);
    // DAD only runs where it is enabled; make sure it is, so the tentative flag is visible
    cnibox::sysctl::set(&cnibox::sysctl::ipv6_conf("va", "accept_dad"), "1").unwrap();
    cnibox::sysctl::set(&cnibox::sysctl::ipv6_conf("va", "dad_transmits"), "1").unwrap();
    h.add_address(va, net("fd00::5/64"), AddrOptions::default()).unwrap();
    let a = h
        .addresses(Some(va), Family::V6)
        .unwrap()
        .into_iter()
        .find(|a| a.address == net("fd00::5/64"))
        .unwrap();
    assert!(a.is_tentative(), "DAD is still running right after the add: {a:?}");
    assert!(!a.is_dadfailed());
    let j = ip_json(&["-6", "addr", "show", "dev", "va"]);
    let info = j[0]["addr_info"].as_array().unwrap();
    let from_ip = info.iter().find(|i| i["local"] == "fd00::5").unwrap();
    assert_eq!(from_ip["tentative"].as_bool().unwrap_or(false), a.is_tentative());
}

// ---------------------------------------------------------------- device settings

fn sysctl_of(dev: &str, family: &str, leaf: &str) -> String {
    cnibox::sysctl::get(&format!("net/{family}/conf/{dev}/{leaf}")).unwrap()
}

/// IFLA_INET_CONF sets exactly the sysctl of the same name, on that link only, and
/// RTM_GETLINK reads it back.
#[test]
fn ipv4_settings_over_netlink_are_the_sysctls() {
    let h = private_host();
    let (va, vb) = veth_pair_up(&h);
    for (key, leaf) in [
        (Ipv4Conf::ArpNotify, "arp_notify"),
        (Ipv4Conf::RouteLocalnet, "route_localnet"),
    ] {
        assert_eq!(sysctl_of("va", "ipv4", leaf), "0", "{leaf} starts off");
        h.set_ipv4_conf(va, &[(key, 1)]).unwrap();
        assert_eq!(sysctl_of("va", "ipv4", leaf), "1", "{leaf}");
        assert_eq!(h.devconf(va).unwrap().ipv4(key), Some(1), "{leaf}");
        assert_eq!(sysctl_of("vb", "ipv4", leaf), "0", "{leaf} of the other link");
        assert_eq!(h.devconf(vb).unwrap().ipv4(key), Some(0), "{leaf} of the other link");
        // and what a sysctl write sets, netlink reads
        cnibox::sysctl::set(&format!("net/ipv4/conf/va/{leaf}"), "0").unwrap();
        assert_eq!(h.devconf(va).unwrap().ipv4(key), Some(0), "{leaf}");
    }
    cnibox::sysctl::set("net/ipv4/conf/vb/forwarding", "1").unwrap();
    assert_eq!(h.devconf(vb).unwrap().ipv4(Ipv4Conf::Forwarding), Some(1));
    let e = h.set_ipv4_conf(9999, &[(Ipv4Conf::ArpNotify, 1)]).unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(h.devconf(9999).unwrap_err().is_not_found());
}

/// Every IPv6 setting the plugins read is at its DEVCONF_* number in IFLA_INET6_CONF:
/// each one changed through /proc/sys reads back changed, the others unchanged.
#[test]
fn ipv6_settings_read_over_netlink_are_the_sysctls() {
    let h = private_host();
    let (va, _vb) = veth_pair_up(&h);
    let keys = [
        (Ipv6Conf::Forwarding, "forwarding"),
        (Ipv6Conf::AcceptRa, "accept_ra"),
        (Ipv6Conf::AcceptDad, "accept_dad"),
        (Ipv6Conf::NdiscNotify, "ndisc_notify"),
        (Ipv6Conf::KeepAddrOnDown, "keep_addr_on_down"),
        (Ipv6Conf::EnhancedDad, "enhanced_dad"),
        (Ipv6Conf::DisableIpv6, "disable_ipv6"),
    ];
    let read_all = || -> Vec<(String, String)> {
        let c = h.devconf(va).unwrap();
        keys.iter()
            .map(|(k, leaf)| (leaf.to_string(), c.ipv6(*k).expect("IPv6 settings").to_string()))
            .collect()
    };
    let from_proc = || -> Vec<(String, String)> {
        keys.iter()
            .map(|(_, leaf)| (leaf.to_string(), sysctl_of("va", "ipv6", leaf)))
            .collect()
    };
    assert_eq!(read_all(), from_proc());
    for (_, leaf) in keys {
        let now: i32 = sysctl_of("va", "ipv6", leaf).parse().unwrap();
        let next = if now == 0 { 1 } else { 0 };
        cnibox::sysctl::set(&format!("net/ipv6/conf/va/{leaf}"), &next.to_string()).unwrap();
        assert_eq!(read_all(), from_proc(), "after {leaf}={next}");
    }
}

/// RTM_GETNETCONF about all devices is `ip_forward` and `conf/all/forwarding`.
#[test]
fn forwarding_over_netconf_is_the_sysctls() {
    let h = private_host();
    for (family, key) in [
        (Family::V4, "net/ipv4/ip_forward"),
        (Family::V6, "net/ipv6/conf/all/forwarding"),
    ] {
        assert_eq!(h.forwarding(family).unwrap(), Some(false), "{key} in a new namespace");
        cnibox::sysctl::set(key, "1").unwrap();
        assert_eq!(h.forwarding(family).unwrap(), Some(true), "{key}");
    }
}

// ---------------------------------------------------------------- routes

#[test]
fn routes_add_list_exists_and_delete() {
    let h = private_host();
    let (va, _vb) = veth_pair_up(&h);
    h.add_address(va, net("10.1.2.3/24"), AddrOptions::default()).unwrap();
    h.add_address(
        va,
        net("fd00::3/64"),
        AddrOptions {
            nodad: true,
            ..Default::default()
        },
    )
    .unwrap();

    let default = RouteSpec {
        gateway: Some(addr("10.1.2.1")),
        oif: Some(va),
        metric: Some(100),
        mtu: Some(1400),
        advmss: Some(1360),
        prefsrc: Some(addr("10.1.2.3")),
        ..RouteSpec::new(net("0.0.0.0/0"))
    };
    h.add_route(&default).unwrap();
    let onlink = RouteSpec {
        oif: Some(va),
        scope: Some(Scope::Link),
        table: Some(100),
        ..RouteSpec::new(net("10.20.0.0/16"))
    };
    h.add_route(&onlink).unwrap();
    let v6 = RouteSpec {
        gateway: Some(addr("fd00::1")),
        oif: Some(va),
        ..RouteSpec::new(net("fd01::/64"))
    };
    h.add_route(&v6).unwrap();

    let routes = h.routes(Family::V4).unwrap();
    let d = routes
        .iter()
        .find(|r| r.dst == net("0.0.0.0/0"))
        .expect("default route listed");
    assert_eq!(d.gateway, Some(addr("10.1.2.1")));
    assert_eq!(
        (d.oif, d.metric, d.mtu, d.advmss),
        (Some(va), Some(100), Some(1400), Some(1360))
    );
    assert_eq!(d.prefsrc, Some(addr("10.1.2.3")));
    assert_eq!(d.table, cnibox::netlink::TABLE_MAIN);
    assert_eq!(d.scope, Scope::Universe);
    let o = routes.iter().find(|r| r.dst == net("10.20.0.0/16")).unwrap();
    assert_eq!((o.table, o.scope, o.gateway), (100, Scope::Link, None));
    assert!(routes.iter().all(|r| r.dst.is_ipv4()));
    let r6 = h.routes(Family::V6).unwrap();
    assert!(r6
        .iter()
        .any(|r| r.dst == net("fd01::/64") && r.gateway == Some(addr("fd00::1"))));
    assert!(r6.iter().all(|r| r.dst.is_ipv6()));

    let j = ip_json(&["route", "show", "default"]);
    assert_eq!(j[0]["gateway"], "10.1.2.1");
    assert_eq!(j[0]["metric"], 100);
    assert_eq!(j[0]["prefsrc"], "10.1.2.3");
    let j = ip_json(&["route", "show", "table", "100"]);
    assert_eq!(j[0]["dst"], "10.20.0.0/16");

    // the same route again: Exists, distinguishable from a real failure
    let e = h.add_route(&default).unwrap_err();
    assert!(e.is_exists(), "{e}");
    assert_eq!(
        e.to_string(),
        format!("add route 0.0.0.0/0 via 10.1.2.1 dev index {va} metric 100: File exists")
    );
    // another metric is another route; append leaves the first in place
    h.append_route(&RouteSpec {
        metric: Some(200),
        ..default.clone()
    })
    .unwrap();
    assert_eq!(
        h.routes(Family::V4)
            .unwrap()
            .iter()
            .filter(|r| r.dst == net("0.0.0.0/0"))
            .count(),
        2
    );
    h.replace_route(&RouteSpec {
        mtu: Some(1300),
        ..default.clone()
    })
    .unwrap();
    let d = h
        .routes(Family::V4)
        .unwrap()
        .into_iter()
        .find(|r| r.dst == net("0.0.0.0/0") && r.metric == Some(100))
        .unwrap();
    assert_eq!(d.mtu, Some(1300));

    h.delete_route(&default).unwrap();
    h.delete_route(&onlink).unwrap();
    assert!(!h
        .routes(Family::V4)
        .unwrap()
        .iter()
        .any(|r| r.dst == net("10.20.0.0/16")));
    let e = h.delete_route(&onlink).unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

#[test]
fn route_via_an_unreachable_gateway_fails_with_the_route_named() {
    let h = private_host();
    let (va, _) = veth_pair_up(&h);
    let e = h
        .add_route(&RouteSpec {
            gateway: Some(addr("192.0.2.1")),
            oif: Some(va),
            ..RouteSpec::new(net("0.0.0.0/0"))
        })
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Kernel, "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("add route 0.0.0.0/0 via 192.0.2.1 dev index {va}: ")),
        "{e}"
    );
}

/// `from ADDR lookup TABLE` rules: the kernel places each below the `main` rule (a rule
/// without a priority is never "the same" as another: each gets the next one), lists them
/// back as sbr's shape, and deletes exactly the one named.
#[test]
fn source_rules_add_list_and_delete() {
    let h = private_host();
    let rule = |src: &str, table: u32| SourceRule { src: net(src), table };
    h.add_source_rule(&rule("10.1.0.5/32", 100)).unwrap();
    h.add_source_rule(&rule("10.1.0.6/32", 1000)).unwrap();
    h.add_source_rule(&rule("2001:db8::5/128", 101)).unwrap();
    let shown = |fam: &str| -> Vec<(u64, String, u64)> {
        ip_json(&[fam, "rule", "show"])
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let table = match &r["table"] {
                    Value::String(t) if t == "main" => 254,
                    Value::String(t) if t == "local" => 255,
                    Value::String(t) if t == "default" => 253,
                    Value::String(t) => t.parse().unwrap(),
                    other => panic!("{other}"),
                };
                (
                    r["priority"].as_u64().unwrap(),
                    r["src"].as_str().unwrap_or("all").to_string(),
                    table,
                )
            })
            .collect()
    };
    assert_eq!(
        shown("-4"),
        [
            (0, "all".into(), 255),
            (32764, "10.1.0.6".into(), 1000),
            (32765, "10.1.0.5".into(), 100),
            (32766, "all".into(), 254),
            (32767, "all".into(), 253)
        ]
    );
    assert_eq!(shown("-6")[1], (32765, "2001:db8::5".into(), 101));

    let listed = h.rules(Family::All).unwrap();
    let ours: Vec<_> = listed.iter().filter(|r| r.src.is_some()).collect();
    assert_eq!(ours.len(), 3, "{listed:?}");
    assert!(ours.iter().all(|r| r.is_lookup_from(r.src.unwrap().ip())), "{ours:?}");
    assert_eq!(
        h.rules(Family::V6).unwrap().iter().filter(|r| r.src.is_some()).count(),
        1
    );
    let big = ours
        .iter()
        .find(|r| r.table == 1000)
        .expect("a table above 255 reads back");
    h.delete_rule(big).unwrap();
    assert!(h.delete_rule(big).unwrap_err().is_not_found());
    assert_eq!(shown("-4").len(), 4);
    // a rule that also selects by input interface is not a source lookup
    common::run_ok(Command::new("ip").args(["rule", "add", "from", "10.1.0.7", "iif", "lo", "lookup", "102"]));
    let iif = h
        .rules(Family::V4)
        .unwrap()
        .into_iter()
        .find(|r| r.table == 102)
        .unwrap();
    assert!(!iif.is_lookup_from(addr("10.1.0.7")), "{iif:?}");
}

/// A main-table route restated in another table keeps protocol, scope, source and metric.
#[test]
fn a_route_restated_in_another_table_keeps_its_attributes() {
    let h = private_host();
    let (va, _) = veth_pair_up(&h);
    h.add_address(va, net("10.1.2.3/24"), AddrOptions::default()).unwrap();
    let kernel = h
        .routes(Family::V4)
        .unwrap()
        .into_iter()
        .find(|r| r.table == TABLE_MAIN && r.dst == net("10.1.2.0/24"))
        .expect("the kernel's subnet route");
    h.replace_route(&kernel.in_table(100).unwrap()).unwrap();
    let copy = h
        .routes(Family::V4)
        .unwrap()
        .into_iter()
        .find(|r| r.table == 100)
        .unwrap();
    assert_eq!(
        (copy.dst, copy.protocol, copy.scope, copy.prefsrc, copy.oif, copy.metric),
        (
            kernel.dst,
            kernel.protocol,
            kernel.scope,
            kernel.prefsrc,
            kernel.oif,
            kernel.metric
        )
    );
    h.delete_route(&kernel.in_table(kernel.table).unwrap()).unwrap();
    assert!(h
        .routes(Family::V4)
        .unwrap()
        .iter()
        .all(|r| r.table != TABLE_MAIN || r.dst != net("10.1.2.0/24")));
}

// ---------------------------------------------------------------- handles per namespace

#[test]
fn handles_stay_in_their_namespace_without_switching() {
    let h = private_host();
    let c = common::Netns::new("c");
    let (_cns, ch) = container(&c);
    let before = Netns::current().unwrap();
    ch.create_bridge(&BridgeSpec {
        name: "inside",
        ..Default::default()
    })
    .unwrap();
    assert!(before.is_current().unwrap(), "the thread never left its namespace");
    assert!(c.has_link("inside"));
    assert!(h.link_by_name("inside").unwrap().is_none());
}

#[test]
fn opening_a_handle_in_a_missing_namespace_fails() {
    common::require_root();
    let e = Netns::open("/run/netns/cnibox-does-not-exist").unwrap_err();
    assert!(e.is_not_found());
}

#[test]
fn settling_waits_until_dad_is_done() {
    let h = private_host();
    let (va, _vb) = veth_pair_up(&h);
    cnibox::sysctl::set(&cnibox::sysctl::ipv6_conf("va", "accept_dad"), "1").unwrap();
    h.add_address(va, net("fd00::7/64"), AddrOptions::default()).unwrap();
    h.settle_addresses("va", std::time::Duration::from_secs(10)).unwrap();
    let a = h.addresses(Some(va), Family::V6).unwrap();
    assert!(a.iter().all(|a| !a.is_tentative()), "{a:?}");
    let j = ip_json(&["-6", "addr", "show", "dev", "va"]);
    assert!(
        j[0]["addr_info"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i.get("tentative").is_none()),
        "{j}"
    );
}

#[test]
fn settling_a_missing_link_is_not_found() {
    let h = private_host();
    let e = h
        .settle_addresses("nosuch0", std::time::Duration::from_secs(1))
        .unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.to_string(), "get nosuch0: not found");
}

/// `tc -j ARGS` in this thread's namespace.
fn tc_json(args: &[&str]) -> Value {
    let out = common::run_ok(Command::new("tc").arg("-j").args(args));
    if out.trim().is_empty() {
        return Value::Array(vec![]);
    }
    serde_json::from_str(&out).unwrap()
}

/// The tc module against the kernel: an ifb, a tbf on a veth and on the ifb, the ingress
/// qdisc with the redirect filter; the dumps read back what `tc -j` shows; removal.
#[test]
fn tc_tbf_ingress_redirect_round_trip() {
    use cnibox::netlink::tc::{self, Tbf};
    use cnibox::netlink::IfbSpec;
    let h = private_host();
    let veth = h
        .create_veth(&VethSpec {
            name: "tcv0",
            peer_name: "tcv0p",
            ..Default::default()
        })
        .unwrap();
    h.set_up(veth.index).unwrap();
    let ifb = h
        .create_ifb(&IfbSpec {
            name: "tcifb0",
            mtu: Some(1400),
            txqlen: Some(0),
        })
        .unwrap();
    assert!(ifb.up && ifb.mtu == 1400 && ifb.kind_name() == Some("ifb"), "{ifb:?}");
    assert!(h
        .create_ifb(&IfbSpec {
            name: "tcifb0",
            ..Default::default()
        })
        .unwrap_err()
        .is_exists());

    let shaping = Tbf {
        rate: 1_000_000,
        buffer: 31_250_000,
        limit: 2_025_000,
    };
    h.add_tbf(veth.index, &shaping).unwrap();
    h.add_tbf(
        ifb.index,
        &Tbf {
            rate: 1 << 33,
            buffer: 1000,
            limit: 5000,
        },
    )
    .unwrap();
    h.add_ingress_qdisc(veth.index).unwrap();
    h.add_redirect_filter(veth.index, ifb.index).unwrap();
    assert!(h.add_ingress_qdisc(veth.index).unwrap_err().is_exists());

    let shown = tc_json(&["qdisc", "show", "dev", "tcv0"]);
    assert_eq!(shown[0]["kind"], "tbf");
    assert_eq!(shown[0]["options"]["rate"], 1_000_000);
    assert_eq!(shown[0]["options"]["burst"], 2_000_000);
    assert_eq!(shown[1]["kind"], "ingress");
    let q = h.qdiscs(veth.index).unwrap();
    assert_eq!(q.len(), 2, "{q:?}");
    assert_eq!(
        (q[0].kind.as_str(), q[0].handle, q[0].parent),
        ("tbf", tc::TBF_HANDLE, tc::HANDLE_ROOT)
    );
    assert_eq!(q[0].tbf, Some(shaping));
    assert_eq!(
        (q[1].kind.as_str(), q[1].handle, q[1].parent),
        ("ingress", tc::INGRESS_QDISC, tc::HANDLE_INGRESS)
    );
    assert_eq!(
        h.qdiscs(ifb.index).unwrap()[0].tbf.unwrap().rate,
        1 << 33,
        "64-bit rates read back"
    );

    let filters = h.filters(veth.index, tc::INGRESS_QDISC).unwrap();
    let redirect = filters
        .iter()
        .find(|f| !f.redirects.is_empty())
        .expect("the u32 filter with actions");
    assert_eq!(redirect.redirects, vec![ifb.index, ifb.index]);
    assert_eq!(
        (redirect.kind.as_str(), redirect.priority, redirect.protocol),
        ("u32", 1, 3)
    );
    assert_eq!(redirect.classid, Some(tc::make_handle(1, 1)));
    let shown = tc_json(&["filter", "show", "dev", "tcv0", "ingress"]).to_string();
    assert!(shown.contains("\"to_dev\":\"tcifb0\""), "{shown}");

    assert!(h
        .remove_qdisc(veth.index, tc::HANDLE_INGRESS, tc::INGRESS_QDISC)
        .unwrap());
    assert!(!h
        .remove_qdisc(veth.index, tc::HANDLE_INGRESS, tc::INGRESS_QDISC)
        .unwrap());
    assert!(h.remove_qdisc(veth.index, tc::HANDLE_ROOT, tc::TBF_HANDLE).unwrap());
    assert!(h
        .qdiscs(veth.index)
        .unwrap()
        .iter()
        .all(|q| q.kind != "tbf" && q.kind != "ingress"));
}
