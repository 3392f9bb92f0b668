//! Concurrency: 400 ADD/DEL operations from parallel processes over two networks that share
//! one data dir (and, for bridge, one bridge). Every ADD's address is checked against a
//! shared record of live addresses (per network) the moment it returns, so a duplicate is
//! caught at any instant; no error is expected; at the end nothing is left. The operations
//! are plugin calls, or `cnitool add`/`del` (its cache and locks under the same load).
use crate::common;
use crate::fuzz;
use crate::plugin_state::rules;

use common::*;
use fuzz::{run_process, Rng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WORKERS: usize = 8;
const OPS: usize = 400;
/// Live attachments a worker keeps at most (each in a namespace of its own).
const SLOTS: usize = 3;

fn host_local_conf(env: &TestEnv, net: &str, third: u8) -> Value {
    json!({"cniVersion": "1.0.0", "name": net, "type": "host-local",
           "ipam": {"type": "host-local", "dataDir": env.data_dir,
                    "ranges": [[{"subnet": format!("10.1.{third}.0/24"), "rangeStart": format!("10.1.{third}.10"),
                                 "rangeEnd": format!("10.1.{third}.49")}]]}})
}

fn bridge_conf(env: &TestEnv, net: &str, third: u8) -> Value {
    let mut c = host_local_conf(env, net, third);
    c["type"] = json!("bridge");
    c["bridge"] = json!("ccbr0");
    // one gateway address per bridge: with IPv4, a second network's gateway on the same
    // bridge is refused (as by the reference), so only the first network has one
    c["isGateway"] = json!(third == 2);
    c["ipMasq"] = json!(true);
    c
}

#[derive(Default, Debug)]
struct Figures {
    adds: usize,
    dels: usize,
    errors: Vec<String>,
}

fn first_address(stdout: &str) -> Option<String> {
    let v: Value = serde_json::from_str(stdout).ok()?;
    Some(v["ips"][0]["address"].as_str()?.split('/').next()?.to_string())
}

fn store_ips(env: &TestEnv, net: &str) -> Vec<String> {
    env.store(net)
        .into_keys()
        .filter(|k| k.parse::<std::net::IpAddr>().is_ok())
        .collect()
}

/// `via_cnitool`: every operation is a `cnitool add`/`del` (cache writes and locks
/// included) instead of a plugin call.
fn run_concurrency(name: &str, applet: &str, conf: fn(&TestEnv, &str, u8) -> Value, via_cnitool: bool) {
    let env = Arc::new(TestEnv::new());
    let nets = [("cca", conf(&env, "cca", 2)), ("ccb", conf(&env, "ccb", 3))];
    let conf_dir = env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    for (net, c) in &nets {
        let mut p = c.clone();
        p.as_object_mut().unwrap().remove("name");
        let list = json!({"cniVersion": c["cniVersion"], "name": net, "plugins": [p]});
        std::fs::write(conf_dir.join(format!("{net}.conflist")), list.to_string()).unwrap();
    }
    // warm-up: the shared bridge and global rules exist before the baseline is taken
    let ns0 = env.container();
    for (_, c) in &nets {
        env.call(applet)
            .exec("ADD", "warm", ns0.path_str(), "eth0", c)
            .success();
        env.call(applet)
            .exec("DEL", "warm", ns0.path_str(), "eth0", c)
            .success();
    }
    let baseline = (env.host.links(), addrs(&env.host), rules(&env.host));
    // (network, address) → container id, for the live attachments
    let live: Arc<Mutex<BTreeMap<(String, String), String>>> = Arc::default();
    let figures: Arc<Mutex<Figures>> = Arc::default();
    let nets = Arc::new(nets);
    let mut handles = vec![];
    let seed = Rng::from_env(name).next();
    for w in 0..WORKERS {
        let (env, live, figures, nets) = (env.clone(), live.clone(), figures.clone(), nets.clone());
        let applet = applet.to_string();
        let conf_dir = conf_dir.clone();
        handles.push(std::thread::spawn(move || {
            let mut r = Rng::new(seed ^ (w as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let slots: Vec<Netns> = (0..SLOTS).map(|_| env.container()).collect();
            // slot → (network index, container id, address)
            let mut held: Vec<Option<(usize, String, String)>> = vec![None; SLOTS];
            let call = |verb: &str, id: &str, ns: &Netns, conf: &Value| {
                if via_cnitool {
                    let net = conf["name"].as_str().unwrap();
                    let vars = [
                        ("NETCONFPATH", conf_dir.to_str().unwrap()),
                        ("CNI_PATH", env.bin_dir.to_str().unwrap()),
                        ("CNI_CACHE_DIR", env.cache_dir.to_str().unwrap()),
                    ];
                    let args = [
                        verb.to_lowercase(),
                        net.to_string(),
                        ns.path_str().to_string(),
                        "--container-id".into(),
                        id.to_string(),
                    ];
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    return run_process(
                        &env.bin_dir.join("cnitool"),
                        &env.host.path,
                        &args,
                        &vars,
                        b"",
                        Duration::from_secs(60),
                    );
                }
                let vars = [
                    ("CNI_COMMAND", verb),
                    ("CNI_CONTAINERID", id),
                    ("CNI_NETNS", ns.path_str()),
                    ("CNI_IFNAME", "eth0"),
                    ("CNI_PATH", env.bin_dir.to_str().unwrap()),
                ];
                run_process(
                    &env.bin_dir.join(&applet),
                    &env.host.path,
                    &[],
                    &vars,
                    conf.to_string().as_bytes(),
                    Duration::from_secs(60),
                )
            };
            let del = |slot: usize, held: &mut Vec<Option<(usize, String, String)>>| {
                let (n, id, addr) = held[slot].take().unwrap();
                // no longer live from the moment DEL starts: its address may be reused once freed
                live.lock().unwrap().remove(&(nets[n].0.to_string(), addr));
                let out = call("DEL", &id, &slots[slot], &nets[n].1);
                let mut f = figures.lock().unwrap();
                f.dels += 1;
                if out.code != 0 {
                    f.errors.push(format!("DEL {id}: {} {}", out.stdout, out.stderr));
                }
            };
            for i in 0..OPS / WORKERS {
                let slot = r.below(SLOTS);
                if held[slot].is_some() {
                    del(slot, &mut held);
                    continue;
                }
                let n = r.below(2);
                let id = format!("w{w}op{i}");
                let out = call("ADD", &id, &slots[slot], &nets[n].1);
                let mut f = figures.lock().unwrap();
                f.adds += 1;
                match (out.code, first_address(&out.stdout)) {
                    (0, Some(addr)) => {
                        let key = (nets[n].0.to_string(), addr.clone());
                        if let Some(other) = live.lock().unwrap().insert(key, id.clone()) {
                            f.errors
                                .push(format!("DUPLICATE: {id} got {addr} on {}, held by {other}", nets[n].0));
                        }
                        held[slot] = Some((n, id, addr));
                    }
                    _ => f.errors.push(format!("ADD {id}: {} {}", out.stdout, out.stderr)),
                }
            }
            for slot in 0..SLOTS {
                if held[slot].is_some() {
                    del(slot, &mut held);
                }
            }
            // a container namespace holds nothing but its loopback after its DELs
            for ns in &slots {
                let links = ns.links();
                if links != ["lo"] {
                    figures
                        .lock()
                        .unwrap()
                        .errors
                        .push(format!("container links left: {links:?}"));
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let f = figures.lock().unwrap();
    eprintln!(
        "{name}: {} ADDs, {} DELs from {WORKERS} parallel workers, {} errors",
        f.adds,
        f.dels,
        f.errors.len()
    );
    assert!(f.errors.is_empty(), "{}", f.errors.join("\n"));
    assert!(f.adds + f.dels >= OPS);
    for (net, _) in nets.iter() {
        assert!(
            store_ips(&env, net).is_empty(),
            "{net}: reservations left: {:?}",
            store_ips(&env, net)
        );
        let names: Vec<String> = env.store(net).into_keys().collect();
        assert!(
            names
                .iter()
                .all(|n| n == "lock" || n == ".cnibox-index" || n.starts_with("last_reserved_ip.")),
            "{net}: stray files {names:?}"
        );
    }
    let results: Vec<_> = std::fs::read_dir(env.cache_dir.join("results"))
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(results.is_empty(), "{name}: cache files left: {results:?}");
    let end = (env.host.links(), addrs(&env.host), rules(&env.host));
    assert_eq!(baseline, end, "{name}: host state differs after everything was deleted");
}

/// Addresses without their flags (a link-local address is "tentative" for a while).
fn addrs(ns: &Netns) -> String {
    ns.ip(&["-o", "addr"])
        .lines()
        .map(|l| l.split_whitespace().take(4).collect::<Vec<_>>().join(" ") + "\n")
        .collect()
}

#[test]
fn host_local_400_parallel_operations_two_networks_one_data_dir() {
    run_concurrency("concurrency host-local", "host-local", host_local_conf, false);
}

#[test]
fn bridge_400_parallel_operations_two_networks_one_bridge() {
    if !run_ok(std::process::Command::new(cnibox()).arg("--list"))
        .lines()
        .any(|l| l == "bridge")
    {
        eprintln!("SKIP: the bridge applet is not in this build");
        return;
    }
    run_concurrency("concurrency bridge", "bridge", bridge_conf, false);
}

#[test]
fn cnitool_with_bridge_400_parallel_operations_two_networks_one_bridge() {
    if !run_ok(std::process::Command::new(cnibox()).arg("--list"))
        .lines()
        .any(|l| l == "bridge")
    {
        eprintln!("SKIP: the bridge applet is not in this build");
        return;
    }
    run_concurrency("concurrency cnitool+bridge", "bridge", bridge_conf, true);
}
