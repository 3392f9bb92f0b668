//! static IPAM: the addresses (with their gateways), routes and DNS the config states,
//! handed back as an IPAM result. Nothing is allocated and nothing is kept, so DEL, GC and
//! STATUS have nothing to do.
//!
//! Addresses come from `ipam.addresses`, extended by `CNI_ARGS` `IP=` (with `GATEWAY=`),
//! then replaced by `args.cni.ips`, then by `runtimeConfig.ips` (the `ips` capability), in
//! the reference's order and with its messages (`LoadIPAMConfig`).
use crate::cni::json::{self, Fields, Json};
use crate::cni::netaddr::{self, parse_cidr, parse_ip};
use crate::cni::result::{Dns, IpConfig, Route};
use crate::cni::{args, config as cniconf, version, CniResult, Error, Plugin, Request};
use ipnetwork::IpNetwork;
use std::net::IpAddr;

pub struct Static;

/// One address as the config holds it before validation: the text, or an address already
/// parsed (from `CNI_ARGS`, `ips`, or the reference's untagged `Address` member).
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    text: String,
    parsed: Option<IpNetwork>,
    gateway: Option<IpAddr>,
}

impl Entry {
    fn parsed(text: &str, net: IpNetwork) -> Entry {
        Entry {
            text: text.to_string(),
            parsed: Some(canonical(net)),
            gateway: None,
        }
    }
}

/// The validated config.
#[derive(Debug, Clone, PartialEq)]
struct Conf {
    /// The addresses, host bits kept.
    addresses: Vec<(IpNetwork, Option<IpAddr>)>,
    routes: Vec<Route>,
    dns: Dns,
}

/// An IPv4-mapped IPv6 address is the IPv4 address it maps (the reference's
/// `canonicalizeIP`), its prefix the part of the mask over those 32 bits.
fn canonical(net: IpNetwork) -> IpNetwork {
    let ip = net.ip().to_canonical();
    if ip == net.ip() {
        return net;
    }
    IpNetwork::new(ip, net.prefix().saturating_sub(96)).unwrap_or(net)
}

/// A list of CIDR addresses (`args.cni.ips`, `runtimeConfig.ips`), which replaces the
/// config's.
fn from_ips(ips: &[String]) -> Result<Vec<Entry>, Error> {
    ips.iter()
        .map(|s| {
            parse_cidr(s).map(|n| Entry::parsed(s, n)).map_err(|_| {
                Error::internal(format!(
                    "an entry in the 'ips' field is NOT in CIDR notation, got: '{s}'"
                ))
            })
        })
        .collect()
}

/// The reference's `Address.Address`, a `net.IPNet` written as `{"IP": "…", "Mask": "<base64>"}`
/// under the exact key `Address`: when it holds an address, the text is not read.
fn ipnet_member(addr: &Fields, index: usize) -> Result<Option<IpNetwork>, Error> {
    const PATH: &str = "Address.ipam.addresses.Address";
    let (mut ip, mut mask): (Option<IpAddr>, Option<Vec<u8>>) = (None, None);
    for v in addr.written_exactly("Address", "net.IPNet").filter(|v| !v.is_null()) {
        if v.as_object().is_none() {
            return Err(json::type_error(v, PATH, "net.IPNet"));
        }
        let net = json::as_object(v, PATH)?;
        // a net.IP is a slice: `null` (or "") written last makes it nil, so the text is read
        if net.written("IP", "net.IP").next().is_some() {
            ip = netaddr::opt_ip(&net, "IP", "IPNet.ipam.addresses.Address.IP")?;
        }
        mask = match json::nullable_field(&net, "Mask", "net.IPMask", mask_bytes)? {
            Some(m) => Some(m),
            None if net.is_nil("Mask", "net.IPMask") => None,
            None => mask,
        };
    }
    let Some(ip) = ip else { return Ok(None) };
    let mask = mask.unwrap_or_default();
    // the reference prints such an address as `<nil>` or a hex mask, which no reader takes
    let net = netaddr::ipnet_of(ip, &mask).ok_or_else(|| {
        let family_len = if ip.to_canonical().is_ipv4() { 4 } else { 16 };
        Error::internal(format!(
            "invalid address {index}: the mask of 'Address' is not a prefix mask of {family_len} bytes"
        ))
    })?;
    Ok(Some(net))
}

