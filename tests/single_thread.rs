//! The netlink layer never starts a thread: a full create/configure/delete cycle, run from
//! a plain `main` (no test harness threads), keeps `Threads:` at 1.
#[path = "integration/common/mod.rs"]
mod common;

use cnibox::netlink::{
    AddrOptions, BridgeSpec, Family, Handle, MacvlanMode, MacvlanSpec, PortFlags, RouteSpec, VethSpec,
};
use cnibox::netns::Netns;

fn threads() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line["Threads:".len()..].trim().parse().unwrap()
}

/// A datagram from the container's 10.22.0.2 arrives at the bridge's 10.22.0.1: the veth,
/// its enslavement and the addresses really work. (No ping binary needed, no thread.)
fn assert_udp_reaches_host(cns: &Netns) {
    use std::net::UdpSocket;
    let host = UdpSocket::bind("10.22.0.1:0").unwrap();
    host.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    // a socket belongs to the namespace it was created in
    let inside = cns.run(|| UdpSocket::bind("10.22.0.2:0")).unwrap().unwrap();
    inside.send_to(b"hello", host.local_addr().unwrap()).unwrap();
    let mut buf = [0u8; 16];
    let (n, from) = host.recv_from(&mut buf).expect("datagram from the container");
    assert_eq!(&buf[..n], b"hello");
    assert_eq!(from.ip().to_string(), "10.22.0.2");
}

fn main() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("single_thread: needs root");
        std::process::exit(1);
    }
    assert_eq!(threads(), 1, "starts single-threaded");
    // the only thread: this moves the whole test process into a private namespace
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
    let c = common::Netns::new("c");
    let cns = Netns::open(&c.path).unwrap();

    let host = Handle::current().unwrap();
    let cont = Handle::open(&cns).unwrap();
    assert_eq!(threads(), 1, "after opening two handles");

    let br = host
        .create_bridge(&BridgeSpec {
            name: "cni0",
            mtu: Some(1400),
            ..Default::default()
        })
        .unwrap();
    host.set_up(br.index).unwrap();
    host.add_address(br.index, "10.22.0.1/24".parse().unwrap(), AddrOptions::default())
        .unwrap();
    let veth = host
        .create_veth(&VethSpec {
            name: &cnibox::netlink::random_veth_name().unwrap(),
            peer_name: "eth0",
            peer_netns: Some(&cns),
            mtu: Some(1400),
            peer_mac: Some("0a:58:0a:16:00:02".parse().unwrap()),
            master: Some(br.index),

            ..Default::default()
        })
        .unwrap();
    host.set_up(veth.index).unwrap();
    host.set_port_flags(
        veth.index,
        PortFlags {
            hairpin: Some(true),
            isolated: None,
        },
    )
    .unwrap();
    let eth0 = cont.link("eth0").unwrap();
    cont.set_up(eth0.index).unwrap();
    cnibox::sysctl::set_in(&cns, &cnibox::sysctl::ipv6_conf("eth0", "accept_dad"), "0").unwrap();
    cont.add_address(
        eth0.index,
        "10.22.0.2/24".parse().unwrap(),
        AddrOptions {
            nodad: true,
            ..Default::default()
        },
    )
    .unwrap();
    cont.add_route(&RouteSpec {
        gateway: Some("10.22.0.1".parse().unwrap()),
        oif: Some(eth0.index),
        ..RouteSpec::new("0.0.0.0/0".parse().unwrap())
    })
    .unwrap();
    host.create_macvlan(&MacvlanSpec {
        name: "eth1",
        parent: br.index,
        mode: MacvlanMode::Bridge,
        netns: Some(&cns),
        mtu: None,
        mac: None,
        bcqueuelen: None,
    })
    .unwrap();
    assert_udp_reaches_host(&cns);
    assert_eq!(cont.links().unwrap().len(), 3);
    assert_eq!(
        cont.routes(Family::V4)
            .unwrap()
            .iter()
            .filter(|r| r.dst.prefix() == 0)
            .count(),
        1
    );
    assert_eq!(threads(), 1, "after the configure phase");

    cont.delete_link("eth1").unwrap();
    host.delete_link(veth.index).unwrap();
    host.delete_link(br.index).unwrap();
    assert!(cont.link_by_name("eth0").unwrap().is_none());
    assert_eq!(threads(), 1, "after the delete phase");
    println!("single_thread: ok (Threads: 1 throughout)");
}
