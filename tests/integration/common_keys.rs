//! The keys every plugin config shares (Go's `types.NetConf` and what runtimes add:
//! cniVersion, name, type, ipam, dns, runtimeConfig, args, prevResult). Each has one reader
//! (the entry point for cniVersion and name, `cni::config` for the rest), so a key means the
//! same and fails with the same words in every plugin that reads it; the context in front is
//! the plugin's own, as in the reference. Each test runs plugin applets with a key mistyped;
//! a plugin whose reference ignores the key ignores it too.
//!
//! The entry point's keys are checked here for every plugin applet of the applet table. The
//! keys a plugin reads itself ([`PLUGIN_KEYS`]) are checked by the test `common_keys` in the
//! applet's own module ([`check_reads`]), which every plugin applet has
//! (`applets::every_plugin_applet_has_its_del_matrix_and_common_keys`).
use crate::common;

use cnibox::applets::{Kind, APPLETS};
use common::TestEnv;
use serde_json::json;

/// The shared keys a plugin reads itself, or ignores as its reference does.
pub const PLUGIN_KEYS: &[&str] = &["ipam", "dns", "runtimeConfig", "args", "prevResult"];

/// Every plugin applet (aliases are the applet they name).
fn plugins() -> impl Iterator<Item = &'static str> {
    APPLETS
        .iter()
        .filter(|a| matches!(a.kind, Kind::Plugin(_)))
        .map(|a| a.name)
}

/// Go's words for a number where the struct field `field` (`NetConf.ipam`) of type `ty` is.
pub fn mistyped(field: &str, ty: &str) -> String {
    format!("json: cannot unmarshal number into Go struct field {field} of type {ty}")
}

/// How a plugin fails on a shared key it reads: (key, code, message).
pub type Read = (&'static str, u64, String);

/// `key` decoded into the plugin's struct field `field` (`NetConf.dns`), a Go struct, with
/// the plugin's `ctx` in front.
pub fn struct_read(key: &'static str, ctx: &str, field: &str) -> Read {
    (key, 999, format!("{ctx}{}", mistyped(field, "struct")))
}

/// `ipam` and `dns` as the reference's interface plugins read them: into their `NetConf`,
/// in `loadConf`, whose error begins `failed to load netconf: `.
pub fn load_conf_reads() -> Vec<Read> {
    let ctx = "failed to load netconf: ";
    vec![
        struct_read("ipam", ctx, "NetConf.ipam"),
        struct_read("dns", ctx, "NetConf.dns"),
    ]
}

/// `prevResult` through the one prevResult reader, with the plugin's `ctx` in front.
pub fn prev_result_read(ctx: &str) -> Read {
    let core = mistyped("NetConf.prevResult", "map[string]interface {}");
    ("prevResult", 999, format!("{ctx}could not parse prevResult: {core}"))
}

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

/// ADD of `applet` with `key` mistyped: the `(code, message)` of `reads` for the key, or,
/// for a key not in `reads`, no failure because of it (the message, if any, does not name it).
fn check_key(env: &TestEnv, applet: &str, key: &str, reads: &[Read]) {
    let (code, msg) = add_with_mistyped(env, applet, key);
    match reads.iter().find(|(k, _, _)| *k == key) {
        Some((_, want_code, want)) => assert_eq!((code, msg.as_str()), (*want_code, want.as_str()), "{applet} {key}"),
        None => assert!(!msg.contains(&format!(".{key} ")), "{applet} reads {key}: {msg}"),
    }
}

/// `applet` fails with `(key, code, message)` of `reads` for each key it reads, and ignores
/// the other [`PLUGIN_KEYS`].
pub fn check_reads(applet: &str, reads: &[Read]) {
    common::require_root();
    let env = TestEnv::new();
    for (key, _, _) in reads {
        assert!(PLUGIN_KEYS.contains(key), "{key} is not a key plugins read themselves");
    }
    for key in PLUGIN_KEYS {
        check_key(&env, applet, key, reads);
    }
}

/// Every plugin applet fails on the entry point's key `key` with `want(applet)`, or (None)
/// does not fail because of it.
fn check_entry_point_key(key: &'static str, want: impl Fn(&str) -> Option<(u64, String)>) {
    common::require_root();
    let env = TestEnv::new();
    for applet in plugins() {
        let reads: Vec<Read> = want(applet).map(|(code, msg)| (key, code, msg)).into_iter().collect();
        check_key(&env, applet, key, &reads);
    }
}

#[test]
fn cni_version_is_read_once_by_the_entry_point() {
    let core = mistyped(".cniVersion", "string");
    check_entry_point_key("cniVersion", |_| {
        Some((6, format!("decoding version from network config: {core}")))
    });
}

#[test]
fn name_is_read_once_by_the_entry_point() {
    let core = mistyped(".name", "string");
    check_entry_point_key("name", |_| {
        Some((6, format!("error unmarshall network config: {core}")))
    });
}

#[test]
fn type_is_not_checked_by_plugins() {
    // Runtimes pick the plugin by `type`; the reference plugins never look at it.
    check_entry_point_key("type", |_| None);
}
