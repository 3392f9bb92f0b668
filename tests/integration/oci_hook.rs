//! The OCI hook with real runtimes (crun, and runc when installed): containers started with
//! the hooks get their network, reach each other, and leave nothing behind after delete.
//!
//! crun 1.8 refuses this machine's hybrid cgroup layout, so every runtime call runs in a
//! private mount namespace with the unified hierarchy unmounted, and with cgroups disabled.
use crate::common;

use common::{run_ok, TestEnv};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One OCI runtime under test.
#[derive(Clone, Copy, Debug)]
enum Runtime {
    Crun,
    Runc,
}

impl Runtime {
    fn path(self) -> &'static str {
        match self {
            Runtime::Crun => "/usr/bin/crun",
            Runtime::Runc => "/usr/sbin/runc",
        }
    }

    fn available(self) -> bool {
        Path::new(self.path()).exists()
    }

    /// Global options for this runtime.
    fn globals(self, root: &Path) -> Vec<String> {
        let mut g = vec!["--root".to_string(), root.display().to_string()];
        if let Runtime::Crun = self {
            g.insert(0, "--cgroup-manager=disabled".into());
        }
        g
    }
}

/// crun always (tests/deps.sh installs it), runc when it is installed.
fn runtimes() -> Vec<Runtime> {
    assert!(
        Runtime::Crun.available(),
        "crun is a test dependency: run sh tests/deps.sh"
    );
    let all = [Runtime::Crun, Runtime::Runc];
    for r in all {
        if !r.available() {
            eprintln!("skipping {r:?}: {} is not installed", r.path());
        }
    }
    all.into_iter().filter(|r| r.available()).collect()
}

struct World {
    env: TestEnv,
    conf_dir: PathBuf,
    root: PathBuf,
    network: String,
    bridge: String,
}

impl World {
    /// A bridge network on 10.<n>.0.0/24 from plugins.d/10-bridge.conflist, with its data
    /// dir, bridge name and network name made private to this test.
    fn new(octet: u8, range: Option<(&str, &str)>) -> World {
        let env = TestEnv::new();
        let conf_dir = env.tmp.path().join("net.d");
        std::fs::create_dir_all(&conf_dir).unwrap();
        let mut list: Value = serde_json::from_slice(
            &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins.d/10-bridge.conflist")).unwrap(),
        )
        .unwrap();
        let network = common::unique("net");
        let bridge = format!("cbbr{octet}");
        list["name"] = json!(network);
        let p = &mut list["plugins"][0];
        p["bridge"] = json!(bridge);
        let mut r = json!({ "subnet": format!("10.{octet}.0.0/24") });
        if let Some((start, end)) = range {
            r["rangeStart"] = json!(start);
            r["rangeEnd"] = json!(end);
        }
        p["ipam"]["ranges"] = json!([[r]]);
        p["ipam"]["dataDir"] = json!(env.data_dir);
        p["capabilities"] = json!({ "ips": true });
        std::fs::write(
            conf_dir.join("10-test.conflist"),
            serde_json::to_vec_pretty(&list).unwrap(),
        )
        .unwrap();
        let root = env.tmp.path().join("runtime-root");
        World {
            env,
            conf_dir,
            root,
            network,
            bridge,
        }
    }

    fn hook_args(&self) -> Vec<String> {
        vec![
            "--conf-dir".into(),
            self.conf_dir.display().to_string(),
            "--bin-dir".into(),
            self.env.bin_dir.display().to_string(),
            "--cache-dir".into(),
            self.env.cache_dir.display().to_string(),
            "--log-file".into(),
            self.log_path().display().to_string(),
        ]
    }

