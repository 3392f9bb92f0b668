//! After a reboot: host-local releases what an earlier boot reserved at its first call in a
//! network (the runtime's side, attachments cached in an earlier boot, is tested with the
//! runtime's other tests in `cnitool.rs` and `oci_hook.rs`). A reboot is simulated by running
//! the binary with another boot ID: a file bind-mounted over
//! /proc/sys/kernel/random/boot_id in a private mount namespace of that one call
//! (`Call::in_boot`).
use crate::common;

use common::{boot_id_file, read_dir_map, PrivateMount, TestEnv, ALL_VERSIONS};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const NET: &str = "hlnet";
const INDEX: &str = ".cnibox-index";

fn conf(env: &TestEnv, version: &str, network: &str, ipam: Value) -> Value {
    let mut ipam = ipam;
    ipam["type"] = json!("host-local");
    ipam["dataDir"] = json!(env.data_dir);
    json!({"cniVersion": version, "name": network, "ipam": ipam})
}

/// The reservation files of `network`: address → owner.
fn reservations(env: &TestEnv, network: &str) -> std::collections::BTreeMap<String, String> {
    env.store(network)
        .into_iter()
        .filter(|(name, _)| name.parse::<std::net::IpAddr>().is_ok())
        .collect()
}

fn names(map: std::collections::BTreeMap<String, String>) -> Vec<String> {
    map.into_keys().collect()
}

