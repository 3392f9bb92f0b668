//! The sandbox's IP status from the cached ADD results of all its attachments: one primary
//! IP, additional IPs, and each attachment's addresses, in the shape of CRI's
//! PodSandboxStatus (`ip`, `additionalIps`), chosen as containerd chooses them:
//! * an attachment on `lo` (containerd's `cni-loopback`) and loopback addresses are never
//!   pod IPs;
//! * `ip` is the primary interface's first IPv4 address (containerd's default `ip_pref`;
//!   [`IpPreference`] offers its other choices), and every other address of the primary
//!   interface follows in `additionalIps`, in the result's order;
//! * addresses of the other attachments (secondary networks) come after those.
//!
//! Conflicts are errors, not silently resolved: two attachments on the primary interface,
//! or one address reported by two attachments.
use super::cache::Entry;
use crate::cni::json::{self, Json};
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// The interface containerd attaches its `cni-loopback` network to.
const LOOPBACK_IFNAME: &str = "lo";

/// Which address of the primary interface becomes `ip` (containerd's `ip_pref`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IpPreference {
    /// The first IPv4 address, else the first address (containerd's default).
    #[default]
    Ipv4,
    /// The first IPv6 address, else the first address.
    Ipv6,
    /// The first address, in the order the plugins returned them.
    Cni,
}

impl FromStr for IpPreference {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ipv4" => Ok(IpPreference::Ipv4),
            "ipv6" => Ok(IpPreference::Ipv6),
            "cni" => Ok(IpPreference::Cni),
            _ => Err(format!("invalid IP preference {s:?}: ipv4, ipv6 or cni")),
        }
    }
}

