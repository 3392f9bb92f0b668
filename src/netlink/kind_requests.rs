//! The create requests of the kinds this kernel lacks (dummy, ipvlan, vlan, vrf), byte for
//! byte against the requests iproute2 and the reference plugins send for the same link. The
//! kernel refuses each of them here, so these bytes are the proof that the requests are
//! right; a kernel with the modules runs the namespace tests as well.
//!
//! The captures are the iov bytes of `strace -f -e trace=sendmsg,sendto -e write=all` (the
//! request is sent before the kernel refuses it), in a private namespace whose master `m0`
//! (a veth end) has index 3:
//! * iproute2 6.1: `ip link add link m0 name iv0 type ipvlan mode l2` and the like;
//! * the Debian reference 1.1.1 (`/usr/lib/cni/ipvlan`, `vlan`, `vrf`), run on a config
//!   with `"master": "m0"`: its temporary name is random and its namespace descriptor is
//!   its own fd 3. Its netlink library sent `IFLA_TXQLEN 0` from a zeroed `LinkAttrs`; the
//!   current reference (netlink v1.3.1, `NewLinkAttrs`) sends no IFLA_TXQLEN, nor does
//!   cnibox, so the comparison drops that attribute from the capture.
//!
//! Only the nlmsghdr's sequence number and port id differ between senders; the transport
//! sets them, so the comparison is of type, flags and payload.
use super::testing::*;
use super::wire::*;
use super::*;
use std::os::fd::AsRawFd;

/// A captured request: (nlmsg_type, nlmsg_flags, payload after the nlmsghdr).
fn captured(hex: &str) -> (u16, u16, Vec<u8>) {
    let bytes: Vec<u8> = hex
        .split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).expect("hex bytes"))
        .collect();
    let len = u32::from_ne_bytes(bytes[0..4].try_into().unwrap()) as usize;
    assert_eq!(len, bytes.len(), "the capture is one whole message");
    let kind = u16::from_ne_bytes([bytes[4], bytes[5]]);
    let flags = u16::from_ne_bytes([bytes[6], bytes[7]]);
    (kind, flags, bytes[16..].to_vec())
}

