//! The nftables backend: the same rules as the iptables backend, in table
//! `inet cni_plugins_firewall` (layout in [`shapes::firewall`]), over nf_tables netlink:
//! no process, one atomic transaction per ADD or DEL, and nothing sent when nothing is to
//! change. The reference has no nftables backend, so the layout is cnibox's own.
//!
//! Every accept rule carries the attachment's comment in the reference's nftables format
//! (`<hash(network)>-<hash(ifname:containerID)>, net: …, if: …, id: …`, as ipMasq's), so
//! DEL needs no prevResult and GC can tell rules of gone attachments.
//!
//! What it can and cannot override: its accepts end only this table's walk; every other
//! base chain on the forward hook (iptables-nft's `ip filter FORWARD`, a host's own
//! `inet filter forward`) still sees the packet, and a drop there (by rule or by policy,
//! such as Docker's `iptables -P FORWARD DROP`) wins. ADD says so on stderr when it finds
//! such a policy. Its drops (the ingress policies, the admin chain) are final for the
//! packet whatever other tables say.
use super::config::IngressPolicy;
use crate::cni::Error;
use crate::firewall_rules::ipmasq::{self, Attachment};
use crate::netlink::nftables::shapes::firewall as shape;
use crate::netlink::nftables::{Family, Nftables, Transaction};
use std::net::IpAddr;
use std::rc::Rc;

/// What one ADD asks for.
pub struct Setup<'a> {
    pub attachment: Attachment<'a>,
    pub addresses: &'a [IpAddr],
    pub isolation: Option<(&'a str, IngressPolicy)>,
}

/// The process's netfilter socket for this namespace (kept open: see [`Nftables::shared`]).
fn open() -> Result<Rc<Nftables>, Error> {
    Nftables::shared().map_err(|e| Error::internal(format!("firewall backend nftables: {e}")))
}

fn bridge_comment(bridge: &str) -> String {
    format!("bridge {bridge}")
}

fn within_comment(bridge: &str) -> String {
    format!("bridge {bridge} (ingressPolicy: isolated)")
}

/// ADD: the attachment's accepts (replacing any it had), the bridge's isolation rules
/// when missing, in one transaction. Returns the drops it cannot override, for a warning.
pub fn add(setup: &Setup) -> Result<Vec<String>, Error> {
    let nft = open()?;
    let comment = ipmasq::comment(setup.attachment);
    let prefix = ipmasq::instance_hash(setup.attachment);
    let now = shape::state(&nft)?;
    let mut tx = Transaction::new();
    tx.declare(&shape::layout(), &now);
    for (handle, c) in now.commented(shape::ACCEPTS) {
        if c.starts_with(&prefix) {
            shape::delete(&mut tx, shape::ACCEPTS, handle);
        }
    }
    for ip in setup.addresses {
        shape::accept_container(&mut tx, *ip, &comment);
    }
    if let Some((bridge, policy)) = setup.isolation {
        let has = |chain: &str, c: &str| now.rules_of(chain).any(|r| r.comment.as_deref() == Some(c));
        if !has(shape::STAGE1, &bridge_comment(bridge)) {
            shape::isolate_bridge(&mut tx, bridge, &bridge_comment(bridge), &bridge_comment(bridge));
        }
        if policy == IngressPolicy::Isolated && !has(shape::STAGE1, &within_comment(bridge)) {
            shape::isolate_within(&mut tx, bridge, &within_comment(bridge));
        }
    }
    // read before the commit: a failed read then fails an ADD that changed nothing (the
    // other tables' chains are not ours to change)
    let mut drops = vec![];
    for family in [Family::Ip, Family::Ip6, Family::Inet] {
        drops.extend(shape::foreign_forward_drops(&nft, family)?);
    }
    nft.commit(tx)?;
    Ok(drops)
}

/// DEL: the attachment's accepts, found by comment; nothing is sent when there are none.
pub fn del(attachment: Attachment) -> Result<(), Error> {
    let nft = open()?;
    let prefix = ipmasq::instance_hash(attachment);
    delete_where(&nft, |c| c.starts_with(&prefix))
}

/// GC: the accepts of `network` whose attachment is not in `valid` (container ID, ifname).
pub fn gc(network: &str, valid: &[(String, String)]) -> Result<(), Error> {
    let nft = open()?;
    let keep: Vec<String> = valid
        .iter()
        .map(|(container_id, ifname)| {
            ipmasq::comment(Attachment {
                network,
                ifname,
                container_id,
            })
        })
        .collect();
    let net = ipmasq::hash16(network);
    delete_where(&nft, |c| c.starts_with(&net) && !keep.iter().any(|k| k == c))
}

fn delete_where(nft: &Nftables, doomed: impl Fn(&str) -> bool) -> Result<(), Error> {
    let mut tx = Transaction::new();
    for (handle, c) in shape::rules(nft, shape::ACCEPTS)? {
        if doomed(&c) {
            shape::delete(&mut tx, shape::ACCEPTS, handle);
        }
    }
    if !tx.is_empty() {
        nft.commit(tx)?;
    }
    Ok(())
}

/// CHECK: the jumps, two accepts per address with the attachment's comment, and the
/// bridge's isolation rules.
pub fn check(setup: &Setup) -> Result<(), Error> {
    let nft = open()?;
    let missing = |what: String| Error::internal(format!("expected {what} in inet {} not found", shape::TABLE));
    let now = shape::state(&nft)?;
    if !shape::layout_present(&now) {
        return Err(missing(format!("the jumps of chain {}", shape::FORWARD)));
    }
    let comment = ipmasq::comment(setup.attachment);
    let ours = now
        .rules_of(shape::ACCEPTS)
        .filter(|r| r.comment.as_deref() == Some(comment.as_str()))
        .count();
    if ours != 2 * setup.addresses.len() {
        return Err(missing(format!(
            "{} accept rules of {comment:?} in chain {} (found {ours})",
            2 * setup.addresses.len(),
            shape::ACCEPTS
        )));
    }
    if let Some((bridge, policy)) = setup.isolation {
        let has = |chain: &str, c: &str| now.rules_of(chain).any(|r| r.comment.as_deref() == Some(c));
        let within_ok = policy != IngressPolicy::Isolated || has(shape::STAGE1, &within_comment(bridge));
        if !has(shape::STAGE1, &bridge_comment(bridge)) || !has(shape::STAGE2, &bridge_comment(bridge)) || !within_ok {
            return Err(missing(format!(
                "isolation rules of bridge {bridge} (ingressPolicy: {})",
                policy.name()
            )));
        }
    }
    Ok(())
}
