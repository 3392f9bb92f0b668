//! The `bridge` plugin: containers attached to a Linux bridge through veth pairs.
//!
//! Config keys, ADD/DEL/CHECK behaviour and messages follow the Go reference plugin
//! (`plugins/main/bridge`); the deliberate differences are:
//! * the bridge MAC is pinned for every bridge, L2 included ([`device::ensure_bridge`]);
//! * an IPAM default route without a gateway is not duplicated by `isDefaultGateway`
//!   ([`gateway::apply`]);
//! * the host veth is enslaved and both MACs and MTUs are set in the create request, and
//!   the port's coming up is heard from the kernel's link notifications instead of polled
//!   through fixed sleeps, and the bridge's and container end's MACs are not read again
//!   (this ADD set both) ([`device::wait_port_up`]);
//! * DEL removes the attachment's masquerade and spoof-check rules also without a netns;
//! * CHECK and STATUS only delegate to IPAM when there is one; GC removes the network's
//!   stale nftables masquerade rules and is forwarded to IPAM;
//! * a failed ADD removes everything it created (veth, rules, address reservation).
//!
//! Modules: `config` (keys and validation), `device` (bridge, veth, ports, VLANs, gateway
//! addresses), `gateway` (gateways and default routes from the IPAM result), `check`.
mod check;
pub mod config;
mod device;
pub mod gateway;

use crate::cni::result::Interface;
use crate::cni::{config as cniconf, delegate, CniResult, Error, Plugin, Request};
use crate::firewall_rules::{ipmasq, spoofcheck};
use crate::netlink::{Handle, Ipv4Conf, Link, LinkEvents, LinkKind, MacAddr};
use crate::netns::Netns;
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::teardown::Teardown;
use crate::plugin_kit::{container_link, iface, ipam_delegation};
use crate::sysctl;
use config::NetConf;
use ipnetwork::IpNetwork;

pub struct Bridge;

impl Plugin for Bridge {
    fn about(&self) -> &'static str {
        concat!("bridge plugin cnibox ", env!("CARGO_PKG_VERSION"))
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = config::load(req)?;
        add(req, &conf)
    }

    fn del(&self, req: &Request) -> Result<(), Error> {
        let conf = cniconf::del_config("bridge", || config::load(req), || config::for_del(req));
        del(req, &conf)
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = config::load(req)?;
        check::check(req, &conf)
    }

    fn status(&self, req: &Request) -> Result<(), Error> {
        match cniconf::ipam_type(&req.config)? {
            Some(ipam) => delegate::status(&ipam, req),
            None => Ok(()),
        }
    }

    fn gc(&self, req: &Request) -> Result<(), Error> {
        gc(req)
    }
}

fn spoof_attachment<'a>(req: &'a Request) -> spoofcheck::Attachment<'a> {
    spoofcheck::Attachment {
        container_id: &req.container_id,
        ifname: &req.ifname,
    }
}

fn parse_mac(s: &str) -> Result<MacAddr, Error> {
    s.parse()
        .map_err(|_| Error::internal(format!("failed to parse MAC address: address {s}: invalid MAC address")))
}

/// Rollback step: the host veth (its peer goes with it); already gone is fine.
fn delete_veth(h: &Handle, index: u32) -> Result<(), String> {
    h.remove_link(index).map(drop).map_err(|e| e.to_string())
}

