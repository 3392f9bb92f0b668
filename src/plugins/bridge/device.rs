//! Host-side devices of the bridge plugin: the bridge itself, the veth pair with its port
//! settings (hairpin, isolation, VLANs), the `<bridge>.<vlan>` gateway interface, and the
//! gateway addresses on the bridge.
use super::config::NetConf;
use crate::cni::Error;
use crate::netlink::{
    self, AddrOptions, BridgeSpec, Family, Handle, Heard, Ipv6Conf, Link, LinkEvents, LinkKind, MacAddr, OperState,
    PortFlags, PortVlan, Transport, VethError, VethSpec,
};
use crate::netns::Netns;
use crate::sysctl;
use ipnetwork::IpNetwork;
use std::time::{Duration, Instant};

/// How long a port whose peer is up may take to report oper state up (link-watch events
/// are batched by the kernel; normally the first look already sees it up).
const PORT_UP_TIMEOUT: Duration = Duration::from_millis(2500);
const PORT_UP_POLL: Duration = Duration::from_millis(10);
/// How long the notifications are listened to before the kernel is asked (in case one was
/// lost).
const PORT_UP_RECHECK: Duration = Duration::from_millis(100);

/// The VLAN a fresh bridge port gets by default (the bridge's default_pvid).
const DEFAULT_PVID: u16 = 1;

fn not_a_bridge(name: &str) -> Error {
    Error::internal(format!(
        "failed to create bridge {name:?}: {name:?} already exists but is not a bridge"
    ))
}

fn check_is_bridge(link: Link, name: &str) -> Result<Link, Error> {
    if matches!(link.kind, Some(LinkKind::Bridge(_))) {
        Ok(link)
    } else {
        Err(not_a_bridge(name))
    }
}

/// Find or create the bridge, set it up (promisc if asked, no router advertisements).
///
/// The bridge MAC is pinned: a bridge whose address was never set takes the lowest MAC of
/// its ports and changes it as containers come and go, which breaks neighbour caches and
/// conntrack on the gateway. A bridge created here gets a random locally administered MAC
/// in the create request itself (the kernel then never recomputes it); a bridge that
/// already existed gets its current MAC set explicitly, which pins it the same way. The
/// reference pins only bridges that get a gateway address; here L2 bridges are pinned too.
pub fn ensure_bridge(h: &Handle, conf: &NetConf) -> Result<Link, Error> {
    let name = conf.bridge.as_str();
    let wrap = |e: netlink::Error| Error::internal(format!("failed to create bridge {name:?}: {e}"));
    let link = match h.link_by_name(name).map_err(wrap)? {
        Some(existing) => {
            let link = check_is_bridge(existing, name)?;
            if let Some(mac) = link.mac {
                h.set_mac(link.index, mac)
                    .map_err(|e| Error::internal(format!("could not set bridge's mac: {e}")))?;
            }
            link
        }
        None => {
            let spec = BridgeSpec {
                name,
                mtu: conf.mtu,
                mac: Some(
                    netlink::random_mac()
                        .map_err(|e| Error::internal(format!("failed to generate a random MAC: {e}")))?,
                ),
                vlan_filtering: conf.vlan_filtering(),
            };
            match h.create_bridge(&spec) {
                Ok(link) => link,
                // Another ADD created it between our lookup and our create: use theirs.
                Err(e) if e.is_exists() => check_is_bridge(h.link(name).map_err(wrap)?, name)?,
                Err(e) if e.is_unsupported() => return Err(vlan_filtering_unsupported(name, &e)),
                Err(e) => return Err(wrap(e)),
            }
        }
    };
    if conf.promisc && !link.promisc {
        h.set_promisc(link.index, true).map_err(|e| {
            Error::internal(format!(
                "failed to create bridge {name:?}: could not set promiscuous mode on {name:?}: {e}"
            ))
        })?;
    }
    // We want to own the routes of this interface (errors ignored, as the reference does).
    // Read over netlink first: only the ADD that made the bridge pays the sysctl write
    // (an IPv6 device setting: the kernel sets those only through /proc/sys).
    if h.devconf(link.index).ok().and_then(|c| c.ipv6(Ipv6Conf::AcceptRa)) != Some(0) {
        let _ = sysctl::set(&sysctl::ipv6_conf(name, "accept_ra"), "0");
    }
    if !link.up {
        h.set_up(link.index).map_err(wrap)?;
    }
    Ok(link)
}

