//! A fake transport: records every request and answers from a queue of canned replies,
//! so logic above the handle can be tested without root or a kernel.
use std::cell::RefCell;
use std::collections::VecDeque;

use neli::consts::rtnl::{Ifa, IfaF, Iff, Ifla, RtAddrFamily, RtScope, RtTable, Rta, Rtn, Rtprot};
use neli::rtnl::{IfaddrmsgBuilder, IfinfomsgBuilder, RtmsgBuilder};
use neli::types::{Buffer, RtBuffer};

use super::address::Address;
use super::link::Link;
use super::link_kind::LinkKind;
use super::route::RouteInfo;
use super::transport::{Message, Reply, Transport, TransportError};
use super::wire::{self, attr};

/// Length of the fixed headers in front of the attributes, for [`attributes`].
pub const IFINFOMSG_LEN: usize = 16;
pub const IFADDRMSG_LEN: usize = 8;
pub const RTMSG_LEN: usize = 12;

/// Records requests; replies come from the queue, and an empty queue answers with a plain ACK.
#[derive(Default)]
pub struct FakeTransport {
    requests: RefCell<Vec<Message>>,
    replies: RefCell<VecDeque<Result<Reply, TransportError>>>,
}

impl FakeTransport {
    pub fn new() -> FakeTransport {
        FakeTransport::default()
    }

    /// Queues a reply for the next request.
    pub fn push_reply(&self, reply: Reply) {
        self.replies.borrow_mut().push_back(Ok(reply));
    }

    /// Queues a plain ACK.
    pub fn push_ack(&self) {
        self.push_reply(Reply::default());
    }

    /// Queues a kernel error (positive errno, e.g. `libc::EEXIST`).
    pub fn push_errno(&self, errno: i32) {
        self.replies
            .borrow_mut()
            .push_back(Err(TransportError::Kernel { errno, detail: None }));
    }

    /// Queues a kernel error with its extended-ack text (`Unknown device type`, …).
    pub fn push_kernel_error(&self, errno: i32, detail: &str) {
        self.replies.borrow_mut().push_back(Err(TransportError::Kernel {
            errno,
            detail: Some(detail.to_string()),
        }));
    }

    /// Queues a reply carrying this link, as RTM_NEWLINK (for lookups and dumps).
    pub fn push_links(&self, links: &[Link]) {
        let messages = links.iter().map(encode_link).collect();
        self.push_reply(Reply {
            messages,
            interrupted: false,
        });
    }

    /// Queues a reply carrying these addresses, as RTM_NEWADDR.
    pub fn push_addresses(&self, addresses: &[Address]) {
        let messages = addresses.iter().map(encode_address).collect();
        self.push_reply(Reply {
            messages,
            interrupted: false,
        });
    }

    /// Queues a reply carrying these routes, as RTM_NEWROUTE (single-path routes).
    pub fn push_routes(&self, routes: &[RouteInfo]) {
        let messages = routes.iter().map(encode_route).collect();
        self.push_reply(Reply {
            messages,
            interrupted: false,
        });
    }

    /// Everything sent so far, in order.
    pub fn requests(&self) -> Vec<Message> {
        self.requests.borrow().clone()
    }
}

impl Transport for FakeTransport {
    fn exchange(&self, request: Message) -> Result<Reply, TransportError> {
        self.requests.borrow_mut().push(request);
        self.replies
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| Ok(Reply::default()))
    }
}

/// A link for a fake reply: `index`, `name` and `kind`, a MAC, MTU 1500, up, no master;
/// change the rest with struct update syntax.
pub fn link(index: u32, name: &str, kind: LinkKind) -> Link {
    Link {
        index,
        name: name.into(),
        alias: None,
        kind: Some(kind),
        slave_kind: None,
        mac: Some(super::MacAddr([0x0a, 0, 0, 0, 0, index as u8])),
        mtu: 1500,
        master: None,
        up: true,
        lower_up: true,
        oper_state: super::OperState::Up,
        peer_index: None,
        link_netnsid: None,
        promisc: false,
        allmulti: false,
        txqlen: 0,
        flags: 0,
    }
}

/// The attributes after a fixed header: (type without flag bits, payload).
pub fn attributes(payload: &[u8], header_len: usize) -> Vec<(u16, Vec<u8>)> {
    wire::attrs(payload.get(header_len..).unwrap_or(&[]))
        .map(|(t, p)| (t, p.to_vec()))
        .collect()
}

