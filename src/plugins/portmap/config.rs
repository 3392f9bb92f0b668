//! portmap's config: the keys of the reference's `PortMapConf`, the `portMappings`
//! capability, the backend choice and the container addresses taken from `prevResult`.
//!
//! Every error is prefixed `failed to parse config: ` and has code 999, as the reference's.
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::json::Fields;
use crate::cni::{CniResult, Error, Request};
use crate::netlink::nftables::shapes::portmap::{self as nft_shape, Conditions};
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// Kubernetes uses bits 14 and 15, Calico 20-31 (the reference's `DefaultMarkBit`).
pub const DEFAULT_MARK_BIT: u32 = 13;

/// Where the rules go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Nftables,
    Iptables,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Nftables => "nftables",
            Backend::Iptables => "iptables",
        }
    }
}

/// Transport protocols a mapping can forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// Lower case, as iptables-save prints it and as nft's syntax needs it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }

    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Sctp => 132,
        }
    }

    pub fn from_number(n: u8) -> Option<Protocol> {
        [Protocol::Tcp, Protocol::Udp, Protocol::Sctp]
            .into_iter()
            .find(|p| p.number() == n)
    }

    pub(super) fn parse(s: &str) -> Option<Protocol> {
        // iptables takes any case; the reference passes the string through.
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Some(Protocol::Tcp),
            "udp" => Some(Protocol::Udp),
            "sctp" => Some(Protocol::Sctp),
            _ => None,
        }
    }
}

/// One entry of `runtimeConfig.portMappings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: Protocol,
    /// `None` for `""`: every local address of both families.
    pub host_ip: Option<IpAddr>,
}

impl PortMapping {
    /// Whether the mapping applies to the container address family `v6`: a host IP of the
    /// other family is skipped, as in the reference.
    pub fn applies_to(&self, v6: bool) -> bool {
        self.host_ip.map_or(true, |ip| ip.is_ipv6() == v6)
    }

    /// The destination the rules match on: none for no host IP and for `0.0.0.0`/`::`
    /// (an unspecified address cannot be a destination).
    pub fn dest(&self) -> Option<IpAddr> {
        self.host_ip.filter(|ip| !ip.is_unspecified())
    }
}

/// The plugin's config.
#[derive(Debug, Clone)]
pub struct Conf {
    pub backend: Backend,
    pub snat: bool,
    /// Masquerade forwarded traffic from any source, not only hairpin and localhost (the
    /// current reference's `masqAll`).
    pub masq_all: bool,
    pub mark_masq_bit: u32,
    pub external_set_mark_chain: Option<String>,
    pub conditions_v4: Vec<String>,
    pub conditions_v6: Vec<String>,
    /// The conditions parsed for the nftables backend (empty with iptables), so a bad
    /// one fails in loading, before anything changes.
    pub nft_conditions_v4: Conditions,
    pub nft_conditions_v6: Conditions,
    pub mappings: Vec<PortMapping>,
    /// The container's first IPv4 and IPv6 address on `CNI_IFNAME` (from prevResult).
    pub container_v4: Option<IpNetwork>,
    pub container_v6: Option<IpNetwork>,
}

impl Conf {
    pub fn conditions(&self, v6: bool) -> &[String] {
        if v6 {
            &self.conditions_v6
        } else {
            &self.conditions_v4
        }
    }

    pub fn nft_conditions(&self, v6: bool) -> &Conditions {
        if v6 {
            &self.nft_conditions_v6
        } else {
            &self.nft_conditions_v4
        }
    }

    /// The container addresses, IPv4 first (the reference's order of work).
    pub fn container_ips(&self) -> impl Iterator<Item = IpNetwork> + '_ {
        self.container_v4.into_iter().chain(self.container_v6)
    }
}

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::internal(format!("failed to parse config: {msg}"))
}

fn decode(e: Error) -> Error {
    e.context("failed to parse config: failed to parse network configuration")
}

