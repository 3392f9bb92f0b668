//! Hostile input, in process: every plugin entry point (firewall included) (`cni::plugin::run_with`), `CNI_ARGS`,
//! results (parse, convert, round trip), resolv.conf, the OCI state, cache files and config
//! lists get generated and mutated inputs for a bounded time (`CNIBOX_FUZZ_SECS`, default
//! 3 s per target). Properties: nothing panics or hangs, every failure is a well-formed CNI
//! error object with the code the protocol documents for that input, successes are valid.
//! A smaller number of runs goes through the real binary (`binary_runs_keep_the_protocol`).
//!
//! Plugins run on a thread that first moves into a fresh network namespace, and every
//! `dataDir`/`resolvConf` is confined to the test's temp dir, so no input can touch the host.
use crate::common;
use crate::fuzz;

use cnibox::cni::json::{self, Json};
use cnibox::cni::{self, CniResult};
use common::*;
use fuzz::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One call of a plugin entry point.
#[derive(Debug, Clone)]
struct Call {
    env: BTreeMap<String, String>,
    stdin: Vec<u8>,
    /// The path of the caller's own network namespace (what code 8 is about).
    own: String,
    /// The spec versions the plugin speaks (`Plugin::versions`).
    versions: &'static [&'static str],
}

/// What the protocol says the outcome of a call must be.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// Exit 0, empty stdout (the "about" text goes to stderr).
    About,
    Version,
    Code(u64),
    /// Past the generic checks: the plugin's own verdict (success or one of these codes).
    Plugin(&'static [u64]),
}

/// Codes a plugin may return once the generic checks passed: bad version (1), unsupported
/// field (2), bad args (4? no: args errors are 999), decoding (6), config (7), netns (8),
/// try again (11), not available (50), internal (999).
const PLUGIN_CODES: &[u64] = &[1, 2, 3, 6, 7, 8, 11, 50, 51, 999];

fn own_netns_path() -> String {
    "/proc/thread-self/ns/net".to_string()
}

/// The protocol's verdict for a call, from the environment and stdin alone (skel's order:
/// environment, VERSION, stdin size, JSON, name, command, version gates, own netns).
fn expect(call: &Call) -> Expect {
    let get = |k: &str| call.env.get(k).cloned().unwrap_or_default();
    let cmd = get("CNI_COMMAND");
    if cmd.is_empty() {
        return Expect::About;
    }
    let required: &[&str] = match cmd.as_str() {
        "ADD" | "CHECK" => &["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"],
        "DEL" => &["CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"],
        "GC" | "STATUS" => &["CNI_PATH"],
        _ => &[],
    };
    for var in ["CNI_CONTAINERID", "CNI_IFNAME"] {
        let v = get(var);
        if required.contains(&var) && !v.is_empty() {
            let bad = if var == "CNI_CONTAINERID" {
                cni::env::validate_container_id(&v).is_err()
            } else {
                cni::env::validate_ifname(&v).is_err()
            };
            if bad {
                return Expect::Code(4);
            }
        }
    }
    if required.iter().any(|v| get(v).is_empty()) {
        return Expect::Code(4);
    }
    if cmd == "VERSION" {
        return Expect::Version;
    }
    if call.stdin.len() as u64 > cni::plugin::STDIN_LIMIT {
        return Expect::Code(5);
    }
    // keys as Go's decoder matches them (`"Name"` is the name), with the reader the unit
    // tests hold to Go's rules
    let Ok(conf) = cnibox::cni::json::parse(&call.stdin) else {
        return Expect::Code(6);
    };
    let text = |key: &str| -> Result<String, ()> {
        let fields = json::as_object(&conf, "").map_err(|_| ())?;
        Ok(json::opt_str(&fields, key, "")
            .map_err(|_| ())?
            .unwrap_or_default()
            .to_string())
    };
    let name = match (&conf, text("name")) {
        (Json::Object(_) | Json::Null, Ok(name)) => name,
        _ => return Expect::Code(6),
    };
    if cni::env::validate_network_name(&name).is_err() {
        return Expect::Code(7);
    }
    if !["ADD", "DEL", "CHECK", "STATUS", "GC"].contains(&cmd.as_str()) {
        return Expect::Code(4);
    }
    let version = match text("cniVersion") {
        Ok(v) => cni::version::normalize(&v).to_string(),
        Err(()) => return Expect::Code(6),
    };
    let speaks = call.versions.contains(&version.as_str());
    let gate_ok = match cmd.as_str() {
        "ADD" | "DEL" => speaks,
        "CHECK" => speaks && cni::version::at_least(&version, "0.4.0"),
        _ => speaks && cni::version::at_least(&version, "1.1.0"),
    };
    if !gate_ok {
        return if matches!(cmd.as_str(), "ADD" | "DEL") {
            Expect::Code(1)
        } else {
            Expect::Plugin(&[1, 6])
        };
    }
    if matches!(cmd.as_str(), "ADD" | "DEL" | "CHECK") && get("CNI_NETNS") == call.own {
        let overridden = get("CNI_NETNS_OVERRIDE");
        if !cni::env::netns_override(&overridden) {
            return Expect::Code(8);
        }
    }
    Expect::Plugin(PLUGIN_CODES)
}

/// What came out of a call.
#[derive(Debug)]
struct Outcome {
    exit: i32,
    stdout: Vec<u8>,
}

