//! The iptables backend on an iptables-nft host (this machine's `iptables` is iptables-nft
//! 1.8.9): cnibox writes the reference's layout over nf_tables netlink, encoded as
//! iptables-nft encodes it. Compared with cnibox's process path (iptables-save/-restore,
//! still used on iptables-legacy hosts), which is forced here with wrapper scripts named
//! like the plain tools: cnibox cannot tell them for iptables-nft, so it runs them, and
//! they run iptables-nft's. The reference's interplay with the netlink rules is in
//! `behaviour::cnibox_and_the_reference_check_and_delete_each_others_rules` and
//! `behaviour::differential_against_the_reference`.
use super::behaviour::{confined, fw, fw_conf, prev, state, REFERENCE_V4};
use crate::common;

use common::{CallOutput, TestEnv};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;

/// A PATH whose iptables-save/-restore of both families are shell wrappers around
/// iptables-nft's; each run is logged in [`wrapper_runs`].
fn process_path(env: &TestEnv) -> String {
    let dir = env.tmp.path().join("process-path");
    std::fs::create_dir_all(&dir).unwrap();
    for v in ["iptables", "ip6tables"] {
        for tool in ["save", "restore"] {
            let f = dir.join(format!("{v}-{tool}"));
            let log = dir.join("runs");
            let script = format!(
                "#!/bin/sh\necho {v}-{tool} >> {}\nexec /usr/sbin/{v}-nft-{tool} \"$@\"\n",
                log.display()
            );
            std::fs::write(&f, script).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", dir.display())
}

/// The wrapper runs of [`process_path`] so far.
fn wrapper_runs(env: &TestEnv) -> Vec<String> {
    let log = env.tmp.path().join("process-path/runs");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn fw_with_path(env: &TestEnv, path: &str, verb: &str, id: &str, conf: &Value) -> CallOutput {
    env.call("firewall")
        .env("PATH", path)
        .exec(verb, id, "/run/netns/gone", "eth0", &confined(env, conf))
}

/// `nft -j list table` of both families' filter tables (counters are zero: no traffic).
fn nft_filter(env: &TestEnv) -> (String, String) {
    let list = |family: &str| {
        let out = env
            .host
            .command("nft")
            .args(["-j", "list", "table", family, "filter"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    (list("ip"), list("ip6"))
}

/// `TOOL -w ARGS` in the test's host namespace, the arguments `|`-separated.
fn ipt(env: &TestEnv, tool: &str, args: &str) {
    let mut argv = vec![tool, "-w"];
    argv.extend(args.split('|'));
    env.host.exec(&argv);
}

/// Whether a rule of either family names an address of the container of [`prev`].
fn names_the_container(v4: &[String], v6: &[String]) -> bool {
    v4.iter()
        .chain(v6)
        .any(|l| l.contains("10.88.0.2") || l.contains("fd00::2"))
}

fn second() -> Value {
    let mut p = prev("1.0.0");
    p["ips"][0]["address"] = json!("10.88.0.3/24");
    p["ips"][1]["address"] = json!("fd00::3/64");
    p
}

#[test]
fn netlink_writes_what_iptables_restore_writes() {
    for extra in [
        json!({}),
        json!({"ingressPolicy": "same-bridge"}),
        json!({"ingressPolicy": "isolated"}),
        json!({"iptablesAdminChainName": "CNI-foobar"}),
    ] {
        let (nl, pr) = (TestEnv::new(), TestEnv::new());
        let path = process_path(&pr);
        let steps = [
            ("ADD", "a", fw_conf("1.0.0", extra.clone(), &prev("1.0.0"))),
            ("ADD", "b", fw_conf("1.0.0", extra.clone(), &second())),
            ("ADD", "a", fw_conf("1.0.0", extra.clone(), &prev("1.0.0"))),
            ("CHECK", "b", fw_conf("1.0.0", extra.clone(), &second())),
            ("DEL", "a", fw_conf("1.0.0", extra.clone(), &prev("1.0.0"))),
            ("DEL", "b", fw_conf("1.0.0", extra.clone(), &Value::Null)),
        ];
        for (verb, id, conf) in &steps {
            fw(&nl, verb, id, conf).success();
            fw_with_path(&pr, &path, verb, id, conf).success();
            assert_eq!(
                state(&nl.host),
                state(&pr.host),
                "{extra}: iptables-save after {verb} {id}"
            );
            // the same objects in the same order, down to the handles
            assert_eq!(nft_filter(&nl), nft_filter(&pr), "{extra}: nft -j after {verb} {id}");
        }
        assert!(
            state(&nl.host).0.iter().any(|l| l.contains("CNI-FORWARD")),
            "the shared chains stay"
        );
        // the other side did take the process path: ADD a saved and restored both families
        let runs = wrapper_runs(&pr);
        assert_eq!(
            runs[..4],
            [
                "iptables-save",
                "iptables-restore",
                "ip6tables-save",
                "ip6tables-restore"
            ],
            "{extra}"
        );
    }
}

#[test]
fn iptables_reads_checks_and_deletes_what_netlink_made() {
    let env = TestEnv::new();
    let conf = fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), &prev("1.0.0"));
    fw(&env, "ADD", "x", &conf).success();
    assert_eq!(state(&env.host).0[..6], REFERENCE_V4[..6]);
    // someone else's rule in CNI-FORWARD: cnibox's DEL leaves it
    ipt(&env, "iptables", "-A|CNI-FORWARD|-p|tcp|--dport|22|-j|ACCEPT");
    for (tool, host) in [("iptables", "10.88.0.2/32"), ("ip6tables", "fd00::2/128")] {
        ipt(&env, tool, &format!("-C|CNI-FORWARD|-s|{host}|-j|ACCEPT"));
        ipt(
            &env,
            tool,
            &format!("-D|CNI-FORWARD|-d|{host}|-m|conntrack|--ctstate|RELATED,ESTABLISHED|-j|ACCEPT"),
        );
    }
    // cnibox's CHECK sees what iptables deleted, its DEL the rest
    let msg = fw(&env, "CHECK", "x", &conf).failure(999);
    assert!(msg.starts_with("expected rule [-d "), "{msg}");
    fw(&env, "DEL", "x", &conf).success();
    let (v4, v6) = state(&env.host);
    assert!(!names_the_container(&v4, &v6));
    assert!(
        v4.contains(&"-A CNI-FORWARD -p tcp -m tcp --dport 22 -j ACCEPT".to_string()),
        "{v4:?}"
    );
    // the shared layout goes with iptables' own -D, -F and -X
    fw(&env, "ADD", "x", &conf).success();
    for tool in ["iptables", "ip6tables"] {
        ipt(
            &env,
            tool,
            "-D|FORWARD|-m|comment|--comment|CNI firewall plugin rules|-j|CNI-FORWARD",
        );
        ipt(
            &env,
            tool,
            "-D|FORWARD|-m|comment|--comment|CNI firewall plugin rules (ingressPolicy: same-bridge)|-j|CNI-ISOLATION-STAGE-1",
        );
        for chain in [
            "CNI-FORWARD",
            "CNI-ADMIN",
            "CNI-ISOLATION-STAGE-1",
            "CNI-ISOLATION-STAGE-2",
        ] {
            ipt(&env, tool, &format!("-F|{chain}"));
            ipt(&env, tool, &format!("-X|{chain}"));
        }
    }
    let (v4, v6) = state(&env.host);
    assert!(!v4.iter().chain(&v6).any(|l| l.contains("CNI")), "{v4:?} {v6:?}");
    // and a DEL after that finds nothing to do
    fw(&env, "DEL", "x", &conf).success();
}

#[test]
fn netlink_checks_and_deletes_what_iptables_restore_and_iptables_made() {
    let env = TestEnv::new();
    let path = process_path(&env);
    let conf = fw_conf("1.0.0", json!({"ingressPolicy": "same-bridge"}), &prev("1.0.0"));
    fw_with_path(&env, &path, "ADD", "x", &conf).success();
    assert!(wrapper_runs(&env).contains(&"iptables-restore".to_string()));
    let made = state(&env.host);
    // nothing is missing, nothing is duplicated
    fw(&env, "CHECK", "x", &conf).success();
    fw(&env, "ADD", "x", &conf).success();
    assert_eq!(state(&env.host), made);
    fw(&env, "DEL", "x", &conf).success();
    let (v4, v6) = state(&env.host);
    assert!(!names_the_container(&v4, &v6));
    // rules typed in by hand with iptables are found too
    let host = "10.88.0.9/32";
    ipt(
        &env,
        "iptables",
        &format!("-A|CNI-FORWARD|-d|{host}|-m|conntrack|--ctstate|RELATED,ESTABLISHED|-j|ACCEPT"),
    );
    ipt(&env, "iptables", &format!("-A|CNI-FORWARD|-s|{host}|-j|ACCEPT"));
    let mut hand = prev("1.0.0");
    hand["ips"] = json!([{"address": "10.88.0.9/24", "interface": 2}]);
    let hand = fw_conf("1.0.0", json!({}), &hand);
    fw(&env, "CHECK", "h", &hand).success();
    fw(&env, "DEL", "h", &hand).success();
    assert!(!state(&env.host).0.iter().any(|l| l.contains("10.88.0.9")));
}

/// The processes a call started (strace -f of execve and every way to make a process),
/// other than the plugin's own execve.
fn started(env: &TestEnv, verb: &str, conf: &Value) -> Vec<String> {
    let log = env.tmp.path().join(format!("trace-{verb}"));
    let out = env
        .call("firewall")
        .verb(verb, "np", "/run/netns/gone", "eth0")
        .config(&confined(env, conf))
        .run_under(&[
            "strace",
            "-f",
            "-qq",
            "-e",
            "trace=execve,clone,clone3,fork,vfork",
            "-o",
            log.to_str().unwrap(),
        ]);
    assert!(out.ok(), "{verb}: {out:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(
        lines[0].contains("execve(") && lines[0].contains("firewall"),
        "{lines:?}"
    );
    lines[1..].iter().filter(|l| !l.starts_with("+++")).cloned().collect()
}

#[test]
fn no_process_on_an_iptables_nft_host() {
    if std::process::Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is missing: run sh tests/deps.sh");
    }
    let env = TestEnv::new();
    for extra in [json!({}), json!({"ingressPolicy": "same-bridge"})] {
        let conf = fw_conf("1.0.0", extra.clone(), &prev("1.0.0"));
        for verb in ["DEL", "ADD", "ADD", "CHECK", "DEL", "DEL"] {
            assert_eq!(started(&env, verb, &conf), Vec::<String>::new(), "{extra} {verb}");
        }
        assert!(state(&env.host).0.iter().any(|l| l.contains("CNI-FORWARD")));
    }
}

/// With no iptables installed (a minimal image) the rules still go in, as iptables-nft
/// would write them: an iptables installed later lists and deletes them.
#[test]
fn without_iptables_installed_the_rules_are_iptables_nfts() {
    let env = TestEnv::new();
    let conf = fw_conf("1.0.0", json!({}), &prev("1.0.0"));
    let call = |verb: &str| {
        env.call("firewall")
            .without_sbin_tools()
            .exec(verb, "bare", "/run/netns/gone", "eth0", &confined(&env, &conf))
    };
    call("ADD").success();
    assert_eq!(state(&env.host).0, REFERENCE_V4);
    call("CHECK").success();
    call("DEL").success();
    assert!(!state(&env.host).0.iter().any(|l| l.contains("10.88.0.2")));
}

/// ADDs and DELs while another writer (dockerd's iptables, say) commits all the time: each
/// of cnibox's changes is planned on a read and refused by the kernel if anything was
/// committed since, then planned again, so none fails and none applies a stale plan.
#[test]
fn changes_planned_on_a_stale_read_are_planned_again() {
    let env = TestEnv::new();
    env.host.exec(&["iptables", "-w", "-N", "OTHER"]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let confs: Vec<(String, Value)> = (0..6)
        .map(|i| {
            let mut p = prev("1.0.0");
            p["ips"] = json!([{"address": format!("10.88.0.{}/24", 10 + i), "interface": 2}]);
            (format!("st{i}"), fw_conf("1.0.0", json!({}), &p))
        })
        .collect();
    std::thread::scope(|s| {
        let churn = s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                env.host.exec(&["iptables", "-w", "-A", "OTHER", "-j", "ACCEPT"]);
                env.host.exec(&["iptables", "-w", "-D", "OTHER", "-j", "ACCEPT"]);
                n += 2;
            }
            n
        });
        // a failed call below must still stop the churn, or the scope would wait for it forever
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let stopper = StopOnDrop(&stop);
        for verb in ["ADD", "DEL", "ADD"] {
            let calls: Vec<_> = confs.iter().map(|(id, c)| s.spawn(|| fw(&env, verb, id, c))).collect();
            for c in calls {
                let out = c.join().unwrap();
                assert!(out.ok(), "{verb}: {out:?}");
            }
        }
        drop(stopper);
        assert!(churn.join().unwrap() > 0);
    });
    let v4 = state(&env.host).0;
    for shared in ["-j CNI-FORWARD", "-j CNI-ADMIN"] {
        assert_eq!(v4.iter().filter(|l| l.ends_with(shared)).count(), 1, "{shared}: {v4:?}");
    }
    assert_eq!(v4.iter().filter(|l| l.ends_with("-j ACCEPT")).count(), 12, "{v4:?}");
}