/// Reads the config. `nf_tables` says whether the kernel has nf_tables (asked only when
/// the backend is not given and nothing in the config decides it).
pub fn load(req: &Request, nf_tables: &dyn Fn() -> bool) -> Result<(Conf, Option<CniResult>), Error> {
    cniconf::check_net_conf(&req.config, "PortMapConf").map_err(decode)?;
    let obj = json::as_object(&req.config, "PortMapConf").map_err(decode)?;
    let field = |k: &str| format!("PortMapConf.{k}");
    let backend = json::opt_ptr_str(&obj, "backend", &field("backend")).map_err(decode)?;
    let snat = json::opt_ptr_bool(&obj, "snat", &field("snat")).map_err(decode)?;
    let masq_all = json::opt_bool(&obj, "masqAll", &field("masqAll")).map_err(decode)?;
    let mark = json::opt_ptr_int(&obj, "markMasqBit", &field("markMasqBit")).map_err(decode)?;
    let external = json::opt_ptr_str(&obj, "externalSetMarkChain", &field("externalSetMarkChain")).map_err(decode)?;
    let cond4 = json::opt_str_list(&obj, "conditionsV4", &field("conditionsV4")).map_err(decode)?;
    let cond6 = json::opt_str_list(&obj, "conditionsV6", &field("conditionsV6")).map_err(decode)?;
    let mappings = mappings(&obj)?;
    let prev = cniconf::prev_result(req).map_err(|e| match e.msg.starts_with("could not parse prevResult: json") {
        // a prevResult of the wrong JSON type fails in the first decode, as in Go
        true => decode(Error::internal(
            e.msg
                .trim_start_matches("could not parse prevResult: ")
                .replace("Go struct field NetConf.", "Go struct field PortMapConf."),
        )),
        false => e,
    })?;

    if mark.is_some() && external.is_some() {
        return Err(bad("Cannot specify externalSetMarkChain and markMasqBit"));
    }
    let mark_masq_bit = match mark {
        None => DEFAULT_MARK_BIT,
        Some(b @ 0..=31) => b as u32,
        Some(_) => return Err(bad("MasqMarkBit must be between 0 and 31")),
    };
    let backend = choose_backend(
        backend,
        external.is_some(),
        cond4.as_deref(),
        cond6.as_deref(),
        nf_tables,
    )?;
    let (conditions_v4, conditions_v6) = (nonempty_conditions(cond4), nonempty_conditions(cond6));
    let (nft_conditions_v4, nft_conditions_v6) = match backend {
        Backend::Nftables => (
            nft_conditions(false, &conditions_v4)?,
            nft_conditions(true, &conditions_v6)?,
        ),
        Backend::Iptables => Default::default(),
    };
    let (container_v4, container_v6) = match &prev {
        Some(prev) => container_ips(prev, &req.ifname),
        None => (None, None),
    };
    Ok((
        Conf {
            backend,
            snat: snat.unwrap_or(true),
            masq_all: masq_all.unwrap_or(false),
            mark_masq_bit,
            external_set_mark_chain: external.map(str::to_string),
            conditions_v4,
            conditions_v6,
            nft_conditions_v4,
            nft_conditions_v6,
            mappings,
            container_v4,
            container_v6,
        },
        prev,
    ))
}

/// `[""]` and `[]` both mean no conditions (the reference ignores a list whose first
/// entry is empty when detecting its backend; iptables drops empty words).
fn nonempty_conditions(c: Option<Vec<String>>) -> Vec<String> {
    c.unwrap_or_default().into_iter().filter(|w| !w.is_empty()).collect()
}

/// `conditionsV4`/`conditionsV6` as the nftables backend's match expressions.
fn nft_conditions(v6: bool, words: &[String]) -> Result<Conditions, Error> {
    let key = if v6 { "conditionsV6" } else { "conditionsV4" };
    Conditions::parse(nft_shape::family(v6), words).map_err(|e| bad(format!("{key}: {e}")))
}

