//! iptables-nft's tables, read and written over netlink: an iptables chain made through
//! the nf_tables backend is an ordinary chain of table `ip TABLE` / `ip6 TABLE`, and an
//! iptables rule is a rule of it whose expressions iptables-nft parses back into options.
//! Rules written here are encoded exactly as iptables-nft 1.8.9 encodes the same options
//! (see the iptables-nft section of [`expr`]), so `iptables-save`, `iptables -D`/`-F`/`-X`
//! and the Go plugins through iptables read and delete them as their own, and rules they
//! made read back here.
//!
//! What iptables-nft does that this follows:
//! * A table is created (`add table ip filter`, no flags, no comment) by the first change
//!   to it; a built-in chain (`FORWARD`: `type filter hook forward priority filter; policy
//!   accept;`) only when a rule is first put into it, never just for being listed by
//!   `iptables-save`. An existing built-in chain is never declared again (that would reset
//!   an administrator's `-P FORWARD DROP`).
//! * A rule is `-i`, `-o`, `-s`, `-d`, the matches in order, a counter, the verdict; no
//!   userdata and no NFTA_RULE_COMPAT (that is only for `-p`).
//! * iptables-nft takes no xtables lock (`-w` is accepted and ignored; strace shows no
//!   `/run/xtables.lock`): it reads the ruleset's generation, plans on what it reads, and
//!   sends its batch conditional on that generation (NFNL_BATCH_GENID); the kernel refuses
//!   it with ERESTART if anything was committed in between, and iptables-nft reads again.
//!   [`Writer`] does the same, so cnibox and iptables-nft (dockerd, the reference plugins)
//!   never apply a plan made on a stale read.
//!
//! Only the options cnibox writes are understood: a rule with anything else (a protocol,
//! another match, a target extension) reads back as [`XtRule`] `None`, which callers treat
//! as someone else's rule.
use crate::netlink::bytes;
use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::super::expr::{self, AddrField, CmpOp, Expr, MetaKey, PayloadBase, Verdict};
use super::super::{BaseChain, Chain, ChainInfo, ChainType, Family, Hook, Nftables, Policy, Rule, Table, Transaction};
use crate::netlink::wire::as_ip;
use crate::netlink::Result;

/// Whether `table` of `family` (Ip or Ip6) has a chain named `chain`.
pub fn has_chain(nft: &Nftables, family: Family, table: &str, chain: &str) -> Result<bool> {
    Ok(nft.chains(family, table)?.iter().any(|c| c.name == chain))
}

/// A condition, possibly negated (`! -o BR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond<T> {
    pub value: T,
    pub negated: bool,
}

/// A match extension cnibox uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XtMatch {
    /// `-m comment --comment TEXT`.
    Comment(String),
    /// `-m conntrack --ctstate …` (an OR of [`expr::xt_ctstate`] bits).
    CtState(u16),
}

/// `-j TARGET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Accept,
    Drop,
    Return,
    Jump(String),
}

/// One iptables rule in iptables' terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XtRule {
    pub source: Option<Cond<IpNetwork>>,
    pub destination: Option<Cond<IpNetwork>>,
    pub in_iface: Option<Cond<String>>,
    pub out_iface: Option<Cond<String>>,
    pub matches: Vec<XtMatch>,
    /// None: no `-j` (the rule only counts).
    pub target: Option<Target>,
}

/// A chain of an iptables-nft table as dumped: built-in chains carry their policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XtChain {
    pub name: String,
    pub policy: Option<Policy>,
}

/// One rule as dumped: its handle (for deletion) and what it says, None when it says
/// something this module does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XtRuleInfo {
    pub chain: String,
    pub handle: u64,
    pub rule: Option<XtRule>,
}

/// A table of iptables-nft as one read sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XtTable {
    /// The ruleset's generation before the read (see [`Writer::new`]).
    pub generation: u32,
    pub exists: bool,
    /// In the kernel's order (creation order).
    pub chains: Vec<XtChain>,
    /// Every rule of every chain, each chain's rules in order.
    pub rules: Vec<XtRuleInfo>,
}

