//! ipMasq's layout, the reference's (containernetworking/plugins `pkg/ip/ipmasq_nftables.go`):
//! table `inet cni_plugins_masquerade`; base chain `postrouting` (nat, srcnat) that returns
//! for multicast and otherwise goes to `masq_checks`; one rule per container address in
//! `masq_checks`: "masquerade SOURCE leaving SUBNET", with the attachment's comment.
use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::super::expr::{self, AddrField, CmpOp, Expr, Verdict};
use super::super::{
    commented, BaseChain, Chain, ChainType, Family, Hook, Layout, Nftables, Rule, Table, TableState, Transaction,
};
use crate::netlink::Result;

pub const FAMILY: Family = Family::Inet;
pub const TABLE: &str = "cni_plugins_masquerade";
pub const POSTROUTING: &str = "postrouting";
pub const CHECKS: &str = "masq_checks";
const TABLE_COMMENT: &str = "Masquerading for plugins from github.com/containernetworking/plugins";
const CHECKS_COMMENT: &str = "Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet";

/// The table, both chains, and `postrouting`'s three rules; other attachments' rules in
/// `masq_checks` are not the layout's.
pub fn layout() -> Layout<'static> {
    let mut entry = vec![];
    for multicast in ["224.0.0.0/4", "ff00::/8"] {
        let net: IpNetwork = multicast.parse().expect("constant");
        let mut exprs = expr::addr(FAMILY, AddrField::Daddr, CmpOp::Eq, net);
        exprs.push(Expr::Verdict(Verdict::Return));
        entry.push(Rule::new(FAMILY, TABLE, POSTROUTING, exprs, None));
    }
    entry.push(Rule::new(
        FAMILY,
        TABLE,
        POSTROUTING,
        vec![Expr::Verdict(Verdict::Goto(CHECKS.into()))],
        None,
    ));
    Layout {
        table: Table {
            family: FAMILY,
            name: TABLE,
            comment: Some(TABLE_COMMENT),
        },
        chains: vec![
            Chain {
                family: FAMILY,
                table: TABLE,
                name: CHECKS,
                base: None,
                comment: Some(CHECKS_COMMENT),
            },
            Chain {
                family: FAMILY,
                table: TABLE,
                name: POSTROUTING,
                base: Some(BaseChain {
                    kind: ChainType::Nat,
                    hook: Hook::Postrouting,
                    priority: super::super::priority::SRCNAT,
                    policy: None,
                }),
                comment: None,
            },
        ],
        entry_rules: vec![(POSTROUTING, entry)],
    }
}

/// The table as it is now (chains and rules).
pub fn state(nft: &Nftables) -> Result<TableState> {
    nft.table_state(FAMILY, TABLE)
}

/// "Masquerade SOURCE leaving SUBNET, comment C": `ip saddr == SOURCE ip daddr != SUBNET
/// masquerade comment C` (ip6 for IPv6).
pub fn masquerade(tx: &mut Transaction, source: IpAddr, subnet: IpNetwork, comment: &str) {
    let host = IpNetwork::from(source);
    let mut exprs = expr::addr(FAMILY, AddrField::Saddr, CmpOp::Eq, host);
    exprs.extend(expr::addr(FAMILY, AddrField::Daddr, CmpOp::Neq, subnet));
    exprs.push(Expr::Masq);
    tx.add_rule(&Rule::new(FAMILY, TABLE, CHECKS, exprs, Some(comment)));
}

/// (handle, comment) of every commented rule in `masq_checks`; none without the table.
pub fn rules(nft: &Nftables) -> Result<Vec<(u64, String)>> {
    Ok(commented(&nft.rules(FAMILY, TABLE, CHECKS)?))
}

/// The same, from a [`state`] read before.
pub fn rules_in(now: &TableState) -> Vec<(u64, String)> {
    now.commented(CHECKS)
}

/// Deletes one rule of `masq_checks` by handle.
pub fn delete(tx: &mut Transaction, handle: u64) {
    tx.delete_rule(FAMILY, TABLE, CHECKS, handle);
}
