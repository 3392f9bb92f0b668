//! Results in the internal form (spec 1.1.0, the superset of every version), with
//! conversion to and from each spec version's JSON shape.
//!
//! Plugins build a [`CniResult`]; the entry point converts it to the config's `cniVersion`
//! with [`CniResult::to_pretty_json`] right before printing. Parsing has three entries, one
//! per place the Go library reads results, because each treats a missing `cniVersion`
//! differently: [`CniResult::from_json`] (a cached result: 0.1.0), [`CniResult::from_plugin_output`]
//! (a plugin's ADD output: the config's version) and [`CniResult::from_prev_result`]
//! (`prevResult`: parsed with the config version's type).
//!
//! Down-conversion is lossy as in the reference: 0.1.0/0.2.0 keep the first address of each
//! family and the routes of those families; 1.1.0-only fields are not printed for older
//! versions.
use super::json::{self, Fields, Json, Object};
use super::netaddr::{network_of, opt_ip, parse_cidr};
use super::version::{self, go_list, go_quote, Family};
use super::Error;
use ipnetwork::IpNetwork;
use serde::Serialize;
use serde_json::Value;
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

impl IpConfig {
    pub fn is_v4(&self) -> bool {
        self.address.is_ipv4()
    }
}

impl Route {
    /// A route with only `dst` (normalised to its network address) and `gw`.
    pub fn new(dst: IpNetwork, gw: Option<IpAddr>) -> Route {
        Route {
            dst: network_of(dst),
            gw,
            mtu: None,
            advmss: None,
            priority: None,
            table: None,
            scope: None,
        }
    }

    /// The members of a `types.Route` after `dst`, in the order the readers take them: `gw`
    /// (a `net.IP`), then `mtu`, `advmss`, `priority` (0 is unset) and `table`. How a number
    /// is read, and its error worded, is the caller's (a result and the host-local config word
    /// them as their references do); so is `scope`, left unset here.
    pub fn from_members<E>(o: &Fields, dst: IpNetwork, num: impl Fn(&str) -> Result<Option<u32>, E>) -> Result<Route, E>
    where
        E: From<Error>,
    {
        let nonzero = |key: &str| Ok::<_, E>(num(key)?.filter(|n| *n != 0));
        Ok(Route {
            dst,
            gw: opt_ip(o, "gw", "Route.gw")?,
            mtu: nonzero("mtu")?,
            advmss: nonzero("advmss")?,
            priority: nonzero("priority")?,
            table: num("table")?,
            scope: None,
        })
    }
}

impl Dns {
    /// Nothing set (what a result prints as `"dns": {}`).
    pub fn is_empty(&self) -> bool {
        self.nameservers.as_ref().map_or(true, |v| v.is_empty())
            && self.domain.as_ref().map_or(true, |d| d.is_empty())
            && self.search.as_ref().map_or(true, |v| v.is_empty())
            && self.options.as_ref().map_or(true, |v| v.is_empty())
    }

    /// Decode a `types.DNS`, keeping absent (`None`) apart from empty lists (`Some([])`).
    pub fn from_fields(obj: &Fields, path: &str) -> Result<Dns, Error> {
        Ok(Dns {
            nameservers: json::opt_str_list(obj, "nameservers", &format!("{path}.nameservers"))?,
            domain: json::opt_str(obj, "domain", &format!("{path}.domain"))?.map(str::to_string),
            search: json::opt_str_list(obj, "search", &format!("{path}.search"))?,
            options: json::opt_str_list(obj, "options", &format!("{path}.options"))?,
        })
    }
}

// ---- printed shapes, with fields in the order of the Go structs ----

fn is_empty_vec<T>(v: &[T]) -> bool {
    v.is_empty()
}

fn is_none_or_zero(v: &Option<u32>) -> bool {
    matches!(v, None | Some(0))
}

#[derive(Serialize)]
struct DnsOut {
    #[serde(skip_serializing_if = "is_empty_vec")]
    nameservers: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    domain: String,
    #[serde(skip_serializing_if = "is_empty_vec")]
    search: Vec<String>,
    #[serde(skip_serializing_if = "is_empty_vec")]
    options: Vec<String>,
}

impl From<&Dns> for DnsOut {
    fn from(d: &Dns) -> DnsOut {
        DnsOut {
            nameservers: d.nameservers.clone().unwrap_or_default(),
            domain: d.domain.clone().unwrap_or_default(),
            search: d.search.clone().unwrap_or_default(),
            options: d.options.clone().unwrap_or_default(),
        }
    }
}

#[derive(Serialize)]
struct RouteOut {
    dst: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    gw: Option<String>,
    #[serde(skip_serializing_if = "is_none_or_zero")]
    mtu: Option<u32>,
    #[serde(skip_serializing_if = "is_none_or_zero")]
    advmss: Option<u32>,
    #[serde(skip_serializing_if = "is_none_or_zero")]
    priority: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<u8>,
}

impl RouteOut {
    /// The 1.1.0 fields are printed only for 1.1.0 (older versions do not define them).
    fn new(r: &Route, with_v11_fields: bool) -> RouteOut {
        let keep = |v| if with_v11_fields { v } else { None };
        RouteOut {
            dst: network_of(r.dst).to_string(),
            gw: r.gw.map(|g| g.to_string()),
            mtu: keep(r.mtu),
            advmss: keep(r.advmss),
            priority: keep(r.priority),
            table: keep(r.table),
            scope: if with_v11_fields { r.scope } else { None },
        }
    }
}

#[derive(Serialize)]
struct InterfaceV1 {
    name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    mac: String,
    #[serde(skip_serializing_if = "is_none_or_zero")]
    mtu: Option<u32>,
    #[serde(skip_serializing_if = "String::is_empty")]
    sandbox: String,
    #[serde(rename = "socketPath", skip_serializing_if = "String::is_empty")]
    socket_path: String,
    #[serde(rename = "pciID", skip_serializing_if = "String::is_empty")]
    pci_id: String,
}

#[derive(Serialize)]
struct IpV1 {
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<usize>,
    address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<String>,
}

