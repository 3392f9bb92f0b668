//! Policy-routing rules (FIB rules, `ip rule`): add a source rule, list, delete.
//!
//! A rule message is a `fib_rule_hdr` (family, dst_len, src_len, tos, table, two reserved
//! bytes, action, flags) followed by `FRA_*` attributes. The header has the layout of an
//! `rtmsg`, so it is encoded and decoded with neli's `Rtmsg`, as Go's netlink does with its
//! `RtMsg`: `rtm_protocol`/`rtm_scope` are the reserved bytes and `rtm_type` the action.
use std::fmt::Write as _;
use std::io::Cursor;
use std::net::IpAddr;

use ipnetwork::IpNetwork;
use neli::consts::rtnl::{RtAddrFamily, RtScope, RtTable, Rta, Rtn, Rtprot};
use neli::rtnl::{Rtmsg, RtmsgBuilder};
use neli::types::{Buffer, RtBuffer};
use neli::FromBytesWithInput;

use super::handle::{Handle, Op, Result};
use super::transport::{Message, Transport};
use super::types::Family;
use super::wire::{self, attr};

/// `FR_ACT_TO_TBL`: look the packet up in the rule's table.
const FR_ACT_TO_TBL: u8 = 1;
/// The first reserved header byte, as Go's netlink fills it (its `RtMsg` default,
/// `RTPROT_BOOT`); the kernel ignores it.
const RES1_BOOT: u8 = 3;

/// `from SRC lookup TABLE`, at the priority the kernel gives a rule without one (just above
/// the previous rule of the family's list: 32765, 32764, … on a fresh namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRule {
    pub src: IpNetwork,
    pub table: u32,
}

/// A rule as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// V4 or V6.
    pub family: Family,
    pub priority: u32,
    pub src: Option<IpNetwork>,
    pub dst: Option<IpNetwork>,
    pub table: u32,
    /// `FR_ACT_*`: 1 is a table lookup.
    pub action: u8,
    /// True when the rule selects packets by anything beyond source and destination (tos,
    /// interfaces, marks, ports, uids, …) or inverts its match.
    pub more_selectors: bool,
}

impl RuleInfo {
    /// True for `from ADDR lookup TABLE` and nothing else, ADDR one whole address (what
    /// [`SourceRule`] with a /32 or /128 source makes).
    pub fn is_lookup_from(&self, addr: IpAddr) -> bool {
        let whole = |n: &IpNetwork| n.ip() == addr && n.prefix() == if addr.is_ipv4() { 32 } else { 128 };
        self.action == FR_ACT_TO_TBL
            && self.dst.is_none()
            && !self.more_selectors
            && self.src.as_ref().is_some_and(whole)
    }

    fn describe(&self) -> String {
        let mut s = format!("rule {}:", self.priority);
        match &self.src {
            Some(src) => {
                let _ = write!(s, " from {src}");
            }
            None => s.push_str(" from all"),
        }
        if let Some(dst) = &self.dst {
            let _ = write!(s, " to {dst}");
        }
        let _ = write!(s, " lookup {}", self.table);
        s
    }
}

fn family_of(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        wire::AF_INET
    } else {
        wire::AF_INET6
    }
}

/// A table above 255 travels in FRA_TABLE with 0 in the header, as Go's netlink sends it.
fn header_table(table: u32) -> u8 {
    u8::try_from(table).unwrap_or(0)
}

struct Header {
    family: u8,
    dst_len: u8,
    src_len: u8,
    table: u8,
    res1: u8,
    action: u8,
}

fn rule_msg(op: &Op, h: Header, attrs: RtBuffer<Rta, Buffer>) -> Result<Vec<u8>> {
    let msg = RtmsgBuilder::default()
        .rtm_family(RtAddrFamily::from(h.family))
        .rtm_dst_len(h.dst_len)
        .rtm_src_len(h.src_len)
        .rtm_tos(0)
        .rtm_table(RtTable::from(h.table))
        .rtm_protocol(Rtprot::from(h.res1))
        .rtm_scope(RtScope::from(0))
        .rtm_type(Rtn::from(h.action))
        .rtattrs(attrs)
        .build()
        .map_err(|e| op.encode(e.to_string()))?;
    wire::encode(&msg).map_err(|e| op.encode(e))
}

fn push(op: &Op, attrs: &mut RtBuffer<Rta, Buffer>, ty: u16, payload: Vec<u8>) -> Result<()> {
    attrs.push(attr(ty, Buffer::from(payload)).map_err(|e| op.encode(e))?);
    Ok(())
}

