//! Docker 20.10 (Debian's docker.io) with `cnibox oci-wrap` as a runtime, as docker-cni is
//! used: `docker run --runtime cnibox --net none …`.
//!
//! Every test runs its own dockerd (with the containerd it starts) inside the test's host
//! namespace, which has no route out, and in a private mount namespace: a tmpfs over `/run`
//! hides the host's `/run/docker/plugins` and `/run/containerd` (dockerd 20.10 and
//! containerd 1.6 hard-code them), and every other path (data root, exec root, pid file,
//! socket, config file) is in the test's temp dir. The daemons are ended by their PIDs.
//! As in `oci_hook`, the cgroup v2 hierarchy of this machine's hybrid layout is
//! unmounted there (runc and dockerd use the v1 controllers).
use crate::common;

use common::{run_ok, TestEnv};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const DOCKERD: &str = "/usr/sbin/dockerd";
/// The client of the same package (another `docker` may come first on PATH).
const DOCKER: &str = "/usr/bin/docker";
const RUNC: &str = "/usr/sbin/runc";
const IMAGE: &str = "cnibox-busybox:test";

/// Container processes that stay up without holding the client's pipes.
const SLEEP: &[&str] = &["sleep", "600"];
/// What a container runs to show its address (read back with [`inet`]).
const SHOW_ETH0: &[&str] = &["ip", "-4", "-o", "addr", "show", "eth0"];

struct Daemon {
    env: TestEnv,
    dir: PathBuf,
    conf_dir: PathBuf,
    network: String,
    bridge: String,
    dockerd: Option<Child>,
}

/// docker.io is a test dependency (tests/deps.sh installs it): its absence fails the tests.
fn require_docker() {
    for p in [DOCKERD, DOCKER, RUNC] {
        assert!(
            Path::new(p).exists(),
            "{p} is missing: the Docker tests need docker.io (run sh tests/deps.sh)"
        );
    }
}

/// A bridge network on 10.<octet>.0.0/24 whose names and data dir are private to the test.
fn bridge_network(env: &TestEnv, octet: u8, range: Option<(&str, &str)>) -> (String, String, Value) {
    let name = common::unique("dk");
    let bridge = format!("cbdk{octet}");
    let mut r = json!({ "subnet": format!("10.{octet}.0.0/24") });
    if let Some((start, end)) = range {
        r["rangeStart"] = json!(start);
        r["rangeEnd"] = json!(end);
    }
    let list = json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipMasq": true,
            "ipam": { "type": "host-local", "ranges": [[r]], "dataDir": env.data_dir },
            "capabilities": { "ips": true, "mac": true },
        }],
    });
    (name, bridge, list)
}

