//! Security properties, through the real binary and cnitool:
//! * network names, container IDs, interface names and cache keys never make a path leave
//!   the data dir or the cache dir (`..`, `/`, NUL, long names);
//! * store and cache files are created 0600, and symlinks planted in the data dir or the
//!   cache dir (named like the next IP, `last_reserved_ip.0`, `lock`, the cache file, the
//!   lock files) are never followed: the outside target stays untouched;
//! * a plugin refuses to configure its own network namespace (code 8) before acting;
//! * DEL leaves alone links this attachment did not create.
use crate::common;
use crate::plugin_state::{rules_dumped, IP6TABLES_SAVE, IPTABLES_SAVE, NFT_RULESET};

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

/// Every path below `root` with its kind, mode and content: a fingerprint of a tree.
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    fn walk(p: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let Ok(rd) = std::fs::read_dir(p) else { return };
        for e in rd.flatten() {
            let path = e.path();
            let m = std::fs::symlink_metadata(&path).unwrap();
            let desc = if m.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if m.is_dir() {
                walk(&path, out);
                format!("dir {:o}", m.permissions().mode() & 0o7777)
            } else {
                let content = std::fs::read(&path).unwrap_or_default();
                format!(
                    "file {:o} {:?}",
                    m.permissions().mode() & 0o7777,
                    String::from_utf8_lossy(&content)
                )
            };
            out.insert(path, desc);
        }
    }
    walk(root, &mut out);
    out
}

/// Paths that appeared or changed between two snapshots.
fn changed(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = after
        .iter()
        .filter(|(p, d)| before.get(*p) != Some(d))
        .map(|(p, _)| p.clone())
        .collect();
    v.extend(before.keys().filter(|p| !after.contains_key(*p)).cloned());
    v
}

fn hl_conf(env: &TestEnv, name: &str) -> Value {
    json!({"cniVersion": "1.0.0", "name": name,
           "ipam": {"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": env.data_dir}})
}

/// An "outside" directory next to the data and cache dirs, with a file that must never change.
fn outside(env: &TestEnv) -> PathBuf {
    let o = env.tmp.path().join("outside");
    std::fs::create_dir_all(&o).unwrap();
    std::fs::write(o.join("target"), "keep").unwrap();
    o
}

#[test]
fn names_cannot_leave_the_data_dir() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.data_dir).unwrap();
    let before = tree(env.tmp.path());
    let long = "a".repeat(300);
    // (network name, container id, ifname, expected code)
    let cases: Vec<(&str, &str, &str, u64)> = vec![
        ("..", "c1", "eth0", 7),
        (".", "c1", "eth0", 7),
        ("../outside", "c1", "eth0", 7),
        ("a/b", "c1", "eth0", 7),
        ("/abs", "c1", "eth0", 7),
        ("a\0b", "c1", "eth0", 7),
        ("-x", "c1", "eth0", 7),
        (&long, "c1", "eth0", 999),
        ("cnet", "..", "eth0", 4),
        ("cnet", "../outside", "eth0", 4),
        ("cnet", "a/b", "eth0", 4),
        ("cnet", ".hidden", "eth0", 4),
        ("cnet", "c1", "..", 4),
        ("cnet", "c1", "../x", 4),
        ("cnet", "c1", "a/b", 4),
        ("cnet", "c1", "0123456789abcdef", 4),
    ];
    let ns = env.container();
    for (net, id, ifname, code) in &cases {
        for verb in ["ADD", "DEL"] {
            let out = env
                .call("host-local")
                .exec(verb, id, ns.path_str(), ifname, &hl_conf(&env, net));
            out.failure(*code);
        }
    }
    // a long container ID of valid characters is fine: it is file content, never a name
    let long_id = "b".repeat(5000);
    let out = env
        .call("host-local")
        .exec("ADD", &long_id, ns.path_str(), "eth0", &hl_conf(&env, "cnet"));
    out.success();
    env.call("host-local")
        .exec("DEL", &long_id, ns.path_str(), "eth0", &hl_conf(&env, "cnet"))
        .success();
    let after = tree(env.tmp.path());
    for p in changed(&before, &after) {
        assert!(
            p.starts_with(env.data_dir.join("cnet")),
            "{} was touched; only {}/cnet may be",
            p.display(),
            env.data_dir.display()
        );
    }
    let left: Vec<String> = env
        .store("cnet")
        .into_keys()
        .filter(|k| k.parse::<std::net::IpAddr>().is_ok())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

