//! The `tap` plugin: a persistent tap device in the container (for a VM or a userspace
//! network stack to attach to), with its MTU, MAC, queues, owner and group, optionally a
//! port of a bridge inside the container, with or without IPAM addresses.
//!
//! The device is made through `/dev/net/tun` ([`crate::tun`]) under a kernel-chosen
//! temporary name, shaped and renamed over netlink while this process still holds it, and
//! made persistent last: a failure before that (a bad MTU, a taken name, a missing bridge)
//! leaves nothing, since the kernel destroys a non-persistent device with its last file.
//! The TUNSETIFF flags are the reference's: it runs `ip tuntap add` (IFF_NO_PI) unless both
//! `owner` and `group` are set, when it goes through Go's netlink (IFF_VNET_HDR, and
//! IFF_NO_PI only with `multiQueue`). With `selinuxContext` the device is made as the
//! reference makes it, by `ip tuntap add` run under that SELinux label ([`selinux`]).
mod selinux;

use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::netaddr::parse_mac;
use crate::cni::result::Dns;
use crate::cni::version::go_quote;
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::netlink::{Handle, Ipv4Conf, Link, MacAddr};
use crate::netns::Netns;
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::{check_preamble, container_link, iface, ipam_delegation, netns_open};
use crate::tun::{flags, Tap, TapSpec};

pub struct TapPlugin;

/// The plugin's config keys.
struct Conf {
    multi_queue: bool,
    /// 0: the kernel's.
    mtu: i64,
    /// config `mac` < `CNI_ARGS` `MAC` < `runtimeConfig.mac`, parsed.
    mac: Option<MacAddr>,
    owner: Option<u32>,
    group: Option<u32>,
    selinux_context: Option<String>,
    /// A bridge inside the container namespace.
    bridge: Option<String>,
    ipam_type: Option<String>,
    dns: Dns,
}

fn load(req: &Request) -> Result<Conf, Error> {
    let ctx = "failed to load netconf";
    cniconf::check_net_conf(&req.config, "NetConf").map_err(|e| e.context(ctx))?;
    let obj = json::as_object(&req.config, "NetConf").map_err(|e| e.context(ctx))?;
    let s = |key: &str| -> Result<Option<String>, Error> {
        Ok(json::opt_str(&obj, key, &format!("NetConf.{key}"))
            .map_err(|e| e.context(ctx))?
            .filter(|v| !v.is_empty())
            .map(str::to_string))
    };
    // `args` is a `*struct{}`: only its type is checked
    json::opt_ptr_object(&obj, "args", "NetConf.args", "struct {}").map_err(|e| e.context(ctx))?;
    let conf = Conf {
        multi_queue: json::opt_bool(&obj, "multiQueue", "NetConf.multiQueue")
            .map_err(|e| e.context(ctx))?
            .unwrap_or(false),
        mtu: json::opt_int(&obj, "mtu", "NetConf.mtu")
            .map_err(|e| e.context(ctx))?
            .unwrap_or(0),
        mac: None,
        owner: json::opt_ptr_u32(&obj, "owner", "NetConf.owner").map_err(|e| e.context(ctx))?,
        group: json::opt_ptr_u32(&obj, "group", "NetConf.group").map_err(|e| e.context(ctx))?,
        selinux_context: s("selinuxContext")?,
        bridge: s("bridge")?,
        ipam_type: cniconf::ipam_type(&req.config).map_err(|e| e.context(ctx))?,
        dns: cniconf::dns(&req.config).map_err(|e| e.context(ctx))?,
    };
    let mac = match cniconf::link_requested_mac(req)? {
        None => None,
        Some(text) => Some(mac_of(&text)?),
    };
    Ok(Conf { mac, ..conf })
}

/// A requested MAC: Go's `net.ParseMAC`, and 6 bytes (a tap is Ethernet).
fn mac_of(text: &str) -> Result<MacAddr, Error> {
    let bytes = parse_mac(text).map_err(|e| Error::internal(format!("invalid args {text} for MAC addr: {e}")))?;
    <[u8; 6]>::try_from(bytes.as_slice())
        .map(MacAddr)
        .map_err(|_| Error::internal(format!("invalid args {text} for MAC addr: a tap's MAC has 6 bytes")))
}