#[derive(Serialize)]
struct ResultV1 {
    #[serde(rename = "cniVersion")]
    cni_version: String,
    #[serde(skip_serializing_if = "is_empty_vec")]
    interfaces: Vec<InterfaceV1>,
    #[serde(skip_serializing_if = "is_empty_vec")]
    ips: Vec<IpV1>,
    #[serde(skip_serializing_if = "is_empty_vec")]
    routes: Vec<RouteOut>,
    dns: DnsOut,
}

#[derive(Serialize)]
struct InterfaceV04 {
    name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    mac: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    sandbox: String,
}

#[derive(Serialize)]
struct IpV04 {
    version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<usize>,
    address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<String>,
}

#[derive(Serialize)]
struct ResultV04 {
    #[serde(rename = "cniVersion")]
    cni_version: String,
    #[serde(skip_serializing_if = "is_empty_vec")]
    interfaces: Vec<InterfaceV04>,
    #[serde(skip_serializing_if = "is_empty_vec")]
    ips: Vec<IpV04>,
    #[serde(skip_serializing_if = "is_empty_vec")]
    routes: Vec<RouteOut>,
    dns: DnsOut,
}

#[derive(Serialize)]
struct IpV02 {
    ip: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<String>,
    #[serde(skip_serializing_if = "is_empty_vec")]
    routes: Vec<RouteOut>,
}

#[derive(Serialize)]
struct ResultV02 {
    #[serde(rename = "cniVersion")]
    cni_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip4: Option<IpV02>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip6: Option<IpV02>,
    dns: DnsOut,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Printed {
    V02(ResultV02),
    V04(ResultV04),
    V1(ResultV1),
}

fn non_empty(s: &Option<String>) -> String {
    s.clone().unwrap_or_default()
}

impl CniResult {
    /// The version this result claims; a result built without one is 1.1.0 (the internal form).
    fn own_version(&self) -> &str {
        if self.cni_version.is_empty() {
            version::CURRENT
        } else {
            &self.cni_version
        }
    }

    /// Convert to the shape of `version` (`""` = 0.1.0), with the reference's conversion
    /// rules and errors (`cannot convert: no valid IP addresses` for 0.1/0.2 without IPs).
    fn to_printed(&self, version: &str) -> Result<Printed, Error> {
        let version = version::normalize(version);
        let family = version::family(version).ok_or_else(|| {
            Error::internal(format!(
                "no converter for CNI result version {} to {version}",
                self.own_version()
            ))
        })?;
        let dns = DnsOut::from(&self.dns);
        Ok(match family {
            Family::V1 => {
                let v11 = version == "1.1.0";
                Printed::V1(ResultV1 {
                    cni_version: version.to_string(),
                    interfaces: self
                        .interfaces
                        .iter()
                        .map(|i| InterfaceV1 {
                            name: i.name.clone(),
                            mac: non_empty(&i.mac),
                            mtu: if v11 { i.mtu } else { None },
                            sandbox: non_empty(&i.sandbox),
                            socket_path: if v11 { non_empty(&i.socket_path) } else { String::new() },
                            pci_id: if v11 { non_empty(&i.pci_id) } else { String::new() },
                        })
                        .collect(),
                    ips: self
                        .ips
                        .iter()
                        .map(|ip| IpV1 {
                            interface: ip.interface,
                            address: ip.address.to_string(),
                            gateway: ip.gateway.map(|g| g.to_string()),
                        })
                        .collect(),
                    routes: self.routes.iter().map(|r| RouteOut::new(r, v11)).collect(),
                    dns,
                })
            }
            Family::V04 => Printed::V04(ResultV04 {
                cni_version: version.to_string(),
                interfaces: self
                    .interfaces
                    .iter()
                    .map(|i| InterfaceV04 {
                        name: i.name.clone(),
                        mac: non_empty(&i.mac),
                        sandbox: non_empty(&i.sandbox),
                    })
                    .collect(),
                ips: self
                    .ips
                    .iter()
                    .map(|ip| IpV04 {
                        version: if ip.is_v4() { "4" } else { "6" },
                        interface: ip.interface,
                        address: ip.address.to_string(),
                        gateway: ip.gateway.map(|g| g.to_string()),
                    })
                    .collect(),
                routes: self.routes.iter().map(|r| RouteOut::new(r, false)).collect(),
                dns,
            }),
            Family::V02 => {
                // the first address of each family; the others do not fit this shape
                let first = |v4: bool| {
                    self.ips.iter().find(|ip| ip.is_v4() == v4).map(|ip| IpV02 {
                        ip: ip.address.to_string(),
                        gateway: ip.gateway.map(|g| g.to_string()),
                        routes: Vec::new(),
                    })
                };
                let (mut ip4, mut ip6) = (first(true), first(false));
                if ip4.is_none() && ip6.is_none() {
                    return Err(Error::internal("cannot convert: no valid IP addresses"));
                }
                for r in &self.routes {
                    let slot = if r.dst.is_ipv4() { &mut ip4 } else { &mut ip6 };
                    if let Some(ipc) = slot {
                        ipc.routes.push(RouteOut::new(r, false));
                    }
                }
                Printed::V02(ResultV02 {
                    cni_version: version.to_string(),
                    ip4,
                    ip6,
                    dns,
                })
            }
        })
    }

    /// The result as JSON in the shape of `version` (a value: key order is not kept).
    pub fn to_json(&self, version: &str) -> Result<Value, Error> {
        // Printed and read back, not `serde_json::to_value`: the result types then have one
        // serialiser in the binary (the printer's), not a second one for `Value`.
        let text = self.to_pretty_json(version)?;
        serde_json::from_slice(text.as_bytes()).map_err(|e| Error::internal(format!("encoding result: {e}")))
    }

    /// The result as the reference prints it: 4-space indented, keys in Go struct order,
    /// no trailing newline.
    pub fn to_pretty_json(&self, version: &str) -> Result<String, Error> {
        let printed = self.to_printed(version)?;
        pretty(&printed)
    }

    /// Parse a result the way Go's `create.CreateFromBytes` does: its own `cniVersion`
    /// picks the shape, and a missing or empty one means 0.1.0.
    pub fn from_json(v: &Json) -> Result<CniResult, Error> {
        let obj = json::as_object(v, "Result")?;
        let declared = json::opt_str(&obj, "cniVersion", "Result.cniVersion")
            .map_err(|e| e.context("decoding version from network config"))?
            .unwrap_or("");
        create(version::normalize(declared), &obj, declared)
    }

