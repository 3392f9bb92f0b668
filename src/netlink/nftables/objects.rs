//! Tables, chains and rules: what a transaction adds or deletes, and what dumps return.
use std::fmt;

use super::expr::{Expr, Verdict};
use super::wire::*;
use crate::netlink::bytes;
use crate::netlink::netfilter::Attrs;
use crate::netlink::netfilter::{be32, be64};
use crate::netlink::wire::{as_string, attrs, find};

/// nf_tables address families (NFPROTO_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Inet = 1,
    Ip = 2,
    Arp = 3,
    Netdev = 5,
    Bridge = 7,
    Ip6 = 10,
}

impl Family {
    /// The word nft uses.
    pub fn name(self) -> &'static str {
        match self {
            Family::Inet => "inet",
            Family::Ip => "ip",
            Family::Arp => "arp",
            Family::Netdev => "netdev",
            Family::Bridge => "bridge",
            Family::Ip6 => "ip6",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A table.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    pub family: Family,
    pub name: &'a str,
    pub comment: Option<&'a str>,
}

/// The hooks of the ip, ip6, inet and bridge families (NF_INET_*, NF_BR_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Prerouting = 0,
    Input = 1,
    Forward = 2,
    Output = 3,
    Postrouting = 4,
}

/// A base chain's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainType {
    Filter,
    Nat,
    Route,
}

impl ChainType {
    fn name(self) -> &'static str {
        match self {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
            ChainType::Route => "route",
        }
    }
}

/// Priorities by nft's names.
pub mod priority {
    pub const DSTNAT: i32 = -100;
    pub const FILTER: i32 = 0;
    pub const SRCNAT: i32 = 100;
}

/// What makes a chain a base chain: it is attached to a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseChain {
    pub kind: ChainType,
    pub hook: Hook,
    pub priority: i32,
    /// None leaves the kernel's default (accept) unsaid, as nft does without `policy`.
    pub policy: Option<Policy>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Accept,
    Drop,
}

/// A chain; `base` is None for a regular chain (only reachable by jump/goto).
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a> {
    pub family: Family,
    pub table: &'a str,
    pub name: &'a str,
    pub base: Option<BaseChain>,
    pub comment: Option<&'a str>,
}

/// A named set of fixed-size keys, or a map when it has `data` (no intervals, no timeouts:
/// a hash set).
#[derive(Debug, Clone, Copy)]
pub struct Set<'a> {
    pub family: Family,
    pub table: &'a str,
    pub name: &'a str,
    pub key: SetKey,
    /// The type of the data each key maps to (a map), or None (a set).
    pub data: Option<SetKey>,
    pub comment: Option<&'a str>,
}

/// A set's key type, as nft names it (and prints the elements).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetKey {
    /// 16 bytes, printed as an IPv6 address.
    Ipv6Addr,
}

impl SetKey {
    /// The key's size in bytes.
    pub fn bytes(self) -> usize {
        match self {
            SetKey::Ipv6Addr => 16,
        }
    }
}

/// A rule to add: its expressions in order and an optional comment.
#[derive(Debug, Clone)]
pub struct Rule<'a> {
    pub family: Family,
    pub table: &'a str,
    pub chain: &'a str,
    pub exprs: Vec<Expr>,
    pub comment: Option<&'a str>,
}

impl<'a> Rule<'a> {
    /// A rule of `chain` in `table` of `family`: how every shape builds its rules.
    pub fn new(family: Family, table: &'a str, chain: &'a str, exprs: Vec<Expr>, comment: Option<&'a str>) -> Self {
        Rule {
            family,
            table,
            chain,
            exprs,
            comment,
        }
    }
}

/// A chain as dumped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainInfo {
    pub table: String,
    pub name: String,
    pub handle: u64,
    /// Hook number and priority of a base chain.
    pub hook: Option<(u32, i32)>,
    /// The policy of a base chain.
    pub policy: Option<Policy>,
}

/// A rule as dumped: its handle (for deletion), its comment, the jump/goto target if it
/// has one, and its expressions (decoded on demand).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    pub chain: String,
    pub handle: u64,
    pub comment: Option<String>,
    /// cnibox's tag (see [`Transaction::add_rule_tagged`](super::Transaction::add_rule_tagged)).
    pub tag: Option<String>,
    pub verdict: Option<Verdict>,
    /// NFTA_RULE_EXPRESSIONS as dumped. Decoded only when asked: every ADD dumps its
    /// table, a few hundred rules on a full node, and decoding every rule's expressions
    /// was the part of that dump that grew with the node.
    raw_expressions: Vec<u8>,
}

