//! nf_tables expressions and the matchers built from them, encoded the way nft encodes
//! them, so rules made here list (`nft list`, `nft -j list`) exactly like rules nft made.
//!
//! Only the shapes (see the module docs) use these: plugins never build expressions.
use crate::netlink::bytes::{self, CStruct};
use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::objects::Family;
use super::wire::*;
use crate::netlink::netfilter::Attrs;

/// The first data register (`NFT_REG_1`); nft loads everything into it.
pub const REG_1: u32 = 1;
/// The second data register, for a NAT port next to its address.
pub const REG_2: u32 = 2;

/// `meta` keys (NFT_META_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaKey {
    Mark = 3,
    Iifname = 6,
    Oifname = 7,
    Nfproto = 15,
    L4proto = 16,
}

/// Where a payload load starts (NFT_PAYLOAD_*_HEADER).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadBase {
    Link = 0,
    Network = 1,
    Transport = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq = 0,
    Neq = 1,
}

/// What a rule does with the packet when it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Drop,
    Return,
    Jump(String),
    Goto(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NatKind {
    Snat = 0,
    Dnat = 1,
}

/// conntrack states for [`ct_state`] (NF_CT_STATE_*_BIT).
pub mod ct_state {
    pub const INVALID: u32 = 1;
    pub const ESTABLISHED: u32 = 2;
    pub const RELATED: u32 = 4;
    pub const NEW: u32 = 8;
    pub const UNTRACKED: u32 = 64;
}

/// One expression of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// Load a meta key into `dreg`.
    Meta { key: MetaKey, dreg: u32 },
    /// Set a meta key (e.g. the mark) from `sreg`.
    MetaSet { key: MetaKey, sreg: u32 },
    /// Load `len` bytes at `offset` of a header into `dreg`.
    Payload {
        base: PayloadBase,
        offset: u32,
        len: u32,
        dreg: u32,
    },
    /// Compare `sreg` with `data`; the rule stops here when it does not hold.
    Cmp { op: CmpOp, sreg: u32, data: Vec<u8> },
    /// `dreg = (sreg & mask) ^ xor`.
    Bitwise {
        sreg: u32,
        dreg: u32,
        mask: Vec<u8>,
        xor: Vec<u8>,
    },
    /// Load constant data into `dreg`.
    Immediate { dreg: u32, data: Vec<u8> },
    /// The verdict (an immediate into the verdict register).
    Verdict(Verdict),
    /// Masquerade to the outgoing interface's address.
    Masq,
    /// Source or destination NAT to the address in `addr` (and the port in `port`).
    Nat {
        kind: NatKind,
        family: Family,
        addr: Option<u32>,
        port: Option<u32>,
    },
    /// Load a conntrack key (`NFT_CT_STATE` = 0) into `dreg`.
    Ct { key: u32, dreg: u32 },
    /// A FIB lookup: `flags` say which address (NFTA_FIB_F_*), `result` what to load.
    Fib { flags: u32, result: u32, dreg: u32 },
    /// Count packets and bytes.
    Counter,
    /// An xtables match run by the kernel's nft_compat: what iptables-nft sends for an
    /// extension it has no native translation for (`-m comment`, `-m conntrack`); `info`
    /// is the extension's struct, padded to 8 bytes (XT_ALIGN) as the kernel checks.
    Match { name: String, rev: u32, info: Vec<u8> },
    /// An xtables target run by nft_compat: iptables-nft's `-j DNAT`, `-j MARK`, … (read
    /// back so a rule of the reference's portmap can be told by its target).
    Target { name: String, rev: u32, info: Vec<u8> },
}

