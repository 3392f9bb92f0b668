//! The IPAM applets and what they share.
//! * [`host_local`]: the host-local IPAM plugin (its allocator, config, owner index, ranges
//!   and on-disk store are its own submodules).
//! * [`resolv`]: reading a resolv.conf into a result's DNS.
//! * [`result`]: the answer every IPAM applet gives.
pub mod host_local;
pub mod resolv;

use crate::cni::result::{Dns, IpConfig, Route};
use crate::cni::{CniResult, Request};

/// An IPAM applet's answer to ADD: addresses, routes and DNS, in the request's version; no
/// interfaces (the plugin that delegated to it names those).
pub fn result(req: &Request, ips: Vec<IpConfig>, routes: Vec<Route>, dns: Dns) -> CniResult {
    CniResult {
        cni_version: req.cni_version.clone(),
        interfaces: vec![],
        ips,
        routes,
        dns,
    }
}
