//! ipMasq's layout, the reference's (containernetworking/plugins `pkg/ip/ipmasq_nftables.go`):
//! table `inet cni_plugins_masquerade`; base chain `postrouting` (nat, srcnat) that returns
//! for multicast and otherwise goes to `masq_checks`; one rule per container address in
//! `masq_checks`: "masquerade SOURCE leaving SUBNET", with the attachment's comment.
//!
//! And one thing of cnibox's own: the map `cnibox_attachments`, an index of the
//! attachments that have rules in `masq_checks`, one element per attachment: the 16 bytes
//! of its comment's hash to the handles of its rules (two 64-bit handles; nft prints both
//! as IPv6 addresses). An ADD or a DEL asks the map for its attachment (one lookup,
//! whatever the number of attachments) instead of reading all of `masq_checks`, and
//! deletes the rules by handle. The reference neither reads nor writes the map, and finds
//! rules by their comment as before: each implementation's DEL and GC remove the other's
//! rules.
use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::super::expr::{self, AddrField, CmpOp, Expr, Verdict};
use super::super::{
    commented, BaseChain, Chain, ChainType, Family, Hook, Layout, Nftables, Rule, RuleInfo, Set, SetKey, Table,
    TableState, Transaction,
};
use crate::netlink::{bytes, Result};

pub const FAMILY: Family = Family::Inet;
pub const TABLE: &str = "cni_plugins_masquerade";
pub const POSTROUTING: &str = "postrouting";
pub const CHECKS: &str = "masq_checks";
const TABLE_COMMENT: &str = "Masquerading for plugins from github.com/containernetworking/plugins";
const CHECKS_COMMENT: &str = "Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet";
/// cnibox's index of the attachments with rules in `masq_checks`.
pub const ATTACHMENTS: &str = "cnibox_attachments";
const ATTACHMENTS_COMMENT: &str =
    "cnibox: the attachments with rules in masq_checks (their comment's hash) : those rules' handles";

/// An attachment's key in [`ATTACHMENTS`].
pub type AttachmentKey = [u8; 16];

/// How many rule handles an element holds: an attachment with more rules is indexed with
/// none (its rules are then found by their comment).
pub const INDEXED_HANDLES: usize = 2;

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
        sets: vec![Set {
            family: FAMILY,
            table: TABLE,
            name: ATTACHMENTS,
            key: SetKey::Ipv6Addr,
            data: Some(SetKey::Ipv6Addr),
            comment: Some(ATTACHMENTS_COMMENT),
        }],
        entry_rules: vec![(POSTROUTING, entry)],
    }
}

/// What the layout needs of the table now: chains, sets, `postrouting`'s rules (not
/// `masq_checks`': that chain grows with the node).
pub fn state(nft: &Nftables) -> Result<TableState> {
    nft.layout_state(&layout())
}

/// The handles of the attachment's rules as the index has them: None when the attachment
/// is not in the index (or there is no table or no index), an empty list when it is, with
/// its rules' handles unknown. One lookup in the map.
pub fn indexed_rules(nft: &Nftables, key: &AttachmentKey) -> Result<Option<Vec<u64>>> {
    Ok(nft.element(FAMILY, TABLE, ATTACHMENTS, key)?.map(|data| {
        data.chunks_exact(8)
            .filter_map(bytes::read_net64)
            .filter(|h| *h != 0)
            .collect()
    }))
}

/// Every attachment in the index.
pub fn indexed(nft: &Nftables) -> Result<Vec<AttachmentKey>> {
    Ok(nft
        .elements(FAMILY, TABLE, ATTACHMENTS)?
        .into_iter()
        .filter_map(|k| k.try_into().ok())
        .collect())
}

/// Adds the attachment to the index with the handles of its rules (none kept when there
/// are more than [`INDEXED_HANDLES`]); the index exists or is declared in `tx`.
pub fn index(tx: &mut Transaction, key: &AttachmentKey, handles: &[u64]) {
    let mut data = [0u8; 8 * INDEXED_HANDLES];
    if handles.len() <= INDEXED_HANDLES {
        for (slot, h) in data.chunks_exact_mut(8).zip(handles) {
            slot.copy_from_slice(&bytes::net64(*h));
        }
    }
    tx.add_element(FAMILY, TABLE, ATTACHMENTS, key, Some(&data));
}

/// Removes the attachment from the index (it must be there).
pub fn unindex(tx: &mut Transaction, key: &AttachmentKey) {
    tx.delete_element(FAMILY, TABLE, ATTACHMENTS, key);
}

/// The handles of the `masq_checks` rules commented `comment` among those a commit echoed.
pub fn handles_in(echoed: &[RuleInfo], comment: &str) -> Vec<u64> {
    echoed
        .iter()
        .filter(|r| r.chain == CHECKS && r.comment.as_deref() == Some(comment))
        .map(|r| r.handle)
        .collect()
}

/// "Masquerade SOURCE leaving SUBNET, comment C": `ip saddr == SOURCE ip daddr != SUBNET
/// masquerade comment C` (ip6 for IPv6).
pub fn masquerade(tx: &mut Transaction, source: IpAddr, subnet: IpNetwork, comment: &str) {
    let host = IpNetwork::from(source);
    let mut exprs = expr::addr(FAMILY, AddrField::Saddr, CmpOp::Eq, host);
    exprs.extend(expr::addr(FAMILY, AddrField::Daddr, CmpOp::Neq, subnet));
    exprs.push(Expr::Masq);
    // echoed, for the index (see [`handles_in`])
    tx.add_rule_echoed(&Rule::new(FAMILY, TABLE, CHECKS, exprs, Some(comment)));
}

/// (handle, comment) of every commented rule in `masq_checks`; none without the table.
pub fn rules(nft: &Nftables) -> Result<Vec<(u64, String)>> {
    Ok(commented(&nft.rules(FAMILY, TABLE, CHECKS)?))
}

/// Deletes one rule of `masq_checks` by handle.
pub fn delete(tx: &mut Transaction, handle: u64) {
    tx.delete_rule(FAMILY, TABLE, CHECKS, handle);
}
