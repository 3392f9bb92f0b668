//! The multicall binary: applet table, argv[0] dispatch, `--list`, `install`.
use crate::common;

use cnibox::applets::{Kind, APPLETS};
use common::{cnibox, run_ok};
use std::os::unix::fs::symlink;
use std::process::Command;

fn listed() -> Vec<String> {
    run_ok(Command::new(cnibox()).arg("--list"))
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn list_shows_every_applet_once() {
    let mut got = listed();
    let n = got.len();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), n, "duplicate applet names: {got:?}");
    // the applet table is the one list of applets; the binary must answer to all of it
    let mut want: Vec<String> = APPLETS.iter().map(|a| a.name.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
}

/// The tests every plugin applet owes, held to by its row in the applet table alone: its
/// module is named after it (`host-local` -> `host_local`, as the Makefile's release pass
/// finds it) and has a `del_matrix` test (DEL in every situation and spec version) and a
/// `common_keys` test (how it reads the keys every config shares).
#[test]
fn every_plugin_applet_has_its_del_matrix_and_common_keys() {
    let me = std::env::current_exe().unwrap();
    // test names as this binary lists them; a module named with a keyword is `r#name`
    let tests: Vec<String> = run_ok(Command::new(me).arg("--list"))
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(|t| t.replace("r#", ""))
        .collect();
    let mut missing = vec![];
    for applet in APPLETS.iter().filter(|a| matches!(a.kind, Kind::Plugin(_))) {
        let module = format!("{}::", applet.name.replace('-', "_"));
        for owed in ["del_matrix", "common_keys"] {
            let suffix = format!("::{owed}");
            if !tests.iter().any(|t| t.starts_with(&module) && t.ends_with(&suffix)) {
                missing.push(format!("{module}…{suffix}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "plugin applets without the tests they owe: {missing:?}"
    );
}

/// Each name dispatches when the binary is called under it (symlink) and as `cnibox NAME`:
/// a plugin answers CNI_COMMAND=VERSION, a tool answers --help; both exit 0 with output.
#[test]
fn every_name_dispatches_through_a_symlink_and_as_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    for name in listed() {
        let link = dir.path().join(&name);
        symlink(cnibox(), &link).unwrap();
        for mut cmd in [Command::new(&link), {
            let mut c = Command::new(cnibox());
            c.arg(&name);
            c
        }] {
            let out = cmd.arg("--help").env("CNI_COMMAND", "VERSION").output().unwrap();
            assert!(out.status.success(), "{name}: {out:?}");
            assert!(!out.stdout.is_empty(), "{name} printed nothing: {out:?}");
        }
    }
}

#[test]
fn plugin_version_lists_every_supported_version() {
    let out = Command::new(cnibox())
        .arg("bridge")
        .env("CNI_COMMAND", "VERSION")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["supportedVersions"], serde_json::json!(common::ALL_VERSIONS));
}

#[test]
fn unknown_name_is_a_clear_error_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("frobnicate");
    symlink(cnibox(), &link).unwrap();
    let out = Command::new(&link).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown applet \"frobnicate\""), "{err}");

    let out = Command::new(cnibox()).arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown applet \"frobnicate\""));

    let out = Command::new(cnibox()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "no applet at all is a usage error");
}

#[test]
fn install_creates_links_idempotently_and_refuses_plain_files() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let install = |extra: &[&str]| {
        Command::new(cnibox())
            .arg("install")
            .arg(&bin)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = install(&[]);
    assert!(out.status.success(), "{out:?}");
    let exe = std::fs::canonicalize(cnibox()).unwrap();
    for name in listed() {
        let target = std::fs::read_link(bin.join(&name)).unwrap();
        assert_eq!(std::fs::canonicalize(target).unwrap(), exe, "{name}");
    }
    // Second run: nothing to do.
    let out = install(&[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().all(|l| l.ends_with("up to date")), "{text}");

    // A link pointing elsewhere is refreshed.
    std::fs::remove_file(bin.join("bridge")).unwrap();
    symlink("/bin/true", bin.join("bridge")).unwrap();
    let out = install(&[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("bridge: replaced"));

    // A regular file is not overwritten without --force.
    std::fs::remove_file(bin.join("macvlan")).unwrap();
    std::fs::write(bin.join("macvlan"), b"#!/bin/sh\n").unwrap();
    let out = install(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a symlink; refusing to overwrite it"));
    assert_eq!(std::fs::read(bin.join("macvlan")).unwrap(), b"#!/bin/sh\n");
    let out = install(&["--force"]);
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::symlink_metadata(bin.join("macvlan"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn install_help_and_bad_flags() {
    let out = Command::new(cnibox()).args(["install", "--help"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--force"));
    let out = Command::new(cnibox()).args(["install", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `make demo`'s script on a machine without nftables, iptables and iputils-ping (the sbin
/// directories hidden and `ping` covered, in a private mount namespace of the run): it needs
/// none of them (masquerade goes over netlink, busybox pings), and ends with everything
/// removed.
#[test]
fn the_demo_runs_without_firewall_tools_or_iputils_ping() {
    common::require_root();
    assert!(
        std::path::Path::new("/bin/busybox").exists(),
        "busybox is a test dependency: run sh tests/deps.sh"
    );
    let env = common::TestEnv::new();
    let root = env!("CARGO_MANIFEST_DIR");
    let script = format!(
        "mount --make-rprivate / && mount -t tmpfs tmpfs /usr/sbin && mount -t tmpfs tmpfs /usr/local/sbin \
         && mount --bind /dev/null \"$(command -v ping)\" && ! command -v nft && ! command -v iptables \
         && ! command -v ping && exec sh {root}/tests/demo.sh \"$0\" \"$1\""
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .arg(cnibox())
        .arg(&env.bin_dir)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "demo failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("3 packets transmitted, 3 packets received"), "{stdout}");
    assert!(stdout.contains("demo: done, everything removed"), "{stdout}");
    assert!(
        !stderr.contains("deps: installing"),
        "the demo installed something: {stderr}"
    );
}
