//! The keys every plugin config shares (Go's `types.NetConf`, which every reference plugin
//! embeds and so decodes in full, and what runtimes add: `runtimeConfig`, `args`). Each
//! has one reader in cnibox (the entry point for cniVersion and name, `cni::config` for
//! the rest), so a key means the same and fails with the same words in every plugin that
//! reads it. One test per key runs every plugin applet and its Go reference with that key
//! mistyped and compares the two answers (code and message); the few places where the
//! words differ are listed with the reason.
use crate::common;

use common::TestEnv;
use serde_json::json;

/// cnibox's applet and the Debian reference binary it replaces.
const PLUGINS: &[(&str, &str)] = &[
    ("bridge", "bridge"),
    ("veth", "ptp"),
    ("macvlan", "macvlan"),
    ("loopback", "loopback"),
    ("tuning", "tuning"),
    ("bandwidth", "bandwidth"),
    ("firewall", "firewall"),
    ("portmap", "portmap"),
    ("host-local", "host-local"),
];

/// The link macvlan stacks on, made in each test's host namespace.
const MASTER: &str = "keys0";

/// The answer to an ADD with the key `key` set to `value` in an otherwise valid config:
/// (code, msg), (0, "") on success. Each call has its own container and container ID.
fn add_with(env: &TestEnv, call: common::Call, key: &str, value: &serde_json::Value) -> (u64, String) {
    let c = env.container();
    let id = common::unique("keys");
    let mut conf = json!({
        "cniVersion": "1.0.0",
        "name": "keys",
        "type": "plugin",
        "bridge": "br-keys",
        "master": MASTER,
        "ipam": {"type": "host-local", "subnet": "10.77.0.0/24", "dataDir": env.data_dir},
        // tuning's saved state and firewall's records stay in the temp dir
        "dataDir": env.tmp.path().join("plugin-state"),
        "prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": c.path_str()}],
                       "ips": [{"address": "10.77.0.9/24", "interface": 0}]},
    });
    conf[key] = value.clone();
    let out = call.exec("ADD", &id, c.path_str(), "eth0", &conf);
    if out.ok() {
        return (0, String::new());
    }
    let j = out.json();
    (
        j["code"].as_u64().unwrap_or(0),
        j["msg"].as_str().unwrap_or_default().to_string(),
    )
}

/// Every plugin answers an ADD with `key` mistyped as its reference does, except where
/// `differs` names the plugin, with cnibox's own answer.
fn same_as_the_reference(key: &str, value: serde_json::Value, differs: &[(&str, u64, &str)]) {
    common::require_root();
    let env = TestEnv::new();
    env.host
        .ip(&["link", "add", MASTER, "type", "veth", "peer", "name", "keys1"]);
    env.host.ip(&["link", "set", MASTER, "up"]);
    for (applet, reference) in PLUGINS {
        let ours = add_with(&env, env.call(applet), key, &value);
        match differs.iter().find(|(a, _, _)| a == applet) {
            Some((_, code, msg)) => assert_eq!(ours, (*code, msg.to_string()), "{applet} {key}"),
            None => {
                let Some(call) = env.reference(reference) else {
                    return;
                };
                let theirs = add_with(&env, call, key, &value);
                assert_eq!(ours, theirs, "{applet} (reference {reference}) with {key}: {value}");
            }
        }
    }
}

#[test]
fn cni_version_is_read_once_by_the_entry_point() {
    same_as_the_reference("cniVersion", json!(5), &[]);
}

#[test]
fn name_is_read_once_by_the_entry_point() {
    same_as_the_reference("name", json!(5), &[]);
}

#[test]
fn type_is_a_string_for_every_plugin() {
    same_as_the_reference("type", json!(5), &[]);
}

#[test]
fn capabilities_map_names_to_booleans() {
    same_as_the_reference("capabilities", json!({"portMappings": "yes"}), &[]);
}

#[test]
fn ipam_is_one_reader() {
    same_as_the_reference("ipam", json!(5), &[]);
    same_as_the_reference("ipam", json!({"type": 5}), &[]);
}

#[test]
fn dns_is_one_reader() {
    same_as_the_reference("dns", json!(5), &[]);
    same_as_the_reference("dns", json!({"nameservers": "192.0.2.53"}), &[]);
}

#[test]
fn runtime_config_is_one_reader() {
    same_as_the_reference("runtimeConfig", json!(5), &[]);
}

#[test]
fn args_is_one_reader() {
    same_as_the_reference("args", json!(5), &[]);
}

#[test]
fn prev_result_is_one_reader() {
    same_as_the_reference("prevResult", json!(5), &[]);
}
