//! The `veth` plugin, also answering as `ptp` (its reference name): one veth pair per
//! container, routed point to point through the host.
//!
//! The container end gets the IPAM addresses, but its subnet route is replaced so that
//! everything, the subnet included, goes through the gateway, which lives as a /32 (/128)
//! on the host end; the host reaches each container address through a host route on its
//! veth. No bridge, no ARP between containers.
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::netaddr::network_of;
use crate::cni::result::{Dns, Interface};
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::firewall_rules::ipmasq;
use crate::netlink::{
    self, AddrOptions, Family, Handle, Link, LinkKind, MacAddr, RouteSpec, Scope, Transport, VethError, VethSpec,
};
use crate::netns::Netns;
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::teardown::Teardown;
use crate::plugin_kit::{check_preamble, container_link, iface, ipam_delegation, netns_open};
use crate::sysctl;
use ipnetwork::IpNetwork;
use std::net::IpAddr;

pub struct Veth;

/// The plugin's own config keys (IPAM reads its section itself).
#[derive(Default)]
struct Conf {
    ip_masq: bool,
    ip_masq_backend: Option<String>,
    /// Both ends; None leaves the kernel default.
    mtu: Option<u32>,
    /// Required; an empty type fails in delegation as in the reference.
    ipam_type: String,
    dns: Dns,
}

fn load(req: &Request) -> Result<Conf, Error> {
    let ctx = "failed to load netconf";
    cniconf::check_net_conf(&req.config, "NetConf").map_err(|e| e.context(ctx))?;
    let obj = json::as_object(&req.config, "NetConf").map_err(|e| e.context(ctx))?;
    let mtu = json::opt_int(&obj, "mtu", "NetConf.mtu")
        .and_then(cniconf::link_mtu)
        .map_err(|e| e.context(ctx))?;
    Ok(Conf {
        ip_masq: json::opt_bool(&obj, "ipMasq", "NetConf.ipMasq")
            .map_err(|e| e.context(ctx))?
            .unwrap_or(false),
        ip_masq_backend: json::opt_str(&obj, "ipMasqBackend", "NetConf.ipMasqBackend")
            .map_err(|e| e.context(ctx))?
            .filter(|b| !b.is_empty())
            .map(str::to_string),
        mtu,
        ipam_type: cniconf::ipam_type(&req.config)
            .map_err(|e| e.context(ctx))?
            .unwrap_or_default(),
        dns: cniconf::dns(&req.config).map_err(|e| e.context(ctx))?,
    })
}

/// The full-length prefix of an address: `/32` or `/128`.
fn host_prefix(ip: IpAddr) -> IpNetwork {
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    IpNetwork::new(ip, bits).expect("full-length prefix is valid")
}