impl IpPreference {
    /// Index of the address that becomes the primary IP (None for no addresses).
    fn pick(self, ips: &[IpAddr]) -> Option<usize> {
        let wanted = match self {
            IpPreference::Ipv4 => ips.iter().position(IpAddr::is_ipv4),
            IpPreference::Ipv6 => ips.iter().position(IpAddr::is_ipv6),
            IpPreference::Cni => None,
        };
        wanted.or((!ips.is_empty()).then_some(0))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttachmentIps {
    pub network: String,
    pub ifname: String,
    pub ips: Vec<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxStatus {
    /// `null` when no attachment is on the primary interface.
    pub ip: Option<IpAddr>,
    #[serde(rename = "additionalIps")]
    pub additional_ips: Vec<IpAddr>,
    pub attachments: Vec<AttachmentIps>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusError(pub String);

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StatusError {}

fn address(text: &str) -> Result<IpAddr, String> {
    let ip = text.split('/').next().unwrap_or(text);
    ip.parse().map_err(|e| format!("invalid address {text:?}: {e}"))
}

/// Every address of a result, in order, in any spec version's shape (read as Go decodes a
/// result: keys matched case-insensitively).
pub fn result_ips(result: &Value) -> Result<Vec<IpAddr>, String> {
    let doc = Json::from(result);
    let obj = json::as_object(&doc, "Result").map_err(|e| e.msg)?;
    let mut out = Vec::new();
    for ip in json::opt_array(&obj, "ips", "Result.ips").map_err(|e| e.msg)? {
        let entry = json::as_object(ip, "IPConfig").map_err(|e| e.msg)?;
        let text = json::opt_str(&entry, "address", "IPConfig.address")
            .map_err(|e| e.msg)?
            .ok_or("an ips entry has no address")?;
        out.push(address(text)?);
    }
    // 0.1.0/0.2.0 results
    for family in ["ip4", "ip6"] {
        if let Some(ipc) = json::opt_ptr_object(&obj, family, "Result.ip4", "*types020.IPConfig").map_err(|e| e.msg)? {
            if let Some(text) = json::opt_str(&ipc, "ip", "IPConfig.ip").map_err(|e| e.msg)? {
                out.push(address(text)?);
            }
        }
    }
    let mut seen = Vec::new();
    out.retain(|ip| {
        let new = !seen.contains(ip);
        seen.push(*ip);
        new
    });
    Ok(out)
}

/// The addresses of an attachment that can be pod IPs: none on the loopback interface,
/// and no loopback address anywhere.
fn pod_ips(a: &AttachmentIps) -> impl Iterator<Item = IpAddr> + '_ {
    let on_lo = a.ifname == LOOPBACK_IFNAME;
    a.ips.iter().copied().filter(move |ip| !on_lo && !ip.is_loopback())
}

/// Build the status of one container from its cached attachments.
pub fn from_entries(entries: &[Entry], primary_ifname: &str, pref: IpPreference) -> Result<SandboxStatus, StatusError> {
    let mut attachments = Vec::new();
    for e in entries {
        let ips = match &e.result {
            Some(r) => result_ips(r).map_err(|m| {
                StatusError(format!(
                    "cached result of network {:?} interface {:?}: {m}",
                    e.network, e.ifname
                ))
            })?,
            None => vec![],
        };
        attachments.push(AttachmentIps {
            network: e.network.clone(),
            ifname: e.ifname.clone(),
            ips,
        });
    }
    crate::util::sort::sort_by(&mut attachments, |a, b| {
        (&a.network, &a.ifname).cmp(&(&b.network, &b.ifname))
    });

    let primaries: Vec<&AttachmentIps> = attachments.iter().filter(|a| a.ifname == primary_ifname).collect();
    if let [a, b, ..] = primaries[..] {
        return Err(StatusError(format!(
            "networks {:?} and {:?} both claim the primary interface {primary_ifname:?}",
            a.network, b.network
        )));
    }
    for (i, a) in attachments.iter().enumerate() {
        for b in &attachments[i + 1..] {
            if let Some(ip) = pod_ips(a).find(|ip| pod_ips(b).any(|other| other == *ip)) {
                return Err(StatusError(format!(
                    "networks {:?} (interface {:?}) and {:?} (interface {:?}) both report address {ip}",
                    a.network, a.ifname, b.network, b.ifname
                )));
            }
        }
    }

    let mut ip = None;
    let mut additional = Vec::new();
    if let Some(primary) = primaries.first() {
        let mut own: Vec<IpAddr> = pod_ips(primary).collect();
        if let Some(i) = pref.pick(&own) {
            ip = Some(own.remove(i));
        }
        additional = own;
    }
    for a in attachments.iter().filter(|a| a.ifname != primary_ifname) {
        additional.extend(pod_ips(a));
    }
    Ok(SandboxStatus {
        ip,
        additional_ips: additional,
        attachments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(net: &str, ifname: &str, result: Value) -> Entry {
        Entry {
            kind: "cniCacheV1".into(),
            container_id: "c".into(),
            config: vec![],
            ifname: ifname.into(),
            network: net.into(),
            netns: String::new(),
            cni_args: vec![],
            capability_args: Default::default(),
            result: Some(result),
        }
    }

    #[test]
    fn addresses_of_every_result_shape() {
        let r = json!({"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24"},{"address":"fd00::2/64"}]});
        assert_eq!(
            result_ips(&r).unwrap(),
            vec!["10.0.0.2".parse::<IpAddr>().unwrap(), "fd00::2".parse().unwrap()]
        );
        let r = json!({"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.3/24"},"ip6":{"ip":"fd00::3/64"}});
        assert_eq!(result_ips(&r).unwrap().len(), 2);
        assert!(result_ips(&json!({"ips":[{"address":"x/1"}]}))
            .unwrap_err()
            .contains("invalid address \"x/1\""));
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    /// Every address of the primary interface is listed, not only the first of each family.
    #[test]
    fn dual_stack_primary_and_secondary_network() {
        let entries = [
            entry(
                "a",
                "eth0",
                json!({"ips":[{"address":"10.0.0.2/24"},{"address":"10.0.0.9/24"},{"address":"fd00::2/64"}]}),
            ),
            entry("b", "net1", json!({"ips":[{"address":"192.168.1.5/24"}]})),
        ];
        let s = from_entries(&entries, "eth0", IpPreference::default()).unwrap();
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"ip":"10.0.0.2","additionalIps":["10.0.0.9","fd00::2","192.168.1.5"],"attachments":[
                {"network":"a","ifname":"eth0","ips":["10.0.0.2","10.0.0.9","fd00::2"]},
                {"network":"b","ifname":"net1","ips":["192.168.1.5"]}]})
        );
    }

