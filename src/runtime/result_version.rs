//! Bringing a cached result to the list's version before it is sent as `prevResult`
//! (libcni's `GetAsVersion`), for the versions that have `prevResult` at all (0.3.0 on):
//! 0.3.x/0.4.0 and 1.x differ only in `ips[].version` and the 1.1-only fields.
use serde_json::Value;

fn family(version: &str) -> Option<u8> {
    match version {
        "0.3.0" | "0.3.1" | "0.4.0" => Some(3),
        "1.0.0" | "1.1.0" => Some(10),
        _ => None,
    }
}

/// The result in version `to`, or why it cannot be converted.
pub fn convert(result: &Value, to: &str) -> Result<Value, String> {
    let from = result.get("cniVersion").and_then(Value::as_str).unwrap_or("");
    if from == to {
        return Ok(result.clone());
    }
    let (Some(ff), Some(tf)) = (family(from), family(to)) else {
        return Err(format!("cannot convert a version {from:?} result to version {to:?}"));
    };
    let mut out = result.clone();
    out["cniVersion"] = Value::String(to.into());
    if ff == tf {
        return Ok(out);
    }
    let ips = out.get_mut("ips").and_then(Value::as_array_mut);
    for ip in ips.into_iter().flatten() {
        let Some(obj) = ip.as_object_mut() else { continue };
        if tf == 10 {
            obj.remove("version");
        } else {
            let v4 = obj
                .get("address")
                .and_then(Value::as_str)
                .is_some_and(|a| !a.contains(':'));
            obj.insert("version".into(), Value::String(if v4 { "4" } else { "6" }.into()));
        }
    }
    if tf == 3 {
        for iface in out
            .get_mut("interfaces")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(obj) = iface.as_object_mut() {
                for k in ["mtu", "socketPath", "pciID"] {
                    obj.remove(k);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn same_family_changes_only_the_version() {
        let r = json!({"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.0.0.2/24"}]});
        assert_eq!(
            convert(&r, "0.4.0").unwrap(),
            json!({"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/24"}]})
        );
    }

    #[test]
    fn across_families() {
        let r = json!({"cniVersion":"0.4.0","ips":[{"version":"6","address":"fd00::2/64"}]});
        assert_eq!(
            convert(&r, "1.0.0").unwrap(),
            json!({"cniVersion":"1.0.0","ips":[{"address":"fd00::2/64"}]})
        );
        let r = json!({"cniVersion":"1.1.0","interfaces":[{"name":"e","mtu":1400}],"ips":[{"address":"10.0.0.2/24","interface":0}]});
        assert_eq!(
            convert(&r, "0.4.0").unwrap(),
            json!({"cniVersion":"0.4.0","interfaces":[{"name":"e"}],"ips":[{"version":"4","address":"10.0.0.2/24","interface":0}]})
        );
    }

    #[test]
    fn old_versions_are_refused() {
        let r = json!({"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.2/24"}});
        assert_eq!(
            convert(&r, "1.0.0").unwrap_err(),
            "cannot convert a version \"0.2.0\" result to version \"1.0.0\""
        );
    }
}
