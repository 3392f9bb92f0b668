//! Request encoding and reply handling, checked against the fake transport (no root needed).
use super::testing::*;
use super::wire::*;
use super::*;

fn handle() -> Handle<FakeTransport> {
    Handle::with_transport(FakeTransport::new())
}

fn link(index: u32, name: &str) -> Link {
    Link {
        index,
        name: name.into(),
        kind: Some(LinkKind::Veth),
        slave_kind: None,
        mac: Some("0a:00:00:00:00:01".parse().unwrap()),
        mtu: 1500,
        master: None,
        up: false,
        lower_up: false,
        oper_state: OperState::Unknown,
        peer_index: Some(index + 1),
        link_netnsid: Some(0),
        promisc: false,
        allmulti: false,
        txqlen: 0,
        flags: 0,
        alias: None,
    }
}

fn attr_of(payload: &[u8], header: usize, ty: u16) -> Option<Vec<u8>> {
    attributes(payload, header)
        .into_iter()
        .find(|(t, _)| *t == ty)
        .map(|(_, p)| p)
}

fn veth<'a>(name: &'a str, peer: &'a str) -> VethSpec<'a> {
    VethSpec {
        name,
        peer_name: peer,

        ..Default::default()
    }
}

#[test]
fn a_fifteen_byte_name_is_sent_with_exactly_one_nul() {
    let h = handle();
    h.transport().push_ack();
    h.transport().push_links(&[link(7, "abcdefghijklmno")]);
    h.create_veth(&veth("abcdefghijklmno", "ponmlkjihgfedcb")).unwrap();
    let req = &h.transport().requests()[0];
    assert_eq!(
        attr_of(&req.payload, IFINFOMSG_LEN, IFLA_IFNAME).unwrap(),
        b"abcdefghijklmno\0"
    );
    // the peer's name sits in LINKINFO / INFO_DATA / VETH_INFO_PEER (an ifinfomsg + attrs)
    let info = attr_of(&req.payload, IFINFOMSG_LEN, IFLA_LINKINFO).unwrap();
    assert_eq!(find(&info, IFLA_INFO_KIND).unwrap(), b"veth");
    let data = find(&info, IFLA_INFO_DATA).unwrap();
    let peer = find(data, VETH_INFO_PEER).unwrap();
    assert_eq!(attr_of(peer, IFINFOMSG_LEN, IFLA_IFNAME).unwrap(), b"ponmlkjihgfedcb\0");
}

#[test]
fn every_modifying_request_asks_for_an_ack() {
    let h = handle();
    let t = h.transport();
    t.push_ack();
    t.push_links(&[link(3, "va")]);
    h.create_veth(&veth("va", "vb")).unwrap();
    t.push_ack();
    t.push_links(&[link(4, "br0")]);
    h.create_bridge(&BridgeSpec {
        name: "br0",
        ..Default::default()
    })
    .unwrap();
    h.create_macvlan(&MacvlanSpec {
        name: "mv0",
        parent: 3,
        mode: MacvlanMode::Bridge,
        netns: None,
        mtu: None,
        mac: None,
        bcqueuelen: None,
    })
    .unwrap();
    h.set_up(3).unwrap();
    h.set_down(3).unwrap();
    h.set_master(3, Some(4)).unwrap();
    h.set_mtu(3, 1400).unwrap();
    h.set_mac(3, "0a:00:00:00:00:02".parse().unwrap()).unwrap();
    h.set_promisc(3, true).unwrap();
    h.set_name(3, "vc").unwrap();
    h.set_vlan_filtering(4, false).unwrap();
    h.set_port_flags(
        3,
        PortFlags {
            hairpin: Some(true),
            isolated: Some(false),
        },
    )
    .unwrap();
    h.add_port_vlan(
        3,
        PortVlan {
            vid: 10,
            pvid: true,
            untagged: true,
        },
    )
    .unwrap();
    h.delete_port_vlan(3, 10).unwrap();
    h.add_address(3, "10.0.0.2/24".parse().unwrap(), AddrOptions::default())
        .unwrap();
    h.delete_address(3, "10.0.0.2/24".parse().unwrap()).unwrap();
    let r = RouteSpec::new("10.1.0.0/16".parse().unwrap());
    h.add_route(&r).unwrap();
    h.append_route(&r).unwrap();
    h.replace_route(&r).unwrap();
    h.delete_route(&r).unwrap();
    h.delete_link(3).unwrap();

    let modifying: Vec<_> = t
        .requests()
        .into_iter()
        .filter(|m| ![RTM_GETLINK, RTM_GETADDR, RTM_GETROUTE].contains(&m.kind))
        .collect();
    assert_eq!(modifying.len(), 21);
    for m in &modifying {
        assert_eq!(
            m.flags & (NLM_F_REQUEST | NLM_F_ACK),
            NLM_F_REQUEST | NLM_F_ACK,
            "{m:?}"
        );
    }
    // creates are exclusive: an existing object is an error, never silently reused
    let creates: Vec<_> = modifying.iter().filter(|m| m.flags & NLM_F_CREATE != 0).collect();
    assert!(creates
        .iter()
        .filter(|m| m.kind == RTM_NEWLINK)
        .all(|m| m.flags & NLM_F_EXCL != 0));
}

#[test]
fn lookups_ask_for_an_ack_too_and_dumps_do_not() {
    let h = handle();
    h.transport().push_links(&[link(3, "va")]);
    h.link_by_name("va").unwrap();
    h.links().unwrap();
    let reqs = h.transport().requests();
    assert_eq!(reqs[0].flags, NLM_F_REQUEST | NLM_F_ACK);
    assert_eq!(reqs[1].flags, NLM_F_REQUEST | NLM_F_DUMP);
    // strict checking: a link dump header carries nothing but zeros
    assert!(reqs[1].payload.iter().all(|b| *b == 0), "{:?}", reqs[1].payload);
}