/// A `net.IPMask` (a `[]byte`): base64 text, or a list of byte values.
fn mask_bytes(v: &Json) -> Result<Vec<u8>, Error> {
    const PATH: &str = "IPNet.ipam.addresses.Address.Mask";
    match v {
        Json::String(s) => crate::util::base64::decode(s).map_err(Error::internal),
        Json::Array(items) => items
            .iter()
            .map(|b| {
                match b {
                    Json::Number(n) => n.as_u64().and_then(|n| u8::try_from(n).ok()),
                    _ => None,
                }
                .ok_or_else(|| json::type_error(b, PATH, "uint8"))
            })
            .collect(),
        other => Err(json::type_error(other, PATH, "net.IPMask")),
    }
}

/// One member of `ipam.addresses` (the reference's `Address`; `null` is an empty one).
fn address(v: &Json, index: usize) -> Result<Entry, Error> {
    const PATH: &str = "Address.ipam.addresses";
    if !v.is_null() && v.as_object().is_none() {
        return Err(json::type_error(v, "IPAMConfig.ipam.addresses", "main.Address"));
    }
    let fields = json::as_object(v, PATH)?;
    // `address` and the untagged `Address` fold together: an exact `Address` is the net.IPNet
    let text = fields.shadowed_by("Address");
    let text = json::opt_str(&text, "address", &format!("{PATH}.address"))?.unwrap_or_default();
    let gateway = netaddr::opt_ip(&fields, "gateway", &format!("{PATH}.gateway"))?;
    let parsed = ipnet_member(&fields, index)?;
    json::opt_str(&fields, "Version", &format!("{PATH}.Version"))?;
    Ok(Entry {
        text: text.to_string(),
        parsed,
        gateway,
    })
}

/// `CNI_ARGS` `IP=` (comma-separated CIDR addresses, added to the config's) and `GATEWAY=`
/// (each gateway goes to the addresses whose network holds it; the config's own addresses
/// are not parsed yet at that point in the reference, so only `IP=` ones can get one).
fn apply_cni_args(req: &Request, entries: &mut Vec<Entry>) -> Result<(), Error> {
    let pairs = args::parse(&req.args, &["IP", "GATEWAY"])?;
    if let Some(ips) = args::get(&pairs, "IP").filter(|s| !s.is_empty()) {
        for item in ips.split(',') {
            let s = item.trim();
            let net = parse_cidr(s).map_err(|_| {
                Error::internal(format!("the 'ip' field is expected to be in CIDR notation, got: '{s}'"))
            })?;
            entries.push(Entry::parsed(s, net));
        }
    }
    if let Some(gateways) = args::get(&pairs, "GATEWAY").filter(|s| !s.is_empty()) {
        for item in gateways.split(',') {
            let gw =
                parse_ip(item.trim()).ok_or_else(|| Error::internal(format!("invalid gateway address: {item}")))?;
            for e in entries.iter_mut() {
                if e.parsed.is_some_and(|n| n.contains(gw)) {
                    e.gateway = Some(gw);
                }
            }
        }
    }
    Ok(())
}

