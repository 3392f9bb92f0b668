//! Route-netlink numbers and attribute helpers.
//!
//! The numbers are the Linux uapi values, kept here as plain integers: neli lacks many of
//! them (VETH_INFO_*, IFLA_MACVLAN_*, IFLA_BR*) and hides others behind
//! `cfg(target_env = "gnu")`, which would break the musl build.
use super::bytes;
use std::io::Cursor;

use neli::consts::rtnl::RtaType;
use neli::rtnl::{Rtattr, RtattrBuilder};
use neli::types::{Buffer, RtBuffer};
use neli::{Size, ToBytes};

// netlink header
pub(crate) const NLMSG_DONE: u16 = 3;
pub(crate) const NLM_F_REQUEST: u16 = 0x1;
pub(crate) const NLM_F_ACK: u16 = 0x4;
pub(crate) const NLM_F_ECHO: u16 = 0x8;
pub(crate) const NLM_F_DUMP_INTR: u16 = 0x10;
pub(crate) const NLM_F_DUMP: u16 = 0x300;
pub(crate) const NLM_F_REPLACE: u16 = 0x100;
pub(crate) const NLM_F_EXCL: u16 = 0x200;
pub(crate) const NLM_F_CREATE: u16 = 0x400;
pub(crate) const NLM_F_APPEND: u16 = 0x800;

// message types
pub(crate) const RTM_NEWLINK: u16 = 16;
pub(crate) const RTM_DELLINK: u16 = 17;
pub(crate) const RTM_GETLINK: u16 = 18;
pub(crate) const RTM_SETLINK: u16 = 19;
pub(crate) const RTM_NEWADDR: u16 = 20;
pub(crate) const RTM_DELADDR: u16 = 21;
pub(crate) const RTM_GETADDR: u16 = 22;
pub(crate) const RTM_NEWROUTE: u16 = 24;
pub(crate) const RTM_DELROUTE: u16 = 25;
pub(crate) const RTM_GETROUTE: u16 = 26;
pub(crate) const RTM_NEWRULE: u16 = 32;
pub(crate) const RTM_DELRULE: u16 = 33;
pub(crate) const RTM_GETRULE: u16 = 34;

// address families
pub(crate) const AF_UNSPEC: u8 = 0;
pub(crate) const AF_INET: u8 = 2;
pub(crate) const AF_BRIDGE: u8 = 7;
pub(crate) const AF_INET6: u8 = 10;

// link attributes
pub(crate) const IFLA_ADDRESS: u16 = 1;
pub(crate) const IFLA_IFNAME: u16 = 3;
pub(crate) const IFLA_MTU: u16 = 4;
pub(crate) const IFLA_LINK: u16 = 5;
pub(crate) const IFLA_MASTER: u16 = 10;
pub(crate) const IFLA_PROTINFO: u16 = 12;
pub(crate) const IFLA_TXQLEN: u16 = 13;
pub(crate) const IFLA_OPERSTATE: u16 = 16;
pub(crate) const IFLA_IFALIAS: u16 = 20;
pub(crate) const IFLA_LINKINFO: u16 = 18;
pub(crate) const IFLA_AF_SPEC: u16 = 26;
pub(crate) const IFLA_NET_NS_FD: u16 = 28;
pub(crate) const IFLA_EXT_MASK: u16 = 29;
/// IFLA_EXT_MASK bit: include per-port VLAN lists in AF_BRIDGE link dumps.
pub(crate) const RTEXT_FILTER_BRVLAN: u32 = 1 << 1;
pub(crate) const IFLA_LINK_NETNSID: u16 = 37;
pub(crate) const IFLA_INFO_KIND: u16 = 1;
pub(crate) const IFLA_INFO_DATA: u16 = 2;
pub(crate) const IFLA_INFO_SLAVE_KIND: u16 = 4;
pub(crate) const VETH_INFO_PEER: u16 = 1;
pub(crate) const IFLA_BRPORT_MODE: u16 = 4;
pub(crate) const IFLA_BRPORT_ISOLATED: u16 = 33;
pub(crate) const IFLA_BRIDGE_VLAN_INFO: u16 = 2;
pub(crate) const BRIDGE_VLAN_INFO_PVID: u16 = 2;
pub(crate) const BRIDGE_VLAN_INFO_UNTAGGED: u16 = 4;

// address attributes and flags
pub(crate) const IFA_ADDRESS: u16 = 1;
pub(crate) const IFA_LOCAL: u16 = 2;
pub(crate) const IFA_LABEL: u16 = 3;
pub(crate) const IFA_BROADCAST: u16 = 4;
pub(crate) const IFA_FLAGS: u16 = 8;

// route attributes
pub(crate) const RTA_DST: u16 = 1;
pub(crate) const RTA_OIF: u16 = 4;
pub(crate) const RTA_GATEWAY: u16 = 5;
pub(crate) const RTA_PRIORITY: u16 = 6;
pub(crate) const RTA_PREFSRC: u16 = 7;
pub(crate) const RTA_METRICS: u16 = 8;
pub(crate) const RTA_MULTIPATH: u16 = 9;
pub(crate) const RTA_TABLE: u16 = 15;
pub(crate) const RTAX_MTU: u16 = 2;
pub(crate) const RTAX_ADVMSS: u16 = 8;
pub(crate) const RT_TABLE_COMPAT: u8 = 252;
pub(crate) const RTN_UNICAST: u8 = 1;