    /// Parse a plugin's ADD output as libcni's `fixupResultVersion` does: a missing or empty
    /// `cniVersion` (looked up as a map key, exactly) is the config's (containernetworking/cni#895),
    /// anything else picks its own shape.
    pub fn from_plugin_output(v: &Json, conf_version: &str) -> Result<CniResult, Error> {
        let mut raw = match v {
            Json::Object(m) => m.clone(),
            Json::Null => Object::new(),
            other => {
                return Err(Error::internal(format!(
                    "failed to unmarshal raw result: json: cannot unmarshal {} into Go value of type map[string]interface {{}} result {other}",
                    json::kind(other)
                )))
            }
        };
        let version = match raw.map_get("cniVersion") {
            Some(Json::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                let version = version::normalize(conf_version).to_string();
                raw.insert("cniVersion", Json::from(version.as_str()));
                version
            }
        };
        let raw = raw.marshalled();
        create(&version, &Fields::of(&raw), &version)
    }

    /// Parse a `prevResult` as Go's `version.ParsePrevResult`: a `CNIVersion` map key (that
    /// spelling, exactly) that is absent or `""` becomes the config's version, the map is
    /// marshalled again, and the *config's* version picks the shape; a differing family is
    /// an error (`result type supports [1.0.0 1.1.0] but unmarshalled CNIVersion is "0.4.0"`).
    /// `raw` is the `map[string]interface{}` as decoded (an object, or anything else, which
    /// is no map: nothing is decoded from it).
    pub fn from_prev_result(raw: &Json, conf_version: &str) -> Result<CniResult, Error> {
        let mut raw = raw.as_object().map(Object::marshalled).unwrap_or_default();
        if !matches!(raw.map_get("CNIVersion"), Some(v) if v.as_str() != Some("")) {
            raw.insert("CNIVersion", Json::from(conf_version));
        }
        let raw = raw.marshalled();
        let obj = Fields::of(&raw);
        let declared = json::opt_str(&obj, "cniVersion", "Result.cniVersion")?.unwrap_or_default();
        create(version::normalize(conf_version), &obj, declared)
    }