/// The reference's `LoadIPAMConfig`.
fn load(req: &Request) -> Result<Conf, Error> {
    let conf = &json::as_object(&req.config, "Net")?;
    let cni_version = json::opt_str(conf, "cniVersion", "Net.cniVersion")?.unwrap_or_default();
    json::opt_str(conf, "name", "Net.name")?;
    let Some(ipam) = json::opt_ptr_object(conf, "ipam", "Net.ipam", "main.IPAMConfig")? else {
        return Err(Error::internal("IPAM config missing 'ipam' key"));
    };
    // decoded though unused, so a wrong type fails as in the reference (`Name` has no JSON
    // tag: any spelling of "name" fills it)
    json::opt_str(&ipam, "Name", "IPAMConfig.ipam.Name")?;
    json::opt_str(&ipam, "type", "IPAMConfig.ipam.type")?;
    let routes = crate::ipam::routes::read(&ipam)?;
    let mut entries = json::opt_list(&ipam, "addresses", "IPAMConfig.ipam.addresses", "[]main.Address")?
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, v)| address(v, i))
        .collect::<Result<Vec<_>, _>>()?;
    let dns = match json::opt_object(&ipam, "dns", "IPAMConfig.ipam.dns", "types.DNS")? {
        Some(d) => Dns::from_fields(&d, "DNS.ipam.dns")?,
        None => Dns::default(),
    };
    // anonymous structs: Go's errors name their fields with an empty struct name
    let runtime_type = r#"struct { IPs []string "json:\"ips,omitempty\"" }"#;
    let runtime_ips = match json::opt_object(conf, "runtimeConfig", "Net.runtimeConfig", runtime_type)? {
        Some(rc) => json::opt_str_list(&rc, "ips", ".runtimeConfig.ips")?.unwrap_or_default(),
        None => vec![],
    };
    let args_type = r#"struct { A *main.IPAMArgs "json:\"cni\"" }"#;
    let args_ips = match json::opt_ptr_object(conf, "args", "Net.args", args_type)? {
        Some(a) => match json::opt_ptr_object(&a, "cni", ".args.cni", "main.IPAMArgs")? {
            Some(cni) => json::opt_str_list(&cni, "ips", "IPAMArgs.args.cni.ips")?.unwrap_or_default(),
            None => vec![],
        },
        None => vec![],
    };

    apply_cni_args(req, &mut entries)?;
    if !args_ips.is_empty() {
        entries = from_ips(&args_ips)?;
    }
    if !runtime_ips.is_empty() {
        entries = from_ips(&runtime_ips)?;
    }

    let mut addresses = Vec::with_capacity(entries.len());
    for e in entries {
        let net = match e.parsed {
            Some(n) => n,
            None => canonical(parse_cidr(&e.text).map_err(|_| {
                Error::internal(format!(
                    "the 'address' field is expected to be in CIDR notation, got: '{}'",
                    e.text
                ))
            })?),
        };
        addresses.push((net, e.gateway));
    }
    let v4 = addresses.iter().filter(|(n, _)| n.is_ipv4()).count();
    if (v4 > 1 || addresses.len() - v4 > 1) && !version::at_least(cni_version, "0.3.0") {
        return Err(Error::internal(format!(
            "CNI version {cni_version} does not support more than 1 address per family"
        )));
    }
    Ok(Conf { addresses, routes, dns })
}