fn add(req: &Request, conf: &NetConf) -> Result<CniResult, Error> {
    config::validate_for_add(conf)?;
    let masq_backend = match (conf.ip_masq && conf.is_layer3(), &conf.ip_masq_backend) {
        (true, configured) => Some(ipmasq::backend(configured.as_deref()).map_err(|e| Error::internal(e.detail))?),
        (false, _) => None,
    };
    let mac = conf.mac.as_deref().map(parse_mac).transpose()?;

    let host = Handle::current()?;
    let bridge = device::ensure_bridge(&host, conf)?;
    let netns = crate::plugin_kit::netns_open::container(&req.netns)?;
    let cont = Handle::open(&netns)?;

    let mut rollback = Rollback::new();
    let host_veth = device::create_veth(&host, &netns, &req.ifname, conf.mtu, mac, bridge.index)?;
    let host_index = host_veth.index;
    let host_ref = &host;
    rollback.push(format!("delete veth {}", host_veth.name), move || {
        delete_veth(host_ref, host_index)
    });
    device::setup_port(&host, &host_veth, conf, conf.vlan, conf.trunk())?;
    // Before the container end comes up, so the port's coming up is heard (see
    // `device::wait_port_up`); without the subscription the kernel is asked instead.
    let port_events = (!conf.disable_container_interface)
        .then(LinkEvents::subscribe)
        .and_then(Result::ok);
    let cont_link = iface::lookup(&cont, &req.ifname)?;
    let cont_mac = cont_link.mac.map(|m| m.to_string()).unwrap_or_default();

    let mut result = CniResult {
        cni_version: req.cni_version.clone(),
        interfaces: vec![
            Interface {
                name: bridge.name.clone(),
                mac: bridge.mac.map(|m| m.to_string()),
                ..Default::default()
            },
            Interface {
                name: host_veth.name.clone(),
                mac: host_veth.mac.map(|m| m.to_string()),
                ..Default::default()
            },
            Interface {
                name: req.ifname.clone(),
                mac: Some(cont_mac.clone()),
                sandbox: Some(req.netns.clone()),
                ..Default::default()
            },
        ],
        ..Default::default()
    };

    if conf.macspoofchk {
        spoofcheck::setup(spoof_attachment(req), &host_veth.name, &cont_mac)?;
        rollback.push("tear down spoof-check rules", || {
            spoofcheck::teardown(spoof_attachment(req)).map_err(|e| e.to_string())
        });
    }

    if let Some(ipam) = &conf.ipam_type {
        let ipam_result = ipam_delegation::add(ipam, req, &mut rollback)?;
        // On failure the veth goes before the address is released (as DEL orders it), so
        // no other ADD can be handed the address while it is still configured here.
        rollback.push(format!("delete veth {} before releasing", host_veth.name), move || {
            delete_veth(host_ref, host_index)
        });
        result.ips = ipam_result.ips;
        result.routes = ipam_result.routes;
        result.dns = ipam_result.dns;
        let gateways = gateway::apply(&mut result, conf);

        container_sysctls(&netns, &cont, cont_link.index, &req.ifname, conf.enable_dad)?;
        iface::configure(&netns, &cont, &req.ifname, &result)?;
        if conf.is_gateway && !gateways.is_empty() {
            put_gateways(&host, &bridge, conf, &gateways, &mut result)?;
        }
        // Masquerade after the container end is up, as the reference orders it: meanwhile
        // the kernel brings the port up, which is waited for next (`device::wait_port_up`).
        if let Some(backend) = masq_backend {
            let addrs: Vec<_> = result.ips.iter().map(|ip| ip.address).collect();
            let undo = addrs.clone();
            rollback.push("tear down masquerade rules", move || {
                ipmasq::undo_setup(ipam_delegation::masq_attachment(req), &undo).map_err(|e| e.to_string())
            });
            ipmasq::setup(backend, ipam_delegation::masq_attachment(req), &addrs)?;
        }
    } else if !conf.disable_container_interface {
        cont.set_up(cont_link.index)
            .map_err(|e| Error::internal(format!("failed to set {:?} up: {e}", req.ifname)))?;
    }

    // The host veth's MAC as the port came up (the reference re-reads the MACs here, its fix
    // for CHECK failing when udev changed the host veth's MAC after ADD). The bridge's and
    // the container end's MACs were set by this ADD and cannot have changed: the bridge's
    // is pinned (`device::ensure_bridge`), so adding a port does not move it, and both veth
    // MACs were set at creation, which udev's MACAddressPolicy leaves alone.
    let host_veth = if conf.disable_container_interface {
        host.link(host_index)?
    } else {
        device::wait_port_up(&host, port_events.as_ref(), host_index)?
    };
    result.interfaces[1].mac = host_veth.mac.map(|m| m.to_string());

    result.dns = cniconf::dns_override(&result.dns, &conf.dns);
    // A result the config's version cannot express (an L2 result for 0.1.0/0.2.0) fails
    // here, while the rollback can still undo the ADD.
    result.to_json(&req.cni_version)?;
    rollback.commit();
    Ok(result)
}

