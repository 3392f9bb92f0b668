//! Connection tracking over ctnetlink (the `conntrack` tool's protocol, on a
//! NETLINK_NETFILTER socket): find and delete entries, in the plugins' words.
//!
//! portmap uses it to drop stale UDP entries for a newly mapped host port: a UDP "flow"
//! that was tracked before the DNAT rule existed keeps going where it went (often nowhere)
//! until it times out, however long the client keeps sending.
//!
//! The kernel cannot delete by a partial tuple, so entries are dumped (per family) and each
//! match is deleted by its original tuple, copied verbatim from the dump, with its zone.
use super::handle::{Handle, Op, Result};
use super::transport::{Socket, Transport};
use super::types::Family;
use super::wire::{self, NLA_F_NESTED};

// nfnetlink
const NFNETLINK_V0: u8 = 0;
const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_NEW: u16 = 0;
const IPCTNL_MSG_CT_GET: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;

// ctnetlink attributes
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_ZONE: u16 = 18;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_DST_PORT: u16 = 3;

/// IP protocol numbers.
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_SCTP: u8 = 132;

/// One tracked connection, as far as the filters need it: the original direction's
/// protocol, destination address and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub protocol: u8,
    pub dst: Option<std::net::IpAddr>,
    pub dst_port: Option<u16>,
    /// The CTA_TUPLE_ORIG attribute (payload) and CTA_ZONE (payload), to delete this entry.
    orig_tuple: Vec<u8>,
    zone: Option<Vec<u8>>,
}

/// A ctnetlink handle for one network namespace.
pub struct Conntrack<T: Transport = Socket> {
    handle: Handle<T>,
}

impl Conntrack<Socket> {
    /// A handle for the calling thread's current namespace.
    pub fn current() -> Result<Conntrack<Socket>> {
        let socket = Socket::connect_netfilter().map_err(|e| Op::new("open", "netfilter netlink socket").transport(e))?;
        Ok(Conntrack {
            handle: Handle::with_transport(socket),
        })
    }
}

fn nfgenmsg(family: u8) -> Vec<u8> {
    vec![family, NFNETLINK_V0, 0, 0]
}

fn msg_type(m: u16) -> u16 {
    (NFNL_SUBSYS_CTNETLINK << 8) | m
}

fn put_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len() + ((4 - len % 4) % 4), 0);
}

impl<T: Transport> Conntrack<T> {
    pub fn with_transport(transport: T) -> Conntrack<T> {
        Conntrack {
            handle: Handle::with_transport(transport),
        }
    }

    pub fn transport(&self) -> &T {
        self.handle.transport()
    }

    /// Every entry of one family (`V4` or `V6`).
    pub fn entries(&self, family: Family) -> Result<Vec<Entry>> {
        let op = Op::new("list", "conntrack entries").feature("nf_conntrack_netlink");
        let msgs = self
            .handle
            .dump(&op, msg_type(IPCTNL_MSG_CT_GET), nfgenmsg(family.af()))?;
        Ok(msgs
            .iter()
            .filter(|m| m.kind == msg_type(IPCTNL_MSG_CT_NEW))
            .filter_map(|m| decode_entry(m.payload.get(4..)?))
            .collect())
    }

    /// Deletes one entry; already gone (it expired meanwhile) is done.
    pub fn delete(&self, family: Family, e: &Entry) -> Result<()> {
        let op = Op::new(
            "delete",
            format!(
                "conntrack entry proto {} dport {}",
                e.protocol,
                e.dst_port.map(|p| p.to_string()).unwrap_or_default()
            ),
        );
        let mut payload = nfgenmsg(family.af());
        put_attr(&mut payload, CTA_TUPLE_ORIG | NLA_F_NESTED, &e.orig_tuple);
        if let Some(zone) = &e.zone {
            put_attr(&mut payload, CTA_ZONE, zone);
        }
        match self.handle.modify(&op, msg_type(IPCTNL_MSG_CT_DELETE), 0, payload) {
            Err(err) if err.is_not_found() => Ok(()),
            other => other,
        }
    }

    /// Deletes the entries of `family` for `protocol` to destination port `port` (any
    /// address); returns how many went.
    pub fn delete_by_dst_port(&self, family: Family, protocol: u8, port: u16) -> Result<usize> {
        let doomed: Vec<Entry> = self
            .entries(family)?
            .into_iter()
            .filter(|e| e.protocol == protocol && e.dst_port == Some(port))
            .collect();
        for e in &doomed {
            self.delete(family, e)?;
        }
        Ok(doomed.len())
    }
}