impl Plugin for Static {
    fn about(&self) -> &'static str {
        concat!("static plugin cnibox ", env!("CARGO_PKG_VERSION"))
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let ips = conf
            .addresses
            .iter()
            .map(|(address, gateway)| IpConfig {
                interface: None,
                address: *address,
                gateway: *gateway,
            })
            .collect();
        Ok(crate::ipam::result(req, ips, conf.routes, conf.dns))
    }

    /// Nothing was allocated, so nothing is released (the config is not even read, as in
    /// the reference).
    fn del(&self, _req: &Request) -> Result<(), Error> {
        Ok(())
    }

    /// Every configured address must be in prevResult, with the configured gateway when one
    /// is configured (the reference passes an address missing from prevResult).
    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        cniconf::check_net_conf(&req.config, "NetConf").map_err(|e| e.context("failed to load netconf"))?;
        let prev = crate::plugin_kit::check_preamble::prev_result(req, "Required prevResult missing")?;
        for (address, gateway) in &conf.addresses {
            let Some(found) = prev.ips.iter().find(|ip| ip.address.ip() == address.ip()) else {
                return Err(Error::internal(format!(
                    "static: Failed to find addr {} on interface {}",
                    address.ip(),
                    req.ifname
                )));
            };
            if gateway.is_some() && found.gateway != *gateway {
                return Err(Error::internal(format!(
                    "static: Failed to match addr {} on interface {}",
                    found.address.ip(),
                    req.ifname
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use serde_json::{json, Value};

    fn load_with(conf: Value, cni_args: &str) -> Result<Conf, String> {
        let mut req = Request::from_config(Command::Add, &conf);
        req.args = cni_args.to_string();
        load(&req).map_err(|e| e.msg)
    }

    fn addresses(conf: Value, cni_args: &str) -> Vec<String> {
        load_with(conf, cni_args)
            .unwrap()
            .addresses
            .iter()
            .map(|(a, g)| format!("{a} {}", g.map(|g| g.to_string()).unwrap_or_default()))
            .collect()
    }

    fn ipam(v: Value) -> Value {
        json!({"cniVersion": "1.0.0", "name": "n", "ipam": v})
    }

    #[test]
    fn env_addresses_join_the_configs_and_take_gateways_by_subnet() {
        let conf = ipam(json!({"addresses": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1"}]}));
        assert_eq!(
            addresses(conf, "IP=10.1.0.2/24 , 2001:db8::2/64;GATEWAY= 10.1.0.1,10.0.0.9"),
            ["10.0.0.2/24 10.0.0.1", "10.1.0.2/24 10.1.0.1", "2001:db8::2/64 "]
        );
    }

    #[test]
    fn args_then_runtime_config_replace_the_list() {
        let mut conf = ipam(json!({"addresses": [{"address": "10.0.0.2/24"}]}));
        conf["args"] = json!({"cni": {"ips": ["10.2.0.2/24"]}});
        assert_eq!(addresses(conf.clone(), "IP=10.1.0.2/24"), ["10.2.0.2/24 "]);
        conf["runtimeConfig"] = json!({"ips": ["10.3.0.2/16"]});
        assert_eq!(addresses(conf.clone(), ""), ["10.3.0.2/16 "]);
        conf["runtimeConfig"] = json!({"ips": []});
        assert_eq!(addresses(conf, ""), ["10.2.0.2/24 "], "an empty list replaces nothing");
    }

    /// The untagged `Address` (a net.IPNet) and `address` fold together: Go gives a key
    /// written exactly `Address` to the former, any other spelling to the latter.
    #[test]
    fn an_exact_address_key_is_the_references_ipnet() {
        let one = |a: Value| addresses(ipam(json!({"addresses": [a]})), "");
        assert_eq!(one(json!({"ADDRESS": "10.0.0.2/24"})), ["10.0.0.2/24 "]);
        assert_eq!(
            one(json!({"address": "x", "Address": {"IP": "10.0.0.9", "Mask": "////AA=="}})),
            ["10.0.0.9/24 "]
        );
        assert_eq!(
            one(json!({"address": "10.0.0.2/24", "Address": {"Mask": "////AA=="}})),
            ["10.0.0.2/24 "],
            "without an IP the text is read"
        );
        let err = |a: Value| load_with(ipam(json!({"addresses": [a]})), "").unwrap_err();
        assert_eq!(
            err(json!({"Address": "10.0.0.2/24"})),
            "json: cannot unmarshal string into Go struct field Address.ipam.addresses.Address of type net.IPNet"
        );
        assert_eq!(
            err(json!({"Address": {"IP": "10.0.0.9", "Mask": [255, 255, 0, 255]}})),
            "invalid address 0: the mask of 'Address' is not a prefix mask of 4 bytes"
        );
        assert_eq!(err(json!({"Address": {"IP": "x"}})), "invalid IP address: x");
    }

    /// A `net.IP` is a slice: Go's `null` written after a value makes it nil. Before, the
    /// gateway kept the value (the reference's result has none), and the `IP` of an
    /// `Address` kept it too (the reference then reads the empty text and fails).
    #[test]
    fn a_null_written_last_makes_the_gateway_and_the_address_ip_nil() {
        let one = |a: Value| load_with(ipam(json!({"addresses": [a]})), "");
        // serde_json sorts keys: "GATEWAY" comes first
        let conf = one(json!({"address": "10.0.0.2/24", "GATEWAY": "10.0.0.1", "gateway": null})).unwrap();
        assert_eq!(conf.addresses, [("10.0.0.2/24".parse().unwrap(), None)]);
        assert_eq!(
            one(json!({"Address": {"IP": "10.0.0.9", "ip": null, "Mask": "////AA=="}})).unwrap_err(),
            "the 'address' field is expected to be in CIDR notation, got: ''"
        );
        assert_eq!(
            one(json!({"Address": {"Mask": "x"}})).unwrap_err(),
            "illegal base64 data at input byte 0",
            "Go's words for a mask that is no base64"
        );
    }

    #[test]
    fn messages_are_the_references() {
        let e = |v: Value, args: &str| load_with(v, args).unwrap_err();
        assert_eq!(e(json!({"name": "n"}), ""), "IPAM config missing 'ipam' key");
        assert_eq!(
            e(ipam(json!({"addresses": [{"address": "10.0.0.2"}]})), ""),
            "the 'address' field is expected to be in CIDR notation, got: '10.0.0.2'"
        );
        assert_eq!(
            e(ipam(json!({})), "IP=10.0.0.2"),
            "the 'ip' field is expected to be in CIDR notation, got: '10.0.0.2'"
        );
        assert_eq!(e(ipam(json!({})), "GATEWAY=x"), "invalid gateway address: x");
        let mut bad_ips = ipam(json!({}));
        bad_ips["runtimeConfig"] = json!({"ips": ["10.0.0.2"]});
        assert_eq!(
            e(bad_ips, ""),
            "an entry in the 'ips' field is NOT in CIDR notation, got: '10.0.0.2'"
        );
        let two = json!({"cniVersion": "0.2.0", "name": "n", "ipam": {"addresses": [{"address": "10.0.0.2/24"}, {"address": "10.0.1.2/24"}]}});
        assert_eq!(
            e(two, ""),
            "CNI version 0.2.0 does not support more than 1 address per family"
        );
    }
}