impl RuleInfo {
    /// The expressions decoded, in order; None where [`Expr::decode`] does not read that
    /// kind (a shape reading rules back then sees the rule is not its own).
    pub fn expressions(&self) -> Vec<Option<Expr>> {
        attrs(&self.raw_expressions)
            .map(|(_, el)| {
                let name = as_string(find(el, NFTA_EXPR_NAME)?);
                Expr::decode(&name, find(el, NFTA_EXPR_DATA).unwrap_or(&[]))
            })
            .collect()
    }

    /// Whether the rule is made of exactly `exprs`, in order (every one of them decoded).
    pub fn is_made_of(&self, exprs: &[Expr]) -> bool {
        let have = self.expressions();
        have.len() == exprs.len() && have.iter().zip(exprs).all(|(h, e)| h.as_ref() == Some(e))
    }

    /// The kernel's names of the expressions, in order.
    pub fn expression_names(&self) -> Vec<String> {
        attrs(&self.raw_expressions)
            .filter_map(|(_, el)| find(el, NFTA_EXPR_NAME).map(as_string))
            .collect()
    }

    /// A rule of `chain` with these expressions, as a dump would give it (for tests of
    /// the shapes' readers).
    pub fn with_expressions(chain: &str, handle: u64, comment: Option<&str>, exprs: &[Expr]) -> RuleInfo {
        let mut list = Attrs::new();
        expression_list(&mut list, exprs);
        RuleInfo {
            chain: chain.into(),
            handle,
            comment: comment.map(String::from),
            tag: None,
            verdict: exprs.iter().rev().find_map(|e| match e {
                Expr::Verdict(v) => Some(v.clone()),
                _ => None,
            }),
            raw_expressions: list.into_bytes(),
        }
    }
}

/// The elements of NFTA_RULE_EXPRESSIONS.
fn expression_list(list: &mut Attrs, exprs: &[Expr]) {
    for e in exprs {
        list.nest(NFTA_LIST_ELEM, |el| {
            el.string(NFTA_EXPR_NAME, e.name());
            let mut data = Attrs::new();
            e.encode(&mut data);
            if !data.is_empty() {
                el.bytes(NFTA_EXPR_DATA | crate::netlink::wire::NLA_F_NESTED, data.as_bytes());
            }
        });
    }
}

/// libnftnl's userdata with one comment TLV (the comment with its NUL, as nft stores it).
pub(crate) fn comment_udata(comment: &str) -> Vec<u8> {
    let mut end = comment.len().min(NFT_COMMENT_MAX);
    while !comment.is_char_boundary(end) {
        end -= 1;
    }
    let c = &comment.as_bytes()[..end];
    let mut v = vec![NFTNL_UDATA_COMMENT, (c.len() + 1) as u8];
    v.extend_from_slice(c);
    v.push(0);
    v
}

/// The comment TLV of a userdata blob.
pub(crate) fn udata_comment(udata: &[u8]) -> Option<String> {
    udata_tlv(udata, NFTNL_UDATA_COMMENT)
}

/// cnibox's own userdata TLV, after the comment: a tag a shape can find its rules by when
/// the layout it copies leaves nothing else to tell them apart (portmap's rules name only
/// the container, so the network goes here). nft, libnftnl and knftables skip TLV types
/// they do not know: listings show the comment alone.
pub(crate) const CNIBOX_UDATA_TAG: u8 = 0xcb;

/// A rule's userdata: the comment TLV, then the tag TLV.
pub(crate) fn rule_udata(comment: Option<&str>, tag: Option<&str>) -> Vec<u8> {
    let mut v = comment.map(comment_udata).unwrap_or_default();
    if let Some(t) = tag {
        let mut end = t.len().min(NFT_COMMENT_MAX);
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        v.extend_from_slice(&[CNIBOX_UDATA_TAG, (end + 1) as u8]);
        v.extend_from_slice(&t.as_bytes()[..end]);
        v.push(0);
    }
    v
}

fn udata_tlv(mut udata: &[u8], ty: u8) -> Option<String> {
    while udata.len() >= 2 {
        let (t, len) = (udata[0], udata[1] as usize);
        let value = udata.get(2..2 + len)?;
        if t == ty {
            return Some(as_string(value));
        }
        udata = &udata[2 + len..];
    }
    None
}

pub(crate) fn table_attrs(t: &Table) -> Attrs {
    let mut a = Attrs::new();
    a.string(NFTA_TABLE_NAME, t.name).be32(NFTA_TABLE_FLAGS, 0);
    if let Some(c) = t.comment {
        a.bytes(NFTA_TABLE_USERDATA, &comment_udata(c));
    }
    a
}

