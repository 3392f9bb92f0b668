//! What a container asks of its network: which networks, fixed addresses, a MAC, and
//! docker-cni's `IPV4`/`IPPOOL`.
//!
//! OCI annotations come first. Docker 20.10 copies neither labels nor `--annotation` into
//! them, so each setting without an annotation is read from the container's `process.env`
//! in the bundle (`docker run -e CNIBOX_IPS=…`). Every value is checked before the first
//! ADD: a bad one fails the start with a message naming it, and nothing is attached.
use crate::netlink::MacAddr;
use crate::runtime::names;
use ipnetwork::IpNetwork;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

/// Annotation naming the networks (comma list) when `--network` is not given.
pub const NETWORKS_ANNOTATION: &str = "cni.cnibox.io/networks";
/// Annotation with static IPs (comma list) for the first network (`runtimeConfig.ips`).
pub const IPS_ANNOTATION: &str = "cni.cnibox.io/ips";
/// Annotation with the MAC of the first network's interface (`runtimeConfig.mac`).
pub const MAC_ANNOTATION: &str = "cni.cnibox.io/mac";

/// The environment variables standing in for the annotations.
pub const NETWORKS_ENV: &str = "CNIBOX_NETWORKS";
pub const IPS_ENV: &str = "CNIBOX_IPS";
pub const MAC_ENV: &str = "CNIBOX_MAC";
/// docker-cni's names: a fixed IPv4 address (`CNI_ARGS IP=`) and an IP pool (`IPPOOL=`).
pub const DOCKER_CNI_IPV4_ENV: &str = "IPV4";
pub const DOCKER_CNI_IPPOOL_ENV: &str = "IPPOOL";

/// The settings of one container; the address settings apply to its first network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Network names; empty means the hook's default.
    pub networks: Vec<String>,
    /// `runtimeConfig.ips`, each an address with an optional prefix length.
    pub ips: Vec<String>,
    /// `runtimeConfig.mac`.
    pub mac: Option<String>,
    /// `CNI_ARGS` pairs (docker-cni's `IP` and `IPPOOL`, with `IgnoreUnknown=1` so plugins
    /// that do not know them are not failed by them).
    pub cni_args: Vec<(String, String)>,
}

/// Where a value came from, for messages: `annotation cni.cnibox.io/ips` or `env CNIBOX_IPS`.
struct Source<'a> {
    annotations: &'a BTreeMap<String, String>,
    /// `KEY=value` entries, searched in place: a `BTreeMap<&str, &str>` of them would link
    /// 4 KB of B-tree code for this one lookup.
    env: &'a [String],
}

impl<'a> Source<'a> {
    fn new(annotations: &'a BTreeMap<String, String>, env: &'a [String]) -> Source<'a> {
        Source { annotations, env }
    }

    /// The value of the variable: the last entry that sets it, as a map built from the
    /// entries in order would hold.
    fn var(&self, var: &str) -> Option<&'a str> {
        self.env
            .iter()
            .rev()
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == var)
            .map(|(_, v)| v)
    }

    /// The annotation, else the variable; empty values count as not given (as in docker-cni).
    fn get(&self, annotation: Option<&str>, var: &str) -> Option<(String, &'a str)> {
        if let Some(a) = annotation {
            if let Some(v) = self.annotations.get(a).filter(|v| !v.trim().is_empty()) {
                return Some((format!("annotation {a}"), v.as_str()));
            }
        }
        self.var(var)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (format!("environment variable {var}"), v))
    }
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// A `CNI_ARGS` value: it must not break the `K=V;K2=V2` encoding.
fn cni_arg_value(what: &str, v: &str) -> Result<String, String> {
    if v.chars()
        .any(|c| c == ';' || c == '=' || c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "{what}: {v:?} cannot be passed in CNI_ARGS (no ';', '=', spaces or control characters)"
        ));
    }
    Ok(v.to_string())
}

impl Settings {
    /// Read and check the settings from the state's annotations and the container's
    /// environment (`process.env` of the bundle's config: `KEY=value` entries).
    pub fn read(annotations: &BTreeMap<String, String>, env: &[String]) -> Result<Settings, String> {
        let src = Source::new(annotations, env);
        let mut s = Settings::default();
        if let Some((what, v)) = src.get(Some(NETWORKS_ANNOTATION), NETWORKS_ENV) {
            s.networks = split_list(v);
            for n in &s.networks {
                names::network_name(n).map_err(|e| format!("{what}: {e}"))?;
            }
        }
        if let Some((what, v)) = src.get(Some(IPS_ANNOTATION), IPS_ENV) {
            s.ips = split_list(v);
            for ip in &s.ips {
                if ip.parse::<IpAddr>().is_err() && ip.parse::<IpNetwork>().is_err() {
                    return Err(format!("{what}: {ip:?} is not an IP address"));
                }
            }
        }
        if let Some((what, v)) = src.get(Some(MAC_ANNOTATION), MAC_ENV) {
            let mac: MacAddr = v
                .trim()
                .parse()
                .map_err(|_| format!("{what}: {v:?} is not a MAC address"))?;
            if mac.0[0] & 1 == 1 {
                return Err(format!("{what}: {v:?} is a multicast MAC address"));
            }
            s.mac = Some(mac.to_string());
        }
        if let Some((what, v)) = src.get(None, DOCKER_CNI_IPV4_ENV) {
            if !s.ips.is_empty() {
                return Err(format!(
                    "{what} and {IPS_ENV} (or {IPS_ANNOTATION}) both give addresses: use one"
                ));
            }
            let ip: Ipv4Addr = v
                .trim()
                .parse()
                .map_err(|_| format!("{what}: {v:?} is not an IPv4 address"))?;
            s.cni_args.push(("IP".into(), ip.to_string()));
        }
        if let Some((what, v)) = src.get(None, DOCKER_CNI_IPPOOL_ENV) {
            s.cni_args.push(("IPPOOL".into(), cni_arg_value(&what, v)?));
        }
        if !s.cni_args.is_empty() {
            s.cni_args.insert(0, ("IgnoreUnknown".into(), "1".into()));
        }
        Ok(s)
    }