impl Plugin for Veth {
    fn about(&self) -> &'static str {
        "CNI veth plugin (ptp) from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let backend = match conf.ip_masq {
            true => Some(ipmasq::backend(conf.ip_masq_backend.as_deref())?),
            false => None,
        };
        // Opened before IPAM ADD: a bad netns then costs no address churn.
        let ns = netns_open::container(&req.netns)?;
        let host = Handle::current()?;
        let cont = Handle::open(&ns)?;
        let mut rollback = Rollback::new();

        let mut result = ipam_delegation::add(&conf.ipam_type, req, &mut rollback)?;
        if let Some(ip) = result.ips.iter().find(|ip| ip.gateway.is_none()) {
            return Err(Error::internal(format!(
                "IPAM result address {} has no gateway; veth (ptp) routes through the gateway",
                ip.address
            )));
        }
        iface::enable_forwarding(&host, &result.ips).map_err(|e| e.context("Could not enable IP forwarding"))?;
        // Masquerade as soon as the addresses are known.
        if let Some(backend) = backend {
            let addrs: Vec<IpNetwork> = result.ips.iter().map(|ip| ip.address).collect();
            let att = ipam_delegation::masq_attachment(req);
            let undo = addrs.clone();
            // registered first: a setup that fails halfway leaves rules too
            rollback.push("remove ip masquerade rules", move || {
                ipmasq::undo_setup(att, &undo).map_err(|e| e.to_string())
            });
            ipmasq::setup(backend, att, &addrs)?;
        }

        let (host_link, cont_mac) = create_pair(&host, &ns, &req.ifname, conf.mtu)?;
        let host_index = host_link.index;
        let host_for_undo = &host;
        rollback.push(format!("delete veth {}", host_link.name), move || {
            host_for_undo
                .remove_link(host_index)
                .map(drop)
                .map_err(|e| e.to_string())
        });
        let has_v6 = result.ips.iter().any(|ip| ip.address.is_ipv6());
        prepare_host_end(&host, &host_link, has_v6)?;

        result.interfaces = vec![
            Interface {
                name: host_link.name.clone(),
                mac: host_link.mac.map(|m| m.to_string()),
                ..Default::default()
            },
            Interface {
                name: req.ifname.clone(),
                mac: Some(cont_mac.to_string()),
                sandbox: Some(req.netns.clone()),
                ..Default::default()
            },
        ];
        for ip in &mut result.ips {
            ip.interface = Some(1);
        }

        configure_container(&ns, &cont, &req.ifname, &result, has_v6)?;
        configure_host(&host, &host_link, &result)?;

        result.dns = cniconf::dns_override(&result.dns, &conf.dns);
        // A result the config's version cannot express fails here, while the rollback
        // can still undo the ADD (the reference leaves everything behind then).
        result.to_json(&req.cni_version)?;
        rollback.commit();
        Ok(result)
    }

    /// Everything is attempted whatever fails first (the first error is returned), and
    /// "already gone" is success: no netns, no link, no rules, no reservation.
    fn del(&self, req: &Request) -> Result<(), Error> {
        let conf = cniconf::del_config(
            "veth",
            || load(req),
            || Conf {
                ipam_type: cniconf::ipam_type(&req.config).ok().flatten().unwrap_or_default(),
                ..Conf::default()
            },
        );
        let mut teardown = Teardown::new("veth");
        let prev = container_link::prev_result(req, "veth");
        if conf.ip_masq {
            // Found by attachment, not by address: works without the netns.
            let this = ipam_delegation::masq_interface(req, prev.as_ref());
            teardown.step(ipmasq::teardown(ipam_delegation::masq_attachment(req), &this));
        }
        // Released last, so an address is never free while still configured (a dhcp lease
        // first, through the link). A config without an IPAM type is one ADD refuses before
        // it allocates: nothing to release.
        let ipam_type = Some(conf.ipam_type.as_str()).filter(|t| !t.is_empty());
        ipam_delegation::del_with_interface(&mut teardown, ipam_type, req, |t| {
            // The host end, its gateway address and host routes go with the pair.
            let removed = container_link::delete(req, prev.as_ref(), "veth");
            if let (Ok(container_link::Removed::AlreadyGone), Some(prev)) = (&removed, &prev) {
                // Without the netns the pair can still be found from the host side.
                t.step(delete_host_end(prev));
            }
            t.step(removed);
        });
        teardown.finish()
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let ns = netns_open::container(&req.netns)?;
        delegate::check(&conf.ipam_type, req)?;
        let prev = check_preamble::prev_result(req, "ptp: Required prevResult missing")?;
        let cont_iface = check_preamble::container_entry(req, &prev);
        check_preamble::check_sandbox(req, &cont_iface)?;
        let cont = Handle::open(&ns)?;
        CONTAINER_LINK.check_configured(&cont, &cont_iface, &req.ifname, &prev, |_| Ok(()))
    }

    fn status(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        delegate::status(&conf.ipam_type, req)
    }

    /// Masquerade rules of attachments that are not valid any more, then IPAM's GC.
    fn gc(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        ipam_delegation::gc(req, Some(&conf.ipam_type), true)
    }
}

/// Creates the pair from the host side with the container end born in the container
/// namespace, name, MTU and both MACs in the create request. Returns the host end and
/// the container end's MAC.
fn create_pair<T: Transport>(
    host: &Handle<T>,
    ns: &Netns,
    ifname: &str,
    mtu: Option<u32>,
) -> Result<(Link, MacAddr), Error> {
    let random = |what: &str, e: std::io::Error| Error::internal(format!("failed to generate a random {what}: {e}"));
    let mac = netlink::random_mac().map_err(|e| random("MAC", e))?;
    let peer_mac = netlink::random_mac().map_err(|e| random("MAC", e))?;
    let spec = VethSpec {
        peer_name: ifname,
        peer_netns: Some(ns),
        mtu,
        mac: Some(mac),
        peer_mac: Some(peer_mac),
        ..Default::default()
    };
    match host.create_veth_random_name(&spec) {
        Ok(link) => Ok((link, peer_mac)),
        Err(VethError::PeerExists) => Err(Error::internal(format!(
            "container veth name provided ({ifname}) already exists"
        ))),
        Err(VethError::NoUniqueName { attempts }) => Err(Error::internal(format!(
            "failed to find a unique host veth name for {ifname} in {attempts} attempts"
        ))),
        Err(VethError::Random(e)) => Err(random("veth name", e)),
        Err(VethError::Netlink(e)) => Err(e.into()),
    }
}