pub(crate) fn chain_attrs(c: &Chain) -> Attrs {
    let mut a = Attrs::new();
    a.string(NFTA_CHAIN_TABLE, c.table).string(NFTA_CHAIN_NAME, c.name);
    if let Some(b) = c.base {
        a.string(NFTA_CHAIN_TYPE, b.kind.name());
        a.nest(NFTA_CHAIN_HOOK, |h| {
            h.be32(NFTA_HOOK_HOOKNUM, b.hook as u32)
                .be32(NFTA_HOOK_PRIORITY, b.priority as u32);
        });
        if let Some(p) = b.policy {
            a.be32(NFTA_CHAIN_POLICY, if p == Policy::Accept { 1 } else { 0 });
        }
    }
    if let Some(comment) = c.comment {
        a.bytes(NFTA_CHAIN_USERDATA, &comment_udata(comment));
    }
    a
}

impl SetKey {
    /// nft's datatype number and byte order.
    fn nft_type(self) -> (u32, u32) {
        match self {
            SetKey::Ipv6Addr => (NFT_TYPE_IP6ADDR, NFT_BYTEORDER_BIG_ENDIAN),
        }
    }
}

/// A set's attributes as nft 1.x sends them for `add set|map … { type …; comment …; }`.
pub(crate) fn set_attrs(s: &Set) -> Attrs {
    let (key_type, byteorder) = s.key.nft_type();
    let mut udata = vec![NFTNL_UDATA_SET_KEYBYTEORDER, 4];
    udata.extend_from_slice(&bytes::host32(byteorder));
    if let Some(data) = s.data {
        udata.extend_from_slice(&[NFTNL_UDATA_SET_DATABYTEORDER, 4]);
        udata.extend_from_slice(&bytes::host32(data.nft_type().1));
    }
    if let Some(c) = s.comment {
        let mut comment = comment_udata(c);
        comment[0] = NFTNL_UDATA_SET_COMMENT;
        udata.extend(comment);
    }
    let mut a = Attrs::new();
    a.string(NFTA_SET_TABLE, s.table)
        .string(NFTA_SET_NAME, s.name)
        .be32(NFTA_SET_FLAGS, if s.data.is_some() { NFT_SET_MAP } else { 0 })
        .be32(NFTA_SET_KEY_TYPE, key_type)
        .be32(NFTA_SET_KEY_LEN, s.key.bytes() as u32);
    if let Some(data) = s.data {
        a.be32(NFTA_SET_DATA_TYPE, data.nft_type().0)
            .be32(NFTA_SET_DATA_LEN, data.bytes() as u32);
    }
    a.be32(NFTA_SET_ID, 1).bytes(NFTA_SET_USERDATA, &udata);
    a
}

/// Where set elements are: the table and the set (what an element dump is filtered by).
pub(crate) fn element_location(table: &str, set: &str) -> Attrs {
    let mut a = Attrs::new();
    a.string(NFTA_SET_ELEM_LIST_TABLE, table)
        .string(NFTA_SET_ELEM_LIST_SET, set);
    a
}

/// One element of a set, by its key, with its data in a map.
pub(crate) fn element_attrs(table: &str, set: &str, key: &[u8], data: Option<&[u8]>) -> Attrs {
    let mut a = element_location(table, set);
    a.nest(NFTA_SET_ELEM_LIST_ELEMENTS, |list| {
        list.nest(NFTA_LIST_ELEM, |el| {
            el.nest(NFTA_SET_ELEM_KEY, |k| {
                k.bytes(NFTA_DATA_VALUE, key);
            });
            if let Some(data) = data {
                el.nest(NFTA_SET_ELEM_DATA, |d| {
                    d.bytes(NFTA_DATA_VALUE, data);
                });
            }
        });
    });
    a
}

/// The elements of an element message (a dump sends several per message): each key with
/// its data (empty in a set without data).
pub(crate) fn decode_elements(a: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Some(list) = find(a, NFTA_SET_ELEM_LIST_ELEMENTS) else {
        return vec![];
    };
    let value = |el: &[u8], ty| find(find(el, ty)?, NFTA_DATA_VALUE).map(<[u8]>::to_vec);
    attrs(list)
        .filter_map(|(_, el)| {
            Some((
                value(el, NFTA_SET_ELEM_KEY)?,
                value(el, NFTA_SET_ELEM_DATA).unwrap_or_default(),
            ))
        })
        .collect()
}

pub(crate) fn decode_set_name(a: &[u8]) -> Option<String> {
    find(a, NFTA_SET_NAME).map(as_string)
}

/// A rule dump of a whole table.
pub(crate) fn table_location(table: &str) -> Attrs {
    let mut a = Attrs::new();
    a.string(NFTA_RULE_TABLE, table);
    a
}

/// Table and chain of a rule (also what a flush or a rule dump is filtered by).
pub(crate) fn rule_location(table: &str, chain: &str) -> Attrs {
    let mut a = Attrs::new();
    a.string(NFTA_RULE_TABLE, table).string(NFTA_RULE_CHAIN, chain);
    a
}

