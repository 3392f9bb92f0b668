//! The `cnitool` applet end to end: chains of recording plugins (a shell script that logs
//! its environment and stdin), the Go reference host-local, the result cache, GC, STATUS,
//! sandbox status, locking. Every run happens inside the test's private host namespace.
use crate::common;

use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const RECORDER: &str = include_str!("../plugins/recorder.sh");

/// One test's runtime world: the harness env plus a conf dir, a plugin dir holding the
/// recording plugin, a record file and a cache dir.
struct World {
    env: TestEnv,
    conf_dir: PathBuf,
    plugin_dir: PathBuf,
    record: PathBuf,
    /// Plugin dirs searched before the recorder and cnibox applets.
    first_path: Vec<PathBuf>,
}

impl World {
    fn new() -> World {
        let env = TestEnv::new();
        let conf_dir = env.tmp.path().join("net.d");
        let plugin_dir = env.tmp.path().join("plugins");
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::create_dir_all(&plugin_dir).unwrap();
        install_script(&plugin_dir.join("recorder"), RECORDER);
        let record = env.tmp.path().join("record.jsonl");
        World {
            env,
            conf_dir,
            plugin_dir,
            record,
            first_path: vec![],
        }
    }

    fn cni_path(&self) -> String {
        let mut dirs = self.first_path.clone();
        dirs.extend([self.plugin_dir.clone(), self.env.bin_dir.clone()]);
        dirs.iter()
            .map(|d| d.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join(":")
    }

    fn write_conf(&self, file: &str, v: &Value) {
        std::fs::write(self.conf_dir.join(file), serde_json::to_vec(v).unwrap()).unwrap();
    }

    fn cnitool(&self, args: &[&str]) -> Call {
        self.env
            .tool("cnitool")
            .args(args)
            .env("NETCONFPATH", self.conf_dir.to_str().unwrap())
            .env("CNI_PATH", &self.cni_path())
            .env("CNI_CACHE_DIR", self.env.cache_dir.to_str().unwrap())
            .env("RECORD_FILE", self.record.to_str().unwrap())
    }

    /// Every call recorded so far, and forget them.
    fn take_records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.record).unwrap_or_default();
        let _ = std::fs::remove_file(&self.record);
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn cache_file(&self, net: &str, cid: &str, ifname: &str) -> PathBuf {
        self.env.cache_dir.join("results").join(format!("{net}-{cid}-{ifname}"))
    }

