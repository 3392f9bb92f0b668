//! static IPAM as a process and under bridge, veth and macvlan: every spec version's
//! result, the address sources (config, `CNI_ARGS` `IP=`/`GATEWAY=`, `args.cni.ips`,
//! `runtimeConfig.ips`) and their order, CHECK, DEL, STATUS and GC, and differential runs
//! against Debian's reference (results and errors alike; under bridge, the container's
//! addresses and routes too).
use crate::common;
use crate::plugin_state;

use common::{Netns, TestEnv, ALL_VERSIONS};
use plugin_state::{at_least, reference_versions};
use serde_json::{json, Value};

fn conf(version: &str, ipam: Value) -> Value {
    let mut ipam = ipam;
    ipam["type"] = json!("static");
    json!({"cniVersion": version, "name": "stnet", "type": "static", "ipam": ipam})
}

fn dual_stack() -> Value {
    json!({
        "addresses": [{"address": "10.10.0.5/24", "gateway": "10.10.0.1"}, {"address": "2001:db8::5/64"}],
        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.10.0.254"}, {"dst": "::/0", "gw": "2001:db8::1"}],
        "dns": {"nameservers": ["10.10.0.53"], "domain": "example.com", "search": ["example.com"], "options": ["ndots:2"]}
    })
}

