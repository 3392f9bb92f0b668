//! host-local as a process: every spec version's output, DNS, CHECK, DEL, STATUS, GC,
//! differential runs against Debian's reference, mixed use of both on one store, and
//! concurrency. The owner index (`.cnibox-index/`) is cnibox's own addition to the store.
use crate::common;

use common::{read_dir_map, TestEnv, ALL_VERSIONS};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const INDEX: &str = ".cnibox-index";

fn conf(env: &TestEnv, version: &str, ipam: Value) -> Value {
    let mut ipam = ipam;
    ipam["type"] = json!("host-local");
    if ipam.get("dataDir").is_none() {
        ipam["dataDir"] = json!(env.data_dir);
    }
    json!({"cniVersion": version, "name": "hlnet", "ipam": ipam})
}

fn dual_stack_ipam() -> Value {
    json!({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "2001:db8:1::/64"}]],
           "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.1.2.9"}, {"dst": "::/0"}]})
}

/// Reservation files only: the store without `.cnibox-index`.
fn store_files(dir: &Path) -> BTreeMap<String, String> {
    let mut m = read_dir_map(dir);
    m.remove(INDEX);
    m
}

/// The result as the spec version shapes it, for the dual-stack config's first allocation.
fn expected_dual_stack(version: &str) -> Value {
    let routes4 = json!([{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.1.2.9"}]);
    match version {
        "0.1.0" | "0.2.0" => json!({
            "cniVersion": version,
            "ip4": {"ip": "10.1.2.2/24", "gateway": "10.1.2.1", "routes": routes4},
            "ip6": {"ip": "2001:db8:1::2/64", "gateway": "2001:db8:1::1", "routes": [{"dst": "::/0"}]},
        }),
        _ => {
            let old = !matches!(version, "1.0.0" | "1.1.0");
            let mut ips = json!([
                {"address": "10.1.2.2/24", "gateway": "10.1.2.1"},
                {"address": "2001:db8:1::2/64", "gateway": "2001:db8:1::1"},
            ]);
            if old {
                ips[0]["version"] = json!("4");
                ips[1]["version"] = json!("6");
            }
            json!({"cniVersion": version, "ips": ips,
                   "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.1.2.9"}, {"dst": "::/0"}]})
        }
    }
}

/// Results compare without an empty `dns` (the reference prints `"dns": {}`).
fn normalize(mut v: Value) -> Value {
    if v.get("dns") == Some(&json!({})) {
        v.as_object_mut().unwrap().remove("dns");
    }
    v
}

#[test]
fn add_and_del_in_every_version() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let c = env.container();
        let conf = conf(&env, version, dual_stack_ipam());
        let out = env.call("host-local").exec("ADD", "dummy", c.path_str(), "eth0", &conf);
        assert_eq!(normalize(out.success()), expected_dual_stack(version), "{version}");
        let store = env.store("hlnet");
        assert_eq!(store["10.1.2.2"], "dummy\r\neth0", "{version}");
        assert_eq!(store["2001:db8:1::2"], "dummy\r\neth0", "{version}");
        assert_eq!(store["last_reserved_ip.0"], "10.1.2.2");
        assert_eq!(store["last_reserved_ip.1"], "2001:db8:1::2");
        let mode = std::fs::metadata(env.data_dir.join("hlnet/10.1.2.2"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // a second container gets the next addresses
        let out = env.call("host-local").exec("ADD", "other", c.path_str(), "eth0", &conf);
        let v = out.success();
        let first = if version.starts_with("0.1") || version.starts_with("0.2") {
            v["ip4"]["ip"].clone()
        } else {
            v["ips"][0]["address"].clone()
        };
        assert_eq!(first, json!("10.1.2.3/24"), "{version}");
        env.call("host-local")
            .exec("DEL", "dummy", c.path_str(), "eth0", &conf)
            .success();
        env.call("host-local")
            .exec("DEL", "other", c.path_str(), "eth0", &conf)
            .success();
        let left: Vec<String> = store_files(&env.data_dir.join("hlnet")).into_keys().collect();
        assert_eq!(left, ["last_reserved_ip.0", "last_reserved_ip.1", "lock"], "{version}");
    }
}

#[test]
fn two_interfaces_of_one_container_and_duplicate_add() {
    let env = TestEnv::new();
    let c = env.container();
    let conf = conf(&env, "1.0.0", json!({"subnet": "10.1.2.0/24"}));
    let ip = |out: Value| out["ips"][0]["address"].as_str().unwrap().to_string();
    let a = ip(env
        .call("host-local")
        .exec("ADD", "c1", c.path_str(), "eth0", &conf)
        .success());
    let b = ip(env
        .call("host-local")
        .exec("ADD", "c1", c.path_str(), "eth1", &conf)
        .success());
    assert_eq!((a.as_str(), b.as_str()), ("10.1.2.2/24", "10.1.2.3/24"));
    let msg = env
        .call("host-local")
        .exec("ADD", "c1", c.path_str(), "eth0", &conf)
        .failure(999);
    assert_eq!(
        msg,
        "failed to allocate for range 0: 10.1.2.2 has been allocated to c1, duplicate allocation is not allowed"
    );
    env.call("host-local")
        .exec("DEL", "c1", c.path_str(), "eth0", &conf)
        .success();
    let store = env.store("hlnet");
    assert!(!store.contains_key("10.1.2.2"));
    assert_eq!(store["10.1.2.3"], "c1\r\neth1");
}

#[test]
fn range_end_is_inclusive_then_exhausted() {
    let env = TestEnv::new();
    let c = env.container();
    let conf = conf(
        &env,
        "1.0.0",
        json!({"subnet": "10.1.2.0/29", "rangeStart": "10.1.2.5", "rangeEnd": "10.1.2.6"}),
    );
    for (id, want) in [("a", "10.1.2.5/29"), ("b", "10.1.2.6/29")] {
        let v = env
            .call("host-local")
            .exec("ADD", id, c.path_str(), "eth0", &conf)
            .success();
        assert_eq!(v["ips"][0]["address"], json!(want));
    }
    let msg = env
        .call("host-local")
        .exec("ADD", "c", c.path_str(), "eth0", &conf)
        .failure(999);
    assert_eq!(
        msg,
        "failed to allocate for range 0: no IP addresses available in range set: 10.1.2.5-10.1.2.6"
    );
}

#[test]
fn requested_addresses_from_every_source() {
    let env = TestEnv::new();
    let c = env.container();
    let mut conf = conf(
        &env,
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "10.1.3.0/24"}], [{"subnet": "2001:db8:1::/64"}]]}),
    );
    conf["args"] = json!({"cni": {"ips": ["10.1.3.77/24"]}});
    conf["runtimeConfig"] = json!({"ips": ["2001:db8:1::999"]});
    let v = env
        .call("host-local")
        .verb("ADD", "c1", c.path_str(), "eth0")
        .env("CNI_ARGS", "IgnoreUnknown=1;IP=10.1.2.88")
        .config(&conf)
        .run()
        .success();
    let got: Vec<&str> = v["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["address"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["10.1.2.88/24", "10.1.3.77/24", "2001:db8:1::999/64"]);
    let store = env.store("hlnet");
    assert_eq!(store["last_reserved_ip.1"], "10.1.3.77");

    // a request that fits no set fails the whole ADD and leaves nothing behind
    let mut conf2 = conf.clone();
    conf2["args"] = json!({"cni": {"ips": ["10.1.2.40", "10.1.2.41"]}});
    conf2.as_object_mut().unwrap().remove("runtimeConfig");
    let msg = env
        .call("host-local")
        .exec("ADD", "c2", c.path_str(), "eth0", &conf2)
        .failure(999);
    assert_eq!(msg, "failed to allocate all requested IPs: 10.1.2.41");
    let store = env.store("hlnet");
    assert!(
        store.values().all(|v| !v.starts_with("c2")),
        "nothing of c2 left: {store:?}"
    );

    // a failure in a later set releases what earlier sets took in this call
    let conf3 = {
        let mut c3 = conf.clone();
        c3.as_object_mut().unwrap().remove("runtimeConfig");
        c3["args"] = json!({"cni": {"ips": ["10.1.3.77"]}});
        c3
    };
    let msg = env
        .call("host-local")
        .exec("ADD", "c3", c.path_str(), "eth0", &conf3)
        .failure(999);
    assert_eq!(msg, "failed to allocate for range 1: requested IP address 10.1.3.77 is not available in range set 10.1.3.1-10.1.3.254");
    assert!(env.store("hlnet").values().all(|v| !v.starts_with("c3")));

    let msg = env
        .call("host-local")
        .verb("ADD", "c4", c.path_str(), "eth0")
        .env("CNI_ARGS", "IP=bogus")
        .config(&conf)
        .run()
        .failure(999);
    assert_eq!(
        msg,
        "ARGS: error parsing value of pair \"IP=bogus\": invalid IP address bogus"
    );
}

