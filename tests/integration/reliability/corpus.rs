//! The checked-in corpus of malformed inputs (tests/corpus/, listed with the expected
//! outcome of each file in tests/corpus/MANIFEST), run in `make test`: plugin configs
//! in process and through the real binary, `CNI_ARGS`, resolv.conf files, results, OCI
//! states through the real `oci-hook`, and corrupt cache files through `cnitool del`.
//! Also the generated extremes that are too big to check in (stdin over 1 MiB).
use crate::common;
use crate::fuzz;

use common::*;
use fuzz::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone)]
struct Case {
    target: String,
    file: String,
    verb: String,
    expect: String,
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn manifest() -> Vec<Case> {
    let text = std::fs::read_to_string(corpus_dir().join("MANIFEST")).unwrap();
    text.lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "MANIFEST line {l:?}");
            Case {
                target: f[0].into(),
                file: f[1].into(),
                verb: f[2].into(),
                expect: f[3].into(),
            }
        })
        .collect()
}

fn read_case(c: &Case, data_dir: &Path) -> Vec<u8> {
    let raw = std::fs::read(corpus_dir().join(&c.target).join(&c.file)).unwrap();
    replace(&raw, b"@DATADIR@", data_dir.to_str().unwrap().as_bytes())
}

fn replace(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// "ok" for exit 0, else the error object's code (or a description of what is wrong).
fn verdict(exit: i32, stdout: &[u8]) -> String {
    if exit == 0 {
        return "ok".into();
    }
    match serde_json::from_slice::<Value>(stdout) {
        Ok(v) if v["code"].is_u64() && v["msg"].is_string() => v["code"].to_string(),
        _ => format!(
            "exit {exit} without an error object: {}",
            String::from_utf8_lossy(stdout)
        ),
    }
}

const NETNS_NONE: &str = "/run/netns/cnibox-corpus-nonexistent";

fn plugin_env(verb: &str, bin: &Path, args: Option<&str>) -> BTreeMap<String, String> {
    let mut e = BTreeMap::new();
    for (k, v) in [
        ("CNI_COMMAND", verb),
        ("CNI_CONTAINERID", "corpusctr"),
        ("CNI_NETNS", NETNS_NONE),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", bin.to_str().unwrap()),
    ] {
        e.insert(k.to_string(), v.to_string());
    }
    if let Some(a) = args {
        e.insert("CNI_ARGS".into(), a.to_string());
    }
    e
}

fn host_local_conf(data: &Path, resolv: Option<&Path>) -> Vec<u8> {
    let mut ipam = json!({"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": data});
    if let Some(r) = resolv {
        ipam["resolvConf"] = json!(r);
    }
    serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "cnet", "ipam": ipam})).unwrap()
}

/// The plugin applet, stdin and environment a plugin-level case runs with.
fn plugin_call(c: &Case, data: &Path, bin: &Path) -> Option<(String, Vec<u8>, BTreeMap<String, String>)> {
    match c.target.as_str() {
        "host-local" | "bridge" | "veth" | "ptp" | "macvlan" => {
            Some((c.target.clone(), read_case(c, data), plugin_env(&c.verb, bin, None)))
        }
        "args" => {
            let raw = std::fs::read_to_string(corpus_dir().join("args").join(&c.file)).unwrap();
            let args = raw.trim_end_matches('\n').to_string();
            Some((
                "host-local".into(),
                host_local_conf(data, None),
                plugin_env(&c.verb, bin, Some(&args)),
            ))
        }
        "resolv" => {
            let path = corpus_dir().join("resolv").join(&c.file);
            Some((
                "host-local".into(),
                host_local_conf(data, Some(&path)),
                plugin_env(&c.verb, bin, None),
            ))
        }
        _ => None,
    }
}

fn bin_dir(tmp: &Path) -> PathBuf {
    let bin = tmp.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in run_ok(std::process::Command::new(cnibox()).arg("--list")).lines() {
        let _ = std::os::unix::fs::symlink(cnibox(), bin.join(name));
    }
    bin
}

#[test]
fn manifest_lists_every_corpus_file_and_nothing_else() {
    let cases = manifest();
    let listed: std::collections::BTreeSet<String> = cases.iter().map(|c| format!("{}/{}", c.target, c.file)).collect();
    assert_eq!(listed.len(), cases.len(), "a file is listed twice");
    let mut on_disk = std::collections::BTreeSet::new();
    for d in std::fs::read_dir(corpus_dir()).unwrap().flatten() {
        if d.path().is_dir() {
            for f in std::fs::read_dir(d.path()).unwrap().flatten() {
                on_disk.insert(format!(
                    "{}/{}",
                    d.file_name().to_string_lossy(),
                    f.file_name().to_string_lossy()
                ));
            }
        }
    }
    assert_eq!(listed, on_disk, "MANIFEST and tests/corpus/ differ");
    for c in &cases {
        assert!(
            c.expect == "ok" || c.expect == "fail" || c.expect.parse::<u32>().is_ok(),
            "bad expectation {c:?}"
        );
    }
}