fn vlan_filtering_unsupported(bridge: &str, e: &netlink::Error) -> Error {
    let why = e
        .errno()
        .map(netlink::errno_text)
        .unwrap_or_else(|| "not supported".into());
    Error::internal(format!(
        "failed to create bridge {bridge:?}: bridge VLAN filtering is not supported by this kernel (vlan_filtering: {why})"
    ))
}

/// Creates the veth pair: the host end (random `vethXXXXXXXX` name, enslaved to the bridge
/// at creation) in `h`'s namespace, the container end `ifname` born directly in `netns`
/// with its MTU. Both MACs are in the create request (the container's is `mac` when given),
/// so the kernel marks them set (`addr_assign_type` 3) and udev's `MACAddressPolicy` leaves
/// them alone. Returns the host end.
pub fn create_veth(
    h: &Handle,
    netns: &Netns,
    ifname: &str,
    mtu: Option<u32>,
    mac: Option<MacAddr>,
    bridge: u32,
) -> Result<Link, Error> {
    let random = |what: &str, e: std::io::Error| Error::internal(format!("failed to generate a random {what}: {e}"));
    let host_mac = netlink::random_mac().map_err(|e| random("MAC", e))?;
    let peer_mac = match mac {
        Some(m) => m,
        None => netlink::random_mac().map_err(|e| random("MAC", e))?,
    };
    let spec = VethSpec {
        peer_name: ifname,
        peer_netns: Some(netns),
        mtu,
        mac: Some(host_mac),
        peer_mac: Some(peer_mac),
        master: Some(bridge),
        ..Default::default()
    };
    h.create_veth_random_name(&spec).map_err(|e| match e {
        VethError::PeerExists => Error::internal(format!("container veth name provided ({ifname}) already exists")),
        VethError::NoUniqueName { attempts } => Error::internal(format!(
            "failed to find a unique veth name for {ifname} after {attempts} attempts"
        )),
        VethError::Random(e) => random("veth name", e),
        VethError::Netlink(e) => Error::internal(format!("failed to create veth for {ifname}: {e}")),
    })
}

/// Port settings of a fresh host veth: flags, VLANs, no router advertisements, up.
pub fn setup_port(h: &Handle, port: &Link, conf: &NetConf, vlan: u16, trunk: &[u16]) -> Result<(), Error> {
    let name = port.name.as_str();
    // A new port has hairpin and isolation off: only ask when turning one on.
    if conf.hairpin || conf.port_isolation {
        let flags = PortFlags {
            hairpin: conf.hairpin.then_some(true),
            isolated: conf.port_isolation.then_some(true),
        };
        h.set_port_flags(port.index, flags)
            .map_err(|e| Error::internal(format!("failed to setup port flags for {name}: {e}")))?;
    }
    setup_port_vlans(h, port, vlan, trunk, conf.preserve_default_vlan)?;
    // A sysctl write: the kernel sets IPv6 device settings only through /proc/sys, and a
    // new port has the namespace's default, which is not 0.
    let _ = sysctl::set(&sysctl::ipv6_conf(name, "accept_ra"), "0");
    h.set_up(port.index)
        .map_err(|e| Error::internal(format!("failed to set {name:?} up: {e}")))?;
    Ok(())
}

/// VLANs of a port: `vlan` as PVID and untagged (the access / native VLAN), `trunk` tagged.
/// With a trunk but no `vlan`, VLAN 1 stays the native VLAN. Unless `preserve_default` is
/// set, whatever VLANs the port got from the bridge (its default PVID) are removed first.
fn setup_port_vlans(h: &Handle, port: &Link, vlan: u16, trunk: &[u16], preserve_default: bool) -> Result<(), Error> {
    if vlan == 0 && trunk.is_empty() {
        return Ok(());
    }
    let name = port.name.as_str();
    let fail = |what: &str, e: netlink::Error| Error::internal(format!("failed to {what} on interface {name:?}: {e}"));
    if !preserve_default {
        let existing = h.port_vlans(port.index).map_err(|e| fail("list vlans", e))?;
        for v in existing {
            match h.delete_port_vlan(port.index, v.vid) {
                Err(e) if !e.is_not_found() => return Err(fail("remove default vlan", e)),
                _ => {}
            }
        }
    }
    let native = if vlan != 0 { vlan } else { DEFAULT_PVID };
    h.add_port_vlan(
        port.index,
        PortVlan {
            vid: native,
            pvid: true,
            untagged: true,
        },
    )
    .map_err(|e| fail("setup vlan tag", e))?;
    for &vid in trunk.iter().filter(|v| **v != native) {
        h.add_port_vlan(
            port.index,
            PortVlan {
                vid,
                pvid: false,
                untagged: false,
            },
        )
        .map_err(|e| fail("setup vlan tag", e))?;
    }
    Ok(())
}

