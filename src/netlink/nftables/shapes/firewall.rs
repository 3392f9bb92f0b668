//! The firewall plugin's nftables layout (the reference has no nftables backend; this one
//! mirrors its iptables layout in one table of the `inet` family):
//!
//! ```text
//! table inet cni_plugins_firewall {
//!     chain forward {            # filter, hook forward, priority filter; its rules rewritten
//!                                # by every ADD, its policy (accept when created) never
//!         jump isolation_stage_1
//!         jump admin
//!         jump accepts
//!     }
//!     chain admin { }            # the administrator's; never written by the plugin
//!     chain accepts {            # per container address, with the attachment's comment
//!         ip daddr IP ct state established,related accept comment "<attachment>"
//!         ip saddr IP accept comment "<attachment>"
//!     }
//!     chain isolation_stage_1 {  # per bridge, ingressPolicy same-bridge / isolated
//!         iifname BR oifname BR drop comment "bridge BR (ingressPolicy: isolated)"
//!         iifname BR oifname != BR jump isolation_stage_2 comment "bridge BR (ingressPolicy: …)"
//!     }
//!     chain isolation_stage_2 {
//!         oifname BR drop comment "bridge BR"
//!     }
//! }
//! ```
//! (`ip6` for IPv6 addresses.) A verdict of this table decides only this table's walk: its
//! drops are final for the packet, its accepts are not (every other base chain on the
//! forward hook still sees the packet).
use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::super::expr::{self, AddrField, CmpOp, Expr, MetaKey, Verdict};
use super::super::{
    commented, priority, BaseChain, Chain, ChainType, Family, Hook, Layout, Nftables, Policy, Rule, Table, TableState,
    Transaction,
};
use crate::netlink::Result;

pub const FAMILY: Family = Family::Inet;
pub const TABLE: &str = "cni_plugins_firewall";
pub const FORWARD: &str = "forward";
pub const ADMIN: &str = "admin";
pub const ACCEPTS: &str = "accepts";
pub const STAGE1: &str = "isolation_stage_1";
pub const STAGE2: &str = "isolation_stage_2";
const TABLE_COMMENT: &str = "Firewall rules of the CNI firewall plugin (cnibox)";

/// ct state bits (NF_CT_STATE_BIT): established and related.
const CT_ESTABLISHED_RELATED: u32 = (1 << 1) | (1 << 2);

/// The table, its chains, and `forward`'s three jumps.
pub fn layout() -> Layout<'static> {
    let mut chains: Vec<Chain> = [ADMIN, ACCEPTS, STAGE1, STAGE2]
        .into_iter()
        .map(|name| Chain {
            family: FAMILY,
            table: TABLE,
            name,
            base: None,
            comment: None,
        })
        .collect();
    chains.push(Chain {
        family: FAMILY,
        table: TABLE,
        name: FORWARD,
        base: Some(BaseChain {
            kind: ChainType::Filter,
            hook: Hook::Forward,
            priority: priority::FILTER,
            // unsaid: accept when created, and an administrator's `policy drop` survives
            // every later ADD (the way to run a default-drop forward filter with this table)
            policy: None,
        }),
        comment: None,
    });
    let jumps = [STAGE1, ADMIN, ACCEPTS]
        .into_iter()
        .map(|target| {
            Rule::new(
                FAMILY,
                TABLE,
                FORWARD,
                vec![Expr::Verdict(Verdict::Jump(target.into()))],
                None,
            )
        })
        .collect();
    Layout {
        table: Table {
            family: FAMILY,
            name: TABLE,
            comment: Some(TABLE_COMMENT),
        },
        chains,
        sets: vec![],
        entry_rules: vec![(FORWARD, jumps)],
    }
}

/// The table as it is now (chains and rules).
pub fn state(nft: &Nftables) -> Result<TableState> {
    nft.table_state(FAMILY, TABLE)
}

