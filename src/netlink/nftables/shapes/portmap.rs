//! portmap's layout, the reference's (containernetworking/plugins
//! `plugins/meta/portmap/portmap_nftables.go`, through knftables): one table per family,
//! `ip cni_hostport` and `ip6 cni_hostport` ("CNI portmap plugin"), with
//!
//! ```text
//! chain prerouting   { type nat hook prerouting priority dstnat; [conditions] fib daddr type local jump hostports_all }
//! chain output       { type nat hook output priority dstnat;     [conditions] fib daddr type local jump hostports_all }
//! chain hostports_all { jump hostip_hostports; jump hostports }
//! chain hostip_hostports { }          (kept empty: older versions put host-IP rules there)
//! chain hostports    { [ip daddr HOST] tcp dport 8080 dnat to 10.0.0.2:80 comment "<container ID>" }
//! chain masquerading { type nat hook postrouting priority srcnat;
//!                      ip saddr 10.0.0.2 ip daddr 10.0.0.2 masquerade comment "<container ID>"
//!                      ip saddr 127.0.0.1 ip daddr 10.0.0.2 masquerade comment "<container ID>" }
//! ```
//!
//! Rules carry the container ID as their comment, so the reference and cnibox find (and
//! delete) each other's rules by comment. cnibox also tags its per-container rules with the
//! network and interface (a userdata TLV nft does not show, written by the plugin), which
//! is what lets GC of one network leave the rules of another alone, and DEL of one
//! interface the rules of another.
use crate::netlink::bytes;
use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::super::expr::{self, AddrField, CmpOp, Expr, MetaKey, NatKind, PayloadBase, Verdict, REG_1, REG_2};
use super::super::{
    priority, BaseChain, Chain, ChainType, Family, Hook, Layout, Nftables, Rule, RuleInfo, Table, TableState,
    Transaction,
};
use crate::netlink::Result;

pub const TABLE: &str = "cni_hostport";
pub const HOSTPORTS: &str = "hostports";
pub const HOSTIP_HOSTPORTS: &str = "hostip_hostports";
pub const HOSTPORTS_ALL: &str = "hostports_all";
pub const PREROUTING: &str = "prerouting";
pub const OUTPUT: &str = "output";
pub const MASQUERADING: &str = "masquerading";
/// The chains that hold per-container rules (what DEL searches).
pub const CONTAINER_CHAINS: [&str; 3] = [HOSTPORTS, HOSTIP_HOSTPORTS, MASQUERADING];
const TABLE_COMMENT: &str = "CNI portmap plugin";

/// The table's family for an address family.
pub fn family(v6: bool) -> Family {
    if v6 {
        Family::Ip6
    } else {
        Family::Ip
    }
}

/// A host port: protocol number, port, and the local address it is limited to (None:
/// every local address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPort {
    pub protocol: u8,
    pub port: u16,
    pub dest: Option<IpAddr>,
}

/// "Forward HOST to TO:TO_PORT".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    pub host: HostPort,
    pub to: IpAddr,
    pub to_port: u16,
}

/// `conditionsV4`/`conditionsV6`: matches put in front of the entry rules, from nft's
/// syntax. The reference hands them to nft as text; without nft, cnibox reads the forms
/// people use to limit where forwarded traffic may come from:
/// `ip|ip6 saddr|daddr [!=] ADDR[/LEN]` and `iifname|oifname [!=] NAME` (any number, in
/// any order; words may be split or joined).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditions(Vec<Expr>);