impl Expr {
    /// The kernel's name for the expression type.
    pub fn name(&self) -> &'static str {
        match self {
            Expr::Meta { .. } | Expr::MetaSet { .. } => "meta",
            Expr::Payload { .. } => "payload",
            Expr::Cmp { .. } => "cmp",
            Expr::Bitwise { .. } => "bitwise",
            Expr::Immediate { .. } | Expr::Verdict(_) => "immediate",
            Expr::Masq => "masq",
            Expr::Nat { .. } => "nat",
            Expr::Ct { .. } => "ct",
            Expr::Fib { .. } => "fib",
            Expr::Counter => "counter",
            Expr::Match { .. } => "match",
            Expr::Target { .. } => "target",
        }
    }

    /// The expression's attributes (what goes into NFTA_EXPR_DATA).
    pub(crate) fn encode(&self, a: &mut Attrs) {
        match self {
            Expr::Meta { key, dreg } => {
                a.be32(NFTA_META_DREG, *dreg).be32(NFTA_META_KEY, *key as u32);
            }
            Expr::MetaSet { key, sreg } => {
                a.be32(NFTA_META_KEY, *key as u32).be32(NFTA_META_SREG, *sreg);
            }
            Expr::Payload {
                base,
                offset,
                len,
                dreg,
            } => {
                a.be32(NFTA_PAYLOAD_DREG, *dreg)
                    .be32(NFTA_PAYLOAD_BASE, *base as u32)
                    .be32(NFTA_PAYLOAD_OFFSET, *offset)
                    .be32(NFTA_PAYLOAD_LEN, *len);
            }
            Expr::Cmp { op, sreg, data } => {
                a.be32(NFTA_CMP_SREG, *sreg)
                    .be32(NFTA_CMP_OP, *op as u32)
                    .nest(NFTA_CMP_DATA, |d| {
                        d.bytes(NFTA_DATA_VALUE, data);
                    });
            }
            Expr::Bitwise { sreg, dreg, mask, xor } => {
                a.be32(NFTA_BITWISE_SREG, *sreg)
                    .be32(NFTA_BITWISE_DREG, *dreg)
                    .be32(NFTA_BITWISE_LEN, mask.len() as u32)
                    .nest(NFTA_BITWISE_MASK, |d| {
                        d.bytes(NFTA_DATA_VALUE, mask);
                    })
                    .nest(NFTA_BITWISE_XOR, |d| {
                        d.bytes(NFTA_DATA_VALUE, xor);
                    });
            }
            Expr::Immediate { dreg, data } => {
                a.be32(NFTA_IMMEDIATE_DREG, *dreg).nest(NFTA_IMMEDIATE_DATA, |d| {
                    d.bytes(NFTA_DATA_VALUE, data);
                });
            }
            Expr::Verdict(v) => {
                let (code, chain) = match v {
                    Verdict::Accept => (NF_ACCEPT, None),
                    Verdict::Drop => (NF_DROP, None),
                    Verdict::Return => (NFT_RETURN, None),
                    Verdict::Jump(c) => (NFT_JUMP, Some(c)),
                    Verdict::Goto(c) => (NFT_GOTO, Some(c)),
                };
                a.be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT)
                    .nest(NFTA_IMMEDIATE_DATA, |d| {
                        d.nest(NFTA_DATA_VERDICT, |v| {
                            v.be32(NFTA_VERDICT_CODE, code as u32);
                            if let Some(c) = chain {
                                v.string(NFTA_VERDICT_CHAIN, c);
                            }
                        });
                    });
            }
            Expr::Masq => {}
            Expr::Nat {
                kind,
                family,
                addr,
                port,
            } => {
                a.be32(NFTA_NAT_TYPE, *kind as u32)
                    .be32(NFTA_NAT_FAMILY, *family as u32);
                if let Some(r) = addr {
                    a.be32(NFTA_NAT_REG_ADDR_MIN, *r);
                }
                if let Some(r) = port {
                    a.be32(NFTA_NAT_REG_PROTO_MIN, *r);
                    a.be32(NFTA_NAT_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
                }
            }
            Expr::Ct { key, dreg } => {
                a.be32(NFTA_CT_DREG, *dreg).be32(NFTA_CT_KEY, *key);
            }
            Expr::Fib { flags, result, dreg } => {
                a.be32(NFTA_FIB_DREG, *dreg)
                    .be32(NFTA_FIB_RESULT, *result)
                    .be32(NFTA_FIB_FLAGS, *flags);
            }
            Expr::Counter => {
                a.be64(NFTA_COUNTER_BYTES, 0).be64(NFTA_COUNTER_PACKETS, 0);
            }
            Expr::Match { name, rev, info } => {
                a.string(NFTA_MATCH_NAME, name)
                    .be32(NFTA_MATCH_REV, *rev)
                    .bytes(NFTA_MATCH_INFO, info);
            }
            Expr::Target { name, rev, info } => {
                a.string(NFTA_TARGET_NAME, name)
                    .be32(NFTA_TARGET_REV, *rev)
                    .bytes(NFTA_TARGET_INFO, info);
            }
        }
    }
}