/// The dual-stack config's result in the shape of `version`.
fn expected_dual_stack(version: &str) -> Value {
    let dns = json!({"nameservers": ["10.10.0.53"], "domain": "example.com", "search": ["example.com"], "options": ["ndots:2"]});
    let routes4 = json!([{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.10.0.254"}]);
    if !at_least(version, "0.3.0") {
        return json!({"cniVersion": version,
            "ip4": {"ip": "10.10.0.5/24", "gateway": "10.10.0.1", "routes": routes4},
            "ip6": {"ip": "2001:db8::5/64", "routes": [{"dst": "::/0", "gw": "2001:db8::1"}]},
            "dns": dns});
    }
    let mut ips = json!([{"address": "10.10.0.5/24", "gateway": "10.10.0.1"}, {"address": "2001:db8::5/64"}]);
    if !at_least(version, "1.0.0") {
        ips[0]["version"] = json!("4");
        ips[1]["version"] = json!("6");
    }
    json!({"cniVersion": version, "ips": ips,
        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.10.0.254"}, {"dst": "::/0", "gw": "2001:db8::1"}],
        "dns": dns})
}

#[test]
fn add_check_del_in_every_version() {
    let env = TestEnv::new();
    let c = env.container();
    for version in ALL_VERSIONS {
        let conf = conf(version, dual_stack());
        let out = env
            .call("static")
            .exec("ADD", "c1", c.path_str(), "eth0", &conf)
            .success();
        assert_eq!(out, expected_dual_stack(version), "{version}");
        if at_least(version, "0.4.0") {
            let mut with_prev = conf.clone();
            with_prev["prevResult"] = out.clone();
            env.call("static")
                .exec("CHECK", "c1", c.path_str(), "eth0", &with_prev)
                .success();
        }
        // nothing was allocated: DEL succeeds with or without a netns, twice
        for netns in [c.path_str(), ""] {
            env.call("static").exec("DEL", "c1", netns, "eth0", &conf).success();
        }
    }
}

#[test]
fn route_fields_of_1_1_0_are_kept() {
    let env = TestEnv::new();
    let c = env.container();
    let ipam = json!({"addresses": [{"address": "10.10.0.5/24"}],
        "routes": [{"dst": "10.20.0.0/16", "gw": "10.10.0.1", "mtu": 1400, "advmss": 1360, "priority": 7, "table": 100, "scope": 0}]});
    let out = env
        .call("static")
        .exec("ADD", "c1", c.path_str(), "eth0", &conf("1.1.0", ipam.clone()))
        .success();
    assert_eq!(
        out["routes"],
        json!([{"dst": "10.20.0.0/16", "gw": "10.10.0.1", "mtu": 1400, "advmss": 1360, "priority": 7, "table": 100, "scope": 0}])
    );
    let out = env
        .call("static")
        .exec("ADD", "c1", c.path_str(), "eth0", &conf("1.0.0", ipam))
        .success();
    assert_eq!(
        out["routes"],
        json!([{"dst": "10.20.0.0/16", "gw": "10.10.0.1"}]),
        "1.0.0 has no such fields"
    );
}

/// Config addresses, then `CNI_ARGS` `IP=` added with `GATEWAY=` matched to them by
/// subnet; `args.cni.ips` replaces them all, `runtimeConfig.ips` replaces those.
#[test]
fn addresses_from_every_source_in_the_references_order() {
    let env = TestEnv::new();
    let c = env.container();
    let ips = |v: &Value| -> Vec<(String, Option<String>)> {
        v["ips"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["address"].as_str().unwrap().into(),
                    i["gateway"].as_str().map(String::from),
                )
            })
            .collect()
    };
    let pair = |a: &str, g: Option<&str>| (a.to_string(), g.map(String::from));
    let base = conf(
        "1.0.0",
        json!({"addresses": [{"address": "10.10.0.5/24", "gateway": "10.10.0.1"}]}),
    );
    let add = |conf: &Value, cni_args: &str| {
        env.call("static")
            .verb("ADD", "c1", c.path_str(), "eth0")
            .env("CNI_ARGS", cni_args)
            .config(conf)
            .run()
    };
    let out = add(
        &base,
        "IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.20.0.5/24, 2001:db8::5/64;GATEWAY=10.20.0.1,2001:db8::1,10.10.0.9",
    )
    .success();
    assert_eq!(
        ips(&out),
        [
            pair("10.10.0.5/24", Some("10.10.0.1")),
            pair("10.20.0.5/24", Some("10.20.0.1")),
            pair("2001:db8::5/64", Some("2001:db8::1")),
        ],
        "a GATEWAY= never reaches a config address (the reference parses those later)"
    );
    let mut with_args = base.clone();
    with_args["args"] = json!({"cni": {"ips": ["10.30.0.5/24"]}});
    assert_eq!(
        ips(&add(&with_args, "IP=10.20.0.5/24").success()),
        [pair("10.30.0.5/24", None)]
    );
    let mut with_runtime = with_args.clone();
    with_runtime["runtimeConfig"] = json!({"ips": ["10.40.0.5/24", "::ffff:10.50.0.5/120"]});
    assert_eq!(
        ips(&add(&with_runtime, "").success()),
        [pair("10.40.0.5/24", None), pair("10.50.0.5/24", None)],
        "an IPv4-mapped address is its IPv4 address"
    );
}

/// Every verb but ADD needs nothing: DEL never reads the config, STATUS and GC have
/// nothing to report or collect.
#[test]
fn del_status_and_gc_succeed_without_state() {
    let env = TestEnv::new();
    let c = env.container();
    env.call("static")
        .exec(
            "DEL",
            "c1",
            c.path_str(),
            "eth0",
            &json!({"cniVersion": "1.0.0", "name": "n", "ipam": 5}),
        )
        .success();
    let conf = conf("1.1.0", dual_stack());
    env.call("static").command("STATUS").config(&conf).run().success();
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([]);
    env.call("static").command("GC").config(&gc).run().success();
    let msg = env
        .call("static")
        .command("STATUS")
        .config(&conf_v("1.0.0"))
        .run()
        .failure(1);
    assert_eq!(msg, "config version does not allow STATUS");
}

fn conf_v(version: &str) -> Value {
    conf(version, dual_stack())
}

/// The dual-stack config and its ADD result.
fn dual_stack_added(env: &TestEnv, c: &Netns) -> (Value, Value) {
    let conf = conf("1.0.0", dual_stack());
    let prev = env
        .call("static")
        .exec("ADD", "c1", c.path_str(), "eth0", &conf)
        .success();
    (conf, prev)
}

/// CHECK: every configured address in prevResult, with the configured gateway. An address
/// missing from prevResult fails too (the reference lets it pass).
#[test]
fn check_compares_addresses_and_gateways() {
    let env = TestEnv::new();
    let c = env.container();
    let (conf, prev) = dual_stack_added(&env, &c);
    let check = |prev: Value| {
        let mut with_prev = conf.clone();
        with_prev["prevResult"] = prev;
        env.call("static").exec("CHECK", "c1", c.path_str(), "eth0", &with_prev)
    };
    let mut other_gw = prev.clone();
    other_gw["ips"][0]["gateway"] = json!("10.10.0.2");
    assert_eq!(
        check(other_gw).failure(999),
        "static: Failed to match addr 10.10.0.5 on interface eth0"
    );
    // no gateway configured for the IPv6 address: any in prevResult will do
    let mut v6_gw = prev.clone();
    v6_gw["ips"][1]["gateway"] = json!("2001:db8::99");
    check(v6_gw).success();
    let mut missing = prev.clone();
    missing["ips"].as_array_mut().unwrap().remove(1);
    assert_eq!(
        check(missing).failure(999),
        "static: Failed to find addr 2001:db8::5 on interface eth0"
    );
    let msg = env
        .call("static")
        .exec("CHECK", "c1", c.path_str(), "eth0", &conf)
        .failure(999);
    assert_eq!(msg, "Required prevResult missing");
}

// ---- against the reference --------------------------------------------------------------

/// One call's answer: the result, or the error's code and message.
fn answer(out: common::CallOutput) -> Value {
    if out.ok() {
        return if out.stdout.trim().is_empty() {
            Value::Null
        } else {
            out.json()
        };
    }
    let j = out.json();
    json!({"code": j["code"], "msg": j["msg"]})
}

/// ADD through cnibox and the reference, with `cni_args`: the same answer.
fn same_add(env: &TestEnv, c: &Netns, conf: &Value, cni_args: &str) -> Value {
    let run = |call: common::Call| {
        answer(
            call.verb("ADD", "c1", c.path_str(), "eth0")
                .env("CNI_ARGS", cni_args)
                .config(conf)
                .run(),
        )
    };
    let ours = run(env.call("static"));
    let theirs = run(env.reference("static").unwrap());
    assert_eq!(
        ours, theirs,
        "{conf} CNI_ARGS={cni_args} (left: cnibox, right: the reference)"
    );
    ours
}

#[test]
fn differential_results_in_every_version() {
    if common::reference_dir().is_none() {
        return;
    }
    let env = TestEnv::new();
    let c = env.container();
    let configs = [
        dual_stack(),
        json!({"addresses": [{"address": "10.10.0.5/24"}, {"address": "10.10.1.5/24", "gateway": "10.10.1.1"}]}),
        json!({"addresses": []}),
        json!({}),
        json!({"addresses": [{"address": "10.10.0.5/24", "ADDRESS": "10.10.0.6/24"}], "routes": [null, {"dst": "10.0.0.0/8"}]}),
        json!({"Addresses": [{"Address": {"IP": "10.9.9.9", "Mask": "////AA=="}, "address": "x"}], "DNS": {"Nameservers": ["1.1.1.1"]}}),
    ];
    for version in reference_versions() {
        for ipam in &configs {
            // the reference prints a `null` route as such; cnibox leaves it out
            if ipam["routes"].as_array().is_some_and(|r| r.contains(&Value::Null)) {
                continue;
            }
            let mut conf = conf(version, ipam.clone());
            same_add(&env, &c, &conf, "");
            same_add(&env, &c, &conf, "IP=10.30.0.5/24;GATEWAY=10.30.0.1");
            conf["args"] = json!({"cni": {"ips": ["10.40.0.5/24", "2001:db8:1::5/64"]}});
            same_add(&env, &c, &conf, "");
            conf["runtimeConfig"] = json!({"ips": ["10.50.0.5/24"]});
            same_add(&env, &c, &conf, "");
        }
    }
    // no cniVersion: 0.1.0's shape
    let mut no_version = conf("1.0.0", dual_stack());
    no_version.as_object_mut().unwrap().remove("cniVersion");
    same_add(&env, &c, &no_version, "");
}

#[test]
fn differential_errors_match_the_references_code_and_message() {
    if common::reference_dir().is_none() {
        return;
    }
    let env = TestEnv::new();
    let c = env.container();
    let a = |s: &str| json!({"addresses": [{"address": s}]});
    let cases: Vec<(Value, &str)> = vec![
        (json!({"cniVersion": "1.0.0", "name": "stnet"}), ""),
        (json!({"cniVersion": "1.0.0", "name": "stnet", "ipam": null}), ""),
        (conf("1.0.0", a("10.10.0.5")), ""),
        (conf("1.0.0", a("10.10.0.5/33")), ""),
        (conf("1.0.0", a("bogus/24")), ""),
        (conf("1.0.0", json!({"addresses": [null]})), ""),
        (
            conf(
                "1.0.0",
                json!({"addresses": [{"address": "10.10.0.5/24", "gateway": "x"}]}),
            ),
            "",
        ),
        (
            conf(
                "1.0.0",
                json!({"addresses": [{"address": "10.10.0.5/24", "gateway": 5}]}),
            ),
            "",
        ),
        (conf("1.0.0", json!({"addresses": [{"address": 5}]})), ""),
        (conf("1.0.0", json!({"addresses": [{"Address": "10.10.0.5/24"}]})), ""),
        (
            conf(
                "1.0.0",
                json!({"addresses": [{"address": "10.10.0.5/24", "Version": 4}]}),
            ),
            "",
        ),
        (
            conf(
                "1.0.0",
                json!({"addresses": [{"address": "10.10.0.5/24", "Address": {"IP": "x"}}]}),
            ),
            "",
        ),
        (conf("1.0.0", json!({"addresses": 5})), ""),
        (conf("1.0.0", json!({"addresses": [5]})), ""),
        (conf("1.0.0", json!({"routes": [{"dst": "x"}]})), ""),
        (conf("1.0.0", json!({"routes": [{"dst": 5}]})), ""),
        (conf("1.0.0", json!({"routes": [{"dst": "10.0.0.0/8", "gw": 5}]})), ""),
        (conf("1.0.0", json!({"routes": 5})), ""),
        (conf("1.0.0", json!({"dns": 5})), ""),
        (conf("1.0.0", json!({"dns": {"search": "x"}})), ""),
        (conf("1.0.0", json!({"Name": 5})), ""),
        (
            conf(
                "0.2.0",
                json!({"addresses": [{"address": "10.10.0.5/24"}, {"address": "10.10.1.5/24"}]}),
            ),
            "",
        ),
        (
            conf(
                "0.1.0",
                json!({"addresses": [{"address": "2001:db8::5/64"}, {"address": "2001:db8:1::5/64"}]}),
            ),
            "",
        ),
        (conf("0.2.0", a("10.10.0.5/24")), "IP=10.10.1.5/24"),
        (conf("1.0.0", a("10.10.0.5/24")), "IP=10.10.1.5"),
        (conf("1.0.0", a("10.10.0.5/24")), "IP=10.10.1.5/24;GATEWAY=bogus"),
        (conf("1.0.0", a("10.10.0.5/24")), "K8S_POD_NAME=p"),
        (conf("1.0.0", a("10.10.0.5/24")), "IP"),
    ];
    for (conf, cni_args) in cases {
        let answer = same_add(&env, &c, &conf, cni_args);
        assert_eq!(answer["code"], 999, "{conf} {cni_args}: {answer}");
    }
    for (key, value) in [
        ("runtimeConfig", json!({"ips": ["10.10.0.5"]})),
        ("runtimeConfig", json!({"ips": 5})),
        ("runtimeConfig", json!(5)),
        ("args", json!({"cni": {"ips": ["x"]}})),
        ("args", json!({"cni": 5})),
        ("args", json!({"cni": {"ips": [5]}})),
    ] {
        let mut conf = conf("1.0.0", dual_stack());
        conf[key] = value;
        let answer = same_add(&env, &c, &conf, "");
        assert_eq!(answer["code"], 999, "{conf}: {answer}");
    }
}

#[test]
fn differential_check() {
    if common::reference_dir().is_none() {
        return;
    }
    let env = TestEnv::new();
    let c = env.container();
    let (conf, prev) = dual_stack_added(&env, &c);
    let mut bad_gw = prev.clone();
    bad_gw["ips"][0]["gateway"] = json!("10.10.0.2");
    for prev in [Some(prev.clone()), Some(bad_gw), None] {
        let mut c2 = conf.clone();
        if let Some(p) = prev {
            c2["prevResult"] = p;
        }
        let run = |call: common::Call| answer(call.exec("CHECK", "c1", c.path_str(), "eth0", &c2));
        assert_eq!(run(env.call("static")), run(env.reference("static").unwrap()), "{c2}");
    }
    // the one deliberate difference: an address missing from prevResult
    let mut missing = conf.clone();
    let mut p = prev;
    p["ips"].as_array_mut().unwrap().remove(0);
    missing["prevResult"] = p;
    env.reference("static")
        .unwrap()
        .exec("CHECK", "c1", c.path_str(), "eth0", &missing)
        .success();
    env.call("static")
        .exec("CHECK", "c1", c.path_str(), "eth0", &missing)
        .failure(999);
}

// ---- under the interface plugins ----------------------------------------------------------

/// `plugin` with static IPAM: (result without interfaces and MACs, container addresses,
/// container routes); the programs the call executed, when `traced`.
fn attach(env: &TestEnv, reference: bool, plugin: &str, c: &Netns, extra: Value) -> (Value, Vec<String>, Vec<String>) {
    let mut conf = json!({"cniVersion": "1.0.0", "name": "stnet", "type": plugin,
        "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24", "gateway": "10.10.0.1"}, {"address": "2001:db8::5/64", "gateway": "2001:db8::1"}],
                 "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16"}],
                 "dns": {"nameservers": ["10.10.0.53"]}}});
    plugin_state::merge(&mut conf, &extra);
    let call = if reference {
        env.reference(if plugin == "veth" { "ptp" } else { plugin }).unwrap()
    } else {
        env.call(plugin)
    };
    let mut out = call.exec("ADD", "c1", c.path_str(), "eth0", &conf).success();
    out.as_object_mut().unwrap().remove("interfaces");
    for ip in out["ips"].as_array_mut().unwrap() {
        ip.as_object_mut().unwrap().remove("interface");
    }
    (out, plugin_state::addrs(c), plugin_state::routes(c))
}