#[test]
fn dns_from_resolv_conf() {
    let env = TestEnv::new();
    let c = env.container();
    let path = env.tmp.path().join("resolv.conf");
    std::fs::write(
        &path,
        "# comment\nnameserver 192.0.2.3\nsearch a.example b.example\noptions ndots:5\ndomain ex.com\n",
    )
    .unwrap();
    for version in ALL_VERSIONS {
        let conf = conf(&env, version, json!({"subnet": "10.1.2.0/24", "resolvConf": path}));
        let id = format!("c{}", version.replace('.', ""));
        let v = env
            .call("host-local")
            .exec("ADD", &id, c.path_str(), "eth0", &conf)
            .success();
        assert_eq!(
            v["dns"],
            json!({"nameservers": ["192.0.2.3"], "domain": "ex.com", "search": ["a.example", "b.example"], "options": ["ndots:5"]}),
            "{version}"
        );
    }
    let conf = conf(
        &env,
        "1.0.0",
        json!({"subnet": "10.1.2.0/24", "resolvConf": "/nonexistent/resolv.conf"}),
    );
    let msg = env
        .call("host-local")
        .exec("ADD", "x", c.path_str(), "eth0", &conf)
        .failure(999);
    assert_eq!(msg, "open /nonexistent/resolv.conf: no such file or directory");
}