/// The built-in chains iptables-nft gives each table cnibox writes to (filter, nat), with
/// their hook and priority (NF_IP_PRI_*; the same for ip6).
fn builtin(table: &str, chain: &str) -> Option<(ChainType, Hook, i32)> {
    use Hook::*;
    let (kind, hook, priority) = match (table, chain) {
        ("filter", "INPUT") => (ChainType::Filter, Input, 0),
        ("filter", "FORWARD") => (ChainType::Filter, Forward, 0),
        ("filter", "OUTPUT") => (ChainType::Filter, Output, 0),
        ("nat", "PREROUTING") => (ChainType::Nat, Prerouting, -100),
        ("nat", "INPUT") => (ChainType::Nat, Input, 100),
        ("nat", "OUTPUT") => (ChainType::Nat, Output, -100),
        ("nat", "POSTROUTING") => (ChainType::Nat, Postrouting, 100),
        _ => return None,
    };
    Some((kind, hook, priority))
}

/// Reads `table` of `family` (Ip or Ip6): one dump of its chains, one of its rules.
pub fn read(nft: &Nftables, family: Family, table: &str) -> Result<XtTable> {
    read_where(nft, family, table, None).map(Option::unwrap_or_default)
}

/// [`read`], or None, without reading the rules, when the table has no chain `chain`
/// (DEL: nothing of the caller's can be there; one chain dump decides and serves the read).
pub fn read_if_chain(nft: &Nftables, family: Family, table: &str, chain: &str) -> Result<Option<XtTable>> {
    read_where(nft, family, table, Some(chain))
}

fn read_where(nft: &Nftables, family: Family, table: &str, needed: Option<&str>) -> Result<Option<XtTable>> {
    let generation = nft.generation()?;
    let chains = nft.chains(family, table)?;
    if needed.is_some_and(|n| !chains.iter().any(|c| c.name == n)) {
        return Ok(None);
    }
    if chains.is_empty() && !nft.has_table(family, table)? {
        return Ok(Some(XtTable {
            generation,
            ..XtTable::default()
        }));
    }
    let rules = nft
        .table_rules(family, table)?
        .into_iter()
        .map(|r| XtRuleInfo {
            // a userdata comment (nft's `comment "…"`, which iptables-nft lists as
            // `-m comment`) is more than the expressions say: not a rule written here
            rule: r.comment.is_none().then(|| decode(family, &r.expressions())).flatten(),
            chain: r.chain,
            handle: r.handle,
        })
        .collect();
    Ok(Some(XtTable {
        generation,
        exists: true,
        chains: chains.iter().map(xt_chain).collect(),
        rules,
    }))
}

/// What the host-port check needs of a rule of an iptables-nft `nat` table: portmap's
/// `CNI-DN-*` chains and the `CNI-HOSTPORT-DNAT` rules jumping to them, the reference's or
/// cnibox's iptables backend's. Only read, never written here (the iptables path writes
/// them with iptables-restore), so this is a view, not an [`XtRule`]: iptables-nft 1.8.9
/// encodes `-p`, `-d` and `--dport` natively and `-j DNAT` as an nft_compat target:
/// ```text
/// -d 10.0.0.1/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.2:80
///   [ meta load l4proto => reg 1 ]  [ cmp eq reg 1 0x00000006 ]
///   [ payload load 4b @ network header + 16 => reg 1 ]  [ cmp eq reg 1 0x0100000a ]
///   [ payload load 2b @ transport header + 2 => reg 1 ]  [ cmp eq reg 1 0x0000901f ]
///   [ counter pkts 0 bytes 0 ]  [ target name DNAT rev 2 ]
/// -p tcp -m comment --comment "dnat name: …" -m multiport --dports 8080 -j CNI-DN-…
///   [ meta load l4proto … ]  [ cmp … ]  [ match name comment rev 0 ]
///   [ match name multiport rev 1 ]  [ counter … ]  [ immediate reg 0 jump -> CNI-DN-… ]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NatRule {
    pub chain: String,
    /// `-p`, as the protocol number.
    pub protocol: Option<u8>,
    /// `-d`'s address (its prefix length is not kept).
    pub destination: Option<IpAddr>,
    /// `--dport` of `-m tcp`/`-m udp`/`-m sctp`.
    pub dport: Option<u16>,
    /// `-m comment --comment` (or nft's userdata comment, which iptables-nft lists so).
    pub comment: Option<String>,
    pub target: NatTarget,
}

/// The `-j` of a [`NatRule`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NatTarget {
    /// No verdict or target: the rule only counts.
    #[default]
    None,
    Dnat,
    Jump(String),
    /// Any other verdict or target: never taken for a forward.
    Other,
}