    fn cache_entry(&self, net: &str, cid: &str, ifname: &str) -> Value {
        let text = std::fs::read_to_string(self.cache_file(net, cid, ifname)).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

fn install_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn rec(tag: &str) -> Value {
    json!({"type": "recorder", "tag": tag})
}

fn conflist(name: &str, version: &str, plugins: Vec<Value>) -> Value {
    json!({"cniVersion": version, "name": name, "plugins": plugins})
}

/// The container ID upstream cnitool derives, computed with coreutils `sha512sum`.
fn derived_id(netns: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("printf %s '{netns}' | sha512sum"))
        .output()
        .unwrap();
    format!("cnitool-{}", &String::from_utf8(out.stdout).unwrap()[..20])
}

/// All six protocol variables are set (possibly empty); the runtime's own environment
/// (here CNI_CACHE_DIR) is passed on too.
fn assert_six_cni_vars(record: &Value) {
    let set: Vec<&str> = record["cniEnv"].as_str().unwrap().split_whitespace().collect();
    for var in [
        "CNI_COMMAND",
        "CNI_CONTAINERID",
        "CNI_NETNS",
        "CNI_IFNAME",
        "CNI_ARGS",
        "CNI_PATH",
        "CNI_CACHE_DIR",
    ] {
        assert!(set.contains(&var), "{var} not set for the plugin: {set:?}");
    }
}

fn tags(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{}:{}", r["command"].as_str().unwrap(), r["tag"].as_str().unwrap()))
        .collect()
}

fn at_least(v: &str, min: &str) -> bool {
    let p = |s: &str| s.split('.').map(|x| x.parse::<u32>().unwrap()).collect::<Vec<_>>();
    p(v) >= p(min)
}

/// What a recorded request looks like when re-serialised with sorted keys, compactly.
fn canonical(stdin: &str) -> String {
    serde_json::to_string(&serde_json::from_str::<Value>(stdin).unwrap()).unwrap()
}

#[test]
fn chain_of_three_add_check_del_every_version() {
    let w = World::new();
    for version in ALL_VERSIONS {
        let net = format!("three{}", version.replace('.', ""));
        w.write_conf(
            &format!("{net}.conflist"),
            &conflist(&net, version, vec![rec("a"), rec("b"), rec("c")]),
        );
        let netns = format!("/run/netns/{net}");
        let cid = derived_id(&netns);

        let out = w
            .cnitool(&["add", &net, &netns])
            .env("CNI_ARGS", "K8S_POD_NAME=p;IgnoreUnknown=1")
            .run();
        let result = out.success();
        let adds = w.take_records();
        assert_eq!(tags(&adds), ["ADD:a", "ADD:b", "ADD:c"], "{version}");
        for r in &adds {
            assert_six_cni_vars(r);
            assert_eq!(r["containerId"], cid.as_str());
            assert_eq!(
                (r["netns"].as_str(), r["ifname"].as_str()),
                (Some(netns.as_str()), Some("eth0"))
            );
            assert_eq!(r["args"], "K8S_POD_NAME=p;IgnoreUnknown=1");
            assert_eq!(r["path"], w.cni_path().as_str());
            let stdin = r["stdin"].as_str().unwrap();
            assert_eq!(stdin, canonical(stdin), "request must be compact with sorted keys");
            assert_eq!(
                (r["conf"]["name"].as_str(), r["conf"]["cniVersion"].as_str()),
                (Some(net.as_str()), Some(*version))
            );
        }
        // prevResult flows: nothing for the first plugin, then each one's result.
        assert!(adds[0]["conf"].get("prevResult").is_none());
        let first = &adds[1]["conf"]["prevResult"];
        assert_eq!(first["cniVersion"], *version);
        if at_least(version, "0.3.0") {
            assert_eq!(first["interfaces"], json!([{"name": "a", "sandbox": netns}]));
            assert_eq!(
                adds[2]["conf"]["prevResult"]["interfaces"],
                json!([{"name": "a", "sandbox": netns}, {"name": "b"}])
            );
            assert_eq!(
                result["interfaces"],
                json!([{"name": "a", "sandbox": netns}, {"name": "b"}, {"name": "c"}])
            );
        } else {
            assert_eq!(first["ip4"]["ip"], "10.99.0.2/24");
            assert_eq!(result, adds[2]["conf"]["prevResult"]);
        }
        // The cache holds the final result.
        assert_eq!(w.cache_entry(&net, &cid, "eth0")["result"], result);

        let out = w.cnitool(&["check", &net, &netns]).run();
        if at_least(version, "0.4.0") {
            out.success();
            let checks = w.take_records();
            assert_eq!(tags(&checks), ["CHECK:a", "CHECK:b", "CHECK:c"]);
            for r in &checks {
                assert_eq!(r["conf"]["prevResult"], result);
            }
        } else {
            assert_eq!(out.code, 1);
            assert!(
                out.stderr.contains(&format!(
                    "configuration version \"{version}\" does not support the CHECK command"
                )),
                "{out:?}"
            );
            assert!(w.take_records().is_empty());
        }

        w.cnitool(&["del", &net, &netns])
            .env("CNI_ARGS", "K8S_POD_NAME=p;IgnoreUnknown=1")
            .run()
            .success();
        let dels = w.take_records();
        assert_eq!(tags(&dels), ["DEL:c", "DEL:b", "DEL:a"], "{version}");
        for r in &dels {
            if at_least(version, "0.4.0") {
                assert_eq!(r["conf"]["prevResult"], result, "{version}");
            } else {
                assert!(r["conf"].get("prevResult").is_none(), "{version}");
            }
        }
        assert!(!w.cache_file(&net, &cid, "eth0").exists());

        // A second DEL succeeds without a cache and without prevResult.
        w.cnitool(&["del", &net, &netns]).run().success();
        let again = w.take_records();
        assert_eq!(tags(&again), ["DEL:c", "DEL:b", "DEL:a"]);
        assert!(again.iter().all(|r| r["conf"].get("prevResult").is_none()));
    }
}

/// The first address of a result in any version's shape.
fn first_address(result: &Value) -> String {
    let a = result["ips"][0]["address"]
        .as_str()
        .or_else(|| result["ip4"]["ip"].as_str());
    a.unwrap_or_else(|| panic!("no address in {result}")).to_string()
}

/// host-local first, then two recording plugins: ADD, CHECK, DEL for each version, with the
/// reservation checked on disk.
fn host_local_chain(w: &World, versions: &[&str], subnet_prefix: &str) {
    for version in versions {
        let net = format!("hl{}", version.replace('.', ""));
        let data_dir = w.env.data_dir.to_str().unwrap().to_string();
        let ipam = json!({"type": "host-local", "subnet": format!("{subnet_prefix}.0/24"), "dataDir": data_dir});
        let plugins = vec![json!({"type": "host-local", "ipam": ipam}), rec("b"), rec("c")];
        w.write_conf(&format!("{net}.conflist"), &conflist(&net, version, plugins));
        let ctr = w.env.container();
        let result = w.cnitool(&["add", &net, ctr.path_str()]).run().success();
        let ip = first_address(&result);
        assert!(ip.starts_with(&format!("{subnet_prefix}.")), "{version}: {result}");
        let adds = w.take_records();
        assert_eq!(tags(&adds), ["ADD:b", "ADD:c"]);
        assert_eq!(first_address(&adds[0]["conf"]["prevResult"]), ip, "{version}");
        let store = w.env.store(&net);
        let addr = ip.split('/').next().unwrap();
        assert!(store.contains_key(addr), "{version}: {store:?}");
        if at_least(version, "0.4.0") {
            w.cnitool(&["check", &net, ctr.path_str()]).run().success();
            assert_eq!(tags(&w.take_records()), ["CHECK:b", "CHECK:c"]);
        }
        w.cnitool(&["del", &net, ctr.path_str()]).run().success();
        assert_eq!(tags(&w.take_records()), ["DEL:c", "DEL:b"]);
        assert!(
            !w.env.store(&net).contains_key(addr),
            "{version}: host-local did not release {addr}"
        );
    }
}

#[test]
fn chain_with_cnibox_host_local() {
    let w = World::new();
    assert!(
        w.env.bin_dir.join("host-local").exists(),
        "cnibox has no host-local applet"
    );
    host_local_chain(&w, ALL_VERSIONS, "10.78.0");
}

#[test]
fn chain_with_reference_host_local() {
    let Some(refdir) = reference_dir() else {
        eprintln!("SKIP: the Go reference plugins are not installed in /usr/lib/cni");
        return;
    };
    let mut w = World::new();
    // Ahead of cnibox's own applets in CNI_PATH.
    w.first_path.push(refdir);
    // The reference plugins (v1.1.1) support up to 1.0.0.
    host_local_chain(&w, &["0.3.1", "0.4.0", "1.0.0"], "10.77.0");
}

#[test]
fn gc_releases_host_local_reservations_of_stale_attachments() {
    let w = World::new();
    let data_dir = w.env.data_dir.to_str().unwrap().to_string();
    let ipam = json!({"type": "host-local", "subnet": "10.79.0.0/24", "dataDir": data_dir});
    w.write_conf(
        "hgc.conflist",
        &conflist(
            "hgc",
            "1.1.0",
            vec![json!({"type": "host-local", "ipam": ipam}), rec("b")],
        ),
    );
    let mut ips = vec![];
    for cid in ["keep", "stale"] {
        let r = w
            .cnitool(&["add", "hgc", "/run/netns/x", "--container-id", cid])
            .run()
            .success();
        ips.push(first_address(&r).split('/').next().unwrap().to_string());
    }
    w.cnitool(&["status", "hgc"]).run().success();
    w.cnitool(&["gc", "hgc", "--keep", "keep:eth0"]).run().success();
    let store = w.env.store("hgc");
    assert!(store.contains_key(&ips[0]), "GC released a kept address: {store:?}");
    assert!(!store.contains_key(&ips[1]), "GC kept a stale address: {store:?}");
}

#[test]
fn runtime_config_follows_capabilities() {
    let w = World::new();
    let a = json!({"type": "recorder", "tag": "a", "capabilities": {"portMappings": true, "mac": false}});
    let b = json!({"type": "recorder", "tag": "b", "runtimeConfig": {"own": 1}});
    w.write_conf("caps.conflist", &conflist("caps", "1.0.0", vec![a, b]));
    let caps = r#"{"portMappings":[{"hostPort":80,"containerPort":8080,"protocol":"tcp"}],"mac":"c2:11:22:33:44:55"}"#;
    w.cnitool(&["add", "caps", "/run/netns/caps"])
        .env("CAP_ARGS", caps)
        .run()
        .success();
    let adds = w.take_records();
    assert_eq!(
        adds[0]["conf"]["runtimeConfig"],
        json!({"portMappings":[{"hostPort":80,"containerPort":8080,"protocol":"tcp"}]})
    );
    assert_eq!(
        adds[0]["conf"]["capabilities"],
        json!({"portMappings": true, "mac": false})
    );
    assert_eq!(adds[1]["conf"]["runtimeConfig"], json!({"own": 1}));
    let entry = w.cache_entry("caps", &derived_id("/run/netns/caps"), "eth0");
    assert_eq!(entry["capabilityArgs"], serde_json::from_str::<Value>(caps).unwrap());

    let out = w
        .cnitool(&["add", "caps", "/run/netns/caps2"])
        .env("CAP_ARGS", "[1]")
        .run();
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("CAP_ARGS must be a JSON object"), "{out:?}");
}

