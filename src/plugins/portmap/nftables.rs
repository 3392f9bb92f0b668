//! The nftables backend: the reference's layout (tables `ip`/`ip6 cni_hostport`, rules
//! commented with the container ID; see the layer's `shapes::portmap`), written over
//! netlink in one atomic transaction per family, without the `nft` binary.
use super::config::Conf;
use super::{Attachment, Claim};
use crate::cni::Error;
use crate::netlink::nftables::shapes::portmap::{self as shape, Forward, HostPort};
use crate::netlink::nftables::{Family, Nftables, RuleInfo, TableState, Transaction};
use ipnetwork::IpNetwork;
use std::rc::Rc;

/// Whether the kernel has nf_tables (the default backend then).
pub fn kernel_has_nf_tables() -> bool {
    match Nftables::shared() {
        Ok(nft) => !matches!(nft.has_table(Family::Ip, shape::TABLE), Err(e) if e.is_netfilter_missing()),
        Err(_) => false,
    }
}

/// The process's netfilter socket for this namespace (kept open: see [`Nftables::shared`]).
fn open() -> Result<Rc<Nftables>, Error> {
    Nftables::shared().map_err(|e| Error::internal(format!("nftables: {e}")))
}

/// nf_tables missing entirely: nothing of ours can be there (DEL, GC and the duplicate
/// check then have nothing to do).
fn open_if_present() -> Result<Option<Rc<Nftables>>, Error> {
    let nft = open()?;
    match nft.has_table(Family::Ip, shape::TABLE) {
        Err(e) if e.is_netfilter_missing() => Ok(None),
        _ => Ok(Some(nft)),
    }
}

/// The forwards of this attachment's configuration for `container` (one family).
fn forwards(conf: &Conf, container: IpNetwork) -> Vec<Forward> {
    let v6 = container.is_ipv6();
    conf.mappings
        .iter()
        .filter(|m| m.applies_to(v6))
        .map(|m| Forward {
            host: HostPort {
                protocol: m.protocol.number(),
                port: m.host_port,
                dest: m.dest(),
            },
            to: container.ip(),
            to_port: m.container_port,
        })
        .collect()
}

/// The masquerade sources: hairpin (the container itself) and, for IPv4, localhost; with
/// `masqAll` any source instead.
fn masquerade_sources(conf: &Conf, container: IpNetwork) -> Vec<IpNetwork> {
    if !conf.snat {
        return vec![];
    }
    let v6 = container.is_ipv6();
    if conf.masq_all {
        let any = if v6 { "::/0" } else { "0.0.0.0/0" };
        return vec![any.parse().expect("constant")];
    }
    let mut out = vec![IpNetwork::from(container.ip())];
    if !v6 {
        out.push("127.0.0.1/32".parse().expect("constant"));
    }
    out
}

/// The table of this family as it is now, read once for the host-port check and the
/// forwards of one ADD (each dump of a table of some hundred rules costs the kernel and us
/// a millisecond); None when the kernel has no nf_tables.
pub fn read(v6: bool) -> Result<Option<TableState>, Error> {
    let Some(nft) = open_if_present()? else {
        return Ok(None);
    };
    shape::state(&nft, shape::family(v6))
        .map(Some)
        .map_err(|e| Error::internal(format!("nftables: {e}")))
}

/// The host ports `now` (this family's table) forwards (rules of the reference included).
pub fn claims(v6: bool, now: &TableState) -> Vec<Claim> {
    let family = shape::family(v6);
    let mut out = vec![];
    // forwards are in hostports, and in hostip_hostports where older versions put them
    for r in now
        .rules
        .iter()
        .filter(|r| r.chain == shape::HOSTPORTS || r.chain == shape::HOSTIP_HOSTPORTS)
    {
        let Some(f) = shape::forwarded(family, r) else {
            continue;
        };
        let Some(protocol) = super::config::Protocol::from_number(f.host.protocol) else {
            continue;
        };
        out.push(Claim {
            protocol,
            host_port: f.host.port,
            dest: f.host.dest,
            owner: match (&r.comment, r.tag.as_deref().map(network_of_tag)) {
                (Some(id), Some(net)) => format!("container {id} of network {net}"),
                (Some(id), None) => format!("container {id}"),
                (None, _) => format!("an uncommented rule in {family} {} {}", shape::TABLE, r.chain),
            },
            container_id: r.comment.clone(),
        });
    }
    out
}

/// cnibox's tag of an attachment's rules: `network/ifname` (network names hold no `/`).
fn tag(att: &Attachment) -> String {
    format!("{}/{}", att.network, att.ifname)
}

/// The network a tag names (older cnibox tagged with the network alone).
fn network_of_tag(tag: &str) -> &str {
    tag.split_once('/').map_or(tag, |(network, _)| network)
}

/// Whether `r` is one of the attachment's rules: commented with its container and tagged
/// with its network and interface; or tagged with the network alone (older cnibox) or
/// untagged (the reference's: they name the container alone), as neither tells the
/// interfaces apart. A container on two networks has rules with the same comment on each.
fn is_attachments(r: &RuleInfo, att: &Attachment) -> bool {
    r.comment.as_deref() == Some(att.container_id)
        && r.tag.as_deref().map_or(true, |t| match t.split_once('/') {
            Some((network, ifname)) => network == att.network && ifname == att.ifname,
            None => t == att.network,
        })
}