/// The top-level attributes of an ifinfomsg payload, rebuilt with `edit` applied to each
/// (None drops it); lengths and padding are the kernel's (NLA_ALIGN).
fn edit_attrs(payload: &[u8], edit: impl Fn(u16, &[u8]) -> Option<Vec<u8>>) -> Vec<u8> {
    let mut out = payload[..IFINFOMSG_LEN].to_vec();
    for (ty, p) in attributes(payload, IFINFOMSG_LEN) {
        let Some(p) = edit(ty, &p) else { continue };
        out.extend_from_slice(&((4 + p.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&ty.to_ne_bytes());
        out.extend_from_slice(&p);
        out.resize((out.len() + 3) & !3, 0);
    }
    out
}

/// The reference's request as the current reference sends it, for a namespace whose
/// descriptor is `fd` in this process: v1.1.1's `IFLA_TXQLEN 0` dropped, its fd 3 replaced.
fn as_current_reference(payload: &[u8], fd: Option<u32>) -> Vec<u8> {
    edit_attrs(payload, |ty, p| match ty {
        IFLA_TXQLEN => None,
        IFLA_NET_NS_FD => Some(fd.expect("the capture moves the link").to_ne_bytes().to_vec()),
        _ => Some(p.to_vec()),
    })
}

/// The one request `create_link` sends for `spec`: (type, flags, payload).
fn ours(spec: &LinkSpec<'_>) -> (u16, u16, Vec<u8>) {
    let h = Handle::with_transport(FakeTransport::new());
    h.create_link(spec).unwrap();
    let reqs = h.transport().requests();
    assert_eq!(reqs.len(), 1);
    (reqs[0].kind, reqs[0].flags, reqs[0].payload.clone())
}

fn ipvlan(mode: IpvlanMode) -> LinkKind {
    LinkKind::Ipvlan(IpvlanData {
        mode: Some(mode),
        flags: 0,
    })
}

fn vlan(id: u16, protocol: Option<VlanProtocol>) -> LinkKind {
    LinkKind::Vlan(VlanData { id, protocol })
}

/// `RTM_NEWLINK`, `NLM_F_REQUEST|NLM_F_ACK|NLM_F_EXCL|NLM_F_CREATE`, as every sender has it.
const NEWLINK_CREATE: (u16, u16) = (16, 0x0605);

#[test]
fn create_requests_are_the_bytes_iproute2_sends() {
    let cases: [(&str, LinkSpec<'_>, &str); 9] = [
        (
            "ip link add link m0 name iv0 type ipvlan mode l2",
            LinkSpec {
                lower: Some(3),
                ..LinkSpec::new("iv0", ipvlan(IpvlanMode::L2))
            },
            "54 00 00 00 10 00 05 06 08 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 08 00 03 00 69 76 30 00 24 00 12 00 0a 00 01 00 69 70 76 6c 61 6e 00 00 \
             14 00 02 00 06 00 01 00 00 00 00 00 06 00 02 00 00 00 00 00",
        ),
        (
            "ip link add link m0 name iv1 type ipvlan mode l3",
            LinkSpec {
                lower: Some(3),
                ..LinkSpec::new("iv1", ipvlan(IpvlanMode::L3))
            },
            "54 00 00 00 10 00 05 06 09 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 08 00 03 00 69 76 31 00 24 00 12 00 0a 00 01 00 69 70 76 6c 61 6e 00 00 \
             14 00 02 00 06 00 01 00 01 00 00 00 06 00 02 00 00 00 00 00",
        ),
        (
            "ip link add link m0 name iv2 type ipvlan mode l3s",
            LinkSpec {
                lower: Some(3),
                ..LinkSpec::new("iv2", ipvlan(IpvlanMode::L3s))
            },
            "54 00 00 00 10 00 05 06 09 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 08 00 03 00 69 76 32 00 24 00 12 00 0a 00 01 00 69 70 76 6c 61 6e 00 00 \
             14 00 02 00 06 00 01 00 02 00 00 00 06 00 02 00 00 00 00 00",
        ),
        (
            "ip link add link m0 name vl0 type vlan id 5",
            LinkSpec {
                lower: Some(3),
                ..LinkSpec::new("vl0", vlan(5, None))
            },
            "48 00 00 00 10 00 05 06 09 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 08 00 03 00 76 6c 30 00 18 00 12 00 08 00 01 00 76 6c 61 6e \
             0c 00 02 00 06 00 01 00 05 00 00 00",
        ),
        (
            // the protocol is an ethertype in network order: 88 a8 on every host
            "ip link add link m0 name vl1 type vlan id 4094 protocol 802.1ad",
            LinkSpec {
                lower: Some(3),
                ..LinkSpec::new("vl1", vlan(4094, Some(VlanProtocol::Dot1Ad)))
            },
            "50 00 00 00 10 00 05 06 0a 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 08 00 03 00 76 6c 31 00 20 00 12 00 08 00 01 00 76 6c 61 6e \
             14 00 02 00 06 00 01 00 fe 0f 00 00 06 00 05 00 88 a8 00 00",
        ),
        (
            "ip link add link m0 name vl2 type vlan id 0",
            LinkSpec {
                lower: Some(3),
                ..LinkSpec::new("vl2", vlan(0, None))
            },
            "48 00 00 00 10 00 05 06 0a 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 08 00 03 00 76 6c 32 00 18 00 12 00 08 00 01 00 76 6c 61 6e \
             0c 00 02 00 06 00 01 00 00 00 00 00",
        ),
        (
            "ip link add d0 type dummy",
            LinkSpec::new("d0", LinkKind::Dummy),
            "38 00 00 00 10 00 05 06 0a 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             07 00 03 00 64 30 00 00 10 00 12 00 09 00 01 00 64 75 6d 6d 79 00 00 00",
        ),
        (
            "ip link add vrf0 type vrf table 10",
            LinkSpec::new("vrf0", LinkKind::Vrf(VrfData { table: 10 })),
            "44 00 00 00 10 00 05 06 0b 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             09 00 03 00 76 72 66 30 00 00 00 00 18 00 12 00 07 00 01 00 76 72 66 00 \
             0c 00 02 00 08 00 01 00 0a 00 00 00",
        ),
        (
            "ip link add vrf1 type vrf table 4294967295",
            LinkSpec::new("vrf1", LinkKind::Vrf(VrfData { table: u32::MAX })),
            "44 00 00 00 10 00 05 06 0b 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             09 00 03 00 76 72 66 31 00 00 00 00 18 00 12 00 07 00 01 00 76 72 66 00 \
             0c 00 02 00 08 00 01 00 ff ff ff ff",
        ),
    ];
    for (command, spec, hex) in cases {
        let (kind, flags, payload) = captured(hex);
        assert_eq!((kind, flags), NEWLINK_CREATE, "{command}");
        assert_eq!(ours(&spec), (kind, flags, payload), "{command}");
    }
}

/// iproute2 puts an `mtu` given before `name` first; the attributes are the same.
#[test]
fn an_mtu_is_the_attribute_iproute2_sends_in_its_own_order() {
    let (_, _, payload) = captured(
        "50 00 00 00 10 00 05 06 0b 63 0f 6b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
         08 00 04 00 78 05 00 00 08 00 05 00 03 00 00 00 08 00 03 00 76 6c 33 00 18 00 12 00 08 00 01 00 \
         76 6c 61 6e 0c 00 02 00 06 00 01 00 07 00 00 00",
    );
    let spec = LinkSpec {
        lower: Some(3),
        mtu: Some(1400),
        ..LinkSpec::new("vl3", vlan(7, None))
    };
    let (_, _, mine) = ours(&spec);
    let sorted = |p: &[u8]| {
        let mut a = attributes(p, IFINFOMSG_LEN);
        a.sort();
        a
    };
    assert_eq!(sorted(&mine), sorted(&payload));
    assert_eq!(mine.len(), payload.len());
}

#[test]
fn create_requests_are_the_bytes_the_reference_sends() {
    let ns = crate::netns::Netns::current().unwrap();
    let fd = ns.as_raw_fd() as u32;
    let cases: [(&str, &str, LinkKind, Option<u32>, &str); 4] = [
        (
            r#"ipvlan {"master":"m0"} (mode "" is l2)"#,
            "vethe5f37dc1",
            ipvlan(IpvlanMode::L2),
            None,
            "70 00 00 00 10 00 05 06 02 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 11 00 03 00 76 65 74 68 65 35 66 33 37 64 63 31 00 00 00 00 \
             08 00 0d 00 00 00 00 00 08 00 1c 00 03 00 00 00 24 00 12 00 0a 00 01 00 69 70 76 6c 61 6e 00 00 \
             14 00 02 00 06 00 01 00 00 00 00 00 06 00 02 00 00 00 00 00",
        ),
        (
            r#"ipvlan {"master":"m0","mode":"l3s","mtu":1400}"#,
            "vethd8400b87",
            ipvlan(IpvlanMode::L3s),
            Some(1400),
            "78 00 00 00 10 00 05 06 02 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 11 00 03 00 76 65 74 68 64 38 34 30 30 62 38 37 00 00 00 00 \
             08 00 04 00 78 05 00 00 08 00 0d 00 00 00 00 00 08 00 1c 00 03 00 00 00 \
             24 00 12 00 0a 00 01 00 69 70 76 6c 61 6e 00 00 14 00 02 00 06 00 01 00 02 00 00 00 \
             06 00 02 00 00 00 00 00",
        ),
        (
            r#"vlan {"master":"m0","vlanId":5}"#,
            "vethad90b5c8",
            vlan(5, None),
            None,
            "64 00 00 00 10 00 05 06 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 11 00 03 00 76 65 74 68 61 64 39 30 62 35 63 38 00 00 00 00 \
             08 00 0d 00 00 00 00 00 08 00 1c 00 03 00 00 00 18 00 12 00 08 00 01 00 76 6c 61 6e \
             0c 00 02 00 06 00 01 00 05 00 00 00",
        ),
        (
            r#"vlan {"master":"m0","vlanId":4094,"mtu":1400}"#,
            "veth8c90e72c",
            vlan(4094, None),
            Some(1400),
            "6c 00 00 00 10 00 05 06 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             08 00 05 00 03 00 00 00 11 00 03 00 76 65 74 68 38 63 39 30 65 37 32 63 00 00 00 00 \
             08 00 04 00 78 05 00 00 08 00 0d 00 00 00 00 00 08 00 1c 00 03 00 00 00 \
             18 00 12 00 08 00 01 00 76 6c 61 6e 0c 00 02 00 06 00 01 00 fe 0f 00 00",
        ),
    ];
    for (config, tmp_name, kind, mtu, hex) in cases {
        let (k, flags, payload) = captured(hex);
        assert_eq!((k, flags), NEWLINK_CREATE, "{config}");
        // born in the container namespace under the temporary name, on master index 3
        let spec = LinkSpec {
            lower: Some(3),
            netns: Some(&ns),
            mtu,
            ..LinkSpec::new(tmp_name, kind)
        };
        assert_eq!(
            ours(&spec),
            (k, flags, as_current_reference(&payload, Some(fd))),
            "{config}"
        );
    }
}

/// The VRF the reference creates inside the container namespace (no lower link, no netns
/// attribute), with the configured table or the first free one (1 in an empty namespace).
#[test]
fn vrf_create_requests_are_the_bytes_the_reference_sends() {
    for (table, hex) in [
        (
            10,
            "4c 00 00 00 10 00 05 06 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             09 00 03 00 62 6c 75 65 00 00 00 00 08 00 0d 00 00 00 00 00 18 00 12 00 07 00 01 00 76 72 66 00 \
             0c 00 02 00 08 00 01 00 0a 00 00 00",
        ),
        (
            1,
            "4c 00 00 00 10 00 05 06 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             09 00 03 00 62 6c 75 65 00 00 00 00 08 00 0d 00 00 00 00 00 18 00 12 00 07 00 01 00 76 72 66 00 \
             0c 00 02 00 08 00 01 00 01 00 00 00",
        ),
    ] {
        let (k, flags, payload) = captured(hex);
        let spec = LinkSpec::new("blue", LinkKind::Vrf(VrfData { table }));
        assert_eq!(
            ours(&spec),
            (k, flags, as_current_reference(&payload, None)),
            "table {table}"
        );
    }
}

/// The kernel's answer without the kind (`Unknown device type`, EOPNOTSUPP, as this
/// kernel gives for all four) is Unsupported naming the kind, and the kind names its module.
#[test]
fn a_kernel_without_the_kind_is_named_with_its_module() {
    for (kind, module) in [
        (LinkKind::Dummy, "dummy"),
        (ipvlan(IpvlanMode::L2), "ipvlan"),
        (vlan(5, None), "8021q"),
        (LinkKind::Vrf(VrfData { table: 1 }), "vrf"),
    ] {
        let h = Handle::with_transport(FakeTransport::new());
        h.transport().push_kernel_error(libc::EOPNOTSUPP, "Unknown device type");
        let e = h.create_link(&LinkSpec::new("x0", kind.clone())).unwrap_err();
        assert_eq!(
            e.kind(),
            &ErrorKind::Unsupported {
                feature: kind.name().to_string()
            },
            "{kind:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "create {0} x0: {0} is not supported by this kernel (Operation not supported)",
                kind.name()
            )
        );
        assert_eq!(kind.module(), module);
    }
}

/// EOPNOTSUPP with another reason is a kernel that has the kind refusing this link (a VLAN
/// on a master that cannot carry VLANs): not a missing module.
#[test]
fn another_refusal_of_the_kind_is_not_a_missing_module() {
    let h = Handle::with_transport(FakeTransport::new());
    h.transport()
        .push_kernel_error(libc::EOPNOTSUPP, "VLANs not supported on lo");
    let e = h
        .create_link(&LinkSpec {
            lower: Some(1),
            ..LinkSpec::new("vl0", vlan(5, None))
        })
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Kernel);
    assert_eq!(
        e.to_string(),
        "create vlan vl0: Operation not supported (VLANs not supported on lo)"
    );
    // nor is a bare errno, which proves nothing about what is missing
    h.transport().push_errno(libc::EOPNOTSUPP);
    let e = h.create_link(&LinkSpec::new("vl0", vlan(5, None))).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Kernel);
}