#[test]
fn config_errors_are_code_999() {
    let env = TestEnv::new();
    let c = env.container();
    let cases = [
        (json!({"cniVersion": "1.0.0", "name": "hlnet"}), "IPAM config missing 'ipam' key"),
        (conf(&env, "1.0.0", json!({})), "no IP ranges specified"),
        (conf(&env, "1.0.0", json!({"subnet": "10.1.2.5/24"})), "invalid range set 0: Network has host bits set. For a subnet mask of length 24 the network address is 10.1.2.0"),
        (conf(&env, "1.0.0", json!({"subnet": "10.1.2.0/31"})), "invalid range set 0: Network 10.1.2.0/31 too small to allocate from"),
        (conf(&env, "0.2.0", json!({"ranges": [[{"subnet": "10.1.0.0/16"}], [{"subnet": "10.2.0.0/16"}]]})), "CNI version 0.2.0 does not support more than 1 address per family"),
        (conf(&env, "1.0.0", json!({"ranges": [[{"subnet": "10.1.0.0/16"}], [{"subnet": "10.1.2.0/24"}]]})), "range set 0 overlaps with 1"),
    ];
    for (conf, want) in cases {
        let msg = env
            .call("host-local")
            .exec("ADD", "c1", c.path_str(), "eth0", &conf)
            .failure(999);
        assert_eq!(msg, want);
    }
}