/// A link as the kernel would report it in RTM_NEWLINK (the fields a fake needs).
pub fn encode_link(link: &Link) -> Message {
    let mut a = RtBuffer::<Ifla, Buffer>::new();
    let mut push = |ty: u16, p: Vec<u8>| a.push(attr(ty, Buffer::from(p)).expect("byte payloads always encode"));
    let mut name = link.name.as_bytes().to_vec();
    name.push(0);
    push(wire::IFLA_IFNAME, name);
    push(wire::IFLA_MTU, link.mtu.to_ne_bytes().to_vec());
    push(wire::IFLA_OPERSTATE, vec![link.oper_state.to_raw()]);
    if let Some(mac) = link.mac {
        push(wire::IFLA_ADDRESS, mac.0.to_vec());
    }
    if let Some(m) = link.master {
        push(wire::IFLA_MASTER, m.to_ne_bytes().to_vec());
    }
    if let Some(p) = link.peer_index {
        push(wire::IFLA_LINK, p.to_ne_bytes().to_vec());
    }
    if let Some(n) = link.link_netnsid {
        push(wire::IFLA_LINK_NETNSID, n.to_ne_bytes().to_vec());
    }
    if let Some(alias) = &link.alias {
        let mut alias = alias.as_bytes().to_vec();
        alias.push(0);
        push(wire::IFLA_IFALIAS, alias);
    }
    if let Some(kind) = &link.kind {
        a.push(kind.encode().expect("kinds always encode"));
    }
    let msg = IfinfomsgBuilder::default()
        .ifi_family(RtAddrFamily::Unspecified)
        .ifi_index(link.index as libc::c_int)
        .ifi_flags(Iff::from_bits_retain(link.flags))
        .rtattrs(a)
        .build()
        .expect("an ifinfomsg with all fields set builds");
    Message {
        kind: wire::RTM_NEWLINK,
        flags: 0,
        payload: wire::encode(&msg).expect("encodes"),
    }
}

/// An address as the kernel would report it in RTM_NEWADDR.
pub fn encode_address(a: &Address) -> Message {
    let ip = wire::ip_bytes(a.address.ip());
    let mut attrs = RtBuffer::<Ifa, Buffer>::new();
    let mut push = |ty: u16, p: Vec<u8>| attrs.push(attr(ty, Buffer::from(p)).expect("byte payloads always encode"));
    push(wire::IFA_ADDRESS, ip.clone());
    push(wire::IFA_LOCAL, ip);
    push(wire::IFA_FLAGS, a.flags.to_ne_bytes().to_vec());
    if let Some(b) = a.broadcast {
        push(wire::IFA_BROADCAST, b.octets().to_vec());
    }
    let family = if a.address.is_ipv4() {
        wire::AF_INET
    } else {
        wire::AF_INET6
    };
    let msg = IfaddrmsgBuilder::default()
        .ifa_family(RtAddrFamily::from(family))
        .ifa_prefixlen(a.address.prefix())
        .ifa_flags(IfaF::from_bits_retain(a.flags as u8))
        .ifa_scope(RtScope::from(a.scope.to_raw()))
        .ifa_index(a.index)
        .rtattrs(attrs)
        .build()
        .expect("an ifaddrmsg with all fields set builds");
    Message {
        kind: wire::RTM_NEWADDR,
        flags: 0,
        payload: wire::encode(&msg).expect("encodes"),
    }
}

/// An address as the payload of an address attribute (RTA_GATEWAY, IFA_LOCAL, …).
pub fn ip_payload(ip: std::net::IpAddr) -> Vec<u8> {
    wire::ip_bytes(ip)
}

/// A single-path route as the kernel would report it in RTM_NEWROUTE.
pub fn encode_route(r: &RouteInfo) -> Message {
    let mut attrs = RtBuffer::<Rta, Buffer>::new();
    let mut push = |ty: u16, p: Vec<u8>| attrs.push(attr(ty, Buffer::from(p)).expect("byte payloads always encode"));
    if r.dst.prefix() > 0 {
        push(wire::RTA_DST, wire::ip_bytes(r.dst.ip()));
    }
    if let Some(gw) = r.gateway {
        push(wire::RTA_GATEWAY, wire::ip_bytes(gw));
    }
    if let Some(oif) = r.oif {
        push(wire::RTA_OIF, oif.to_ne_bytes().to_vec());
    }
    if let Some(m) = r.metric {
        push(wire::RTA_PRIORITY, m.to_ne_bytes().to_vec());
    }
    if let Some(src) = r.prefsrc {
        push(wire::RTA_PREFSRC, wire::ip_bytes(src));
    }
    push(wire::RTA_TABLE, r.table.to_ne_bytes().to_vec());
    let family = if r.dst.is_ipv4() { wire::AF_INET } else { wire::AF_INET6 };
    let header_table = u8::try_from(r.table).unwrap_or(wire::RT_TABLE_COMPAT);
    let msg = RtmsgBuilder::default()
        .rtm_family(RtAddrFamily::from(family))
        .rtm_dst_len(r.dst.prefix())
        .rtm_src_len(0)
        .rtm_tos(0)
        .rtm_table(RtTable::from(header_table))
        .rtm_protocol(Rtprot::from(r.protocol))
        .rtm_scope(RtScope::from(r.scope.to_raw()))
        .rtm_type(Rtn::from(r.route_type))
        .rtattrs(attrs)
        .build()
        .expect("an rtmsg with all fields set builds");
    Message {
        kind: wire::RTM_NEWROUTE,
        flags: 0,
        payload: wire::encode(&msg).expect("encodes"),
    }
}