pub(crate) fn rule_attrs(r: &Rule, position: Option<u64>) -> Attrs {
    rule_attrs_tagged(r, position, None)
}

/// A rule's attributes with cnibox's tag in its userdata (see [`CNIBOX_UDATA_TAG`]).
pub(crate) fn rule_attrs_tagged(r: &Rule, position: Option<u64>, tag: Option<&str>) -> Attrs {
    let mut a = rule_location(r.table, r.chain);
    if let Some(p) = position {
        a.be64(NFTA_RULE_POSITION, p);
    }
    a.nest(NFTA_RULE_EXPRESSIONS, |list| expression_list(list, &r.exprs));
    if r.comment.is_some() || tag.is_some() {
        a.bytes(NFTA_RULE_USERDATA, &rule_udata(r.comment, tag));
    }
    a
}

pub(crate) fn decode_table_name(a: &[u8]) -> Option<String> {
    find(a, NFTA_TABLE_NAME).map(as_string)
}

pub(crate) fn decode_chain(a: &[u8]) -> Option<ChainInfo> {
    let hook = find(a, NFTA_CHAIN_HOOK).and_then(|h| {
        Some((
            be32(find(h, NFTA_HOOK_HOOKNUM)?)?,
            be32(find(h, NFTA_HOOK_PRIORITY)?)? as i32,
        ))
    });
    Some(ChainInfo {
        table: as_string(find(a, NFTA_CHAIN_TABLE)?),
        name: as_string(find(a, NFTA_CHAIN_NAME)?),
        handle: find(a, NFTA_CHAIN_HANDLE).and_then(be64).unwrap_or(0),
        hook,
        // NF_DROP 0, NF_ACCEPT 1
        policy: find(a, NFTA_CHAIN_POLICY).and_then(be32).map(|p| match p {
            0 => Policy::Drop,
            _ => Policy::Accept,
        }),
    })
}

pub(crate) fn decode_rule(a: &[u8]) -> Option<RuleInfo> {
    let raw = find(a, NFTA_RULE_EXPRESSIONS).unwrap_or(&[]);
    let mut verdict = None;
    for (_, el) in attrs(raw) {
        let name = find(el, NFTA_EXPR_NAME)?;
        if name.strip_suffix(b"\0").unwrap_or(name) == b"immediate" {
            let data = find(el, NFTA_EXPR_DATA).and_then(|d| find(d, NFTA_IMMEDIATE_DATA));
            if let Some(v) = data.and_then(|d| find(d, NFTA_DATA_VERDICT)) {
                verdict = decode_verdict(v);
            }
        }
    }
    Some(RuleInfo {
        chain: as_string(find(a, NFTA_RULE_CHAIN)?),
        handle: be64(find(a, NFTA_RULE_HANDLE)?)?,
        comment: find(a, NFTA_RULE_USERDATA).and_then(udata_comment),
        tag: find(a, NFTA_RULE_USERDATA).and_then(|u| udata_tlv(u, CNIBOX_UDATA_TAG)),
        verdict,
        raw_expressions: raw.to_vec(),
    })
}

pub(crate) fn decode_verdict(v: &[u8]) -> Option<Verdict> {
    let code = be32(find(v, NFTA_VERDICT_CODE)?)? as i32;
    let chain = || find(v, NFTA_VERDICT_CHAIN).map(as_string);
    Some(match code {
        NF_ACCEPT => Verdict::Accept,
        NF_DROP => Verdict::Drop,
        NFT_RETURN => Verdict::Return,
        NFT_JUMP => Verdict::Jump(chain()?),
        NFT_GOTO => Verdict::Goto(chain()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_one_nul_terminated_tlv_capped_like_nft() {
        assert_eq!(comment_udata("abc"), b"\x00\x04abc\x00");
        assert_eq!(udata_comment(b"\x00\x04abc\x00").as_deref(), Some("abc"));
        let long = "é".repeat(100);
        let u = comment_udata(&long);
        assert!(u.len() - 3 <= NFT_COMMENT_MAX);
        assert_eq!(udata_comment(&u).unwrap().chars().count(), 64);
    }

    #[test]
    fn a_tag_follows_the_comment_and_reads_back() {
        let u = rule_udata(Some("ctr"), Some("net"));
        assert_eq!(u, b"\x00\x04ctr\x00\xcb\x04net\x00");
        assert_eq!(udata_comment(&u).as_deref(), Some("ctr"));
        assert_eq!(udata_tlv(&u, CNIBOX_UDATA_TAG).as_deref(), Some("net"));
        assert_eq!(rule_udata(Some("ctr"), None), comment_udata("ctr"));
    }
}