/// A member of the wrong type at any depth is worded as the reference's Go words it: the
/// innermost struct's name (none for the anonymous runtimeConfig), the whole path, the Go
/// type (`net.IP`, `[]*ip.IP`, `allocator.RangeSet`, …). Before, nested members were named
/// by their last key and every list was an `array`.
#[test]
fn mistyped_members_are_worded_as_the_reference_words_them() {
    let env = TestEnv::new();
    let c = env.container();
    let subnet = json!({"subnet": "10.9.0.0/24"});
    let mut cases: Vec<Value> = [
        json!({"ipRanges": [{"subnet": "10.1.0.0/24"}]}),
        json!({"ipRanges": [[1]]}),
        json!({"ipRanges": [[{"rangeStart": 5}]]}),
        json!({"ipRanges": 5}),
        json!({"ips": 5}),
        json!({"ips": [5]}),
    ]
    .into_iter()
    .map(|rc| {
        let mut v = conf(&env, "1.0.0", subnet.clone());
        v["runtimeConfig"] = rc;
        v
    })
    .collect();
    for args in [json!({"cni": {"ips": 5}}), json!({"cni": {"ips": [5]}})] {
        let mut v = conf(&env, "1.0.0", subnet.clone());
        v["args"] = args;
        cases.push(v);
    }
    for ipam in [
        json!({"ranges": [{"subnet": "10.1.0.0/24"}]}),
        json!({"ranges": 5}),
        json!({"ranges": [5]}),
        json!({"ranges": [[5]]}),
        json!({"ranges": [[{"subnet": 5}]]}),
        json!({"ranges": [[{"gateway": 5, "subnet": "10.9.0.0/24"}]]}),
        json!({"subnet": "10.9.0.0/24", "rangeStart": 5}),
        json!({"subnet": "10.9.0.0/24", "dataDir": 5}),
        json!({"subnet": "10.9.0.0/24", "resolvConf": 5}),
        json!({"subnet": 5}),
    ] {
        cases.push(conf(&env, "1.0.0", ipam));
    }
    for conf in cases {
        let ours = env
            .call("host-local")
            .exec("ADD", "c1", c.path_str(), "eth0", &conf)
            .failure(999);
        let Some(reference) = env.reference("host-local") else {
            return;
        };
        let theirs = reference.exec("ADD", "c1", c.path_str(), "eth0", &conf).failure(999);
        assert_eq!(ours, theirs, "{conf}");
    }
}

#[test]
fn check_finds_the_reservation() {
    for version in ALL_VERSIONS
        .iter()
        .filter(|v| !matches!(**v, "0.1.0" | "0.2.0" | "0.3.0" | "0.3.1"))
    {
        let env = TestEnv::new();
        let c = env.container();
        let conf = conf(&env, version, json!({"subnet": "10.1.2.0/24"}));
        env.call("host-local")
            .exec("ADD", "c1", c.path_str(), "eth0", &conf)
            .success();
        env.call("host-local")
            .exec("CHECK", "c1", c.path_str(), "eth0", &conf)
            .success();
        let msg = env
            .call("host-local")
            .exec("CHECK", "c2", c.path_str(), "eth0", &conf)
            .failure(999);
        assert_eq!(msg, "host-local: Failed to find address added by container c2");
        env.call("host-local")
            .exec("DEL", "c1", c.path_str(), "eth0", &conf)
            .success();
        let msg = env
            .call("host-local")
            .exec("CHECK", "c1", c.path_str(), "eth0", &conf)
            .failure(999);
        assert_eq!(msg, "host-local: Failed to find address added by container c1");
    }
}

#[test]
fn del_of_an_unknown_id_succeeds_in_every_version() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let c = env.container();
        let conf = conf(&env, version, json!({"subnet": "10.1.2.0/24"}));
        env.call("host-local")
            .exec("DEL", "nobody", c.path_str(), "eth0", &conf)
            .success();
        env.call("host-local")
            .exec("DEL", "nobody", "", "eth0", &conf)
            .success();
    }
}

#[test]
fn legacy_id_only_file_is_released_by_del_and_found_by_check() {
    let env = TestEnv::new();
    let c = env.container();
    let conf = conf(&env, "1.0.0", json!({"subnet": "10.1.2.0/24"}));
    env.call("host-local")
        .exec("ADD", "c1", c.path_str(), "eth0", &conf)
        .success();
    // what an old reference (before ifnames were stored) left behind
    std::fs::write(env.data_dir.join("hlnet/10.1.2.2"), "c1").unwrap();
    env.call("host-local")
        .exec("CHECK", "c1", c.path_str(), "eth0", &conf)
        .success();
    env.call("host-local")
        .exec("DEL", "c1", c.path_str(), "eth0", &conf)
        .success();
    assert!(!env.store("hlnet").contains_key("10.1.2.2"));
}

#[test]
fn status_reports_readiness() {
    let env = TestEnv::new();
    let c = env.container();
    let conf = conf(
        &env,
        "1.1.0",
        json!({"subnet": "10.1.2.0/29", "rangeStart": "10.1.2.5", "rangeEnd": "10.1.2.6"}),
    );
    env.call("host-local").command("STATUS").config(&conf).run().success();
    for id in ["a", "b"] {
        env.call("host-local")
            .exec("ADD", id, c.path_str(), "eth0", &conf)
            .success();
    }
    let msg = env.call("host-local").command("STATUS").config(&conf).run().failure(50);
    assert_eq!(
        msg,
        "host-local: no IP addresses available in range set: 10.1.2.5-10.1.2.6"
    );
    env.call("host-local")
        .exec("DEL", "a", c.path_str(), "eth0", &conf)
        .success();
    env.call("host-local").command("STATUS").config(&conf).run().success();

    // a data dir that cannot be created
    let file = env.tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let bad = conf_with_data_dir(&env, &file.join("sub"));
    let msg = env.call("host-local").command("STATUS").config(&bad).run().failure(50);
    assert!(msg.contains("is not writable: not a directory"), "{msg}");
}