#[test]
fn an_interrupted_dump_is_repeated() {
    let h = handle();
    let t = h.transport();
    let stale = Reply {
        messages: vec![encode_link(&link(3, "old"))],
        interrupted: true,
    };
    t.push_reply(stale.clone());
    t.push_reply(stale);
    t.push_links(&[link(3, "va"), link(4, "vb")]);
    let names: Vec<_> = h.links().unwrap().into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["va", "vb"]);
    assert_eq!(t.requests().len(), 3);
}

#[test]
fn a_dump_interrupted_every_time_gives_up_with_an_error() {
    let h = handle();
    for _ in 0..super::handle::DUMP_ATTEMPTS {
        h.transport().push_reply(Reply {
            messages: vec![],
            interrupted: true,
        });
    }
    let e = h.routes(Family::All).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EINTR));
    assert_eq!(
        e.to_string(),
        "list routes: Interrupted system call (dump interrupted 5 times in a row)"
    );
    assert_eq!(h.transport().requests().len(), super::handle::DUMP_ATTEMPTS);
}

#[test]
fn kernel_errnos_become_kinds_with_op_and_object() {
    let cases = [
        (libc::EEXIST, ErrorKind::Exists, "File exists"),
        (libc::ENODEV, ErrorKind::NotFound, "No such device"),
        (libc::ENOENT, ErrorKind::NotFound, "No such file or directory"),
        (libc::ESRCH, ErrorKind::NotFound, "No such process"),
        (
            libc::EADDRNOTAVAIL,
            ErrorKind::NotFound,
            "Cannot assign requested address",
        ),
        (libc::EBUSY, ErrorKind::Busy, "Device or resource busy"),
        (libc::EINVAL, ErrorKind::Kernel, "Invalid argument"),
    ];
    for (errno, kind, text) in cases {
        let h = handle();
        h.transport().push_errno(errno);
        let e = h.delete_link("eth0").unwrap_err();
        assert_eq!(e.kind(), &kind);
        assert_eq!(e.errno(), Some(errno));
        assert_eq!((e.op(), e.object()), ("delete", "eth0"));
        assert_eq!(e.to_string(), format!("delete eth0: {text}"));
    }
}

#[test]
fn remove_link_treats_already_gone_as_done_and_reports_other_errors() {
    let h = handle();
    h.transport().push_ack();
    assert!(h.remove_link("eth0").unwrap());
    h.transport().push_errno(libc::ENODEV);
    assert!(!h.remove_link("eth0").unwrap());
    h.transport().push_errno(libc::EBUSY);
    assert_eq!(
        h.remove_link("eth0").unwrap_err().to_string(),
        "delete eth0: Device or resource busy"
    );
}

#[test]
fn a_missing_link_is_none_on_lookup_and_not_found_on_get() {
    let h = handle();
    h.transport().push_errno(libc::ENODEV);
    assert_eq!(h.link_by_name("eth0").unwrap(), None);
    h.transport().push_errno(libc::ENODEV);
    let e = h.link("eth0").unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.to_string(), "get eth0: not found");
    h.transport().push_errno(libc::EPERM);
    assert_eq!(
        h.link_by_name("eth0").unwrap_err().to_string(),
        "get eth0: Operation not permitted"
    );
}

#[test]
fn a_veth_clash_with_a_free_host_name_names_the_peer() {
    let h = handle();
    h.transport().push_errno(libc::EEXIST);
    h.transport().push_errno(libc::ENODEV); // the host name is free
    let e = h.create_veth(&veth("veth1234abcd", "eth0")).unwrap_err();
    assert!(e.is_exists());
    assert_eq!(e.to_string(), "create veth peer eth0: File exists");

    let h = handle();
    h.transport().push_errno(libc::EEXIST);
    h.transport().push_links(&[link(5, "veth1234abcd")]);
    let e = h.create_veth(&veth("veth1234abcd", "eth0")).unwrap_err();
    assert_eq!(e.to_string(), "create veth veth1234abcd: File exists");
}