struct Tool<'a> {
    env: &'a TestEnv,
    conf_dir: PathBuf,
}

impl<'a> Tool<'a> {
    fn new(env: &'a TestEnv, lists: &[Value]) -> Tool<'a> {
        let conf_dir = env.tmp.path().join("net.d");
        std::fs::create_dir_all(&conf_dir).unwrap();
        for (i, l) in lists.iter().enumerate() {
            std::fs::write(conf_dir.join(format!("{i}.conflist")), l.to_string()).unwrap();
        }
        Tool { env, conf_dir }
    }

    fn run(&self, args: &[&str], ifname: &str) -> CallOutput {
        self.env
            .tool("cnitool")
            .args(args)
            .env("NETCONFPATH", self.conf_dir.to_str().unwrap())
            .env("CNI_PATH", self.env.bin_dir.to_str().unwrap())
            .env("CNI_CACHE_DIR", self.env.cache_dir.to_str().unwrap())
            .env("CNI_IFNAME", ifname)
            .run()
    }
}

fn hl_list(env: &TestEnv, name: &str) -> Value {
    json!({"cniVersion": "1.0.0", "name": name, "plugins": [
        {"type": "host-local", "ipam": {"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": env.data_dir}}]})
}

#[test]
fn names_cannot_leave_the_cache_dir_through_cnitool() {
    let env = TestEnv::new();
    let tool = Tool::new(&env, &[hl_list(&env, "cnet"), hl_list(&env, "../outside")]);
    let ns = env.container();
    let before = tree(env.tmp.path());
    let long = "c".repeat(300);
    let cases: Vec<(&str, &str, &str)> = vec![
        ("cnet", "../outside", "eth0"),
        ("cnet", "..", "eth0"),
        ("cnet", "a/b", "eth0"),
        ("cnet", &long, "eth0"),
        ("cnet", "c1", "../x"),
        ("cnet", "c1", ".."),
        ("cnet", "c1", "a/b"),
        ("cnet", "c1", ""),
        ("cnet", "c1", "0123456789abcdef"),
        ("../outside", "c1", "eth0"),
    ];
    for (net, id, ifname) in &cases {
        for verb in ["add", "check", "del"] {
            let out = tool.run(&[verb, net, ns.path_str(), "--container-id", id], ifname);
            assert!(!out.ok(), "{verb} {net:?} {id:?} {ifname:?} succeeded: {out:?}");
            assert!(!out.stderr.contains("panicked"), "{out:?}");
        }
    }
    // GC of a network with a traversal name
    let out = tool.run(&["gc", "../outside"], "eth0");
    assert!(!out.ok(), "{out:?}");
    let after = tree(env.tmp.path());
    let touched = changed(&before, &after);
    for p in &touched {
        assert!(
            p.starts_with(&env.cache_dir) || p.starts_with(env.data_dir.join("cnet")),
            "{} was touched",
            p.display()
        );
    }
    // nothing was reserved by the failed ADDs (the long ID fails on its lock, before ADD)
    let left: Vec<String> = env
        .store("cnet")
        .into_keys()
        .filter(|k| k.parse::<std::net::IpAddr>().is_ok())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!env.tmp.path().join("outside").exists());
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn store_files_are_private_and_planted_symlinks_are_not_followed() {
    let env = TestEnv::new();
    let out_dir = outside(&env);
    let ns = env.container();
    let net = env.data_dir.join("cnet");
    std::fs::create_dir_all(&net).unwrap();
    let call = |verb: &str, id: &str, net_name: &str| {
        env.call("host-local")
            .exec(verb, id, ns.path_str(), "eth0", &hl_conf(&env, net_name))
    };
    // the next IP and last_reserved_ip.0 are symlinks to outside files
    symlink(out_dir.join("target"), net.join("10.1.2.2")).unwrap();
    symlink(out_dir.join("lr"), net.join("last_reserved_ip.0")).unwrap();
    symlink(out_dir.join("tmpfile"), net.join(".cnibox-reserve.tmp")).unwrap();
    let msg = call("ADD", "c1", "cnet").failure(999);
    assert!(msg.contains("last_reserved_ip.0"), "{msg}");
    assert!(
        !out_dir.join("lr").exists(),
        "created through the last_reserved_ip.0 link"
    );
    assert!(!out_dir.join("tmpfile").exists(), "created through the temp file link");
    assert_eq!(std::fs::read_to_string(out_dir.join("target")).unwrap(), "keep");
    // the failed ADD left no reservation of its own
    assert!(!net.join("10.1.2.3").exists());
    // without the last_reserved_ip.0 link, ADD works and skips the IP that is a link
    std::fs::remove_file(net.join("last_reserved_ip.0")).unwrap();
    let r = call("ADD", "c1", "cnet").success();
    assert_eq!(r["ips"][0]["address"], json!("10.1.2.3/24"));
    assert_eq!(mode(&net.join("10.1.2.3")), 0o600);
    assert_eq!(mode(&net.join("last_reserved_ip.0")), 0o600);
    assert!(std::fs::symlink_metadata(net.join("last_reserved_ip.0"))
        .unwrap()
        .is_file());
    // every file of the store but the lock (the reference's 0750 file mutex) is private,
    // the owner index included
    for (path, desc) in tree(&net) {
        if path.file_name().unwrap() == "lock" || desc.starts_with("link") {
            continue;
        }
        let m = mode(&path);
        let want = if desc.starts_with("dir") { 0o700 } else { 0o600 };
        assert_eq!(m, want, "{} is {m:o}", path.display());
    }
    call("DEL", "c1", "cnet").success();
    assert!(!net.join("10.1.2.3").exists());
    assert!(
        std::fs::symlink_metadata(net.join("10.1.2.2"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the planted link is not ours to remove"
    );
    // GC with no valid attachment does not follow or delete through the link either
    let mut gc = hl_conf(&env, "cnet");
    gc["cniVersion"] = json!("1.1.0");
    gc["cni.dev/valid-attachments"] = json!([]);
    env.call("host-local").command("GC").config(&gc).run().success();
    assert_eq!(std::fs::read_to_string(out_dir.join("target")).unwrap(), "keep");

    // a lock that is a symlink: refused, the target is not created
    let net2 = env.data_dir.join("cnet2");
    std::fs::create_dir_all(&net2).unwrap();
    symlink(out_dir.join("lockfile"), net2.join("lock")).unwrap();
    call("ADD", "c1", "cnet2").failure(999);
    call("DEL", "c1", "cnet2").failure(999);
    assert!(!out_dir.join("lockfile").exists());

    // the index directory as a symlink to an outside directory: replaced, not written into
    let net3 = env.data_dir.join("cnet3");
    std::fs::create_dir_all(&net3).unwrap();
    std::fs::create_dir_all(out_dir.join("idx")).unwrap();
    symlink(out_dir.join("idx"), net3.join(".cnibox-index")).unwrap();
    call("ADD", "c1", "cnet3").success();
    call("DEL", "c1", "cnet3").success();
    assert_eq!(std::fs::read_dir(out_dir.join("idx")).unwrap().count(), 0);

    // the network directory itself as a symlink: refused, nothing created through it
    std::fs::create_dir_all(out_dir.join("netdir")).unwrap();
    symlink(out_dir.join("netdir"), env.data_dir.join("cnet4")).unwrap();
    call("ADD", "c1", "cnet4").failure(999);
    assert_eq!(std::fs::read_dir(out_dir.join("netdir")).unwrap().count(), 0);
    assert_eq!(tree(&out_dir).len(), 3, "outside: {:?}", tree(&out_dir));
}

#[test]
fn cache_files_are_private_and_planted_symlinks_are_not_followed() {
    let env = TestEnv::new();
    let out_dir = outside(&env);
    let tool = Tool::new(&env, &[hl_list(&env, "cnet")]);
    let ns = env.container();
    let run = |verb: &str, id: &str| tool.run(&[verb, "cnet", ns.path_str(), "--container-id", id], "eth0");
    let results = env.cache_dir.join("results");
    let locks = env.cache_dir.join("locks");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::create_dir_all(locks.join("networks")).unwrap();

    // the cache file is a symlink to an outside file: DEL does not read it as the cache
    // (it would hand the outside content to plugins) and removes only the link
    std::fs::write(
        out_dir.join("cached"),
        r#"{"kind":"cniCacheV1","containerId":"c1","ifName":"eth0","networkName":"cnet"}"#,
    )
    .unwrap();
    symlink(out_dir.join("cached"), results.join("cnet-c1-eth0")).unwrap();
    let del = run("del", "c1");
    assert!(del.ok(), "{del:?}");
    assert!(
        std::fs::symlink_metadata(results.join("cnet-c1-eth0")).is_err(),
        "the link is removed"
    );
    assert!(out_dir.join("cached").exists());
    // ADD over a planted cache-file link replaces the link with a private regular file
    symlink(out_dir.join("target"), results.join("cnet-c1-eth0")).unwrap();
    let add = run("add", "c1");
    assert!(add.ok(), "{add:?}");
    let m = std::fs::symlink_metadata(results.join("cnet-c1-eth0")).unwrap();
    assert!(m.is_file(), "the cache file is a regular file");
    assert_eq!(m.permissions().mode() & 0o7777, 0o600);
    assert!(run("del", "c1").ok());
    for f in std::fs::read_dir(&locks).unwrap().flatten() {
        if f.path().is_file() {
            assert_eq!(mode(&f.path()), 0o600, "{}", f.path().display());
        }
    }

    // lock files that are symlinks to outside paths: refused, nothing created outside
    symlink(out_dir.join("lock-a"), locks.join("cnet-c2-eth0")).unwrap();
    let add = run("add", "c2");
    assert!(!add.ok(), "{add:?}");
    assert!(!out_dir.join("lock-a").exists(), "lock created through a planted link");
    std::fs::remove_file(locks.join("cnet-c2-eth0")).unwrap();
    std::fs::remove_file(locks.join("networks/cnet")).unwrap();
    symlink(out_dir.join("lock-n"), locks.join("networks/cnet")).unwrap();
    let add = run("add", "c2");
    assert!(!add.ok(), "{add:?}");
    assert!(
        !out_dir.join("lock-n").exists(),
        "network lock created through a planted link"
    );
    std::fs::remove_file(locks.join("networks/cnet")).unwrap();

    // the results directory as a symlink to an outside directory: not written into
    std::fs::remove_dir_all(&results).unwrap();
    std::fs::create_dir_all(out_dir.join("res")).unwrap();
    std::fs::write(out_dir.join("res/cnet-c3-eth0"), "keep").unwrap();
    symlink(out_dir.join("res"), &results).unwrap();
    let add = run("add", "c3");
    assert!(!add.ok(), "{add:?}");
    let del = run("del", "c3");
    assert!(!del.ok(), "{del:?}");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("res/cnet-c3-eth0")).unwrap(),
        "keep"
    );
    assert_eq!(std::fs::read_dir(out_dir.join("res")).unwrap().count(), 1);
    assert_eq!(std::fs::read_to_string(out_dir.join("target")).unwrap(), "keep");
    // and nothing stays reserved by the refused ADDs
    let left: Vec<String> = env
        .store("cnet")
        .into_keys()
        .filter(|k| k.parse::<std::net::IpAddr>().is_ok())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

fn applets() -> Vec<String> {
    run_ok(std::process::Command::new(cnibox()).arg("--list"))
        .lines()
        .map(String::from)
        .collect()
}

/// A config for each plugin applet (the macvlan master is created by the caller).
fn plugin_conf(env: &TestEnv, applet: &str, version: &str) -> Value {
    let ipam = json!({"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": env.data_dir});
    match applet {
        "host-local" => json!({"cniVersion": version, "name": "secnet", "ipam": ipam}),
        "bridge" => json!({"cniVersion": version, "name": "secnet", "type": "bridge", "bridge": "sbr0",
                           "isGateway": true, "ipMasq": true, "ipam": ipam}),
        "macvlan" => {
            json!({"cniVersion": version, "name": "secnet", "type": "macvlan", "master": "smv0", "ipam": ipam})
        }
        other => json!({"cniVersion": version, "name": "secnet", "type": other, "ipMasq": true, "ipam": ipam}),
    }
}

const PLUGINS: &[&str] = &["host-local", "bridge", "veth", "ptp", "macvlan"];

/// Links, addresses, routes and firewall rules of a namespace.
fn net_state(ns: &Netns) -> String {
    let mut s = ns.ip(&["-d", "link", "show"]);
    s += &ns.ip(&["addr", "show"]);
    s += &ns.ip(&["route", "show", "table", "all"]);
    s + &rules_dumped(ns, &[NFT_RULESET, IPTABLES_SAVE, IP6TABLES_SAVE])
}

#[test]
fn own_network_namespace_is_refused_before_acting() {
    let env = TestEnv::new();
    env.host
        .ip(&["link", "add", "smv0", "type", "veth", "peer", "name", "smv0p"]);
    let present = applets();
    let mut ran = vec![];
    for applet in PLUGINS.iter().filter(|a| present.iter().any(|p| p == *a)) {
        for version in ALL_VERSIONS {
            let before = (net_state(&env.host), tree(env.tmp.path()));
            let verbs: &[&str] = if *version >= "0.4.0" {
                &["ADD", "CHECK", "DEL"]
            } else {
                &["ADD", "DEL"]
            };
            for verb in verbs {
                let out = env.call(applet).exec(
                    verb,
                    "c1",
                    env.host.path_str(),
                    "eth0",
                    &plugin_conf(&env, applet, version),
                );
                let msg = out.failure(8);
                assert_eq!(
                    msg, "plugin's netns and netns from CNI_NETNS should not be the same",
                    "{applet}"
                );
            }
            let after = (net_state(&env.host), tree(env.tmp.path()));
            assert_eq!(before.0, after.0, "{applet} {version} changed the host namespace");
            assert_eq!(before.1, after.1, "{applet} {version} changed files");
        }
        ran.push(*applet);
    }
    eprintln!("own-netns refusal checked for {ran:?}");
    assert!(ran.contains(&"host-local"));
}

#[test]
fn del_leaves_alone_links_this_attachment_did_not_create() {
    let env = TestEnv::new();
    env.host
        .ip(&["link", "add", "smv0", "type", "veth", "peer", "name", "smv0p"]);
    env.host.ip(&["link", "set", "smv0", "up"]);
    let present = applets();
    let mut ran = vec![];
    for applet in ["bridge", "veth", "ptp", "macvlan"] {
        if !present.iter().any(|p| p == applet) {
            eprintln!("SKIP {applet}: not in this build");
            continue;
        }
        for version in ALL_VERSIONS {
            let conf = plugin_conf(&env, applet, version);
            // 1. a link named eth0 of another kind (a bridge device) in the container
            let ns = env.container();
            ns.ip(&["link", "add", "eth0", "type", "bridge"]);
            let out = env.call(applet).exec("DEL", "stranger", ns.path_str(), "eth0", &conf);
            out.success();
            assert!(ns.has_link("eth0"), "{applet} {version}: DEL removed a foreign eth0");
            // 2. our attachment in ns1; an eth0 of the same name in ns2 survives our DEL
            let ns1 = env.container();
            let ns2 = env.container();
            ns2.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "other0"]);
            env.call(applet)
                .exec("ADD", "c1", ns1.path_str(), "eth0", &conf)
                .success();
            let mut del_conf = conf.clone();
            let _ = &mut del_conf;
            env.call(applet)
                .exec("DEL", "c1", ns1.path_str(), "eth0", &del_conf)
                .success();
            assert!(!ns1.has_link("eth0"), "{applet} {version}: our eth0 is gone");
            assert!(
                ns2.has_link("eth0") && ns2.has_link("other0"),
                "{applet} {version}: the other netns is untouched"
            );
        }
        ran.push(applet);
    }
    eprintln!("foreign-link DEL checked for {ran:?}");
}
