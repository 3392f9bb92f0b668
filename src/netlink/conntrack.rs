//! Connection tracking over ctnetlink (the `conntrack` tool's protocol) on the shared
//! [`NfSocket`]: list and delete entries, in the plugins' words.
//!
//! portmap uses it to drop stale UDP entries for a newly mapped host port: a UDP "flow"
//! tracked before the DNAT rule existed keeps going where it went (often nowhere) for as
//! long as the client keeps sending.
//!
//! The kernel cannot delete by a partial tuple, so entries are dumped (per family) and each
//! match is deleted by its original tuple, copied verbatim from the dump, with its zone.
use super::bytes;
use super::netfilter::{msg_type, Attrs, NfSocket, NFNL_SUBSYS_CTNETLINK};
use super::types::Family;
use super::wire::{self, NLA_F_NESTED, NLM_F_DUMP};
use super::Result;
use std::net::IpAddr;

const IPCTNL_MSG_CT_NEW: u8 = 0;
const IPCTNL_MSG_CT_GET: u8 = 1;
const IPCTNL_MSG_CT_DELETE: u8 = 2;

// ctnetlink attributes
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_ZONE: u16 = 18;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_DST_PORT: u16 = 3;

/// UDP's IP protocol number (the one whose stale entries portmap removes).
pub const PROTO_UDP: u8 = 17;

/// One tracked connection, as far as the filters need it: the original direction's
/// protocol, destination address and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `V4` or `V6`.
    pub family: Family,
    pub protocol: u8,
    pub dst: Option<IpAddr>,
    pub dst_port: Option<u16>,
    /// The payloads of CTA_TUPLE_ORIG and CTA_ZONE, which name this entry on delete.
    orig_tuple: Vec<u8>,
    zone: Option<Vec<u8>>,
}

/// ctnetlink in one network namespace.
pub struct Conntrack {
    sock: NfSocket,
}

impl Conntrack {
    /// Conntrack of the calling thread's current namespace.
    pub fn current() -> Result<Conntrack> {
        Ok(Conntrack {
            sock: NfSocket::current()?,
        })
    }

    /// Every entry of a family (`V4`, `V6`, or `All` in one dump: the kernel walks its whole
    /// conntrack hash for each dump, tens of milliseconds on a busy host).
    pub fn entries(&self, family: Family) -> Result<Vec<Entry>> {
        let msgs = self.sock.request(
            "list",
            "conntrack entries",
            msg_type(NFNL_SUBSYS_CTNETLINK, IPCTNL_MSG_CT_GET),
            NLM_F_DUMP,
            family.af(),
            0,
            &[],
        )?;
        Ok(msgs
            .iter()
            .filter(|m| m.kind == msg_type(NFNL_SUBSYS_CTNETLINK, IPCTNL_MSG_CT_NEW))
            .filter_map(|m| decode_entry(m.family, &m.attrs))
            .collect())
    }

    /// Deletes one entry; already gone (it expired meanwhile) is done.
    pub fn delete(&self, e: &Entry) -> Result<()> {
        let object = format!(
            "conntrack entry proto {} to {}:{}",
            e.protocol,
            e.dst.map(|a| a.to_string()).unwrap_or_default(),
            e.dst_port.map(|p| p.to_string()).unwrap_or_default()
        );
        let attrs = delete_attrs(e);
        match self.sock.request(
            "delete",
            &object,
            msg_type(NFNL_SUBSYS_CTNETLINK, IPCTNL_MSG_CT_DELETE),
            0,
            e.family.af(),
            0,
            attrs.as_bytes(),
        ) {
            Err(err) if err.is_not_found() => Ok(()),
            other => other.map(drop),
        }
    }

    /// Deletes the entries of `family` (`All`: both, from one dump) for `protocol` to one
    /// of the destination `ports` (any address); returns how many went.
    pub fn delete_by_dst_ports(&self, family: Family, protocol: u8, ports: &[u16]) -> Result<usize> {
        let doomed: Vec<Entry> = self
            .entries(family)?
            .into_iter()
            .filter(|e| e.protocol == protocol && e.dst_port.is_some_and(|p| ports.contains(&p)))
            .collect();
        for e in &doomed {
            self.delete(e)?;
        }
        Ok(doomed.len())
    }
}

fn delete_attrs(e: &Entry) -> Attrs {
    let mut a = Attrs::new();
    a.bytes(CTA_TUPLE_ORIG | NLA_F_NESTED, &e.orig_tuple);
    if let Some(zone) = &e.zone {
        a.bytes(CTA_ZONE, zone);
    }
    a
}

fn decode_entry(family: u8, attrs: &[u8]) -> Option<Entry> {
    let family = match family {
        wire::AF_INET => Family::V4,
        wire::AF_INET6 => Family::V6,
        _ => return None,
    };
    let tuple = wire::find(attrs, CTA_TUPLE_ORIG)?;
    let proto = wire::find(tuple, CTA_TUPLE_PROTO)?;
    let dst = wire::find(tuple, CTA_TUPLE_IP)
        .and_then(|ip| wire::find(ip, CTA_IP_V4_DST).or_else(|| wire::find(ip, CTA_IP_V6_DST)))
        .and_then(wire::as_ip);
    Some(Entry {
        family,
        protocol: wire::find(proto, CTA_PROTO_NUM).and_then(wire::as_u8)?,
        dst,
        dst_port: wire::find(proto, CTA_PROTO_DST_PORT).and_then(bytes::read_net16),
        orig_tuple: tuple.to_vec(),
        zone: wire::find(attrs, CTA_ZONE).map(<[u8]>::to_vec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attributes of a CT_NEW message as a dump carries them.
    fn dumped(proto: u8, dst: [u8; 4], dport: u16) -> Attrs {
        let mut a = Attrs::new();
        a.nest(CTA_TUPLE_ORIG, |t| {
            t.nest(CTA_TUPLE_IP, |ip| {
                ip.bytes(1, &[10, 0, 0, 9]).bytes(CTA_IP_V4_DST, &dst);
            })
            .nest(CTA_TUPLE_PROTO, |p| {
                p.u8(CTA_PROTO_NUM, proto)
                    .be16(2, 40000)
                    .be16(CTA_PROTO_DST_PORT, dport);
            });
        })
        .be16(CTA_ZONE, 7);
        a
    }

    #[test]
    fn entries_decode_protocol_destination_and_port() {
        let e = decode_entry(wire::AF_INET, dumped(PROTO_UDP, [192, 168, 1, 1], 5353).as_bytes()).unwrap();
        assert_eq!(e.family, Family::V4);
        assert_eq!(e.protocol, PROTO_UDP);
        assert_eq!(e.dst, Some("192.168.1.1".parse().unwrap()));
        assert_eq!(e.dst_port, Some(5353));
        assert!(decode_entry(wire::AF_INET, &[]).is_none());
        assert!(decode_entry(7, dumped(PROTO_UDP, [10, 0, 0, 1], 53).as_bytes()).is_none());
    }

    #[test]
    fn a_delete_names_the_entry_by_its_dumped_tuple_and_zone() {
        let a = dumped(PROTO_UDP, [10, 0, 0, 1], 53);
        let e = decode_entry(wire::AF_INET, a.as_bytes()).unwrap();
        // the tuple and zone go back byte for byte (with the nested flag on the tuple)
        assert_eq!(delete_attrs(&e).as_bytes(), a.as_bytes());
    }
}