fn mappings(obj: &Fields) -> Result<Vec<PortMapping>, Error> {
    let Some(rc) = json::opt_object(
        obj,
        "runtimeConfig",
        "PortMapConf.runtimeConfig",
        r#"struct { PortMaps []main.PortMapEntry "json:\"portMappings,omitempty\"" }"#,
    )
    .map_err(decode)?
    else {
        return Ok(vec![]);
    };
    let path = |k: &str| format!("PortMapEntry.runtimeConfig.portMappings.{k}");
    let mut out = vec![];
    // Go names the innermost struct and the whole path: the anonymous runtimeConfig struct
    // has no name
    let list = json::opt_list(
        &rc,
        "portMappings",
        ".runtimeConfig.portMappings",
        "[]main.PortMapEntry",
    )
    .map_err(decode)?
    .unwrap_or_default();
    for entry in list {
        let e = json::as_struct(entry, ".runtimeConfig.portMappings", "main.PortMapEntry").map_err(decode)?;
        let host_port = json::opt_int(&e, "hostPort", &path("hostPort"))
            .map_err(decode)?
            .unwrap_or(0);
        let container_port = json::opt_int(&e, "containerPort", &path("containerPort"))
            .map_err(decode)?
            .unwrap_or(0);
        let protocol = json::opt_str(&e, "protocol", &path("protocol"))
            .map_err(decode)?
            .unwrap_or("");
        let host_ip = json::opt_str(&e, "hostIP", &path("hostIP"))
            .map_err(decode)?
            .unwrap_or("");
        out.push((host_port, container_port, protocol.to_string(), host_ip.to_string()));
    }
    // The reference checks every container port and host port before anything else.
    for (host, cont, _, _) in &out {
        if *cont <= 0 {
            return Err(bad(format!("Invalid container port number: {cont}")));
        }
        if *host <= 0 {
            return Err(bad(format!("Invalid host port number: {host}")));
        }
    }
    out.into_iter()
        .map(|(host, cont, proto, ip)| {
            // Above 65535 the reference fails in iptables ("invalid port/service") after
            // creating chains; here nothing is touched.
            let host_port = u16::try_from(host).map_err(|_| bad(format!("Invalid host port number: {host}")))?;
            let container_port =
                u16::try_from(cont).map_err(|_| bad(format!("Invalid container port number: {cont}")))?;
            let protocol = Protocol::parse(&proto).ok_or_else(|| {
                bad(format!(
                    "Invalid protocol {proto:?} for host port {host} (tcp, udp or sctp)"
                ))
            })?;
            let host_ip = match ip.as_str() {
                "" => None,
                s => Some(
                    s.parse::<IpAddr>()
                        .map_err(|_| bad(format!("Invalid host IP {s:?} for host port {host}")))?,
                ),
            };
            Ok(PortMapping {
                host_port,
                container_port,
                protocol,
                host_ip,
            })
        })
        .collect()
}

/// The backend: as configured; else the one the config's backend-specific keys need
/// (`externalSetMarkChain`, iptables-style conditions, nft-style conditions); else nftables
/// when the kernel has nf_tables, iptables otherwise. (The reference prefers iptables
/// whenever it exists, and so rejects a config that uses nftables conditions without
/// naming the backend.)
fn choose_backend(
    configured: Option<&str>,
    has_external_chain: bool,
    cond4: Option<&[String]>,
    cond6: Option<&[String]>,
    nf_tables: &dyn Fn() -> bool,
) -> Result<Backend, Error> {
    let mut wants: Vec<(Backend, &str)> = vec![];
    if has_external_chain {
        wants.push((Backend::Iptables, "externalSetMarkChain"));
    }
    if let Some(b) = conditions_backend(cond4) {
        wants.push((b, "conditionsV4"));
    }
    if let Some(b) = conditions_backend(cond6) {
        wants.push((b, "conditionsV6"));
    }
    let backend = match configured {
        Some("iptables") => Backend::Iptables,
        Some("nftables") => Backend::Nftables,
        Some(other) => return Err(bad(format!("unrecognized backend {other:?}"))),
        None => match wants.first() {
            Some((b, _)) => *b,
            None if nf_tables() => Backend::Nftables,
            None => Backend::Iptables,
        },
    };
    let wrong: Vec<&str> = wants.iter().filter(|(b, _)| *b != backend).map(|(_, k)| *k).collect();
    if !wrong.is_empty() {
        let other = match backend {
            Backend::Iptables => Backend::Nftables,
            Backend::Nftables => Backend::Iptables,
        };
        return Err(bad(format!(
            "{} backend was requested but configuration contains {}-specific options [{}]",
            backend.name(),
            other.name(),
            wrong.join(" ")
        )));
    }
    Ok(backend)
}

