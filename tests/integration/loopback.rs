//! The loopback plugin: the reference loopback test inventory (`lo` UP on ADD, DOWN on DEL,
//! for every spec version), CHECK, chained pass-through of prevResult, the DEL matrix, error
//! paths, and differential runs against the Go loopback in /usr/lib/cni.
use crate::common;
use crate::plugin_state;

use common::{Call, CallOutput, Netns, TestEnv, ALL_VERSIONS};
use serde_json::{json, Value};

fn conf(version: &str) -> Value {
    json!({"cniVersion": version, "name": "loopback-test", "type": "loopback"})
}

fn lo_up(ns: &Netns) -> bool {
    let l = ns.ip_json(&["link", "show", "dev", "lo"]);
    l[0]["flags"].as_array().unwrap().iter().any(|f| f == "UP")
}

/// A container namespace whose `lo` is down, as a runtime creates it.
fn fresh_container(env: &TestEnv) -> Netns {
    let ns = env.container();
    ns.ip(&["link", "set", "lo", "down"]);
    ns
}

fn call(env: &TestEnv, reference: bool) -> Option<Call> {
    if reference {
        env.reference("loopback")
    } else {
        Some(env.call("loopback"))
    }
}

fn run(env: &TestEnv, reference: bool, verb: &str, netns: &str, c: &Value) -> Option<CallOutput> {
    Some(call(env, reference)?.exec(verb, "dummy", netns, "eth0", c))
}

/// The addresses of a result in any shape (0.1/0.2 `ip4`/`ip6`, 0.3+ `ips`).
fn addresses(result: &Value) -> Vec<String> {
    if let Some(ips) = result["ips"].as_array() {
        return ips.iter().map(|i| i["address"].as_str().unwrap().to_string()).collect();
    }
    ["ip4", "ip6"]
        .iter()
        .filter_map(|k| result[k]["ip"].as_str().map(str::to_string))
        .collect()
}

/// loopback_test.go "[ver] sets the lo device to UP" and "... to DOWN", every version, with
/// the result of each version's shape.
#[test]
fn add_sets_lo_up_and_del_sets_it_down_every_version() {
    let env = TestEnv::new();
    for v in ALL_VERSIONS {
        let ns = fresh_container(&env);
        let out = run(&env, false, "ADD", ns.path_str(), &conf(v)).unwrap();
        let r = out.success();
        assert!(lo_up(&ns), "{v}");
        assert_eq!(r["cniVersion"], *v);
        assert_eq!(addresses(&r), vec!["127.0.0.1/8", "::1/128"], "{v}: {r}");
        if plugin_state::at_least(v, "0.3.0") {
            assert_eq!(
                r["interfaces"],
                json!([{"name": "lo", "mac": "00:00:00:00:00:00", "sandbox": ns.path_str()}]),
                "{v}"
            );
            for ip in r["ips"].as_array().unwrap() {
                assert_eq!(ip["interface"], 0, "{v}");
            }
        } else {
            // the spec's 0.1/0.2 shape (see the README's differences)
            assert_eq!(r["ip4"], json!({"ip": "127.0.0.1/8"}), "{v}");
            assert_eq!(r["ip6"], json!({"ip": "::1/128"}), "{v}");
        }
        run(&env, false, "DEL", ns.path_str(), &conf(v)).unwrap().success();
        assert!(!lo_up(&ns), "{v}");
    }
}

#[test]
fn ifname_is_ignored() {
    let env = TestEnv::new();
    let ns = fresh_container(&env);
    let out = env
        .call("loopback")
        .exec("ADD", "c", ns.path_str(), "eth7", &conf("1.0.0"));
    assert_eq!(out.success()["interfaces"][0]["name"], "lo");
    assert!(!ns.has_link("eth7"));
}