impl Expr {
    /// The expression a dump carries (NFTA_EXPR_NAME, NFTA_EXPR_DATA), for every kind this
    /// layer builds except meta sets (a layout is compared with what the kernel holds), and
    /// nft_compat matches and targets (iptables-nft's rules are read back); None for any other kind,
    /// and for a form this layer never builds.
    pub(crate) fn decode(name: &str, data: &[u8]) -> Option<Expr> {
        use crate::netlink::netfilter::be32;
        use crate::netlink::wire::find;
        let num = |ty: u16| find(data, ty).and_then(be32);
        let value = |ty: u16| {
            find(data, ty)
                .and_then(|d| find(d, NFTA_DATA_VALUE))
                .map(<[u8]>::to_vec)
        };
        Some(match name {
            "meta" if find(data, NFTA_META_DREG).is_some() => Expr::Meta {
                key: match num(NFTA_META_KEY)? {
                    3 => MetaKey::Mark,
                    6 => MetaKey::Iifname,
                    7 => MetaKey::Oifname,
                    15 => MetaKey::Nfproto,
                    16 => MetaKey::L4proto,
                    _ => return None,
                },
                dreg: num(NFTA_META_DREG)?,
            },
            "payload" => Expr::Payload {
                base: match num(NFTA_PAYLOAD_BASE)? {
                    0 => PayloadBase::Link,
                    1 => PayloadBase::Network,
                    2 => PayloadBase::Transport,
                    _ => return None,
                },
                offset: num(NFTA_PAYLOAD_OFFSET)?,
                len: num(NFTA_PAYLOAD_LEN)?,
                dreg: num(NFTA_PAYLOAD_DREG)?,
            },
            "cmp" => Expr::Cmp {
                op: match num(NFTA_CMP_OP)? {
                    0 => CmpOp::Eq,
                    1 => CmpOp::Neq,
                    _ => return None,
                },
                sreg: num(NFTA_CMP_SREG)?,
                data: value(NFTA_CMP_DATA)?,
            },
            "immediate" => match value(NFTA_IMMEDIATE_DATA) {
                Some(data) => Expr::Immediate {
                    dreg: num(NFTA_IMMEDIATE_DREG)?,
                    data,
                },
                None => Expr::Verdict(super::objects::decode_verdict(find(
                    find(data, NFTA_IMMEDIATE_DATA)?,
                    NFTA_DATA_VERDICT,
                )?)?),
            },
            "nat" => Expr::Nat {
                kind: match num(NFTA_NAT_TYPE)? {
                    0 => NatKind::Snat,
                    1 => NatKind::Dnat,
                    _ => return None,
                },
                family: match num(NFTA_NAT_FAMILY)? {
                    2 => Family::Ip,
                    10 => Family::Ip6,
                    _ => return None,
                },
                addr: num(NFTA_NAT_REG_ADDR_MIN),
                port: num(NFTA_NAT_REG_PROTO_MIN),
            },
            "bitwise" if find(data, NFTA_BITWISE_MASK).is_some() => Expr::Bitwise {
                sreg: num(NFTA_BITWISE_SREG)?,
                dreg: num(NFTA_BITWISE_DREG)?,
                mask: value(NFTA_BITWISE_MASK)?,
                xor: value(NFTA_BITWISE_XOR)?,
            },
            "ct" if find(data, NFTA_CT_DREG).is_some() => Expr::Ct {
                key: num(NFTA_CT_KEY)?,
                dreg: num(NFTA_CT_DREG)?,
            },
            "fib" => Expr::Fib {
                flags: num(NFTA_FIB_FLAGS)?,
                result: num(NFTA_FIB_RESULT)?,
                dreg: num(NFTA_FIB_DREG)?,
            },
            "counter" => Expr::Counter,
            "masq" => Expr::Masq,
            "match" => Expr::Match {
                name: find(data, NFTA_MATCH_NAME).map(crate::netlink::wire::as_string)?,
                rev: num(NFTA_MATCH_REV)?,
                info: find(data, NFTA_MATCH_INFO)?.to_vec(),
            },
            "target" => Expr::Target {
                name: find(data, NFTA_TARGET_NAME).map(crate::netlink::wire::as_string)?,
                rev: num(NFTA_TARGET_REV)?,
                info: find(data, NFTA_TARGET_INFO)?.to_vec(),
            },
            _ => return None,
        })
    }
}

