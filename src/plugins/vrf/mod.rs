//! The `vrf` plugin (chained): puts the container interface a previous plugin made into a
//! VRF in the container namespace, created on first use with the configured routing table
//! or the first free one, and moves the interface's routes into that table.
//!
//! Enslaving a link to a VRF cycles it down and up: the kernel drops its gateway routes and
//! (unless `keep_addr_on_down`) its global IPv6 addresses. So, as the reference does, the
//! routes are read before and put into the VRF's table after, and the IPv6 addresses are
//! put back and waited for (their local routes in the VRF's table). DEL releases the
//! interface and deletes the VRF once nothing is left in it.
mod enslave;

use crate::cni::config as cniconf;
use crate::cni::{json, CniResult, Error, Plugin, Request};
use crate::netlink::Handle;
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::{check_preamble, netns_open};
use enslave::{add_interface, check_enslaved, ensure_vrf, remove_interface, ADDRESS_BACKOFF};

pub struct Vrf;

/// As the reference (`VersionsStartingFrom("0.3.1")`).
const VERSIONS: &[&str] = &["0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// The plugin's config keys.
pub(crate) struct Conf {
    pub vrf_name: String,
    /// 0: the first table no VRF of the namespace has.
    pub table: u32,
}

fn load(req: &Request) -> Result<Conf, Error> {
    let ctx = "failed to load netconf";
    cniconf::check_net_conf(&req.config, "VRFNetConf").map_err(|e| e.context(ctx))?;
    let obj = json::as_object(&req.config, "VRFNetConf").map_err(|e| e.context(ctx))?;
    let vrf_name = json::opt_str(&obj, "vrfname", "VRFNetConf.vrfname")
        .map_err(|e| e.context(ctx))?
        .unwrap_or_default()
        .to_string();
    let table = json::opt_u32(&obj, "table", "VRFNetConf.table")
        .map_err(|e| e.context(ctx))?
        .unwrap_or(0);
    if vrf_name.is_empty() {
        return Err(Error::internal("configuration is expected to have a valid vrf name"));
    }
    Ok(Conf { vrf_name, table })
}

/// ADD's and CHECK's prevResult, which they require.
fn required_prev_result(req: &Request) -> Result<CniResult, Error> {
    check_preamble::prev_result(req, "missing prevResult from earlier plugin")
}

impl Plugin for Vrf {
    fn about(&self) -> &'static str {
        "CNI vrf plugin from cnibox"
    }

    fn versions(&self) -> &'static [&'static str] {
        VERSIONS
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let result = required_prev_result(req)?;
        let ctx = "cmdAdd failed";
        let ns = netns_open::open(&req.netns).map_err(|e| e.context(ctx))?;
        let h = Handle::open(&ns)?;
        let mut rollback = Rollback::new();
        let vrf = ensure_vrf(&h, &conf, &mut rollback).map_err(|e| e.context(ctx))?;
        add_interface(&h, &vrf, &req.ifname, ADDRESS_BACKOFF, &mut rollback).map_err(|e| e.context(ctx))?;
        rollback.commit();
        Ok(result)
    }

    /// Everything already gone is success: the namespace, the VRF, the interface.
    fn del(&self, req: &Request) -> Result<(), Error> {
        let Some(conf) = cniconf::del_config("vrf", || load(req).map(Some), || None) else {
            return Ok(()); // no VRF named: none of it can be this attachment's
        };
        let Some(ns) = netns_open::open_for_del(&req.netns)? else {
            return Ok(());
        };
        remove_interface(&Handle::open(&ns)?, &conf.vrf_name, &req.ifname)
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        required_prev_result(req)?;
        let ns = netns_open::open(&req.netns)?;
        check_enslaved(&Handle::open(&ns)?, &conf.vrf_name, &req.ifname)
    }
}