fn master(env: &TestEnv) {
    env.host
        .ip(&["link", "add", "stm0", "type", "veth", "peer", "name", "stm1"]);
    env.host.ip(&["link", "set", "stm0", "up"]);
}

/// bridge, veth and macvlan with static IPAM: the container gets the configured addresses
/// and routes, as with the reference plugins; cnibox runs static in-process (no exec).
#[test]
fn under_bridge_veth_and_macvlan_as_the_reference() {
    if common::reference_dir().is_none() {
        return;
    }
    for (plugin, extra) in [
        ("bridge", json!({"bridge": "stbr0", "isGateway": false})),
        ("veth", json!({})),
        ("macvlan", json!({"master": "stm0"})),
    ] {
        let (ours, theirs) = (TestEnv::new(), TestEnv::new());
        master(&ours);
        master(&theirs);
        let (c1, c2) = (ours.container(), theirs.container());
        let mut a = attach(&ours, false, plugin, &c1, extra.clone());
        let mut b = attach(&theirs, true, plugin, &c2, extra.clone());
        // the reference v1.1.1's bridge and ptp replace IPAM's DNS with their own config's
        // (empty here); cnibox's keep it unless the config sets one, as the reference's do
        // since; macvlan always takes its config's
        let dns = match plugin {
            "macvlan" => json!({}),
            _ => json!({"nameservers": ["10.10.0.53"]}),
        };
        assert_eq!(a.0["dns"], dns, "{plugin}");
        a.0.as_object_mut().unwrap().remove("dns");
        b.0.as_object_mut().unwrap().remove("dns");
        assert_eq!(a, b, "{plugin} (left: cnibox, right: the reference)");
        assert!(a.1.iter().any(|l| l.contains("10.10.0.5/24")), "{plugin}: {:?}", a.1);
    }
}