// ------------------------------------------------------------------ matchers
//
// Each returns the expressions nft generates for the same words, so listings match.

/// `meta nfproto ipv4|ipv6`: what nft puts in front of an ip/ip6 match in an inet table.
pub fn nfproto(ip: IpAddr) -> Vec<Expr> {
    let proto: u8 = if ip.is_ipv4() { 2 } else { 10 };
    vec![
        Expr::Meta {
            key: MetaKey::Nfproto,
            dreg: REG_1,
        },
        cmp(CmpOp::Eq, vec![proto]),
    ]
}

/// `meta l4proto N` (6 tcp, 17 udp, 132 sctp).
pub fn l4proto(proto: u8) -> Vec<Expr> {
    vec![
        Expr::Meta {
            key: MetaKey::L4proto,
            dreg: REG_1,
        },
        cmp(CmpOp::Eq, vec![proto]),
    ]
}

/// `iifname [!=] NAME` / `oifname [!=] NAME` (`key` is Iifname or Oifname).
pub fn ifname(key: MetaKey, op: CmpOp, name: &str) -> Vec<Expr> {
    let mut data = name.as_bytes().to_vec();
    data.resize(16, 0); // IFNAMSIZ, NUL-padded as nft sends it
    vec![Expr::Meta { key, dreg: REG_1 }, cmp(op, data)]
}

/// `meta mark [!=] MARK`.
pub fn mark(op: CmpOp, mark: u32) -> Vec<Expr> {
    vec![
        Expr::Meta {
            key: MetaKey::Mark,
            dreg: REG_1,
        },
        cmp(op, bytes::host32(mark).to_vec()),
    ]
}

/// `meta mark set MARK`.
pub fn set_mark(mark: u32) -> Vec<Expr> {
    vec![
        Expr::Immediate {
            dreg: REG_1,
            data: bytes::host32(mark).to_vec(),
        },
        Expr::MetaSet {
            key: MetaKey::Mark,
            sreg: REG_1,
        },
    ]
}

/// Which address of the IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrField {
    Saddr,
    Daddr,
}

/// `ip|ip6 saddr|daddr [!=] NET` in a table of `family`: a single address when `net` is a
/// host prefix. Like nft: in an inet (or bridge) table the IP version is checked first; a
/// byte-aligned prefix loads only its bytes, any other prefix is masked.
pub fn addr(family: Family, field: AddrField, op: CmpOp, net: IpNetwork) -> Vec<Expr> {
    let mut out = match family {
        Family::Inet | Family::Bridge | Family::Netdev => nfproto(net.ip()),
        _ => vec![],
    };
    let (len, offset) = match (net, field) {
        (IpNetwork::V4(_), AddrField::Saddr) => (4, 12),
        (IpNetwork::V4(_), AddrField::Daddr) => (4, 16),
        (IpNetwork::V6(_), AddrField::Saddr) => (16, 8),
        (IpNetwork::V6(_), AddrField::Daddr) => (16, 24),
    };
    let prefix = u32::from(net.prefix());
    let bytes = crate::netlink::wire::ip_bytes(net.network());
    if prefix == len * 8 || (prefix % 8 == 0 && prefix > 0) {
        let n = prefix / 8;
        out.push(payload(PayloadBase::Network, offset, n));
        out.push(cmp(op, bytes[..n as usize].to_vec()));
    } else {
        let mask = crate::netlink::wire::ip_bytes(net.mask());
        out.push(payload(PayloadBase::Network, offset, len));
        out.push(Expr::Bitwise {
            sreg: REG_1,
            dreg: REG_1,
            xor: vec![0; mask.len()],
            mask,
        });
        out.push(cmp(op, bytes));
    }
    out
}

/// `th dport PORT` (after an [`l4proto`] match).
pub fn th_dport(port: u16) -> Vec<Expr> {
    vec![
        payload(PayloadBase::Transport, 2, 2),
        cmp(CmpOp::Eq, bytes::net16(port).to_vec()),
    ]
}

