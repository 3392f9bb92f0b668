//! The host-local configuration: the whole plugin config on stdin (`ipam`, plus the top-level
//! `runtimeConfig` and `args`), turned into validated range sets and requested addresses.
//!
//! Every message and the order of checks follow the reference's `LoadIPAMConfig`.
use super::range::{canonical, RawRange, RawSubnet};
use super::range_set::RangeSet;
use crate::cni::json::{self, Fields, Json};
use crate::cni::netaddr::{self, parse_ip};
use crate::cni::result::Route;
use crate::cni::version;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

pub const DEFAULT_DATA_DIR: &str = "/var/lib/cni/networks";

/// The config is unusable; the message is the reference's (the plugin reports code 999).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

/// A validated host-local configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub name: String,
    pub cni_version: String,
    /// Final order: `runtimeConfig.ipRanges`, the legacy top-level range, `ipam.ranges`.
    pub ranges: Vec<RangeSet>,
    pub routes: Vec<Route>,
    pub data_dir: PathBuf,
    pub resolv_conf: Option<String>,
    /// `CNI_ARGS IP` first, then `args.cni.ips`, then `runtimeConfig.ips`; canonical, no duplicates.
    pub requested: Vec<IpAddr>,
    /// `releaseAfterReboot` (cnibox's own key, default true): release an earlier boot's
    /// reservations at the first call after a reboot.
    pub release_after_reboot: bool,
}

impl From<crate::cni::Error> for ConfigError {
    fn from(e: crate::cni::Error) -> ConfigError {
        ConfigError(e.msg)
    }
}

fn type_error(v: &Json, field: &str, go_type: &str) -> ConfigError {
    json::type_error(v, field, go_type).into()
}

/// A string member; absent and `null` are both "not set".
fn opt_str<'a>(obj: &Fields<'a>, key: &str, field: &str) -> Result<Option<&'a str>, ConfigError> {
    Ok(json::opt_str(obj, key, field)?)
}

/// A slice member of Go type `go_type`, at `path` (Go's `<innermost struct>.<full path>`).
fn opt_list<'a>(obj: &Fields<'a>, key: &str, path: &str, go_type: &str) -> Result<Option<&'a [Json]>, ConfigError> {
    Ok(json::opt_list(obj, key, path, go_type)?)
}

/// A `types.IPNet` member (`subnet`, a route's `dst`): Go runs its `UnmarshalJSON` for each
/// value written, a `null` too, which reads as "" and fails; absent is unset.
fn opt_ipnet(obj: &Fields, key: &str, field: &str) -> Result<Option<RawSubnet>, ConfigError> {
    let mut subnet = None;
    for v in obj.written(key, "types.IPNet") {
        let text = match v {
            Json::Null => "",
            Json::String(s) => s,
            other => return Err(type_error(other, field, "string")),
        };
        subnet = Some(RawSubnet::parse(text).map_err(|e| err(e.0))?);
    }
    Ok(subnet)
}

/// A `net.IP` member (`rangeStart`, `gateway`, …): "" means unset, like Go's `UnmarshalText`.
fn opt_ip(obj: &Fields, key: &str, field: &str) -> Result<Option<IpAddr>, ConfigError> {
    Ok(netaddr::opt_ip(obj, key, field)?)
}

/// A requested address (`ip.IP`): `ip` or `ip/prefix`, the prefix is ignored.
pub fn parse_requested(s: &str) -> Result<IpAddr, ConfigError> {
    let bad = || err(format!("invalid IP address {s}"));
    match s.split_once('/') {
        Some(_) => RawSubnet::parse(s).map(|n| canonical(n.ip)).map_err(|_| bad()),
        None => parse_ip(s).ok_or_else(bad),
    }
}

/// `[]*ip.IP` at `path` (`.runtimeConfig.ips`, `IPAMArgs.args.cni.ips`).
fn requested_list(obj: &Fields, key: &str, path: &str) -> Result<Vec<IpAddr>, ConfigError> {
    let mut out = vec![];
    for v in opt_list(obj, key, path, "[]*ip.IP")?.into_iter().flatten() {
        match v {
            Json::String(s) => out.push(parse_requested(s)?),
            Json::Null => {}
            other => return Err(type_error(other, path, "*ip.IP")),
        }
    }
    Ok(out)
}

/// A `Range`'s members at `path` (`ipam.ranges`), Go naming them `Range.<path>.<key>`.
fn parse_range(value: &Json, path: &str) -> Result<RawRange, ConfigError> {
    if value.as_object().is_none() {
        return Err(type_error(value, path, "allocator.Range"));
    }
    parse_range_fields(
        &json::as_object(value, path)?,
        &format!("Range.{}", path.trim_start_matches('.')),
    )
}