impl Conf {
    /// The TUNSETIFF flags the reference's path for this config gives the device (see the
    /// module doc), besides IFF_TAP.
    fn tun_flags(&self) -> u16 {
        let netlink_path = self.selinux_context.is_none() && self.owner.is_some() && self.group.is_some();
        let mq = if self.multi_queue { flags::MULTI_QUEUE } else { 0 };
        match netlink_path {
            true if self.multi_queue => flags::VNET_HDR | flags::MULTI_QUEUE | flags::NO_PI,
            true => flags::VNET_HDR,
            false => flags::NO_PI | mq,
        }
    }
}

impl Plugin for TapPlugin {
    fn about(&self) -> &'static str {
        "CNI tap plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let ns = netns_open::container(&req.netns)?;
        let cont = Handle::open(&ns)?;
        let mut rollback = Rollback::new();
        let link = create(&ns, &cont, &conf, &req.ifname)?;
        let index = link.index;
        let cont_ref = &cont;
        rollback.push(format!("delete tap {}", req.ifname), move || {
            cont_ref.remove_link(index).map(drop).map_err(|e| e.to_string())
        });
        let mut result = iface::container_result(req, &link);
        if let Some(ipam_type) = &conf.ipam_type {
            result = iface::with_addresses(result, ipam_delegation::add(ipam_type, req, &mut rollback)?);
            // best effort, as in the reference
            if let Err(e) = cont.set_ipv4_conf(index, &[(Ipv4Conf::ArpNotify, 1)]) {
                eprintln!("cnibox tap: {e}");
            }
            iface::configure(&ns, &cont, &req.ifname, &result)?;
        }
        result.dns = conf.dns;
        // An L2 result cannot be printed for 0.1.0/0.2.0: fail while the rollback can still
        // remove the device (the reference leaves it behind then).
        result.to_json(&req.cni_version)?;
        rollback.commit();
        Ok(result)
    }

    /// Removes the tap (by name, when it is a tun/tap device: not by prevResult's MAC, which
    /// is a chained tuning's once its DEL has put the tap's own back), then releases IPAM;
    /// anything already gone is success.
    fn del(&self, req: &Request) -> Result<(), Error> {
        container_link::delete_with_addresses(req, "tap", "tun")
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let ns = netns_open::container(&req.netns)?;
        if let Some(t) = &conf.ipam_type {
            delegate::check(t, req)?;
        }
        let prev = check_preamble::prev_result(req, "Required prevResult missing")?;
        let intf = check_preamble::container_entry(req, &prev);
        check_preamble::check_sandbox(req, &intf)?;
        let cont = Handle::open(&ns)?;
        CONTAINER_LINK.check_configured(&cont, &intf, &req.ifname, &prev, check_tap)
    }

    fn status(&self, req: &Request) -> Result<(), Error> {
        ipam_delegation::status(req)
    }

    /// Nothing of its own outlives DEL; IPAM gets the GC (the spec asks to forward it).
    fn gc(&self, req: &Request) -> Result<(), Error> {
        ipam_delegation::gc_addresses(req)
    }
}

/// CHECK of the container interface (the reference checks only addresses and routes).
const CONTAINER_LINK: check_preamble::ContainerLink = check_preamble::ContainerLink {
    prefix: "",
    kind: "tun",
    kind_word: "tap",
};

/// A tun device of the kind is a tap, not a tun.
fn check_tap(link: &Link) -> Result<(), Error> {
    match &link.kind {
        Some(crate::netlink::LinkKind::Tun(t)) if t.tap => Ok(()),
        _ => Err(Error::internal(format!(
            "Error: Container interface {} not of type tap",
            link.name
        ))),
    }
}

/// The tap in the container as `ifname`: created, given its MTU and MAC, renamed, put on
/// the bridge, set up, and only then made persistent.
fn create(ns: &Netns, cont: &Handle, conf: &Conf, ifname: &str) -> Result<Link, Error> {
    match &conf.selinux_context {
        Some(label) => {
            let tmp = crate::netlink::random_name("tap")
                .map_err(|e| Error::internal(format!("failed to generate a temporary link name: {e}")))?;
            selinux::create_labelled(ns, label, &tmp, conf)?;
            let made = cont.link(tmp.as_str())?;
            // persistent from the start (ip made it so): removed by hand on failure
            shape(cont, &made, conf, ifname).inspect_err(|_| {
                if let Err(e) = cont.remove_link(made.index) {
                    eprintln!("cnibox tap: cleanup after a failed ADD: {e}");
                }
            })
        }
        None => {
            let spec = TapSpec {
                // a template: a name the kernel picks never attaches to an existing tap
                name: "tap%d",
                flags: conf.tun_flags(),
                owner: conf.owner,
                group: conf.group,
            };
            let tap = Tap::create(&spec, ns)?;
            let made = cont.link(tap.name.as_str())?;
            // dropped on failure, `tap` takes the device with it
            let link = shape(cont, &made, conf, ifname)?;
            tap.persist()?;
            Ok(link)
        }
    }
}

