//! The keys every plugin config shares (Go's `types.NetConf` and what runtimes add:
//! cniVersion, name, type, ipam, dns, runtimeConfig, args, prevResult). Each has one reader
//! (the entry point for cniVersion and name, `cni::config` for the rest), so a key means the
//! same and fails with the same words in every plugin that reads it; the context in front is
//! the plugin's own, as in the reference. One test per key runs every plugin applet with that
//! key mistyped; a plugin whose reference ignores the key ignores it too.
use crate::common;

use common::TestEnv;
use serde_json::json;

const PLUGINS: &[&str] = &[
    "bridge",
    "veth",
    "macvlan",
    "loopback",
    "tuning",
    "bandwidth",
    "firewall",
    "host-local",
];

/// ADD of `applet` with `key` set to the number 5 in an otherwise valid config: (code, msg),
/// (0, "") on success. Each call has its own container and container ID.
fn add_with_mistyped(env: &TestEnv, applet: &str, key: &str) -> (u64, String) {
    let c = env.container();
    let id = common::unique("keys");
    let mut conf = json!({
        "cniVersion": "1.0.0",
        "name": "keys",
        "type": applet,
        "bridge": "br-keys",
        "master": "lo",
        "ipam": {"type": "host-local", "subnet": "10.77.0.0/24", "dataDir": env.data_dir},
        // tuning's saved state and firewall's records stay in the temp dir
        "dataDir": env.tmp.path().join("plugin-state"),
        "prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": c.path_str()}],
                       "ips": [{"address": "10.77.0.9/24", "interface": 0}]},
    });
    conf[key] = json!(5);
    let out = env.call(applet).exec("ADD", &id, c.path_str(), "eth0", &conf);
    if out.ok() {
        return (0, String::new());
    }
    let j = out.json();
    (
        j["code"].as_u64().unwrap_or(0),
        j["msg"].as_str().unwrap_or_default().to_string(),
    )
}

/// Every plugin in `reads` fails with its `(code, message)`; every other plugin does not
/// fail because of the key (its message, if any, does not name it).
fn check_key(key: &str, reads: &[(&str, u64, String)]) {
    common::require_root();
    let env = TestEnv::new();
    for applet in PLUGINS {
        let (code, msg) = add_with_mistyped(&env, applet, key);
        match reads.iter().find(|(a, _, _)| a == applet) {
            Some((_, want_code, want)) => assert_eq!((code, msg.as_str()), (*want_code, want.as_str()), "{applet}"),
            None => assert!(!msg.contains(&format!(".{key} ")), "{applet} reads {key}: {msg}"),
        }
    }
}

/// `(plugin, 999, prefix + core)` for each `(plugin, prefix)`.
fn with_core(core: &str, prefixes: &[(&'static str, &str)]) -> Vec<(&'static str, u64, String)> {
    prefixes
        .iter()
        .map(|(p, prefix)| (*p, 999, format!("{prefix}{core}")))
        .collect()
}

#[test]
fn cni_version_is_read_once_by_the_entry_point() {
    let core = "json: cannot unmarshal number into Go struct field .cniVersion of type string";
    let reads: Vec<_> = PLUGINS
        .iter()
        .map(|p| (*p, 6, format!("decoding version from network config: {core}")))
        .collect();
    check_key("cniVersion", &reads);
}

#[test]
fn name_is_read_once_by_the_entry_point() {
    let core = "json: cannot unmarshal number into Go struct field .name of type string";
    let reads: Vec<_> = PLUGINS
        .iter()
        .map(|p| (*p, 6, format!("error unmarshall network config: {core}")))
        .collect();
    check_key("name", &reads);
}

#[test]
fn type_is_not_checked_by_plugins() {
    // Runtimes pick the plugin by `type`; the reference plugins never look at it.
    check_key("type", &[]);
}

#[test]
fn ipam_is_one_reader_for_the_main_plugins() {
    let ctx = "failed to load netconf: ";
    let mut reads = with_core(
        "json: cannot unmarshal number into Go struct field NetConf.ipam of type struct",
        &[("bridge", ctx), ("veth", ctx), ("macvlan", ctx)],
    );
    // host-local decodes the key into its own struct, in its reference's words
    reads.push((
        "host-local",
        999,
        "json: cannot unmarshal number into Go struct field Net.ipam of type allocator.IPAMConfig".into(),
    ));
    check_key("ipam", &reads);
}

#[test]
fn dns_is_one_reader_for_the_main_plugins() {
    let ctx = "failed to load netconf: ";
    let reads = with_core(
        "json: cannot unmarshal number into Go struct field NetConf.dns of type struct",
        &[("bridge", ctx), ("veth", ctx), ("macvlan", ctx)],
    );
    check_key("dns", &reads);
}

#[test]
fn runtime_config_is_one_reader() {
    let mut reads = with_core(
        "json: cannot unmarshal number into Go struct field NetConf.runtimeConfig of type struct",
        &[
            ("bridge", ""),
            ("macvlan", ""),
            ("bandwidth", "failed to parse network configuration: "),
        ],
    );
    // tuning's reference decodes it into its own struct
    reads.push((
        "tuning",
        999,
        "failed to load netconf: json: cannot unmarshal number into Go struct field TuningConf.runtimeConfig of type struct"
            .into(),
    ));
    check_key("runtimeConfig", &reads);
}

#[test]
fn args_is_one_reader() {
    let mut reads = with_core(
        "json: cannot unmarshal number into Go struct field NetConf.args of type struct",
        &[("bridge", "")],
    );
    reads.push((
        "tuning",
        999,
        "failed to load netconf: json: cannot unmarshal number into Go struct field TuningConf.args of type struct"
            .into(),
    ));
    check_key("args", &reads);
}

#[test]
fn prev_result_is_one_reader_for_the_chained_plugins() {
    let reads = with_core(
        "could not parse prevResult: json: cannot unmarshal number into Go struct field NetConf.prevResult of type map[string]interface {}",
        &[
            ("loopback", "failed to parse prevResult: "),
            ("tuning", ""),
            ("bandwidth", "could not parse prevResult: "),
            ("firewall", "could not parse prevResult: "),
        ],
    );
    check_key("prevResult", &reads);
}