#[test]
fn disable_check_skips_plugins() {
    let w = World::new();
    for (value, calls) in [(json!(true), 0), (json!("TRUE"), 0), (json!(false), 2)] {
        let mut list = conflist("dc", "1.0.0", vec![rec("a"), rec("b")]);
        list["disableCheck"] = value.clone();
        w.write_conf("dc.conflist", &list);
        w.cnitool(&["add", "dc", "/run/netns/dc"]).run().success();
        w.take_records();
        w.cnitool(&["check", "dc", "/run/netns/dc"]).run().success();
        assert_eq!(w.take_records().len(), calls, "disableCheck {value}");
        w.cnitool(&["del", "dc", "/run/netns/dc"]).run().success();
        w.take_records();
    }
}

#[test]
fn del_uses_the_config_and_args_cached_at_add() {
    let w = World::new();
    let mut b = rec("b");
    b["capabilities"] = json!({"mac": true});
    w.write_conf("chg.conflist", &conflist("chg", "1.0.0", vec![rec("a"), b]));
    let result = w
        .cnitool(&["add", "chg", "/run/netns/chg"])
        .env("CNI_ARGS", "A=1")
        .env("CAP_ARGS", r#"{"mac":"c2:00:00:00:00:01"}"#)
        .run()
        .success();
    w.take_records();
    // The file on disk changes completely between ADD and DEL.
    w.write_conf("chg.conflist", &conflist("chg", "1.0.0", vec![rec("x")]));
    w.cnitool(&["del", "chg", "/run/netns/chg"]).run().success();
    let dels = w.take_records();
    assert_eq!(tags(&dels), ["DEL:b", "DEL:a"]);
    for r in &dels {
        assert_eq!(r["conf"]["prevResult"], result);
        assert_eq!(r["args"], "A=1");
    }
    assert_eq!(dels[0]["conf"]["runtimeConfig"], json!({"mac": "c2:00:00:00:00:01"}));
    // Without a cache, DEL uses the file on disk.
    w.cnitool(&["del", "chg", "/run/netns/chg"]).run().success();
    assert_eq!(tags(&w.take_records()), ["DEL:x"]);
}

/// Regression: every attachment a node ever had left its lock file in the cache dir.
#[test]
fn del_removes_the_attachments_lock_file() {
    let w = World::new();
    w.write_conf("lk.conflist", &conflist("lk", "1.0.0", vec![rec("a")]));
    let locks = w.env.cache_dir.join("locks");
    let attachment_locks = || {
        std::fs::read_dir(&locks)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "networks")
            .collect::<Vec<_>>()
    };
    for i in 0..3 {
        w.cnitool(&["add", "lk", &format!("/run/netns/lk{i}")]).run().success();
    }
    assert_eq!(attachment_locks().len(), 3, "{:?}", attachment_locks());
    for i in 0..3 {
        w.cnitool(&["del", "lk", &format!("/run/netns/lk{i}")]).run().success();
    }
    assert!(attachment_locks().is_empty(), "{:?}", attachment_locks());
    // the network's own lock stays: it is one per network, and GC takes it
    assert!(locks.join("networks/lk").exists());
}

#[test]
fn del_works_when_the_config_file_is_gone() {
    let w = World::new();
    w.write_conf("gone.conflist", &conflist("gone", "1.0.0", vec![rec("a"), rec("b")]));
    w.cnitool(&["add", "gone", "/run/netns/gone"]).run().success();
    w.take_records();
    std::fs::remove_file(w.conf_dir.join("gone.conflist")).unwrap();
    w.cnitool(&["check", "gone", "/run/netns/gone"]).run().success();
    assert_eq!(tags(&w.take_records()), ["CHECK:a", "CHECK:b"]);
    let out = w.cnitool(&["del", "gone", "/run/netns/gone"]).run();
    out.success();
    assert!(out.stderr.contains("using the config cached at ADD"), "{out:?}");
    assert_eq!(tags(&w.take_records()), ["DEL:b", "DEL:a"]);
    // With neither file nor cache there is nothing to run.
    let out = w.cnitool(&["del", "gone", "/run/netns/gone"]).run();
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no net configurations found in"), "{out:?}");
}

#[test]
fn check_uses_the_cached_config() {
    let w = World::new();
    w.write_conf("cc.conflist", &conflist("cc", "1.0.0", vec![rec("a"), rec("b")]));
    w.cnitool(&["add", "cc", "/run/netns/cc"]).run().success();
    w.write_conf("cc.conflist", &conflist("cc", "1.0.0", vec![rec("x")]));
    w.take_records();
    w.cnitool(&["check", "cc", "/run/netns/cc"]).run().success();
    assert_eq!(tags(&w.take_records()), ["CHECK:a", "CHECK:b"]);
}

#[test]
fn empty_or_corrupt_cache_never_blocks_del() {
    let w = World::new();
    w.write_conf("cor.conflist", &conflist("cor", "1.0.0", vec![rec("a"), rec("b")]));
    let cid = derived_id("/run/netns/cor");
    let garbage: [&[u8]; 4] = [
        b"",
        b"{\"kind\":\"cniCacheV1\",\"conta",
        b"\0\0\0",
        br#"{"kind":"cniCacheV1","config":"%%%"}"#,
    ];
    for bad in garbage {
        w.cnitool(&["add", "cor", "/run/netns/cor"]).run().success();
        std::fs::write(w.cache_file("cor", &cid, "eth0"), bad).unwrap();
        w.take_records();

        let out = w.cnitool(&["check", "cor", "/run/netns/cor"]).run();
        assert_eq!(out.code, 1, "{out:?}");
        assert!(
            out.stderr.contains("failed to get network \"cor\" cached result"),
            "{out:?}"
        );

        let out = w.cnitool(&["del", "cor", "/run/netns/cor"]).run();
        out.success();
        assert!(
            out.stderr.contains("is unusable") && out.stderr.contains("deleting without prevResult"),
            "{out:?}"
        );
        let dels = w.take_records();
        assert_eq!(tags(&dels), ["DEL:b", "DEL:a"]);
        assert!(dels.iter().all(|r| r["conf"].get("prevResult").is_none()));
        assert!(!w.cache_file("cor", &cid, "eth0").exists());
    }
}