impl Conditions {
    pub fn parse(family: Family, words: &[String]) -> std::result::Result<Conditions, String> {
        let text = words.join(" ");
        let mut toks = tokens(&text).into_iter().peekable();
        let mut exprs = vec![];
        while let Some(t) = toks.next() {
            let op = |toks: &mut std::iter::Peekable<std::vec::IntoIter<String>>| match toks.peek() {
                Some(o) if o == "!=" || o == "==" => {
                    let neg = o == "!=";
                    toks.next();
                    if neg {
                        CmpOp::Neq
                    } else {
                        CmpOp::Eq
                    }
                }
                _ => CmpOp::Eq,
            };
            match t.as_str() {
                "ip" | "ip6" => {
                    let want = if t == "ip" { Family::Ip } else { Family::Ip6 };
                    if want != family {
                        return Err(format!("{t} matches do not apply to the {family} table"));
                    }
                    let field = match toks.next().as_deref() {
                        Some("saddr") => AddrField::Saddr,
                        Some("daddr") => AddrField::Daddr,
                        other => return Err(format!("{t} {}: only saddr and daddr", other.unwrap_or(""))),
                    };
                    let op = op(&mut toks);
                    let a = toks.next().ok_or_else(|| format!("{t}: address missing"))?;
                    let net: IpNetwork = a.parse().map_err(|_| format!("{a:?} is not an address or prefix"))?;
                    if net.is_ipv6() != (family == Family::Ip6) {
                        return Err(format!("{a} is not an {t} address"));
                    }
                    exprs.extend(expr::addr(family, field, op, expr_network(net)));
                }
                "iifname" | "oifname" | "meta" => {
                    let key = match (t.as_str(), t.as_str() == "meta") {
                        (_, true) => toks.next().unwrap_or_default(),
                        (k, false) => k.to_string(),
                    };
                    let key = match key.as_str() {
                        "iifname" => MetaKey::Iifname,
                        "oifname" => MetaKey::Oifname,
                        other => return Err(format!("meta {other}: only iifname and oifname")),
                    };
                    let op = op(&mut toks);
                    let name = toks.next().ok_or_else(|| "interface name missing".to_string())?;
                    if name.is_empty() || name.len() > 15 || name.contains('*') {
                        return Err(format!("{name:?} is not an interface name"));
                    }
                    exprs.extend(expr::ifname(key, op, &name));
                }
                other => {
                    return Err(format!(
                        "nftables condition {other:?} is not supported (cnibox reads ip/ip6 saddr/daddr \
                         [!=] ADDR[/LEN] and iifname/oifname [!=] NAME)"
                    ))
                }
            }
        }
        Ok(Conditions(exprs))
    }
}

/// Words of nft text: whitespace-separated, double quotes removed.
fn tokens(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// nft matches a prefix on its network address.
fn expr_network(net: IpNetwork) -> IpNetwork {
    IpNetwork::new(net.network(), net.prefix()).unwrap_or(net)
}

fn chain<'a>(family: Family, name: &'a str, base: Option<(Hook, i32)>) -> Chain<'a> {
    Chain {
        family,
        table: TABLE,
        name,
        base: base.map(|(hook, priority)| BaseChain {
            kind: ChainType::Nat,
            hook,
            priority,
            policy: None,
        }),
        comment: None,
    }
}

/// The table, its chains and the entry rules (prerouting, output, hostports_all), which
/// every ADD of the reference rewrites; the `masquerading` chain only with `snat`.
/// Per-container rules are not the layout's.
pub fn layout<'a>(family: Family, conditions: &Conditions, snat: bool) -> Layout<'a> {
    let mut chains: Vec<Chain> = [HOSTPORTS, HOSTIP_HOSTPORTS, HOSTPORTS_ALL]
        .into_iter()
        .map(|name| chain(family, name, None))
        .collect();
    let jumps = [HOSTIP_HOSTPORTS, HOSTPORTS]
        .into_iter()
        .map(|to| {
            Rule::new(
                family,
                TABLE,
                HOSTPORTS_ALL,
                vec![Expr::Verdict(Verdict::Jump(to.into()))],
                None,
            )
        })
        .collect();
    let mut entry_rules = vec![(HOSTPORTS_ALL, jumps)];
    for (name, hook) in [(PREROUTING, Hook::Prerouting), (OUTPUT, Hook::Output)] {
        chains.push(chain(family, name, Some((hook, priority::DSTNAT))));
        let mut exprs = conditions.0.clone();
        exprs.extend(expr::fib_daddr_local());
        exprs.push(Expr::Verdict(Verdict::Jump(HOSTPORTS_ALL.into())));
        entry_rules.push((name, vec![Rule::new(family, TABLE, name, exprs, None)]));
    }
    if snat {
        chains.push(chain(family, MASQUERADING, Some((Hook::Postrouting, priority::SRCNAT))));
    }
    Layout {
        table: Table {
            family,
            name: TABLE,
            comment: Some(TABLE_COMMENT),
        },
        chains,
        sets: vec![],
        entry_rules,
    }
}