impl Daemon {
    /// A daemon whose conf dir has one bridge network (the default), plus `extra` more.
    fn start(octet: u8, range: Option<(&str, &str)>, extra: &[u8]) -> Daemon {
        require_docker();
        let env = TestEnv::new();
        let dir = env.tmp.path().join("docker");
        let conf_dir = env.tmp.path().join("net.d");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&conf_dir).unwrap();
        let (network, bridge, list) = bridge_network(&env, octet, range);
        std::fs::write(conf_dir.join("10-default.conflist"), list.to_string()).unwrap();
        for o in extra {
            let (_, _, list) = bridge_network(&env, *o, None);
            std::fs::write(conf_dir.join(format!("20-extra{o}.conflist")), list.to_string()).unwrap();
        }
        let mut d = Daemon {
            env,
            dir,
            conf_dir,
            network,
            bridge,
            dockerd: None,
        };
        d.write_daemon_json();
        d.spawn();
        d.import_image();
        d
    }

    fn path(&self, leaf: &str) -> PathBuf {
        self.dir.join(leaf)
    }

    fn hook_args(&self) -> Vec<String> {
        let p = |p: &Path| p.display().to_string();
        vec![
            "--conf-dir".into(),
            p(&self.conf_dir),
            "--bin-dir".into(),
            p(&self.env.bin_dir),
            "--cache-dir".into(),
            p(&self.env.cache_dir),
            "--log-file".into(),
            p(&self.hook_log_path()),
        ]
    }

    /// The runtimes, in the documented shapes: the multicall binary with `oci-wrap` and a
    /// trailing `--`, the `oci-wrap` symlink without one, and the symlink alone with every
    /// default (which the daemon's mount namespace maps to this test's directories).
    /// `broken` names a runtime that does not exist.
    fn write_daemon_json(&self) {
        let cnibox = common::cnibox().display().to_string();
        let mut multicall = vec!["oci-wrap".to_string(), "--runtime".into(), RUNC.into()];
        multicall.extend(self.hook_args());
        multicall.push("--".into());
        let mut applet = vec!["--runtime".to_string(), RUNC.into()];
        applet.extend(self.hook_args());
        let mut broken = vec!["oci-wrap".to_string(), "--runtime".into(), "/nonexistent/runc".into()];
        broken.extend(self.hook_args());
        let config = json!({
            "runtimes": {
                "cnibox": { "path": cnibox, "runtimeArgs": multicall },
                "cnibox-applet": { "path": self.env.bin_dir.join("oci-wrap"), "runtimeArgs": applet },
                "cnibox-defaults": { "path": self.env.bin_dir.join("oci-wrap") },
                "broken": { "path": cnibox, "runtimeArgs": broken },
            }
        });
        std::fs::write(self.path("daemon.json"), config.to_string()).unwrap();
    }

    fn spawn(&mut self) {
        let p = |leaf: &str| self.path(leaf).display().to_string();
        // the defaults of oci-wrap and the hook show this test's directories, /run is a tmpfs
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/dockerd-mountns.sh");
        let d = |p: &Path| p.display().to_string();
        let tmp = p("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut c = self.env.host.command("unshare");
        c.args(["-m", "--propagation", "private", "sh", script])
            .args([
                d(&self.conf_dir),
                d(&self.env.bin_dir),
                d(&self.env.cache_dir),
                p("scratch"),
            ])
            .arg(DOCKERD)
            .args(["--data-root", &p("data"), "--exec-root", &p("exec")])
            .args(["--pidfile", &p("dockerd.pid"), "--config-file", &p("daemon.json")])
            .args(["-H", &format!("unix://{}", p("docker.sock"))])
            .args([
                "--bridge=none",
                "--iptables=false",
                "--ip6tables=false",
                "--ip-masq=false",
            ])
            .args(["--shutdown-timeout", "2", "--storage-driver", "overlay2"])
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            // containerd writes its goroutine dumps (containerd.<pid>.stacks.log) to TMPDIR
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(p("dockerd.log")).unwrap())
            .stderr(std::fs::File::create(p("dockerd.err")).unwrap());
        self.dockerd = Some(c.spawn().expect("start dockerd"));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.docker(&["version"]).status.success() {
                return;
            }
            if let Some(status) = self.dockerd.as_mut().unwrap().try_wait().unwrap() {
                panic!("dockerd exited ({status}):\n{}", self.daemon_log());
            }
            assert!(
                Instant::now() < deadline,
                "dockerd did not come up:\n{}",
                self.daemon_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn daemon_log(&self) -> String {
        let log = std::fs::read_to_string(self.path("dockerd.err")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// An image from Debian's busybox-static: `docker import` of a one-binary rootfs.
    fn import_image(&self) {
        let rootfs = self.path("rootfs");
        let bin = rootfs.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy("/bin/busybox", bin.join("busybox")).unwrap();
        for tool in ["sh", "ip", "ping", "sleep", "cat", "true"] {
            std::os::unix::fs::symlink("busybox", bin.join(tool)).unwrap();
        }
        let tar = self.path("rootfs.tar");
        run_ok(Command::new("tar").arg("-cf").arg(&tar).arg("-C").arg(&rootfs).arg("."));
        self.ok(&["import", tar.to_str().unwrap(), IMAGE]);
    }

    fn docker(&self, args: &[&str]) -> Output {
        Command::new(DOCKER)
            .arg("-H")
            .arg(format!("unix://{}", self.path("docker.sock").display()))
            .args(args)
            .env("DOCKER_CONFIG", self.path("client"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// A docker command that must succeed; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.docker(args);
        assert!(
            out.status.success(),
            "docker {args:?} failed ({}):\nstdout: {}\nstderr: {}\nhook log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.hook_log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `docker run` with cnibox's runtime: `opts` before the image, `cmd` after it.
    fn run(&self, opts: &[&str], cmd: &[&str]) -> Output {
        let mut a = vec!["run", "--runtime", "cnibox", "--net", "none"];
        a.extend(opts);
        a.push(IMAGE);
        a.extend(cmd);
        self.docker(&a)
    }

    fn run_ok(&self, opts: &[&str], cmd: &[&str]) -> String {
        let out = self.run(opts, cmd);
        assert!(
            out.status.success(),
            "docker run {opts:?} {cmd:?} failed:\n{}\nhook log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.hook_log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn hook_log_path(&self) -> PathBuf {
        self.env.tmp.path().join("hook.log")
    }

    fn hook_log(&self) -> String {
        std::fs::read_to_string(self.hook_log_path()).unwrap_or_default()
    }

    /// The IPv4 address on eth0 of a running container.
    fn address(&self, container: &str) -> String {
        let out = self.ok(&[&["exec", container][..], SHOW_ETH0].concat());
        inet(&out).unwrap_or_else(|| panic!("no address on eth0 of {container}: {out}"))
    }

    fn reservations(&self) -> Vec<String> {
        let mut r: Vec<String> = self
            .env
            .store(&self.network)
            .into_keys()
            .filter(|f| f.parse::<std::net::IpAddr>().is_ok())
            .collect();
        r.sort();
        r
    }

    fn host_veths(&self) -> Vec<String> {
        let links = self.env.host.links();
        links.into_iter().filter(|l| l.starts_with("veth")).collect()
    }

    fn cache_files(&self) -> Vec<String> {
        common::read_dir_map(&self.env.cache_dir.join("results"))
            .into_keys()
            .collect()
    }

    /// Nothing of any attachment is left: addresses, veths, cache entries, NAT rules.
    fn clean(&self) -> Result<(), String> {
        let (r, v, c) = (self.reservations(), self.host_veths(), self.cache_files());
        if !r.is_empty() || !v.is_empty() || !c.is_empty() {
            return Err(format!("left: addresses {r:?}, veths {v:?}, cache {c:?}"));
        }
        let rules = self.env.host.exec(&["nft", "list", "ruleset"]);
        if rules.contains(&format!("net: {}", self.network)) {
            return Err(format!("masquerade rules left:\n{rules}"));
        }
        Ok(())
    }

    /// Poststop runs when containerd has reaped the container, which can be just after the
    /// docker command returned: wait for the state to settle.
    fn wait_for(&self, what: &str, mut cond: impl FnMut() -> Result<(), String>) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match cond() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("{what}: {e}\nhook log:\n{}", self.hook_log()),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn wait_clean(&self) {
        self.wait_for("everything released", || self.clean());
    }

    fn wait_reserved(&self, n: usize) {
        self.wait_for(&format!("{n} addresses reserved"), || match self.reservations() {
            r if r.len() == n => Ok(()),
            r => Err(format!("reserved: {r:?}")),
        });
    }

    /// SIGTERM to dockerd, and wait for it to stop its containers and exit.
    fn stop_daemon(&mut self) {
        let Some(mut child) = self.dockerd.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.end_leftovers();
    }

    /// The containerd dockerd started, and any shim, by the PIDs they recorded.
    fn end_leftovers(&self) {
        let mut pids = vec![];
        let pid_file = |p: &Path| -> Option<i32> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
        if let Some(p) = pid_file(&self.path("exec/containerd/containerd.pid")) {
            pids.push(p);
        }
        let tasks = self.path("exec/containerd/daemon/io.containerd.runtime.v2.task/moby");
        for e in std::fs::read_dir(tasks).into_iter().flatten().flatten() {
            if let Some(p) = pid_file(&e.path().join("shim.pid")) {
                pids.push(p);
            }
        }
        for p in pids {
            let pid = nix::unistd::Pid::from_raw(p);
            if nix::sys::signal::kill(pid, None).is_ok() {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.dockerd.is_some() {
            let ids = String::from_utf8_lossy(&self.docker(&["ps", "-aq"]).stdout).into_owned();
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let mut a = vec!["rm", "-f"];
                a.extend(ids);
                let _ = self.docker(&a);
            }
        }
        self.stop_daemon();
    }
}

/// The address of `inet A/N` in `ip -o addr` output.
fn inet(out: &str) -> Option<String> {
    let mut words = out.split_whitespace();
    words.find(|w| *w == "inet")?;
    Some(words.next()?.split('/').next()?.to_string())
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn docker_lifecycle_run_stop_start_restart_kill_rm_and_ten_in_parallel() {
    let d = Daemon::start(71, None, &[]);
    let id = d.run_ok(&["-d", "--name", "life"], SLEEP);
    let first = d.address("life");
    assert!(first.starts_with("10.71.0."), "{first}");
    assert_eq!(d.reservations(), vec![first.clone()]);
    assert!(
        d.hook_log().contains(&format!("{}: attached to", id.trim())),
        "{}",
        d.hook_log()
    );

    d.ok(&["stop", "-t", "1", "life"]);
    d.wait_clean();
    d.ok(&["start", "life"]);
    d.wait_reserved(1);
    d.address("life");
    d.ok(&["restart", "-t", "1", "life"]);
    d.wait_reserved(1);
    let after_restart = d.address("life");
    assert_eq!(d.reservations(), vec![after_restart]);
    d.ok(&["kill", "life"]);
    d.wait_clean();
    d.ok(&["start", "life"]);
    d.wait_reserved(1);
    d.ok(&["rm", "-f", "life"]);
    d.wait_clean();

    // the oci-wrap symlink as the runtime's path, runtimeArgs without a trailing `--`
    let run = ["run", "--rm", "--runtime", "cnibox-applet", "--net", "none", IMAGE];
    let out = d.ok(&[&run[..], SHOW_ETH0].concat());
    assert!(inet(&out).is_some_and(|a| a.starts_with("10.71.0.")), "{out}");
    d.wait_clean();

    // the recommended shape: the symlink alone, no script, every default (runc on PATH,
    // /etc/cni/net.d, /opt/cni/bin, /var/lib/cni as this daemon sees them)
    let run = ["run", "--rm", "--runtime", "cnibox-defaults", "--net", "none", IMAGE];
    let out = d.ok(&[&run[..], SHOW_ETH0].concat());
    assert!(inet(&out).is_some_and(|a| a.starts_with("10.71.0.")), "{out}");
    d.wait_clean();

    // ten at once
    let names: Vec<String> = (0..10).map(|i| format!("par{i}")).collect();
    let dock = |args: &[&str]| {
        let mut c = Command::new(DOCKER);
        c.arg("-H")
            .arg(format!("unix://{}", d.path("docker.sock").display()))
            .args(args)
            .env("DOCKER_CONFIG", d.path("client"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let runs: Vec<Child> = names
        .iter()
        .map(|n| {
            dock(&[
                "run",
                "-d",
                "--name",
                n,
                "--runtime",
                "cnibox",
                "--net",
                "none",
                IMAGE,
                "sleep",
                "600",
            ])
        })
        .collect();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        assert!(out.status.success(), "{}\n{}", text(&out), d.hook_log());
    }
    let mut addrs: Vec<String> = names.iter().map(|n| d.address(n)).collect();
    addrs.sort();
    addrs.dedup();
    assert_eq!(addrs.len(), 10, "ten distinct addresses: {addrs:?}");
    assert_eq!(d.reservations(), addrs);
    assert_eq!(d.host_veths().len(), 10);
    let removals: Vec<Child> = names.iter().map(|n| dock(&["rm", "-f", n])).collect();
    for r in removals {
        let out = r.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    d.wait_clean();
    assert!(d.env.host.has_link(&d.bridge), "the bridge stays");
}

#[test]
fn docker_namespaces_not_made_for_the_container_are_left_alone() {
    let d = Daemon::start(72, None, &[]);
    d.run_ok(&["-d", "--name", "owner"], SLEEP);
    let addr = d.address("owner");
    let mac = d.ok(&["exec", "owner", "cat", "/sys/class/net/eth0/address"]);

    // --net container:owner: the joiner sees the owner's eth0 and gets nothing of its own
    let run = ["run", "--rm", "--runtime", "cnibox", "--net", "container:owner", IMAGE];
    let out = d.ok(&[&run[..], SHOW_ETH0].concat());
    assert_eq!(inet(&out).as_deref(), Some(addr.as_str()), "{out}");
    assert!(
        d.hook_log().contains("joins the network namespace of another process"),
        "{}",
        d.hook_log()
    );
    // a joiner that stays and is then removed (its poststop runs too)
    d.ok(&[
        "run",
        "-d",
        "--name",
        "joiner",
        "--runtime",
        "cnibox",
        "--net",
        "container:owner",
        IMAGE,
        "sleep",
        "600",
    ]);
    d.ok(&["rm", "-f", "joiner"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.address("owner"), addr, "the owner keeps its address");
    assert_eq!(d.ok(&["exec", "owner", "cat", "/sys/class/net/eth0/address"]), mac);
    assert_eq!(d.reservations(), vec![addr.clone()], "nothing reserved for the joiners");
    assert_eq!(d.cache_files().len(), 1);
    assert!(d.env.host.ping(&addr), "the owner still answers on the bridge");

    // --net host: the daemon's own namespace
    let before = d.env.host.links();
    let out = d.ok(&["run", "--rm", "--runtime", "cnibox", "--net", "host", IMAGE, "true"]);
    assert!(out.is_empty(), "{out}");
    assert!(
        d.hook_log().contains("shares this hook's network namespace"),
        "{}",
        d.hook_log()
    );
    assert_eq!(d.env.host.links(), before, "nothing created in the daemon's namespace");
    assert_eq!(d.reservations(), vec![addr]);

    d.ok(&["rm", "-f", "owner"]);
    d.wait_clean();
}

#[test]
fn docker_settings_from_the_container_environment() {
    let d = Daemon::start(73, None, &[74]);
    // docker-cni's IPV4
    d.run_ok(&["-d", "--name", "fixed", "-e", "IPV4=10.73.0.50"], SLEEP);
    assert_eq!(d.address("fixed"), "10.73.0.50");
    assert_eq!(d.reservations(), vec!["10.73.0.50".to_string()]);
    // cnibox's names: address and MAC through runtimeConfig
    let out = d.run_ok(
        &[
            "--rm",
            "-e",
            "CNIBOX_IPS=10.73.0.51",
            "-e",
            "CNIBOX_MAC=02:42:0a:49:00:33",
        ],
        &["sh", "-c", "ip -4 -o addr show eth0; cat /sys/class/net/eth0/address"],
    );
    assert_eq!(inet(&out).as_deref(), Some("10.73.0.51"), "{out}");
    assert!(out.contains("02:42:0a:49:00:33"), "{out}");
    // a network other than the conf dir's first
    let out = d.run_ok(&["--rm", "-e", "CNIBOX_NETWORKS="], SHOW_ETH0);
    assert!(
        inet(&out).is_some_and(|a| a.starts_with("10.73.0.")),
        "empty is not given: {out}"
    );
    let second = std::fs::read_to_string(d.conf_dir.join("20-extra74.conflist")).unwrap();
    let second: Value = serde_json::from_str(&second).unwrap();
    let var = format!("CNIBOX_NETWORKS={}", second["name"].as_str().unwrap());
    let out = d.run_ok(&["--rm", "-e", &var], SHOW_ETH0);
    assert!(inet(&out).is_some_and(|a| a.starts_with("10.74.0.")), "{out}");

    // bad values fail the start with the setting named; nothing is attached
    for (var, msg) in [
        (
            "IPV4=10.73.0.500",
            "environment variable IPV4: \"10.73.0.500\" is not an IPv4 address",
        ),
        (
            "CNIBOX_MAC=02:42:0a",
            "environment variable CNIBOX_MAC: \"02:42:0a\" is not a MAC address",
        ),
        ("CNIBOX_NETWORKS=nosuchnet", "nosuchnet"),
    ] {
        let out = d.run(&["--rm", "-e", var], &["echo", "should not run"]);
        assert!(!out.status.success(), "{var}: {}", text(&out));
        let all = text(&out);
        assert!(all.contains(msg), "{var}: {all}");
        assert!(!all.contains("should not run"));
    }
    d.wait_for("only the fixed container's address", || match d.reservations() {
        r if r == ["10.73.0.50"] => Ok(()),
        r => Err(format!("{r:?}")),
    });
    assert_eq!(d.host_veths().len(), 1);
    d.ok(&["rm", "-f", "fixed"]);
    d.wait_clean();
}

#[test]
fn docker_run_shows_why_a_start_failed_and_nothing_is_left() {
    // a range of exactly one address, taken by the first container
    let d = Daemon::start(75, Some(("10.75.0.5", "10.75.0.5")), &[]);
    d.run_ok(&["-d", "--name", "first"], SLEEP);
    let out = d.run(&["--rm"], &["echo", "should not run"]);
    assert!(!out.status.success());
    let all = text(&out);
    assert!(all.contains("no IP addresses available in range set"), "{all}");
    assert!(!all.contains("should not run"));
    assert_eq!(d.reservations(), vec!["10.75.0.5".to_string()]);
    assert_eq!(d.host_veths().len(), 1, "only the first container's veth");
    assert_eq!(d.cache_files().len(), 1);

    // oci-wrap's own error (a runtime that is not there) reaches docker run through the
    // runtime's JSON log
    let out = d.docker(&["run", "--rm", "--runtime", "broken", "--net", "none", IMAGE, "true"]);
    assert!(!out.status.success());
    let all = text(&out);
    assert!(
        all.contains("cnibox oci-wrap: exec runtime /nonexistent/runc: No such file or directory"),
        "{all}"
    );
    assert!(!all.contains("log.json: no such file"), "{all}");

    d.ok(&["rm", "-f", "first"]);
    d.wait_clean();
}

#[test]
fn docker_stopped_with_containers_running_frees_their_addresses() {
    let mut d = Daemon::start(76, None, &[]);
    d.run_ok(&["-d", "--name", "s1"], SLEEP);
    d.run_ok(&["-d", "--name", "s2"], SLEEP);
    assert_eq!(d.reservations().len(), 2);
    d.stop_daemon();
    d.wait_clean();
}
