//! The DEL side of a container interface: remove it from the container namespace, treating
//! everything that is already gone as success (the spec requires DEL to be idempotent).
use super::netns_open::open_for_del;
use super::teardown::Teardown;
use crate::cni::{config as cniconf, CniResult, Error, Request};
use crate::netlink::{Handle, Link, LinkKind, MacAddr};

/// What DEL found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removed {
    /// The link existed and was deleted.
    Deleted,
    /// `CNI_NETNS` was empty, the namespace is gone, or the link is gone.
    AlreadyGone,
    /// A link of that name exists but is not of the kind this plugin creates, or not the MAC
    /// ADD reported for it: left alone.
    NotOurs(String),
}

/// DEL's prevResult, if it has a usable one (a bad one does not stop DEL: it is ignored).
pub fn prev_result(req: &Request, plugin: &str) -> Option<CniResult> {
    cniconf::prev_result(req)
        .map_err(|e| eprintln!("cnibox {plugin}: DEL: ignoring prevResult: {}", e.msg))
        .ok()
        .flatten()
}

/// The MAC ADD reported for the container interface (prevResult's interface of that name
/// inside a sandbox): the proof that the link DEL finds is this attachment's.
pub fn reported_mac(prev: Option<&CniResult>, ifname: &str) -> Option<MacAddr> {
    prev?
        .interfaces
        .iter()
        .find(|i| i.name == ifname && !i.sandbox.as_deref().unwrap_or_default().is_empty())?
        .mac
        .as_deref()?
        .parse()
        .ok()
}

/// Whether `link` is the container interface prevResult reports: it has the reported MAC,
/// or (a veth) its peer is a host-side interface prevResult names. The second holds when a
/// chained tuning's DEL, run before ours, put back the MAC from before its ADD. Without a
/// reported MAC the name is all DEL has, as in the reference.
fn is_reported(link: &Link, prev: Option<&CniResult>, ifname: &str) -> Result<bool, Error> {
    let (Some(prev), Some(mac)) = (prev, reported_mac(prev, ifname)) else {
        return Ok(true);
    };
    if link.mac == Some(mac) {
        return Ok(true);
    }
    let Some(peer) = link.peer_index.filter(|_| link.kind == Some(LinkKind::Veth)) else {
        return Ok(false);
    };
    let host = Handle::current()?;
    for i in prev
        .interfaces
        .iter()
        .filter(|i| i.sandbox.as_deref().unwrap_or_default().is_empty())
    {
        if host.link_by_name(&i.name)?.map(|l| l.index) == Some(peer) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Delete the request's `ifname` in its namespace if it is a link of `kind` (e.g. "veth")
/// and prevResult's (see [`is_reported`]). A link of the same name that is not is another
/// attachment's (a container sharing the namespace made it) and stays.
pub fn delete(req: &Request, prev: Option<&CniResult>, kind: &str) -> Result<Removed, Error> {
    let (netns_path, ifname) = (req.netns.as_str(), req.ifname.as_str());
    let Some(ns) = open_for_del(netns_path)? else {
        return Ok(Removed::AlreadyGone);
    };
    let h = Handle::open(&ns)?;
    let Some(link) = h.link_by_name(ifname)? else {
        return Ok(Removed::AlreadyGone);
    };
    if link.kind_name() != Some(kind) {
        let found = link.kind_name().unwrap_or("device").to_string();
        eprintln!("cnibox: DEL: {ifname} in {netns_path} is a {found}, not a {kind}: left alone");
        return Ok(Removed::NotOurs(found));
    }
    if !is_reported(&link, prev, ifname)? {
        let found = link.mac.map(|m| m.to_string()).unwrap_or_default();
        eprintln!("cnibox: DEL: {ifname} in {netns_path} (MAC {found}) is not the interface ADD reported: left alone");
        return Ok(Removed::NotOurs(found));
    }
    // Someone else may delete it between lookup and delete.
    match h.remove_link(link.index)? {
        true => Ok(Removed::Deleted),
        false => Ok(Removed::AlreadyGone),
    }
}

/// DEL of a plugin whose attachment is one container link of `kind` (macvlan, ipvlan,
/// vlan, dummy, tap) and the addresses of its IPAM, if it has one: the link by name and
/// kind (it has no peer to prove it by once a chained tuning's DEL has put back the MAC
/// from before its ADD, and an ipvlan's or VLAN's MAC is its master's), and the addresses,
/// in the order of [`super::ipam_delegation::del_with_interface`] (after the link, so an
/// address is never free while configured; but dhcp's before, as its DHCPRELEASE leaves
/// through the link). Every step is attempted; it needs neither the master nor the netns,
/// and everything already gone is success. The IPAM type is read even from a config ADD
/// refuses ([`cniconf::del_config`]).
pub fn delete_with_addresses(req: &Request, plugin: &'static str, kind: &str) -> Result<(), Error> {
    let ipam_type = cniconf::del_config(
        plugin,
        || cniconf::ipam_type(&req.config).map_err(|e| e.context("failed to load netconf")),
        || None,
    );
    let mut teardown = Teardown::new(plugin);
    super::ipam_delegation::del_with_interface(&mut teardown, ipam_type.as_deref(), req, |t| {
        t.step(delete(req, None, kind))
    });
    teardown.finish()
}