/// Checks an outcome against the verdict; `Err` says what is wrong.
fn judge(call: &Call, out: &Outcome) -> Result<(), String> {
    let want = expect(call);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let error_code = || -> Result<u64, String> {
        let v: Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("error output is not JSON ({e}): {stdout}"))?;
        let code = v["code"]
            .as_u64()
            .ok_or(format!("error object without a numeric code: {stdout}"))?;
        if !v["msg"].is_string() {
            return Err(format!("error object without msg: {stdout}"));
        }
        Ok(code)
    };
    match (&want, out.exit) {
        (Expect::About, 0) if out.stdout.is_empty() => Ok(()),
        (Expect::Version, 0) => {
            let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("VERSION reply: {e}"))?;
            v["supportedVersions"]
                .as_array()
                .map(|_| ())
                .ok_or(format!("VERSION reply: {stdout}"))
        }
        (Expect::Code(c), 1) => {
            let got = error_code()?;
            (got == *c)
                .then_some(())
                .ok_or(format!("expected code {c}, got {got}: {stdout}"))
        }
        (Expect::Plugin(codes), 1) => {
            let got = error_code()?;
            codes
                .contains(&got)
                .then_some(())
                .ok_or(format!("code {got} is none of {codes:?}: {stdout}"))
        }
        (Expect::Plugin(_), 0) => {
            let cmd = call.env.get("CNI_COMMAND").map(String::as_str).unwrap_or("");
            if cmd == "ADD" {
                let v: Value = serde_json::from_slice(&out.stdout)
                    .map_err(|e| format!("ADD result is not JSON ({e}): {stdout}"))?;
                CniResult::from_json(&v.into())
                    .map_err(|e| format!("ADD result does not parse back ({e}): {stdout}"))?;
                Ok(())
            } else if out.stdout.is_empty() {
                Ok(())
            } else {
                Err(format!("{cmd} printed something on success: {stdout}"))
            }
        }
        _ => Err(format!("expected {want:?}, got exit {} with stdout {stdout}", out.exit)),
    }
}

/// Confines an input's host-local paths to `dir`: a `dataDir` elsewhere (or absent, which
/// means /var/lib/cni/networks) and a `resolvConf` elsewhere are rewritten; other inputs
/// are left byte for byte.
fn confine(applet: &str, stdin: Vec<u8>, dir: &Path) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(&stdin) else {
        return stdin;
    };
    // below the directory, not merely sharing its name's prefix ("/tmp/x" vs "/tmp/x+data")
    let prefix = format!("{}/", dir.to_str().unwrap());
    let inside = |p: Option<&Value>| match p {
        Some(Value::String(s)) => s.starts_with(&prefix) && !s.contains(".."),
        _ => false,
    };
    let mut changed = false;
    // tuning keeps its saved state in the config's own dataDir (default /run/cni/tuning),
    // firewall its address records (default /run/cni/firewall)
    if applet == "tuning" || applet == "firewall" {
        match v.as_object_mut() {
            Some(obj) if !inside(obj.get("dataDir")) => {
                obj.insert("dataDir".into(), json!(dir.join(applet)));
                changed = true;
            }
            Some(_) => {}
            // not an object: the plugin fails to decode it before touching the disk
            None => return stdin,
        }
    }
    // dhcp asks its daemon on the config's socket (default /run/cni/dhcp.sock): one in the
    // directory, where no daemon listens
    if applet == "dhcp" {
        if let Some(obj) = v.as_object_mut() {
            if obj.get("ipam").map_or(true, Value::is_null) {
                obj.insert("ipam".into(), json!({}));
            }
        }
        if let Some(ipam) = v.get_mut("ipam").and_then(Value::as_object_mut) {
            if !inside(ipam.get("daemonSocketPath")) {
                ipam.insert("daemonSocketPath".into(), json!(dir.join("dhcp.sock")));
                changed = true;
            }
        }
    }
    let Some(ipam) = v.get_mut("ipam").and_then(Value::as_object_mut) else {
        return if changed {
            serde_json::to_vec(&v).unwrap()
        } else {
            stdin
        };
    };
    if !inside(ipam.get("dataDir")) {
        ipam.insert("dataDir".into(), json!(dir.join("data")));
        changed = true;
    }
    if let Some(r) = ipam.get("resolvConf") {
        if !r.is_null() && r != &json!("") && !inside(Some(r)) {
            ipam.insert("resolvConf".into(), json!(dir.join("resolv.conf")));
            changed = true;
        }
    }
    if changed {
        serde_json::to_vec(&v).unwrap()
    } else {
        stdin
    }
}

fn seed_ipam(dir: &Path, version: &str, i: usize) -> Value {
    let data = dir.join("data");
    match i % 4 {
        0 => json!({"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": data}),
        1 => json!({"type": "host-local", "dataDir": data, "resolvConf": dir.join("resolv.conf"),
                    "ranges": [[{"subnet": "10.1.2.0/28", "rangeStart": "10.1.2.2", "rangeEnd": "10.1.2.9", "gateway": "10.1.2.1"}],
                               [{"subnet": "2001:db8:1::/120"}]],
                    "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.1.2.1"}]}),
        2 if version >= "0.3.0" => json!({"type": "host-local", "dataDir": data,
                    "ranges": [[{"subnet": "10.1.2.0/24"}, {"subnet": "10.1.3.0/24"}]]}),
        _ => json!({"type": "host-local", "dataDir": data, "ranges": [[{"subnet": "10.1.2.0/30"}]]}),
    }
}