#[test]
fn cached_results_are_brought_to_the_config_version() {
    let w = World::new();
    std::fs::create_dir_all(w.env.cache_dir.join("results")).unwrap();
    let v031 = json!({"cniVersion": "0.3.1", "ips": [{"version": "4", "address": "10.5.0.2/24"}], "dns": {}});
    let v100 = json!({"cniVersion": "1.0.0", "ips": [{"address": "10.5.0.2/24"}], "dns": {}});
    // (config version, legacy bare cached result, what DEL must send as prevResult)
    let cases = [
        (
            "0.4.0",
            &v031,
            json!({"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "10.5.0.2/24"}], "dns": {}}),
        ),
        (
            "1.0.0",
            &v031,
            json!({"cniVersion": "1.0.0", "ips": [{"address": "10.5.0.2/24"}], "dns": {}}),
        ),
        ("1.0.0", &v100, v100.clone()),
    ];
    for (version, cached, want) in cases {
        w.write_conf("leg.conflist", &conflist("leg", version, vec![rec("a")]));
        let cid = derived_id("/run/netns/leg");
        std::fs::write(w.cache_file("leg", &cid, "eth0"), cached.to_string()).unwrap();
        w.cnitool(&["del", "leg", "/run/netns/leg"]).run().success();
        let dels = w.take_records();
        let got = &dels[0]["conf"]["prevResult"];
        // Compare the JSON values, ignoring an empty `dns` the conversion may drop.
        let strip = |v: &Value| {
            let mut v = v.clone();
            if v["dns"] == json!({}) {
                v.as_object_mut().unwrap().remove("dns");
            }
            v
        };
        assert_eq!(strip(got), strip(&want), "config {version}, cached {cached}");
        assert!(!w.cache_file("leg", &cid, "eth0").exists());
    }
}

#[test]
fn a_malformed_add_result_fails_the_chain() {
    let w = World::new();
    let mut a = rec("a");
    a["result"] = json!({"cniVersion": "1.0.0", "ips": "not a list"});
    w.write_conf("bad.conflist", &conflist("bad", "1.0.0", vec![a, rec("b")]));
    let out = w.cnitool(&["add", "bad", "/run/netns/bad"]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("plugin type=\"recorder\" failed (add): "),
        "{out:?}"
    );
    assert_eq!(tags(&w.take_records()), ["ADD:a"]);
    assert!(!w.cache_file("bad", &derived_id("/run/netns/bad"), "eth0").exists());
}

#[test]
fn plugin_failure_names_the_plugin_and_passes_its_error_on() {
    let w = World::new();
    let mut b = json!({"type": "recorder", "tag": "b", "name": "second"});
    b["fail"] = json!({"ADD": {"code": 11, "msg": "busy", "details": "try again"}, "DEL": {"code": 7, "msg": "no"}});
    w.write_conf("f.conflist", &conflist("f", "1.0.0", vec![rec("a"), b, rec("c")]));
    let out = w.cnitool(&["add", "f", "/run/netns/f"]).run();
    assert_eq!(out.code, 1);
    assert_eq!(
        out.json(),
        json!({"cniVersion": "1.0.0", "code": 11, "msg": "busy", "details": "try again"})
    );
    assert!(
        out.stderr
            .contains("plugin type=\"recorder\" name=\"second\" failed (add): busy; try again"),
        "{out:?}"
    );
    assert_eq!(tags(&w.take_records()), ["ADD:a", "ADD:b"]);
    assert!(
        !w.cache_file("f", &derived_id("/run/netns/f"), "eth0").exists(),
        "a failed ADD must not be cached"
    );

    let out = w.cnitool(&["del", "f", "/run/netns/f"]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("plugin type=\"recorder\" name=\"second\" failed (delete): no"),
        "{out:?}"
    );
    assert_eq!(tags(&w.take_records()), ["DEL:c", "DEL:b"]);

    // A plugin that dies without a word, and one that is not there.
    install_script(&w.plugin_dir.join("mute"), "#!/bin/sh\nexit 3\n");
    w.write_conf("m.conflist", &conflist("m", "1.0.0", vec![json!({"type": "mute"})]));
    let out = w.cnitool(&["add", "m", "/run/netns/m"]).run();
    assert!(
        out.stderr
            .contains("plugin type=\"mute\" failed (add): netplugin failed with no error message: exit status 3"),
        "{out:?}"
    );
    w.write_conf("x.conflist", &conflist("x", "1.0.0", vec![json!({"type": "nonexist"})]));
    let out = w.cnitool(&["add", "x", "/run/netns/x"]).run();
    assert_eq!(out.code, 1);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "plugin type=\"nonexist\" failed (add): failed to find plugin \"nonexist\" in path [{}]",
            w.cni_path().replace(':', " ")
        )),
        "{out:?}"
    );
}

#[test]
fn status_runs_every_plugin_from_1_1_0() {
    let w = World::new();
    for version in ALL_VERSIONS {
        w.write_conf("st.conflist", &conflist("st", version, vec![rec("a"), rec("b")]));
        w.cnitool(&["status", "st"]).run().success();
        let recs = w.take_records();
        if at_least(version, "1.1.0") {
            assert_eq!(tags(&recs), ["STATUS:a", "STATUS:b"]);
            assert_six_cni_vars(&recs[0]);
            assert_eq!(
                (recs[0]["containerId"].as_str(), recs[0]["ifname"].as_str()),
                (Some(""), Some(""))
            );
            assert_eq!(
                recs[0]["conf"],
                json!({"cniVersion": version, "name": "st", "type": "recorder", "tag": "a"})
            );
        } else {
            assert!(recs.is_empty(), "{version}: STATUS sent");
        }
    }
    let mut b = rec("b");
    b["fail"] = json!({"STATUS": {"code": 50, "msg": "not ready"}});
    w.write_conf("st.conflist", &conflist("st", "1.1.0", vec![rec("a"), b, rec("c")]));
    let out = w.cnitool(&["status", "st"]).run();
    assert_eq!(out.failure(50), "not ready");
    assert!(
        out.stderr
            .contains("plugin type=\"recorder\" failed (status): not ready"),
        "{out:?}"
    );
    assert_eq!(tags(&w.take_records()), ["STATUS:a", "STATUS:b"]);
}

#[test]
fn gc_deletes_exactly_the_stale_attachments() {
    let w = World::new();
    for version in ["1.0.0", "1.1.0"] {
        w.write_conf("gc.conflist", &conflist("gc", version, vec![rec("a"), rec("b")]));
        w.write_conf("other.conflist", &conflist("other", version, vec![rec("o")]));
        for (cid, ifname, args) in [
            ("c1", "eth0", "X=1"),
            ("c2", "eth0", "X=2"),
            ("c3", "net1", "X=3"),
            ("c1", "net1", "X=4"),
        ] {
            let netns = format!("/run/netns/{cid}");
            w.cnitool(&["add", "gc", &netns, "--container-id", cid])
                .env("CNI_IFNAME", ifname)
                .env("CNI_ARGS", args)
                .run()
                .success();
        }
        w.cnitool(&["add", "other", "/run/netns/c9", "--container-id", "c9"])
            .run()
            .success();
        w.take_records();

        w.cnitool(&["gc", "gc", "--keep", "c1:eth0", "--keep", "c3:eth9"])
            .run()
            .success();
        let recs = w.take_records();
        let dels: Vec<String> = recs
            .iter()
            .filter(|r| r["command"] == "DEL")
            .map(|r| {
                format!(
                    "{} {} {} {} {}",
                    r["tag"], r["containerId"], r["ifname"], r["netns"], r["args"]
                )
            })
            .collect();
        // The stale ones, in cache file name order, each in reverse plugin order, from the cache.
        assert_eq!(
            dels,
            [
                r#""b" "c1" "net1" "/run/netns/c1" "X=4""#,
                r#""a" "c1" "net1" "/run/netns/c1" "X=4""#,
                r#""b" "c2" "eth0" "/run/netns/c2" "X=2""#,
                r#""a" "c2" "eth0" "/run/netns/c2" "X=2""#,
                r#""b" "c3" "net1" "/run/netns/c3" "X=3""#,
                r#""a" "c3" "net1" "/run/netns/c3" "X=3""#,
            ],
            "{version}"
        );
        assert!(recs
            .iter()
            .filter(|r| r["command"] == "DEL")
            .all(|r| r["conf"]["prevResult"].is_object()));
        let gcs: Vec<&Value> = recs.iter().filter(|r| r["command"] == "GC").collect();
        if version == "1.1.0" {
            assert_eq!(
                gcs.iter().map(|r| r["tag"].as_str().unwrap()).collect::<Vec<_>>(),
                ["a", "b"]
            );
            let valid = json!([{"containerID": "c1", "ifname": "eth0"}, {"containerID": "c3", "ifname": "eth9"}]);
            for r in &gcs {
                assert_eq!(r["conf"]["cni.dev/valid-attachments"], valid);
                assert_eq!(r["conf"]["cni.dev/attachments"], valid);
                assert_eq!(
                    (r["containerId"].as_str(), r["netns"].as_str(), r["ifname"].as_str()),
                    (Some(""), Some(""), Some(""))
                );
            }
        } else {
            assert!(gcs.is_empty(), "GC sent for {version}");
        }
        assert!(w.cache_file("gc", "c1", "eth0").exists());
        for (cid, ifname) in [("c2", "eth0"), ("c3", "net1"), ("c1", "net1")] {
            assert!(!w.cache_file("gc", cid, ifname).exists(), "{cid} {ifname} survived GC");
        }
        assert!(
            w.cache_file("other", "c9", "eth0").exists(),
            "GC touched another network"
        );
        // clean up for the next version
        w.cnitool(&["gc", "gc"]).run().success();
        w.cnitool(&["gc", "other"]).run().success();
        assert!(!w.cache_file("gc", "c1", "eth0").exists());
        w.take_records();
    }
}