    /// Parse a `prevResult` as Go's `version.NewResult(conf.CNIVersion, …)` (how the
    /// reference's sbr reads it, after the plugin template): the config's version as written
    /// picks the shape, and nothing fills in a version the result does not declare, so a
    /// prevResult without `cniVersion` is refused (`… but unmarshalled CNIVersion is ""`).
    pub fn from_new_result(raw: &Json, conf_version: &str) -> Result<CniResult, Error> {
        let raw = raw.as_object().map(Object::marshalled).unwrap_or_default();
        let obj = Fields::of(&raw);
        let declared = json::opt_str(&obj, "cniVersion", "Result.cniVersion")?.unwrap_or_default();
        create(conf_version, &obj, declared)
    }
}

/// Serialise with Go's `json.MarshalIndent(v, "", "    ")` layout.
pub(crate) fn pretty<T: Serialize>(v: &T) -> Result<String, Error> {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    v.serialize(&mut ser)
        .map_err(|e| Error::internal(format!("encoding JSON: {e}")))?;
    String::from_utf8(out).map_err(|e| Error::internal(format!("encoding JSON: {e}")))
}

/// Go's `convert.Create`: decode `obj` with the result type of `factory_version`, then
/// require the decoded `cniVersion` to be one that type accepts.
fn create(factory_version: &str, obj: &Fields, declared: &str) -> Result<CniResult, Error> {
    let family = version::family(factory_version)
        .ok_or_else(|| Error::internal(format!("unsupported CNI result version {}", go_quote(factory_version))))?;
    let mut result = match family {
        Family::V1 => decode_listed(obj, true)?,
        Family::V04 => decode_listed(obj, false)?,
        Family::V02 => decode_v02(obj)?,
    };
    let accepted = family.accepted_versions();
    if !accepted.contains(&declared) {
        return Err(Error::internal(format!(
            "result type supports {} but unmarshalled CNIVersion is {}",
            go_list(accepted),
            go_quote(declared)
        )));
    }
    result.cni_version = version::normalize(declared).to_string();
    Ok(result)
}

fn decode_dns(obj: &Fields) -> Result<Dns, Error> {
    match json::opt_object(obj, "dns", "Result.dns", "types.DNS")? {
        None => Ok(Dns::default()),
        Some(dns) => Dns::from_fields(&dns, "Result.dns"),
    }
}

fn decode_interface(v: &Json, with_v11_fields: bool) -> Result<Interface, Error> {
    let o = json::as_object(v, "Result.interfaces")?;
    let s = |key: &str| -> Result<Option<String>, Error> {
        Ok(json::opt_str(&o, key, &format!("Interface.{key}"))?
            .filter(|s| !s.is_empty())
            .map(str::to_string))
    };
    let mut i = Interface {
        name: s("name")?.unwrap_or_default(),
        mac: s("mac")?,
        sandbox: s("sandbox")?,
        ..Interface::default()
    };
    if with_v11_fields {
        i.mtu = json::opt_uint::<u32>(&o, "mtu", "Interface.mtu")?.filter(|m| *m != 0);
        i.socket_path = s("socketPath")?;
        i.pci_id = s("pciID")?;
    }
    Ok(i)
}

fn decode_ip(v: &Json) -> Result<IpConfig, Error> {
    let o = json::as_object(v, "Result.ips")?;
    let address = json::opt_str(&o, "address", "IPConfig.address")?
        .ok_or_else(|| Error::internal("invalid IP configuration: missing address"))?;
    Ok(IpConfig {
        interface: json::nullable_field(&o, "interface", "*int", |v| {
            let n = json::int_of(v, "IPConfig.interface", "int")?;
            usize::try_from(n).map_err(|_| Error::internal(format!("IPConfig.interface: value {n} out of range")))
        })?,
        address: parse_cidr(address)?,
        gateway: opt_ip(&o, "gateway", "IPConfig.gateway")?,
    })
}

fn decode_route(v: &Json) -> Result<Route, Error> {
    let o = json::as_object(v, "Route")?;
    let dst = json::opt_str(&o, "dst", "Route.dst")?.ok_or_else(|| Error::internal("invalid route: missing dst"))?;
    let mut route = Route::from_members(&o, network_of(parse_cidr(dst)?), |key| {
        json::opt_uint::<u32>(&o, key, &format!("Route.{key}"))
    })?;
    route.scope = json::opt_uint::<u8>(&o, "scope", "Route.scope")?;
    Ok(route)
}

fn decode_list<T>(obj: &Fields, key: &str, f: impl Fn(&Json) -> Result<T, Error>) -> Result<Vec<T>, Error> {
    json::opt_array(obj, key, &format!("Result.{key}"))?
        .iter()
        .map(f)
        .collect()
}

/// 0.3.x, 0.4.0 and 1.x share one shape: the per-IP `version` of 0.3/0.4 is implied by the
/// address, and only 1.x interfaces carry the 1.1 fields (mtu, socketPath, pciID).
fn decode_listed(obj: &Fields, interface_1_1_fields: bool) -> Result<CniResult, Error> {
    Ok(CniResult {
        cni_version: String::new(),
        interfaces: decode_list(obj, "interfaces", |v| decode_interface(v, interface_1_1_fields))?,
        ips: decode_list(obj, "ips", decode_ip)?,
        routes: decode_list(obj, "routes", decode_route)?,
        dns: decode_dns(obj)?,
    })
}

/// 0.1.0/0.2.0: `ip4` then `ip6` become `ips`; their routes are concatenated in that order.
fn decode_v02(obj: &Fields) -> Result<CniResult, Error> {
    let mut result = CniResult {
        dns: decode_dns(obj)?,
        ..CniResult::default()
    };
    for key in ["ip4", "ip6"] {
        let Some(ipc) = json::opt_ptr_object(obj, key, &format!("Result.{key}"), "*types020.IPConfig")? else {
            continue;
        };
        let ip = json::opt_str(&ipc, "ip", "IPConfig.ip")?
            .ok_or_else(|| Error::internal(format!("invalid {key} configuration: missing ip")))?;
        result.ips.push(IpConfig {
            interface: None,
            address: parse_cidr(ip)?,
            gateway: opt_ip(&ipc, "gateway", "IPConfig.gateway")?,
        });
        let routes: Vec<Route> = json::opt_array(&ipc, "routes", "IPConfig.routes")?
            .iter()
            .map(decode_route)
            .collect::<Result<_, _>>()?;
        result
            .routes
            .extend(routes.into_iter().map(|r| Route::new(r.dst, r.gw)));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    // The parsers take the document as written; these take the `json!` values of the tests.
    fn from_json(v: &Value) -> Result<CniResult, Error> {
        CniResult::from_json(&Json::from(v))
    }

    fn from_plugin_output(v: &Value, conf_version: &str) -> Result<CniResult, Error> {
        CniResult::from_plugin_output(&Json::from(v), conf_version)
    }

    fn from_prev_result(v: &Value, conf_version: &str) -> Result<CniResult, Error> {
        CniResult::from_prev_result(&Json::from(v), conf_version)
    }

    use super::*;
    use serde_json::json;

    fn net(s: &str) -> IpNetwork {
        parse_cidr(s).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// What a bridge-like plugin returns: two interfaces, dual stack, routes, DNS.
    fn sample() -> CniResult {
        CniResult {
            cni_version: "1.1.0".into(),
            interfaces: vec![
                Interface {
                    name: "cni0".into(),
                    mac: Some("0a:58:0a:01:02:01".into()),
                    ..Default::default()
                },
                Interface {
                    name: "eth0".into(),
                    mac: Some("0a:58:0a:01:02:03".into()),
                    sandbox: Some("/run/netns/x".into()),
                    mtu: Some(1400),
                    socket_path: Some("/sock".into()),
                    pci_id: Some("0000:00:01.0".into()),
                },
            ],
            ips: vec![
                IpConfig {
                    interface: Some(1),
                    address: net("10.1.2.3/24"),
                    gateway: Some(ip("10.1.2.1")),
                },
                IpConfig {
                    interface: Some(1),
                    address: net("2001:db8::3/64"),
                    gateway: Some(ip("2001:db8::1")),
                },
            ],
            routes: vec![
                Route::new(net("0.0.0.0/0"), None),
                Route {
                    mtu: Some(1300),
                    advmss: Some(1200),
                    priority: Some(10),
                    table: Some(0),
                    scope: Some(253),
                    ..Route::new(net("10.9.0.0/16"), Some(ip("10.1.2.9")))
                },
                Route::new(net("::/0"), Some(ip("2001:db8::1"))),
            ],
            dns: Dns {
                nameservers: Some(vec!["10.1.2.1".into()]),
                domain: Some("example.com".into()),
                search: Some(vec![]),
                options: None,
            },
        }
    }

    /// types100_test.go's `testResult()`.
    fn go_test_result() -> CniResult {
        CniResult {
            cni_version: "1.1.0".into(),
            interfaces: vec![Interface {
                name: "eth0".into(),
                mac: Some("00:11:22:33:44:55".into()),
                sandbox: Some("/proc/3553/ns/net".into()),
                pci_id: Some("8086:9a01".into()),
                socket_path: Some("/path/to/vhost/fd".into()),
                mtu: None,
            }],
            ips: vec![
                IpConfig {
                    interface: Some(0),
                    address: net("1.2.3.30/24"),
                    gateway: Some(ip("1.2.3.1")),
                },
                IpConfig {
                    interface: Some(0),
                    address: net("abcd:1234:ffff::cdde/64"),
                    gateway: Some(ip("abcd:1234:ffff::1")),
                },
            ],
            routes: vec![
                Route::new(net("15.5.6.8/24"), Some(ip("15.5.6.8"))),
                Route::new(net("1111:dddd::aaaa/80"), Some(ip("1111:dddd::aaaa"))),
            ],
            dns: Dns {
                nameservers: Some(vec!["1.2.3.4".into(), "1::cafe".into()]),
                domain: Some("acompany.com".into()),
                search: Some(vec!["somedomain.com".into(), "otherdomain.net".into()]),
                options: Some(vec!["foo".into(), "bar".into()]),
            },
        }
    }

    fn go_test_dns() -> Value {
        json!({
            "nameservers": ["1.2.3.4", "1::cafe"],
            "domain": "acompany.com",
            "search": ["somedomain.com", "otherdomain.net"],
            "options": ["foo", "bar"]
        })
    }

    #[test]
    fn go_types100_encodings() {
        let r = go_test_result();
        assert_eq!(
            r.to_json("1.1.0").unwrap(),
            json!({
                "cniVersion": "1.1.0",
                "interfaces": [{"name": "eth0", "mac": "00:11:22:33:44:55", "sandbox": "/proc/3553/ns/net",
                                "pciID": "8086:9a01", "socketPath": "/path/to/vhost/fd"}],
                "ips": [
                    {"interface": 0, "address": "1.2.3.30/24", "gateway": "1.2.3.1"},
                    {"interface": 0, "address": "abcd:1234:ffff::cdde/64", "gateway": "abcd:1234:ffff::1"}
                ],
                "routes": [
                    {"dst": "15.5.6.0/24", "gw": "15.5.6.8"},
                    {"dst": "1111:dddd::/80", "gw": "1111:dddd::aaaa"}
                ],
                "dns": go_test_dns()
            })
        );
        assert_eq!(
            r.to_json("0.4.0").unwrap(),
            json!({
                "cniVersion": "0.4.0",
                "interfaces": [{"name": "eth0", "mac": "00:11:22:33:44:55", "sandbox": "/proc/3553/ns/net"}],
                "ips": [
                    {"interface": 0, "version": "4", "address": "1.2.3.30/24", "gateway": "1.2.3.1"},
                    {"interface": 0, "version": "6", "address": "abcd:1234:ffff::cdde/64", "gateway": "abcd:1234:ffff::1"}
                ],
                "routes": [
                    {"dst": "15.5.6.0/24", "gw": "15.5.6.8"},
                    {"dst": "1111:dddd::/80", "gw": "1111:dddd::aaaa"}
                ],
                "dns": go_test_dns()
            })
        );
        assert_eq!(
            r.to_json("0.1.0").unwrap(),
            json!({
                "cniVersion": "0.1.0",
                "ip4": {"ip": "1.2.3.30/24", "gateway": "1.2.3.1", "routes": [{"dst": "15.5.6.0/24", "gw": "15.5.6.8"}]},
                "ip6": {"ip": "abcd:1234:ffff::cdde/64", "gateway": "abcd:1234:ffff::1",
                        "routes": [{"dst": "1111:dddd::/80", "gw": "1111:dddd::aaaa"}]},
                "dns": go_test_dns()
            })
        );
        // 1.0.0 is 1.1.0 without the fields 1.0.0 does not define
        let mut v = r.to_json("1.1.0").unwrap();
        v["cniVersion"] = json!("1.0.0");
        v["interfaces"][0]
            .as_object_mut()
            .unwrap()
            .retain(|k, _| k != "pciID" && k != "socketPath");
        assert_eq!(r.to_json("1.0.0").unwrap(), v);
    }

    #[test]
    fn v110_keeps_everything_in_go_order() {
        let text = sample().to_pretty_json("1.1.0").unwrap();
        let expected = r#"{
    "cniVersion": "1.1.0",
    "interfaces": [
        {
            "name": "cni0",
            "mac": "0a:58:0a:01:02:01"
        },
        {
            "name": "eth0",
            "mac": "0a:58:0a:01:02:03",
            "mtu": 1400,
            "sandbox": "/run/netns/x",
            "socketPath": "/sock",
            "pciID": "0000:00:01.0"
        }
    ],
    "ips": [
        {
            "interface": 1,
            "address": "10.1.2.3/24",
            "gateway": "10.1.2.1"
        },
        {
            "interface": 1,
            "address": "2001:db8::3/64",
            "gateway": "2001:db8::1"
        }
    ],
    "routes": [
        {
            "dst": "0.0.0.0/0"
        },
        {
            "dst": "10.9.0.0/16",
            "gw": "10.1.2.9",
            "mtu": 1300,
            "advmss": 1200,
            "priority": 10,
            "table": 0,
            "scope": 253
        },
        {
            "dst": "::/0",
            "gw": "2001:db8::1"
        }
    ],
    "dns": {
        "nameservers": [
            "10.1.2.1"
        ],
        "domain": "example.com"
    }
}"#;
        assert_eq!(text, expected);
    }

    #[test]
    fn v100_drops_the_11_fields() {
        let v = sample().to_json("1.0.0").unwrap();
        assert_eq!(
            v,
            json!({
                "cniVersion": "1.0.0",
                "interfaces": [
                    {"name": "cni0", "mac": "0a:58:0a:01:02:01"},
                    {"name": "eth0", "mac": "0a:58:0a:01:02:03", "sandbox": "/run/netns/x"}
                ],
                "ips": [
                    {"interface": 1, "address": "10.1.2.3/24", "gateway": "10.1.2.1"},
                    {"interface": 1, "address": "2001:db8::3/64", "gateway": "2001:db8::1"}
                ],
                "routes": [
                    {"dst": "0.0.0.0/0"},
                    {"dst": "10.9.0.0/16", "gw": "10.1.2.9"},
                    {"dst": "::/0", "gw": "2001:db8::1"}
                ],
                "dns": {"nameservers": ["10.1.2.1"], "domain": "example.com"}
            })
        );
    }

    #[test]
    fn v04x_adds_ip_versions() {
        for ver in ["0.3.0", "0.3.1", "0.4.0"] {
            let text = sample().to_pretty_json(ver).unwrap();
            assert!(
                text.starts_with(&format!("{{\n    \"cniVersion\": \"{ver}\",\n    \"interfaces\": [")),
                "{text}"
            );
            assert!(text.contains("{\n            \"version\": \"4\",\n            \"interface\": 1,\n            \"address\": \"10.1.2.3/24\""), "{text}");
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v, sample().to_json(ver).unwrap());
            assert_eq!(
                v,
                json!({
                    "cniVersion": ver,
                    "interfaces": [
                        {"name": "cni0", "mac": "0a:58:0a:01:02:01"},
                        {"name": "eth0", "mac": "0a:58:0a:01:02:03", "sandbox": "/run/netns/x"}
                    ],
                    "ips": [
                        {"version": "4", "interface": 1, "address": "10.1.2.3/24", "gateway": "10.1.2.1"},
                        {"version": "6", "interface": 1, "address": "2001:db8::3/64", "gateway": "2001:db8::1"}
                    ],
                    "routes": [
                        {"dst": "0.0.0.0/0"},
                        {"dst": "10.9.0.0/16", "gw": "10.1.2.9"},
                        {"dst": "::/0", "gw": "2001:db8::1"}
                    ],
                    "dns": {"nameservers": ["10.1.2.1"], "domain": "example.com"}
                })
            );
        }
    }

    #[test]
    fn v02x_exact_bytes_like_host_local() {
        // the shape Debian's host-local 1.1.1 prints for a dual-stack 0.2.0 ADD
        let r = CniResult {
            ips: vec![
                IpConfig {
                    interface: None,
                    address: net("10.1.2.3/24"),
                    gateway: Some(ip("10.1.2.1")),
                },
                IpConfig {
                    interface: None,
                    address: net("2001:db8::3/64"),
                    gateway: Some(ip("2001:db8::1")),
                },
            ],
            routes: vec![
                Route::new(net("0.0.0.0/0"), None),
                Route::new(net("10.9.0.0/16"), Some(ip("10.1.2.9"))),
            ],
            ..CniResult::default()
        };
        let expected = r#"{
    "cniVersion": "0.2.0",
    "ip4": {
        "ip": "10.1.2.3/24",
        "gateway": "10.1.2.1",
        "routes": [
            {
                "dst": "0.0.0.0/0"
            },
            {
                "dst": "10.9.0.0/16",
                "gw": "10.1.2.9"
            }
        ]
    },
    "ip6": {
        "ip": "2001:db8::3/64",
        "gateway": "2001:db8::1"
    },
    "dns": {}
}"#;
        assert_eq!(r.to_pretty_json("0.2.0").unwrap(), expected);
        assert_eq!(r.to_pretty_json("0.1.0").unwrap(), expected.replace("0.2.0", "0.1.0"));
        // "" is 0.1.0
        assert_eq!(r.to_pretty_json("").unwrap(), expected.replace("0.2.0", "0.1.0"));
    }