    /// The hooks' log: crun does not show a hook's stderr, so tests read what it said here.
    fn log_path(&self) -> PathBuf {
        self.env.tmp.path().join("hook.log")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// A bundle running `args` in busybox, with the cnibox hooks (unless `hooks` is false).
    fn bundle(&self, name: &str, args: &[&str], hooks: bool, annotations: Value) -> PathBuf {
        let dir = self.env.tmp.path().join(name);
        let bin = dir.join("rootfs/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy("/bin/busybox", bin.join("busybox")).unwrap();
        for tool in ["sh", "ip", "ping", "sleep", "cat"] {
            std::os::unix::fs::symlink("busybox", bin.join(tool)).unwrap();
        }
        run_ok(Command::new("crun").arg("spec").current_dir(&dir));
        let mut c: Value = serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
        c["process"]["terminal"] = json!(false);
        c["process"]["args"] = json!(args);
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push(json!("CAP_NET_RAW"));
        }
        c["annotations"] = annotations;
        if hooks {
            let cnibox = common::cnibox().display().to_string();
            let mut add = vec!["cnibox".to_string(), "oci-hook".into(), "add".into()];
            add.extend(self.hook_args());
            let mut del = vec!["cnibox".to_string(), "oci-hook".into(), "del".into()];
            del.extend(self.hook_args());
            c["hooks"] = json!({
                "createRuntime": [{ "path": cnibox, "args": add }],
                "poststop": [{ "path": cnibox, "args": del }],
            });
        }
        std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&c).unwrap()).unwrap();
        dir
    }

    /// Run an OCI runtime command in the private host namespace and a private mount namespace.
    fn runtime(&self, rt: Runtime, args: &[&str]) -> Output {
        let mut argv: Vec<String> = rt.globals(&self.root);
        argv.extend(args.iter().map(|s| s.to_string()));
        self.in_host_mountns(rt.path(), &argv)
    }

    fn in_host_mountns(&self, program: &str, argv: &[String]) -> Output {
        let script = "umount /sys/fs/cgroup/unified 2>/dev/null; exec \"$@\"";
        let mut c = self.env.host.command("unshare");
        c.args(["-m", "sh", "-c", script, "sh", program]).args(argv);
        c.output().unwrap()
    }

    /// What is left in host-local's store besides its bookkeeping files.
    fn reservations(&self) -> Vec<String> {
        self.env
            .store(&self.network)
            .into_keys()
            .filter(|f| f.parse::<std::net::IpAddr>().is_ok())
            .collect()
    }

    fn host_veths(&self) -> Vec<String> {
        self.env
            .host
            .links()
            .into_iter()
            .filter(|l| l.starts_with("veth"))
            .collect()
    }

    fn cache_files(&self) -> Vec<String> {
        common::read_dir_map(&self.env.cache_dir.join("results"))
            .into_keys()
            .collect()
    }

    fn assert_clean(&self) {
        assert_eq!(self.reservations(), Vec::<String>::new(), "addresses left reserved");
        assert_eq!(self.host_veths(), Vec::<String>::new(), "host veths left");
        assert_eq!(self.cache_files(), Vec::<String>::new(), "cache entries left");
        let rules = Command::new("ip")
            .args(["netns", "exec", &self.env.host.name, "nft", "list", "ruleset"])
            .output()
            .unwrap();
        let rules = String::from_utf8_lossy(&rules.stdout);
        assert!(
            !rules.contains(&format!("net: {}", self.network)),
            "masquerade rules left:\n{rules}"
        );
    }
}

/// A long-running container for `run --detach`: it must not keep the runtime's stdout and
/// stderr (the test's pipes) open, or collecting the runtime's output waits for it to end.
const DETACHED: &[&str] = &["sh", "-c", "exec sleep 60 </dev/null >/dev/null 2>&1"];

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "runtime failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn containers_get_addresses_reach_each_other_and_leave_nothing_behind() {
    for rt in runtimes() {
        let w = World::new(61, None);
        let a = w.bundle("a", DETACHED, true, json!({ "cni.cnibox.io/ips": "10.61.0.10" }));
        let b = w.bundle(
            "b",
            &["sh", "-c", "ip -4 addr show eth0; ping -c 1 -W 3 10.61.0.10"],
            true,
            json!({ "cni.cnibox.io/ips": "10.61.0.11" }),
        );
        ok(&w.runtime(rt, &["run", "--detach", "--bundle", a.to_str().unwrap(), "ca"]));
        assert_eq!(w.reservations(), vec!["10.61.0.10".to_string()], "{rt:?}");
        let out = ok(&w.runtime(rt, &["run", "--bundle", b.to_str().unwrap(), "cb"]));
        assert!(out.contains("inet 10.61.0.11/24"), "{rt:?}: {out}");
        assert!(out.contains("1 packets received"), "{rt:?}: {out}");
        // cb ran in the foreground: the runtime deleted it and ran its poststop hook.
        assert_eq!(w.reservations(), vec!["10.61.0.10".to_string()], "{rt:?}");
        ok(&w.runtime(rt, &["kill", "ca", "KILL"]));
        // abrupt death, then delete: poststop still frees the address
        let _ = w.runtime(rt, &["delete", "--force", "ca"]);
        w.assert_clean();
        assert!(w.env.host.has_link(&w.bridge), "the bridge stays");
    }
}