/// The `<bridge>.<vlan>` interface that carries the gateway addresses of a VLAN: one end of
/// a host-side veth pair whose other end is a bridge port in that VLAN. Created once, shared
/// by every container of the VLAN, never deleted by DEL (like the bridge).
pub fn ensure_vlan_interface(h: &Handle, bridge: &Link, conf: &NetConf) -> Result<Link, Error> {
    let name = format!("{}.{}", bridge.name, conf.vlan);
    if let Some(l) = h
        .link_by_name(&name)
        .map_err(|e| Error::internal(format!("failed to find interface {name:?}: {e}")))?
    {
        return Ok(l);
    }
    let fail = |e: Error| Error::internal(format!("failed to create vlan interface: {}", e.msg));
    let spec = VethSpec {
        peer_name: &name,
        mtu: Some(bridge.mtu),
        mac: Some(netlink::random_mac().map_err(|e| fail(Error::internal(e)))?),
        peer_mac: Some(netlink::random_mac().map_err(|e| fail(Error::internal(e)))?),
        master: Some(bridge.index),
        ..Default::default()
    };
    let port = match h.create_veth_random_name(&spec) {
        Ok(l) => l,
        // Another ADD created it meanwhile.
        Err(VethError::PeerExists) => return h.link(name.as_str()).map_err(|e| fail(Error::internal(e))),
        Err(VethError::NoUniqueName { .. }) => return Err(fail(Error::internal("no unique veth name"))),
        Err(VethError::Random(e)) => return Err(fail(Error::internal(e))),
        Err(VethError::Netlink(e)) => return Err(fail(Error::internal(e))),
    };
    let mut port_conf = conf.clone();
    port_conf.hairpin = false;
    port_conf.port_isolation = false;
    setup_port(h, &port, &port_conf, conf.vlan, &[]).map_err(fail)?;
    let gw = h.link(name.as_str()).map_err(|e| fail(Error::internal(e)))?;
    h.set_up(gw.index)
        .map_err(|e| Error::internal(format!("failed to up {name:?}: {e}")))?;
    Ok(gw)
}

/// Put gateway address `gw` on `link` (the reference's `ensureAddr`): an identical address
/// is fine; another IPv4 address, or an overlapping IPv6 one, is an error unless
/// `force` allows replacing it. Non-overlapping IPv6 addresses coexist. The address is
/// added without DAD (unlike the reference).
pub fn ensure_addr(h: &Handle, link: &Link, gw: IpNetwork, force: bool) -> Result<(), Error> {
    let family = if gw.is_ipv4() { Family::V4 } else { Family::V6 };
    let addrs = h
        .addresses(Some(link.index), family)
        .map_err(|e| Error::internal(format!("could not get list of IP addresses: {e}")))?;
    let name = link.name.as_str();
    for a in &addrs {
        let existing = a.address;
        if existing == gw {
            return Ok(());
        }
        // IPv6 link-local addresses are the kernel's own, never a conflict.
        if let std::net::IpAddr::V6(v6) = existing.ip() {
            if v6.segments()[0] & 0xffc0 == 0xfe80 {
                continue;
            }
        }
        let clash = gw.is_ipv4() || existing.contains(gw.ip()) || gw.contains(existing.ip());
        if !clash {
            continue;
        }
        if !force {
            return Err(Error::internal(format!(
                "{name:?} already has an IP address different from {gw}"
            )));
        }
        h.delete_address(link.index, existing)
            .map_err(|e| Error::internal(format!("could not remove IP address from {name:?}: {e}")))?;
    }
    // No DAD for the gateway: the bridge is a private segment this plugin owns, and an
    // IPv6 gateway would otherwise be unusable (tentative) for the first seconds.
    let opts = AddrOptions {
        nodad: true,
        ..Default::default()
    };
    match h.add_address(link.index, gw, opts) {
        Err(e) if !e.is_exists() => Err(Error::internal(format!("could not add IP address to {name:?}: {e}"))),
        _ => Ok(()),
    }
}