/// MTU, MAC, name, bridge port, up: everything after the device exists.
fn shape(cont: &Handle, made: &Link, conf: &Conf, ifname: &str) -> Result<Link, Error> {
    let i = made.index;
    if conf.mtu != 0 {
        let mtu = u32::try_from(conf.mtu)
            .map_err(|_| Error::internal(format!("failed to set MTU {} on tap: invalid argument", conf.mtu)))?;
        cont.set_mtu(i, mtu)
            .map_err(|e| Error::internal(format!("failed to set MTU {mtu} on tap: {e}")))?;
    }
    if let Some(mac) = conf.mac {
        cont.set_mac(i, mac)
            .map_err(|e| Error::internal(format!("failed to set MAC {mac} on tap: {e}")))?;
    }
    if made.name != ifname {
        cont.set_name(i, ifname)
            .map_err(|e| Error::internal(format!("failed to rename tap to {}: {e}", go_quote(ifname))))?;
    }
    if let Some(bridge) = &conf.bridge {
        let br = cont
            .link_by_name(bridge)?
            .ok_or_else(|| Error::internal(format!("failed to get bridge {bridge}: Link not found")))?;
        cont.set_master(i, Some(br.index))
            .map_err(|e| Error::internal(format!("failed to set tap {ifname} as a port of bridge {bridge}: {e}")))?;
    }
    cont.set_up(i)
        .map_err(|e| Error::internal(format!("failed to set tap interface up: {e}")))?;
    Ok(cont.link(i)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config with the keys the TUNSETIFF flags and `ip tuntap` depend on.
    pub(super) fn conf(multi_queue: bool, owner: Option<u32>, group: Option<u32>, selinux: bool) -> Conf {
        Conf {
            multi_queue,
            mtu: 0,
            mac: None,
            owner,
            group,
            selinux_context: selinux.then(|| "system_u:system_r:svirt_t:s0".to_string()),
            bridge: None,
            ipam_type: None,
            dns: Dns::default(),
        }
    }

    /// iproute2's `ip tuntap add` sets IFF_NO_PI; Go's netlink.LinkAdd of a Tuntap with
    /// TUNTAP_VNET_HDR sets only that, and TUNTAP_MULTI_QUEUE_DEFAULTS adds IFF_NO_PI.
    #[test]
    fn tun_flags_follow_the_references_two_paths() {
        let (pi, vnet, mq) = (flags::NO_PI, flags::VNET_HDR, flags::MULTI_QUEUE);
        assert_eq!(conf(false, None, None, false).tun_flags(), pi);
        assert_eq!(conf(true, None, None, false).tun_flags(), pi | mq);
        assert_eq!(conf(false, Some(1), None, false).tun_flags(), pi);
        assert_eq!(conf(false, None, Some(1), false).tun_flags(), pi);
        assert_eq!(conf(false, Some(1), Some(1), false).tun_flags(), vnet);
        assert_eq!(conf(true, Some(1), Some(1), false).tun_flags(), vnet | mq | pi);
        assert_eq!(conf(false, Some(1), Some(1), true).tun_flags(), pi);
    }

    #[test]
    fn a_mac_must_be_six_bytes() {
        assert_eq!(mac_of("02:aa:bb:cc:dd:ee").unwrap().to_string(), "02:aa:bb:cc:dd:ee");
        assert_eq!(
            mac_of("zz").unwrap_err().msg,
            "invalid args zz for MAC addr: address zz: invalid MAC address"
        );
        assert_eq!(
            mac_of("00:00:00:00:fe:80:00:00").unwrap_err().msg,
            "invalid args 00:00:00:00:fe:80:00:00 for MAC addr: a tap's MAC has 6 bytes"
        );
    }
}