/// The family's table as it is now (chains and rules).
pub fn state(nft: &Nftables, family: Family) -> Result<TableState> {
    nft.table_state(family, TABLE)
}

fn forward_exprs(family: Family, f: &Forward) -> Vec<Expr> {
    let mut exprs = vec![];
    if let Some(d) = f.host.dest {
        exprs.extend(expr::addr(family, AddrField::Daddr, CmpOp::Eq, IpNetwork::from(d)));
    }
    exprs.extend(expr::l4proto(f.host.protocol));
    exprs.extend(expr::th_dport(f.host.port));
    exprs.extend(expr::nat(NatKind::Dnat, f.to, Some(f.to_port)));
    exprs
}

/// "Forward HOST to TO:TO_PORT for container C": `[ip daddr D] tcp dport P dnat to
/// TO:PORT comment C` in `hostports`, tagged T.
pub fn forward(tx: &mut Transaction, family: Family, f: &Forward, container: &str, tag: &str) {
    tx.add_rule_tagged(
        &Rule::new(family, TABLE, HOSTPORTS, forward_exprs(family, f), Some(container)),
        tag,
    );
}

/// "Masquerade what SOURCE sends to ADDR, for container C": `ip saddr SOURCE ip daddr
/// ADDR masquerade comment C` in `masquerading`, tagged T.
pub fn masquerade(tx: &mut Transaction, family: Family, source: IpNetwork, addr: IpAddr, container: &str, tag: &str) {
    let mut exprs = expr::addr(family, AddrField::Saddr, CmpOp::Eq, expr_network(source));
    exprs.extend(expr::addr(family, AddrField::Daddr, CmpOp::Eq, IpNetwork::from(addr)));
    exprs.push(Expr::Masq);
    tx.add_rule_tagged(&Rule::new(family, TABLE, MASQUERADING, exprs, Some(container)), tag);
}

/// The rules of one chain of the table (none without the table or the chain).
pub fn rules(nft: &Nftables, family: Family, chain: &str) -> Result<Vec<RuleInfo>> {
    nft.rules(family, TABLE, chain)
}

/// The rules of the per-container chains ([`CONTAINER_CHAINS`]), from one dump of the
/// table (none without it).
pub fn container_rules(nft: &Nftables, family: Family) -> Result<Vec<RuleInfo>> {
    let mut rules = nft.table_rules(family, TABLE)?;
    rules.retain(|r| CONTAINER_CHAINS.contains(&r.chain.as_str()));
    Ok(rules)
}

/// Deletes one rule by handle.
pub fn delete(tx: &mut Transaction, family: Family, chain: &str, handle: u64) {
    tx.delete_rule(family, TABLE, chain, handle);
}

/// What a rule of `hostports` (or `hostip_hostports`) forwards, read back from its
/// expressions; None for a rule of any other form.
pub fn forwarded(family: Family, r: &RuleInfo) -> Option<Forward> {
    let decoded = r.expressions();
    let e: Vec<&Expr> = decoded.iter().map(Option::as_ref).collect::<Option<_>>()?;
    let mut i = 0;
    let next = |i: &mut usize| {
        let x = e.get(*i).copied();
        *i += 1;
        x
    };
    let (addr_off, addr_len) = if family == Family::Ip6 { (24, 16) } else { (16, 4) };
    let mut dest = None;
    if let Some(Expr::Payload {
        base: PayloadBase::Network,
        offset,
        len,
        ..
    }) = e.first()
    {
        if *offset != addr_off || *len != addr_len {
            return None;
        }
        i = 1;
        match next(&mut i) {
            Some(Expr::Cmp {
                op: CmpOp::Eq, data, ..
            }) => dest = Some(crate::netlink::wire::as_ip(data)?),
            _ => return None,
        }
    }
    let protocol = match (next(&mut i), next(&mut i)) {
        (
            Some(Expr::Meta {
                key: MetaKey::L4proto, ..
            }),
            Some(Expr::Cmp {
                op: CmpOp::Eq, data, ..
            }),
        ) => *data.first()?,
        _ => return None,
    };
    let port = match (next(&mut i), next(&mut i)) {
        (
            Some(Expr::Payload {
                base: PayloadBase::Transport,
                offset: 2,
                len: 2,
                ..
            }),
            Some(Expr::Cmp {
                op: CmpOp::Eq, data, ..
            }),
        ) => bytes::read_net16(data)?,
        _ => return None,
    };
    let (mut to, mut to_port) = (None, None);
    for x in &e[i..] {
        match x {
            Expr::Immediate { dreg, data } if *dreg == REG_1 => to = crate::netlink::wire::as_ip(data),
            Expr::Immediate { dreg, data } if *dreg == REG_2 => to_port = Some(bytes::read_net16(data)?),
            Expr::Nat {
                kind: NatKind::Dnat, ..
            } => {}
            _ => return None,
        }
    }
    Some(Forward {
        host: HostPort { protocol, port, dest },
        to: to?,
        to_port: to_port?,
    })
}