#[test]
fn oci_wrap_adds_the_hooks_and_runs_the_real_runtime() {
    for rt in runtimes() {
        let w = World::new(62, None);
        let bundle = w.bundle("w", &["sh", "-c", "ip -4 addr show eth0"], false, json!({}));
        let mut argv: Vec<String> = vec!["oci-wrap".into(), "--runtime".into(), rt.path().into()];
        argv.extend(w.hook_args());
        argv.push("--".into());
        argv.extend(rt.globals(&w.root));
        argv.extend([
            "run".into(),
            "--bundle".into(),
            bundle.display().to_string(),
            "cw".into(),
        ]);
        let out = ok(&w.in_host_mountns(common::cnibox().to_str().unwrap(), &argv));
        assert!(out.contains("inet 10.62.0."), "{rt:?}: {out}");
        let c: Value = serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
        assert_eq!(c["hooks"]["createRuntime"][0]["args"][2], "add");
        w.assert_clean();
        // other subcommands pass straight through
        let mut argv: Vec<String> = vec!["oci-wrap".into(), "--runtime".into(), rt.path().into(), "--".into()];
        argv.extend(rt.globals(&w.root));
        argv.push("list".into());
        ok(&w.in_host_mountns(common::cnibox().to_str().unwrap(), &argv));
    }
}