/// Valid configs of one applet, one per version and IPAM shape, plus the keys runtimes add.
fn seeds(applet: &str, dir: &Path) -> Vec<Value> {
    let mut out = vec![];
    for (i, v) in common::ALL_VERSIONS.iter().enumerate() {
        let ipam = seed_ipam(dir, v, i);
        let mut c = match applet {
            "host-local" => json!({"cniVersion": v, "name": "fznet", "ipam": ipam}),
            "bridge" => json!({"cniVersion": v, "name": "fznet", "type": "bridge", "bridge": "fzbr0",
                               "isGateway": true, "ipMasq": i % 2 == 0, "hairpinMode": i % 3 == 0, "mtu": 1400, "ipam": ipam}),
            "macvlan" => {
                json!({"cniVersion": v, "name": "fznet", "type": "macvlan", "master": "fzm0", "mode": "bridge", "ipam": ipam})
            }
            "portmap" => {
                let (backend, conditions) = match i % 2 {
                    0 => ("nftables", json!(["ip saddr 10.0.0.0/8"])),
                    _ => ("iptables", json!(["-s", "10.0.0.0/8"])),
                };
                json!({"cniVersion": v, "name": "fznet", "type": "portmap", "backend": backend,
                       "snat": i % 3 != 0, "markMasqBit": i % 32, "masqAll": i % 4 == 1,
                       "conditionsV4": conditions})
            }
            "loopback" => json!({"cniVersion": v, "name": "fznet", "type": "loopback"}),
            // chained (prevResult below); eth0 is a veth in one of the fuzz containers
            "tuning" => json!({"cniVersion": v, "name": "fznet", "type": "tuning", "dataDir": dir.join("tuning"),
                               "mtu": ([0, 1400, 1500][i % 3]), "promisc": i % 2 == 0, "allmulti": i % 3 == 0,
                               "txQLen": ([500, 1000][i % 2]), "mac": (["", "c2:00:00:00:00:0a"][i % 2]),
                               "sysctl": {"net.ipv4.conf.IFNAME.arp_notify": "1", "net.core.somaxconn": "512"}}),
            "bandwidth" => json!({"cniVersion": v, "name": "fznet", "type": "bandwidth",
                                  "ingressRate": ([0, 8000, 80000][i % 3]), "ingressBurst": ([0, 800, 8000][i % 3]),
                                  "egressRate": ([8000, 0][i % 2]), "egressBurst": ([8000, 0][i % 2])}),
            // chained: everything it acts on comes from prevResult (added below)
            "firewall" => json!({"cniVersion": v, "name": "fznet", "type": "firewall",
                                 "backend": (["iptables", "", "nftables", "firewalld"][i % 4]),
                                 "ingressPolicy": (["open", "same-bridge", "isolated", ""][i % 4]),
                                 "iptablesAdminChainName": (["", "FZ-ADMIN"][i % 2])}),
            other => {
                json!({"cniVersion": v, "name": "fznet", "type": other, "mtu": 1400, "ipMasq": i % 2 == 0, "ipam": ipam})
            }
        };
        if i % 2 == 1 {
            c["runtimeConfig"] = json!({"ips": ["10.1.2.7/24"], "mac": "de:ad:be:ef:00:01"});
            c["args"] = json!({"cni": {"ips": ["10.1.2.8"]}});
        }
        if applet == "portmap" {
            c["runtimeConfig"] = json!({"portMappings": [
                {"hostPort": 8080 + i, "containerPort": 80, "protocol": "tcp"},
                {"hostPort": 5353, "containerPort": 53, "protocol": "udp", "hostIP": "10.1.2.1"},
                {"hostPort": 8443, "containerPort": 443, "protocol": "sctp", "hostIP": "2001:db8:1::1"},
            ]});
        }
        if *v >= "0.3.0" {
            let mut prev = json!({"cniVersion": v, "interfaces": [{"name": "eth0", "sandbox": "/x"}],
                                  "ips": [{"address": "10.1.2.7/24", "gateway": "10.1.2.1", "interface": 0}],
                                  "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["10.1.2.1"]}});
            if *v < "1.0.0" {
                prev["ips"][0]["version"] = json!("4");
            }
            if applet == "bandwidth" {
                // the host end first, as bridge and ptp list it
                prev["interfaces"] = json!([{"name": "fzv0"}, {"name": "eth0", "sandbox": "/x"}]);
                prev["ips"][0]["interface"] = json!(1);
            }
            c["prevResult"] = prev;
        }
        if *v == "1.1.0" {
            c["cni.dev/valid-attachments"] = json!([{"containerID": "fzctr", "ifname": "eth0"}]);
        }
        out.push(c);
    }
    out
}

fn gen_env(r: &mut Rng, bin_dir: &str, containers: &[String], own: &str) -> BTreeMap<String, String> {
    let mut e = BTreeMap::new();
    let cmd = *r.pick(&[
        "ADD", "ADD", "ADD", "DEL", "DEL", "CHECK", "STATUS", "GC", "VERSION", "add", "", "BOGUS",
    ]);
    e.insert("CNI_COMMAND".into(), cmd.to_string());
    let id = match r.below(12) {
        0 => gen_string(r),
        1 => String::new(),
        _ => format!("fzctr{}", r.below(4)),
    };
    e.insert("CNI_CONTAINERID".into(), id);
    let ifname = match r.below(12) {
        0 => gen_string(r),
        1 => "0123456789abcdef".into(),
        _ => "eth0".into(),
    };
    e.insert("CNI_IFNAME".into(), ifname);
    let netns = match r.below(10) {
        0 => String::new(),
        1 | 2 => own.to_string(),
        // a real container namespace: valid inputs get all the way through ADD
        3..=5 => r.pick(containers).clone(),
        _ => "/run/netns/cnibox-fuzz-nonexistent".into(),
    };
    e.insert("CNI_NETNS".into(), netns);
    if r.chance(1, 10) {
        e.insert(
            "CNI_NETNS_OVERRIDE".into(),
            r.pick(&["1", "true", "0", "x"]).to_string(),
        );
    }
    if r.chance(1, 3) {
        e.insert("CNI_ARGS".into(), gen_cni_args(r));
    }
    if !r.chance(1, 20) {
        e.insert("CNI_PATH".into(), bin_dir.to_string());
    }
    e.retain(|_, v| !v.contains('\0'));
    e
}

fn call_in_process(plugin: &dyn cni::Plugin, call: &Call) -> Result<Outcome, String> {
    run_entry_point(plugin, &call.env, &call.stdin).map(|(exit, stdout)| Outcome { exit, stdout })
}

/// Where failing inputs are saved, to be added to tests/corpus once fixed.
fn save_failure(target: &str, call: &Call, why: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    std::fs::create_dir_all(&dir).unwrap();
    let h = call.stdin.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    });
    let p = dir.join(format!("{target}-{h:016x}"));
    std::fs::write(&p, &call.stdin).unwrap();
    std::fs::write(p.with_extension("why"), format!("{why}\nenv: {:?}\n", call.env)).unwrap();
    p
}