fn conf_with_data_dir(env: &TestEnv, dir: &Path) -> Value {
    conf(env, "1.1.0", json!({"subnet": "10.1.2.0/24", "dataDir": dir}))
}

#[test]
fn gc_releases_everything_not_valid() {
    let env = TestEnv::new();
    let c = env.container();
    let conf = conf(&env, "1.1.0", json!({"subnet": "10.1.2.0/24"}));
    for (id, ifname) in [("c1", "eth0"), ("c1", "eth1"), ("c2", "eth0")] {
        env.call("host-local")
            .exec("ADD", id, c.path_str(), ifname, &conf)
            .success();
    }
    std::fs::write(env.data_dir.join("hlnet/10.1.2.50"), "c1").unwrap(); // legacy, c1 is valid
    std::fs::write(env.data_dir.join("hlnet/10.1.2.51"), "c9").unwrap(); // legacy, stale
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "c1", "ifname": "eth0"}]);
    env.call("host-local").command("GC").config(&gc).run().success();
    let left: Vec<String> = store_files(&env.data_dir.join("hlnet")).into_keys().collect();
    assert_eq!(left, ["10.1.2.2", "10.1.2.50", "last_reserved_ip.0", "lock"]);
    // the index follows: DEL of the kept attachment frees it
    gc["cni.dev/valid-attachments"] = json!([]);
    env.call("host-local").command("GC").config(&gc).run().success();
    let left: Vec<String> = store_files(&env.data_dir.join("hlnet")).into_keys().collect();
    assert_eq!(left, ["last_reserved_ip.0", "lock"]);
}

// ---- differential runs against the reference -------------------------------------------

/// A sequence of calls: (verb, container ID, ifname, CNI_ARGS).
type Step = (&'static str, &'static str, &'static str, &'static str);

fn run_steps(env: &TestEnv, reference: bool, conf: &Value, steps: &[Step]) -> Vec<Value> {
    let c = env.container();
    steps
        .iter()
        .map(|(verb, id, ifname, args)| {
            let call = if reference {
                env.reference("host-local").unwrap()
            } else {
                env.call("host-local")
            };
            let out = call
                .verb(verb, id, c.path_str(), ifname)
                .env("CNI_ARGS", args)
                .config(conf)
                .run();
            if out.ok() {
                normalize(if out.stdout.trim().is_empty() {
                    Value::Null
                } else {
                    out.json()
                })
            } else {
                let mut j = out.json();
                j.as_object_mut().unwrap().remove("cniVersion");
                j
            }
        })
        .collect()
}

