//! Putting an IPAM result on the container interface, and checking later that it is still
//! there: the reference plugins' `ipam.ConfigureIface` and `ip.ValidateExpected*`.
use crate::cni::netaddr::network_of;
use crate::cni::result::{Interface, IpConfig, Route};
use crate::cni::{CniResult, Error, Request};
use crate::netlink::{AddrOptions, Family, Handle, Ipv4Conf, Ipv6Conf, Link, RouteSpec, Scope};
use crate::netns::Netns;
use crate::sysctl;
use std::net::IpAddr;
use std::time::Duration;

/// How long to wait for IPv6 duplicate address detection, as the reference does.
const DAD_TIMEOUT: Duration = Duration::from_secs(5);

/// The result of an ADD that made `link`, the container interface `CNI_IFNAME`: that
/// interface alone, in the sandbox, with its MAC.
pub fn container_result(req: &Request, link: &Link) -> CniResult {
    CniResult {
        cni_version: req.cni_version.clone(),
        interfaces: vec![Interface {
            name: req.ifname.clone(),
            mac: link.mac.map(|m| m.to_string()),
            sandbox: Some(req.netns.clone()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// `result` (of [`container_result`]) with the addresses and routes of `l3` (an IPAM
/// result, or a chained prevResult), every address on the one interface.
pub fn with_addresses(mut result: CniResult, l3: CniResult) -> CniResult {
    result.ips = l3.ips;
    result.routes = l3.routes;
    for ip in &mut result.ips {
        ip.interface = Some(0);
    }
    result
}

/// `arp_notify` and `ndisc_notify` on the interface `index` (`ifname`) in `ns`, where `h`
/// is: a link on a shared segment announces its (possibly reused) address at once. Best
/// effort, as in the reference. `arp_notify` goes over netlink; `ndisc_notify` is an IPv6
/// device setting, which the kernel sets only through `/proc/sys`.
pub fn announce(ns: &Netns, h: &Handle, index: u32, ifname: &str, plugin: &str) {
    if let Err(e) = h.set_ipv4_conf(index, &[(Ipv4Conf::ArpNotify, 1)]) {
        eprintln!("cnibox {plugin}: {e}");
    }
    if let Err(e) = sysctl::set_in(ns, &sysctl::ipv6_conf(ifname, "ndisc_notify"), "1") {
        eprintln!("cnibox {plugin}: {e}");
    }
}

/// Find the container interface or fail the way the reference does.
pub fn lookup(h: &Handle, ifname: &str) -> Result<Link, Error> {
    match h.link_by_name(ifname)? {
        Some(l) => Ok(l),
        None => Err(Error::internal(format!("failed to lookup {ifname:?}: Link not found"))),
    }
}

/// Add the result's addresses (those whose `interface` index names `ifname`), bring the link
/// up, wait for IPv6 DAD when there is an IPv6 gateway, and add the result's routes (a route
/// without a gateway uses the first gateway of its family). `ns` is the namespace `h` is in
/// (sysctls are written there). Returns the link, so callers need not look it up again.
pub fn configure(ns: &Netns, h: &Handle, ifname: &str, result: &CniResult) -> Result<Link, Error> {
    if result.interfaces.is_empty() {
        return Err(Error::internal("no interfaces to configure"));
    }
    let link = lookup(h, ifname)?;
    let (mut v4gw, mut v6gw): (Option<IpAddr>, Option<IpAddr>) = (None, None);
    let mut ipv6_enabled = false;
    for ip in &result.ips {
        let Some(idx) = ip.interface else { continue };
        if result.interfaces.get(idx).map(|i| i.name.as_str()) != Some(ifname) {
            return Err(Error::internal(format!(
                "failed to add IP addr {} to {ifname:?}: invalid interface index",
                ip.address
            )));
        }
        if ip.address.is_ipv6() && !ipv6_enabled {
            enable_ipv6(ns, h, ifname)?;
            ipv6_enabled = true;
        }
        h.add_address(link.index, ip.address, AddrOptions::default())
            .map_err(|e| Error::internal(format!("failed to add IP addr {} to {ifname:?}: {e}", ip.address)))?;
        match ip.gateway {
            Some(gw @ IpAddr::V4(_)) if v4gw.is_none() => v4gw = Some(gw),
            Some(gw @ IpAddr::V6(_)) if v6gw.is_none() => v6gw = Some(gw),
            _ => {}
        }
    }
    h.set_up(link.index)
        .map_err(|e| Error::internal(format!("failed to set {ifname:?} UP: {e}")))?;
    if v6gw.is_some() {
        h.settle_addresses(link.index, DAD_TIMEOUT)?;
    }
    for r in &result.routes {
        let gw = r.gw.or(if r.dst.is_ipv4() { v4gw } else { v6gw });
        let mut spec = RouteSpec::new(r.dst);
        spec.gateway = gw;
        spec.oif = Some(link.index);
        spec.metric = r.priority;
        spec.table = r.table;
        spec.scope = r.scope.map(Scope::from_raw);
        spec.mtu = r.mtu;
        spec.advmss = r.advmss;
        // Next to whatever routes the destination already has (another interface's
        // default route, the kernel's subnet route), as the reference does: only an
        // identical route fails.
        h.add_route_ecmp(&spec).map_err(|e| {
            let via = gw.map(|g| g.to_string()).unwrap_or_else(|| "<nil>".into());
            Error::internal(format!("failed to add route '{} via {via} dev {ifname}': {e}", r.dst))
        })?;
    }
    Ok(link)
}

/// `disable_ipv6=0` on lo and the interface (only where it is not already 0), and keep
/// addresses when the link goes down. The values are read over netlink; the writes stay
/// sysctl writes, because the kernel sets no IPv6 device setting over netlink
/// (`inet6_set_link_af` takes only the token and the address generation mode).
fn enable_ipv6(ns: &Netns, h: &Handle, ifname: &str) -> Result<(), Error> {
    for dev in ["lo", ifname] {
        let key = sysctl::ipv6_conf(dev, "disable_ipv6");
        match h.devconf(dev).map(|c| c.ipv6(Ipv6Conf::DisableIpv6)) {
            Ok(Some(0)) => continue,
            Ok(Some(v)) => sysctl::set_in(ns, &key, "0").map_err(|e| {
                Error::internal(format!("failed to enable IPv6 for interface {dev:?} ({key}={v}): {e}"))
            })?,
            // IPv6 may be compiled out or disabled at boot; the address add then says why.
            Ok(None) => eprintln!("cnibox: failed to read sysctl {key:?}: {dev} has no IPv6 settings"),
            Err(e) => eprintln!("cnibox: failed to read sysctl {key:?}: {e}"),
        }
    }
    let _ = sysctl::set_in(ns, &sysctl::ipv6_conf(ifname, "keep_addr_on_down"), "1");
    Ok(())
}

/// CHECK: every address is on the interface, with a route to its prefix.
pub fn check_addresses(h: &Handle, ifname: &str, ips: &[IpConfig]) -> Result<(), Error> {
    if ips.is_empty() {
        return Ok(());
    }
    let link = h
        .link_by_name(ifname)?
        .ok_or_else(|| Error::internal(format!("Cannot find container link {ifname}")))?;
    let addrs = h.addresses(Some(link.index), Family::All)?;
    for ip in ips {
        if !addrs.iter().any(|a| a.address == ip.address) {
            return Err(Error::internal(format!(
                "Failed to match addr {} on interface {ifname}",
                ip.address
            )));
        }
        let prefix = network_of(ip.address);
        let family = if prefix.is_ipv4() { Family::V4 } else { Family::V6 };
        if !h.routes(family)?.iter().any(|r| r.dst == prefix) {
            let gw = ip.gateway.map(|g| g.to_string()).unwrap_or_else(|| "<nil>".into());
            return Err(Error::internal(format!(
                "Failed to find Gateway {gw} for interface {ifname}"
            )));
        }
    }
    Ok(())
}

/// CHECK: every route is in the routing table (destination, and gateway when given, as
/// any next hop of a multipath route: another interface may have added its own since).
pub fn check_routes(h: &Handle, routes: &[Route]) -> Result<(), Error> {
    let mut tables = [(Family::V4, None), (Family::V6, None)];
    for r in routes {
        let slot = if r.dst.is_ipv4() {
            &mut tables[0]
        } else {
            &mut tables[1]
        };
        if slot.1.is_none() {
            slot.1 = Some(h.routes(slot.0)?);
        }
        let table = slot.1.as_ref().expect("filled");
        if !table
            .iter()
            .any(|t| t.dst == r.dst && r.gw.map_or(true, |gw| t.has_gateway(gw)))
        {
            let via = r.gw.map(|g| format!(" via {g}")).unwrap_or_default();
            return Err(Error::internal(format!(
                "Expected Route {}{via} not found in routing table",
                r.dst
            )));
        }
    }
    Ok(())
}

/// Turn on forwarding in `host`'s namespace (the calling thread's) for the families of
/// `ips`. The switch is read over netlink; it is written as a sysctl, whose handler turns
/// forwarding on for every device of the namespace (no netlink request does that).
pub fn enable_forwarding(host: &Handle, ips: &[IpConfig]) -> Result<(), Error> {
    for (family, key, any) in [
        (
            Family::V4,
            sysctl::IPV4_FORWARD,
            ips.iter().any(|ip| ip.address.is_ipv4()),
        ),
        (
            Family::V6,
            sysctl::IPV6_FORWARDING_ALL,
            ips.iter().any(|ip| ip.address.is_ipv6()),
        ),
    ] {
        if any && host.forwarding(family).ok().flatten() != Some(true) {
            sysctl::set(key, "1")?;
        }
    }
    Ok(())
}