#[test]
fn gc_collects_errors_and_honours_disable_gc() {
    let w = World::new();
    let mut a = rec("a");
    a["fail"] = json!({"DEL": {"code": 999, "msg": "stuck"}, "GC": {"code": 999, "msg": "gc broken"}});
    w.write_conf("ge.conflist", &conflist("ge", "1.1.0", vec![a, rec("b")]));
    for cid in ["s1", "s2"] {
        w.cnitool(&["add", "ge", "/run/netns/x", "--container-id", cid])
            .run()
            .success();
    }
    w.take_records();
    let out = w.cnitool(&["gc", "ge"]).run();
    assert_eq!(out.code, 1);
    for want in [
        "failed to delete stale attachment s1 eth0: plugin type=\"recorder\" failed (delete): stuck",
        "failed to delete stale attachment s2 eth0: plugin type=\"recorder\" failed (delete): stuck",
        "plugin type=\"recorder\" failed (gc): gc broken",
    ] {
        assert!(out.stderr.contains(want), "missing {want:?} in {out:?}");
    }
    // Both plugins still got GC.
    let gcs: Vec<String> = tags(&w.take_records())
        .into_iter()
        .filter(|t| t.starts_with("GC"))
        .collect();
    assert_eq!(gcs, ["GC:a", "GC:b"]);

    let mut list = conflist("ge", "1.1.0", vec![rec("b")]);
    list["disableGC"] = json!(true);
    w.write_conf("ge.conflist", &list);
    w.cnitool(&["gc", "ge"]).run().success();
    assert!(w.take_records().is_empty());
    assert!(w.cache_file("ge", "s1", "eth0").exists());
}

#[test]
fn sandbox_status_one_two_and_conflicting_attachments() {
    let w = World::new();
    let with_ip = |tag: &str, ip: &str| json!({"type": "recorder", "tag": tag, "ip": ip});
    w.write_conf(
        "n1.conflist",
        &conflist("n1", "1.0.0", vec![with_ip("a", "10.1.0.2/24")]),
    );
    w.write_conf(
        "n2.conflist",
        &conflist("n2", "1.0.0", vec![with_ip("b", "fd00::5/64")]),
    );
    w.write_conf(
        "n3.conflist",
        &conflist("n3", "0.4.0", vec![with_ip("c", "192.168.7.3/24")]),
    );
    w.write_conf(
        "dup.conflist",
        &conflist("dup", "1.0.0", vec![with_ip("d", "10.1.0.2/24")]),
    );

    w.cnitool(&["add", "n1", "/run/netns/s", "--container-id", "sb"])
        .run()
        .success();
    let one = w.cnitool(&["sandbox-status", "sb"]).run().success();
    assert_eq!(
        one,
        json!({"ip": "10.1.0.2", "additionalIps": [], "attachments": [{"network": "n1", "ifname": "eth0", "ips": ["10.1.0.2"]}]})
    );

    w.cnitool(&["add", "n3", "/run/netns/s", "--container-id", "sb"])
        .env("CNI_IFNAME", "net1")
        .run()
        .success();
    let two = w.cnitool(&["sandbox-status", "sb"]).run().success();
    assert_eq!(two["ip"], "10.1.0.2");
    assert_eq!(two["additionalIps"], json!(["192.168.7.3"]));
    assert_eq!(
        two["attachments"][1],
        json!({"network": "n3", "ifname": "net1", "ips": ["192.168.7.3"]})
    );
    // Another primary interface name makes net1 the primary.
    let other = w
        .cnitool(&["sandbox-status", "sb", "--primary-ifname", "net1"])
        .run()
        .success();
    assert_eq!(
        (other["ip"].clone(), other["additionalIps"].clone()),
        (json!("192.168.7.3"), json!(["10.1.0.2"]))
    );

    // Two networks on eth0: both claim the primary slot.
    w.cnitool(&["add", "n2", "/run/netns/s", "--container-id", "sb"])
        .run()
        .success();
    let out = w.cnitool(&["sandbox-status", "sb"]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("networks \"n1\" and \"n2\" both claim the primary interface \"eth0\""),
        "{out:?}"
    );
    w.cnitool(&["del", "n2", "/run/netns/s", "--container-id", "sb"])
        .run()
        .success();

    // The same address from two attachments.
    w.cnitool(&["add", "dup", "/run/netns/s", "--container-id", "sb"])
        .env("CNI_IFNAME", "net2")
        .run()
        .success();
    let out = w.cnitool(&["sandbox-status", "sb"]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains(
            "networks \"dup\" (interface \"net2\") and \"n1\" (interface \"eth0\") both report address 10.1.0.2"
        ),
        "{out:?}"
    );

    let out = w.cnitool(&["sandbox-status", "nobody"]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no cached attachments for container \"nobody\""),
        "{out:?}"
    );
}

#[test]
fn container_id_is_derived_from_the_absolute_netns_path() {
    let w = World::new();
    w.write_conf("id.conflist", &conflist("id", "1.0.0", vec![rec("a")]));
    // A relative, unclean path: cnitool makes it absolute and clean before hashing.
    let out = w.cnitool(&["add", "id", "run/../run/netns//idtest"]).run();
    out.success();
    let recs = w.take_records();
    let cwd = std::env::current_dir().unwrap();
    let abs = cwd.join("run/netns/idtest");
    let abs = abs.to_str().unwrap();
    assert_eq!(recs[0]["netns"], abs);
    assert_eq!(recs[0]["containerId"], derived_id(abs).as_str());
    assert!(w.cache_file("id", &derived_id(abs), "eth0").exists());
    // --container-id overrides.
    w.cnitool(&["add", "id", "/run/netns/idtest", "--container-id", "mine"])
        .run()
        .success();
    assert_eq!(w.take_records()[0]["containerId"], "mine");
}

