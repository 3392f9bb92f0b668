//! cnitool's (and the hook's) chain runner runs cnibox's own applets in-process, as IPAM
//! delegation does, and execs only foreign plugins. The answers must be those of exec: each
//! test runs the same chain once through a CNI_PATH of links to this binary (in-process) and
//! once through links to a copy of it (another file, so exec'd), and compares.
use crate::common;

use common::{cnibox, CallOutput, Netns, TestEnv};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

struct Side {
    bin_dir: PathBuf,
    conf_dir: PathBuf,
    cache_dir: PathBuf,
    data_dir: PathBuf,
}

/// A bin dir of links to `binary` for every applet, and its own conf, cache and data dirs.
fn side(env: &TestEnv, name: &str, binary: &Path) -> Side {
    let root = env.tmp.path().join(name);
    let bin_dir = root.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let list = common::run_ok(Command::new(cnibox()).arg("--list"));
    for applet in list.lines() {
        std::os::unix::fs::symlink(binary, bin_dir.join(applet)).unwrap();
    }
    let s = Side {
        conf_dir: root.join("net.d"),
        cache_dir: root.join("cache"),
        data_dir: root.join("data"),
        bin_dir,
    };
    std::fs::create_dir_all(&s.conf_dir).unwrap();
    s
}

/// The chain host-local → loopback, or with a range host-local refuses.
fn conflist(s: &Side, subnet: &str) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "inproc",
        "plugins": [
            {"type": "host-local", "ipam": {"subnet": subnet, "dataDir": s.data_dir}},
            {"type": "loopback"}
        ]
    })
}

/// `cnitool <verb> inproc <netns>` on this side, under strace; the output and the programs
/// the run executed.
fn cnitool(env: &TestEnv, s: &Side, verb: &str, ns: &Netns, cid: &str) -> (CallOutput, Vec<String>) {
    let log = env.tmp.path().join(format!("strace-{}", common::unique("x")));
    let out = env
        .tool("cnitool")
        .args([verb, "inproc", ns.path_str(), "--container-id", cid])
        .env("NETCONFPATH", s.conf_dir.to_str().unwrap())
        .env("CNI_PATH", s.bin_dir.to_str().unwrap())
        .env("CNI_CACHE_DIR", s.cache_dir.to_str().unwrap())
        .run_under(&["strace", "-f", "-qq", "-e", "trace=execve", "-o", log.to_str().unwrap()]);
    let execs = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("execve(\"") && !l.contains("= -1"))
        .map(|l| {
            let p = &l[l.find("execve(\"").unwrap() + 8..];
            p[..p.find('"').unwrap()].rsplit('/').next().unwrap().to_string()
        })
        .collect();
    (out, execs)
}

fn two_sides(env: &TestEnv) -> (Side, Side) {
    let copy = env.tmp.path().join("cnibox-copy");
    std::fs::copy(cnibox(), &copy).unwrap();
    (side(env, "own", &cnibox()), side(env, "copy", &copy))
}

fn require_strace() {
    if Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is missing: run sh tests/deps.sh");
    }
}

#[test]
fn own_applets_run_in_process_with_the_results_of_exec() {
    common::require_root();
    require_strace();
    let env = TestEnv::new();
    let (own, copy) = two_sides(&env);
    for s in [&own, &copy] {
        std::fs::write(
            s.conf_dir.join("10-inproc.conflist"),
            conflist(s, "10.88.0.0/24").to_string(),
        )
        .unwrap();
    }
    for verb in ["add", "check", "del"] {
        let (ns_own, ns_copy) = (env.container(), env.container());
        let cid = format!("ctr-{verb}");
        if verb != "add" {
            // CHECK and DEL need the attachment ADD made: make it on both sides first
            assert!(cnitool(&env, &own, "add", &ns_own, &cid).0.ok());
            assert!(cnitool(&env, &copy, "add", &ns_copy, &cid).0.ok());
        }
        let (in_process, own_execs) = cnitool(&env, &own, verb, &ns_own, &cid);
        let (exec, copy_execs) = cnitool(&env, &copy, verb, &ns_copy, &cid);
        assert!(in_process.ok(), "{verb}: {in_process:?}");
        assert_eq!(
            (in_process.code, &in_process.stdout),
            (exec.code, &exec.stdout),
            "{verb}: in-process and exec answer alike"
        );
        assert_eq!(own_execs, ["cnitool"], "{verb}: cnibox's applets ran in-process");
        // DEL runs the chain backwards
        let order: &[&str] = match verb {
            "del" => &["cnitool", "loopback", "host-local"],
            _ => &["cnitool", "host-local", "loopback"],
        };
        assert_eq!(copy_execs, order, "{verb}: another file on CNI_PATH is exec'd");
        if verb == "add" {
            let result: Value = serde_json::from_str(&in_process.stdout).unwrap();
            assert_eq!(result["ips"][0]["address"], "10.88.0.2/24", "{result}");
        }
    }
}