fn decode_entry(attrs: &[u8]) -> Option<Entry> {
    let tuple = wire::find(attrs, CTA_TUPLE_ORIG)?;
    let proto = wire::find(tuple, CTA_TUPLE_PROTO)?;
    let ip = wire::find(tuple, CTA_TUPLE_IP);
    let dst = ip
        .and_then(|ip| wire::find(ip, CTA_IP_V4_DST).or_else(|| wire::find(ip, CTA_IP_V6_DST)))
        .and_then(wire::as_ip);
    Some(Entry {
        protocol: wire::find(proto, CTA_PROTO_NUM).and_then(wire::as_u8)?,
        dst,
        dst_port: wire::find(proto, CTA_PROTO_DST_PORT)
            .and_then(|p| Some(u16::from_be_bytes(p.get(..2)?.try_into().ok()?))),
        orig_tuple: tuple.to_vec(),
        zone: wire::find(attrs, CTA_ZONE).map(<[u8]>::to_vec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::{FakeTransport, Message, Reply};

    /// A CT_NEW message as a dump carries it: nfgenmsg, then the original tuple.
    fn entry_msg(proto: u8, dst: [u8; 4], dport: u16) -> Message {
        let mut ip = vec![];
        put_attr(&mut ip, 1, &[10, 0, 0, 9]);
        put_attr(&mut ip, CTA_IP_V4_DST, &dst);
        let mut pr = vec![];
        put_attr(&mut pr, CTA_PROTO_NUM, &[proto]);
        put_attr(&mut pr, 2, &40000u16.to_be_bytes());
        put_attr(&mut pr, CTA_PROTO_DST_PORT, &dport.to_be_bytes());
        let mut tuple = vec![];
        put_attr(&mut tuple, CTA_TUPLE_IP | NLA_F_NESTED, &ip);
        put_attr(&mut tuple, CTA_TUPLE_PROTO | NLA_F_NESTED, &pr);
        let mut payload = nfgenmsg(wire::AF_INET);
        put_attr(&mut payload, CTA_TUPLE_ORIG | NLA_F_NESTED, &tuple);
        put_attr(&mut payload, CTA_ZONE, &7u16.to_be_bytes());
        Message {
            kind: msg_type(IPCTNL_MSG_CT_NEW),
            flags: 2,
            payload,
        }
    }

    #[test]
    fn deletes_matching_entries_by_their_original_tuple() {
        let fake = FakeTransport::new();
        fake.push_reply(Reply {
            messages: vec![
                entry_msg(PROTO_UDP, [10, 0, 0, 1], 5353),
                entry_msg(PROTO_TCP, [10, 0, 0, 1], 5353),
                entry_msg(PROTO_UDP, [10, 0, 0, 1], 53),
            ],
            interrupted: false,
        });
        fake.push_ack();
        let ct = Conntrack::with_transport(&fake);
        assert_eq!(ct.delete_by_dst_port(Family::V4, PROTO_UDP, 5353).unwrap(), 1);
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].kind, 0x101);
        assert_eq!(reqs[0].payload, vec![wire::AF_INET, 0, 0, 0]);
        assert_eq!(reqs[1].kind, 0x102);
        // the delete carries the dump's tuple and zone, byte for byte
        let dumped = &entry_msg(PROTO_UDP, [10, 0, 0, 1], 5353).payload;
        assert_eq!(&reqs[1].payload, dumped);
    }

    #[test]
    fn an_entry_gone_meanwhile_is_deleted() {
        let fake = FakeTransport::new();
        fake.push_reply(Reply {
            messages: vec![entry_msg(PROTO_UDP, [10, 0, 0, 1], 5353)],
            interrupted: false,
        });
        fake.push_errno(libc::ENOENT);
        let ct = Conntrack::with_transport(&fake);
        assert_eq!(ct.delete_by_dst_port(Family::V4, PROTO_UDP, 5353).unwrap(), 1);
    }

    #[test]
    fn entries_decode_destination() {
        let m = entry_msg(PROTO_UDP, [192, 168, 1, 1], 9);
        let e = decode_entry(&m.payload[4..]).unwrap();
        assert_eq!(e.dst, Some("192.168.1.1".parse().unwrap()));
        assert_eq!(e.dst_port, Some(9));
        assert_eq!(e.protocol, PROTO_UDP);
    }
}
