//! The `portmap` plugin (chained): forwards host ports to the container, from outside the
//! node, from the node itself (its own addresses and localhost) and from the container back
//! to itself (hairpin).
//!
//! * [`config`]: the keys, the `portMappings` capability, the backend, the container IPs.
//! * [`nftables`]: the reference's nftables layout (tables `ip`/`ip6 cni_hostport`), through
//!   cnibox's nf_tables netlink layer.
//! * [`iptables`]: the reference 1.1.1 iptables layout, one `iptables-restore` per change.
//!
//! ADD, per family with a container address: refuse a host port another attachment already
//! forwards, set up the rules (the two under a host-wide lock, so concurrent ADDs of one
//! port cannot both pass the check), drop stale UDP conntrack entries of the mapped ports, and
//! (IPv4 with `snat`) let 127/8 cross into the container (`route_localnet`). DEL removes the
//! attachment's rules from both backends (a node may have switched), needs no netns and no
//! prevResult, and is idempotent. CHECK verifies the rules; GC removes the rules of
//! attachments that are no longer valid.
pub mod config;
pub mod iptables;
pub mod nftables;

use crate::cni::config as cniconf;
use crate::cni::{CniResult, Error, Plugin, Request};
use crate::firewall_rules::host_lock;
use crate::firewall_rules::iptables::save_restore::Family;
use crate::firewall_rules::shared_chain::Interface;
use crate::netlink::conntrack::Conntrack;
use crate::netlink::nftables::TableState;
use crate::netlink::{self, Handle, Ipv4Conf};
use config::{Backend, Conf, Protocol};
use ipnetwork::IpNetwork;
use std::net::IpAddr;

pub struct Portmap;

/// Serialises the ADDs of a host (of every namespace: portmap runs in the host's own, and
/// the private host namespaces of tests just take turns) from the taken-port check until
/// the rules are in, whichever backend holds them.
const PORTS_LOCK: &str = "portmap.lock";

/// Whose rules: the reference names iptables chains after network and container ID, and
/// nftables rules after the container ID alone; cnibox also tells the interfaces of one
/// container on one network apart (an own iptables chain for each further interface, the
/// interface in its nftables rules' tag).
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    pub network: &'a str,
    pub container_id: &'a str,
    pub ifname: &'a str,
}

/// A host port some attachment forwards, as read back from the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub protocol: Protocol,
    pub host_port: u16,
    /// The host address it is limited to; None: every local address.
    pub dest: Option<IpAddr>,
    /// The container ID it forwards to, when the rules say.
    pub container_id: Option<String>,
    /// Who forwards it, for the error message.
    pub owner: String,
}

fn attachment(req: &Request) -> Attachment<'_> {
    Attachment {
        network: &req.name,
        container_id: &req.container_id,
        ifname: &req.ifname,
    }
}

/// The container addresses ADD forwarded to, as far as prevResult says.
fn container_addresses(conf: &Conf) -> Vec<IpAddr> {
    conf.container_ips().map(|c| c.ip()).collect()
}

fn load(req: &Request) -> Result<(Conf, Option<CniResult>), Error> {
    config::load(req, &nftables::kernel_has_nf_tables)
}

impl Plugin for Portmap {
    fn about(&self) -> &'static str {
        "CNI portmap plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let (conf, prev) = load(req)?;
        let prev = prev.ok_or_else(|| Error::internal("must be called as chained plugin"))?;
        if conf.mappings.is_empty() {
            return Ok(prev);
        }
        let att = attachment(req);
        // The check and the rules under one lock: otherwise two ADDs asking for one port
        // could both pass the check before either has its rules.
        let ports = host_lock::exclusive(PORTS_LOCK)?;
        // Each family's nftables table read once, for the check and the forwards.
        let tables = conf
            .container_ips()
            .map(|container| Ok((container, nftables::read(container.is_ipv6())?)))
            .collect::<Result<Vec<_>, Error>>()?;
        // Refused before anything changes, so a failed ADD leaves nothing behind.
        for (container, table) in &tables {
            refuse_taken_ports(&conf, att, *container, table.as_ref())?;
        }
        let done = tables
            .iter()
            .try_for_each(|(container, table)| forward(&conf, att, *container, table.as_ref()));
        if let Err(e) = done {
            let this = Interface::with_addresses(container_addresses(&conf));
            if let Err(undo) = teardown(att, &this) {
                eprintln!(
                    "cnibox portmap: ADD failed; removing its rules failed too: {}",
                    undo.msg
                );
            }
            return Err(e);
        }
        drop(ports);
        // After the rules, so new packets take them. Failures are informative only, as in
        // the reference: the mapping works, old flows just linger until they time out.
        if let Err(e) = delete_stale_udp(&conf) {
            eprintln!("cnibox portmap: failed to delete stale UDP conntrack entries: {e}");
        }
        Ok(prev)
    }

    /// From both backends, whatever the config says; without a netns, a prevResult or
    /// even `portMappings` (a runtime may drop them on DEL): the rules are found by name.
    /// prevResult's addresses, or else the netns, only tell whether a chain the reference
    /// names after network and container is this interface's (see
    /// [`shared_chain`](crate::firewall_rules::shared_chain)).
    fn del(&self, req: &Request) -> Result<(), Error> {
        // the rules are found by attachment; prevResult's addresses only tell whose a shared
        // chain is (a config ADD refuses leaves them to the netns)
        let own = cniconf::del_config(
            "portmap",
            || load(req).map(|(conf, prev)| prev.map(|_| container_addresses(&conf))),
            || None,
        );
        teardown(attachment(req), &Interface::for_del(own, &req.netns, &req.ifname))
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        // the reference's CHECK returns parse errors unwrapped
        let (conf, prev) = load(req).map_err(|mut e| {
            if let Some(m) = e.msg.strip_prefix("failed to parse config: ") {
                e.msg = m.to_string();
            }
            e
        })?;
        if prev.is_none() {
            return Err(Error::internal("Required prevResult missing"));
        }
        if conf.mappings.is_empty() {
            return Ok(());
        }
        let att = attachment(req);
        // Only the families the container has (the reference 1.1.1 checks ip6tables for
        // an IPv4-only pod and fails it).
        for container in conf.container_ips() {
            match conf.backend {
                Backend::Nftables => nftables::check(&conf, att, container)?,
                Backend::Iptables => iptables::check(&conf, att, container)?,
            }
        }
        Ok(())
    }

    fn gc(&self, req: &Request) -> Result<(), Error> {
        load(req)?;
        let Some(valid) = cniconf::valid_attachments(&req.config)? else {
            return Ok(());
        };
        nftables::gc(&req.name, &valid)?;
        iptables::gc(&req.name, &valid)
    }
}

