//! The multicall binary: applet table, argv[0] dispatch, `--list`, `install`.
use crate::common;

use common::{cnibox, run_ok};
use std::os::unix::fs::symlink;
use std::process::Command;

/// Every applet the product promises (issue texts); `--list` must show exactly these.
const EXPECTED: &[&str] = &[
    "bridge",
    "veth",
    "ptp",
    "macvlan",
    "loopback",
    "tuning",
    "bandwidth",
    "firewall",
    "portmap",
    "host-local",
    "cnitool",
    "oci-hook",
    "oci-wrap",
];

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
    let mut want: Vec<String> = EXPECTED.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
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