#[test]
fn ipv6_disabled_reports_only_ipv4() {
    let env = TestEnv::new();
    let ns = fresh_container(&env);
    ns.exec(&["sysctl", "-q", "-w", "net.ipv6.conf.lo.disable_ipv6=1"]);
    let r = run(&env, false, "ADD", ns.path_str(), &conf("1.0.0"))
        .unwrap()
        .success();
    assert_eq!(addresses(&r), vec!["127.0.0.1/8"]);
}

#[test]
fn check_verifies_lo_is_up() {
    let env = TestEnv::new();
    for v in ALL_VERSIONS.iter().filter(|v| plugin_state::at_least(v, "0.4.0")) {
        let ns = fresh_container(&env);
        let down = run(&env, false, "CHECK", ns.path_str(), &conf(v)).unwrap();
        assert_eq!(down.failure(999), "loopback interface is down", "{v}");
        run(&env, false, "ADD", ns.path_str(), &conf(v)).unwrap().success();
        run(&env, false, "CHECK", ns.path_str(), &conf(v)).unwrap().success();
    }
    let ns = fresh_container(&env);
    let old = run(&env, false, "CHECK", ns.path_str(), &conf("0.3.1")).unwrap();
    assert_eq!(old.failure(1), "config version does not allow CHECK");
}

fn prev_result(version: &str, netns: &str) -> Value {
    if plugin_state::at_least(version, "1.0.0") {
        json!({"cniVersion": version,
               "interfaces": [{"name": "eth0", "mac": "0a:58:0a:01:02:03", "sandbox": netns}],
               "ips": [{"interface": 0, "address": "10.1.2.3/24", "gateway": "10.1.2.1"}],
               "routes": [{"dst": "0.0.0.0/0"}],
               "dns": {"nameservers": ["10.1.2.1"]}})
    } else if plugin_state::at_least(version, "0.3.0") {
        // with `version`: the reference prints an absent one as "" (cnibox derives "4")
        json!({"cniVersion": version,
               "interfaces": [{"name": "eth0", "mac": "0a:58:0a:01:02:03", "sandbox": netns}],
               "ips": [{"version": "4", "interface": 0, "address": "10.1.2.3/24", "gateway": "10.1.2.1"}],
               "routes": [{"dst": "0.0.0.0/0"}],
               "dns": {"nameservers": ["10.1.2.1"]}})
    } else {
        json!({"cniVersion": version, "ip4": {"ip": "10.1.2.3/24", "gateway": "10.1.2.1"},
               "dns": {"nameservers": ["10.1.2.1"]}})
    }
}

/// Chained after another plugin, the prevResult is the result, unchanged (the reference's
/// output, byte for byte).
#[test]
fn chained_passes_prev_result_through_like_the_reference() {
    let env = TestEnv::new();
    for v in plugin_state::reference_versions() {
        let mut outs = vec![];
        for reference in [false, true] {
            let ns = fresh_container(&env);
            let mut c = conf(v);
            c["prevResult"] = prev_result(v, "/var/run/netns/x");
            let Some(out) = run(&env, reference, "ADD", ns.path_str(), &c) else {
                return;
            };
            assert!(lo_up(&ns), "{v}");
            outs.push(out.success());
        }
        assert_eq!(outs[0], outs[1], "{v}");
        let expected = cnibox::cni::CniResult::from_prev_result(
            &cnibox::cni::json::Json::from(&prev_result(v, "/var/run/netns/x")),
            v,
        )
        .unwrap()
        .to_json(v)
        .unwrap();
        assert_eq!(outs[0], expected, "{v}");
    }
}