// rule attributes and header flags (fib_rules.h)
pub(crate) const FRA_DST: u16 = 1;
pub(crate) const FRA_SRC: u16 = 2;
pub(crate) const FRA_PRIORITY: u16 = 6;
pub(crate) const FRA_SUPPRESS_IFGROUP: u16 = 13;
pub(crate) const FRA_SUPPRESS_PREFIXLEN: u16 = 14;
pub(crate) const FRA_TABLE: u16 = 15;
pub(crate) const FRA_PAD: u16 = 18;
pub(crate) const FRA_PROTOCOL: u16 = 21;
pub(crate) const FIB_RULE_INVERT: u32 = 0x2;

/// Marks an attribute as holding nested attributes; some kernel parsers require it
/// (a bridge port's IFLA_PROTINFO without it is read as a bare STP state byte).
pub(crate) const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// One attribute. neli appends the NUL to `&str` payloads itself: never add `"\0"`.
pub(crate) fn attr<T>(ty: u16, payload: impl Size + ToBytes) -> Result<Rtattr<T, Buffer>, String>
where
    T: RtaType + From<u16>,
{
    RtattrBuilder::default()
        .rta_type(T::from(ty))
        .rta_payload(payload)
        .build()
        .map_err(|e| e.to_string())
}

/// Nested attributes, as the payload of one attribute.
pub(crate) type Nest = RtBuffer<u16, Buffer>;

/// Serializes a neli message body (ifinfomsg, ifaddrmsg, rtmsg) to bytes.
pub(crate) fn encode(body: &(impl Size + ToBytes)) -> Result<Vec<u8>, String> {
    let mut c = Cursor::new(vec![0u8; body.padded_size()]);
    body.to_bytes(&mut c).map_err(|e| e.to_string())?;
    Ok(c.into_inner())
}

/// Iterates raw attributes: (type without the flag bits, payload).
pub(crate) fn attrs(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if bytes.len() < 4 {
            return None;
        }
        let len = usize::from(bytes::read_host16(bytes)?);
        let ty = bytes::read_host16(&bytes[2..])? & NLA_TYPE_MASK;
        if len < 4 || len > bytes.len() {
            return None;
        }
        let payload = &bytes[4..len];
        bytes = &bytes[((len + 3) & !3).min(bytes.len())..];
        Some((ty, payload))
    })
}

/// One attribute in bytes: length, type, payload, padding to 4 bytes (for messages neli
/// has no type for).
pub(crate) fn raw_attr(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut a = ((4 + payload.len()) as u16).to_ne_bytes().to_vec();
    a.extend(ty.to_ne_bytes());
    a.extend(payload);
    while a.len() % 4 != 0 {
        a.push(0);
    }
    a
}

pub(crate) fn find(bytes: &[u8], ty: u16) -> Option<&[u8]> {
    attrs(bytes).find(|(t, _)| *t == ty).map(|(_, p)| p)
}

pub(crate) fn as_u32(p: &[u8]) -> Option<u32> {
    bytes::read_host32(p)
}

pub(crate) fn as_u16(p: &[u8]) -> Option<u16> {
    Some(u16::from_ne_bytes(p.get(..2)?.try_into().ok()?))
}

/// A `__be16` payload (an ethertype such as IFLA_VLAN_PROTOCOL): network byte order on
/// every host, unlike the native-order integers around it.
pub(crate) fn as_be16(p: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(p.get(..2)?.try_into().ok()?))
}

/// The payload of a `__be16` attribute (see [`as_be16`]).
pub(crate) fn be16(v: u16) -> [u8; 2] {
    v.to_be_bytes()
}

pub(crate) fn as_u8(p: &[u8]) -> Option<u8> {
    p.first().copied()
}

/// A NUL-terminated string attribute.
pub(crate) fn as_string(p: &[u8]) -> String {
    bytes::from_c_string(p)
}

pub(crate) fn as_ip(p: &[u8]) -> Option<std::net::IpAddr> {
    match p.len() {
        4 => Some(<[u8; 4]>::try_from(p).ok()?.into()),
        16 => Some(<[u8; 16]>::try_from(p).ok()?.into()),
        _ => None,
    }
}

/// An IP address as attribute payload bytes.
pub(crate) fn ip_bytes(ip: std::net::IpAddr) -> Vec<u8> {
    match ip {
        std::net::IpAddr::V4(a) => a.octets().to_vec(),
        std::net::IpAddr::V6(a) => a.octets().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_attrs_walk_padding_and_strip_flags() {
        // len 5 (one byte payload, padded to 8), then a nested-flagged attr of len 8
        let bytes = [5, 0, 3, 0, b'x', 0, 0, 0, 8, 0, 0x0c, 0x80, 1, 2, 3, 4];
        let v: Vec<_> = attrs(&bytes).collect();
        assert_eq!(v, vec![(3, &b"x"[..]), (12, &[1u8, 2, 3, 4][..])]);
    }

    #[test]
    fn truncated_attrs_end_the_walk() {
        let bytes = [40, 0, 3, 0, b'x'];
        assert_eq!(attrs(&bytes).count(), 0);
    }
}