/// Host end up, router advertisements off (the plugin owns its routes), and no DAD for
/// the gateway address: it is alone on a point-to-point link. Sysctl writes: the kernel
/// sets IPv6 device settings only through /proc/sys.
fn prepare_host_end(host: &Handle, link: &Link, has_v6: bool) -> Result<(), Error> {
    host.set_up(link.index)
        .map_err(|e| Error::internal(format!("failed to set {:?} up: {e}", link.name)))?;
    let _ = sysctl::set(&sysctl::ipv6_conf(&link.name, "accept_ra"), "0");
    if has_v6 {
        let _ = sysctl::set(&sysctl::ipv6_conf(&link.name, "accept_dad"), "0");
    }
    Ok(())
}

/// Addresses and IPAM routes (iface::configure), then per address the point-to-point
/// routing: the kernel's subnet route is replaced by `<gw>/32 scope link src <ip>` and
/// `<subnet> via <gw> src <ip>`.
///
/// The IPAM routes go in while the subnet route still makes the gateway reachable, as in
/// the reference; they survive its removal because the kernel does not re-validate
/// existing next hops (the container tests check the default route afterwards).
fn configure_container(ns: &Netns, cont: &Handle, ifname: &str, result: &CniResult, has_v6: bool) -> Result<(), Error> {
    if has_v6 {
        // The only other end of the link is the host: DAD would only delay the ADD. (A
        // sysctl: IFA_F_NODAD on the addresses would leave accept_dad as it was and the
        // link-local address tentative.)
        match sysctl::set_in(ns, &sysctl::ipv6_conf(ifname, "accept_dad"), "0") {
            Err(e) if !e.is_not_found() => return Err(e.into()),
            _ => {}
        }
    }
    let index = iface::configure(ns, cont, ifname, result)?.index;
    for ip in &result.ips {
        let gw = ip.gateway.expect("checked after IPAM ADD");
        let subnet = network_of(ip.address);
        let mut kernel_route = RouteSpec::new(subnet);
        kernel_route.oif = Some(index);
        match cont.delete_route(&kernel_route) {
            // a second address in the same subnet finds it gone
            Err(e) if !e.is_not_found() => {
                return Err(Error::internal(format!(
                    "failed to delete route {subnet} dev {ifname}: {e}"
                )))
            }
            _ => {}
        }
        let mut to_gw = RouteSpec::new(host_prefix(gw));
        to_gw.oif = Some(index);
        to_gw.scope = Some(Scope::Link);
        to_gw.prefsrc = Some(ip.address.ip());
        let mut via_gw = RouteSpec::new(subnet);
        via_gw.oif = Some(index);
        via_gw.gateway = Some(gw);
        via_gw.prefsrc = Some(ip.address.ip());
        for (route, text) in [
            (
                &to_gw,
                format!("{} dev {ifname} scope link src {}", to_gw.dst, ip.address.ip()),
            ),
            (
                &via_gw,
                format!("{subnet} via {gw} dev {ifname} src {}", ip.address.ip()),
            ),
        ] {
            match cont.add_route(route) {
                // two addresses with one gateway share the route to it
                Err(e) if !e.is_exists() => return Err(Error::internal(format!("failed to add route {text}: {e}"))),
                _ => {}
            }
        }
    }
    Ok(())
}

/// The gateway address on the host end and a host route to each container address.
fn configure_host(host: &Handle, link: &Link, result: &CniResult) -> Result<(), Error> {
    for ip in &result.ips {
        let gw = host_prefix(ip.gateway.expect("checked after IPAM ADD"));
        match host.add_address(link.index, gw, AddrOptions::default()) {
            Err(e) if !e.is_exists() => {
                return Err(Error::internal(format!(
                    "failed to add IP addr {gw} to veth {}: {e}",
                    link.name
                )))
            }
            _ => {}
        }
        let mut route = RouteSpec::new(host_prefix(ip.address.ip()));
        route.oif = Some(link.index);
        route.scope = Some(Scope::Host);
        match host.add_route(&route) {
            Err(e) if !e.is_exists() => return Err(Error::internal(format!("failed to add route on host: {e}"))),
            _ => {}
        }
    }
    Ok(())
}