/// Set up forwarding to `container` (one family) in one transaction. Rules this
/// attachment already has are kept, not repeated (an ADD may be repeated); the same
/// container's rules for another network are that attachment's, not these. `read` is the
/// family's table as [`read`] found it under the host-port lock (None: no nf_tables, and
/// the read here fails saying so).
pub fn forward(conf: &Conf, att: Attachment, container: IpNetwork, read: Option<&TableState>) -> Result<(), Error> {
    let v6 = container.is_ipv6();
    let family = shape::family(v6);
    let nft = open()?;
    let fresh;
    let now = match read {
        Some(now) => now,
        None => {
            fresh = shape::state(&nft, family).map_err(|e| Error::internal(format!("nftables: {e}")))?;
            &fresh
        }
    };
    let ours = |r: &RuleInfo| is_attachments(r, &att);
    let have_forwards: Vec<Forward> = now
        .rules_of(shape::HOSTPORTS)
        .filter(|r| ours(r))
        .filter_map(|r| shape::forwarded(family, r))
        .collect();
    let have_masq: Vec<&RuleInfo> = now.rules_of(shape::MASQUERADING).collect();
    let mut tx = Transaction::new();
    tx.declare(&shape::layout(family, conf.nft_conditions(v6), conf.snat), now);
    for f in forwards(conf, container) {
        if !have_forwards.contains(&f) {
            shape::forward(&mut tx, family, &f, att.container_id, &tag(&att));
        }
    }
    for source in masquerade_sources(conf, container) {
        if !have_masq
            .iter()
            .any(|r| ours(r) && shape::is_masquerade(family, r, source, container.ip()))
        {
            shape::masquerade(&mut tx, family, source, container.ip(), att.container_id, &tag(&att));
        }
    }
    nft.commit(tx)
        .map_err(|e| Error::internal(format!("unable to set up nftables rules for port mappings: {e}")))
}

/// Verify every forward and masquerade rule of the attachment is there.
pub fn check(conf: &Conf, att: Attachment, container: IpNetwork) -> Result<(), Error> {
    let family = shape::family(container.is_ipv6());
    let nft = open()?;
    let list = |chain| shape::rules(&nft, family, chain).map_err(|e| Error::internal(format!("nftables: {e}")));
    let ours = |r: &&RuleInfo| is_attachments(r, &att);
    let hostports = list(shape::HOSTPORTS)?;
    let have: Vec<Forward> = hostports
        .iter()
        .filter(ours)
        .filter_map(|r| shape::forwarded(family, r))
        .collect();
    for f in forwards(conf, container) {
        if !have.contains(&f) {
            return Err(Error::internal(format!(
                "missing hostport rules in {:?} chain",
                shape::HOSTPORTS
            )));
        }
    }
    let masq = list(shape::MASQUERADING)?;
    for source in masquerade_sources(conf, container) {
        if !masq
            .iter()
            .filter(ours)
            .any(|r| shape::is_masquerade(family, r, source, container.ip()))
        {
            return Err(Error::internal(format!(
                "missing hostport rules in {:?} chain",
                shape::MASQUERADING
            )));
        }
    }
    Ok(())
}

/// Delete every per-container rule that is `doomed`, from both families, one transaction
/// each.
fn delete_where(doomed: impl Fn(&RuleInfo) -> bool) -> Result<(), Error> {
    let Some(nft) = open_if_present()? else {
        return Ok(());
    };
    for family in [Family::Ip, Family::Ip6] {
        let mut tx = Transaction::new();
        let rules = shape::container_rules(&nft, family)
            .map_err(|e| Error::internal(format!("could not list rules in table {}: {e}", shape::TABLE)))?;
        for r in rules.iter().filter(|r| doomed(r)) {
            shape::delete(&mut tx, family, &r.chain, r.handle);
        }
        nft.commit(tx)
            .map_err(|e| Error::internal(format!("error deleting nftables rules: {e}")))?;
    }
    Ok(())
}

/// Remove the attachment's rules from both families (idempotent); the reference's too.
pub fn teardown(att: Attachment) -> Result<(), Error> {
    delete_where(|r| is_attachments(r, &att))
}

/// Remove the rules of `network`'s attachments not in `valid`. The reference's rules name
/// no network (the comment is the container ID alone): only cnibox's, tagged with their
/// network, are collected; another network's are never touched. A rule whose tag names no
/// interface (older cnibox) goes when no interface of its container is valid.
pub fn gc(network: &str, valid: &[(String, String)]) -> Result<(), Error> {
    delete_where(|r| {
        let (Some(tag), Some(id)) = (r.tag.as_deref(), r.comment.as_deref()) else {
            return false;
        };
        let alive = match tag.split_once('/') {
            Some((_, ifname)) => valid.iter().any(|(c, i)| c == id && i == ifname),
            None => valid.iter().any(|(c, _)| c == id),
        };
        network_of_tag(tag) == network && !alive
    })
}