    #[test]
    fn v02x_keeps_first_ip_per_family_and_routes_by_family() {
        let mut r = sample();
        r.ips.push(IpConfig {
            interface: Some(1),
            address: net("10.1.3.3/24"),
            gateway: None,
        });
        r.ips.insert(
            0,
            IpConfig {
                interface: None,
                address: net("2001:db8:1::9/64"),
                gateway: None,
            },
        );
        let v = r.to_json("0.2.0").unwrap();
        assert_eq!(
            v,
            json!({
                "cniVersion": "0.2.0",
                "ip4": {"ip": "10.1.2.3/24", "gateway": "10.1.2.1",
                        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "10.9.0.0/16", "gw": "10.1.2.9"}]},
                "ip6": {"ip": "2001:db8:1::9/64", "routes": [{"dst": "::/0", "gw": "2001:db8::1"}]},
                "dns": {"nameservers": ["10.1.2.1"], "domain": "example.com"}
            })
        );
        // routes of a family with no address are dropped
        r.ips.retain(|i| i.is_v4());
        let v = r.to_json("0.1.0").unwrap();
        assert!(v.get("ip6").is_none());
        assert_eq!(v["ip4"]["routes"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn v02x_without_ips_cannot_convert() {
        let r = CniResult {
            interfaces: vec![Interface {
                name: "eth0".into(),
                ..Default::default()
            }],
            ..CniResult::default()
        };
        for ver in ["0.1.0", "0.2.0", ""] {
            let e = r.to_json(ver).unwrap_err();
            assert_eq!((e.code, e.msg.as_str()), (999, "cannot convert: no valid IP addresses"));
        }
        // the other shapes are fine without addresses
        for ver in ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
            assert_eq!(
                r.to_json(ver).unwrap(),
                json!({"cniVersion": ver, "interfaces": [{"name": "eth0"}], "dns": {}})
            );
        }
    }

    #[test]
    fn empty_result_prints_empty_dns() {
        let r = CniResult::default();
        assert_eq!(
            r.to_pretty_json("1.0.0").unwrap(),
            "{\n    \"cniVersion\": \"1.0.0\",\n    \"dns\": {}\n}"
        );
    }

    #[test]
    fn interface_index_zero_is_printed() {
        let r = CniResult {
            interfaces: vec![Interface {
                name: "eth0".into(),
                ..Default::default()
            }],
            ips: vec![IpConfig {
                interface: Some(0),
                address: net("10.0.0.2/8"),
                gateway: None,
            }],
            ..Default::default()
        };
        assert_eq!(
            r.to_json("1.0.0").unwrap()["ips"][0],
            json!({"interface": 0, "address": "10.0.0.2/8"})
        );
    }

    #[test]
    fn unknown_target_version() {
        let e = sample().to_json("9.9.9").unwrap_err();
        assert_eq!(e.msg, "no converter for CNI result version 1.1.0 to 9.9.9");
    }

    #[test]
    fn route_dst_is_normalised_and_addresses_keep_host_bits() {
        let r = CniResult {
            ips: vec![IpConfig {
                interface: None,
                address: net("10.1.2.3/24"),
                gateway: None,
            }],
            routes: vec![Route {
                gw: None,
                ..Route::new(net("10.9.9.9/16"), None)
            }],
            ..Default::default()
        };
        let v = r.to_json("1.0.0").unwrap();
        assert_eq!(v["ips"][0]["address"], "10.1.2.3/24");
        assert_eq!(v["routes"][0]["dst"], "10.9.0.0/16");
        // also when the plugin built the route without the constructor
        let raw = CniResult {
            routes: vec![Route {
                dst: net("192.168.7.7/24"),
                ..Route::new(net("0.0.0.0/0"), None)
            }],
            ..r
        };
        assert_eq!(raw.to_json("1.1.0").unwrap()["routes"][0]["dst"], "192.168.7.0/24");
        let parsed = from_json(&json!({"cniVersion": "1.0.0", "routes": [{"dst": "10.9.9.9/16"}]})).unwrap();
        assert_eq!(parsed.routes[0].dst, net("10.9.0.0/16"));
    }

    #[test]
    fn roundtrip_every_version_pair() {
        // 1.1.0 internal -> any version -> parse -> the same version again is stable
        for ver in version::SUPPORTED {
            let printed = sample().to_json(ver).unwrap();
            let parsed = from_json(&printed).unwrap();
            assert_eq!(parsed.cni_version, *ver);
            assert_eq!(parsed.to_json(ver).unwrap(), printed, "{ver}");
            for to in version::SUPPORTED {
                let a = parsed.to_json(to).unwrap();
                let b = from_json(&a).unwrap().to_json(to).unwrap();
                assert_eq!(a, b, "{ver} -> {to}");
            }
        }
    }

    #[test]
    fn up_conversion_from_02x() {
        let v02 = json!({
            "cniVersion": "0.2.0",
            "ip4": {"ip": "10.1.2.3/24", "gateway": "10.1.2.1", "routes": [{"dst": "0.0.0.0/0"}]},
            "ip6": {"ip": "2001:db8::3/64", "routes": [{"dst": "::/0", "gw": "2001:db8::1"}]},
            "dns": {"nameservers": ["1.1.1.1"]}
        });
        let r = from_json(&v02).unwrap();
        assert_eq!(r.cni_version, "0.2.0");
        assert_eq!(
            r.to_json("0.4.0").unwrap(),
            json!({
                "cniVersion": "0.4.0",
                "ips": [
                    {"version": "4", "address": "10.1.2.3/24", "gateway": "10.1.2.1"},
                    {"version": "6", "address": "2001:db8::3/64"}
                ],
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0", "gw": "2001:db8::1"}],
                "dns": {"nameservers": ["1.1.1.1"]}
            })
        );
        assert_eq!(
            r.to_json("1.1.0").unwrap(),
            json!({
                "cniVersion": "1.1.0",
                "ips": [
                    {"address": "10.1.2.3/24", "gateway": "10.1.2.1"},
                    {"address": "2001:db8::3/64"}
                ],
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0", "gw": "2001:db8::1"}],
                "dns": {"nameservers": ["1.1.1.1"]}
            })
        );
    }

    #[test]
    fn up_conversion_from_04x_drops_version_field() {
        let v04 = json!({
            "cniVersion": "0.3.1",
            "interfaces": [{"name": "eth0", "mac": "aa:bb:cc:dd:ee:ff", "sandbox": "/x", "mtu": 9000}],
            "ips": [{"version": "4", "interface": 0, "address": "10.1.2.3/24", "gateway": "10.1.2.1"}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}],
            "dns": {}
        });
        let r = from_json(&v04).unwrap();
        // a 0.3/0.4 interface has no mtu: it is not carried over
        assert_eq!(r.interfaces[0].mtu, None);
        assert_eq!(
            r.to_json("1.1.0").unwrap(),
            json!({
                "cniVersion": "1.1.0",
                "interfaces": [{"name": "eth0", "mac": "aa:bb:cc:dd:ee:ff", "sandbox": "/x"}],
                "ips": [{"interface": 0, "address": "10.1.2.3/24", "gateway": "10.1.2.1"}],
                "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}],
                "dns": {}
            })
        );
    }

    #[test]
    fn from_json_missing_version_is_0_1_0() {
        let r = from_json(&json!({"ip4": {"ip": "10.0.0.2/8"}})).unwrap();
        assert_eq!(r.cni_version, "0.1.0");
        assert_eq!(r.ips[0].address, net("10.0.0.2/8"));
        // a 1.x-shaped body without version is read as 0.1.0 and yields nothing usable
        let r = from_json(&json!({"ips": [{"address": "10.0.0.2/8"}]})).unwrap();
        assert!(r.ips.is_empty());
    }

    #[test]
    fn from_plugin_output_missing_version_is_the_configs() {
        let out = json!({"ips": [{"address": "10.0.0.2/8", "gateway": "10.0.0.1"}], "dns": {}});
        let r = from_plugin_output(&out, "1.0.0").unwrap();
        assert_eq!(r.cni_version, "1.0.0");
        assert_eq!(r.ips.len(), 1);
        let r = from_plugin_output(
            &json!({"cniVersion": "", "ips": [{"version": "4", "address": "10.0.0.2/8"}]}),
            "0.4.0",
        )
        .unwrap();
        assert_eq!((r.cni_version.as_str(), r.ips.len()), ("0.4.0", 1));
        // a declared version wins over the config's
        let r = from_plugin_output(&json!({"cniVersion": "0.2.0", "ip4": {"ip": "10.0.0.2/8"}}), "1.0.0").unwrap();
        assert_eq!(r.cni_version, "0.2.0");
        // null is an empty result
        let r = from_plugin_output(&Value::Null, "1.1.0").unwrap();
        assert_eq!(
            r,
            CniResult {
                cni_version: "1.1.0".into(),
                ..Default::default()
            }
        );
        let e = from_plugin_output(&json!([1]), "1.1.0").unwrap_err();
        assert!(e.msg.starts_with("failed to unmarshal raw result: "), "{}", e.msg);
        let e = from_plugin_output(&json!({"cniVersion": "7.0.0"}), "1.1.0").unwrap_err();
        assert_eq!(e.msg, r#"unsupported CNI result version "7.0.0""#);
    }

    #[test]
    fn prev_result_family_rules() {
        let v040 = json!({"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "10.0.0.2/8"}]});
        let e = from_prev_result(&v040, "1.0.0").unwrap_err();
        assert_eq!(
            e.msg,
            r#"result type supports [1.0.0 1.1.0] but unmarshalled CNIVersion is "0.4.0""#
        );
        // same family: accepted
        let r = from_prev_result(&v040, "0.3.1").unwrap();
        assert_eq!(r.cni_version, "0.4.0");
        let v110 = json!({"cniVersion": "1.1.0", "ips": [{"address": "10.0.0.2/8"}]});
        assert_eq!(from_prev_result(&v110, "1.0.0").unwrap().ips.len(), 1);
        let e = from_prev_result(&v110, "0.4.0").unwrap_err();
        assert_eq!(
            e.msg,
            r#"result type supports [0.3.0 0.3.1 0.4.0] but unmarshalled CNIVersion is "1.1.0""#
        );
        let e = from_prev_result(&v110, "0.2.0").unwrap_err();
        assert_eq!(
            e.msg,
            r#"result type supports [ 0.1.0 0.2.0] but unmarshalled CNIVersion is "1.1.0""#
        );
        // missing version: the config's
        let bare = json!({"ips": [{"address": "10.0.0.2/8"}]});
        let r = from_prev_result(&bare, "1.1.0").unwrap();
        assert_eq!((r.cni_version.as_str(), r.ips.len()), ("1.1.0", 1));
        // an explicit "" is kept (and only 0.1/0.2 accept it)
        let empty = json!({"cniVersion": "", "ips": []});
        let e = from_prev_result(&empty, "1.0.0").unwrap_err();
        assert_eq!(
            e.msg,
            r#"result type supports [1.0.0 1.1.0] but unmarshalled CNIVersion is """#
        );
        assert!(from_prev_result(&json!({"cniVersion": "", "ip4": {"ip": "10.0.0.2/8"}}), "0.2.0").is_ok());
    }

    #[test]
    fn parse_errors() {
        let cases = [
            (json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2"}]}), "invalid CIDR address: 10.0.0.2"),
            (json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2/33"}]}), "invalid CIDR address: 10.0.0.2/33"),
            (json!({"cniVersion": "1.0.0", "ips": [{"address": "x/8"}]}), "invalid CIDR address: x/8"),
            (json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2/8", "gateway": "nope"}]}), "invalid IP address: nope"),
            (json!({"cniVersion": "1.0.0", "ips": [{}]}), "invalid IP configuration: missing address"),
            (json!({"cniVersion": "1.0.0", "routes": [{"gw": "10.0.0.1"}]}), "invalid route: missing dst"),
            (json!({"cniVersion": "1.0.0", "routes": [{"dst": "0.0.0.0/0", "mtu": "x"}]}), "json: cannot unmarshal string into Go struct field Route.mtu of type int"),
            (json!({"cniVersion": "1.0.0", "ips": {"a": 1}}), "json: cannot unmarshal object into Go struct field Result.ips of type []"),
            (json!({"cniVersion": "1.0.0", "dns": {"nameservers": "1.1.1.1"}}), "json: cannot unmarshal string into Go struct field Result.dns.nameservers of type []string"),
            (json!({"cniVersion": "0.2.0", "ip4": {"gateway": "10.0.0.1"}}), "invalid ip4 configuration: missing ip"),
            (json!({"cniVersion": 1}), "decoding version from network config: json: cannot unmarshal number into Go struct field Result.cniVersion of type string"),
            (json!({"cniVersion": "0.5.0"}), r#"unsupported CNI result version "0.5.0""#),
        ];
        for (input, msg) in cases {
            let e = from_json(&input).unwrap_err();
            assert_eq!((e.code, e.msg.as_str()), (999, msg), "{input}");
        }
    }

    #[test]
    fn parse_keeps_11_fields() {
        let v = json!({
            "cniVersion": "1.1.0",
            "interfaces": [{"name": "eth0", "mtu": 1500, "socketPath": "/s", "pciID": "p"}],
            "routes": [{"dst": "10.0.0.0/8", "table": 100, "scope": 0, "mtu": 0}],
            "ips": [], "unknown": {"x": 1}
        });
        let r = from_json(&v).unwrap();
        assert_eq!(r.interfaces[0].mtu, Some(1500));
        assert_eq!(r.interfaces[0].socket_path.as_deref(), Some("/s"));
        assert_eq!(r.interfaces[0].pci_id.as_deref(), Some("p"));
        assert_eq!(
            (r.routes[0].table, r.routes[0].scope, r.routes[0].mtu),
            (Some(100), Some(0), None)
        );
        assert_eq!(
            r.to_json("1.1.0").unwrap()["routes"][0],
            json!({"dst": "10.0.0.0/8", "table": 100, "scope": 0})
        );
    }

    #[test]
    fn ipv4_mapped_gateway_is_canonical() {
        assert_eq!(
            crate::cni::netaddr::parse_ip_text("::ffff:10.0.0.1").unwrap(),
            Some(ip("10.0.0.1"))
        );
        assert_eq!(crate::cni::netaddr::parse_ip_text("").unwrap(), None);
    }

    #[test]
    fn route_members_zero_is_unset_but_table_zero_is_kept() {
        let doc = Json::from(json!({"gw": "", "mtu": 0, "advmss": 1400, "priority": 0, "table": 0, "scope": 253}));
        let o = json::as_object(&doc, "Route").unwrap();
        let r = Route::from_members(&o, net("10.0.0.0/8"), |key| {
            json::opt_uint::<u32>(&o, key, &format!("Route.{key}"))
        })
        .unwrap();
        assert_eq!(
            (r.gw, r.mtu, r.advmss, r.priority, r.table, r.scope),
            (None, None, Some(1400), None, Some(0), None)
        );
        let doc = Json::from(json!({"gw": "nope", "mtu": "x"}));
        let bad = json::as_object(&doc, "Route").unwrap();
        let e = Route::from_members(&bad, net("10.0.0.0/8"), |key| {
            json::opt_uint::<u32>(&bad, key, &format!("Route.{key}"))
        })
        .unwrap_err();
        assert_eq!(e.msg, "invalid IP address: nope");
    }

    #[test]
    fn dns_absent_vs_empty() {
        let doc = Json::from(json!({"nameservers": [], "domain": ""}));
        let d = Dns::from_fields(&json::as_object(&doc, "dns").unwrap(), "dns").unwrap();
        assert_eq!(d.nameservers, Some(vec![]));
        assert_eq!(d.search, None);
        assert_eq!(d.domain.as_deref(), Some(""));
        assert!(d.is_empty());
        assert!(!Dns {
            options: Some(vec!["ndots:2".into()]),
            ..Default::default()
        }
        .is_empty());
    }
}