/// One family: the rules, then route_localnet. `table`: the family's nftables table as read.
fn forward(conf: &Conf, att: Attachment, container: IpNetwork, table: Option<&TableState>) -> Result<(), Error> {
    match conf.backend {
        Backend::Nftables => nftables::forward(conf, att, container, table)?,
        Backend::Iptables => iptables::forward(conf, att, container)?,
    }
    if conf.snat && container.is_ipv4() {
        enable_localnet_routing(container.ip())?;
    }
    Ok(())
}

/// Fail when a host port of this family is already forwarded by another attachment: the
/// kernel would send every connection to whichever rule comes first. `table`: the family's
/// nftables table as read (None: no nf_tables, so no forwards there).
fn refuse_taken_ports(
    conf: &Conf,
    att: Attachment,
    container: IpNetwork,
    table: Option<&TableState>,
) -> Result<(), Error> {
    let v6 = container.is_ipv6();
    let mut claims = table.map(|t| nftables::claims(v6, t)).unwrap_or_default();
    let family = if v6 { Family::V6 } else { Family::V4 };
    claims.extend(iptables::claims(family)?);
    // The same container on another network may forward the same port (one runtime call
    // per network with the same mappings): that is not a clash.
    claims.retain(|c| c.container_id.as_deref() != Some(att.container_id));
    for m in conf.mappings.iter().filter(|m| m.applies_to(v6)) {
        let dest = m.dest();
        let taken = claims.iter().find(|c| {
            c.protocol == m.protocol
                && c.host_port == m.host_port
                && (c.dest.is_none() || dest.is_none() || c.dest == dest)
        });
        if let Some(c) = taken {
            let at = |d: Option<IpAddr>| d.map(|a| format!(" on {a}")).unwrap_or_default();
            return Err(Error::internal(format!(
                "host port {}/{}{} is already mapped by {}{}",
                m.host_port,
                m.protocol.name(),
                at(dest),
                c.owner,
                at(c.dest)
            )));
        }
    }
    Ok(())
}

/// Drop the tracked UDP flows to the mapped host ports, of the families that got rules, in
/// one conntrack dump.
fn delete_stale_udp(conf: &Conf) -> Result<(), netlink::Error> {
    let mut ports: Vec<u16> = conf
        .mappings
        .iter()
        .filter(|m| m.protocol == Protocol::Udp)
        .map(|m| m.host_port)
        .collect();
    if ports.is_empty() {
        return Ok(());
    }
    crate::util::sort::sort(&mut ports);
    ports.dedup();
    let family = match (conf.container_v4.is_some(), conf.container_v6.is_some()) {
        (true, true) => netlink::Family::All,
        (true, false) => netlink::Family::V4,
        (false, true) => netlink::Family::V6,
        (false, false) => return Ok(()),
    };
    Conntrack::current()?.delete_by_dst_ports(family, netlink::conntrack::PROTO_UDP, &ports)?;
    Ok(())
}

/// Let connections from 127/8 be routed to the container: set `route_localnet` on the
/// host interface that routes to it (none found: nothing to do, as in the reference).
fn enable_localnet_routing(container: IpAddr) -> Result<(), Error> {
    let host = Handle::current()?;
    let Some(oif) = host.route_get(container)?.and_then(|r| r.oif) else {
        return Ok(());
    };
    match host.set_ipv4_conf(oif, &[(Ipv4Conf::RouteLocalnet, 1)]) {
        Err(e) if e.is_not_found() => Ok(()),
        r => r.map_err(|e| Error::internal(format!("unable to enable route_localnet: {e}"))),
    }
}

/// Remove the attachment's rules from both backends.
fn teardown(att: Attachment, this: &Interface) -> Result<(), Error> {
    let nft = nftables::teardown(att);
    let ipt = iptables::teardown(att, this);
    nft.and(ipt)
}