    #[test]
    fn conflicts_name_both_networks() {
        let two_primaries = [
            entry("a", "eth0", json!({"ips":[{"address":"10.0.0.2/24"}]})),
            entry("b", "eth0", json!({"ips":[{"address":"10.0.1.2/24"}]})),
        ];
        assert_eq!(
            from_entries(&two_primaries, "eth0", IpPreference::default())
                .unwrap_err()
                .0,
            "networks \"a\" and \"b\" both claim the primary interface \"eth0\""
        );
        let same_ip = [
            entry("a", "eth0", json!({"ips":[{"address":"10.0.0.2/24"}]})),
            entry("b", "net1", json!({"ips":[{"address":"10.0.0.2/16"}]})),
        ];
        assert_eq!(
            from_entries(&same_ip, "eth0", IpPreference::default()).unwrap_err().0,
            "networks \"a\" (interface \"eth0\") and \"b\" (interface \"net1\") both report address 10.0.0.2"
        );
    }

    #[test]
    fn no_primary_attachment() {
        let entries = [entry("b", "net1", json!({"ips":[{"address":"10.0.0.2/24"}]}))];
        let s = from_entries(&entries, "eth0", IpPreference::default()).unwrap();
        assert_eq!(s.ip, None);
        assert_eq!(s.additional_ips, vec!["10.0.0.2".parse::<IpAddr>().unwrap()]);
    }

    /// containerd attaches `cni-loopback` on `lo` and libcni caches it: never a pod IP, and
    /// two of them (or 127.0.0.1 in another result) are no address conflict.
    #[test]
    fn loopback_attachments_are_never_pod_ips() {
        let lo = json!({"cniVersion":"0.3.1","interfaces":[{"name":"lo","mac":"00:00:00:00:00:00"}],
            "ips":[{"version":"4","address":"127.0.0.1/8","interface":0},{"version":"6","address":"::1/128","interface":0}]});
        let entries = [
            entry("cni-loopback", "lo", lo.clone()),
            entry("other-loopback", "lo", lo),
            entry(
                "pods",
                "eth0",
                json!({"ips":[{"address":"10.88.0.5/16"},{"address":"127.0.0.2/8"}]}),
            ),
        ];
        let s = from_entries(&entries, "eth0", IpPreference::default()).unwrap();
        assert_eq!(s.ip, Some("10.88.0.5".parse().unwrap()));
        assert_eq!(s.additional_ips, Vec::<IpAddr>::new());
        assert_eq!(s.attachments.len(), 3, "every attachment is still listed");
        assert_eq!(s.attachments[0].ips, ips(&["127.0.0.1", "::1"]));
    }

    /// containerd prefers IPv4 for the primary IP whatever order the ranges had; the other
    /// addresses follow in the result's order.
    #[test]
    fn the_primary_ip_follows_the_ip_preference() {
        let entries = [entry(
            "pods",
            "eth0",
            json!({"ips":[{"address":"fd00::5/64"},{"address":"10.1.0.2/24"},{"address":"fd00::6/64"},{"address":"10.1.0.9/24"}]}),
        )];
        let cases = [
            (IpPreference::Ipv4, "10.1.0.2", &["fd00::5", "fd00::6", "10.1.0.9"]),
            (IpPreference::Ipv6, "fd00::5", &["10.1.0.2", "fd00::6", "10.1.0.9"]),
            (IpPreference::Cni, "fd00::5", &["10.1.0.2", "fd00::6", "10.1.0.9"]),
        ];
        for (pref, ip, rest) in cases {
            let s = from_entries(&entries, "eth0", pref).unwrap();
            assert_eq!(s.ip, Some(ip.parse().unwrap()), "{pref:?}");
            assert_eq!(s.additional_ips, ips(rest), "{pref:?}");
        }
        // without an address of the preferred family, the first address
        let v6_only = [entry(
            "pods",
            "eth0",
            json!({"ips":[{"address":"fd00::5/64"},{"address":"fd00::6/64"}]}),
        )];
        let s = from_entries(&v6_only, "eth0", IpPreference::Ipv4).unwrap();
        assert_eq!(
            (s.ip, s.additional_ips),
            (Some("fd00::5".parse().unwrap()), ips(&["fd00::6"]))
        );
    }

    #[test]
    fn ip_preferences_parse_as_containerd_spells_them() {
        assert_eq!("ipv4".parse(), Ok(IpPreference::Ipv4));
        assert_eq!("ipv6".parse(), Ok(IpPreference::Ipv6));
        assert_eq!("cni".parse(), Ok(IpPreference::Cni));
        assert_eq!(
            "v6".parse::<IpPreference>(),
            Err("invalid IP preference \"v6\": ipv4, ipv6 or cni".to_string())
        );
    }
}