#[test]
fn a_container_without_its_own_netns_is_left_alone() {
    let w = World::new(63, None);
    let bundle = w.bundle("h", &["sh", "-c", "echo ran"], true, json!({}));
    let path = bundle.join("config.json");
    let mut c: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    c["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .retain(|n| n["type"] != "network");
    std::fs::write(&path, serde_json::to_vec(&c).unwrap()).unwrap();
    let out = w.runtime(Runtime::Crun, &["run", "--bundle", bundle.to_str().unwrap(), "ch"]);
    ok(&out);
    assert!(w.log().contains("no network namespace of its own"), "{}", w.log());
    w.assert_clean();
    assert!(
        !w.env.host.has_link(&w.bridge),
        "nothing was created in the host namespace"
    );
}

#[test]
fn a_failing_add_fails_create_and_leaves_nothing_behind() {
    // a range of exactly one address, already taken by a detached container
    for rt in runtimes() {
        let w = World::new(64, Some(("10.64.0.5", "10.64.0.5")));
        let first = w.bundle("f1", DETACHED, true, json!({}));
        ok(&w.runtime(rt, &["run", "--detach", "--bundle", first.to_str().unwrap(), "f1"]));
        let second = w.bundle("f2", &["sh", "-c", "echo should not run"], true, json!({}));
        let out = w.runtime(rt, &["run", "--bundle", second.to_str().unwrap(), "f2"]);
        assert!(!out.status.success(), "{rt:?}: {out:?}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            w.log().contains("no IP addresses available in range set"),
            "{rt:?}: {}",
            w.log()
        );
        if let Runtime::Runc = rt {
            // runc reports a failed hook's output in its own error; crun only logs the exit code.
            assert!(all.contains("no IP addresses available in range set"), "{all}");
        }
        assert!(!all.contains("should not run"));
        let _ = w.runtime(rt, &["delete", "--force", "f2"]);
        assert_eq!(w.reservations(), vec!["10.64.0.5".to_string()]);
        assert_eq!(w.host_veths().len(), 1, "only the first container's veth");
        ok(&w.runtime(rt, &["delete", "--force", "f1"]));
        w.assert_clean();
    }
}

#[test]
fn hook_with_bad_input_fails_clearly() {
    let w = World::new(65, None);
    let run = |stdin: &str, args: &[&str]| {
        let mut c = w.env.call("oci-hook").args(args.iter().copied());
        c = c.stdin(stdin.as_bytes().to_vec());
        c.run()
    };
    let out = run("not json", &["add"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("invalid OCI state on stdin"), "{out:?}");
    let out = run(r#"{"id":"x","status":"paused"}"#, &[]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("cannot tell the phase"), "{out:?}");
    let mut args = vec!["add".to_string()];
    args.extend(w.hook_args());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(r#"{"id":"x","status":"creating"}"#, &a);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("has no pid"), "{out:?}");
    // DEL with nothing cached and nothing to do succeeds
    args[0] = "del".into();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(r#"{"id":"gone","status":"stopped","pid":0}"#, &a);
    assert_eq!(out.code, 0, "{out:?}");
}

/// A failed ADD says its cause once and first: the plugin's message is not repeated, and
/// the warnings of the cleanup that follows come after it.
#[test]
fn a_failed_add_reports_its_cause_once_before_cleanup_warnings() {
    let w = World::new(66, None);
    let script = w.env.bin_dir.join("recorder");
    std::fs::write(&script, include_str!("../plugins/recorder.sh")).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let fail = json!({
        "ADD": {"code": 11, "msg": "boom on add"},
        "DEL": {"code": 11, "msg": "boom on del"},
    });
    for version in ["0.4.0", "1.0.0", "1.1.0"] {
        let list = json!({
            "cniVersion": version,
            "name": "failnet",
            "plugins": [{"type": "recorder", "tag": "a", "fail": fail}],
        });
        std::fs::write(w.conf_dir.join("00-fail.conflist"), serde_json::to_vec(&list).unwrap()).unwrap();
        let ctr = w.env.container();
        let mut sleeper = ctr.command("sleep").arg("30").spawn().unwrap();
        let state = json!({"ociVersion": "1.0.2", "id": "f1", "status": "creating", "pid": sleeper.id()});
        let mut args = vec!["add".to_string(), "--network".into(), "failnet".into()];
        args.extend(w.hook_args());
        let out = w
            .env
            .call("oci-hook")
            .args(&args)
            .env("RECORD_FILE", w.env.tmp.path().join("record").to_str().unwrap())
            .stdin(serde_json::to_vec(&state).unwrap())
            .run();
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert_eq!(out.code, 1, "{version}: {out:?}");
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert!(
            lines
                .first()
                .is_some_and(|l| l.contains("error:") && l.contains("boom on add")),
            "{version}: the cause comes first: {}",
            out.stderr
        );
        assert_eq!(
            out.stderr.matches("boom on add").count(),
            1,
            "{version}: {}",
            out.stderr
        );
        assert!(
            lines
                .iter()
                .skip(1)
                .any(|l| l.contains("warning: cleanup of failnet") && l.contains("boom on del")),
            "{version}: {}",
            out.stderr
        );
    }
}

/// Regression (#18): a container given a namespace by path is configured when the namespace
/// is fresh (Docker's sandbox, a CRI pause namespace) and left alone when another container
/// already has its interface there; the joiner's hooks never touch the owner's eth0.
#[test]
fn a_namespace_given_by_path_is_configured_once_and_joiners_are_left_alone() {
    let w = World::new(67, None);
    let shared = w.env.container();
    let in_shared = |name: &str, args: &[&str]| {
        let b = w.bundle(name, args, true, json!({}));
        let path = b.join("config.json");
        let mut c: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for n in c["linux"]["namespaces"].as_array_mut().unwrap() {
            if n["type"] == "network" {
                n["path"] = json!(shared.path_str());
            }
        }
        std::fs::write(&path, serde_json::to_vec(&c).unwrap()).unwrap();
        b
    };
    let owner = in_shared("owner", DETACHED);
    ok(&w.runtime(
        Runtime::Crun,
        &["run", "--detach", "--bundle", owner.to_str().unwrap(), "owner"],
    ));
    assert!(shared.has_link("eth0"), "{}", w.log());
    let mac = shared.ip_json(&["link", "show", "eth0"])[0]["address"].clone();
    let reserved = w.reservations();
    assert_eq!(reserved.len(), 1);

    let joiner = in_shared("joiner", &["sh", "-c", "ip -4 addr show eth0"]);
    let out = ok(&w.runtime(Runtime::Crun, &["run", "--bundle", joiner.to_str().unwrap(), "joiner"]));
    assert!(out.contains(&format!("inet {}/24", reserved[0])), "{out}");
    assert!(
        w.log().contains("which already has eth0: another container's"),
        "{}",
        w.log()
    );
    assert_eq!(
        shared.ip_json(&["link", "show", "eth0"])[0]["address"],
        mac,
        "the owner keeps eth0"
    );
    assert_eq!(w.reservations(), reserved);
    assert_eq!(w.cache_files().len(), 1);

    ok(&w.runtime(Runtime::Crun, &["kill", "owner", "KILL"]));
    let _ = w.runtime(Runtime::Crun, &["delete", "--force", "owner"]);
    w.assert_clean();
    assert!(!shared.has_link("eth0"), "the owner's DEL removed its eth0");
}

/// Regression: the hook caches the namespace as `/proc/<pid>/ns/net`. After a reboot that
/// pid is some other process's, and `cnitool gc` of the stale attachment deleted eth0 in
/// whatever namespace the path named then (and the host veth the cached result names). An
/// attachment the hook cached in an earlier boot is now deleted without its namespace and
/// result: its address goes, the namespace the old path names (here the same container,
/// still alive, standing in for the pid's new owner) is untouched.
#[test]
fn after_a_reboot_gc_never_enters_the_namespace_the_hook_cached() {
    let w = World::new(68, None);
    let before = common::boot_id_file(w.env.tmp.path(), 0);
    let after = common::boot_id_file(w.env.tmp.path(), 1);
    let ctr = w.env.container();
    let mut sleeper = ctr.command("sleep").arg("60").spawn().unwrap();
    let state = json!({"ociVersion": "1.0.2", "id": "rb1", "status": "creating", "pid": sleeper.id()});
    let mut args = vec!["add".to_string()];
    args.extend(w.hook_args());
    let out = w
        .env
        .call("oci-hook")
        .args(&args)
        .in_boot(&before)
        .stdin(serde_json::to_vec(&state).unwrap())
        .run();
    assert_eq!(out.code, 0, "{out:?} {}", w.log());
    assert!(ctr.has_link("eth0"));
    assert_eq!(w.reservations().len(), 1);

    let gc = w
        .env
        .tool("cnitool")
        .args(["gc", &w.network])
        .env("NETCONFPATH", w.conf_dir.to_str().unwrap())
        .env("CNI_PATH", w.env.bin_dir.to_str().unwrap())
        .env("CNI_CACHE_DIR", w.env.cache_dir.to_str().unwrap())
        .in_boot(&after)
        .run();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(gc.code, 0, "{gc:?}");
    // neither entered through the old path nor removed through the host end the old
    // result names (in a real reboot both name nothing, or something that is not ours)
    assert!(
        ctr.has_link("eth0"),
        "GC deleted an interface of what the old path names now"
    );
    assert_eq!(w.reservations(), Vec::<String>::new());
    assert_eq!(w.cache_files(), Vec::<String>::new());
    // host-local's first call of the boot released the store: its old directory goes in
    // the background, before the test's temp dir does
    let old_dirs = || {
        std::fs::read_dir(&w.env.data_dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".cnibox-reboot-")
            })
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while old_dirs() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(old_dirs(), 0);
}