/// A call slower than this is reported as a hang (above the plugins' 10 s IPv6 DAD wait).
const HANG: Duration = Duration::from_secs(15);

struct Tally {
    runs: u64,
    codes: BTreeMap<String, u64>,
    failures: Vec<String>,
}

fn fuzz_plugin(applet: &str) {
    require_root();
    let Some(plugin) = cnibox::applets::plugin(applet) else {
        eprintln!("SKIP: applet {applet} is not in this build (cnibox --list)");
        return;
    };
    let tmp = tempfile::Builder::new().prefix("cnibox-fuzz").tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::write(
        dir.join("resolv.conf"),
        "nameserver 10.1.2.1\nsearch a b\noptions ndots:2\ndomain x\n",
    )
    .unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    for name in run_ok(std::process::Command::new(cnibox()).arg("--list")).lines() {
        std::os::unix::fs::symlink(cnibox(), bin.join(name)).unwrap();
    }
    let applet_name = applet.to_string();
    let containers: Vec<Netns> = (0..2).map(|_| Netns::new("z")).collect();
    let container_paths: Vec<String> = containers.iter().map(|n| n.path_str().to_string()).collect();
    // a thread of its own in a fresh network namespace: whatever an input makes the plugin
    // do, it does it there
    let tally = in_private_netns(move || {
        // the master the macvlan seeds name, in the thread's namespace
        run_ok(std::process::Command::new("ip").args(["link", "add", "fzm0", "type", "veth", "peer", "name", "fzm0p"]));
        // both ends up: without a carrier IPv6 DAD never ends and ADD waits out its timeout
        run_ok(std::process::Command::new("ip").args(["link", "set", "fzm0", "up"]));
        run_ok(std::process::Command::new("ip").args(["link", "set", "fzm0p", "up"]));
        // eth0 of the first container is a veth whose host end (fzv0) is here: the chained
        // seeds (tuning, bandwidth) act on it
        let first = container_paths[0].rsplit('/').next().unwrap().to_string();
        run_ok(std::process::Command::new("ip").args([
            "link", "add", "fzv0", "type", "veth", "peer", "name", "eth0", "netns", &first,
        ]));
        run_ok(std::process::Command::new("ip").args(["link", "set", "fzv0", "up"]));
        let mut r = Rng::from_env(&applet_name);
        let seeds = seeds(&applet_name, &dir);
        let bin_dir = bin.to_str().unwrap().to_string();
        let mut t = Tally {
            runs: 0,
            codes: BTreeMap::new(),
            failures: vec![],
        };
        let check = |t: &mut Tally, call: &Call| -> Option<Outcome> {
            let started = Instant::now();
            let out = call_in_process(plugin, call);
            t.runs += 1;
            let verdict = match &out {
                Err(panic) => Err(panic.clone()),
                Ok(_) if started.elapsed() > HANG => Err(format!("hang: the call took {:?}", started.elapsed())),
                Ok(o) => judge(call, o),
            };
            if let Ok(o) = &out {
                let code = if o.exit == 0 {
                    "ok".to_string()
                } else {
                    serde_json::from_slice::<Value>(&o.stdout)
                        .ok()
                        .map(|v| v["code"].to_string())
                        .unwrap_or_default()
                };
                *t.codes.entry(code).or_default() += 1;
            }
            if let Err(why) = verdict {
                let p = save_failure(&applet_name, call, &why);
                t.failures.push(format!("{why} (input saved in {})", p.display()));
            }
            out.ok()
        };
        let n = run_for(200, |i| {
            if i % 400 == 399 {
                let _ = std::fs::remove_dir_all(dir.join("data"));
            }
            let call = Call {
                env: gen_env(&mut r, &bin_dir, &container_paths, &own_netns_path()),
                stdin: confine(&applet_name, gen_input(&mut r, &seeds), &dir),
                own: own_netns_path(),
                versions: plugin.versions(),
            };
            let out = check(&mut t, &call);
            // a successful ADD must be undone by DEL, twice (idempotence)
            if matches!(out, Some(Outcome { exit: 0, .. }))
                && call.env.get("CNI_COMMAND").map(String::as_str) == Some("ADD")
            {
                let mut del = call.clone();
                del.env.insert("CNI_COMMAND".into(), "DEL".into());
                for _ in 0..2 {
                    if let Some(o) = check(&mut t, &del) {
                        if o.exit != 0 {
                            t.failures.push(format!(
                                "DEL after a successful ADD failed: {}",
                                String::from_utf8_lossy(&o.stdout)
                            ));
                        }
                    }
                }
            }
        });
        eprintln!("fuzz {applet_name}: {n} generated inputs");
        t
    });
    drop(containers);
    // the confinement held: nothing was created next to the temp dir under a similar name
    let base = tmp.path().file_name().unwrap().to_string_lossy().into_owned();
    let strays: Vec<String> = std::fs::read_dir(tmp.path().parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&base) && *n != base)
        .collect();
    assert!(strays.is_empty(), "created outside the temp dir: {strays:?}");
    eprintln!("fuzz {applet}: {} executions, outcomes {:?}", tally.runs, tally.codes);
    assert!(
        tally.codes.get("ok").copied().unwrap_or(0) > 0 || applet != "host-local",
        "no input ever succeeded: the generator is too weak"
    );
    assert!(
        tally.failures.is_empty(),
        "{} failures, first ones:\n{}",
        tally.failures.len(),
        tally.failures.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn fuzz_host_local_entry_point() {
    fuzz_plugin("host-local");
}

#[test]
fn fuzz_firewall_entry_point() {
    fuzz_plugin("firewall");
}

#[test]
fn fuzz_bridge_entry_point() {
    fuzz_plugin("bridge");
}

#[test]
fn fuzz_veth_entry_point() {
    fuzz_plugin("veth");
}

#[test]
fn fuzz_portmap_entry_point() {
    fuzz_plugin("portmap");
}

#[test]
fn fuzz_ptp_entry_point() {
    fuzz_plugin("ptp");
}

#[test]
fn fuzz_macvlan_entry_point() {
    fuzz_plugin("macvlan");
}

#[test]
fn fuzz_loopback_entry_point() {
    fuzz_plugin("loopback");
}

#[test]
fn fuzz_tuning_entry_point() {
    fuzz_plugin("tuning");
}

#[test]
fn fuzz_bandwidth_entry_point() {
    fuzz_plugin("bandwidth");
}

/// Go's `types.LoadArgs` into a struct with fields `known`, written from its description.
fn args_model(s: &str, known: &[&str]) -> Result<Vec<(String, String)>, ()> {
    if s.is_empty() {
        return Ok(vec![]);
    }
    let mut out = vec![];
    let mut unknown = false;
    let mut ignore = false;
    for pair in s.split(';') {
        let kv: Vec<&str> = pair.split('=').collect();
        if kv.len() != 2 {
            return Err(());
        }
        if kv[0] == "IgnoreUnknown" {
            ignore = match kv[1].to_lowercase().as_str() {
                "1" | "true" => true,
                "0" | "false" => false,
                _ => return Err(()),
            };
        } else if !known.contains(&kv[0]) {
            unknown = true;
            continue;
        }
        out.push((kv[0].to_string(), kv[1].to_string()));
    }
    if unknown && !ignore {
        return Err(());
    }
    Ok(out)
}

#[test]
fn fuzz_cni_args_against_a_model() {
    let mut r = Rng::from_env("cni-args");
    let mut failures = vec![];
    let n = run_for(2000, |_| {
        let s = if r.chance(1, 4) {
            gen_string(&mut r)
        } else {
            gen_cni_args(&mut r)
        };
        let sets: [&[&str]; 4] = [&["IP"], &["IP", "MAC"], &[], &["K8S_POD_NAME", "IP"]];
        let known = sets[r.below(sets.len())];
        let got = catch_unwind(|| cni::args::parse(&s, known));
        match got {
            Err(_) => failures.push(format!("panic on {s:?}")),
            Ok(got) => {
                let want = args_model(&s, known);
                match (&got, &want) {
                    (Ok(a), Ok(b)) if a == b => {}
                    (Err(e), Err(())) if e.code == 999 => {}
                    _ => failures.push(format!("{s:?} with {known:?}: got {got:?}, model {want:?}")),
                }
            }
        }
        // cnitool's own CNI_ARGS reader: K=V pairs, both sides non-empty
        if let Ok(pairs) = cnibox::runtime::cnitool::parse_cni_args(&s) {
            if pairs
                .iter()
                .any(|(k, v)| k.is_empty() || v.is_empty() || k.contains('=') || v.contains('='))
            {
                failures.push(format!("cnitool accepted {s:?} as {pairs:?}"));
            }
        }
    });
    eprintln!("fuzz cni-args: {n} inputs");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn result_seeds() -> Vec<Value> {
    let mut out = vec![];
    for v in common::ALL_VERSIONS {
        let r = match *v {
            "0.1.0" | "0.2.0" => json!({"cniVersion": v, "ip4": {"ip": "10.1.2.7/24", "gateway": "10.1.2.1",
                        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.0.0/16", "gw": "10.1.2.9"}]},
                        "ip6": {"ip": "2001:db8:1::7/64"}, "dns": {"nameservers": ["10.1.2.1"], "domain": "x", "search": ["a"], "options": ["ndots:2"]}}),
            _ => {
                let mut r = json!({"cniVersion": v,
                    "interfaces": [{"name": "cni0", "mac": "de:ad:be:ef:00:01"}, {"name": "eth0", "mac": "de:ad:be:ef:00:02", "sandbox": "/run/netns/x", "mtu": 1400}],
                    "ips": [{"address": "10.1.2.7/24", "gateway": "10.1.2.1", "interface": 1}, {"address": "2001:db8:1::7/64", "interface": 1}],
                    "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}, {"dst": "::/0", "mtu": 1300, "advmss": 1200, "priority": 5, "table": 100, "scope": 0}],
                    "dns": {"nameservers": ["10.1.2.1"], "search": []}});
                if *v < "1.0.0" {
                    r["ips"][0]["version"] = json!("4");
                    r["ips"][1]["version"] = json!("6");
                }
                r
            }
        };
        out.push(r);
    }
    out
}

#[test]
fn fuzz_results_parse_convert_round_trip() {
    let mut r = Rng::from_env("results");
    let seeds = result_seeds();
    let mut failures: Vec<String> = vec![];
    let mut converted = 0u64;
    let n = run_for(1000, |_| {
        let bytes = gen_input(&mut r, &seeds);
        let Ok(v) = cnibox::cni::json::parse(&bytes) else {
            // the runtime's reader of plugin output must fail cleanly on non-JSON too
            if catch_unwind(|| cnibox::cni::invoke::parse_result(&bytes, "1.0.0")).is_err() {
                failures.push(format!(
                    "parse_result panicked on {:?}",
                    String::from_utf8_lossy(&bytes)
                ));
            }
            return;
        };
        let conf_version = *r.pick(&["0.1.0", "0.2.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", "", "7.0.0"]);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut errs = vec![];
            for parsed in [
                CniResult::from_json(&v),
                CniResult::from_plugin_output(&v, conf_version),
                CniResult::from_prev_result(&v, conf_version),
            ] {
                match parsed {
                    Err(e) if e.code == 0 || e.msg.is_empty() => {
                        errs.push(format!("error without code or text: {e:?}"))
                    }
                    Err(_) => {}
                    Ok(res) => {
                        for to in common::ALL_VERSIONS {
                            match res.to_json(to) {
                                Err(e) if e.code == 0 || e.msg.is_empty() => {
                                    errs.push(format!("to_json({to}) error without code: {e:?}"))
                                }
                                Err(_) => {}
                                Ok(j) => {
                                    converted += 1;
                                    // what we print must parse back and print the same again
                                    match CniResult::from_json(&j.clone().into()) {
                                        Err(e) => {
                                            errs.push(format!("to_json({to}) output does not parse back: {e} — {j}"))
                                        }
                                        Ok(back) => match back.to_json(to) {
                                            Ok(j2) if j2 == j => {}
                                            other => {
                                                errs.push(format!("round trip via {to} not stable: {j} vs {other:?}"))
                                            }
                                        },
                                    }
                                    let pretty = res.to_pretty_json(to).map(|p| serde_json::from_str::<Value>(&p).ok());
                                    if pretty != Ok(Some(j.clone())) {
                                        errs.push(format!("to_pretty_json({to}) differs from to_json: {pretty:?}"));
                                    }
                                }
                            }
                        }
                    }
                }
            }
            let _ = cnibox::cni::invoke::parse_result(&bytes, conf_version);
            errs
        }));
        match outcome {
            Err(_) => failures.push(format!("panic on {v} (config version {conf_version:?})")),
            Ok(errs) => failures.extend(errs.into_iter().map(|e| format!("{e}\n  input: {v}"))),
        }
    });
    eprintln!("fuzz results: {n} inputs, {converted} successful conversions");
    assert!(converted > 0, "no input ever converted: the generator is too weak");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// resolv.conf as the reference reads it, written from resolv.conf(5) and `parseResolvConf`.
fn resolv_model(text: &str) -> (Vec<String>, Option<String>, Vec<String>, Vec<String>) {
    let (mut ns, mut domain, mut search, mut opts) = (vec![], None, vec![], vec![]);
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 2 {
            continue;
        }
        match f[0] {
            "nameserver" => ns.push(f[1].to_string()),
            "domain" => domain = Some(f[1].to_string()),
            "search" => search.extend(f[1..].iter().map(|s| s.to_string())),
            "options" => opts.extend(f[1..].iter().map(|s| s.to_string())),
            _ => {}
        }
    }
    (ns, domain, search, opts)
}