/// `ether saddr MAC` (bridge family).
pub fn ether_saddr(mac: [u8; 6]) -> Vec<Expr> {
    vec![payload(PayloadBase::Link, 6, 6), cmp(CmpOp::Eq, mac.to_vec())]
}

/// `ct state S1,S2,…` (`states` is an OR of [`ct_state`] bits).
pub fn ct_state(states: u32) -> Vec<Expr> {
    vec![
        Expr::Ct { key: 0, dreg: REG_1 },
        Expr::Bitwise {
            sreg: REG_1,
            dreg: REG_1,
            mask: bytes::host32(states).to_vec(),
            xor: vec![0; 4],
        },
        cmp(CmpOp::Neq, vec![0; 4]),
    ]
}

/// `fib daddr type local`.
pub fn fib_daddr_local() -> Vec<Expr> {
    const NFTA_FIB_F_DADDR: u32 = 2;
    const NFT_FIB_RESULT_ADDRTYPE: u32 = 3;
    const RTN_LOCAL: u32 = 2;
    vec![
        Expr::Fib {
            flags: NFTA_FIB_F_DADDR,
            result: NFT_FIB_RESULT_ADDRTYPE,
            dreg: REG_1,
        },
        cmp(CmpOp::Eq, bytes::host32(RTN_LOCAL).to_vec()),
    ]
}

/// `dnat|snat ip|ip6 to ADDR[:PORT]`.
pub fn nat(kind: NatKind, to: IpAddr, port: Option<u16>) -> Vec<Expr> {
    let family = if to.is_ipv4() { Family::Ip } else { Family::Ip6 };
    let mut out = vec![Expr::Immediate {
        dreg: REG_1,
        data: crate::netlink::wire::ip_bytes(to),
    }];
    if let Some(p) = port {
        out.push(Expr::Immediate {
            dreg: REG_2,
            data: bytes::net16(p).to_vec(),
        });
    }
    out.push(Expr::Nat {
        kind,
        family,
        addr: Some(REG_1),
        port: port.map(|_| REG_2),
    });
    out
}

// ------------------------------------------------------------------ iptables-nft
//
// What iptables-nft 1.8.9 sends for the options cnibox writes, read from
// `nft --debug=netlink list table ip filter` after `iptables-nft -A …` in a scratch
// namespace. `-s`/`-d` are [`addr`] of the `ip`/`ip6` family (a host address loads all of
// its bytes, a byte-aligned prefix only its bytes, any other prefix is masked), and the
// verdict is [`Expr::Verdict`]; the rest differs from nft:

/// `counter`: iptables-nft puts one before every rule's verdict.
/// ```text
/// [ counter pkts 0 bytes 0 ]
/// ```
pub fn counter() -> Expr {
    Expr::Counter
}

/// `-i NAME` / `-o NAME` (`! -o NAME` with [`CmpOp::Neq`]): unlike nft, iptables-nft
/// compares the name with its NUL only, and `NAME+` (any interface starting with NAME)
/// without it. For `-i cni0` and `-o cni+`:
/// ```text
/// [ meta load iifname => reg 1 ]
/// [ cmp eq reg 1 0x30696e63 0x00000000 ]      (5 bytes: "cni0\0")
/// [ meta load oifname => reg 1 ]
/// [ cmp eq reg 1 0x00696e63 ]                 (3 bytes: "cni")
/// ```
pub fn xt_ifname(key: MetaKey, op: CmpOp, name: &str) -> Vec<Expr> {
    let data = match name.strip_suffix('+') {
        Some(prefix) => prefix.as_bytes().to_vec(),
        None => {
            let mut d = name.as_bytes().to_vec();
            d.push(0);
            d
        }
    };
    vec![Expr::Meta { key, dreg: REG_1 }, cmp(op, data)]
}

/// The interface name of an [`xt_ifname`] comparison's data, `+`-suffixed for a prefix.
pub fn read_xt_ifname(data: &[u8]) -> Option<String> {
    let name = match data.split_last() {
        Some((0, name)) => String::from_utf8(name.to_vec()).ok()?,
        Some(_) => format!("{}+", String::from_utf8(data.to_vec()).ok()?),
        None => return None,
    };
    (!name.contains('\0')).then_some(name)
}