impl<T: Transport> Handle<T> {
    /// Adds `from SRC lookup TABLE`. The request is the one Go's netlink `RuleAdd` sends for
    /// such a rule (NLM_F_EXCL included, though a rule without a priority never matches one
    /// already there: the kernel gives it the next priority).
    pub fn add_source_rule(&self, rule: &SourceRule) -> Result<()> {
        let op = Op::new("add", format!("rule from {} lookup {}", rule.src, rule.table));
        let mut a = RtBuffer::new();
        push(&op, &mut a, wire::FRA_SRC, wire::ip_bytes(rule.src.ip()))?;
        if rule.table > 255 {
            push(&op, &mut a, wire::FRA_TABLE, rule.table.to_ne_bytes().to_vec())?;
        }
        let header = Header {
            family: family_of(rule.src.ip()),
            dst_len: 0,
            src_len: rule.src.prefix(),
            table: header_table(rule.table),
            res1: RES1_BOOT,
            action: FR_ACT_TO_TBL,
        };
        self.modify(
            &op,
            wire::RTM_NEWRULE,
            wire::NLM_F_CREATE | wire::NLM_F_EXCL,
            rule_msg(&op, header, a)?,
        )
    }

    /// Deletes the rule: the kernel matches priority, source, destination, table and action;
    /// a rule already gone is NotFound.
    pub fn delete_rule(&self, rule: &RuleInfo) -> Result<()> {
        let op = Op::new("delete", rule.describe());
        let mut a = RtBuffer::new();
        if let Some(dst) = &rule.dst {
            push(&op, &mut a, wire::FRA_DST, wire::ip_bytes(dst.ip()))?;
        }
        if let Some(src) = &rule.src {
            push(&op, &mut a, wire::FRA_SRC, wire::ip_bytes(src.ip()))?;
        }
        if rule.priority > 0 {
            push(&op, &mut a, wire::FRA_PRIORITY, rule.priority.to_ne_bytes().to_vec())?;
        }
        if rule.table > 255 {
            push(&op, &mut a, wire::FRA_TABLE, rule.table.to_ne_bytes().to_vec())?;
        }
        let header = Header {
            family: rule.family.af(),
            dst_len: rule.dst.map_or(0, |d| d.prefix()),
            src_len: rule.src.map_or(0, |s| s.prefix()),
            table: header_table(rule.table),
            res1: RES1_BOOT,
            action: rule.action,
        };
        self.modify(&op, wire::RTM_DELRULE, 0, rule_msg(&op, header, a)?)
    }

    /// The IPv4 and/or IPv6 rules, in the kernel's order (other families' rules, such as
    /// multicast routing's, are left out).
    pub fn rules(&self, family: Family) -> Result<Vec<RuleInfo>> {
        let op = Op::new("list", "rules");
        let header = Header {
            family: family.af(),
            dst_len: 0,
            src_len: 0,
            table: 0,
            res1: 0,
            action: 0,
        };
        let msgs = self.dump(&op, wire::RTM_GETRULE, rule_msg(&op, header, RtBuffer::new())?)?;
        let mut out = vec![];
        for m in msgs.iter().filter(|m| m.kind == wire::RTM_NEWRULE) {
            if let Some(r) = decode_rule(&op, m)? {
                if family == Family::All || r.family == family {
                    out.push(r);
                }
            }
        }
        Ok(out)
    }
}

/// The network `ip`/`len` of a rule's source or destination.
fn prefix_of(op: &Op, payload: &[u8], len: u8) -> Result<IpNetwork> {
    let ip = wire::as_ip(payload).ok_or_else(|| op.decode("bad rule address"))?;
    IpNetwork::new(ip, len).map_err(|e| op.decode(e.to_string()))
}

/// `None` for a rule of another family than IPv4 and IPv6.
pub(crate) fn decode_rule(op: &Op, m: &Message) -> Result<Option<RuleInfo>> {
    let msg = Rtmsg::from_bytes_with_input(&mut Cursor::new(&m.payload), m.payload.len())
        .map_err(|e| op.decode(format!("rule message: {e}")))?;
    let family = match u8::from(*msg.rtm_family()) {
        wire::AF_INET => Family::V4,
        wire::AF_INET6 => Family::V6,
        _ => return Ok(None),
    };
    let invert = msg.rtm_flags().bits() & wire::FIB_RULE_INVERT != 0;
    let mut r = RuleInfo {
        family,
        priority: 0,
        src: None,
        dst: None,
        table: u8::from(*msg.rtm_table()) as u32,
        action: u8::from(*msg.rtm_type()),
        more_selectors: invert || *msg.rtm_tos() != 0,
    };
    for a in msg.rtattrs().iter() {
        let p = a.rta_payload().as_ref();
        let ty = u16::from(*a.rta_type()) & 0x3fff;
        match ty {
            wire::FRA_SRC => r.src = Some(prefix_of(op, p, *msg.rtm_src_len())?),
            wire::FRA_DST => r.dst = Some(prefix_of(op, p, *msg.rtm_dst_len())?),
            wire::FRA_PRIORITY => r.priority = wire::as_u32(p).unwrap_or(0),
            wire::FRA_TABLE => r.table = wire::as_u32(p).unwrap_or(r.table),
            // who made the rule, and padding: nothing about which packets it matches
            wire::FRA_PROTOCOL | wire::FRA_PAD => {}
            // reported on every rule, all ones when not set
            wire::FRA_SUPPRESS_IFGROUP | wire::FRA_SUPPRESS_PREFIXLEN if wire::as_u32(p) == Some(u32::MAX) => {}
            _ => r.more_selectors = true,
        }
    }
    Ok(Some(r))
}
