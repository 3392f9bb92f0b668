//! macspoofchk's layout, the reference's (`pkg/link/spoofcheck.go`): table `bridge nat`,
//! base chain `PREROUTING` (filter, hook prerouting, priority -300, policy accept) with one
//! rule per attachment "frames from HOST_IFACE go to the attachment's chain"; that chain
//! jumps to the MAC chain, which returns for the container's MAC and drops everything
//! else. Every rule carries the attachment's comment.
use super::super::expr::{self, CmpOp, Expr, MetaKey, Verdict};
use super::super::{
    commented, BaseChain, Chain, ChainType, Family, Hook, Layout, Nftables, Policy, Rule, RuleInfo, Table, TableState,
    Transaction,
};
use crate::netlink::Result;

pub const FAMILY: Family = Family::Bridge;
pub const TABLE: &str = "nat";
pub const BASE_CHAIN: &str = "PREROUTING";

/// One attachment's chains and comment.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a> {
    pub iface_chain: &'a str,
    pub mac_chain: &'a str,
    pub comment: &'a str,
}

/// The table and the base chain (declared with [`Transaction::declare`]); the
/// attachments' chains and base-chain rules are not the layout's.
pub fn layout() -> Layout<'static> {
    Layout {
        table: Table {
            family: FAMILY,
            name: TABLE,
            comment: None,
        },
        chains: vec![Chain {
            family: FAMILY,
            table: TABLE,
            name: BASE_CHAIN,
            base: Some(BaseChain {
                kind: ChainType::Filter,
                hook: Hook::Prerouting,
                priority: -300,
                policy: Some(Policy::Accept),
            }),
            comment: None,
        }],
        sets: vec![],
        entry_rules: vec![],
    }
}

/// The table as it is now (chains and rules).
pub fn state(nft: &Nftables) -> Result<TableState> {
    nft.table_state(FAMILY, TABLE)
}

/// "Frames entering from HOST_IFACE must carry MAC as source": (re)creates the
/// attachment's two chains and writes their rules, after the [`layout`]. Stale base-chain
/// rules of the attachment must be deleted in the same transaction ([`base_rules_in`]
/// finds them).
pub fn allow_only(tx: &mut Transaction, names: Names, host_iface: &str, mac: [u8; 6]) {
    for chain in [names.iface_chain, names.mac_chain] {
        tx.add_chain(&Chain {
            family: FAMILY,
            table: TABLE,
            name: chain,
            base: None,
            comment: None,
        });
        tx.flush_chain(FAMILY, TABLE, chain);
    }
    let c = Some(names.comment);
    let mut from_iface = expr::ifname(MetaKey::Iifname, CmpOp::Eq, host_iface);
    from_iface.push(Expr::Verdict(Verdict::Jump(names.iface_chain.into())));
    tx.add_rule(&Rule::new(FAMILY, TABLE, BASE_CHAIN, from_iface, c));
    let to_mac = vec![Expr::Verdict(Verdict::Jump(names.mac_chain.into()))];
    tx.add_rule(&Rule::new(FAMILY, TABLE, names.iface_chain, to_mac, c));
    let mut own_mac = expr::ether_saddr(mac);
    own_mac.push(Expr::Verdict(Verdict::Return));
    tx.add_rule(&Rule::new(FAMILY, TABLE, names.mac_chain, own_mac, c));
    tx.add_rule(&Rule::new(
        FAMILY,
        TABLE,
        names.mac_chain,
        vec![Expr::Verdict(Verdict::Drop)],
        c,
    ));
}

/// Handles of the base-chain rules carrying `comment`.
pub fn base_rules(nft: &Nftables, comment: &str) -> Result<Vec<u64>> {
    Ok(handles_with(&nft.rules(FAMILY, TABLE, BASE_CHAIN)?, comment))
}

/// The same, from a [`state`] read before.
pub fn base_rules_in(now: &TableState, comment: &str) -> Vec<u64> {
    handles_with(now.rules_of(BASE_CHAIN), comment)
}

fn handles_with<'r>(rules: impl IntoIterator<Item = &'r RuleInfo>, comment: &str) -> Vec<u64> {
    commented(rules)
        .into_iter()
        .filter(|(_, c)| c == comment)
        .map(|(h, _)| h)
        .collect()
}

/// Deletes a base-chain rule by handle.
pub fn delete_base_rule(tx: &mut Transaction, handle: u64) {
    tx.delete_rule(FAMILY, TABLE, BASE_CHAIN, handle);
}

/// Names of the chains in `bridge nat` (none without the table).
pub fn chains(nft: &Nftables) -> Result<Vec<String>> {
    Ok(nft.chains(FAMILY, TABLE)?.into_iter().map(|c| c.name).collect())
}

/// Empties and deletes the attachment's chains (those in `present`), the iface chain
/// first since it jumps to the MAC chain.
pub fn delete_chains(tx: &mut Transaction, names: Names, present: &[String]) {
    let doomed: Vec<&str> = [names.iface_chain, names.mac_chain]
        .into_iter()
        .filter(|c| present.iter().any(|p| p == c))
        .collect();
    for c in &doomed {
        tx.flush_chain(FAMILY, TABLE, c);
    }
    for c in &doomed {
        tx.delete_chain(FAMILY, TABLE, c);
    }
}