/// DAD is off on the container veth unless asked for (the bridge is a private L2 segment,
/// and waiting seconds for DAD is the reference's best-known slowdown); ARP notifications on,
/// so neighbours learn a reused address's new MAC at once. Errors are ignored, as in the
/// reference (IPv6 may be disabled). arp_notify goes over netlink; the DAD settings are
/// IPv6 device settings, which the kernel sets only through `/proc/sys` (addresses with
/// IFA_F_NODAD would skip DAD too, but leave `accept_dad` as it was and the link-local
/// address still tentative, which is not what the reference does).
fn container_sysctls(netns: &Netns, cont: &Handle, index: u32, ifname: &str, enable_dad: bool) -> Result<(), Error> {
    netns.run(|| {
        let dad = |leaf: &str| sysctl::ipv6_conf(ifname, leaf);
        if enable_dad {
            let _ = sysctl::set(&dad("enhanced_dad"), "1");
            let _ = sysctl::set(&dad("accept_dad"), "1");
        } else {
            let _ = sysctl::set(&dad("accept_dad"), "0");
        }
    })?;
    let _ = cont.set_ipv4_conf(index, &[(Ipv4Conf::ArpNotify, 1)]);
    Ok(())
}

/// isGateway: the gateway addresses go on the bridge (or on `<bridge>.<vlan>`, then listed
/// as a fourth interface), and forwarding is turned on for their families.
fn put_gateways(
    host: &Handle,
    bridge: &Link,
    conf: &NetConf,
    gateways: &[IpNetwork],
    result: &mut CniResult,
) -> Result<(), Error> {
    let (target, what) = if conf.vlan != 0 {
        let vlan_if = device::ensure_vlan_interface(host, bridge, conf)?;
        result.interfaces.push(Interface {
            name: vlan_if.name.clone(),
            mac: vlan_if.mac.map(|m| m.to_string()),
            ..Default::default()
        });
        (vlan_if, "failed to set vlan interface for bridge with addr")
    } else {
        (bridge.clone(), "failed to set bridge addr")
    };
    for gw in gateways {
        device::ensure_addr(host, &target, *gw, conf.force_address).map_err(|e| e.context(what))?;
    }
    iface::enable_forwarding(host, &result.ips).map_err(|e| e.context("failed to enable forwarding"))
}

/// DEL, idempotent in every state: the spoof-check and masquerade rules (found by
/// attachment, so removed even when the netns is gone), then the container link, then IPAM
/// (so no address is released while still configured). The bridge stays.
/// Every step is attempted (see [`Teardown`]); whatever is already gone is success.
fn del(req: &Request, conf: &NetConf) -> Result<(), Error> {
    let mut teardown = Teardown::new("bridge");
    // Rules first, found by attachment: they go even when the netns or the link is gone.
    if conf.macspoofchk {
        teardown.step(spoofcheck::teardown(spoof_attachment(req)));
    }
    let prev = container_link::prev_result(req, "bridge");
    if conf.is_layer3() && conf.ip_masq {
        let this = ipam_delegation::masq_interface(req, prev.as_ref());
        teardown.step(ipmasq::teardown(ipam_delegation::masq_attachment(req), &this));
    }
    ipam_delegation::del_with_interface(&mut teardown, conf.ipam_type.as_deref(), req, |t| {
        let removed = container_link::delete(req, prev.as_ref(), "veth");
        if let (Ok(container_link::Removed::AlreadyGone), Some(prev)) = (&removed, &prev) {
            // The namespace may be gone while the kernel has not yet destroyed its veths
            // (that happens asynchronously); the host end named in prevResult goes now.
            t.step(delete_host_end(prev, conf));
        }
        t.step(removed);
    });
    teardown.finish()
}

/// The host veth of prevResult, deleted only when it is provably this attachment's: a veth
/// enslaved to this network's bridge whose MAC is the one ADD reported.
fn delete_host_end(prev: &CniResult, conf: &NetConf) -> Result<(), Error> {
    let host = Handle::current()?;
    let Some(bridge) = host.link_by_name(&conf.bridge)? else {
        return Ok(());
    };
    let ports = prev
        .interfaces
        .iter()
        .filter(|i| i.name != conf.bridge && i.sandbox.as_deref().unwrap_or_default().is_empty());
    for port in ports {
        let Some(link) = host.link_by_name(&port.name)? else {
            continue;
        };
        let ours = link.kind == Some(LinkKind::Veth)
            && link.master == Some(bridge.index)
            && port.mac.is_some()
            && link.mac.map(|m| m.to_string()) == port.mac;
        if !ours {
            eprintln!(
                "cnibox bridge: DEL: {} is not this attachment's port: left alone",
                link.name
            );
            continue;
        }
        if let Err(e) = delete_veth(&host, link.index) {
            return Err(Error::internal(e));
        }
    }
    Ok(())
}

/// GC: stale masquerade rules of this network, then IPAM's own.
fn gc(req: &Request) -> Result<(), Error> {
    let ipam = cniconf::ipam_type(&req.config)?;
    ipam_delegation::gc(req, ipam.as_deref(), true)
}