/// Wait until the host veth reports oper state up (the reference's check that the bridge
/// port came up; it always sleeps through fixed steps). The kernel's link watcher sets the
/// state and then announces it: `events`, subscribed before the container end came up, hears
/// that at once. Asking instead (`RTM_GETLINK`) would queue for the RTNL lock behind the
/// kernel's IPv6 announcements of the new container interface, flooded to every port of the
/// bridge: on a full bridge that wait was most of an ADD's growth. Whenever the
/// notifications say nothing (lost, or not yet sent), the kernel is asked, as before.
pub fn wait_port_up(h: &Handle, events: Option<&LinkEvents>, index: u32) -> Result<Link, Error> {
    wait_port_up_within(h, events, index, PORT_UP_TIMEOUT)
}

fn wait_port_up_within<T: Transport>(
    h: &Handle<T>,
    events: Option<&LinkEvents>,
    index: u32,
    timeout: Duration,
) -> Result<Link, Error> {
    let deadline = Instant::now() + timeout;
    loop {
        // without notifications, or when they ended early (lost, or the link deleted), the
        // kernel's answer is polled
        let poll = match events {
            Some(events) => {
                let slice = PORT_UP_RECHECK.min(deadline.saturating_duration_since(Instant::now()));
                let listening = Instant::now();
                if let Heard::Link(link) = events.wait_for(index, slice, |l| l.oper_state == OperState::Up) {
                    return Ok(*link);
                }
                listening.elapsed() < slice
            }
            None => true,
        };
        let link = h.link(index)?;
        if link.oper_state == OperState::Up {
            return Ok(link);
        }
        if Instant::now() >= deadline {
            return Err(Error::internal(format!(
                "bridge port in error state: {}",
                oper_state_name(link.oper_state)
            )));
        }
        if poll {
            std::thread::sleep(PORT_UP_POLL);
        }
    }
}

/// Go netlink's names for oper states.
fn oper_state_name(s: OperState) -> &'static str {
    match s {
        OperState::Unknown => "unknown",
        OperState::NotPresent => "not-present",
        OperState::Down => "down",
        OperState::LowerLayerDown => "lower-layer-down",
        OperState::Testing => "testing",
        OperState::Dormant => "dormant",
        OperState::Up => "up",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::testing::{link, FakeTransport};
    use crate::netlink::LinkKind;

    fn port(oper_state: OperState) -> Link {
        Link {
            oper_state,
            ..link(7, "veth01020304", LinkKind::Veth)
        }
    }

    /// Notifications that say nothing (here: none come for the link) leave the answer to the
    /// kernel, asked once per listening slice.
    #[test]
    fn notifications_that_say_nothing_fall_back_to_asking() {
        let fake = FakeTransport::new();
        fake.push_links(&[port(OperState::Up)]);
        let h = Handle::with_transport(&fake);
        let events = LinkEvents::subscribe().ok(); // none under an emulator without it
        let started = Instant::now();
        let l = wait_port_up_within(&h, events.as_ref(), 7, PORT_UP_TIMEOUT).unwrap();
        assert_eq!(l.name, "veth01020304");
        assert_eq!(fake.requests().len(), 1, "asked once");
        if events.is_some() {
            assert!(
                started.elapsed() >= PORT_UP_RECHECK,
                "listened first: {:?}",
                started.elapsed()
            );
        }
    }

    /// A port that never comes up is the reference's error, with Go netlink's state name.
    #[test]
    fn a_port_that_never_comes_up_is_the_references_error() {
        let fake = FakeTransport::new();
        for _ in 0..20 {
            fake.push_links(&[port(OperState::LowerLayerDown)]);
        }
        let h = Handle::with_transport(&fake);
        let e = wait_port_up_within(&h, None, 7, Duration::from_millis(30)).unwrap_err();
        assert_eq!(e.to_string(), "bridge port in error state: lower-layer-down");
        assert!(fake.requests().len() >= 2, "polled: {}", fake.requests().len());
    }
}
