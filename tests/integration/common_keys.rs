//! The keys every plugin config shares (Go's `types.NetConf`, which every reference plugin
//! embeds and so decodes in full, and what runtimes add: `runtimeConfig`, `args`). Each
//! has one reader in cnibox (the entry point for cniVersion and name, `cni::config` for
//! the rest), so a key means the same and fails with the same words in every plugin that
//! reads it. A plugin and its Go reference get the same ADD with a shared key mistyped, and
//! their answers (code and message) must be equal.
//!
//! The entry point's keys are checked here for every plugin applet of the applet table.
//! The keys a plugin decodes itself ([`PLUGIN_KEYS`]) are checked by the test `common_keys`
//! in the applet's own module ([`same_as_the_reference`]), which every plugin applet has
//! (`applets::every_plugin_applet_has_its_del_matrix_and_common_keys`).
use crate::common;

use cnibox::applets::{Kind, APPLETS};
use common::TestEnv;
use serde_json::{json, Value};

/// The shared keys a plugin decodes itself, each with the mistyped values it gets.
pub fn plugin_keys() -> Vec<(&'static str, Value)> {
    vec![
        ("capabilities", json!({"portMappings": "yes"})),
        ("ipam", json!(5)),
        ("ipam", json!({"type": 5})),
        ("dns", json!(5)),
        ("dns", json!({"nameservers": "192.0.2.53"})),
        ("runtimeConfig", json!(5)),
        ("args", json!(5)),
        ("prevResult", json!(5)),
    ]
}

/// The link macvlan stacks on, made in each test's host namespace.
const MASTER: &str = "keys0";

/// The Debian reference binary an applet replaces.
fn reference_of(applet: &str) -> &str {
    match applet {
        "veth" => "ptp",
        other => other,
    }
}

/// Every plugin applet (aliases are the applet they name).
fn plugins() -> impl Iterator<Item = &'static str> {
    APPLETS
        .iter()
        .filter(|a| matches!(a.kind, Kind::Plugin(_)))
        .map(|a| a.name)
}

/// A host namespace with the macvlan master, and a `subnet.env` for flannel.
fn env() -> TestEnv {
    common::require_root();
    let env = TestEnv::new();
    env.host
        .ip(&["link", "add", MASTER, "type", "veth", "peer", "name", "keys1"]);
    env.host.ip(&["link", "set", MASTER, "up"]);
    std::fs::write(
        env.tmp.path().join("subnet.env"),
        "FLANNEL_NETWORK=10.78.0.0/16\nFLANNEL_SUBNET=10.78.1.1/24\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n",
    )
    .unwrap();
    env
}

/// The answer to an ADD with the key `key` set to `value` in an otherwise valid config:
/// (code, msg), (0, "") on success. Each call has its own container and container ID.
fn add_with(env: &TestEnv, call: common::Call, key: &str, value: &Value) -> (u64, String) {
    add_adjusted(env, call, key, value, &|_| {})
}

/// [`add_with`] with the otherwise valid config changed by `adjust` first.
fn add_adjusted(
    env: &TestEnv,
    call: common::Call,
    key: &str,
    value: &Value,
    adjust: &dyn Fn(&mut Value),
) -> (u64, String) {
    let c = env.container();
    let id = common::unique("keys");
    let mut conf = json!({
        "cniVersion": "1.0.0",
        "name": "keys",
        "type": "plugin",
        "bridge": "br-keys",
        "master": MASTER,
        "ipam": {"type": "host-local", "subnet": "10.77.0.0/24", "dataDir": env.data_dir},
        // tuning's saved state, firewall's records and flannel's configs stay in the temp dir
        "dataDir": env.tmp.path().join("plugin-state"),
        "subnetFile": env.tmp.path().join("subnet.env"),
        "prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": c.path_str()}],
                       "ips": [{"address": "10.77.0.9/24", "interface": 0}]},
    });
    adjust(&mut conf);
    conf[key] = value.clone();
    call.exec("ADD", &id, c.path_str(), "eth0", &conf).answer()
}

/// Whether Debian ships the reference binary `applet` replaces.
fn has_reference(applet: &str) -> bool {
    common::reference_dir().is_some_and(|d| d.join(reference_of(applet)).exists())
}

/// `applet` answers an ADD with `key` set to `value` as its reference does, the
/// reference's answer passed through `expect` first.
fn same_answer(env: &TestEnv, applet: &str, key: &str, value: &Value, expect: &dyn Fn((u64, String)) -> (u64, String)) {
    let Some(reference) = env.reference(reference_of(applet)) else {
        return;
    };
    assert!(
        has_reference(applet),
        "Debian ships no {} binary to compare {applet} with: state its answers with common_keys::answers",
        reference_of(applet)
    );
    let ours = add_with(env, env.call(applet), key, value);
    let theirs = expect(add_with(env, reference, key, value));
    assert_eq!(
        ours, theirs,
        "{applet} with {key}: {value} (left: cnibox, right: the reference)"
    );
}

/// `applet` answers an ADD with each of [`plugin_keys`] mistyped as its reference does.
pub fn same_as_the_reference(applet: &str) {
    let env = env();
    for (key, value) in plugin_keys() {
        same_answer(&env, applet, key, &value, &|answer| answer);
    }
}

/// [`same_as_the_reference`] for an applet whose link kind the kernel may lack: where the
/// reference's ADD gets as far as the link and the kernel refuses it as unknown (its
/// answer is `refused`, e.g. `failed to create ipvlan: operation not supported`), cnibox's
/// answer is `missing` (`ipvlan: the kernel has no ipvlan support (modprobe ipvlan)`); with
/// `missing` None the kernel has the kind and the answers are the same.
pub fn same_as_the_reference_or_missing_kind(applet: &str, refused: &str, missing: Option<&str>) {
    let env = env();
    let expect = |(code, msg): (u64, String)| match missing {
        Some(ours) if msg == refused => (code, ours.to_string()),
        _ => (code, msg),
    };
    for (key, value) in plugin_keys() {
        same_answer(&env, applet, key, &value, &expect);
    }
}

/// For an applet whose reference Debian does not ship (so [`same_as_the_reference`] has
/// nothing to compare with): its answer to each of [`plugin_keys`] mistyped is `expected`'s
/// (the code and message of its reference's source; `(0, "")` where it ignores the key),
/// with the otherwise valid config changed by `adjust` to be valid for the applet.
pub fn answers(applet: &str, adjust: &dyn Fn(&mut Value), expected: impl Fn(&str, &Value) -> (u64, String)) {
    let env = env();
    for (key, value) in plugin_keys() {
        let ours = add_adjusted(&env, env.call(applet), key, &value, adjust);
        assert_eq!(ours, expected(key, &value), "{applet} with {key}: {value}");
    }
}

/// Every plugin applet answers an ADD with the entry point's key `key` mistyped as its
/// reference does.
fn entry_point_key(key: &str) {
    let env = env();
    for applet in plugins() {
        if !has_reference(applet) {
            // the entry point is the same code in every applet; checked on the others
            eprintln!("{applet}: no reference binary to compare the entry point's {key} with");
            continue;
        }
        same_answer(&env, applet, key, &json!(5), &|answer| answer);
    }
}

#[test]
fn cni_version_is_read_once_by_the_entry_point() {
    entry_point_key("cniVersion");
}

#[test]
fn name_is_read_once_by_the_entry_point() {
    entry_point_key("name");
}

#[test]
fn type_is_a_string_for_every_plugin() {
    entry_point_key("type");
}
