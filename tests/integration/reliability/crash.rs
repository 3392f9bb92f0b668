//! Crash consistency: the plugin is killed with SIGKILL at many points during ADD — timed
//! kills over many runs, with random delays from 0 to the measured duration of an ADD, so
//! no test-only code sits in the product — then DEL runs (or, for some runs, nothing runs
//! and GC must collect), and the test checks that nothing leaked (links, addresses, store
//! files, rules, cache files) and that later ADDs never hand out an address twice.
//!
//! DELs of live attachments are killed part-way too, and a second DEL must finish the job.
//!
//! Scenarios: host-local alone, bridge+host-local (when the bridge applet is in the build),
//! and the same through `cnitool` (the whole process group is killed, cache writes included,
//! and `cnitool gc` collects).
use crate::common;
use crate::fuzz;
use crate::plugin_state::rules;

use common::*;
use fuzz::Rng;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Runs per scenario in `make test`; `CNIBOX_CRASH_RUNS` raises it.
fn runs(default: usize) -> usize {
    std::env::var("CNIBOX_CRASH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Start a process in the test's host namespace, in its own process group (so a kill takes
/// its children with it), with `stdin` written and closed.
fn spawn(program: &Path, args: &[&str], env: &[(&str, String)], netns: &Path, stdin: &[u8]) -> Child {
    let fd = std::fs::File::open(netns).unwrap();
    let mut c = Command::new(program);
    c.args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: between fork and exec the closure only calls setns(2), which is async-signal-safe.
    unsafe {
        c.pre_exec(move || nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from));
    }
    let mut child = c.spawn().unwrap();
    let mut sin = child.stdin.take().unwrap();
    sin.write_all(stdin).unwrap();
    drop(sin);
    child
}

fn kill_group(child: &Child) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

fn finish(child: Child) -> (i32, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How an ADD is run: a plugin directly, or cnitool.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    Plugin(&'static str),
    Cnitool,
}

struct World {
    env: TestEnv,
    via: Via,
    conf: Value,
    conf_dir: std::path::PathBuf,
    /// Container namespaces, reused: DEL must leave each one clean for the next ADD.
    pool: Vec<Netns>,
}

impl World {
    fn new(via: Via, plugin_conf: impl Fn(&TestEnv) -> Value) -> World {
        let env = TestEnv::new();
        let conf = plugin_conf(&env);
        let conf_dir = env.tmp.path().join("net.d");
        std::fs::create_dir_all(&conf_dir).unwrap();
        let mut plugin = conf.clone();
        plugin.as_object_mut().unwrap().remove("name");
        plugin.as_object_mut().unwrap().remove("cniVersion");
        let list = json!({"cniVersion": conf["cniVersion"], "name": conf["name"], "plugins": [plugin]});
        std::fs::write(conf_dir.join("net.conflist"), list.to_string()).unwrap();
        let pool = (0..4).map(|_| env.container()).collect();
        World {
            env,
            via,
            conf,
            conf_dir,
            pool,
        }
    }

    fn plugin_env(&self, verb: &str, id: &str, ns: &str) -> Vec<(&'static str, String)> {
        vec![
            ("CNI_COMMAND", verb.into()),
            ("CNI_CONTAINERID", id.into()),
            ("CNI_NETNS", ns.into()),
            ("CNI_IFNAME", "eth0".into()),
            ("CNI_PATH", self.env.bin_dir.to_str().unwrap().into()),
        ]
    }

    fn tool_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("NETCONFPATH", self.conf_dir.to_str().unwrap().into()),
            ("CNI_PATH", self.env.bin_dir.to_str().unwrap().into()),
            ("CNI_CACHE_DIR", self.env.cache_dir.to_str().unwrap().into()),
        ]
    }

    fn start(&self, verb: &str, id: &str, ns: &str) -> Child {
        let net = self.conf["name"].as_str().unwrap();
        match self.via {
            Via::Plugin(applet) => spawn(
                &self.env.bin_dir.join(applet),
                &[],
                &self.plugin_env(verb, id, ns),
                &self.env.host.path,
                self.conf.to_string().as_bytes(),
            ),
            Via::Cnitool => spawn(
                &self.env.bin_dir.join("cnitool"),
                &[&verb.to_lowercase(), net, ns, "--container-id", id],
                &self.tool_env(),
                &self.env.host.path,
                b"",
            ),
        }
    }

    fn run(&self, verb: &str, id: &str, ns: &str) -> (i32, String, String) {
        finish(self.start(verb, id, ns))
    }

    /// GC keeping `live`: host-local's GC (plugin runs) or `cnitool gc` (which also DELs
    /// cached attachments that are not kept).
    fn gc(&self, live: &BTreeMap<String, (usize, String)>) {
        let (code, out, err) = match self.via {
            Via::Plugin(applet) => {
                let mut conf = self.conf.clone();
                conf["cni.dev/valid-attachments"] = live
                    .keys()
                    .map(|id| json!({"containerID": id, "ifname": "eth0"}))
                    .collect();
                let env = vec![
                    ("CNI_COMMAND", "GC".to_string()),
                    ("CNI_PATH", self.env.bin_dir.to_str().unwrap().into()),
                ];
                finish(spawn(
                    &self.env.bin_dir.join(applet),
                    &[],
                    &env,
                    &self.env.host.path,
                    conf.to_string().as_bytes(),
                ))
            }
            Via::Cnitool => {
                let net = self.conf["name"].as_str().unwrap().to_string();
                let mut args = vec!["gc".to_string(), net];
                for id in live.keys() {
                    args.push("--keep".into());
                    args.push(format!("{id}:eth0"));
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                finish(spawn(
                    &self.env.bin_dir.join("cnitool"),
                    &args,
                    &self.tool_env(),
                    &self.env.host.path,
                    b"",
                ))
            }
        };
        assert_eq!(code, 0, "GC failed: {out} {err}");
    }

    fn network(&self) -> String {
        self.conf["name"].as_str().unwrap().to_string()
    }

    /// Reservations in the store: ip → owner file content.
    fn reservations(&self) -> BTreeMap<String, String> {
        self.env
            .store(&self.network())
            .into_iter()
            .filter(|(k, _)| k.parse::<std::net::IpAddr>().is_ok())
            .collect()
    }

    /// What must be back to its baseline when nothing is attached.
    fn state(&self) -> String {
        let mut s = String::new();
        let host = &self.env.host;
        s += &host
            .ip(&["-o", "link", "show"])
            .lines()
            .map(|l| l.split(": <").next().unwrap().to_string() + "\n")
            .collect::<String>();
        s += &host
            .ip(&["-o", "addr", "show"])
            .lines()
            .map(|l| l.split_whitespace().take(4).collect::<Vec<_>>().join(" ") + "\n") // not the flags ("tentative")
            .collect::<String>();
        s += &rules(host);
        for ns in &self.pool {
            s += &ns.links().join(",");
            s += "\n";
        }
        let mut files: Vec<String> = self.env.store(&self.network()).into_keys().collect();
        files.sort();
        s += &format!("store: {files:?}\n");
        let results: Vec<String> = std::fs::read_dir(self.env.cache_dir.join("results"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        s += &format!("cache: {results:?}\n");
        s
    }
}

/// Firewall rules of a namespace (nft and iptables), without counters.
/// The first address of an ADD's output (plugin result or cnitool's printed result).
fn address_of(stdout: &str) -> String {
    let v: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("ADD output ({e}): {stdout}"));
    v["ips"][0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("no address: {stdout}"))
        .to_string()
}

#[derive(Default, Debug)]
struct Figures {
    runs: usize,
    kills: usize,
    /// Killed ADDs that had already reserved an address (work in flight at the kill).
    kills_with_state: usize,
    completed_before_kill: usize,
    deleted_by_del: usize,
    left_for_gc: usize,
    adds_checked_for_duplicates: usize,
    /// DELs of live attachments killed part-way (then DEL again must finish the job).
    del_kills: usize,
}

fn crash_scenario(name: &str, via: Via, plugin_conf: impl Fn(&TestEnv) -> Value, default_runs: usize) -> Figures {
    let mut w = World::new(via, plugin_conf);
    let mut rng = Rng::from_env(name);
    // warm-up: what stays after a clean ADD+DEL (the bridge, its address, global tables) is
    // the baseline; measure the ADD duration meanwhile
    let mut durations = vec![];
    for i in 0..7 {
        let ns = w.pool[0].path_str().to_string();
        let t = Instant::now();
        let (code, out, err) = w.run("ADD", &format!("warm{i}"), &ns);
        durations.push(t.elapsed());
        assert_eq!(code, 0, "warm-up ADD: {out} {err}");
        let (code, out, err) = w.run("DEL", &format!("warm{i}"), &ns);
        assert_eq!(code, 0, "warm-up DEL: {out} {err}");
    }
    durations.sort();
    let typical = durations[durations.len() / 2];
    let baseline = w.state();
    eprintln!("{name}: a typical ADD takes {typical:?}");

    let mut f = Figures::default();
    // live attachments: id → (pool slot, address)
    let mut live: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut free_slots: Vec<usize> = (0..w.pool.len()).collect();
    let check_add = |f: &mut Figures, live: &BTreeMap<String, (usize, String)>, id: &str, addr: &str| {
        f.adds_checked_for_duplicates += 1;
        for (other, (_, a)) in live {
            assert_ne!(a, addr, "{name}: {id} got {addr}, which {other} holds");
        }
    };
    for run in 0..runs(default_runs) {
        f.runs += 1;
        let Some(slot) = free_slots.pop() else {
            // every namespace holds a live attachment: delete one, half the time with a DEL
            // that is killed part-way first (a second DEL must then finish the job)
            let id = live.keys().next().unwrap().clone();
            let (slot, _) = live.remove(&id).unwrap();
            let ns = w.pool[slot].path_str().to_string();
            if rng.chance(1, 2) {
                let delay = typical.mul_f64(rng.below(1001) as f64 / 1000.0);
                let mut child = w.start("DEL", &id, &ns);
                let t = Instant::now();
                while t.elapsed() < delay {
                    std::hint::spin_loop();
                }
                if child.try_wait().unwrap().is_none() {
                    kill_group(&child);
                    f.del_kills += 1;
                }
                let _ = child.wait();
            }
            let (code, out, err) = w.run("DEL", &id, &ns);
            assert_eq!(code, 0, "{name}: DEL of live {id}: {out} {err}");
            assert!(
                !w.reservations().values().any(|o| o.starts_with(&format!("{id}\r\n"))),
                "{name}: DEL left {id}'s address"
            );
            free_slots.push(slot);
            continue;
        };
        let id = format!("crash{run}");
        let ns = w.pool[slot].path_str().to_string();
        let delay = typical.mul_f64(rng.below(1001) as f64 / 1000.0);
        let child = w.start("ADD", &id, &ns);
        let t = Instant::now();
        while t.elapsed() < delay {
            std::hint::spin_loop();
        }
        let mut child = child;
        let finished = child.try_wait().unwrap().is_some();
        if finished {
            let (code, out, err) = finish(child);
            assert_eq!(code, 0, "{name}: unkilled ADD failed: {out} {err}");
            f.completed_before_kill += 1;
            let addr = address_of(&out);
            check_add(&mut f, &live, &id, &addr);
            live.insert(id, (slot, addr));
            continue;
        }
        kill_group(&child);
        let _ = child.wait();
        f.kills += 1;
        let reserved = w.reservations();
        if reserved.values().any(|owner| owner.starts_with(&format!("{id}\r\n"))) {
            f.kills_with_state += 1;
        }
        // every reservation file is whole: `<id>\r\neth0` of an id we know
        for (ip, owner) in &reserved {
            let (oid, ifname) = owner
                .split_once("\r\n")
                .unwrap_or_else(|| panic!("{name}: torn reservation {ip}: {owner:?}"));
            assert_eq!(ifname, "eth0", "{name}: torn reservation {ip}: {owner:?}");
            assert!(
                oid == id || live.contains_key(oid) || oid.starts_with("crash"),
                "{name}: unknown owner {owner:?}"
            );
        }
        if rng.chance(3, 4) {
            let (code, out, err) = w.run("DEL", &id, &ns);
            assert_eq!(code, 0, "{name}: DEL after a kill at {delay:?}: {out} {err}");
            f.deleted_by_del += 1;
            assert!(
                !w.reservations().values().any(|o| o.starts_with(&format!("{id}\r\n"))),
                "{name}: DEL left {id}'s address"
            );
            free_slots.push(slot);
        } else {
            // the runtime lost track: the container (and its namespace) goes away, GC collects
            f.left_for_gc += 1;
            w.pool[slot] = w.env.container();
            free_slots.push(slot);
        }
        // a later ADD never gets an address a live attachment holds
        if rng.chance(1, 2) {
            if let Some(s2) = free_slots.pop() {
                let id2 = format!("after{run}");
                let (code, out, err) = w.run("ADD", &id2, w.pool[s2].path_str());
                assert_eq!(code, 0, "{name}: ADD after a kill: {out} {err}");
                let addr = address_of(&out);
                check_add(&mut f, &live, &id2, &addr);
                live.insert(id2, (s2, addr));
            }
        }
        if run % 25 == 24 {
            w.gc(&live);
            // GC kept exactly the live attachments' addresses
            let held: BTreeSet<String> = w.reservations().keys().cloned().collect();
            let want: BTreeSet<String> = live
                .values()
                .map(|(_, a)| a.split('/').next().unwrap().to_string())
                .collect();
            assert_eq!(
                held, want,
                "{name}: after GC the store holds exactly the live addresses"
            );
        }
    }
    // the end: GC with the live set, then DEL of every live attachment, then GC of nothing
    w.gc(&live);
    for (id, (slot, _)) in std::mem::take(&mut live) {
        let (code, out, err) = w.run("DEL", &id, w.pool[slot].path_str());
        assert_eq!(code, 0, "{name}: final DEL of {id}: {out} {err}");
    }
    w.gc(&live);
    let end = w.state();
    assert_eq!(baseline, end, "{name}: something leaked");
    eprintln!("{name}: {f:?}");
    f
}

fn host_local_conf(env: &TestEnv) -> Value {
    json!({"cniVersion": "1.1.0", "name": "crashnet", "type": "host-local",
           "ipam": {"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": env.data_dir}})
}

fn bridge_conf(env: &TestEnv) -> Value {
    json!({"cniVersion": "1.1.0", "name": "crashnet", "type": "bridge", "bridge": "crbr0", "isGateway": true,
           "ipMasq": true, "ipam": {"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": env.data_dir}})
}

fn has_applet(name: &str) -> bool {
    run_ok(Command::new(cnibox()).arg("--list")).lines().any(|l| l == name)
}

#[test]
fn host_local_killed_during_add_leaks_nothing() {
    let f = crash_scenario("host-local", Via::Plugin("host-local"), host_local_conf, 300);
    assert!(f.kills > 0, "{f:?}");
}

#[test]
fn cnitool_with_host_local_killed_during_add_leaks_nothing() {
    let f = crash_scenario("cnitool+host-local", Via::Cnitool, host_local_conf, 150);
    assert!(f.kills > 0, "{f:?}");
}

#[test]
fn bridge_with_host_local_killed_during_add_leaks_nothing() {
    if !has_applet("bridge") {
        eprintln!("SKIP: the bridge applet is not in this build");
        return;
    }
    let f = crash_scenario("bridge+host-local", Via::Plugin("bridge"), bridge_conf, 120);
    assert!(f.kills > 0, "{f:?}");
}

#[test]
fn cnitool_with_bridge_killed_during_add_leaks_nothing() {
    if !has_applet("bridge") {
        eprintln!("SKIP: the bridge applet is not in this build");
        return;
    }
    let f = crash_scenario("cnitool+bridge", Via::Cnitool, bridge_conf, 60);
    assert!(f.kills > 0, "{f:?}");
}