#[test]
fn a_failing_own_applet_fails_in_process_as_exec_does() {
    common::require_root();
    require_strace();
    let env = TestEnv::new();
    let (own, copy) = two_sides(&env);
    for s in [&own, &copy] {
        // host-local cannot allocate from a /31
        std::fs::write(
            s.conf_dir.join("10-inproc.conflist"),
            conflist(s, "10.88.0.0/31").to_string(),
        )
        .unwrap();
    }
    let (in_process, own_execs) = cnitool(&env, &own, "add", &env.container(), "ctr1");
    let (exec, copy_execs) = cnitool(&env, &copy, "add", &env.container(), "ctr1");
    assert!(!in_process.ok());
    assert_eq!(
        (in_process.code, &in_process.stdout, &in_process.stderr),
        (exec.code, &exec.stdout, &exec.stderr),
        "the same error, code and words"
    );
    assert!(
        in_process
            .stderr
            .contains("Network 10.88.0.0/31 too small to allocate from"),
        "{in_process:?}"
    );
    assert_eq!(own_execs, ["cnitool"]);
    assert_eq!(copy_execs, ["cnitool", "host-local"]);
}

/// An applet run in-process keeps the applet table for its own delegations: bridge's
/// host-local runs in the same process too (it was exec'd, one process start per ADD and
/// DEL). Each side has its own host namespace, so both get the same bridge and address.
#[test]
fn a_delegated_ipam_runs_in_process_too() {
    common::require_root();
    require_strace();
    let (env_own, env_copy) = (TestEnv::new(), TestEnv::new());
    let copy = env_copy.tmp.path().join("cnibox-copy");
    std::fs::copy(cnibox(), &copy).unwrap();
    let (own, copied) = (side(&env_own, "own", &cnibox()), side(&env_copy, "copy", &copy));
    for s in [&own, &copied] {
        let list = json!({
            "cniVersion": "1.0.0",
            "name": "inproc",
            "plugins": [
                {"type": "bridge", "bridge": "cni-inproc0", "isGateway": true,
                 "ipam": {"type": "host-local", "subnet": "10.89.0.0/24", "dataDir": s.data_dir}},
                {"type": "loopback"}
            ]
        });
        std::fs::write(s.conf_dir.join("10-inproc.conflist"), list.to_string()).unwrap();
    }
    // what differs between two attachments made alike: MACs, veth names, the netns path
    let alike = |out: &CallOutput| -> Value {
        let mut v: Value = serde_json::from_str(&out.stdout).unwrap();
        for i in v["interfaces"].as_array_mut().unwrap() {
            for k in ["mac", "sandbox"] {
                i.as_object_mut().unwrap().remove(k);
            }
        }
        v["interfaces"][1]["name"] = json!("veth");
        v
    };
    let (ns_own, ns_copy) = (env_own.container(), env_copy.container());
    for verb in ["add", "del"] {
        let (in_process, own_execs) = cnitool(&env_own, &own, verb, &ns_own, "ctr1");
        let (exec, copy_execs) = cnitool(&env_copy, &copied, verb, &ns_copy, "ctr1");
        assert!(in_process.ok() && exec.ok(), "{verb}: {in_process:?} {exec:?}");
        assert_eq!(
            own_execs,
            ["cnitool"],
            "{verb}: bridge and its host-local ran in-process"
        );
        // an exec'd bridge delegates to host-local in-process too (the same file)
        let order: &[&str] = match verb {
            "del" => &["cnitool", "loopback", "bridge"],
            _ => &["cnitool", "bridge", "loopback"],
        };
        assert_eq!(copy_execs, order, "{verb}");
        if verb == "add" {
            assert_eq!(alike(&in_process), alike(&exec));
            assert_eq!(alike(&in_process)["ips"][0]["address"], "10.89.0.2/24");
        }
    }
}
