//! The stdin config each plugin of a chain gets, built as libcni's `buildOneConfig` and
//! `InjectConf` do: the plugin object with `name`, `cniVersion`, `prevResult` and a
//! `runtimeConfig` filtered by the plugin's capabilities, top-level keys sorted, compact.
use super::conflist::PluginConf;
use serde_json::{Map, Value};

/// The request for ADD, DEL and CHECK.
pub fn build(
    plugin: &PluginConf,
    network: &str,
    cni_version: &str,
    prev_result: Option<&Value>,
    capability_args: &Map<String, Value>,
) -> Vec<u8> {
    let mut obj = base(plugin, network, cni_version);
    if let Some(prev) = prev_result {
        obj.insert("prevResult".into(), prev.clone());
    }
    // Inserted, not collected: a BTree collection's `FromIterator` sorts, a sort instance of
    // ~4 KB per element type (see `util::sort`).
    let mut runtime_config = Map::new();
    runtime_config.extend(
        plugin
            .capabilities
            .iter()
            .filter(|(_, enabled)| **enabled)
            .filter_map(|(cap, _)| capability_args.get(cap).map(|v| (cap.clone(), v.clone()))),
    );
    // Only a non-empty filtered map replaces the plugin's own `runtimeConfig`.
    if !runtime_config.is_empty() {
        obj.insert("runtimeConfig".into(), Value::Object(runtime_config));
    }
    to_bytes(obj)
}

/// The request for STATUS and GC: only `name`, `cniVersion` and the given keys are injected.
pub fn build_bare(plugin: &PluginConf, network: &str, cni_version: &str, extra: &[(&str, Value)]) -> Vec<u8> {
    let mut obj = base(plugin, network, cni_version);
    for (k, v) in extra {
        obj.insert((*k).to_string(), v.clone());
    }
    to_bytes(obj)
}

fn base(plugin: &PluginConf, network: &str, cni_version: &str) -> Map<String, Value> {
    let mut obj = plugin.raw.clone();
    obj.insert("name".into(), Value::String(network.to_string()));
    obj.insert("cniVersion".into(), Value::String(cni_version.to_string()));
    obj
}

fn to_bytes(obj: Map<String, Value>) -> Vec<u8> {
    // serde_json's map is ordered by key, which gives Go's sorted map marshalling.
    serde_json::to_vec(&Value::Object(obj)).expect("a JSON value serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plugin(v: Value) -> PluginConf {
        PluginConf::from_value(&v).unwrap()
    }

    #[test]
    fn injects_name_version_prev_result_sorted_and_compact() {
        let p = plugin(json!({"type":"t","zeta":1,"alpha":{"b":1,"a":2},"name":"own","cniVersion":"0.1.0"}));
        let prev = json!({"cniVersion":"1.0.0","ips":[]});
        let got = String::from_utf8(build(&p, "net", "1.0.0", Some(&prev), &Map::new())).unwrap();
        assert_eq!(
            got,
            r#"{"alpha":{"a":2,"b":1},"cniVersion":"1.0.0","name":"net","prevResult":{"cniVersion":"1.0.0","ips":[]},"type":"t","zeta":1}"#
        );
    }

    #[test]
    fn runtime_config_is_filtered_by_enabled_capabilities() {
        let p = plugin(json!({"type":"t","capabilities":{"portMappings":true,"bandwidth":false,"ips":true}}));
        let caps = json!({"portMappings":[1],"bandwidth":{"x":1},"mac":"aa"})
            .as_object()
            .unwrap()
            .clone();
        let got: Value = serde_json::from_slice(&build(&p, "n", "1.0.0", None, &caps)).unwrap();
        assert_eq!(got["runtimeConfig"], json!({"portMappings":[1]}));
        assert_eq!(
            got["capabilities"],
            json!({"portMappings":true,"bandwidth":false,"ips":true})
        );
        assert!(got.get("prevResult").is_none());
    }

    #[test]
    fn plugin_runtime_config_survives_when_nothing_is_injected() {
        let p = plugin(json!({"type":"t","capabilities":{"ips":true},"runtimeConfig":{"own":1}}));
        let caps = json!({"mac":"aa"}).as_object().unwrap().clone();
        let got: Value = serde_json::from_slice(&build(&p, "n", "1.0.0", None, &caps)).unwrap();
        assert_eq!(got["runtimeConfig"], json!({"own":1}));
        let caps = json!({"ips":["10.0.0.2/24"]}).as_object().unwrap().clone();
        let got: Value = serde_json::from_slice(&build(&p, "n", "1.0.0", None, &caps)).unwrap();
        assert_eq!(got["runtimeConfig"], json!({"ips":["10.0.0.2/24"]}));
    }

    #[test]
    fn bare_requests_for_status_and_gc() {
        let p = plugin(json!({"type":"t","capabilities":{"ips":true}}));
        let got = build_bare(&p, "n", "1.1.0", &[("cni.dev/valid-attachments", json!([]))]);
        assert_eq!(
            String::from_utf8(got).unwrap(),
            r#"{"capabilities":{"ips":true},"cni.dev/valid-attachments":[],"cniVersion":"1.1.0","name":"n","type":"t"}"#
        );
    }
}
