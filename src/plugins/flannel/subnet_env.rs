//! flanneld's `subnet.env` (`FLANNEL_NETWORK=10.42.0.0/16` lines), read as flannel's CNI
//! plugin reads it (`loadFlannelSubnetEnv`): a line is `KEY=VALUE`, split at the first `=`
//! and taken as written; networks and subnets are CIDRs (the subnet's host bits cleared, as
//! Go's `net.ParseCIDR` returns the network); unknown keys are ignored; the last line of a
//! key wins.
use crate::cni::netaddr::{network_of, parse_cidr};
use crate::cni::Error;
use ipnetwork::IpNetwork;
use std::path::Path;

/// What flanneld told this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetEnv {
    /// `FLANNEL_NETWORK`: the cluster's IPv4 networks (duplicates dropped).
    pub networks: Vec<IpNetwork>,
    /// `FLANNEL_SUBNET`: this node's IPv4 subnet.
    pub subnet: Option<IpNetwork>,
    pub ip6_networks: Vec<IpNetwork>,
    pub ip6_subnet: Option<IpNetwork>,
    /// `FLANNEL_MTU`: the overlay's MTU.
    pub mtu: u32,
    /// `FLANNEL_IPMASQ`: whether flanneld masquerades traffic leaving the cluster itself.
    pub ipmasq: bool,
}

/// The file, or flannel's errors: the open error, a value that does not parse, or
/// `<file> is missing <keys>`.
pub fn load(file: &Path) -> Result<SubnetEnv, Error> {
    let text = std::fs::read(file).map_err(|e| {
        Error::internal(format!(
            "open {}: {}",
            file.display(),
            crate::cni::error::go_errno_text(&e)
        ))
    })?;
    parse(&String::from_utf8_lossy(&text), &file.display().to_string())
}

/// Go's `bufio.ScanLines`: lines split at `\n`, a `\r` before it dropped.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n')
        .map(|l| l.strip_suffix('\n').unwrap_or(l))
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// A network as Go's `net.ParseCIDR` returns it (host bits cleared).
fn network(s: &str) -> Result<IpNetwork, Error> {
    parse_cidr(s).map(network_of)
}

/// A comma-separated list of networks, each once.
fn networks(value: &str) -> Result<Vec<IpNetwork>, Error> {
    let mut out: Vec<IpNetwork> = Vec::new();
    for cidr in value.split(',') {
        let n = network(cidr)?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// `strconv.ParseUint(s, 10, 32)` with Go's error texts.
fn parse_mtu(s: &str) -> Result<u32, Error> {
    let syntax = || Error::internal(format!("strconv.ParseUint: parsing {s:?}: invalid syntax"));
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    s.parse::<u64>()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| Error::internal(format!("strconv.ParseUint: parsing {s:?}: value out of range")))
}

pub fn parse(text: &str, file: &str) -> Result<SubnetEnv, Error> {
    let mut networks_v4 = None;
    let mut subnet = None;
    let mut networks_v6 = None;
    let mut subnet_v6 = None;
    let mut mtu = None;
    let mut ipmasq = None;
    for line in lines(text) {
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (line, None),
        };
        // flannel indexes the value of a known key without looking and panics on such a
        // line; here it is an error naming the line
        let value = || value.ok_or_else(|| Error::internal(format!("{file}: {key} has no value")));
        match key {
            "FLANNEL_NETWORK" => networks_v4 = Some(networks(value()?)?),
            "FLANNEL_SUBNET" => subnet = Some(network(value()?)?),
            "FLANNEL_IPV6_NETWORK" => networks_v6 = Some(networks(value()?)?),
            "FLANNEL_IPV6_SUBNET" => subnet_v6 = Some(network(value()?)?),
            "FLANNEL_MTU" => mtu = Some(parse_mtu(value()?)?),
            "FLANNEL_IPMASQ" => ipmasq = Some(value()? == "true"),
            _ => {}
        }
    }
    let (networks_v4, networks_v6) = (networks_v4.unwrap_or_default(), networks_v6.unwrap_or_default());
    let mut missing = vec![];
    if networks_v4.is_empty() && networks_v6.is_empty() {
        missing.extend(["FLANNEL_NETWORK", "FLANNEL_IPV6_NETWORK"]);
    }
    if subnet.is_none() && subnet_v6.is_none() {
        missing.extend(["FLANNEL_SUBNET", "FLANNEL_IPV6_SUBNET"]);
    }
    if mtu.is_none() {
        missing.push("FLANNEL_MTU");
    }
    if ipmasq.is_none() {
        missing.push("FLANNEL_IPMASQ");
    }
    let (Some(mtu), Some(ipmasq), true) = (mtu, ipmasq, missing.is_empty()) else {
        return Err(Error::internal(format!("{file} is missing {}", missing.join(", "))));
    };
    Ok(SubnetEnv {
        networks: networks_v4,
        subnet,
        ip6_networks: networks_v6,
        ip6_subnet: subnet_v6,
        mtu,
        ipmasq,
    })
}