/// xt_comment_info: `char comment[XT_MAX_COMMENT_LEN]`.
const XT_COMMENT_LEN: usize = 256;

/// `-m comment --comment TEXT`: nft_compat's `comment` match (revision 0) with the text
/// NUL-padded to 256 bytes; nothing goes into the rule's userdata.
/// ```text
/// [ match name comment rev 0 ]
/// ```
pub fn xt_comment(text: &str) -> Expr {
    let mut info = text.as_bytes().to_vec();
    info.truncate(XT_COMMENT_LEN - 1);
    info.resize(XT_COMMENT_LEN, 0);
    Expr::Match {
        name: "comment".into(),
        rev: 0,
        info,
    }
}

/// The text of an [`xt_comment`] match.
pub fn read_xt_comment(e: &Expr) -> Option<String> {
    match e {
        Expr::Match { name, rev: 0, info } if name == "comment" && info.len() == XT_COMMENT_LEN => {
            let end = info.iter().position(|b| *b == 0)?;
            String::from_utf8(info[..end].to_vec()).ok()
        }
        _ => None,
    }
}

/// The conntrack states of `--ctstate` (XT_CONNTRACK_STATE_*: INVALID is bit 0, the others
/// are `1 << (ctinfo + 1)`, the same bits as nft's [`ct_state`](mod@ct_state) has for them).
pub mod xt_ctstate {
    pub const INVALID: u16 = 1;
    pub const ESTABLISHED: u16 = 2;
    pub const RELATED: u16 = 4;
    pub const NEW: u16 = 8;
    /// In iptables' order of printing them.
    pub const NAMES: [(u16, &str); 4] = [
        (INVALID, "INVALID"),
        (NEW, "NEW"),
        (RELATED, "RELATED"),
        (ESTABLISHED, "ESTABLISHED"),
    ];
}

/// struct xt_conntrack_mtinfo3 (164 bytes, XT_ALIGNed to 168): eight 16-byte addresses
/// and masks, expires min/max, l4proto, four ports, then `match_flags`, `invert_flags`,
/// `state_mask` (host byte order) and the rest.
const CONNTRACK_INFO_LEN: usize = 168;
const CONNTRACK_MATCH_FLAGS: usize = 146;
const CONNTRACK_STATE_MASK: usize = 150;
/// XT_CONNTRACK_STATE in match_flags.
const XT_CONNTRACK_STATE: u16 = 1;

/// `-m conntrack --ctstate S1,S2`: iptables-nft 1.8.9 does not translate it to a native
/// `ct state` (that is `-m state`); it sends nft_compat's `conntrack` match, revision 3,
/// whose struct holds only the state flag and mask. For `RELATED,ESTABLISHED`:
/// ```text
/// [ match name conntrack rev 3 ]      (match_flags 0x0001 at 146, state_mask 0x0006 at 150)
/// ```
/// (`nft list` shows it translated, as `ct state related,established`.)
pub fn xt_conntrack_state(states: u16) -> Expr {
    let info = CStruct::zeroed(CONNTRACK_INFO_LEN)
        .u16(CONNTRACK_MATCH_FLAGS, XT_CONNTRACK_STATE)
        .u16(CONNTRACK_STATE_MASK, states)
        .into_bytes();
    Expr::Match {
        name: "conntrack".into(),
        rev: 3,
        info,
    }
}

/// The states of an [`xt_conntrack_state`] match; None for a conntrack match that checks
/// anything else (an inverted state, addresses, ports, status, expiry).
pub fn read_xt_conntrack_state(e: &Expr) -> Option<u16> {
    match e {
        Expr::Match { name, rev: 3, info } if name == "conntrack" && info.len() == CONNTRACK_INFO_LEN => {
            let states = bytes::read_host16(&info[CONNTRACK_STATE_MASK..])?;
            (xt_conntrack_state(states) == *e).then_some(states)
        }
        _ => None,
    }
}

fn payload(base: PayloadBase, offset: u32, len: u32) -> Expr {
    Expr::Payload {
        base,
        offset,
        len,
        dreg: REG_1,
    }
}

fn cmp(op: CmpOp, data: Vec<u8>) -> Expr {
    Expr::Cmp { op, sreg: REG_1, data }
}