/// DEL without a usable netns: the host end named in prevResult is deleted (taking the
/// container end with it) when it is provably this attachment's: a veth carrying the host
/// route to every address of the result (IPAM addresses are unique).
fn delete_host_end(prev: &CniResult) -> Result<(), Error> {
    if prev.ips.is_empty() {
        return Ok(());
    }
    let host = Handle::current()?;
    let candidates = prev
        .interfaces
        .iter()
        .filter(|i| i.sandbox.as_deref().unwrap_or_default().is_empty());
    for intf in candidates {
        let Some(link) = host.link_by_name(&intf.name)? else {
            continue;
        };
        if link.kind != Some(LinkKind::Veth) {
            continue;
        }
        let routes = host.routes(Family::All)?;
        let carries_all = prev.ips.iter().all(|ip| {
            let dst = host_prefix(ip.address.ip());
            routes.iter().any(|r| r.oif == Some(link.index) && r.dst == dst)
        });
        if !carries_all {
            eprintln!(
                "cnibox veth: DEL: {} does not route this attachment's addresses: left alone",
                link.name
            );
            continue;
        }
        host.remove_link(link.index)?;
    }
    Ok(())
}

/// CHECK of the container interface named in prevResult, in the reference ptp's words.
const CONTAINER_LINK: check_preamble::ContainerLink = check_preamble::ContainerLink {
    prefix: "ptp: ",
    kind: "veth",
    kind_word: "veth/p2p",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::testing::FakeTransport;
    use crate::netlink::OperState;

    fn link(name: &str) -> Link {
        Link {
            index: 7,
            name: name.into(),
            kind: Some(LinkKind::Veth),
            slave_kind: None,
            mac: Some(MacAddr([2, 0, 0, 0, 0, 1])),
            mtu: 1500,
            master: None,
            up: false,
            lower_up: false,
            oper_state: OperState::Down,
            peer_index: None,
            link_netnsid: None,
            promisc: false,
            allmulti: false,
            txqlen: 0,
            flags: 0,
            alias: None,
        }
    }

    #[test]
    fn a_taken_host_name_is_retried_with_a_new_one() {
        let ns = Netns::current().unwrap();
        let fake = FakeTransport::new();
        fake.push_errno(libc::EEXIST); // create: clash
        fake.push_links(&[link("veth00000000")]); // the host name is taken
        fake.push_ack(); // create with a new name
        fake.push_links(&[link("veth11111111")]); // lookup of the created end
        let h = Handle::with_transport(fake);
        let (l, _) = create_pair(&h, &ns, "eth0", Some(1400)).unwrap();
        assert_eq!(l.name, "veth11111111");
        assert_eq!(h.transport().requests().len(), 4);
    }

    #[test]
    fn a_taken_container_name_is_an_error_without_retry() {
        let ns = Netns::current().unwrap();
        let fake = FakeTransport::new();
        fake.push_errno(libc::EEXIST);
        fake.push_errno(libc::ENODEV); // the host name is free: the clash is the peer's
        let h = Handle::with_transport(fake);
        let e = create_pair(&h, &ns, "eth0", None).unwrap_err();
        assert_eq!(e.msg, "container veth name provided (eth0) already exists");
        assert_eq!(h.transport().requests().len(), 2);
    }

    #[test]
    fn host_names_run_out_after_the_attempts() {
        let ns = Netns::current().unwrap();
        let fake = FakeTransport::new();
        for _ in 0..netlink::VETH_NAME_ATTEMPTS {
            fake.push_errno(libc::EEXIST);
            fake.push_links(&[link("veth00000000")]);
        }
        let h = Handle::with_transport(fake);
        let e = create_pair(&h, &ns, "eth0", None).unwrap_err();
        assert_eq!(e.msg, "failed to find a unique host veth name for eth0 in 10 attempts");
        assert_eq!(h.transport().requests().len(), 2 * netlink::VETH_NAME_ATTEMPTS);
    }
}