#[test]
fn in_process_under_each_interface_plugin_with_check_and_del() {
    if std::process::Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is missing: run sh tests/deps.sh");
    }
    let env = TestEnv::new();
    master(&env);
    for (plugin, extra) in [
        ("bridge", json!({"bridge": "stbr0"})),
        ("veth", json!({})),
        ("macvlan", json!({"master": "stm0"})),
    ] {
        let c = env.container();
        let mut conf = json!({"cniVersion": "1.0.0", "name": "stnet", "type": plugin,
            "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24", "gateway": "10.10.0.1"}]}});
        plugin_state::merge(&mut conf, &extra);
        let log = env.tmp.path().join(format!("strace-{plugin}"));
        let out = env
            .call(plugin)
            .verb("ADD", "c1", c.path_str(), "eth0")
            .config(&conf)
            .run_under(&["strace", "-f", "-qq", "-e", "trace=execve", "-o", log.to_str().unwrap()]);
        let result = out.success();
        let execs = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| l.contains("execve(\"") && !l.contains("= -1"))
            .count();
        assert_eq!(execs, 1, "{plugin}: static ran in-process");
        assert_eq!(result["ips"][0]["address"], "10.10.0.5/24", "{plugin}");
        let mut with_prev = conf.clone();
        with_prev["prevResult"] = result;
        env.call(plugin)
            .exec("CHECK", "c1", c.path_str(), "eth0", &with_prev)
            .success();
        env.call(plugin)
            .exec("DEL", "c1", c.path_str(), "eth0", &with_prev)
            .success();
        assert_eq!(c.links(), ["lo"], "{plugin}");
    }
}

/// A config static refuses fails the interface plugin's ADD with static's message, and
/// nothing stays: no link in the container, no veth on the host.
#[test]
fn a_refused_config_under_bridge_leaves_nothing() {
    let env = TestEnv::new();
    let c = env.container();
    let conf = json!({"cniVersion": "1.0.0", "name": "stnet", "type": "bridge", "bridge": "stbr0",
        "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5"}]}});
    let msg = env
        .call("bridge")
        .exec("ADD", "c1", c.path_str(), "eth0", &conf)
        .failure(999);
    assert_eq!(
        msg,
        "the 'address' field is expected to be in CIDR notation, got: '10.10.0.5'"
    );
    assert_eq!(c.links(), ["lo"]);
    assert!(
        !env.host.links().iter().any(|l| l.starts_with("veth")),
        "{:?}",
        env.host.links()
    );
}

/// DEL in every situation a runtime produces, in every spec version: the shared matrix.
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    del_matrix::run(Subject {
        applet: "static",
        keys: json!({"ipam": {"type": "static", "addresses": [{"address": "10.1.2.5/24", "gateway": "10.1.2.1"}]}}),
        attachment: Attachment::Addresses,
    });
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("static");
}