#[test]
fn cache_file_format_is_libcni_v1() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    // A file with odd formatting: the cache must keep its exact bytes.
    let text = "{ \"name\": \"fmt\",\n  \"cniVersion\": \"1.0.0\",\n  \"plugins\": [ {\"type\": \"recorder\", \"tag\": \"a\"} ] }\n";
    std::fs::write(w.conf_dir.join("fmt.conflist"), text).unwrap();
    let result = w
        .cnitool(&["add", "fmt", "/run/netns/fmt"])
        .env("CNI_ARGS", "A=1;B=2")
        .env("CAP_ARGS", r#"{"ips":["10.0.0.9/24"]}"#)
        .run()
        .success();
    let path = w.cache_file("fmt", &derived_id("/run/netns/fmt"), "eth0");
    let raw = std::fs::read_to_string(&path).unwrap();
    assert!(
        !raw.contains('\n'),
        "cache file must be one line without newline: {raw:?}"
    );
    let keys = [
        "\"kind\":",
        "\"containerId\":",
        "\"config\":",
        "\"ifName\":",
        "\"networkName\":",
        "\"netns\":",
        "\"cniArgs\":",
        "\"capabilityArgs\":",
        "\"result\":",
    ];
    let positions: Vec<usize> = keys
        .iter()
        .map(|k| raw.find(k).unwrap_or_else(|| panic!("{k} missing in {raw}")))
        .collect();
    assert!(
        positions.windows(2).all(|p| p[0] < p[1]),
        "field order differs from libcni: {raw}"
    );
    let v: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v["kind"], "cniCacheV1");
    assert_eq!(v["cniArgs"], json!([["A", "1"], ["B", "2"]]));
    assert_eq!(v["capabilityArgs"], json!({"ips": ["10.0.0.9/24"]}));
    assert_eq!(v["result"], result);
    let decoded = Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(v["config"].as_str().unwrap().as_bytes())?;
            c.wait_with_output()
        });
    assert_eq!(String::from_utf8(decoded.unwrap().stdout).unwrap(), text);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let dir_mode = std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "temp files left behind: {names:?}");
}

#[test]
fn single_plugin_conf_files_are_wrapped() {
    let w = World::new();
    w.write_conf(
        "10-one.conf",
        &json!({"cniVersion": "0.4.0", "name": "one", "type": "recorder", "tag": "s"}),
    );
    w.cnitool(&["add", "one", "/run/netns/one"]).run().success();
    let recs = w.take_records();
    assert_eq!(recs[0]["conf"]["name"], "one");
    let entry = w.cache_entry("one", &derived_id("/run/netns/one"), "eth0");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("printf %s '{}' | base64 -d", entry["config"].as_str().unwrap()))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        r#"{"cniVersion":"0.4.0","name":"one","plugins":[{"cniVersion":"0.4.0","name":"one","tag":"s","type":"recorder"}]}"#
    );
    let out = w.cnitool(&["add", "nothere", "/run/netns/one"]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains(&format!(
            "no net configuration with name \"nothere\" in {}",
            w.conf_dir.display()
        )),
        "{out:?}"
    );
}

#[test]
fn cache_keys_cannot_escape_the_cache_dir() {
    let w = World::new();
    w.write_conf("esc.conflist", &conflist("esc", "1.0.0", vec![rec("a")]));
    for (cid, ifname, want) in [
        ("../../evil", "eth0", "invalid characters in containerID"),
        ("ok", "../x", "interface name \"../x\""),
        ("ok", "..", "interface name \"..\""),
        ("ok", "", "interface name is empty"),
    ] {
        for verb in ["add", "del", "check"] {
            let out = w
                .cnitool(&[verb, "esc", "/run/netns/esc", "--container-id", cid])
                .env("CNI_IFNAME", ifname)
                .run();
            assert_eq!(out.code, 1, "{verb} {cid} {ifname}: {out:?}");
            assert!(out.stderr.contains(want), "{verb} {cid:?} {ifname:?}: {out:?}");
        }
    }
    assert!(w.take_records().is_empty(), "a plugin ran with an invalid name");
    assert!(!w.env.tmp.path().join("evil").exists());
}

#[test]
fn same_attachment_is_serialised_different_ones_run_in_parallel() {
    let w = World::new();
    let mut slow = rec("slow");
    slow["sleep"] = json!(1);
    w.write_conf("lk.conflist", &conflist("lk", "1.0.0", vec![slow]));
    // ADD sleeps inside the plugin; a DEL of the same attachment started meanwhile must wait
    // for it, and so sees the cached result.
    std::thread::scope(|s| {
        let add = s.spawn(|| w.cnitool(&["add", "lk", "/run/netns/lk"]).run());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let del = s.spawn(|| w.cnitool(&["del", "lk", "/run/netns/lk"]).run());
        add.join().unwrap().success();
        del.join().unwrap().success();
    });
    let recs = w.take_records();
    assert_eq!(tags(&recs), ["ADD:slow", "DEL:slow"]);
    assert!(
        recs[1]["conf"]["prevResult"].is_object(),
        "DEL ran before ADD finished: {:?}",
        recs[1]
    );

    // Different containers do not wait for each other: four ADDs meet inside their plugins,
    // which only works if all four run at once.
    let rdv = w.env.tmp.path().join("rendezvous");
    std::fs::create_dir(&rdv).unwrap();
    let mut meet = rec("meet");
    meet["rendezvous"] = json!({"dir": rdv.to_str().unwrap(), "count": 4});
    w.write_conf("lk.conflist", &conflist("lk", "1.0.0", vec![meet]));
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let w = &w;
                s.spawn(move || {
                    w.cnitool(&["add", "lk", "/run/netns/lk", "--container-id", &format!("p{i}")])
                        .run()
                })
            })
            .collect();
        for r in runs {
            r.join().unwrap().success();
        }
    });
    assert_eq!(w.take_records().len(), 4);
}

#[test]
fn help_and_usage_errors() {
    let w = World::new();
    let out = w.cnitool(&["--help"]).run();
    assert_eq!(out.code, 0, "{out:?}");
    for word in [
        "add",
        "check",
        "del",
        "status",
        "gc",
        "sandbox-status",
        "NETCONFPATH",
        "CNI_CACHE_DIR",
    ] {
        assert!(out.stdout.contains(word), "help lacks {word}: {}", out.stdout);
    }
    let out = w.cnitool(&["add", "onlynet"]).run();
    assert_eq!(out.code, 2, "{out:?}");
    let out = w.cnitool(&["gc", "n", "--keep", "nocolon"]).run();
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("expected CONTAINER-ID:IFNAME"), "{out:?}");
    w.write_conf("ar.conflist", &conflist("ar", "1.0.0", vec![rec("a")]));
    let out = w
        .cnitool(&["add", "ar", "/run/netns/ar"])
        .env("CNI_ARGS", "A=1;;")
        .run();
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("invalid CNI_ARGS pair \"\""), "{out:?}");
}