/// The DEL matrix: twice, namespace gone, no CNI_NETNS, lo already down, every version.
#[test]
fn del_matrix() {
    let env = TestEnv::new();
    for v in ALL_VERSIONS {
        let ns = fresh_container(&env);
        run(&env, false, "ADD", ns.path_str(), &conf(v)).unwrap().success();
        for _ in 0..2 {
            run(&env, false, "DEL", ns.path_str(), &conf(v)).unwrap().success();
            assert!(!lo_up(&ns));
        }
        let path = ns.path_str().to_string();
        drop(ns);
        run(&env, false, "DEL", &path, &conf(v)).unwrap().success();
        let out = env
            .call("loopback")
            .command("DEL")
            .env("CNI_CONTAINERID", "dummy")
            .env("CNI_IFNAME", "lo")
            .config(&conf(v))
            .run();
        out.success();
        // DEL reads no config beyond the entry point's: a broken prevResult is fine
        let mut c = conf(v);
        c["prevResult"] = json!("garbage");
        run(&env, false, "DEL", &path, &c).unwrap().success();
    }
}

/// Errors with the reference's codes and messages (compared with the Go loopback).
#[test]
fn errors_like_the_reference() {
    let env = TestEnv::new();
    let ns = fresh_container(&env);
    ns.ip(&["addr", "add", "192.0.2.9/32", "dev", "lo"]);
    let mut prev_other_family = conf("1.0.0");
    prev_other_family["prevResult"] = json!({"cniVersion": "0.4.0", "ips": []});
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        ("ADD", "/run/netns/cnibox-missing", conf("1.0.0"), "failed to Statfs \"/run/netns/cnibox-missing\": no such file or directory"),
        ("CHECK", "/run/netns/cnibox-missing", conf("1.0.0"), "failed to Statfs \"/run/netns/cnibox-missing\": no such file or directory"),
        ("ADD", ns.path_str(), conf("1.0.0"), "loopback interface found with non-loopback address \"192.0.2.9\""),
        ("ADD", ns.path_str(), prev_other_family, "failed to parse prevResult: could not parse prevResult: result type supports [1.0.0] but unmarshalled CNIVersion is \"0.4.0\""),
    ];
    for (verb, netns, c, msg) in cases {
        let ours = run(&env, false, verb, netns, &c).unwrap();
        // cnibox also speaks 1.1.0, so its list of accepted versions is longer
        let got = ours.failure(999).replace("[1.0.0 1.1.0]", "[1.0.0]");
        assert_eq!(got, msg, "{verb} {c}");
        let Some(theirs) = run(&env, true, verb, netns, &c) else {
            continue;
        };
        assert_eq!(got, theirs.failure(999), "{verb} {c}");
    }
}

/// Same input to both: the kernel state (lo's flags and addresses) after each verb matches,
/// and the results carry the same interface and addresses.
#[test]
fn differential_against_the_reference() {
    let env = TestEnv::new();
    if common::reference_dir().is_none() {
        return;
    }
    for v in plugin_state::reference_versions() {
        let mut seen = vec![];
        for reference in [false, true] {
            let ns = fresh_container(&env);
            let mut add = run(&env, reference, "ADD", ns.path_str(), &conf(v)).unwrap().success();
            if add["interfaces"][0]["sandbox"] == ns.path_str() {
                add["interfaces"][0]["sandbox"] = "<netns>".into();
            }
            let after_add = (lo_up(&ns), ns.addrs("lo"));
            let check = plugin_state::at_least(v, "0.4.0")
                .then(|| run(&env, reference, "CHECK", ns.path_str(), &conf(v)).unwrap().code);
            run(&env, reference, "DEL", ns.path_str(), &conf(v)).unwrap().success();
            let after_del = (lo_up(&ns), ns.addrs("lo"));
            seen.push((addresses(&add), add["interfaces"].clone(), after_add, check, after_del));
        }
        let (ours, theirs) = (&seen[0], &seen[1]);
        assert_eq!(ours.0, theirs.0, "{v} addresses");
        if plugin_state::at_least(v, "0.3.0") {
            assert_eq!(ours.1, theirs.1, "{v} interfaces");
        }
        assert_eq!(
            (&ours.2, &ours.3, &ours.4),
            (&theirs.2, &theirs.3, &theirs.4),
            "{v} kernel state"
        );
    }
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("loopback");
}