/// Whether a rule of `masquerading` masquerades what `source` sends to `container`.
pub fn is_masquerade(family: Family, r: &RuleInfo, source: IpNetwork, container: IpAddr) -> bool {
    let mut want = expr::addr(family, AddrField::Saddr, CmpOp::Eq, expr_network(source));
    want.extend(expr::addr(
        family,
        AddrField::Daddr,
        CmpOp::Eq,
        IpNetwork::from(container),
    ));
    want.push(Expr::Masq);
    r.is_made_of(&want)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(exprs: Vec<Expr>) -> RuleInfo {
        RuleInfo::with_expressions(HOSTPORTS, 1, Some("c"), &exprs)
    }

    #[test]
    fn forwards_read_back_as_written() {
        for (fam, dest, to) in [
            (Family::Ip, Some("10.0.0.1"), "10.0.0.2"),
            (Family::Ip, None, "10.0.0.2"),
            (Family::Ip6, Some("fd00::1"), "fd00::2"),
        ] {
            let f = Forward {
                host: HostPort {
                    protocol: 17,
                    port: 5353,
                    dest: dest.map(|d| d.parse().unwrap()),
                },
                to: to.parse().unwrap(),
                to_port: 53,
            };
            assert_eq!(forwarded(fam, &info(forward_exprs(fam, &f))), Some(f));
        }
        // a masquerade rule is not a forward
        let m = expr::addr(Family::Ip, AddrField::Saddr, CmpOp::Eq, "10.0.0.2/32".parse().unwrap());
        assert_eq!(forwarded(Family::Ip, &info(m)), None);
    }

    #[test]
    fn masquerades_are_recognised() {
        let (src, ctr): (IpNetwork, IpAddr) = ("127.0.0.1/32".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut e = expr::addr(Family::Ip, AddrField::Saddr, CmpOp::Eq, src);
        e.extend(expr::addr(
            Family::Ip,
            AddrField::Daddr,
            CmpOp::Eq,
            IpNetwork::from(ctr),
        ));
        e.push(Expr::Masq);
        assert!(is_masquerade(Family::Ip, &info(e), src, ctr));
        assert!(!is_masquerade(Family::Ip, &info(vec![Expr::Masq]), src, ctr));
    }

    #[test]
    fn conditions_parse_the_common_forms() {
        let w = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let c = Conditions::parse(Family::Ip, &w(&["ip saddr 10.0.0.0/8", "iifname", "\"eth0\""])).unwrap();
        let mut want = expr::addr(Family::Ip, AddrField::Saddr, CmpOp::Eq, "10.0.0.0/8".parse().unwrap());
        want.extend(expr::ifname(MetaKey::Iifname, CmpOp::Eq, "eth0"));
        assert_eq!(c.0, want);
        let c = Conditions::parse(Family::Ip6, &w(&["ip6 daddr != fd00::/8"])).unwrap();
        assert_eq!(
            c.0,
            expr::addr(Family::Ip6, AddrField::Daddr, CmpOp::Neq, "fd00::/8".parse().unwrap())
        );
        assert!(Conditions::parse(Family::Ip, &w(&["ip6 saddr ::1"])).is_err());
        assert!(Conditions::parse(Family::Ip, &w(&["ct state new"]))
            .unwrap_err()
            .contains("\"ct\" is not supported"));
        assert!(Conditions::parse(Family::Ip, &w(&["ip saddr"])).is_err());
        assert_eq!(Conditions::parse(Family::Ip, &[]).unwrap(), Conditions::default());
    }
}
