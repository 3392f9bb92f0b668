//! CHECK: what the reference verifies, from `prevResult`: the bridge, the container veth,
//! the host veth pairing them, and the container's addresses and routes.
use super::config::NetConf;
use crate::cni::result::Interface;
use crate::cni::{delegate, CniResult, Error, Request};
use crate::netlink::{Handle, Link, LinkKind};
use crate::netns::Netns;
use crate::plugin_kit::check_preamble;
use crate::plugin_kit::iface;

pub fn check(req: &Request, conf: &NetConf) -> Result<(), Error> {
    let netns = crate::plugin_kit::netns_open::container(&req.netns)?;
    // The reference delegates unconditionally, so an L2 config fails with "no plugin name
    // provided"; there is nothing to check without IPAM.
    if let Some(ipam) = &conf.ipam_type {
        delegate::check(ipam, req)?;
    }
    let prev = check_preamble::prev_result(req, "Required prevResult missing")?;
    verify(req, conf, &netns, &prev)
}

fn verify(req: &Request, conf: &NetConf, netns: &Netns, prev: &CniResult) -> Result<(), Error> {
    let empty = Interface::default();
    let br_entry = prev.interfaces.iter().find(|i| i.name == conf.bridge).unwrap_or(&empty);
    let cont_entry = &check_preamble::container_entry(req, prev);

    let host = Handle::current()?;
    let bridge = check_bridge(&host, br_entry, conf)?;
    check_preamble::check_sandbox(req, cont_entry)?;
    let cont_h = Handle::open(netns)?;
    let container = check_container(&cont_h, cont_entry)?;

    let mut veth_found = false;
    for intf in &prev.interfaces {
        if intf.name == br_entry.name || intf.name == cont_entry.name {
            continue;
        }
        if check_host_veth(&host, intf, &bridge, &container)? {
            veth_found = true;
            break;
        }
    }
    if !veth_found {
        return Err(Error::internal(format!(
            "CNI veth created for bridge {} was not found",
            conf.bridge
        )));
    }
    iface::check_addresses(&cont_h, &req.ifname, &prev.ips)?;
    iface::check_routes(&cont_h, &prev.routes)
}

/// Look an interface of prevResult up; it must (or must not) be in a sandbox.
fn lookup(h: &Handle, intf: &Interface, expect_sandbox: bool) -> Result<Link, Error> {
    if intf.name.is_empty() {
        return Err(Error::internal("Interface name missing "));
    }
    let link = h
        .link_by_name(&intf.name)?
        .ok_or_else(|| Error::internal(format!("Interface name {} not found", intf.name)))?;
    let in_sandbox = intf.sandbox.as_deref().is_some_and(|s| !s.is_empty());
    if expect_sandbox && !in_sandbox {
        return Err(Error::internal(format!(
            "Interface {} is expected to be in a sandbox",
            intf.name
        )));
    }
    if !expect_sandbox && in_sandbox {
        return Err(Error::internal(format!(
            "Interface {} should not be in sandbox",
            intf.name
        )));
    }
    Ok(link)
}

fn mac_differs(intf: &Interface, link: &Link) -> bool {
    match intf.mac.as_deref().filter(|m| !m.is_empty()) {
        Some(m) => link.mac.map(|l| l.to_string()) != Some(m.to_ascii_lowercase()),
        None => false,
    }
}

fn check_bridge(h: &Handle, intf: &Interface, conf: &NetConf) -> Result<Link, Error> {
    let link = lookup(h, intf, false)?;
    if !matches!(link.kind, Some(LinkKind::Bridge(_))) {
        return Err(Error::internal(format!(
            "Interface {} does not have link type of bridge",
            intf.name
        )));
    }
    if mac_differs(intf, &link) {
        return Err(Error::internal(format!(
            "Bridge interface {} Mac doesn't match: {}",
            intf.name,
            intf.mac.as_deref().unwrap_or_default()
        )));
    }
    if link.promisc != conf.promisc {
        return Err(Error::internal(format!(
            "Bridge interface {} configured Promisc Mode {} doesn't match current state: {} ",
            intf.name, conf.promisc, link.promisc
        )));
    }
    Ok(link)
}

fn check_container(h: &Handle, intf: &Interface) -> Result<Link, Error> {
    let link = lookup(h, intf, true)?;
    if link.kind != Some(LinkKind::Veth) {
        return Err(Error::internal(format!(
            "Error: Container interface {} not of type veth",
            link.name
        )));
    }
    if link.peer_index.is_none() {
        return Err(Error::internal(format!(
            "Unable to obtain veth peer index for veth {}",
            link.name
        )));
    }
    if mac_differs(intf, &link) {
        return Err(Error::internal(format!(
            "Interface {} Mac {} doesn't match container Mac: {}",
            intf.name,
            intf.mac.as_deref().unwrap_or_default(),
            link.mac.map(|m| m.to_string()).unwrap_or_default()
        )));
    }
    Ok(link)
}

/// True when `intf` is the host veth paired with `container` and enslaved to `bridge`;
/// interfaces that are not veths, or are someone else's, are skipped (false).
fn check_host_veth(h: &Handle, intf: &Interface, bridge: &Link, container: &Link) -> Result<bool, Error> {
    let link = lookup(h, intf, false)?;
    if link.kind != Some(LinkKind::Veth) {
        return Ok(false);
    }
    let Some(peer) = link.peer_index else {
        return Err(Error::internal(format!(
            "Unable to obtain veth peer index for veth {}",
            link.name
        )));
    };
    if container.peer_index != Some(link.index) || peer != container.index || link.master != Some(bridge.index) {
        return Ok(false);
    }
    if mac_differs(intf, &link) {
        return Err(Error::internal(format!(
            "Interface {} Mac doesn't match: {} not found",
            intf.name,
            intf.mac.as_deref().unwrap_or_default()
        )));
    }
    Ok(true)
}