/// The rules of `family`'s `nat` table, in one dump (none without the table).
pub fn nat_rules(nft: &Nftables, family: Family) -> Result<Vec<NatRule>> {
    Ok(nft
        .table_rules(family, "nat")?
        .into_iter()
        .map(|r| {
            let mut rule = nat_rule(family, &r.expressions());
            rule.chain = r.chain;
            rule.comment = rule.comment.or(r.comment);
            rule
        })
        .collect())
}

/// One rule's expressions as a [`NatRule`] (without its chain). Conditions on other fields
/// (portmap's `conditionsV4`: `-s`, …) and expressions this layer does not read are passed
/// over, as the process path passes over options it does not look for; a negated `-p`,
/// `-d` or `--dport` gives no value.
fn nat_rule(family: Family, exprs: &[Option<Expr>]) -> NatRule {
    #[derive(Clone, Copy)]
    enum Loaded {
        Protocol,
        Daddr,
        Dport,
        Other,
    }
    let mut rule = NatRule::default();
    let mut loaded = Loaded::Other;
    for e in exprs.iter().flatten() {
        match e {
            Expr::Meta {
                key: MetaKey::L4proto, ..
            } => loaded = Loaded::Protocol,
            // IPv4's protocol field, as older iptables-nft loads it for `-p`
            Expr::Payload {
                base: PayloadBase::Network,
                offset: 9,
                len: 1,
                ..
            } if family == Family::Ip => loaded = Loaded::Protocol,
            Expr::Payload {
                base: PayloadBase::Network,
                offset,
                ..
            } => {
                loaded = match addr_field(family, *offset) {
                    Some((AddrField::Daddr, _)) => Loaded::Daddr,
                    _ => Loaded::Other,
                }
            }
            Expr::Payload {
                base: PayloadBase::Transport,
                offset: 2,
                len: 2,
                ..
            } => loaded = Loaded::Dport,
            Expr::Meta { .. } | Expr::Payload { .. } | Expr::Ct { .. } | Expr::Fib { .. } => loaded = Loaded::Other,
            Expr::Cmp {
                op: CmpOp::Eq, data, ..
            } => match loaded {
                Loaded::Protocol if data.len() == 1 => rule.protocol = Some(data[0]),
                Loaded::Daddr => rule.destination = as_ip(data),
                Loaded::Dport if data.len() == 2 => rule.dport = bytes::read_net16(data),
                _ => {}
            },
            Expr::Match { .. } => {
                if let Some(text) = expr::read_xt_comment(e) {
                    rule.comment = Some(text);
                }
            }
            Expr::Target { name, .. } => {
                rule.target = if name == "DNAT" {
                    NatTarget::Dnat
                } else {
                    NatTarget::Other
                }
            }
            Expr::Verdict(Verdict::Jump(c)) => rule.target = NatTarget::Jump(c.clone()),
            Expr::Verdict(_) | Expr::Masq | Expr::Nat { .. } => rule.target = NatTarget::Other,
            Expr::Cmp { .. } | Expr::Bitwise { .. } | Expr::Immediate { .. } | Expr::MetaSet { .. } | Expr::Counter => {
            }
        }
    }
    rule
}

fn xt_chain(c: &ChainInfo) -> XtChain {
    XtChain {
        name: c.name.clone(),
        policy: c.hook.map(|_| c.policy.unwrap_or(Policy::Accept)),
    }
}

/// Changes to one iptables-nft table in one transaction, in the order iptables-nft makes
/// them: the table when missing, a built-in chain right before its first rule. The
/// transaction applies only if nothing was committed since the read it was planned on (as
/// iptables-nft's own batches); otherwise the commit fails with
/// [`is_generation_changed`](crate::netlink::Error::is_generation_changed) and the caller
/// reads and plans again.
pub struct Writer<'a> {
    family: Family,
    table: &'a str,
    table_exists: bool,
    chains: Vec<String>,
}