#[test]
fn corpus_plugin_inputs_in_process() {
    require_root();
    let tmp = tempfile::Builder::new().prefix("cnibox-corpus").tempdir().unwrap();
    let bin = bin_dir(tmp.path());
    let data = tmp.path().join("data");
    let cases = manifest();
    let (failures, ran, skipped) = in_private_netns(move || {
        let (mut failures, mut ran, mut skipped) = (vec![], 0, 0);
        for c in &cases {
            let Some((applet, stdin, env)) = plugin_call(c, &data, &bin) else {
                continue;
            };
            let Some(plugin) = cnibox::applets::plugin(&applet) else {
                skipped += 1;
                continue;
            };
            ran += 1;
            match run_entry_point(plugin, &env, &stdin) {
                Err(p) => failures.push(format!("{}/{}: {p}", c.target, c.file)),
                Ok((exit, out)) => {
                    let got = verdict(exit, &out);
                    if got != c.expect {
                        failures.push(format!(
                            "{}/{} ({}): expected {}, got {got}",
                            c.target, c.file, c.verb, c.expect
                        ));
                    }
                    if exit == 0 && c.verb == "ADD" {
                        let mut del = env.clone();
                        del.insert("CNI_COMMAND".into(), "DEL".into());
                        if !matches!(run_entry_point(plugin, &del, &stdin), Ok((0, _))) {
                            failures.push(format!("{}/{}: DEL after ADD failed", c.target, c.file));
                        }
                    }
                }
            }
        }
        (failures, ran, skipped)
    });
    eprintln!("corpus in process: {ran} cases run, {skipped} skipped (applet not in this build)");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn corpus_plugin_inputs_through_the_binary() {
    let env = TestEnv::new();
    let data = env.tmp.path().join("data");
    let (mut failures, mut ran, mut skipped) = (vec![], 0, 0);
    let list = run_ok(std::process::Command::new(cnibox()).arg("--list"));
    for c in &manifest() {
        let Some((applet, stdin, vars)) = plugin_call(c, &data, &env.bin_dir) else {
            continue;
        };
        if !list.lines().any(|l| l == applet) {
            skipped += 1;
            continue;
        }
        ran += 1;
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let out = run_process(&env.bin_dir.join(&applet), &env.host.path, &[], &vars, &stdin, LIMIT);
        let got = if out.timed_out {
            "hang".to_string()
        } else {
            verdict(out.code, out.stdout.as_bytes())
        };
        if got != c.expect || out.stderr.contains("panic") {
            failures.push(format!(
                "{}/{} ({}): expected {}, got {got}; stderr {}",
                c.target, c.file, c.verb, c.expect, out.stderr
            ));
        }
        if out.code == 0 && c.verb == "ADD" {
            let mut del = vars.clone();
            del.retain(|(k, _)| *k != "CNI_COMMAND");
            del.push(("CNI_COMMAND", "DEL"));
            let d = run_process(&env.bin_dir.join(&applet), &env.host.path, &[], &del, &stdin, LIMIT);
            if d.code != 0 {
                failures.push(format!("{}/{}: DEL after ADD failed: {}", c.target, c.file, d.stdout));
            }
        }
    }
    // nothing reserved is left behind by the successful ADDs
    let left: Vec<String> = env
        .store("cnet")
        .into_keys()
        .filter(|k| k.parse::<std::net::IpAddr>().is_ok())
        .collect();
    assert!(left.is_empty(), "reservations left: {left:?}");
    eprintln!("corpus through the binary: {ran} cases run, {skipped} skipped (applet not in this build)");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn corpus_results_parse_with_the_recorded_code() {
    let mut failures = vec![];
    for c in manifest().iter().filter(|c| c.target == "result") {
        let bytes = std::fs::read(corpus_dir().join("result").join(&c.file)).unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let got = match cnibox::cni::CniResult::from_json(&cnibox::cni::json::Json::from(&v)) {
            Ok(r) => {
                // and what parsed converts to its own version and back
                let version = v["cniVersion"].as_str().unwrap_or("0.1.0");
                if let Ok(j) = r.to_json(version) {
                    assert!(
                        cnibox::cni::CniResult::from_json(&cnibox::cni::json::Json::from(&j)).is_ok(),
                        "{}: {j}",
                        c.file
                    );
                }
                "ok".to_string()
            }
            Err(e) => e.code.to_string(),
        };
        if got != c.expect {
            failures.push(format!("result/{}: expected {}, got {got}", c.file, c.expect));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn corpus_oci_states_fail_cleanly_in_the_hook() {
    let env = TestEnv::new();
    let conf_dir = env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let args = [
        "--conf-dir",
        conf_dir.to_str().unwrap(),
        "--bin-dir",
        env.bin_dir.to_str().unwrap(),
        "--cache-dir",
        env.cache_dir.to_str().unwrap(),
    ];
    let mut cases: Vec<(String, Vec<u8>, String)> = manifest()
        .into_iter()
        .filter(|c| c.target == "oci-state")
        .map(|c| {
            let b = std::fs::read(corpus_dir().join("oci-state").join(&c.file)).unwrap();
            (c.file, b, c.expect)
        })
        .collect();
    // over the 1 MiB bound on the hook's stdin
    let mut big = br#"{"ociVersion":"1.0.2","id":"c1","status":"creating","pid":1,"annotations":{"x":""#.to_vec();
    big.extend(std::iter::repeat(b'a').take(1 << 20));
    big.extend_from_slice(b"\"}}");
    cases.push(("generated: state over 1 MiB".into(), big, "fail".into()));
    let mut failures = vec![];
    for (name, stdin, expect) in &cases {
        let out = run_process(&env.bin_dir.join("oci-hook"), &env.host.path, &args, &[], stdin, LIMIT);
        let got = match (out.timed_out, out.code) {
            (true, _) => "hang".to_string(),
            (_, 0) => "ok".into(),
            (_, c) if c > 0 => "fail".into(),
            (_, c) => format!("killed by a signal ({c})"),
        };
        if &got != expect || out.stderr.contains("panicked") || out.stderr.is_empty() && got == "fail" {
            failures.push(format!(
                "oci-state/{name}: expected {expect}, got {got}; stderr {}",
                out.stderr
            ));
        }
    }
    // nothing was created in the cache dir outside its own tree
    assert!(!env.tmp.path().join("x").exists());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn corpus_corrupt_cache_files_never_block_cnitool_del() {
    let env = TestEnv::new();
    let conf_dir = env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let list = json!({"cniVersion": "1.0.0", "name": "cnet", "plugins": [
        {"type": "host-local", "ipam": {"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": env.data_dir}}]});
    std::fs::write(conf_dir.join("cnet.conflist"), list.to_string()).unwrap();
    let ns = env.container();
    let cnitool = |verb: &str| {
        env.tool("cnitool")
            .args([verb, "cnet", ns.path_str(), "--container-id", "corpusctr"])
            .env("NETCONFPATH", conf_dir.to_str().unwrap())
            .env("CNI_PATH", env.bin_dir.to_str().unwrap())
            .env("CNI_CACHE_DIR", env.cache_dir.to_str().unwrap())
            .run()
    };
    let cache_file = env.cache_dir.join("results/cnet-corpusctr-eth0");
    let mut failures = vec![];
    for c in manifest().iter().filter(|c| c.target == "cache") {
        let add = cnitool("add");
        assert!(add.ok(), "{add:?}");
        std::fs::write(
            &cache_file,
            std::fs::read(corpus_dir().join("cache").join(&c.file)).unwrap(),
        )
        .unwrap();
        let del = cnitool("del");
        let got = if del.ok() {
            "ok".to_string()
        } else {
            format!("failed: {del:?}")
        };
        if got != c.expect {
            failures.push(format!("cache/{}: expected {}, got {got}", c.file, c.expect));
        }
        if cache_file.exists() {
            failures.push(format!("cache/{}: the cache file is left", c.file));
        }
        let held: Vec<String> = env
            .store("cnet")
            .into_keys()
            .filter(|k| k.parse::<std::net::IpAddr>().is_ok())
            .collect();
        if !held.is_empty() {
            failures.push(format!("cache/{}: addresses left reserved: {held:?}", c.file));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn stdin_over_one_mib_is_refused_with_code_5() {
    let mut stdin = br#"{"cniVersion":"1.0.0","name":"cnet","pad":""#.to_vec();
    stdin.extend(std::iter::repeat(b' ').take(1 << 20));
    stdin.extend_from_slice(b"\"}");
    let env = TestEnv::new();
    let vars = plugin_env("ADD", &env.bin_dir, None);
    let pairs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = run_process(
        &env.bin_dir.join("host-local"),
        &env.host.path,
        &[],
        &pairs,
        &stdin,
        LIMIT,
    );
    assert_eq!(verdict(out.code, out.stdout.as_bytes()), "5", "{out:?}");
    // exactly at the limit is still read (and then judged as JSON)
    let mut exact = br#"{"cniVersion":"1.0.0","name":"cnet","pad":""#.to_vec();
    let room = (1usize << 20) - exact.len() - 2;
    exact.extend(std::iter::repeat(b' ').take(room));
    exact.extend_from_slice(b"\"}");
    assert_eq!(exact.len(), 1 << 20);
    let (code, out) = run_entry_point(&cnibox::ipam::host_local::HostLocal, &vars, &exact).unwrap();
    assert_eq!(
        verdict(code, &out),
        "999",
        "a full-size config reaches the plugin (no ipam: 999)"
    );
    let (code, out) = run_entry_point(&cnibox::ipam::host_local::HostLocal, &vars, &stdin).unwrap();
    assert_eq!(verdict(code, &out), "5");
}