#[test]
fn a_missing_kernel_feature_is_named() {
    let h = handle();
    h.transport().push_errno(libc::EOPNOTSUPP);
    let e = h
        .create_bridge(&BridgeSpec {
            name: "br0",
            vlan_filtering: true,
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::Unsupported {
            feature: "bridge vlan_filtering".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "create bridge br0: bridge vlan_filtering is not supported by this kernel (Operation not supported)"
    );
    // the same errno without a feature at stake stays a plain kernel error
    h.transport().push_errno(libc::EOPNOTSUPP);
    let e = h
        .create_bridge(&BridgeSpec {
            name: "br0",
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Kernel);
}

#[test]
fn veth_create_carries_mtu_macs_master_and_netns_for_both_ends() {
    let h = handle();
    h.transport().push_ack();
    h.transport().push_links(&[link(9, "va")]);
    let ns = crate::netns::Netns::open("/proc/self/ns/net").unwrap();
    let spec = VethSpec {
        name: "va",
        peer_name: "eth0",
        peer_netns: Some(&ns),
        mtu: Some(1400),
        mac: Some("0a:00:00:00:00:01".parse().unwrap()),
        peer_mac: Some("0a:00:00:00:00:02".parse().unwrap()),
        master: Some(4),
    };
    let got = h.create_veth(&spec).unwrap();
    assert_eq!(got.index, 9);
    let req = &h.transport().requests()[0];
    assert_eq!(req.kind, RTM_NEWLINK);
    assert_eq!(
        attr_of(&req.payload, IFINFOMSG_LEN, IFLA_MTU).unwrap(),
        1400u32.to_ne_bytes()
    );
    assert_eq!(
        attr_of(&req.payload, IFINFOMSG_LEN, IFLA_ADDRESS).unwrap(),
        [10, 0, 0, 0, 0, 1]
    );
    assert_eq!(
        attr_of(&req.payload, IFINFOMSG_LEN, IFLA_MASTER).unwrap(),
        4u32.to_ne_bytes()
    );
    assert_eq!(
        attr_of(&req.payload, IFINFOMSG_LEN, IFLA_NET_NS_FD),
        None,
        "the host end stays"
    );
    let info = attr_of(&req.payload, IFINFOMSG_LEN, IFLA_LINKINFO).unwrap();
    let peer = find(find(&info, IFLA_INFO_DATA).unwrap(), VETH_INFO_PEER)
        .unwrap()
        .to_vec();
    assert_eq!(attr_of(&peer, IFINFOMSG_LEN, IFLA_MTU).unwrap(), 1400u32.to_ne_bytes());
    assert_eq!(
        attr_of(&peer, IFINFOMSG_LEN, IFLA_ADDRESS).unwrap(),
        [10, 0, 0, 0, 0, 2]
    );
    use std::os::fd::AsRawFd;
    assert_eq!(
        attr_of(&peer, IFINFOMSG_LEN, IFLA_NET_NS_FD).unwrap(),
        (ns.as_raw_fd() as u32).to_ne_bytes()
    );
}

#[test]
fn bridge_port_flags_are_a_flagged_nest_sent_to_the_bridge_family() {
    let h = handle();
    h.set_port_flags(
        6,
        PortFlags {
            hairpin: Some(true),
            isolated: Some(true),
        },
    )
    .unwrap();
    let req = &h.transport().requests()[0];
    assert_eq!(req.kind, RTM_SETLINK);
    assert_eq!(req.payload[0], AF_BRIDGE);
    // the raw type must carry NLA_F_NESTED: check the bytes, not the masked type
    let body = &req.payload[IFINFOMSG_LEN..];
    assert_eq!(u16::from_ne_bytes([body[2], body[3]]), IFLA_PROTINFO | NLA_F_NESTED);
    let info = attr_of(&req.payload, IFINFOMSG_LEN, IFLA_PROTINFO).unwrap();
    assert_eq!(find(&info, IFLA_BRPORT_MODE).unwrap(), [1]);
    assert_eq!(find(&info, IFLA_BRPORT_ISOLATED).unwrap(), [1]);
}

#[test]
fn ipv4_addresses_get_a_broadcast_and_nodad_sets_the_flag() {
    let h = handle();
    h.add_address(2, "10.0.0.2/24".parse().unwrap(), AddrOptions::default())
        .unwrap();
    h.add_address(2, "10.0.0.2/31".parse().unwrap(), AddrOptions::default())
        .unwrap();
    h.add_address(
        2,
        "fd00::2/64".parse().unwrap(),
        AddrOptions {
            nodad: true,
            noprefixroute: false,
        },
    )
    .unwrap();
    let reqs = h.transport().requests();
    assert_eq!(
        attr_of(&reqs[0].payload, IFADDRMSG_LEN, IFA_BROADCAST).unwrap(),
        [10, 0, 0, 255]
    );
    assert_eq!(attr_of(&reqs[1].payload, IFADDRMSG_LEN, IFA_BROADCAST), None);
    assert_eq!(
        attr_of(&reqs[2].payload, IFADDRMSG_LEN, IFA_FLAGS).unwrap(),
        IFA_F_NODAD.to_ne_bytes()
    );
    assert_eq!(reqs[2].payload[0], AF_INET6);
    assert_eq!(reqs[2].payload[1], 64);
}

#[test]
fn route_deletes_use_the_kernels_wildcards_and_skip_metrics() {
    let h = handle();
    let r = RouteSpec {
        gateway: Some("10.0.0.1".parse().unwrap()),
        mtu: Some(1400),
        table: Some(1000),
        ..RouteSpec::new("0.0.0.0/0".parse().unwrap())
    };
    h.add_route(&r).unwrap();
    h.delete_route(&r).unwrap();
    let reqs = h.transport().requests();
    let (add, del) = (&reqs[0].payload, &reqs[1].payload);
    // rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type
    assert_eq!(&add[..8], &[AF_INET, 0, 0, 0, RT_TABLE_COMPAT, PROTO_BOOT, 0, 1]);
    assert_eq!(&del[..8], &[AF_INET, 0, 0, 0, RT_TABLE_COMPAT, 0, 255, 1]);
    assert_eq!(attr_of(add, RTMSG_LEN, RTA_TABLE).unwrap(), 1000u32.to_ne_bytes());
    assert!(attr_of(add, RTMSG_LEN, RTA_METRICS).is_some());
    assert!(attr_of(del, RTMSG_LEN, RTA_METRICS).is_none());
    assert_eq!(attr_of(add, RTMSG_LEN, RTA_DST), None, "a default route has no RTA_DST");
}

/// One `rtnexthop` with a gateway attribute.
fn raw_nexthop(ifindex: u32, hops: u8, gw: std::net::Ipv6Addr) -> Vec<u8> {
    let gw = raw_attr(RTA_GATEWAY, &gw.octets());
    let mut n = ((8 + gw.len()) as u16).to_ne_bytes().to_vec();
    n.extend([0, hops]);
    n.extend(ifindex.to_ne_bytes());
    n.extend(gw);
    n
}

/// Queues a route dump answering with one RTM_NEWROUTE of `payload`.
fn push_route(h: &Handle<FakeTransport>, payload: Vec<u8>) {
    h.transport().push_reply(Reply {
        messages: vec![Message {
            kind: RTM_NEWROUTE,
            flags: 0,
            payload,
        }],
        interrupted: false,
    });
}

/// An IPv6 default route with two next hops, as the kernel dumps it once a second
/// interface added its gateway: RTA_MULTIPATH, no RTA_GATEWAY or RTA_OIF of its own.
#[test]
fn multipath_routes_decode_every_next_hop() {
    let h = handle();
    let mut payload = vec![AF_INET6, 0, 0, 0, 254, PROTO_BOOT, 0, 1, 0, 0, 0, 0];
    payload.extend(raw_attr(RTA_TABLE, &254u32.to_ne_bytes()));
    payload.extend(raw_attr(RTA_PRIORITY, &1024u32.to_ne_bytes()));
    let mut hops = raw_nexthop(2, 0, "2001:db8:a::1".parse().unwrap());
    hops.extend(raw_nexthop(3, 1, "2001:db8:b::1".parse().unwrap()));
    payload.extend(raw_attr(RTA_MULTIPATH, &hops));
    push_route(&h, payload);
    let routes = h.routes(Family::V6).unwrap();
    assert_eq!(routes.len(), 1);
    let r = &routes[0];
    assert_eq!(r.dst, "::/0".parse::<ipnetwork::IpNetwork>().unwrap());
    assert_eq!((r.gateway, r.oif, r.metric), (None, None, Some(1024)));
    let a: std::net::IpAddr = "2001:db8:a::1".parse().unwrap();
    let b: std::net::IpAddr = "2001:db8:b::1".parse().unwrap();
    assert_eq!(r.next_hops(), vec![(Some(a), Some(2)), (Some(b), Some(3))]);
    assert_eq!(r.nexthops[1].hops, 1);
    assert!(r.has_gateway(a) && r.has_gateway(b));
    assert!(!r.has_gateway("2001:db8:c::1".parse().unwrap()));
}

/// A truncated next hop ends the list instead of reading past it.
#[test]
fn a_truncated_multipath_attribute_keeps_the_whole_next_hops() {
    let h = handle();
    let mut payload = vec![AF_INET6, 0, 0, 0, 254, PROTO_BOOT, 0, 1, 0, 0, 0, 0];
    let mut hops = raw_nexthop(2, 0, "2001:db8:a::1".parse().unwrap());
    let mut bad = raw_nexthop(3, 0, "2001:db8:b::1".parse().unwrap());
    bad[0] = 200;
    hops.extend(bad);
    payload.extend(raw_attr(RTA_MULTIPATH, &hops));
    push_route(&h, payload);
    let r = &h.routes(Family::V6).unwrap()[0];
    assert_eq!(r.next_hops(), vec![(Some("2001:db8:a::1".parse().unwrap()), Some(2))]);
}

/// IPAM routes go in as Go netlink's RouteAddEcmp: NLM_F_CREATE without NLM_F_EXCL.
#[test]
fn ecmp_adds_create_without_exclusive() {
    let h = handle();
    h.add_route_ecmp(&RouteSpec::new("0.0.0.0/0".parse().unwrap())).unwrap();
    h.add_route(&RouteSpec::new("0.0.0.0/0".parse().unwrap())).unwrap();
    let reqs = h.transport().requests();
    assert_eq!(reqs[0].flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE);
    assert_eq!(reqs[1].flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
}

#[test]
fn links_decode_from_the_kernel_form() {
    let mut l = link(3, "eth0");
    let vepa = Some(LinkKind::Macvlan(MacvlanData {
        mode: Some(MacvlanMode::Vepa),
        bcqueuelen: None,
    }));
    l.kind = vepa.clone();
    l.master = Some(2);
    l.flags = 0x1 | 0x100 | 0x10000;
    let h = handle();
    h.transport().push_links(&[l]);
    let got = h.link("eth0").unwrap();
    assert_eq!(got.kind, vepa);
    assert_eq!(got.master, Some(2));
    assert!(got.up && got.promisc && got.lower_up);
    assert_eq!(got.peer_index, Some(4));
    assert_eq!(got.mac.unwrap().to_string(), "0a:00:00:00:00:01");
}

#[test]
fn a_link_without_a_peer_elsewhere_reports_none() {
    let mut l = link(3, "br0");
    l.peer_index = Some(3);
    l.link_netnsid = None;
    let h = handle();
    h.transport().push_links(&[l]);
    assert_eq!(h.link("br0").unwrap().peer_index, None);
}

fn v6(index: u32, net: &str, flags: u32) -> Address {
    Address {
        index,
        address: net.parse().unwrap(),
        scope: Scope::Universe,
        flags,
        broadcast: None,
        label: None,
    }
}

#[test]
fn addresses_decode_with_flags_and_filter_by_link_and_family() {
    let h = handle();
    let v4 = Address {
        index: 2,
        address: "10.0.0.2/24".parse().unwrap(),
        scope: Scope::Universe,
        flags: IFA_F_PERMANENT,
        broadcast: Some("10.0.0.255".parse().unwrap()),
        label: None,
    };
    // a kernel without strict checking ignores the filter: the layer filters again
    h.transport()
        .push_addresses(&[v4.clone(), v6(2, "fd00::2/64", IFA_F_TENTATIVE), v6(3, "fd00::3/64", 0)]);
    let got = h.addresses(Some(2), Family::V6).unwrap();
    assert_eq!(got, vec![v6(2, "fd00::2/64", IFA_F_TENTATIVE)]);
    assert!(got[0].is_tentative());
    h.transport().push_addresses(std::slice::from_ref(&v4));
    assert_eq!(h.addresses(Some(2), Family::V4).unwrap(), vec![v4]);
    let req = &h.transport().requests()[0];
    assert_eq!(req.flags, NLM_F_REQUEST | NLM_F_DUMP);
    assert_eq!(req.payload[0], AF_INET6);
    assert_eq!(
        u32::from_ne_bytes(req.payload[4..8].try_into().unwrap()),
        2,
        "kernel-side filter by link"
    );
}

/// A link with carrier and oper state `state`.
fn carrier(index: u32, name: &str, state: OperState) -> Link {
    let mut l = link(index, name);
    l.flags = 0x1 | 0x10000;
    l.up = true;
    l.lower_up = true;
    l.oper_state = state;
    l
}

#[test]
fn settling_waits_for_tentative_addresses_to_clear() {
    let h = handle();
    h.transport().push_addresses(&[v6(2, "fd00::2/64", IFA_F_TENTATIVE)]);
    h.transport().push_links(&[carrier(2, "eth0", OperState::Up)]);
    h.transport().push_addresses(&[v6(2, "fd00::2/64", IFA_F_PERMANENT)]);
    h.settle_addresses(2, std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(h.transport().requests().len(), 3);
}

#[test]
fn settling_stops_at_a_dad_failure() {
    let h = handle();
    h.transport()
        .push_addresses(&[v6(2, "fd00::2/64", IFA_F_TENTATIVE | IFA_F_DADFAILED)]);
    let e = h.settle_addresses(2, std::time::Duration::from_secs(5)).unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::DadFailed {
            address: "fd00::2/64".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "settle addresses of link index 2: duplicate address detection failed for fd00::2/64"
    );
}

#[test]
fn settling_gives_up_at_the_deadline() {
    let h = handle();
    h.transport().push_links(&[link(2, "eth0")]);
    h.transport().push_addresses(&[v6(2, "fd00::2/64", IFA_F_TENTATIVE)]);
    h.transport().push_links(&[carrier(2, "eth0", OperState::Up)]);
    let e = h.settle_addresses("eth0", std::time::Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Timeout);
    assert_eq!(
        e.to_string(),
        "settle addresses of eth0: still tentative after 0 seconds"
    );
}

/// DAD cannot run without carrier: the wait ends at once, the addresses stay tentative.
#[test]
fn settling_a_link_without_carrier_ends_at_once() {
    let h = handle();
    h.transport().push_addresses(&[v6(2, "fd00::2/64", IFA_F_TENTATIVE)]);
    let mut down = link(2, "eth0");
    down.flags = 0x1;
    down.oper_state = OperState::LowerLayerDown;
    h.transport().push_links(&[down]);
    h.settle_addresses(2, std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(h.transport().requests().len(), 2, "no second look");
}

/// At the deadline only an oper-up link is an error (the reference's current rule).
#[test]
fn settling_times_out_only_on_an_oper_up_link() {
    for state in [OperState::Dormant, OperState::Unknown, OperState::Testing] {
        let h = handle();
        h.transport().push_addresses(&[v6(2, "fd00::2/64", IFA_F_TENTATIVE)]);
        h.transport().push_links(&[carrier(2, "eth0", state)]);
        h.settle_addresses(2, std::time::Duration::ZERO).unwrap();
    }
}

/// An AF_BRIDGE link message for port `index` carrying `vlans` as (flags, vid) entries.
fn bridge_vlan_message(index: u32, vlans: &[(u16, u16)]) -> Message {
    use neli::consts::rtnl::{Ifla, RtAddrFamily};
    use neli::rtnl::IfinfomsgBuilder;
    use neli::types::{Buffer, RtBuffer};
    let mut spec = Nest::new();
    for (flags, vid) in vlans {
        let mut info = flags.to_ne_bytes().to_vec();
        info.extend_from_slice(&vid.to_ne_bytes());
        spec.push(attr(IFLA_BRIDGE_VLAN_INFO, Buffer::from(info)).unwrap());
    }
    let mut a = RtBuffer::<Ifla, Buffer>::new();
    a.push(attr(IFLA_AF_SPEC | NLA_F_NESTED, spec).unwrap());
    let msg = IfinfomsgBuilder::default()
        .ifi_family(RtAddrFamily::from(AF_BRIDGE))
        .ifi_index(index as libc::c_int)
        .rtattrs(a)
        .build()
        .unwrap();
    Message {
        kind: RTM_NEWLINK,
        flags: 0,
        payload: encode(&msg).unwrap(),
    }
}

#[test]
fn port_vlans_are_read_from_a_bridge_family_dump() {
    let h = handle();
    h.transport().push_reply(Reply {
        messages: vec![
            bridge_vlan_message(5, &[(BRIDGE_VLAN_INFO_PVID | BRIDGE_VLAN_INFO_UNTAGGED, 9)]),
            bridge_vlan_message(6, &[(BRIDGE_VLAN_INFO_PVID | BRIDGE_VLAN_INFO_UNTAGGED, 1), (0, 101)]),
        ],
        interrupted: false,
    });
    let vlans = h.port_vlans(6).unwrap();
    assert_eq!(
        vlans,
        vec![
            PortVlan {
                vid: 1,
                pvid: true,
                untagged: true
            },
            PortVlan {
                vid: 101,
                pvid: false,
                untagged: false
            },
        ]
    );
    let req = &h.transport().requests()[0];
    assert_eq!(req.kind, RTM_GETLINK);
    assert_eq!(req.flags & NLM_F_DUMP, NLM_F_DUMP);
    assert_eq!(req.payload[0], AF_BRIDGE);
    assert_eq!(
        attr_of(&req.payload, IFINFOMSG_LEN, IFLA_EXT_MASK).unwrap(),
        RTEXT_FILTER_BRVLAN.to_ne_bytes()
    );
}

#[test]
fn a_random_host_name_clash_is_retried_and_a_peer_clash_is_typed() {
    let h = handle();
    h.transport().push_errno(libc::EEXIST); // create: clash
    h.transport().push_links(&[link(7, "veth00000000")]); // the host name is taken
    h.transport().push_ack(); // create with a fresh name
    h.transport().push_links(&[link(8, "veth11111111")]); // lookup of the created end
    let l = h.create_veth_random_name(&veth("ignored", "eth0")).unwrap();
    assert_eq!(l.index, 8);
    let names: Vec<String> = h
        .transport()
        .requests()
        .iter()
        .step_by(2)
        .map(|m| {
            let name = attr_of(&m.payload, IFINFOMSG_LEN, IFLA_IFNAME).unwrap();
            String::from_utf8(name).unwrap().trim_end_matches('\0').to_string()
        })
        .collect();
    assert_eq!(names.len(), 2);
    assert_ne!(names[0], names[1], "a fresh name after a clash");
    for n in &names {
        assert!(n.starts_with("veth") && n.len() == 12, "random host name {n:?}");
    }

    let h = handle();
    h.transport().push_errno(libc::EEXIST);
    h.transport().push_errno(libc::ENODEV); // the host name is free: the clash is the peer's
    let e = h.create_veth_random_name(&veth("ignored", "eth0")).unwrap_err();
    assert!(matches!(e, VethError::PeerExists), "{e:?}");
    assert_eq!(h.transport().requests().len(), 2, "no retry on a peer clash");

    let h = handle();
    for i in 0..VETH_NAME_ATTEMPTS as u32 {
        h.transport().push_errno(libc::EEXIST);
        h.transport().push_links(&[link(i + 1, "taken")]);
    }
    let e = h.create_veth_random_name(&veth("ignored", "eth0")).unwrap_err();
    assert!(matches!(e, VethError::NoUniqueName { attempts: 10 }), "{e:?}");
}

#[test]
fn an_alias_is_sent_without_a_nul_and_an_empty_one_is_zero_length() {
    let h = handle();
    h.transport().push_ack();
    h.transport().push_ack();
    h.set_alias(7, "ens5").unwrap();
    h.set_alias(7, "").unwrap();
    let reqs = h.transport().requests();
    assert_eq!(attr_of(&reqs[0].payload, IFINFOMSG_LEN, IFLA_IFALIAS).unwrap(), b"ens5");
    assert_eq!(attr_of(&reqs[1].payload, IFINFOMSG_LEN, IFLA_IFALIAS).unwrap(), b"");
    assert_eq!(reqs[0].kind, RTM_NEWLINK);
}

#[test]
fn an_alias_is_decoded_and_an_empty_one_is_none() {
    let h = handle();
    let mut l = link(3, "net1");
    l.alias = Some("ens5".into());
    h.transport().push_links(&[l]);
    assert_eq!(h.link(3).unwrap().alias.as_deref(), Some("ens5"));
    let mut l = link(3, "net1");
    l.alias = Some(String::new());
    h.transport().push_links(&[l]);
    assert_eq!(h.link(3).unwrap().alias, None);
}

#[test]
fn move_and_rename_is_one_request_with_the_namespace_and_the_name() {
    let h = handle();
    h.transport().push_ack();
    let ns = crate::netns::Netns::current().unwrap();
    h.move_and_rename(9, &ns, "net1").unwrap();
    let req = &h.transport().requests()[0];
    assert_eq!(req.kind, RTM_NEWLINK);
    let fd = attr_of(&req.payload, IFINFOMSG_LEN, IFLA_NET_NS_FD).unwrap();
    assert_eq!(fd, (std::os::fd::AsRawFd::as_raw_fd(&ns) as u32).to_ne_bytes());
    assert_eq!(attr_of(&req.payload, IFINFOMSG_LEN, IFLA_IFNAME).unwrap(), b"net1\0");
    // addressed by index: the kernel renames only a link selected by index
    assert_eq!(i32::from_ne_bytes(req.payload[4..8].try_into().unwrap()), 9);
}

// ---------------------------------------------------------------- device settings

#[test]
fn ipv4_settings_are_nested_in_af_spec_by_their_devconf_numbers() {
    let h = handle();
    h.set_ipv4_conf(7, &[(Ipv4Conf::ArpNotify, 1), (Ipv4Conf::RouteLocalnet, 1)])
        .unwrap();
    let req = &h.transport().requests()[0];
    assert_eq!(req.kind, RTM_NEWLINK);
    assert_ne!(req.flags & NLM_F_ACK, 0);
    assert_eq!(req.flags & NLM_F_CREATE, 0, "changes the link, creates nothing");
    assert_eq!(&req.payload[4..8], &7i32.to_ne_bytes(), "ifi_index");
    let spec = attr_of(&req.payload, IFINFOMSG_LEN, IFLA_AF_SPEC).unwrap();
    let inet = find(&spec, AF_INET as u16).unwrap();
    let conf = find(inet, super::devconf::IFLA_INET_CONF).unwrap();
    let settings: Vec<(u16, u32)> = attrs(conf).map(|(t, p)| (t, as_u32(p).unwrap())).collect();
    // uapi/linux/ip.h: IPV4_DEVCONF_ARP_NOTIFY 22, IPV4_DEVCONF_ROUTE_LOCALNET 26
    assert_eq!(settings, vec![(22, 1), (26, 1)]);
    assert_eq!(attrs(&spec).count(), 1, "IPv4 alone");
}

#[test]
fn a_failed_ipv4_setting_names_the_leaf_and_the_link() {
    let h = handle();
    h.transport().push_errno(libc::ENODEV);
    let e = h.set_ipv4_conf(9, &[(Ipv4Conf::RouteLocalnet, 1)]).unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(
        e.to_string(),
        "set ipv4 route_localnet=1 of link index 9: No such device"
    );
}

/// RTM_NEWLINK's IFLA_AF_SPEC: IPv4's settings are an array from IPV4_DEVCONF_FORWARDING
/// (1), IPv6's an array from DEVCONF_FORWARDING (0).
fn link_with_af_spec(index: u32, ipv4: &[u32], ipv6: Option<&[i32]>) -> Message {
    let words = |v: Vec<[u8; 4]>| v.concat();
    let mut spec = raw_attr(
        AF_INET as u16,
        &raw_attr(
            super::devconf::IFLA_INET_CONF,
            &words(ipv4.iter().map(|v| v.to_ne_bytes()).collect()),
        ),
    );
    if let Some(ipv6) = ipv6 {
        let mut inet6 = raw_attr(1, &0u32.to_ne_bytes()); // IFLA_INET6_FLAGS first, as the kernel sends it
        inet6.extend(raw_attr(
            super::devconf::IFLA_INET6_CONF,
            &words(ipv6.iter().map(|v| v.to_ne_bytes()).collect()),
        ));
        spec.extend(raw_attr(AF_INET6 as u16, &inet6));
    }
    let mut payload = encode_link(&link(index, "va")).payload;
    payload.extend(raw_attr(IFLA_AF_SPEC, &spec));
    Message {
        kind: RTM_NEWLINK,
        flags: 0,
        payload,
    }
}

#[test]
fn device_settings_decode_by_their_devconf_numbers() {
    let h = handle();
    let mut ipv4 = vec![0u32; 33];
    ipv4[21] = 1; // ARP_NOTIFY (22)
    ipv4[25] = 7; // ROUTE_LOCALNET (26)
    let mut ipv6 = vec![0i32; 60];
    ipv6[3] = 2; // ACCEPT_RA
    ipv6[27] = -1; // ACCEPT_DAD
    ipv6[42] = 1; // KEEP_ADDR_ON_DOWN
    h.transport().push_reply(Reply {
        messages: vec![link_with_af_spec(3, &ipv4, Some(&ipv6))],
        interrupted: false,
    });
    let c = h.devconf(3).unwrap();
    assert_eq!(c.ipv4(Ipv4Conf::Forwarding), Some(0));
    assert_eq!(c.ipv4(Ipv4Conf::ArpNotify), Some(1));
    assert_eq!(c.ipv4(Ipv4Conf::RouteLocalnet), Some(7));
    assert_eq!(c.ipv6(Ipv6Conf::AcceptRa), Some(2));
    assert_eq!(c.ipv6(Ipv6Conf::AcceptDad), Some(-1));
    assert_eq!(c.ipv6(Ipv6Conf::KeepAddrOnDown), Some(1));
    assert_eq!(c.ipv6(Ipv6Conf::DisableIpv6), Some(0));
    let req = &h.transport().requests()[0];
    assert_eq!(
        (req.kind, req.flags & NLM_F_DUMP),
        (RTM_GETLINK, 0),
        "one link, no dump"
    );

    // IPv6 disabled at boot: the kernel sends no AF_INET6
    h.transport().push_reply(Reply {
        messages: vec![link_with_af_spec(3, &ipv4, None)],
        interrupted: false,
    });
    let c = h.devconf(3).unwrap();
    assert_eq!(
        (c.ipv4(Ipv4Conf::ArpNotify), c.ipv6(Ipv6Conf::AcceptRa)),
        (Some(1), None)
    );
}

#[test]
fn forwarding_asks_netconf_about_all_devices() {
    use super::devconf::*;
    let h = handle();
    let reply = |on: u32| {
        let mut payload = vec![AF_INET, 0, 0, 0];
        payload.extend(raw_attr(NETCONFA_IFINDEX, &(-1i32).to_ne_bytes()));
        payload.extend(raw_attr(NETCONFA_FORWARDING, &on.to_ne_bytes()));
        Reply {
            messages: vec![Message {
                kind: RTM_NEWNETCONF,
                flags: 0,
                payload,
            }],
            interrupted: false,
        }
    };
    h.transport().push_reply(reply(1));
    assert_eq!(h.forwarding(Family::V4).unwrap(), Some(true));
    h.transport().push_reply(reply(0));
    assert_eq!(h.forwarding(Family::V6).unwrap(), Some(false));
    let reqs = h.transport().requests();
    for (req, af) in reqs.iter().zip([AF_INET, AF_INET6]) {
        assert_eq!((req.kind, req.payload[0]), (RTM_GETNETCONF, af));
        assert_eq!(
            find(&req.payload[NETCONFMSG_LEN..], NETCONFA_IFINDEX).unwrap(),
            &(-1i32).to_ne_bytes(),
            "NETCONFA_IFINDEX_ALL"
        );
    }
    h.transport().push_errno(libc::EAFNOSUPPORT);
    assert_eq!(h.forwarding(Family::V6).unwrap(), None, "no IPv6 in this kernel");
}

/// A rule as the kernel dumps it: the fib_rule_hdr, then attributes.
fn raw_rule(family: u8, src: Option<(&[u8], u8)>, table: u32, priority: u32, more: &[(u16, &[u8])]) -> Message {
    let (src_bytes, src_len) = src.unwrap_or((&[], 0));
    let mut payload = vec![
        family,
        0,
        src_len,
        0,
        u8::try_from(table).unwrap_or(RT_TABLE_COMPAT),
        0,
        0,
        1,
    ];
    payload.extend(0u32.to_ne_bytes());
    payload.extend(raw_attr(FRA_TABLE, &table.to_ne_bytes()));
    payload.extend(raw_attr(FRA_SUPPRESS_PREFIXLEN, &u32::MAX.to_ne_bytes()));
    payload.extend(raw_attr(FRA_PROTOCOL, &[0]));
    if priority > 0 {
        payload.extend(raw_attr(FRA_PRIORITY, &priority.to_ne_bytes()));
    }
    if src.is_some() {
        payload.extend(raw_attr(FRA_SRC, src_bytes));
    }
    for (ty, p) in more {
        payload.extend(raw_attr(*ty, p));
    }
    Message {
        kind: RTM_NEWRULE,
        flags: 0,
        payload,
    }
}

/// The request is the one Go's netlink `RuleAdd` sends for the reference's sbr rule: no
/// priority (the kernel picks it), the table in the header up to 255 and in FRA_TABLE
/// above, reserved byte `RTPROT_BOOT`, action "to table".
#[test]
fn source_rules_are_sent_as_the_references_netlink_sends_them() {
    let h = handle();
    let v4 = SourceRule {
        src: "10.0.0.2/32".parse().unwrap(),
        table: 100,
    };
    let v6 = SourceRule {
        src: "2001:db8::2/128".parse().unwrap(),
        table: 1000,
    };
    h.add_source_rule(&v4).unwrap();
    h.add_source_rule(&v6).unwrap();
    let reqs = h.transport().requests();
    assert_eq!(reqs[0].kind, RTM_NEWRULE);
    assert_eq!(reqs[0].flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
    // family, dst_len, src_len, tos, table, res1, res2, action, flags
    assert_eq!(&reqs[0].payload[..12], &[AF_INET, 0, 32, 0, 100, 3, 0, 1, 0, 0, 0, 0]);
    assert_eq!(
        attributes(&reqs[0].payload, RTMSG_LEN),
        vec![(FRA_SRC, vec![10, 0, 0, 2])]
    );
    assert_eq!(&reqs[1].payload[..12], &[AF_INET6, 0, 128, 0, 0, 3, 0, 1, 0, 0, 0, 0]);
    let attrs = attributes(&reqs[1].payload, RTMSG_LEN);
    assert_eq!(attrs.len(), 2);
    assert_eq!(attrs[0].0, FRA_SRC);
    assert_eq!(attrs[1], (FRA_TABLE, 1000u32.to_ne_bytes().to_vec()));
}

#[test]
fn rules_decode_and_tell_a_source_lookup_from_a_rule_that_selects_more() {
    let h = handle();
    let a: std::net::IpAddr = "10.0.0.2".parse().unwrap();
    h.transport().push_reply(Reply {
        messages: vec![
            raw_rule(AF_INET, None, 255, 0, &[]),
            raw_rule(AF_INET, Some((&[10, 0, 0, 2], 32)), 100, 32765, &[]),
            raw_rule(AF_INET, Some((&[10, 0, 0, 2], 32)), 300, 32764, &[(3, b"eth1\0")]),
            raw_rule(AF_INET, Some((&[10, 0, 0, 0], 24)), 101, 32763, &[]),
            raw_rule(
                AF_INET,
                Some((&[10, 0, 0, 2], 32)),
                103,
                32762,
                &[(FRA_SUPPRESS_PREFIXLEN, &0u32.to_ne_bytes())],
            ),
            raw_rule(128, None, 253, 32767, &[]),
            raw_rule(
                AF_INET6,
                Some((&"2001:db8::2".parse::<std::net::Ipv6Addr>().unwrap().octets(), 128)),
                102,
                32765,
                &[],
            ),
        ],
        interrupted: false,
    });
    let rules = h.rules(Family::All).unwrap();
    assert_eq!(rules.len(), 6, "the multicast-routing family's rule is left out");
    assert_eq!((rules[0].table, rules[0].priority, rules[0].src), (255, 0, None));
    assert_eq!(
        (rules[1].table, rules[1].priority, rules[1].src),
        (100, 32765, Some("10.0.0.2/32".parse().unwrap()))
    );
    assert!(rules[1].is_lookup_from(a));
    assert_eq!(rules[2].table, 300, "FRA_TABLE wins over the header's compat value");
    assert!(
        rules[2].more_selectors,
        "an input interface selects more than the source"
    );
    assert!(!rules[2].is_lookup_from(a));
    assert!(
        !rules[3].is_lookup_from("10.0.0.0".parse().unwrap()),
        "a subnet is no address"
    );
    assert!(
        !rules[4].is_lookup_from(a),
        "a suppressed prefix length is a condition of its own"
    );
    assert_eq!(rules[5].family, Family::V6);
    assert!(rules[5].is_lookup_from("2001:db8::2".parse().unwrap()));
    let req = &h.transport().requests()[0];
    assert_eq!((req.kind, req.flags), (RTM_GETRULE, NLM_F_REQUEST | NLM_F_DUMP));
    assert_eq!(
        &req.payload[..12],
        &[0u8; 12],
        "a dump request carries nothing but the family"
    );
}

#[test]
fn rule_deletes_name_priority_source_and_table() {
    let h = handle();
    let rule = RuleInfo {
        family: Family::V4,
        priority: 32765,
        src: Some("10.0.0.2/32".parse().unwrap()),
        dst: None,
        table: 100,
        action: 1,
        more_selectors: false,
    };
    h.delete_rule(&rule).unwrap();
    h.transport().push_errno(libc::ENOENT);
    let gone = h.delete_rule(&rule).unwrap_err();
    assert!(gone.is_not_found(), "{gone}");
    assert_eq!(
        gone.to_string(),
        "delete rule 32765: from 10.0.0.2/32 lookup 100: No such file or directory"
    );
    let req = &h.transport().requests()[0];
    assert_eq!((req.kind, req.flags), (RTM_DELRULE, NLM_F_REQUEST | NLM_F_ACK));
    assert_eq!(&req.payload[..12], &[AF_INET, 0, 32, 0, 100, 3, 0, 1, 0, 0, 0, 0]);
    assert_eq!(
        attributes(&req.payload, RTMSG_LEN),
        vec![
            (FRA_SRC, vec![10, 0, 0, 2]),
            (FRA_PRIORITY, 32765u32.to_ne_bytes().to_vec())
        ]
    );
}

#[test]
fn a_route_moves_to_another_table_with_every_attribute() {
    let info = RouteInfo {
        dst: "10.0.0.0/24".parse().unwrap(),
        gateway: None,
        oif: Some(2),
        scope: Scope::Link,
        table: TABLE_MAIN,
        metric: Some(5),
        mtu: Some(1400),
        advmss: None,
        prefsrc: Some("10.0.0.2".parse().unwrap()),
        protocol: PROTO_KERNEL,
        route_type: RTN_UNICAST,
        nexthops: vec![],
    };
    let copy = info.in_table(100).unwrap();
    assert_eq!(
        (
            copy.table,
            copy.scope,
            copy.protocol,
            copy.prefsrc,
            copy.metric,
            copy.mtu,
            copy.oif
        ),
        (
            Some(100),
            Some(Scope::Link),
            Some(PROTO_KERNEL),
            info.prefsrc,
            Some(5),
            Some(1400),
            Some(2)
        )
    );
    let local = RouteInfo {
        route_type: 2,
        ..info.clone()
    };
    assert_eq!(
        local.in_table(100),
        None,
        "only unicast routes are stated by a RouteSpec"
    );
    let multipath = RouteInfo {
        nexthops: vec![NextHop {
            gateway: None,
            oif: Some(3),
            hops: 0,
        }],
        ..info
    };
    assert_eq!(multipath.in_table(100), None);
}