#[test]
fn same_results_and_store_bytes_as_the_reference() {
    if common::reference_dir().is_none() {
        eprintln!("skipped: the reference plugins are not installed");
        return;
    }
    let steps: &[Step] = &[
        ("ADD", "c1", "eth0", ""),
        ("ADD", "c2", "eth0", ""),
        ("ADD", "c1", "eth0", ""),
        ("ADD", "c3", "eth1", "IP=10.1.2.50"),
        ("ADD", "c4", "eth0", ""),
        ("DEL", "c2", "eth0", ""),
        ("ADD", "c5", "eth0", ""),
        ("ADD", "c6", "eth0", "IP=10.1.2.51"),
        ("DEL", "nobody", "eth0", ""),
        ("ADD", "c7", "eth0", "IP=10.1.9.9"),
        ("DEL", "c1", "eth0", ""),
    ];
    let configs = |v: &str| {
        vec![
            json!({"subnet": "10.1.2.0/24", "routes": [{"dst": "0.0.0.0/0"}]}),
            json!({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "2001:db8:1::/64"}]]}),
            json!({"ranges": [[{"subnet": "10.1.2.0/29", "rangeStart": "10.1.2.5", "rangeEnd": "10.1.2.6"}, {"subnet": "10.1.2.48/28"}]]}),
            if v.starts_with("0.1") || v.starts_with("0.2") {
                json!({"ranges": [[{"subnet": "10.1.2.0/24"}]]})
            } else {
                json!({"ranges": [[{"subnet": "10.1.2.0/26"}, {"subnet": "10.1.2.64/26"}], [{"subnet": "10.1.3.0/24"}]]})
            },
        ]
    };
    for version in ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"] {
        for ipam in configs(version) {
            let ours = TestEnv::new();
            let theirs = TestEnv::new();
            let a = run_steps(&ours, false, &conf(&ours, version, ipam.clone()), steps);
            let b = run_steps(&theirs, true, &conf(&theirs, version, ipam.clone()), steps);
            assert_eq!(a, b, "{version} {ipam}");
            let dir_a = ours.data_dir.join("hlnet");
            let dir_b = theirs.data_dir.join("hlnet");
            assert_eq!(store_files(&dir_a), store_files(&dir_b), "{version} {ipam}");
            for name in store_files(&dir_a).keys() {
                let mode = |d: &Path| std::fs::metadata(d.join(name)).unwrap().permissions().mode() & 0o777;
                // the reference v1.1.1 writes 0644 (0600 since v1.4.0); both create the lock 0750
                if name == "lock" {
                    assert_eq!(mode(&dir_a), mode(&dir_b), "{name}");
                } else {
                    assert_eq!((mode(&dir_a), mode(&dir_b)), (0o600, 0o644), "{name}");
                }
            }
        }
    }
}

#[test]
fn mixed_use_with_the_reference() {
    let Some(_) = common::reference_dir() else {
        eprintln!("skipped: the reference plugins are not installed");
        return;
    };
    let env = TestEnv::new();
    let c = env.container();
    let conf = conf(
        &env,
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "2001:db8:1::/64"}]]}),
    );
    let ours = || env.call("host-local");
    let theirs = || env.reference("host-local").unwrap();

    // the reference allocates, cnibox releases (its index learns of the foreign files)
    theirs().exec("ADD", "r1", c.path_str(), "eth0", &conf).success();
    ours().exec("DEL", "r1", c.path_str(), "eth0", &conf).success();
    assert!(env.store("hlnet").values().all(|v| !v.starts_with("r1")));

    // cnibox allocates, the reference releases; cnibox then sees the slot free again
    ours().exec("ADD", "o1", c.path_str(), "eth0", &conf).success();
    theirs().exec("DEL", "o1", c.path_str(), "eth0", &conf).success();
    assert!(env.store("hlnet").values().all(|v| !v.starts_with("o1")));
    ours().exec("CHECK", "o1", c.path_str(), "eth0", &conf).failure(999);

    // alternating ADDs never hand out one address twice, and each side sees the other's
    // reservations in the duplicate check
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..20 {
        let id = format!("m{i}");
        let call = if i % 2 == 0 { ours() } else { theirs() };
        let v = call.exec("ADD", &id, c.path_str(), "eth0", &conf).success();
        for ip in v["ips"].as_array().unwrap() {
            assert!(
                seen.insert(ip["address"].as_str().unwrap().to_string()),
                "duplicate {ip}"
            );
        }
        let other = if i % 2 == 0 { theirs() } else { ours() };
        let msg = other.exec("ADD", &id, c.path_str(), "eth0", &conf).failure(999);
        assert!(msg.contains("duplicate allocation is not allowed"), "{msg}");
    }
    // and each side releases what the other allocated
    for i in 0..20 {
        let id = format!("m{i}");
        let call = if i % 2 == 0 { theirs() } else { ours() };
        call.exec("DEL", &id, c.path_str(), "eth0", &conf).success();
    }
    let left: Vec<String> = store_files(&env.data_dir.join("hlnet")).into_keys().collect();
    assert_eq!(left, ["last_reserved_ip.0", "last_reserved_ip.1", "lock"]);
}