/// "Let ADDRESS's own connections and their replies through": the two rules of `accepts`.
pub fn accept_container(tx: &mut Transaction, address: IpAddr, comment: &str) {
    let host = IpNetwork::from(address);
    let mut replies = expr::addr(FAMILY, AddrField::Daddr, CmpOp::Eq, host);
    replies.extend(expr::ct_state(CT_ESTABLISHED_RELATED));
    replies.push(Expr::Verdict(Verdict::Accept));
    tx.add_rule(&Rule::new(FAMILY, TABLE, ACCEPTS, replies, Some(comment)));
    let mut own = expr::addr(FAMILY, AddrField::Saddr, CmpOp::Eq, host);
    own.push(Expr::Verdict(Verdict::Accept));
    tx.add_rule(&Rule::new(FAMILY, TABLE, ACCEPTS, own, Some(comment)));
}

/// "Nothing from outside BRIDGE may enter it": `iifname BR oifname != BR jump stage 2` and
/// `oifname BR drop` in stage 2.
pub fn isolate_bridge(tx: &mut Transaction, bridge: &str, stage1_comment: &str, stage2_comment: &str) {
    let mut leave = expr::ifname(MetaKey::Iifname, CmpOp::Eq, bridge);
    leave.extend(expr::ifname(MetaKey::Oifname, CmpOp::Neq, bridge));
    leave.push(Expr::Verdict(Verdict::Jump(STAGE2.into())));
    tx.add_rule(&Rule::new(FAMILY, TABLE, STAGE1, leave, Some(stage1_comment)));
    let mut enter = expr::ifname(MetaKey::Oifname, CmpOp::Eq, bridge);
    enter.push(Expr::Verdict(Verdict::Drop));
    tx.add_rule(&Rule::new(FAMILY, TABLE, STAGE2, enter, Some(stage2_comment)));
}

/// "Nothing may pass between two ports of BRIDGE": `iifname BR oifname BR drop`, first in
/// stage 1 (seen only with br_netfilter's bridge-nf-call-iptables on).
pub fn isolate_within(tx: &mut Transaction, bridge: &str, comment: &str) {
    let mut within = expr::ifname(MetaKey::Iifname, CmpOp::Eq, bridge);
    within.extend(expr::ifname(MetaKey::Oifname, CmpOp::Eq, bridge));
    within.push(Expr::Verdict(Verdict::Drop));
    tx.insert_rule(&Rule::new(FAMILY, TABLE, STAGE1, within, Some(comment)));
}

/// (handle, comment) of every commented rule of one of the table's chains; none without
/// the table.
pub fn rules(nft: &Nftables, chain: &str) -> Result<Vec<(u64, String)>> {
    Ok(commented(&nft.rules(FAMILY, TABLE, chain)?))
}

/// The three jumps of `forward` are in place (what CHECK asks before the rules).
pub fn layout_present(now: &TableState) -> bool {
    let jumps: Vec<&str> = now
        .rules_of(FORWARD)
        .filter_map(|r| match &r.verdict {
            Some(Verdict::Jump(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    jumps == [STAGE1, ADMIN, ACCEPTS]
}

/// Deletes one rule of one of the table's chains by handle.
pub fn delete(tx: &mut Transaction, chain: &str, handle: u64) {
    tx.delete_rule(FAMILY, TABLE, chain, handle);
}

/// "family table chain" of every other forward-hook base chain of `family` that drops by
/// policy: drops this table's accepts cannot override.
pub fn foreign_forward_drops(nft: &Nftables, family: Family) -> Result<Vec<String>> {
    Ok(nft
        .all_chains(family)?
        .into_iter()
        .filter(|c| !(family == FAMILY && c.table == TABLE))
        .filter(|c| matches!(c.hook, Some((h, _)) if h == Hook::Forward as u32))
        .filter(|c| c.policy == Some(Policy::Drop))
        .map(|c| format!("{family} {} {}", c.table, c.name))
        .collect())
}