fn libcni_tool(w: &World) -> Option<PathBuf> {
    common::libcni_tool(w.env.tmp.path())
}

impl World {
    /// Run the libcni runtime inside the host namespace with the same dirs cnitool uses.
    fn libcni(&self, tool: &Path, verb: &str, net: &str, netns: &str, cid: &str) -> CallOutput {
        let mut c = self.env.host.command(tool);
        c.args([
            verb,
            self.conf_dir.to_str().unwrap(),
            net,
            netns,
            cid,
            self.env.cache_dir.to_str().unwrap(),
        ])
        .arg(self.cni_path())
        .env("RECORD_FILE", &self.record)
        .env("CNI_ARGS", "A=1;B=2")
        .env("CAP_ARGS", r#"{"mac":"c2:00:00:00:00:07","other":[1]}"#);
        let out = c.output().unwrap();
        CallOutput {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

fn interop_list() -> Value {
    let mut b = rec("b");
    b["capabilities"] = json!({"mac": true});
    conflist("interop", "1.0.0", vec![rec("a"), b])
}

#[test]
fn libcni_adds_cnibox_deletes() {
    let w = World::new();
    let Some(tool) = libcni_tool(&w) else { return };
    w.write_conf("interop.conflist", &interop_list());
    let out = w.libcni(&tool, "add", "interop", "/run/netns/li1", "li1");
    let result = out.success();
    w.take_records();
    // cnibox reads libcni's cache: sandbox status, then DEL with libcni's cached config
    // (the file on disk has changed since) and result.
    let status = w.cnitool(&["sandbox-status", "li1"]).run().success();
    assert_eq!(status["ip"], "10.99.0.2");
    w.write_conf("interop.conflist", &conflist("interop", "1.0.0", vec![rec("x")]));
    w.cnitool(&["del", "interop", "/run/netns/li1", "--container-id", "li1"])
        .run()
        .success();
    let dels = w.take_records();
    assert_eq!(tags(&dels), ["DEL:b", "DEL:a"]);
    for r in &dels {
        assert_eq!(r["conf"]["prevResult"], result);
        assert_eq!(r["args"], "A=1;B=2");
    }
    assert_eq!(dels[0]["conf"]["runtimeConfig"], json!({"mac": "c2:00:00:00:00:07"}));
    assert!(!w.cache_file("interop", "li1", "eth0").exists());
}

#[test]
fn cnibox_adds_libcni_checks_and_deletes() {
    let w = World::new();
    let Some(tool) = libcni_tool(&w) else { return };
    w.write_conf("interop.conflist", &interop_list());
    let result = w
        .cnitool(&["add", "interop", "/run/netns/cb1", "--container-id", "cb1"])
        .env("CNI_ARGS", "A=1;B=2")
        .env("CAP_ARGS", r#"{"mac":"c2:00:00:00:00:07","other":[1]}"#)
        .run()
        .success();
    w.take_records();
    let cached = w.libcni(&tool, "cached", "interop", "/run/netns/cb1", "cb1").success();
    assert_eq!(cached, result, "libcni reads back a different result");
    w.libcni(&tool, "check", "interop", "/run/netns/cb1", "cb1").success();
    let checks = w.take_records();
    assert_eq!(tags(&checks), ["CHECK:a", "CHECK:b"]);
    assert!(checks.iter().all(|r| r["conf"]["prevResult"] == result));
    w.libcni(&tool, "del", "interop", "/run/netns/cb1", "cb1").success();
    let dels = w.take_records();
    assert_eq!(tags(&dels), ["DEL:b", "DEL:a"]);
    assert!(dels.iter().all(|r| r["conf"]["prevResult"] == result));
    assert!(!w.cache_file("interop", "cb1", "eth0").exists());
}

#[test]
fn cache_files_match_libcni_byte_for_byte() {
    let w = World::new();
    let Some(tool) = libcni_tool(&w) else { return };
    w.write_conf("interop.conflist", &interop_list());
    w.libcni(&tool, "add", "interop", "/run/netns/same", "go").success();
    w.cnitool(&["add", "interop", "/run/netns/same", "--container-id", "rs"])
        .env("CNI_ARGS", "A=1;B=2")
        .env("CAP_ARGS", r#"{"mac":"c2:00:00:00:00:07","other":[1]}"#)
        .run()
        .success();
    let go = std::fs::read_to_string(w.cache_file("interop", "go", "eth0")).unwrap();
    let ours = std::fs::read_to_string(w.cache_file("interop", "rs", "eth0")).unwrap();
    // libcni 1.1.2 predates the `netns` field (newer libcni writes it where cnibox does).
    let ours = ours
        .replace(r#""netns":"/run/netns/same","#, "")
        .replace(r#""containerId":"rs""#, r#""containerId":"go""#);
    assert_eq!(ours, go);
}

/// sandbox-status picks the pod IPs as containerd 1.6's PodSandboxStatus does: the
/// `cni-loopback` attachment containerd adds on `lo` is never a pod IP, IPv4 is preferred
/// for `ip` though the IPv6 range came first (`--ip-pref ipv6` prefers IPv6), and every
/// address of the primary interface is listed.
#[test]
fn sandbox_status_is_what_containerd_reports() {
    for v in ALL_VERSIONS {
        let w = World::new();
        let ctr = w.env.container();
        let loopback = json!({"cniVersion": "0.3.1", "name": "cni-loopback", "plugins": [{"type": "loopback"}]});
        w.write_conf("99-loopback.conflist", &loopback);
        let old_shape = matches!(*v, "0.1.0" | "0.2.0");
        let result = if old_shape {
            json!({"cniVersion": v, "ip4": {"ip": "10.1.0.2/24"}, "ip6": {"ip": "fd00::5/64"}})
        } else {
            let ip = |version: &str, address: &str| json!({"version": version, "address": address, "interface": 0});
            json!({"cniVersion": v, "interfaces": [{"name": "eth0", "sandbox": ctr.path_str()}],
                   "ips": [ip("6", "fd00::5/64"), ip("4", "10.1.0.2/24"), ip("4", "10.1.0.9/24")]})
        };
        let pods = conflist(
            "pods",
            v,
            vec![json!({"type": "recorder", "tag": "p", "result": result})],
        );
        w.write_conf("10-pods.conflist", &pods);
        for (net, ifname) in [("cni-loopback", "lo"), ("pods", "eth0")] {
            w.cnitool(&["add", net, ctr.path_str(), "--container-id", "pod"])
                .env("CNI_IFNAME", ifname)
                .run()
                .success();
        }
        let status = |pref: &[&str]| {
            let mut args = vec!["sandbox-status", "pod"];
            args.extend(pref);
            let s = w.cnitool(&args).run().success();
            (s["ip"].clone(), s["additionalIps"].clone())
        };
        let (v4_first, v6_first) = if old_shape {
            (
                (json!("10.1.0.2"), json!(["fd00::5"])),
                (json!("fd00::5"), json!(["10.1.0.2"])),
            )
        } else {
            (
                (json!("10.1.0.2"), json!(["fd00::5", "10.1.0.9"])),
                (json!("fd00::5"), json!(["10.1.0.2", "10.1.0.9"])),
            )
        };
        assert_eq!(status(&[]), v4_first, "{v}");
        assert_eq!(status(&["--ip-pref", "ipv4"]), v4_first, "{v}");
        assert_eq!(status(&["--ip-pref", "ipv6"]), v6_first, "{v}");
        let out = w.cnitool(&["sandbox-status", "pod", "--ip-pref", "v6"]).run();
        assert_ne!(out.code, 0);
        assert!(out.stderr.contains("invalid IP preference \"v6\""), "{out:?}");
        // the loopback attachment is still listed, with its addresses
        let s = w.cnitool(&["sandbox-status", "pod"]).run().success();
        let lo = s["attachments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["ifname"] == "lo")
            .cloned();
        assert_eq!(lo.unwrap()["network"], "cni-loopback", "{s}");
        for (net, ifname) in [("pods", "eth0"), ("cni-loopback", "lo")] {
            w.cnitool(&["del", net, ctr.path_str(), "--container-id", "pod"])
                .env("CNI_IFNAME", ifname)
                .run()
                .success();
        }
    }
}

/// The container IDs and namespaces the recorded DELs were for, in order.
fn dels_of(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["command"] == "DEL")
        .map(|r| {
            format!(
                "{} netns={:?}",
                r["containerId"].as_str().unwrap(),
                r["netns"].as_str().unwrap()
            )
        })
        .collect()
}

/// Regression: after a reboot (another boot ID), GC entered the namespace path an earlier
/// boot's attachment was cached with, which may name another namespace now (the hook
/// caches `/proc/<pid>/ns/net`, and pids are reused), handed plugins its old result, and
/// kept such an attachment when the runtime listed it. Now it is gone: deleted without a
/// namespace or result even when kept, unless the network keeps an earlier boot's
/// (`releaseAfterReboot: false` in its IPAM), which still never enters the old path.
#[test]
fn gc_after_a_reboot_deletes_the_earlier_boots_attachments_without_their_namespace() {
    let w = World::new();
    let boot = |n| boot_id_file(w.env.tmp.path(), n);
    let (before, after) = (boot(0), boot(1));
    for (name, keeps) in [("gc", false), ("keepgc", true)] {
        let mut a = rec("a");
        if keeps {
            a["ipam"] = json!({"type": "host-local", "releaseAfterReboot": false});
        }
        w.write_conf(&format!("{name}.conflist"), &conflist(name, "1.1.0", vec![a]));
        for cid in ["old-kept", "old-stale"] {
            w.cnitool(&["add", name, &format!("/run/netns/{cid}"), "--container-id", cid])
                .in_boot(&before)
                .run()
                .success();
        }
        w.cnitool(&["add", name, "/run/netns/new", "--container-id", "new"])
            .in_boot(&after)
            .run()
            .success();
        w.take_records();
        w.cnitool(&["gc", name, "--keep", "old-kept:eth0", "--keep", "new:eth0"])
            .in_boot(&after)
            .run()
            .success();
        let records = w.take_records();
        assert!(
            records
                .iter()
                .filter(|r| r["command"] == "DEL")
                .all(|r| r["conf"]["prevResult"].is_null()),
            "{name}: an earlier boot's result handed to a plugin"
        );
        let dels = dels_of(&records);
        let kept_old = w.cache_file(name, "old-kept", "eth0").exists();
        if keeps {
            assert_eq!(dels, ["old-stale netns=\"\""], "{name}");
            assert!(kept_old, "{name}");
        } else {
            assert_eq!(dels, ["old-kept netns=\"\"", "old-stale netns=\"\""], "{name}");
            assert!(!kept_old, "{name}");
        }
        assert!(!w.cache_file(name, "old-stale", "eth0").exists(), "{name}");
        assert!(
            w.cache_file(name, "new", "eth0").exists(),
            "{name}: this boot's is kept"
        );
    }
    // in the same boot nothing changes: the cached namespace, the valid set honoured
    w.write_conf("same.conflist", &conflist("same", "1.1.0", vec![rec("a")]));
    for cid in ["s1", "s2"] {
        w.cnitool(&["add", "same", &format!("/run/netns/{cid}"), "--container-id", cid])
            .in_boot(&after)
            .run()
            .success();
    }
    w.take_records();
    w.cnitool(&["gc", "same", "--keep", "s1:eth0"])
        .in_boot(&after)
        .run()
        .success();
    assert_eq!(dels_of(&w.take_records()), ["s2 netns=\"/run/netns/s2\""]);
}

/// Regression: an ADD of a container whose attachment was cached in an earlier boot ran
/// over the stale entry, so what plugins keep on disk for it (host-local's address, under
/// the reference) made the ADD fail as a duplicate. Now that attachment is deleted first,
/// without a namespace and without its cached result, in every version.
#[test]
fn add_after_a_reboot_deletes_the_containers_earlier_attachment_first() {
    for version in ALL_VERSIONS {
        let w = World::new();
        let boot = |n| boot_id_file(w.env.tmp.path(), n);
        let (before, after) = (boot(0), boot(1));
        w.write_conf("rb.conflist", &conflist("rb", version, vec![rec("a"), rec("b")]));
        let add = |b: &Path| {
            w.cnitool(&["add", "rb", "/run/netns/rb", "--container-id", "c1"])
                .in_boot(b)
                .run()
                .success()
        };
        let first = add(&before);
        add(&before);
        let again = w.take_records();
        assert_eq!(dels_of(&again), Vec::<String>::new(), "{version}: same boot, as before");
        add(&after);
        let records = w.take_records();
        assert_eq!(tags(&records), ["DEL:b", "DEL:a", "ADD:a", "ADD:b"], "{version}");
        assert_eq!(dels_of(&records), ["c1 netns=\"\"", "c1 netns=\"\""], "{version}");
        // the cached config and arguments, no result: the names and addresses in it may
        // be another attachment's in this boot
        for del in &records[..2] {
            assert!(del["conf"]["prevResult"].is_null(), "{version}: {del}");
            assert_eq!(del["conf"]["name"], "rb");
        }
        assert_eq!(records[2]["netns"], "/run/netns/rb");
        assert!(first.is_object());
        // the ADD kept the attachment's lock file it held throughout: removed (as a DEL
        // removes it), the next caller would have locked a new file beside it
        assert!(
            w.env.cache_dir.join("locks/rb-c1-eth0").exists(),
            "{version}: lock file removed under the ADD"
        );
        // a network that keeps an earlier boot's attachments leaves it to the runtime
        let mut keep = conflist("rb", version, vec![rec("a")]);
        keep["plugins"][0]["ipam"] = json!({"releaseAfterReboot": false});
        w.write_conf("rb.conflist", &keep);
        add(&before);
        w.take_records();
        add(&after);
        assert_eq!(tags(&w.take_records()), ["ADD:a"], "{version}");
    }
}