/// A `Range`'s members, named `<field>.<key>` (also those of the IPAM section, which embeds
/// one: `IPAMConfig.ipam`).
fn parse_range_fields(obj: &Fields, field: &str) -> Result<RawRange, ConfigError> {
    Ok(RawRange {
        subnet: opt_ipnet(obj, "subnet", &format!("{field}.subnet"))?,
        range_start: opt_ip(obj, "rangeStart", &format!("{field}.rangeStart"))?,
        range_end: opt_ip(obj, "rangeEnd", &format!("{field}.rangeEnd"))?,
        gateway: opt_ip(obj, "gateway", &format!("{field}.gateway"))?,
    })
}

/// `[]allocator.RangeSet` (`[[Range]]`) at `path` (`.runtimeConfig.ipRanges`,
/// `IPAMConfig.ipam.ranges`: Go names the innermost struct, then the whole path).
fn range_sets(obj: &Fields, key: &str, path: &str) -> Result<Vec<Vec<RawRange>>, ConfigError> {
    let range_path = path.split_once('.').map_or(path, |(_, rest)| rest);
    let mut sets = vec![];
    for set in opt_list(obj, key, path, "[]allocator.RangeSet")?.into_iter().flatten() {
        match set {
            Json::Array(ranges) => sets.push(
                ranges
                    .iter()
                    .map(|r| match r {
                        Json::Object(_) => parse_range(r, range_path),
                        other => Err(type_error(other, path, "allocator.Range")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Json::Null => sets.push(vec![]),
            other => return Err(type_error(other, path, "allocator.RangeSet")),
        }
    }
    Ok(sets)
}

impl Config {
    /// The store a config names (its directory and the network) and its
    /// `releaseAfterReboot`, read on their own: what DEL releases from when [`Config::load`]
    /// refuses the rest.
    pub fn store_of(conf: &Json) -> (PathBuf, String, bool) {
        let conf = json::as_object(conf, "Net").unwrap_or_default();
        let name = opt_str(&conf, "name", "Net.name").ok().flatten().unwrap_or_default();
        let ipam = json::opt_ptr_object(&conf, "ipam", "Net.ipam", "allocator.IPAMConfig")
            .ok()
            .flatten();
        let data_dir = ipam
            .as_ref()
            .and_then(|ipam| opt_str(ipam, "dataDir", "IPAMConfig.dataDir").ok().flatten())
            .filter(|d| !d.is_empty())
            .unwrap_or(DEFAULT_DATA_DIR);
        let release_after_reboot = ipam
            .as_ref()
            .and_then(|ipam| json::opt_bool(ipam, "releaseAfterReboot", "IPAMConfig.ipam.releaseAfterReboot").ok())
            .flatten()
            .unwrap_or(true);
        (PathBuf::from(data_dir), name.to_string(), release_after_reboot)
    }

    /// Load from the plugin config. `env_ip` is `CNI_ARGS`' `IP` value, if given.
    pub fn load(conf: &Json, env_ip: Option<&str>) -> Result<Config, ConfigError> {
        // the reference's `allocator.Net`
        let conf = &json::as_object(conf, "Net")?;
        let name = opt_str(conf, "name", "Net.name")?.unwrap_or_default().to_string();
        let cni_version = opt_str(conf, "cniVersion", "Net.cniVersion")?
            .unwrap_or_default()
            .to_string();
        let runtime = json::opt_object(
            conf,
            "runtimeConfig",
            "Net.runtimeConfig",
            r#"struct { IPRanges []allocator.RangeSet "json:\"ipRanges,omitempty\""; IPs []*ip.IP "json:\"ips,omitempty\"" }"#,
        )?.unwrap_or_default();
        // the anonymous runtimeConfig struct has no name in Go's messages
        let runtime_ranges = range_sets(&runtime, "ipRanges", ".runtimeConfig.ipRanges")?;
        let runtime_ips = requested_list(&runtime, "ips", ".runtimeConfig.ips")?;
        let args = json::opt_ptr_object(
            conf,
            "args",
            "Net.args",
            r#"struct { A *allocator.IPAMArgs "json:\"cni\"" }"#,
        )?;
        let args_ips = match args
            .map(|a| json::opt_ptr_object(&a, "cni", ".args.cni", "allocator.IPAMArgs"))
            .transpose()?
            .flatten()
        {
            Some(cni) => requested_list(&cni, "ips", "IPAMArgs.args.cni.ips")?,
            None => vec![],
        };
        let Some(ipam) = json::opt_ptr_object(conf, "ipam", "Net.ipam", "allocator.IPAMConfig")? else {
            return Err(err("IPAM config missing 'ipam' key"));
        };
        let ipam = &ipam;
        // decoded though unused, so a wrong type fails as in the reference (`Name` has no
        // JSON tag: any spelling of "name" fills it)
        opt_str(ipam, "type", "IPAMConfig.ipam.type")?;
        opt_str(ipam, "Name", "IPAMConfig.ipam.Name")?;
        let legacy = parse_range_fields(ipam, "IPAMConfig.ipam")?;
        let ipam_ranges = range_sets(ipam, "ranges", "IPAMConfig.ipam.ranges")?;
        let routes = crate::ipam::routes::read(ipam)?;
        let data_dir = match opt_str(ipam, "dataDir", "IPAMConfig.ipam.dataDir")? {
            None | Some("") => PathBuf::from(DEFAULT_DATA_DIR),
            Some(d) => PathBuf::from(d),
        };
        let resolv_conf = opt_str(ipam, "resolvConf", "IPAMConfig.ipam.resolvConf")?
            .filter(|s| !s.is_empty())
            .map(String::from);
        let release_after_reboot =
            json::opt_bool(ipam, "releaseAfterReboot", "IPAMConfig.ipam.releaseAfterReboot")?.unwrap_or(true);

        let mut requested: Vec<IpAddr> = vec![];
        let env_ip = match env_ip {
            // Go's ip.IP leaves an empty value unset
            Some("") | None => None,
            Some(s) => Some(
                parse_requested(s).map_err(|e| err(format!("ARGS: error parsing value of pair \"IP={s}\": {e}")))?,
            ),
        };
        for ip in env_ip.into_iter().chain(args_ips).chain(runtime_ips) {
            if !requested.contains(&ip) {
                requested.push(ip);
            }
        }

        let mut raw_sets = runtime_ranges;
        if legacy.subnet.is_some() {
            raw_sets.push(vec![legacy]);
        }
        raw_sets.extend(ipam_ranges);
        if raw_sets.is_empty() {
            return Err(err("no IP ranges specified"));
        }
        let mut ranges = Vec::with_capacity(raw_sets.len());
        for (i, raw) in raw_sets.iter().enumerate() {
            ranges.push(RangeSet::canonicalize(raw).map_err(|e| err(format!("invalid range set {i}: {e}")))?);
        }
        let v4 = ranges.iter().filter(|s| s.is_ipv4()).count();
        if (v4 > 1 || ranges.len() - v4 > 1) && !version::at_least(&cni_version, "0.3.0") {
            return Err(err(format!(
                "CNI version {cni_version} does not support more than 1 address per family"
            )));
        }
        for (i, a) in ranges.iter().enumerate() {
            for (j, b) in ranges.iter().enumerate().skip(i + 1) {
                if a.overlaps(b) {
                    return Err(err(format!("range set {i} overlaps with {j}")));
                }
            }
        }
        Ok(Config {
            name,
            cni_version,
            ranges,
            routes,
            data_dir,
            resolv_conf,
            requested,
            release_after_reboot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn load(v: Value) -> Result<Config, String> {
        Config::load(&Json::from(&v), None).map_err(|e| e.0)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Regression: `null` for a subnet or a route's `dst` was read as unset (a value field's
    /// rule), so a subnet written and then `null` kept the subnet; Go runs `types.IPNet`'s
    /// `UnmarshalJSON` for the `null` too, which parses "" and fails, as the reference does.
    #[test]
    fn a_null_subnet_or_dst_is_an_empty_cidr() {
        let load_text = |text: &str| Config::load(&json::parse(text.as_bytes()).unwrap(), None).map_err(|e| e.0);
        for text in [
            r#"{"name":"n","ipam":{"subnet":"10.1.2.0/24","SUBNET":null}}"#,
            r#"{"name":"n","ipam":{"subnet":null,"ranges":[[{"subnet":"10.1.2.0/24"}]]}}"#,
            r#"{"name":"n","ipam":{"ranges":[[{"subnet":"10.1.2.0/24","Subnet":null}]]}}"#,
            r#"{"name":"n","ipam":{"subnet":"10.1.2.0/24","routes":[{"dst":"0.0.0.0/0","DST":null}]}}"#,
        ] {
            assert_eq!(load_text(text).unwrap_err(), "invalid CIDR address: ", "{text}");
        }
        // Go decodes each value written in turn: a null before the subnet fails too
        let c = load_text(r#"{"name":"n","ipam":{"SUBNET":null,"subnet":"10.1.2.0/24"}}"#);
        assert_eq!(c.unwrap_err(), "invalid CIDR address: ");
        let c = load_text(r#"{"name":"n","ipam":{"ranges":[[{"subnet":"10.1.2.0/24"}]]}}"#).unwrap();
        assert_eq!(c.ranges.len(), 1);
    }

    #[test]
    fn old_style_config() {
        let c = load(json!({"cniVersion":"0.3.1","name":"mynet","ipam":{"type":"host-local",
            "subnet":"10.1.2.0/24","dataDir":"/tmp/x","resolvConf":"/etc/resolv.conf",
            "routes":[{"dst":"0.0.0.0/0","gw":"10.1.2.1"}]}}))
        .unwrap();
        assert_eq!(c.ranges.len(), 1);
        let r = &c.ranges[0].0[0];
        assert_eq!(
            (r.start, r.end, r.gateway),
            (ip("10.1.2.1"), ip("10.1.2.254"), ip("10.1.2.1"))
        );
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(c.resolv_conf.as_deref(), Some("/etc/resolv.conf"));
        assert_eq!(c.routes.len(), 1);
        assert_eq!(c.routes[0].dst.to_string(), "0.0.0.0/0");
        assert_eq!(c.routes[0].gw, Some(ip("10.1.2.1")));
        assert_eq!(c.name, "mynet");
    }

    #[test]
    fn new_style_config_and_defaults() {
        let c = load(json!({"cniVersion":"0.3.1","name":"n","ipam":{"ranges":[
            [{"subnet":"10.1.2.0/24"},{"subnet":"10.2.2.0/24","rangeStart":"10.2.2.100","rangeEnd":"10.2.2.200","gateway":"10.2.2.1"}],
            [{"subnet":"2001:db8:1::/64"}]]}}))
        .unwrap();
        assert_eq!(c.ranges.len(), 2);
        assert_eq!(c.ranges[0].to_string(), "10.1.2.1-10.1.2.254,10.2.2.100-10.2.2.200");
        assert_eq!(
            c.ranges[1].to_string(),
            "2001:db8:1::1-2001:db8:1:0:ffff:ffff:ffff:ffff"
        );
        assert_eq!(c.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert_eq!(c.resolv_conf, None);
    }

    #[test]
    fn mixed_config_with_runtime_ranges_in_order() {
        let c = load(json!({"cniVersion":"0.3.1","name":"n",
            "runtimeConfig":{"ipRanges":[[{"subnet":"10.3.0.0/24"}]]},
            "ipam":{"subnet":"10.1.0.0/24","ranges":[[{"subnet":"10.2.0.0/24"}]]}}))
        .unwrap();
        let order: Vec<String> = c.ranges.iter().map(|s| s.0[0].network.to_string()).collect();
        assert_eq!(order, ["10.3.0.0", "10.1.0.0", "10.2.0.0"]);
    }

    #[test]
    fn requested_ips_from_env_args_and_runtime_config() {
        let conf = json!({"cniVersion":"0.3.1","name":"n",
            "args":{"cni":{"ips":["10.1.2.11","10.1.2.12/24","10.1.2.10"]}},
            "runtimeConfig":{"ips":["10.1.2.13/24","2001:db8::5"]},
            "ipam":{"subnet":"10.1.2.0/24"}});
        let c = Config::load(&Json::from(&conf), Some("10.1.2.10/24")).unwrap();
        let want: Vec<IpAddr> = ["10.1.2.10", "10.1.2.11", "10.1.2.12", "10.1.2.13", "2001:db8::5"]
            .map(ip)
            .to_vec();
        assert_eq!(
            c.requested, want,
            "env first, then args, then runtimeConfig; duplicates collapse"
        );
        let c = Config::load(&Json::from(&conf), Some("")).unwrap();
        assert_eq!(c.requested[0], ip("10.1.2.11"), "empty IP= is unset");
    }

    #[test]
    fn requested_ip_errors() {
        let conf = json!({"name":"n","ipam":{"subnet":"10.1.2.0/24"}});
        assert_eq!(
            Config::load(&Json::from(&conf), Some("bogus")).unwrap_err().0,
            "ARGS: error parsing value of pair \"IP=bogus\": invalid IP address bogus"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":"10.1.2.0/24"},"runtimeConfig":{"ips":["bogus/3"]}})).unwrap_err(),
            "invalid IP address bogus/3"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":"10.1.2.0/24"},"args":{"cni":{"ips":["x"]}}})).unwrap_err(),
            "invalid IP address x"
        );
    }

    #[test]
    fn missing_ipam_and_no_ranges() {
        assert_eq!(load(json!({"name":"n"})).unwrap_err(), "IPAM config missing 'ipam' key");
        assert_eq!(
            load(json!({"name":"n","ipam":{"type":"host-local"}})).unwrap_err(),
            "no IP ranges specified"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"ranges":[]}})).unwrap_err(),
            "no IP ranges specified"
        );
    }

    #[test]
    fn range_validation_is_prefixed_with_the_set_index() {
        assert_eq!(
            load(json!({"name":"n","ipam":{"ranges":[[{"subnet":"10.1.2.0/24"}],[{"subnet":"10.1.3.5/24"}]]}})).unwrap_err(),
            "invalid range set 1: Network has host bits set. For a subnet mask of length 24 the network address is 10.1.3.0"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"ranges":[[]]}})).unwrap_err(),
            "invalid range set 0: empty range set"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/16"},{"subnet":"2001::/64"}]]}}))
                .unwrap_err(),
            "invalid range set 0: mixed address families"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/22"},{"subnet":"10.1.2.0/24"}]]}}))
                .unwrap_err(),
            "invalid range set 0: subnets 10.1.0.1-10.1.3.254 and 10.1.2.1-10.1.2.254 overlap"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"ranges":[[{"rangeStart":"10.1.2.3"}]]}})).unwrap_err(),
            "invalid range set 0: IP <nil> not v4 nor v6"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":"10.1.2.0/24","rangeStart":"10.1.2.9","rangeEnd":"10.1.2.5"}}))
                .unwrap_err(),
            "invalid range set 0: RangeStart 10.1.2.9 not in network 10.1.2.0/24"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":"10.1.2.0/24","rangeEnd":"10.1.3.5"}})).unwrap_err(),
            "invalid range set 0: RangeEnd 10.1.3.5 not in network 10.1.2.0/24"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":"10.1.2.0/32"}})).unwrap_err(),
            "invalid range set 0: Network 10.1.2.0/32 too small to allocate from"
        );
    }

    #[test]
    fn decode_errors() {
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":"10.1.2.0"}})).unwrap_err(),
            "invalid CIDR address: 10.1.2.0"
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":""}})).unwrap_err(),
            "invalid CIDR address: "
        );
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":"10.1.2.0/24","rangeStart":"bogus"}})).unwrap_err(),
            "invalid IP address: bogus"
        );
        assert!(load(json!({"name":"n","ipam":{"subnet":7}}))
            .unwrap_err()
            .starts_with("json: cannot unmarshal number"));
    }

    #[test]
    fn overlap_between_sets() {
        assert_eq!(
            load(json!({"cniVersion":"0.3.1","name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/16"}],[{"subnet":"10.1.2.0/24"}]]}})).unwrap_err(),
            "range set 0 overlaps with 1"
        );
        assert_eq!(
            load(json!({"cniVersion":"0.3.1","name":"n","ipam":{"ranges":[[{"subnet":"10.2.0.0/16"}],[{"subnet":"10.3.0.0/16"}],[{"subnet":"10.3.2.0/24"}]]}})).unwrap_err(),
            "range set 1 overlaps with 2"
        );
    }

    #[test]
    fn one_address_per_family_below_0_3_0() {
        let two_v4 = |v: &str| json!({"cniVersion":v,"name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/16"}],[{"subnet":"10.2.0.0/16"}]]}});
        assert_eq!(
            load(two_v4("0.2.0")).unwrap_err(),
            "CNI version 0.2.0 does not support more than 1 address per family"
        );
        assert_eq!(
            load(two_v4("0.1.0")).unwrap_err(),
            "CNI version 0.1.0 does not support more than 1 address per family"
        );
        assert!(load(two_v4("0.3.0")).is_ok());
        let dual = json!({"cniVersion":"0.2.0","name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/16"}],[{"subnet":"2001:db8::/64"}]]}});
        assert!(load(dual).is_ok(), "one v4 and one v6 set are fine for 0.2.0");
    }

    #[test]
    fn routes_keep_every_field() {
        let c = load(json!({"name":"n","ipam":{"subnet":"10.1.2.0/24","routes":[
            {"dst":"192.168.0.0/16"},{"dst":"10.9.0.0/16","gw":"10.1.2.9","mtu":1400,"table":100,"scope":253}]}}))
        .unwrap();
        assert_eq!(c.routes[0].gw, None);
        assert_eq!(c.routes[1].mtu, Some(1400));
        assert_eq!(c.routes[1].table, Some(100));
        assert_eq!(c.routes[1].scope, Some(253));
        assert_eq!(
            load(json!({"name":"n","ipam":{"subnet":"10.1.2.0/24","routes":[{"dst":"x"}]}})).unwrap_err(),
            "invalid CIDR address: x"
        );
    }
}