/// Everything in the data dir besides the network directories (a release's old directory).
fn strays(env: &TestEnv) -> Vec<String> {
    std::fs::read_dir(&env.data_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// Waits until the old directories a release left beside the stores are gone (a detached
/// process removes them) and returns how long that took.
fn old_dirs_removed(env: &TestEnv) -> Duration {
    let started = Instant::now();
    while !strays(env).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "old directories never removed: {:?}",
            strays(env)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    started.elapsed()
}

struct Boots {
    files: Vec<PathBuf>,
}

impl Boots {
    /// Boot IDs 0..n, each a file to mount over the kernel's.
    fn new(env: &TestEnv, n: u8) -> Boots {
        Boots {
            files: (0..n).map(|i| boot_id_file(env.tmp.path(), i)).collect(),
        }
    }

    fn id(&self, n: usize) -> String {
        std::fs::read_to_string(&self.files[n]).unwrap().trim().to_string()
    }
}

/// Writes `n` reservations straight into the store (as a busy earlier boot left them),
/// then lets one cnibox call of boot `boot` see them, so they count as that boot's.
fn fill(env: &TestEnv, boots: &Boots, boot: usize, n: usize, conf: &Value) -> BTreeSet<String> {
    let dir = env.data_dir.join(NET);
    std::fs::create_dir_all(&dir).unwrap();
    let mut made = BTreeSet::new();
    for i in 0..n {
        let ip = format!("10.1.{}.{}", 1 + i / 250, 1 + i % 250);
        std::fs::write(dir.join(&ip), format!("old{i}\r\neth0")).unwrap();
        made.insert(ip);
    }
    env.call("host-local")
        .in_boot(&boots.files[boot])
        .exec("DEL", "nobody", "", "eth0", conf)
        .success();
    made
}

fn big_range() -> Value {
    json!({"subnet": "10.1.0.0/16"})
}

#[test]
fn the_first_add_after_a_reboot_releases_the_earlier_boots_reservations() {
    for version in ALL_VERSIONS {
        let env = TestEnv::new();
        let boots = Boots::new(&env, 2);
        let c = env.container();
        let conf = conf(&env, version, NET, json!({"subnet": "10.1.2.0/24"}));
        let hl = |boot: usize| env.call("host-local").in_boot(&boots.files[boot]);
        for id in ["c1", "c2"] {
            hl(0).exec("ADD", id, c.path_str(), "eth0", &conf).success();
        }
        assert_eq!(names(reservations(&env, NET)), ["10.1.2.2", "10.1.2.3"]);
        // the same container ID again after the reboot: no "duplicate allocation"
        hl(1).exec("ADD", "c1", c.path_str(), "eth0", &conf).success();
        let left = reservations(&env, NET);
        assert_eq!(left.len(), 1, "{version}: {left:?}");
        // round robin goes on from the last address, as after the reference's DELs
        assert_eq!(left["10.1.2.4"], "c1\r\neth0", "{version}");
        old_dirs_removed(&env);
        let record = std::fs::read_to_string(env.data_dir.join(NET).join(INDEX).join("boot")).unwrap();
        assert!(record.starts_with('#'), "never read as a reservation: {record}");
        assert!(record.contains(&boots.id(1)), "{record}");
    }
}

/// DEL, CHECK, GC and STATUS are first calls too: each releases before it answers.
#[test]
fn every_verb_settles_the_store_before_it_answers() {
    let run = |verb: &str| {
        let env = TestEnv::new();
        let boots = Boots::new(&env, 2);
        let c = env.container();
        let conf = conf(
            &env,
            "1.1.0",
            NET,
            json!({"subnet": "10.1.2.0/29", "rangeStart": "10.1.2.5", "rangeEnd": "10.1.2.6"}),
        );
        let hl = |boot: usize| env.call("host-local").in_boot(&boots.files[boot]);
        for id in ["a", "b"] {
            hl(0).exec("ADD", id, c.path_str(), "eth0", &conf).success();
        }
        let msg = hl(0).command("STATUS").config(&conf).run().failure(50);
        assert_eq!(
            msg,
            "host-local: no IP addresses available in range set: 10.1.2.5-10.1.2.6"
        );
        match verb {
            "STATUS" => {
                // the full range is free again
                hl(1).command("STATUS").config(&conf).run().success();
            }
            "CHECK" => {
                let msg = hl(1).exec("CHECK", "a", c.path_str(), "eth0", &conf).failure(999);
                assert_eq!(msg, "host-local: Failed to find address added by container a");
            }
            "GC" => {
                // listed as valid, but made in an earlier boot: its namespace is gone
                let mut gc = conf.clone();
                gc["cni.dev/valid-attachments"] = json!([{"containerID": "a", "ifname": "eth0"}]);
                hl(1).command("GC").config(&gc).run().success();
            }
            "DEL" => {
                hl(1).exec("DEL", "nobody", "", "eth0", &conf).success();
            }
            _ => unreachable!(),
        }
        assert_eq!(names(reservations(&env, NET)), Vec::<String>::new(), "{verb}");
        old_dirs_removed(&env);
    };
    for verb in ["STATUS", "CHECK", "GC", "DEL"] {
        run(verb);
    }
}

#[test]
fn releasing_after_a_reboot_can_be_turned_off_per_network() {
    let env = TestEnv::new();
    let boots = Boots::new(&env, 3);
    let c = env.container();
    let mut keep = conf(&env, "1.0.0", NET, json!({"subnet": "10.1.2.0/24"}));
    keep["ipam"]["releaseAfterReboot"] = json!(false);
    let hl = |boot: usize| env.call("host-local").in_boot(&boots.files[boot]);
    hl(0).exec("ADD", "c1", c.path_str(), "eth0", &keep).success();
    // restored with its old address after the reboot: still reserved, as the reference keeps it
    hl(1).exec("CHECK", "c1", c.path_str(), "eth0", &keep).success();
    hl(1).exec("ADD", "c2", c.path_str(), "eth0", &keep).success();
    assert_eq!(names(reservations(&env, NET)), ["10.1.2.2", "10.1.2.3"]);
    // turned on again within that boot: what is there counts as this boot's
    let mut release = keep.clone();
    release["ipam"].as_object_mut().unwrap().remove("releaseAfterReboot");
    hl(1).exec("ADD", "c3", c.path_str(), "eth0", &release).success();
    assert_eq!(names(reservations(&env, NET)), ["10.1.2.2", "10.1.2.3", "10.1.2.4"]);
    hl(2).exec("DEL", "nobody", "", "eth0", &release).success();
    assert_eq!(names(reservations(&env, NET)), Vec::<String>::new());
    old_dirs_removed(&env);
    // the key's type is checked like every other key's
    let mut bad = keep.clone();
    bad["ipam"]["releaseAfterReboot"] = json!("no");
    let msg = hl(2).exec("ADD", "c4", c.path_str(), "eth0", &bad).failure(999);
    assert_eq!(
        msg,
        "json: cannot unmarshal string into Go struct field IPAMConfig.ipam.releaseAfterReboot of type bool"
    );
}

/// 60,000 reservations of an earlier boot go in the first ADD after the reboot (the time is
/// printed for the record; speed targets live in `make bench`).
#[test]
fn sixty_thousand_stale_reservations_are_released_in_one_call() {
    let env = TestEnv::new();
    let boots = Boots::new(&env, 2);
    let c = env.container();
    let conf = conf(&env, "1.0.0", NET, big_range());
    let old = fill(&env, &boots, 0, 60_000, &conf);
    assert_eq!(reservations(&env, NET).len(), 60_000);
    let started = Instant::now();
    let v = env
        .call("host-local")
        .in_boot(&boots.files[1])
        .exec("ADD", "new", c.path_str(), "eth0", &conf)
        .success();
    let took = started.elapsed();
    let removal = old_dirs_removed(&env);
    eprintln!(
        "released {} stale reservations in one ADD: {took:?} (their old directory removed {removal:?} later)",
        old.len()
    );
    let left = reservations(&env, NET);
    assert_eq!(left.len(), 1, "{:?}", left.keys().take(5).collect::<Vec<_>>());
    let addr = v["ips"][0]["address"].as_str().unwrap();
    assert_eq!(left[addr.split('/').next().unwrap()], "new\r\neth0");
}

/// Which of the earlier boot's reservations the store holds after a killed release.
#[derive(Debug, PartialEq)]
enum Left {
    All,
    None,
}

fn left_of(env: &TestEnv, old: &BTreeSet<String>) -> Left {
    let now: BTreeSet<String> = reservations(env, NET).into_keys().collect();
    let kept = now.intersection(old).count();
    match kept {
        k if k == old.len() => Left::All,
        0 => Left::None,
        k => panic!("a half state: {k} of {} old reservations left", old.len()),
    }
}

/// When to kill the release.
#[derive(Clone, Copy, Debug)]
enum KillAt {
    /// As soon as the new directory appears beside the store (it is being built).
    Building,
    /// As soon as the store's directory is another one (the old one is being removed).
    Removing,
    /// After this long.
    After(Duration),
}

/// SIGKILL at any point of a release leaves all of the earlier boot's reservations or none,
/// and the next call (any verb) finishes the job.
#[test]
fn a_release_killed_at_any_point_leaves_all_or_none_and_the_next_call_finishes_it() {
    let probe = TestEnv::new();
    let boots = Boots::new(&probe, 2);
    let conf_of = |env: &TestEnv| conf(env, "1.0.0", NET, big_range());
    // how long an unkilled release of this size takes, to spread the timed kills over it
    fill(&probe, &boots, 0, 10_000, &conf_of(&probe));
    let started = Instant::now();
    probe
        .call("host-local")
        .in_boot(&boots.files[1])
        .exec("DEL", "nobody", "", "eth0", &conf_of(&probe))
        .success();
    let full = started.elapsed();
    old_dirs_removed(&probe);
    let mut plan = vec![KillAt::Building, KillAt::Removing, KillAt::Building, KillAt::Removing];
    plan.extend((0..6).map(|k| KillAt::After(full * k / 6)));
    let mut outcomes = vec![];
    for at in plan {
        let env = TestEnv::new();
        let boots = Boots::new(&env, 2);
        let conf = conf_of(&env);
        let old = fill(&env, &boots, 0, 10_000, &conf);
        // a foreign change after the last call: the index must be checked file by file
        std::fs::write(env.data_dir.join(NET).join("10.1.200.1"), "ref\r\neth0").unwrap();
        let dir = env.data_dir.join(NET);
        let ino = std::fs::metadata(&dir).unwrap().ino();
        let staging = env.data_dir.join(format!(".cnibox-reboot-{}-{NET}", boots.id(1)));
        let mut cmd = std::process::Command::new(env.bin_dir.join("host-local"));
        cmd.env_clear()
            .envs([
                ("CNI_COMMAND", "DEL"),
                ("CNI_CONTAINERID", "nobody"),
                ("CNI_IFNAME", "eth0"),
                ("CNI_PATH", env.bin_dir.to_str().unwrap()),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        common::with_private_mounts(
            &mut cmd,
            Some(std::fs::File::open(&env.host.path).unwrap()),
            vec![PrivateMount::boot_id(&boots.files[1])],
        );
        let mut child = cmd.spawn().unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(&serde_json::to_vec(&conf).unwrap()).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let reached = || match at {
            KillAt::Building => staging.exists(),
            KillAt::Removing => std::fs::metadata(&dir).map(|m| m.ino() != ino).unwrap_or(false),
            KillAt::After(d) => {
                std::thread::sleep(d);
                true
            }
        };
        while !reached() {
            if Instant::now() > deadline || matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        let left = left_of(&env, &old);
        assert!(
            reservations(&env, NET).contains_key("10.1.200.1"),
            "{at:?}: a reservation of unknown boot is never released"
        );
        // the next call, of any verb, finishes the job
        let c = env.container();
        env.call("host-local")
            .in_boot(&boots.files[1])
            .exec("CHECK", "ref", c.path_str(), "eth0", &conf)
            .success();
        assert_eq!(left_of(&env, &old), Left::None, "{at:?}");
        old_dirs_removed(&env);
        outcomes.push((at, left));
    }
    eprintln!("killed releases (a release of 10,000 takes {full:?}): {outcomes:?}");
    assert!(
        outcomes.iter().any(|(_, l)| *l == Left::All) && outcomes.iter().any(|(_, l)| *l == Left::None),
        "kills landed both before and after the exchange: {outcomes:?}"
    );
}

/// The reference (Debian's v1.1.1) shares the store before and after the reboot: it keeps
/// reading and writing the directory cnibox exchanged, and what it reserved after the
/// reboot (or after cnibox's last call, when no one can tell which boot it was) stays.
#[test]
fn the_reference_writes_into_the_same_store_before_and_after_the_reboot() {
    let Some(_) = common::reference_dir() else { return };
    let env = TestEnv::new();
    let boots = Boots::new(&env, 2);
    let c = env.container();
    let conf = conf(&env, "1.0.0", NET, json!({"subnet": "10.1.2.0/24"}));
    let ours = |boot: usize| env.call("host-local").in_boot(&boots.files[boot]);
    let theirs = || env.reference("host-local").unwrap();
    // the address an ADD of `id` got
    let add = |call: common::Call, id: &str| {
        let v = call.exec("ADD", id, c.path_str(), "eth0", &conf).success();
        v["ips"][0]["address"].as_str().unwrap().to_string()
    };

    // boot 0
    assert_eq!(add(theirs(), "r1"), "10.1.2.2/24");
    assert_eq!(add(ours(0), "c1"), "10.1.2.3/24");
    // after cnibox's last call of this boot: nothing tells this one from an after-reboot one
    assert_eq!(add(theirs(), "r2"), "10.1.2.4/24");

    // boot 1: the reference runs first
    assert_eq!(add(theirs(), "r3"), "10.1.2.5/24");
    assert_eq!(add(ours(1), "c2"), "10.1.2.6/24");
    let left = reservations(&env, NET);
    assert_eq!(
        left.into_iter().collect::<Vec<_>>(),
        [
            ("10.1.2.4".to_string(), "r2\r\neth0".to_string()),
            ("10.1.2.5".into(), "r3\r\neth0".into()),
            ("10.1.2.6".into(), "c2\r\neth0".into()),
        ]
    );
    // the reference goes on in the exchanged directory: round robin, duplicate check, DEL
    assert_eq!(add(theirs(), "r4"), "10.1.2.7/24");
    let msg = theirs().exec("ADD", "c2", c.path_str(), "eth0", &conf).failure(999);
    assert!(msg.contains("duplicate allocation is not allowed"), "{msg}");
    theirs().exec("CHECK", "c2", c.path_str(), "eth0", &conf).success();
    theirs().exec("DEL", "c2", c.path_str(), "eth0", &conf).success();
    ours(1).exec("DEL", "r3", c.path_str(), "eth0", &conf).success();
    ours(1).exec("CHECK", "r4", c.path_str(), "eth0", &conf).success();
    assert_eq!(names(reservations(&env, NET)), ["10.1.2.4", "10.1.2.7"]);
    // the bookkeeping files are as the reference would leave them
    let files: Vec<String> = env.store(NET).into_keys().filter(|n| n != INDEX).collect();
    assert_eq!(files, ["10.1.2.4", "10.1.2.7", "last_reserved_ip.0", "lock"]);
    assert_eq!(env.store(NET)["last_reserved_ip.0"], "10.1.2.7");
    old_dirs_removed(&env);
}

#[test]
fn two_networks_sharing_a_data_dir_are_each_released_at_their_own_first_call() {
    let env = TestEnv::new();
    let boots = Boots::new(&env, 2);
    let c = env.container();
    let one = conf(&env, "1.0.0", NET, json!({"subnet": "10.1.2.0/24"}));
    let two = conf(&env, "1.0.0", "hlnet2", json!({"subnet": "10.1.2.0/24"}));
    let hl = |boot: usize| env.call("host-local").in_boot(&boots.files[boot]);
    for conf in [&one, &two] {
        hl(0).exec("ADD", "c1", c.path_str(), "eth0", conf).success();
    }
    let before = (
        env.store("hlnet2"),
        read_dir_map(&env.data_dir.join("hlnet2").join(INDEX)),
    );
    hl(1).exec("ADD", "c2", c.path_str(), "eth0", &one).success();
    assert_eq!(names(reservations(&env, NET)), ["10.1.2.3"]);
    let after = (
        env.store("hlnet2"),
        read_dir_map(&env.data_dir.join("hlnet2").join(INDEX)),
    );
    assert_eq!(before, after, "the other network is untouched");
    hl(1).exec("ADD", "c2", c.path_str(), "eth0", &two).success();
    assert_eq!(names(reservations(&env, "hlnet2")), ["10.1.2.3"]);
    old_dirs_removed(&env);
    let dirs: Vec<String> = std::fs::read_dir(&env.data_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(dirs, [NET, "hlnet2"]);
}
