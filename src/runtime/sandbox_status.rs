//! The sandbox's IP status from the cached ADD results of all its attachments: one primary
//! IP, additional IPs, and each attachment's addresses, in the shape of CRI's
//! PodSandboxStatus (`ip`, `additionalIps`). Conflicts are errors, not silently resolved:
//! two attachments on the primary interface, or one address reported by two attachments.
use super::cache::Entry;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::net::IpAddr;

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

/// Every address of a result, in order, in any spec version's shape.
pub fn result_ips(result: &Value) -> Result<Vec<IpAddr>, String> {
    let mut out = Vec::new();
    if let Some(ips) = result.get("ips").and_then(Value::as_array) {
        for ip in ips {
            let text = ip
                .get("address")
                .and_then(Value::as_str)
                .ok_or("an ips entry has no address")?;
            out.push(address(text)?);
        }
    }
    // 0.1.0/0.2.0 results
    for family in ["ip4", "ip6"] {
        if let Some(text) = result.get(family).and_then(|v| v.get("ip")).and_then(Value::as_str) {
            out.push(address(text)?);
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

/// Build the status of one container from its cached attachments.
pub fn from_entries(entries: &[Entry], primary_ifname: &str) -> Result<SandboxStatus, StatusError> {
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
    attachments.sort_by(|a, b| (&a.network, &a.ifname).cmp(&(&b.network, &b.ifname)));

    let primaries: Vec<&AttachmentIps> = attachments.iter().filter(|a| a.ifname == primary_ifname).collect();
    if let [a, b, ..] = primaries[..] {
        return Err(StatusError(format!(
            "networks {:?} and {:?} both claim the primary interface {primary_ifname:?}",
            a.network, b.network
        )));
    }
    for (i, a) in attachments.iter().enumerate() {
        for b in &attachments[i + 1..] {
            if let Some(ip) = a.ips.iter().find(|ip| b.ips.contains(ip)) {
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
        ip = primary.ips.first().copied();
        if let Some(first) = ip {
            // The first address of the other family completes a dual-stack pair.
            if let Some(other) = primary.ips.iter().find(|a| a.is_ipv4() != first.is_ipv4()) {
                additional.push(*other);
            }
        }
    }
    for a in attachments.iter().filter(|a| a.ifname != primary_ifname) {
        additional.extend(a.ips.iter().copied());
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
        let s = from_entries(&entries, "eth0").unwrap();
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"ip":"10.0.0.2","additionalIps":["fd00::2","192.168.1.5"],"attachments":[
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
            from_entries(&two_primaries, "eth0").unwrap_err().0,
            "networks \"a\" and \"b\" both claim the primary interface \"eth0\""
        );
        let same_ip = [
            entry("a", "eth0", json!({"ips":[{"address":"10.0.0.2/24"}]})),
            entry("b", "net1", json!({"ips":[{"address":"10.0.0.2/16"}]})),
        ];
        assert_eq!(
            from_entries(&same_ip, "eth0").unwrap_err().0,
            "networks \"a\" (interface \"eth0\") and \"b\" (interface \"net1\") both report address 10.0.0.2"
        );
    }

    #[test]
    fn no_primary_attachment() {
        let entries = [entry("b", "net1", json!({"ips":[{"address":"10.0.0.2/24"}]}))];
        let s = from_entries(&entries, "eth0").unwrap();
        assert_eq!(s.ip, None);
        assert_eq!(s.additional_ips, vec!["10.0.0.2".parse::<IpAddr>().unwrap()]);
    }
}
