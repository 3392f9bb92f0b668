//! A fake transport: records every request and answers from a queue of canned replies,
//! so logic above the handle can be tested without root or a kernel.
use std::cell::RefCell;
use std::collections::VecDeque;

use neli::consts::rtnl::{Ifa, IfaF, Iff, Ifla, RtAddrFamily, RtScope};
use neli::rtnl::{IfaddrmsgBuilder, IfinfomsgBuilder};
use neli::types::{Buffer, RtBuffer};

use super::address::Address;
use super::link::Link;
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
