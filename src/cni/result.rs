//! Results in the internal form (spec 1.1.0, the superset of every version), with
//! conversion to and from each spec version's JSON shape.
//!
//! Plugins build a [`CniResult`]; the entry point converts it to the config's `cniVersion`
//! with [`CniResult::to_json`] right before printing. Parsing (`prevResult`, a delegate's
//! output, a cached result) goes through [`CniResult::from_json`].
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// One interface of a result (`interfaces[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub mac: Option<String>,
    /// 1.1.0 only.
    pub mtu: Option<u32>,
    pub sandbox: Option<String>,
    /// 1.1.0 only.
    pub socket_path: Option<String>,
    /// 1.1.0 only.
    pub pci_id: Option<String>,
}

/// One address of a result (`ips[]`): the address keeps its host bits (`10.1.2.2/24`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// Index into `interfaces`; printed even when 0 (a Go `*int`).
    pub interface: Option<usize>,
    pub address: IpNetwork,
    pub gateway: Option<IpAddr>,
}

/// One route (`routes[]`); `dst` is always the network address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub dst: IpNetwork,
    pub gw: Option<IpAddr>,
    /// 1.1.0 fields; omitted when 0/absent.
    pub mtu: Option<u32>,
    pub advmss: Option<u32>,
    pub priority: Option<u32>,
    pub table: Option<u32>,
    pub scope: Option<u8>,
}

/// DNS settings. `None` and an empty list differ in *config* (the override rule); in a
/// printed result empty lists are omitted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dns {
    pub nameservers: Option<Vec<String>>,
    pub domain: Option<String>,
    pub search: Option<Vec<String>>,
    pub options: Option<Vec<String>>,
}

/// A result in the internal (1.1.0) form; `cni_version` is the version it was parsed from
/// or is meant for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniResult {
    pub cni_version: String,
    pub interfaces: Vec<Interface>,
    pub ips: Vec<IpConfig>,
    pub routes: Vec<Route>,
    pub dns: Dns,
}
