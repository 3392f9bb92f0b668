//! The `loopback` plugin: `lo` up in the container namespace (containerd and CRI-O run it
//! for every pod).
//!
//! `CNI_IFNAME` is ignored: the plugin only ever touches `lo`. ADD reports `lo` with the
//! loopback addresses the kernel gave it (127.0.0.1/8, and ::1/128 when IPv6 is on in the
//! namespace), or passes a `prevResult` through unchanged when it runs chained. DEL sets `lo`
//! down and is done when the namespace is gone; CHECK verifies `lo` is up.
use crate::cni::config as cniconf;
use crate::cni::result::{Interface, IpConfig};
use crate::cni::{CniResult, Error, Plugin, Request};
use crate::netlink::{Family, Handle, Link};
use crate::plugin_kit::netns_open;
use ipnetwork::IpNetwork;

pub struct Loopback;

const LO: &str = "lo";

/// What the reference reports as the MAC of `lo`.
const LO_MAC: &str = "00:00:00:00:00:00";

fn lookup_lo(h: &Handle) -> Result<Link, Error> {
    h.link_by_name(LO)?.ok_or_else(|| Error::internal("Link not found"))
}

/// The first address of a family on `lo`, after checking that every one is a loopback
/// address (a foreign address on `lo` means someone else configured it).
fn first_loopback_address(h: &Handle, lo: &Link, family: Family) -> Result<Option<IpNetwork>, Error> {
    let addrs = h.addresses(Some(lo.index), family)?;
    if let Some(bad) = addrs.iter().find(|a| !a.address.ip().is_loopback()) {
        return Err(Error::internal(format!(
            "loopback interface found with non-loopback address \"{}\"",
            bad.address.ip()
        )));
    }
    Ok(addrs.first().map(|a| a.address))
}

impl Plugin for Loopback {
    fn about(&self) -> &'static str {
        "CNI loopback plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        cniconf::check_net_conf(&req.config, "NetConf").map_err(|e| e.context("failed to parse network config"))?;
        let prev = cniconf::prev_result(req).map_err(|e| e.context("failed to parse prevResult"))?;
        let ns = netns_open::open(&req.netns)?;
        let h = Handle::open(&ns)?;
        let lo = lookup_lo(&h)?;
        h.set_up(lo.index)?;
        let v4 = first_loopback_address(&h, &lo, Family::V4)?;
        let v6 = first_loopback_address(&h, &lo, Family::V6)?;

        // Chained: the result of the plugins before this one stays the result.
        if let Some(prev) = prev {
            return Ok(prev);
        }
        Ok(CniResult {
            cni_version: req.cni_version.clone(),
            interfaces: vec![Interface {
                name: LO.into(),
                mac: Some(LO_MAC.into()),
                sandbox: Some(req.netns.clone()),
                ..Default::default()
            }],
            ips: [v4, v6]
                .into_iter()
                .flatten()
                .map(|address| IpConfig {
                    interface: Some(0),
                    address,
                    gateway: None,
                })
                .collect(),
            ..Default::default()
        })
    }

    /// Needs no config: a gone namespace (or none given) is success.
    fn del(&self, req: &Request) -> Result<(), Error> {
        let Some(ns) = netns_open::open_for_del(&req.netns)? else {
            return Ok(());
        };
        let h = Handle::open(&ns)?;
        let lo = lookup_lo(&h)?;
        h.set_down(lo.index)?;
        Ok(())
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let ns = netns_open::open(&req.netns)?;
        let h = Handle::open(&ns)?;
        if !lookup_lo(&h)?.up {
            return Err(Error::internal("loopback interface is down"));
        }
        Ok(())
    }
}