/// iptables conditions start with `-` or `!` (`-d`, `--sport`, `! -s`); nft's never do.
fn conditions_backend(c: Option<&[String]>) -> Option<Backend> {
    let first = c?.first()?;
    match first.as_bytes().first()? {
        b'-' | b'!' => Some(Backend::Iptables),
        _ => Some(Backend::Nftables),
    }
}

/// The first address of each family on the container interface, as the reference picks
/// them: addresses pointing at another interface, or at one outside a sandbox, are skipped.
fn container_ips(prev: &CniResult, ifname: &str) -> (Option<IpNetwork>, Option<IpNetwork>) {
    let (mut v4, mut v6) = (None, None);
    for ip in &prev.ips {
        let slot = if ip.address.is_ipv4() { &mut v4 } else { &mut v6 };
        if slot.is_some() {
            continue;
        }
        if let Some(iface) = ip.interface.and_then(|i| prev.interfaces.get(i)) {
            if iface.name != ifname || iface.sandbox.as_deref().unwrap_or_default().is_empty() {
                continue;
            }
        }
        *slot = Some(ip.address);
    }
    (v4, v6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use serde_json::{json, Value};

    fn req(config: Value) -> Request {
        let mut r = Request::from_config(Command::Add, config);
        r.container_id = "ctr".into();
        r.ifname = "eth0".into();
        r
    }

    fn load_with(config: Value, nft: bool) -> Result<Conf, Error> {
        load(&req(config), &|| nft).map(|(c, _)| c)
    }

    fn base() -> Value {
        json!({"cniVersion": "1.0.0", "name": "n", "type": "portmap"})
    }

    fn with(mut v: Value, k: &str, x: Value) -> Value {
        v[k] = x;
        v
    }

    fn msg(r: Result<Conf, Error>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.code, 999);
        e.msg
    }

    #[test]
    fn defaults() {
        let c = load_with(base(), true).unwrap();
        assert_eq!(c.backend, Backend::Nftables);
        assert!(c.snat);
        assert_eq!(c.mark_masq_bit, 13);
        assert!(c.mappings.is_empty());
        assert_eq!(load_with(base(), false).unwrap().backend, Backend::Iptables);
    }

    #[test]
    fn mappings_are_read_and_checked() {
        let pm = |m: Value| with(base(), "runtimeConfig", json!({ "portMappings": [m] }));
        let c = load_with(
            pm(json!({"hostPort": 8080, "containerPort": 80, "protocol": "TCP", "hostIP": "10.0.0.1"})),
            true,
        )
        .unwrap();
        assert_eq!(
            c.mappings,
            vec![PortMapping {
                host_port: 8080,
                container_port: 80,
                protocol: Protocol::Tcp,
                host_ip: Some("10.0.0.1".parse().unwrap())
            }]
        );
        assert_eq!(
            msg(load_with(pm(json!({"hostPort": 1, "containerPort": 0})), true)),
            "failed to parse config: Invalid container port number: 0"
        );
        assert_eq!(
            msg(load_with(pm(json!({"hostPort": -1, "containerPort": 5})), true)),
            "failed to parse config: Invalid host port number: -1"
        );
        assert_eq!(
            msg(load_with(
                pm(json!({"hostPort": 70000, "containerPort": 5, "protocol": "tcp"})),
                true
            )),
            "failed to parse config: Invalid host port number: 70000"
        );
        assert_eq!(
            msg(load_with(
                pm(json!({"hostPort": 1, "containerPort": 5, "protocol": "icmp"})),
                true
            )),
            "failed to parse config: Invalid protocol \"icmp\" for host port 1 (tcp, udp or sctp)"
        );
        assert_eq!(
            msg(load_with(
                pm(json!({"hostPort": 1, "containerPort": 5, "protocol": "udp", "hostIP": "x"})),
                true
            )),
            "failed to parse config: Invalid host IP \"x\" for host port 1"
        );
        assert_eq!(
            msg(load_with(pm(json!({"hostPort": "1"})), true)),
            "failed to parse config: failed to parse network configuration: json: cannot unmarshal string into Go struct field PortMapEntry.runtimeConfig.portMappings.hostPort of type int"
        );
    }

    #[test]
    fn reference_messages_for_bad_keys() {
        assert_eq!(
            msg(load_with(with(base(), "snat", json!("x")), true)),
            "failed to parse config: failed to parse network configuration: json: cannot unmarshal string into Go struct field PortMapConf.snat of type bool"
        );
        assert_eq!(
            msg(load_with(with(base(), "markMasqBit", json!(32)), true)),
            "failed to parse config: MasqMarkBit must be between 0 and 31"
        );
        let both = with(
            with(base(), "markMasqBit", json!(3)),
            "externalSetMarkChain",
            json!("X"),
        );
        assert_eq!(
            msg(load_with(both, true)),
            "failed to parse config: Cannot specify externalSetMarkChain and markMasqBit"
        );
        assert_eq!(
            msg(load_with(with(base(), "backend", json!("pf")), true)),
            "failed to parse config: unrecognized backend \"pf\""
        );
    }

    #[test]
    fn backend_follows_backend_specific_keys() {
        let ext = with(base(), "externalSetMarkChain", json!("KUBE-MARK-MASQ"));
        assert_eq!(load_with(ext.clone(), true).unwrap().backend, Backend::Iptables);
        assert_eq!(
            msg(load_with(with(ext, "backend", json!("nftables")), true)),
            "failed to parse config: nftables backend was requested but configuration contains iptables-specific options [externalSetMarkChain]"
        );
        let nft_cond = with(base(), "conditionsV4", json!(["ip saddr 10.0.0.0/8"]));
        assert_eq!(load_with(nft_cond.clone(), false).unwrap().backend, Backend::Nftables);
        assert_eq!(
            msg(load_with(with(nft_cond, "backend", json!("iptables")), true)),
            "failed to parse config: iptables backend was requested but configuration contains nftables-specific options [conditionsV4]"
        );
        let ipt_cond = with(base(), "conditionsV6", json!(["!", "-s", "::1"]));
        assert_eq!(load_with(ipt_cond, true).unwrap().backend, Backend::Iptables);
        // an empty first condition decides nothing
        let empty = with(base(), "conditionsV4", json!([""]));
        assert_eq!(load_with(empty, true).unwrap().backend, Backend::Nftables);
    }

    #[test]
    fn container_ips_follow_the_reference_choice() {
        let prev = json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "veth1"}, {"name": "eth0", "sandbox": "/ns"}, {"name": "eth1", "sandbox": "/ns"}],
            "ips": [
                {"address": "10.0.0.9/24", "interface": 0},
                {"address": "10.0.1.9/24", "interface": 2},
                {"address": "10.0.2.2/24", "interface": 1},
                {"address": "10.0.3.3/24", "interface": 1},
                {"address": "fd00::2/64"}
            ]
        });
        let c = load_with(with(base(), "prevResult", prev), true).unwrap();
        assert_eq!(c.container_v4, Some("10.0.2.2/24".parse().unwrap()));
        assert_eq!(c.container_v6, Some("fd00::2/64".parse().unwrap()));
    }

    #[test]
    fn mapping_families() {
        let m = |ip: Option<&str>| PortMapping {
            host_port: 1,
            container_port: 1,
            protocol: Protocol::Udp,
            host_ip: ip.map(|s| s.parse().unwrap()),
        };
        assert!(m(None).applies_to(true) && m(None).applies_to(false));
        assert!(m(Some("10.0.0.1")).applies_to(false) && !m(Some("10.0.0.1")).applies_to(true));
        assert_eq!(m(Some("0.0.0.0")).dest(), None);
        assert_eq!(m(Some("::")).dest(), None);
        assert_eq!(m(Some("fd00::1")).dest(), Some("fd00::1".parse().unwrap()));
    }
}