impl<'a> Writer<'a> {
    /// Changes to `table` as `read` found it, made conditional on `read`'s generation.
    pub fn new(tx: &mut Transaction, family: Family, table: &'a str, read: &XtTable) -> Writer<'a> {
        tx.only_if_generation(read.generation);
        Writer {
            family,
            table,
            table_exists: read.exists,
            chains: read.chains.iter().map(|c| c.name.clone()).collect(),
        }
    }

    fn ensure_table(&mut self, tx: &mut Transaction) {
        if !self.table_exists {
            tx.add_table(&Table {
                family: self.family,
                name: self.table,
                comment: None,
            });
            self.table_exists = true;
        }
    }

    /// `-N CHAIN`.
    pub fn new_chain(&mut self, tx: &mut Transaction, chain: &str) {
        self.ensure_table(tx);
        tx.add_chain(&Chain {
            family: self.family,
            table: self.table,
            name: chain,
            base: None,
            comment: None,
        });
        self.chains.push(chain.to_string());
    }

    /// `-X CHAIN` (empty and unreferenced by then).
    pub fn delete_chain(&mut self, tx: &mut Transaction, chain: &str) {
        tx.delete_chain(self.family, self.table, chain);
        self.chains.retain(|c| c != chain);
    }

    /// `-A CHAIN RULE` (`first`: `-I CHAIN 1 RULE`).
    pub fn put_rule(&mut self, tx: &mut Transaction, chain: &str, rule: &XtRule, first: bool) {
        self.ensure_table(tx);
        if !self.chains.iter().any(|c| c == chain) {
            if let Some((kind, hook, priority)) = builtin(self.table, chain) {
                tx.add_chain(&Chain {
                    family: self.family,
                    table: self.table,
                    name: chain,
                    base: Some(BaseChain {
                        kind,
                        hook,
                        priority,
                        policy: Some(Policy::Accept),
                    }),
                    comment: None,
                });
                self.chains.push(chain.to_string());
            }
        }
        let r = Rule {
            family: self.family,
            table: self.table,
            chain,
            exprs: encode(self.family, rule),
            comment: None,
        };
        if first {
            tx.insert_rule(&r);
        } else {
            tx.add_rule(&r);
        }
    }

    /// `-D CHAIN …` of the rule with `handle`.
    pub fn delete_rule(&mut self, tx: &mut Transaction, chain: &str, handle: u64) {
        tx.delete_rule(self.family, self.table, chain, handle);
    }
}

/// The expressions iptables-nft sends for `rule`.
pub fn encode(family: Family, rule: &XtRule) -> Vec<Expr> {
    let op = |negated: bool| if negated { CmpOp::Neq } else { CmpOp::Eq };
    let mut out = Vec::new();
    if let Some(c) = &rule.in_iface {
        out.extend(expr::xt_ifname(MetaKey::Iifname, op(c.negated), &c.value));
    }
    if let Some(c) = &rule.out_iface {
        out.extend(expr::xt_ifname(MetaKey::Oifname, op(c.negated), &c.value));
    }
    for (field, c) in [(AddrField::Saddr, &rule.source), (AddrField::Daddr, &rule.destination)] {
        if let Some(c) = c {
            out.extend(expr::addr(family, field, op(c.negated), c.value));
        }
    }
    for m in &rule.matches {
        out.push(match m {
            XtMatch::Comment(text) => expr::xt_comment(text),
            XtMatch::CtState(states) => expr::xt_conntrack_state(*states),
        });
    }
    out.push(expr::counter());
    match &rule.target {
        Some(Target::Accept) => out.push(Expr::Verdict(Verdict::Accept)),
        Some(Target::Drop) => out.push(Expr::Verdict(Verdict::Drop)),
        Some(Target::Return) => out.push(Expr::Verdict(Verdict::Return)),
        Some(Target::Jump(c)) => out.push(Expr::Verdict(Verdict::Jump(c.clone()))),
        None => {}
    }
    out
}

/// The rule `exprs` say, if they are exactly what [`encode`] makes of some [`XtRule`]:
/// decoded, then encoded again and compared, so a rule with anything more (or an
/// encoding iptables-nft would not make) is not mistaken for one of ours.
pub fn decode(family: Family, exprs: &[Option<Expr>]) -> Option<XtRule> {
    let exprs: Vec<&Expr> = exprs.iter().map(Option::as_ref).collect::<Option<_>>()?;
    let mut rule = XtRule::default();
    let mut rest = &exprs[..];
    while let Some((first, tail)) = rest.split_first() {
        match first {
            Expr::Meta { key, .. } if matches!(key, MetaKey::Iifname | MetaKey::Oifname) => {
                let Some((Expr::Cmp { op, data, .. }, tail)) = tail.split_first() else {
                    return None;
                };
                let c = Some(Cond {
                    value: expr::read_xt_ifname(data)?,
                    negated: *op == CmpOp::Neq,
                });
                match key {
                    MetaKey::Iifname => rule.in_iface = c,
                    _ => rule.out_iface = c,
                }
                rest = tail;
            }
            Expr::Payload {
                base: PayloadBase::Network,
                offset,
                len,
                ..
            } => {
                let (field, bytes) = addr_field(family, *offset)?;
                let (mask, op, data, tail) = match tail {
                    [Expr::Bitwise { mask, .. }, Expr::Cmp { op, data, .. }, tail @ ..] => {
                        (mask.clone(), op, data, tail)
                    }
                    [Expr::Cmp { op, data, .. }, tail @ ..] => {
                        let mut mask = vec![0xff; *len as usize];
                        mask.resize(bytes, 0);
                        (mask, op, data, tail)
                    }
                    _ => return None,
                };
                let mut full = data.clone();
                full.resize(bytes, 0);
                let ip = as_ip(&full)?;
                let prefix = mask.iter().map(|b| b.count_ones()).sum::<u32>() as u8;
                let c = Some(Cond {
                    value: IpNetwork::new(ip, prefix).ok()?,
                    negated: *op == CmpOp::Neq,
                });
                match field {
                    AddrField::Saddr => rule.source = c,
                    AddrField::Daddr => rule.destination = c,
                }
                rest = tail;
            }
            Expr::Match { .. } => {
                rule.matches.push(if let Some(text) = expr::read_xt_comment(first) {
                    XtMatch::Comment(text)
                } else {
                    XtMatch::CtState(expr::read_xt_conntrack_state(first)?)
                });
                rest = tail;
            }
            Expr::Counter => {
                rule.target = match tail {
                    [] => None,
                    [Expr::Verdict(v)] => Some(match v {
                        Verdict::Accept => Target::Accept,
                        Verdict::Drop => Target::Drop,
                        Verdict::Return => Target::Return,
                        Verdict::Jump(c) => Target::Jump(c.clone()),
                        Verdict::Goto(_) => return None,
                    }),
                    _ => return None,
                };
                return encode(family, &rule).iter().eq(exprs.iter().copied()).then_some(rule);
            }
            _ => return None,
        }
    }
    None
}

/// Which address a network-header load at `offset` is, and the address's length.
fn addr_field(family: Family, offset: u32) -> Option<(AddrField, usize)> {
    Some(match (family, offset) {
        (Family::Ip, 12) => (AddrField::Saddr, 4),
        (Family::Ip, 16) => (AddrField::Daddr, 4),
        (Family::Ip6, 8) => (AddrField::Saddr, 16),
        (Family::Ip6, 24) => (AddrField::Daddr, 16),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::netfilter::Attrs;

    fn net(s: &str) -> Cond<IpNetwork> {
        Cond {
            value: s.parse().unwrap(),
            negated: false,
        }
    }

    fn round_trip(family: Family, rule: &XtRule) -> Option<XtRule> {
        let exprs: Vec<Option<Expr>> = encode(family, rule).into_iter().map(Some).collect();
        decode(family, &exprs)
    }

    /// The NFTA_EXPR_DATA of one expression, as hex.
    fn data_hex(e: &Expr) -> String {
        let mut a = Attrs::new();
        e.encode(&mut a);
        a.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_reference_rules_encode_as_iptables_nft_sends_them() {
        // -d 10.88.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT, as dumped
        // from the kernel after `iptables-nft -A` (nft --debug=netlink):
        //   [ payload load 4b @ network header + 16 => reg 1 ]
        //   [ cmp eq reg 1 0x0200580a ]
        //   [ match name conntrack rev 3 ]
        //   [ counter pkts 0 bytes 0 ]
        //   [ immediate reg 0 accept ]
        let replies = XtRule {
            destination: Some(net("10.88.0.2/32")),
            matches: vec![XtMatch::CtState(
                expr::xt_ctstate::RELATED | expr::xt_ctstate::ESTABLISHED,
            )],
            target: Some(Target::Accept),
            ..XtRule::default()
        };
        let e = encode(Family::Ip, &replies);
        assert_eq!(
            e.iter().map(Expr::name).collect::<Vec<_>>(),
            ["payload", "cmp", "match", "counter", "immediate"]
        );
        assert_eq!(
            e[1],
            Expr::Cmp {
                op: CmpOp::Eq,
                sreg: 1,
                data: vec![10, 88, 0, 2]
            }
        );
        // the match's attributes byte for byte as the kernel dumped iptables-nft's:
        // name "conntrack", rev 3, 168 bytes of info with 0x0001 at 146 and 0x0006 at 150
        let mut info = "00".repeat(146);
        info += "0100000006000000";
        info += &"00".repeat(14);
        assert_eq!(
            data_hex(&e[2]),
            format!("0e000100636f6e6e747261636b0000000800020000000003ac000300{info}")
        );
        // -m comment --comment "CNI firewall plugin rules": 256 bytes, NUL-padded
        let c = expr::xt_comment("CNI firewall plugin rules");
        let hex = data_hex(&c);
        assert!(
            hex.starts_with("0c000100636f6d6d656e7400080002000000000004010300434e49"),
            "{hex}"
        );
        assert_eq!(hex.len(), 2 * (12 + 8 + 4 + 256));
        assert_eq!(round_trip(Family::Ip, &replies), Some(replies));
    }

    #[test]
    fn the_reference_portmap_rules_read_as_nat_rules() {
        // as the kernel dumps what iptables-nft 1.8.9 made of the reference's
        // `-d 1.2.3.4/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.2:80`
        // and `-p tcp -m comment --comment "dnat name: …" -m multiport --dports 8080 -j CNI-DN-x`
        let l4 = |p: u8| {
            [
                Some(Expr::Meta {
                    key: MetaKey::L4proto,
                    dreg: 1,
                }),
                Some(Expr::Cmp {
                    op: CmpOp::Eq,
                    sreg: 1,
                    data: vec![p],
                }),
            ]
        };
        let load = |base, offset, len| {
            Some(Expr::Payload {
                base,
                offset,
                len,
                dreg: 1,
            })
        };
        let eq = |data: &[u8]| {
            Some(Expr::Cmp {
                op: CmpOp::Eq,
                sreg: 1,
                data: data.to_vec(),
            })
        };
        let target = |name: &str| {
            Some(Expr::Target {
                name: name.into(),
                rev: 2,
                info: vec![0; 8],
            })
        };
        let mut dnat = l4(6).to_vec();
        dnat.extend([
            load(PayloadBase::Network, 16, 4),
            eq(&[1, 2, 3, 4]),
            load(PayloadBase::Transport, 2, 2),
            eq(&8080u16.to_be_bytes()),
            Some(Expr::Counter),
            target("DNAT"),
        ]);
        assert_eq!(
            nat_rule(Family::Ip, &dnat),
            NatRule {
                protocol: Some(6),
                destination: Some("1.2.3.4".parse().unwrap()),
                dport: Some(8080),
                target: NatTarget::Dnat,
                ..NatRule::default()
            }
        );
        let mut entry = l4(17).to_vec();
        entry.extend([
            Some(expr::xt_comment(r#"dnat name: "n" id: "c""#)),
            Some(Expr::Match {
                name: "multiport".into(),
                rev: 1,
                info: vec![0; 40],
            }),
            Some(Expr::Counter),
            Some(Expr::Verdict(Verdict::Jump("CNI-DN-x".into()))),
        ]);
        assert_eq!(
            nat_rule(Family::Ip, &entry),
            NatRule {
                protocol: Some(17),
                comment: Some(r#"dnat name: "n" id: "c""#.into()),
                target: NatTarget::Jump("CNI-DN-x".into()),
                ..NatRule::default()
            }
        );
        // another target is no forward; a negated port is no port
        let mut mark = dnat.clone();
        *mark.last_mut().unwrap() = target("MARK");
        assert_eq!(nat_rule(Family::Ip, &mark).target, NatTarget::Other);
        let mut negated = dnat.clone();
        negated[5] = Some(Expr::Cmp {
            op: CmpOp::Neq,
            sreg: 1,
            data: 8080u16.to_be_bytes().to_vec(),
        });
        assert_eq!(nat_rule(Family::Ip, &negated).dport, None);
        // conditions on other fields (`conditionsV4: ["-s", …]`) and expressions this layer
        // does not read change nothing
        let mut conditioned = entry.clone();
        conditioned.splice(2..2, [load(PayloadBase::Network, 12, 4), eq(&[192, 168, 0, 0]), None]);
        assert_eq!(nat_rule(Family::Ip, &conditioned), nat_rule(Family::Ip, &entry));
        // and the target round-trips through the wire form
        let t = target("DNAT").unwrap();
        let mut a = Attrs::new();
        t.encode(&mut a);
        assert_eq!(Expr::decode("target", a.as_bytes()), Some(t));
    }

    #[test]
    fn interfaces_are_compared_with_their_nul_and_prefixes_without() {
        // -i cni0 ! -o cni0: cmp eq "cni0\0", cmp neq "cni0\0"; -o cni+: cmp eq "cni"
        let r = XtRule {
            in_iface: Some(Cond {
                value: "cni0".into(),
                negated: false,
            }),
            out_iface: Some(Cond {
                value: "cni0".into(),
                negated: true,
            }),
            matches: vec![XtMatch::Comment("x".into())],
            target: Some(Target::Jump("CNI-ISOLATION-STAGE-2".into())),
            ..XtRule::default()
        };
        let e = encode(Family::Ip, &r);
        assert_eq!(
            e[1],
            Expr::Cmp {
                op: CmpOp::Eq,
                sreg: 1,
                data: b"cni0\0".to_vec()
            }
        );
        assert!(matches!(&e[3], Expr::Cmp { op: CmpOp::Neq, .. }));
        assert_eq!(round_trip(Family::Ip, &r), Some(r));
        let prefix = expr::xt_ifname(MetaKey::Oifname, CmpOp::Eq, "cni+");
        assert!(matches!(&prefix[1], Expr::Cmp { data, .. } if data == b"cni"));
        assert_eq!(expr::read_xt_ifname(b"cni").as_deref(), Some("cni+"));
    }

    #[test]
    fn prefixes_and_ipv6_read_back() {
        for (family, s) in [
            (Family::Ip, "10.88.0.0/16"),
            (Family::Ip, "10.88.0.0/17"),
            (Family::Ip6, "fd00::2/128"),
            (Family::Ip6, "fd00::/64"),
        ] {
            let r = XtRule {
                source: Some(net(s)),
                target: Some(Target::Drop),
                ..XtRule::default()
            };
            assert_eq!(round_trip(family, &r), Some(r), "{s}");
        }
        // no target: the rule only counts
        let r = XtRule {
            source: Some(Cond {
                value: "10.0.0.0/8".parse().unwrap(),
                negated: true,
            }),
            ..XtRule::default()
        };
        assert_eq!(round_trip(Family::Ip, &r), Some(r));
    }

    #[test]
    fn rules_with_anything_else_are_not_read_as_ours() {
        let ours = encode(
            Family::Ip,
            &XtRule {
                source: Some(net("10.88.0.2/32")),
                target: Some(Target::Accept),
                ..XtRule::default()
            },
        );
        let with = |extra: Expr, at: usize| {
            let mut e: Vec<Option<Expr>> = ours.iter().cloned().map(Some).collect();
            e.insert(at, Some(extra));
            decode(Family::Ip, &e)
        };
        // -p tcp, an unknown match, an inverted --ctstate, a missing counter, an unread kind
        assert_eq!(with(expr::l4proto(6)[0].clone(), 0), None);
        let other = Expr::Match {
            name: "addrtype".into(),
            rev: 1,
            info: vec![0; 8],
        };
        assert_eq!(with(other, 2), None);
        let mut inverted = expr::xt_conntrack_state(8);
        if let Expr::Match { info, .. } = &mut inverted {
            info[148] = 1;
        }
        assert_eq!(with(inverted, 2), None);
        let no_counter: Vec<Option<Expr>> = ours
            .iter()
            .filter(|e| **e != Expr::Counter)
            .cloned()
            .map(Some)
            .collect();
        assert_eq!(decode(Family::Ip, &no_counter), None);
        let mut unread: Vec<Option<Expr>> = ours.iter().cloned().map(Some).collect();
        unread.insert(0, None);
        assert_eq!(decode(Family::Ip, &unread), None);
        // an address match of the other family's offsets
        assert_eq!(
            decode(Family::Ip6, &ours.iter().cloned().map(Some).collect::<Vec<_>>()),
            None
        );
    }
}