#[test]
fn fuzz_resolv_conf_against_a_model() {
    let mut r = Rng::from_env("resolv.conf");
    const WORDS: &[&str] = &[
        "nameserver",
        "domain",
        "search",
        "options",
        "#",
        ";",
        " ",
        "\t",
        "\r",
        "\n",
        "1.1.1.1",
        "2001:db8::1",
        "a.example",
        "ndots:5",
        "nameserver\u{0}",
        "\u{a0}",
        "# nameserver 9.9.9.9",
        "sortlist",
    ];
    let mut failures = vec![];
    let n = run_for(3000, |_| {
        let mut text = String::new();
        for _ in 0..r.below(40) {
            if r.chance(1, 8) {
                text.push_str(&gen_string(&mut r));
            } else {
                text.push_str(WORDS[r.below(WORDS.len())]);
            }
            text.push_str([" ", "\n", "\t", ""][r.below(4)]);
        }
        match catch_unwind(|| cnibox::ipam::resolv::parse(&text)) {
            Err(_) => failures.push(format!("panic on {text:?}")),
            Ok(dns) => {
                let (ns, domain, search, opts) = resolv_model(&text);
                let got = (
                    dns.nameservers.clone().unwrap_or_default(),
                    dns.domain.clone(),
                    dns.search.clone().unwrap_or_default(),
                    dns.options.clone().unwrap_or_default(),
                );
                if got != (ns.clone(), domain.clone(), search.clone(), opts.clone()) {
                    failures.push(format!("{text:?}: got {got:?}, model {:?}", (ns, domain, search, opts)));
                }
            }
        }
    });
    eprintln!("fuzz resolv.conf: {n} inputs");
    assert!(
        failures.is_empty(),
        "{}",
        failures.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn fuzz_oci_state() {
    use cnibox::hook::state::{Phase, State};
    let mut r = Rng::from_env("oci-state");
    let seeds = vec![
        json!({"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 1234, "bundle": "/b", "annotations": {"cni.cnibox.io/networks": "a,b"}}),
        json!({"ociVersion": "1.0", "id": "c1", "status": "stopped", "bundle": "/b", "root": "/r"}),
        json!({"id": "c1", "status": "created", "pid": 0}),
    ];
    let mut failures = vec![];
    let mut parsed = 0u64;
    let n = run_for(2000, |_| {
        let bytes = gen_input(&mut r, &seeds);
        let explicit = if r.chance(1, 3) { Some(gen_string(&mut r)) } else { None };
        let res = catch_unwind(|| {
            State::parse(&bytes).map(|s| {
                let phase = s.phase(explicit.as_deref());
                (s, phase)
            })
        });
        match res {
            Err(_) => failures.push(format!("panic on {:?}", String::from_utf8_lossy(&bytes))),
            Ok(Err(e)) if e.to_string().is_empty() => failures.push("empty error".into()),
            Ok(Err(_)) => {}
            Ok(Ok((s, phase))) => {
                parsed += 1;
                if s.id.is_empty() || s.pid < 0 || s.pid > i32::MAX as i64 {
                    failures.push(format!("accepted {s:?}"));
                }
                if let Ok(p) = phase {
                    let word = explicit.as_deref().unwrap_or(&s.status);
                    let want = match word {
                        "add" | "creating" | "created" | "running" => Some(Phase::Add),
                        "del" | "delete" | "stopped" => Some(Phase::Del),
                        _ => None,
                    };
                    if want != Some(p) {
                        failures.push(format!("phase {p:?} from {word:?}"));
                    }
                }
            }
        }
    });
    eprintln!("fuzz oci-state: {n} inputs, {parsed} parsed");
    assert!(parsed > 0);
    assert!(
        failures.is_empty(),
        "{}",
        failures.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn fuzz_cache_files_and_config_lists() {
    use cnibox::runtime::cache::{decode, Cached};
    use cnibox::runtime::conflist::NetworkList;
    let mut r = Rng::from_env("cache+conflist");
    let seeds = vec![
        json!({"kind": "cniCacheV1", "containerId": "c1", "config": "eyJjbmlWZXJzaW9uIjoiMS4wLjAifQ==", "ifName": "eth0",
               "networkName": "n", "netns": "/x", "cniArgs": [["IP", "10.1.2.7"]], "capabilityArgs": {"portMappings": []},
               "result": {"cniVersion": "1.0.0", "ips": []}}),
        json!({"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "bridge", "bridge": "b0", "ipam": {"type": "host-local", "subnet": "10.1.2.0/24"}},
               {"type": "portmap", "capabilities": {"portMappings": true}}], "disableCheck": false, "disableGC": true}),
        json!({"cniVersion": "0.4.0", "name": "n", "type": "host-local", "subnet": "10.1.2.0/24"}),
    ];
    let mut failures = vec![];
    let n = run_for(2000, |_| {
        let bytes = gen_input(&mut r, &seeds);
        let res = catch_unwind(|| {
            let cached = decode(&bytes);
            let list = NetworkList::from_bytes(&bytes).is_ok();
            let single = NetworkList::from_plugin_bytes(&bytes).is_ok();
            (cached, list, single)
        });
        match res {
            Err(_) => failures.push(format!("panic on {:?}", String::from_utf8_lossy(&bytes))),
            Ok((Cached::Corrupt(why), _, _)) if why.is_empty() => failures.push("corrupt without a reason".into()),
            Ok(_) => {}
        }
    });
    eprintln!("fuzz cache+conflist: {n} inputs");
    assert!(
        failures.is_empty(),
        "{}",
        failures.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// Fewer, real-process runs: the same generated inputs and the same oracle, through the
/// binary (its panic hook, its stdin and stdout handling), in the test's private host
/// namespace, with a bound on each run.
#[test]
fn fuzz_binary_runs_keep_the_protocol() {
    let env = TestEnv::new();
    env.host
        .ip(&["link", "add", "fzm0", "type", "veth", "peer", "name", "fzm0p"]);
    env.host.ip(&["link", "set", "fzm0", "up"]);
    env.host.ip(&["link", "set", "fzm0p", "up"]);
    let dir = env.tmp.path().to_path_buf();
    std::fs::write(dir.join("resolv.conf"), "nameserver 10.1.2.1\n").unwrap();
    let containers: Vec<Netns> = (0..2).map(|_| env.container()).collect();
    let container_paths: Vec<String> = containers.iter().map(|n| n.path_str().to_string()).collect();
    let own = env.host.path_str().to_string();
    let applets: Vec<String> = run_ok(std::process::Command::new(cnibox()).arg("--list"))
        .lines()
        .filter(|a| cnibox::applets::plugin(a).is_some())
        .map(String::from)
        .collect();
    let mut r = Rng::from_env("binary runs");
    let mut failures = vec![];
    let mut runs = 0;
    let budget = fuzz::budget();
    for applet in &applets {
        let seeds = seeds(applet, &dir);
        let started = Instant::now();
        // 60 per applet in `make test`, more when the budget is raised
        let cap = 60.max((budget.as_secs_f64() * 20.0) as usize);
        for _ in 0..cap {
            if started.elapsed() > budget {
                break;
            }
            let call = Call {
                env: gen_env(&mut r, env.bin_dir.to_str().unwrap(), &container_paths, &own),
                stdin: confine(applet, gen_input(&mut r, &seeds), &dir),
                own: own.clone(),
                versions: cnibox::applets::plugin(applet).expect("a plugin").versions(),
            };
            let vars: Vec<(&str, &str)> = call.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let out = run_process(&env.bin_dir.join(applet), &env.host.path, &[], &vars, &call.stdin, HANG);
            runs += 1;
            let verdict = if out.timed_out {
                Err("hang".to_string())
            } else if out.stderr.contains("panic") {
                Err(format!("panic: {}", out.stderr))
            } else {
                judge(
                    &call,
                    &Outcome {
                        exit: out.code,
                        stdout: out.stdout.into_bytes(),
                    },
                )
            };
            if let Err(why) = verdict {
                let p = save_failure(&format!("binary-{applet}"), &call, &why);
                failures.push(format!("{applet}: {why} (input saved in {})", p.display()));
            }
        }
    }
    eprintln!("fuzz binary runs: {runs} processes over {applets:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Pieces of Go regexp syntax, valid and not, that allowlist patterns are made of (and a few
/// outside cnibox's subset, which must then be refused as unsupported, never accepted).
const REGEX_PIECES: &[&str] = &[
    "a",
    "b",
    "n",
    "e",
    "t",
    "0",
    "9",
    "_",
    "-",
    ",",
    ":",
    "é",
    "IFNAME",
    "net",
    "\\.",
    ".",
    "^",
    "$",
    "*",
    "+",
    "?",
    "*?",
    "+?",
    "??",
    "|",
    "(",
    ")",
    "(?:",
    "[",
    "]",
    "[^",
    "a-z",
    "z-a",
    "0-9",
    "\\-",
    "\\]",
    "\\d",
    "\\D",
    "\\s",
    "\\S",
    "\\w",
    "\\W",
    "\\b",
    "\\B",
    "\\A",
    "\\z",
    "\\",
    "\\q",
    "\\C",
    "\\x41",
    "\\x{62}",
    "\\x4",
    "\\x{}",
    "\\x{D800}",
    "\\101",
    "\\0",
    "\\1",
    "\\8",
    "\\n",
    "\\t",
    "\\_",
    "{",
    "}",
    "{2}",
    "{1,3}",
    "{2,}",
    "{0}",
    "{01}",
    "{1001}",
    "{3,2}",
    "{1000}",
    "[:alpha:]",
    "[:foo:]",
    "\\pL",
    "\\p{Greek}",
    "(?i)",
    "(?P<x>",
    "\\Q",
];

/// Texts patterns are tried on: sysctl names, and strings made of the patterns' letters.
fn regex_text(r: &mut Rng) -> String {
    const NAMES: &[&str] = &[
        "",
        "net.ipv4.conf.IFNAME.arp_filter",
        "net.ipv4.conf.other.rp_filter",
        "net.core.somaxconn",
        "net.ipv6.conf.all.forwarding",
    ];
    if r.chance(1, 3) {
        return r.pick(NAMES).to_string();
    }
    const LETTERS: &[&str] = &[
        "a", "b", "n", "e", "t", "0", "9", "_", "-", ".", "A", "Z", "é", "\n", "\t", "\x0b", " ", "{", "}", ",", "[",
    ];
    (0..r.below(8)).map(|_| *r.pick(LETTERS)).collect()
}

/// cnibox's matcher (`util::regex`) against Go's regexp on generated patterns: the same
/// verdict for every text, and where Go rejects a pattern, the same message. A pattern
/// outside cnibox's subset is refused as unsupported (Go's verdict on it aside).
#[test]
fn fuzz_regex_matcher_against_go() {
    use cnibox::util::regex::{Error, Regex};
    let env = TestEnv::new();
    let Some(oracle) = common::regexp_oracle(env.tmp.path()) else {
        return;
    };
    let mut r = Rng::from_env("regex");
    let mut failures = vec![];
    let mut compared = 0;
    let mut unsupported = 0;
    run_for(4, |_| {
        let queries: Vec<(String, Vec<String>)> = (0..500)
            .map(|_| {
                let pattern: String = (0..1 + r.below(7)).map(|_| *r.pick(REGEX_PIECES)).collect();
                let texts = (0..6).map(|_| regex_text(&mut r)).collect();
                (pattern, texts)
            })
            .collect();
        let input: Value = queries.iter().map(|(p, t)| json!({"p": p, "t": t})).collect();
        let out = std::process::Command::new(&oracle)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(input.to_string().as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        for ((pattern, texts), go) in queries.iter().zip(answers) {
            compared += 1;
            let ours = Regex::new(pattern);
            let verdict = match (&ours, go.get("err").and_then(Value::as_str)) {
                (Err(Error::Unsupported { .. }), _) => {
                    unsupported += 1;
                    Ok(())
                }
                (Err(e), Some(theirs)) if e.to_string() == theirs => Ok(()),
                (Err(e), theirs) => Err(format!("ours: {e}; Go: {theirs:?}")),
                (Ok(_), Some(theirs)) => Err(format!("ours compiles; Go: {theirs}")),
                (Ok(re), None) => {
                    let mine: Vec<bool> = texts.iter().map(|t| re.is_match(t)).collect();
                    let theirs: Vec<bool> = serde_json::from_value(go["m"].clone()).unwrap();
                    if mine == theirs {
                        Ok(())
                    } else {
                        Err(format!("on {texts:?}: ours {mine:?}, Go {theirs:?}"))
                    }
                }
            };
            if let Err(why) = verdict {
                failures.push(format!("{pattern:?}: {why}"));
            }
        }
    });
    eprintln!("fuzz regex: {compared} patterns compared with Go, {unsupported} refused as unsupported");
    failures.truncate(20);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