    /// The capability arguments for the first network.
    pub fn capability_args(&self) -> Map<String, Value> {
        let mut m = Map::new();
        if !self.ips.is_empty() {
            m.insert("ips".into(), Value::from(self.ips.clone()));
        }
        if let Some(mac) = &self.mac {
            m.insert("mac".into(), Value::from(mac.clone()));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(annotations: &[(&str, &str)], vars: &[&str]) -> Result<Settings, String> {
        let a = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let env: Vec<String> = vars.iter().map(|v| v.to_string()).collect();
        Settings::read(&a, &env)
    }

    #[test]
    fn nothing_given_is_the_default() {
        assert_eq!(read(&[], &["PATH=/bin", "HOSTNAME=x"]).unwrap(), Settings::default());
        assert_eq!(Settings::read(&BTreeMap::new(), &[]).unwrap(), Settings::default());
    }

    #[test]
    fn docker_cni_names_become_cni_args() {
        let s = read(&[], &["IPV4=10.88.0.7", "IPPOOL=pool-a"]).unwrap();
        assert_eq!(
            s.cni_args,
            vec![
                ("IgnoreUnknown".to_string(), "1".to_string()),
                ("IP".into(), "10.88.0.7".into()),
                ("IPPOOL".into(), "pool-a".into())
            ]
        );
        // empty values are not given, as in docker-cni
        assert_eq!(read(&[], &["IPV4=", "IPPOOL="]).unwrap(), Settings::default());
    }

    #[test]
    fn the_last_entry_of_a_variable_wins() {
        let s = read(&[], &["CNIBOX_MAC=02:00:00:00:00:01", "CNIBOX_MAC=02:00:00:00:00:02"]).unwrap();
        assert_eq!(s.mac.as_deref(), Some("02:00:00:00:00:02"));
        // an empty last entry is "not given", not a fall back to the earlier one
        let s = read(&[], &["CNIBOX_IPS=10.0.0.1", "CNIBOX_IPS="]).unwrap();
        assert!(s.ips.is_empty(), "{:?}", s.ips);
    }

    #[test]
    fn cnibox_names_from_env_and_annotations_win() {
        let s = read(
            &[(IPS_ANNOTATION, "10.1.0.9")],
            &[
                "CNIBOX_NETWORKS=a, b",
                "CNIBOX_IPS=10.1.0.5,fd00::5/64",
                "CNIBOX_MAC=02:00:00:00:00:0A",
            ],
        )
        .unwrap();
        assert_eq!(s.networks, vec!["a", "b"]);
        assert_eq!(s.ips, vec!["10.1.0.9"]);
        assert_eq!(s.mac.as_deref(), Some("02:00:00:00:00:0a"));
        assert_eq!(
            Value::Object(s.capability_args()),
            json!({"ips": ["10.1.0.9"], "mac": "02:00:00:00:00:0a"})
        );
    }

    #[test]
    fn bad_values_name_the_setting() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["IPV4=10.88.0.300"],
                "environment variable IPV4: \"10.88.0.300\" is not an IPv4 address",
            ),
            (&["IPV4=fd00::1"], "is not an IPv4 address"),
            (
                &["CNIBOX_IPS=10.0.0.1,nope"],
                "CNIBOX_IPS: \"nope\" is not an IP address",
            ),
            (
                &["CNIBOX_MAC=02:00:00:00:00"],
                "CNIBOX_MAC: \"02:00:00:00:00\" is not a MAC address",
            ),
            (&["CNIBOX_MAC=01:00:5e:00:00:01"], "multicast"),
            (
                &["IPPOOL=a;IP=1.2.3.4"],
                "IPPOOL: \"a;IP=1.2.3.4\" cannot be passed in CNI_ARGS",
            ),
            (&["CNIBOX_NETWORKS=ok,bad/name"], "CNIBOX_NETWORKS"),
            (&["IPV4=10.0.0.1", "CNIBOX_IPS=10.0.0.2"], "both give addresses"),
        ];
        for (vars, want) in cases {
            let e = read(&[], vars).unwrap_err();
            assert!(e.contains(want), "{vars:?}: {e}");
        }
        let e = read(&[(MAC_ANNOTATION, "zz")], &[]).unwrap_err();
        assert!(e.starts_with("annotation cni.cnibox.io/mac"), "{e}");
    }
}
