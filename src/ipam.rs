//! The IPAM applets, one module each (e.g. [`host_local`], whose allocator, config, owner
//! index, ranges and on-disk store are its own submodules; [`r#static`]; [`dhcp`], with its
//! daemon), and what they share: [`resolv`] (a resolv.conf into a result's DNS), [`routes`]
//! (the config's `routes`) and [`result`] (the answer every IPAM applet gives).
pub mod dhcp;
pub mod host_local;
pub mod resolv;
pub mod routes;
pub mod r#static;

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