#[test]
fn two_hundred_parallel_adds_then_dels() {
    let env = TestEnv::new();
    let c = env.container();
    let conf = conf(&env, "1.0.0", json!({"subnet": "10.1.0.0/16"}));
    let ns = c.path_str().to_string();
    let addrs: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let (env, conf, ns) = (&env, &conf, &ns);
                s.spawn(move || {
                    let v = env
                        .call("host-local")
                        .exec("ADD", &format!("p{i}"), ns, "eth0", conf)
                        .success();
                    v["ips"][0]["address"].as_str().unwrap().to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: std::collections::BTreeSet<&String> = addrs.iter().collect();
    assert_eq!(distinct.len(), 200);
    let store = env.store("hlnet");
    assert_eq!(store.keys().filter(|k| k.starts_with("10.1.")).count(), 200);
    std::thread::scope(|s| {
        for i in 0..200 {
            let (env, conf, ns) = (&env, &conf, &ns);
            s.spawn(move || {
                env.call("host-local")
                    .exec("DEL", &format!("p{i}"), ns, "eth0", conf)
                    .success();
            });
        }
    });
    // only the lock, the round-robin hint and cnibox's owner index remain
    let left: Vec<String> = env.store("hlnet").into_keys().collect();
    assert_eq!(left, [INDEX, "last_reserved_ip.0", "lock"]);
    // bucket files stay (rewritten in place, never re-created) but hold no entry
    for (name, content) in read_dir_map(&env.data_dir.join("hlnet").join(INDEX)) {
        if name != "stamp" && name != "boot" {
            assert_eq!(content.lines().count(), 1, "bucket {name} not emptied: {content}");
            assert!(content.starts_with('#'), "{name}: {content}");
        }
    }
}

/// Processes SIGKILLed at arbitrary points of ADD never leave a half-written reservation,
/// never cause a duplicate, and one DEL per attachment still frees everything.
#[test]
fn killed_adds_leave_a_consistent_store() {
    use std::io::Write;
    use std::process::Stdio;
    let env = TestEnv::new();
    let c = env.container();
    let conf = conf(
        &env,
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "2001:db8:1::/64"}]]}),
    );
    let stdin = serde_json::to_vec(&conf).unwrap();
    let bin = env.bin_dir.join("host-local");
    for k in 0..60u64 {
        let mut child = env
            .host
            .command(&bin)
            .env_clear()
            .envs([
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", &format!("k{k}")),
                ("CNI_NETNS", c.path_str()),
                ("CNI_IFNAME", "eth0"),
                ("CNI_PATH", env.bin_dir.to_str().unwrap()),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&stdin).unwrap();
        // spread the kills over the whole run of the process (a few ms)
        std::thread::sleep(std::time::Duration::from_micros((k * 97) % 4000));
        let _ = child.kill();
        let _ = child.wait();
    }
    let dir = env.data_dir.join("hlnet");
    for (name, content) in store_files(&dir) {
        if name.parse::<std::net::IpAddr>().is_ok() {
            assert!(
                content.starts_with('k') && content.ends_with("\r\neth0"),
                "{name}: {content:?}"
            );
        }
    }
    let held = store_files(&dir)
        .keys()
        .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
        .count();
    eprintln!("{held} reservations left by 60 killed ADDs");
    // fresh ADDs never get an address someone holds
    let mut fresh = vec![];
    for i in 0..10 {
        let v = env
            .call("host-local")
            .exec("ADD", &format!("f{i}"), c.path_str(), "eth0", &conf)
            .success();
        for ip in v["ips"].as_array().unwrap() {
            let addr = ip["address"].as_str().unwrap().split('/').next().unwrap().to_string();
            assert_eq!(
                std::fs::read_to_string(dir.join(&addr)).unwrap(),
                format!("f{i}\r\neth0")
            );
            fresh.push(addr);
        }
    }
    let distinct: std::collections::BTreeSet<&String> = fresh.iter().collect();
    assert_eq!(distinct.len(), fresh.len());
    // one DEL per attachment frees everything
    for id in (0..60).map(|k| format!("k{k}")).chain((0..10).map(|i| format!("f{i}"))) {
        env.call("host-local")
            .exec("DEL", &id, c.path_str(), "eth0", &conf)
            .success();
    }
    let left: Vec<String> = store_files(&dir)
        .into_keys()
        .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!dir.join(".cnibox-reserve.tmp").exists());
}

/// DEL in every situation a runtime produces, in every spec version: the shared matrix
/// (`reliability::del_matrix`).
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    del_matrix::run(Subject {
        applet: "host-local",
        keys: json!({}),
        attachment: Attachment::Addresses,
    });
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("host-local");
}
