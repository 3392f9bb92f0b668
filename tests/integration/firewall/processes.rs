//! Firewall rules of the plugins without helper processes: ipMasq and macspoofchk ADD/DEL
//! start no process (strace proves it), tools that are still run are found by path
//! whatever PATH says, cnibox and the Go reference delete each other's iptables rules, and
//! a host without nf_tables falls back to iptables (simulated with a seccomp filter that
//! refuses NETLINK_NETFILTER sockets, as such a kernel does).
use crate::bridge_support;
use crate::common;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

use bridge_support::*;
use common::{CallOutput, Netns, TestEnv};
use serde_json::{json, Value};

/// How to run one plugin call.
#[derive(Default, Clone, Copy)]
struct Run<'a> {
    /// PATH for the plugin (the harness's usual one when None).
    path: Option<&'a str>,
    /// Record process creation with strace into this file.
    strace: Option<&'a Path>,
    /// Make NETLINK_NETFILTER sockets fail with EPROTONOSUPPORT, as without nf_tables.
    no_nfnetlink: bool,
    /// Run as on a machine without iptables and nft: the sbin dirs covered by empty
    /// tmpfs mounts in a private mount namespace of the call.
    hide_sbin: bool,
}

fn call(env: &TestEnv, how: Run, applet: &str, verb: &str, id: &str, netns: &str, conf: &Value) -> CallOutput {
    let plugin = env.bin_dir.join(applet);
    let mut c = match how.strace {
        Some(out) => {
            let mut c = env.host.command("strace");
            c.args(["-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-o"])
                .arg(out)
                .arg("--")
                .arg(&plugin);
            c
        }
        None if how.hide_sbin => {
            let mut c = env.host.command("unshare");
            let mounts: Vec<String> = common::SBIN_DIRS
                .iter()
                .map(|d| format!("mount -t tmpfs tmpfs {d} && "))
                .collect();
            let script = format!("mount --make-rprivate / && {}exec \"$0\"", mounts.concat());
            c.args(["-m", "/bin/sh", "-c", &script]).arg(&plugin);
            c
        }
        None => env.host.command(&plugin),
    };
    c.env_clear()
        .env("PATH", how.path.unwrap_or("/usr/sbin:/usr/bin:/sbin:/bin"))
        .env("CNI_PATH", &env.bin_dir)
        .env("CNI_COMMAND", verb)
        .env("CNI_CONTAINERID", id)
        .env("CNI_NETNS", netns)
        .env("CNI_IFNAME", IFNAME)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if how.no_nfnetlink {
        // SAFETY: only prctl(2) between fork and exec.
        unsafe {
            c.pre_exec(refuse_nfnetlink);
        }
    }
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(conf).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    CallOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A seccomp filter: socket(AF_NETLINK, *, NETLINK_NETFILTER) fails with EPROTONOSUPPORT,
/// which is what a kernel without nfnetlink answers. Everything else is allowed.
fn refuse_nfnetlink() -> std::io::Result<()> {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const LD_ABS_W: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let filter = [
        ins(LD_ABS_W, 0, 0, 4), // arch
        ins(JEQ_K, 0, 7, AUDIT_ARCH_X86_64),
        ins(LD_ABS_W, 0, 0, 0), // syscall number
        ins(JEQ_K, 0, 5, libc::SYS_socket as u32),
        ins(LD_ABS_W, 0, 0, 16), // args[0]: domain
        ins(JEQ_K, 0, 3, libc::AF_NETLINK as u32),
        ins(LD_ABS_W, 0, 0, 32), // args[2]: protocol
        ins(JEQ_K, 0, 1, libc::NETLINK_NETFILTER as u32),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPROTONOSUPPORT as u32),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut _,
    };
    // SAFETY: plain prctl calls with a filter that outlives them.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const _) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The processes a traced call started: its execve lines and any clone/fork lines.
fn started(trace: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(trace).unwrap();
    let execs = text
        .lines()
        .filter(|l| l.contains("execve("))
        .map(str::to_string)
        .collect();
    let forks = text
        .lines()
        .filter(|l| ["clone(", "clone3(", "fork(", "vfork("].iter().any(|s| l.contains(s)))
        .map(str::to_string)
        .collect();
    (execs, forks)
}

fn ptp_conf(env: &TestEnv, extra: Value) -> Value {
    let mut c = json!({
        "cniVersion": "1.0.0", "name": NET, "type": "ptp", "ipMasq": true,
        "ipam": {"type": "host-local", "dataDir": env.data_dir, "ranges": [[{"subnet": "10.1.3.0/24"}]]},
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn assert_no_process(env: &TestEnv, what: &str, applet: &str, verb: &str, id: &str, netns: &str, c: &Value) {
    let trace = env.tmp.path().join("trace");
    let how = Run {
        strace: Some(&trace),
        ..Run::default()
    };
    let out = call(env, how, applet, verb, id, netns, c);
    assert!(out.ok(), "{what} {verb}: {out:?}");
    let (execs, forks) = started(&trace);
    assert_eq!(
        execs.len(),
        1,
        "{what} {verb}: only the plugin's own execve: {execs:#?}"
    );
    assert!(execs[0].contains(applet), "{execs:?}");
    assert!(forks.is_empty(), "{what} {verb} started processes: {forks:#?}");
    // The plugin's netfilter socket outlives it only until the kernel frees it (it is not
    // closed the usual, waiting way: see `netlink::netfilter::release`).
    wait_until(|| env.host.netfilter_sockets() == 0);
    assert_eq!(
        env.host.netfilter_sockets(),
        0,
        "{what} {verb}: a netfilter socket stayed open"
    );
}

#[test]
fn ipmasq_and_macspoofchk_add_and_del_start_no_process() {
    common::require_root();
    type MakeConf = fn(&TestEnv) -> Value;
    let cases: [(&str, &str, MakeConf); 3] = [
        ("bridge ipMasq+macspoofchk", "bridge", |env| {
            conf(
                env,
                "1.0.0",
                json!({"isGateway": true, "ipMasq": true, "macspoofchk": true, "ipam": ipam(&["10.1.2.0/24"])}),
            )
        }),
        ("bridge macspoofchk", "bridge", |env| {
            conf(
                env,
                "1.0.0",
                json!({"macspoofchk": true, "ipam": ipam(&["10.1.4.0/24"])}),
            )
        }),
        ("veth ipMasq", "ptp", |env| ptp_conf(env, json!({}))),
    ];
    for (what, applet, make) in cases {
        let env = TestEnv::new();
        let c = make(&env);
        // netns present
        let ctr = env.container();
        assert_no_process(&env, what, applet, "ADD", "np1", ctr.path_str(), &c);
        let nft = nft_ruleset(&env.host);
        assert!(nft.contains("np1"), "{what}: rules made:\n{nft}");
        assert_no_process(&env, what, applet, "DEL", "np1", ctr.path_str(), &c);
        // netns gone
        let ctr = env.container();
        let path = ctr.path_str().to_string();
        assert_no_process(&env, what, applet, "ADD", "np2", &path, &c);
        drop(ctr);
        wait_until(|| host_veths(&env.host).is_empty());
        assert_no_process(&env, what, applet, "DEL", "np2", &path, &c);
        let nft = nft_ruleset(&env.host);
        assert!(
            !nft.contains("np1") && !nft.contains("np2"),
            "{what}: rules left:\n{nft}"
        );
        assert!(!iptables_nat(&env.host).contains("CNI-"));
    }
}

#[test]
fn del_with_a_minimal_path_removes_the_rules_of_both_backends() {
    common::require_root();
    for backend in ["iptables", "nftables"] {
        let env = TestEnv::new();
        let ctr = env.container();
        let c = conf(
            &env,
            "1.0.0",
            json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": backend, "ipam": ipam(&["10.1.2.0/24"])}),
        );
        // ADD with the same minimal PATH: the tools are found in the sbin dirs, and run from there
        let minimal = Run {
            path: Some("/usr/bin:/bin"),
            ..Run::default()
        };
        let out = call(&env, minimal, "bridge", "ADD", "mp", ctr.path_str(), &c);
        assert!(out.ok(), "{backend}: {out:?}");
        let made = if backend == "iptables" {
            iptables_nat(&env.host)
        } else {
            nft_ruleset(&env.host)
        };
        assert!(made.contains("mp"), "{backend}:\n{made}");
        let out = call(&env, minimal, "bridge", "DEL", "mp", ctr.path_str(), &c);
        assert!(out.ok(), "{backend}: {out:?}");
        assert_clean(&env, "mp", Some(&ctr));
    }
}

#[test]
fn cnibox_and_the_reference_delete_each_others_iptables_masquerade() {
    common::require_root();
    let Some(_) = common::reference_dir() else {
        eprintln!("skipped: the Go reference plugins are not installed");
        return;
    };
    let c = |env: &TestEnv| {
        conf(
            env,
            "0.4.0",
            json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": "iptables", "ipam": ipam(&["10.1.2.0/24"])}),
        )
    };
    // the reference ADDs (v1.1.1 masquerades with iptables), cnibox DELs
    let env = TestEnv::new();
    let ctr = env.container();
    let conf = c(&env);
    env.reference("bridge")
        .unwrap()
        .exec("ADD", "x1", ctr.path_str(), IFNAME, &conf)
        .success();
    let ipt = iptables_nat(&env.host);
    assert!(
        ipt.contains("-A POSTROUTING -s 10.1.2.2/32") && ipt.contains(":CNI-"),
        "{ipt}"
    );
    del(&env, "x1", ctr.path_str(), &conf).success();
    assert_clean(&env, "x1", Some(&ctr));

    // cnibox ADDs, the reference DELs
    let env = TestEnv::new();
    let ctr = env.container();
    let conf = c(&env);
    add(&env, "x2", &ctr, &conf).success();
    env.reference("bridge")
        .unwrap()
        .exec("DEL", "x2", ctr.path_str(), IFNAME, &conf)
        .success();
    let ipt = iptables_nat(&env.host);
    assert!(!ipt.contains(":CNI-") && !ipt.contains("x2"), "{ipt}");
}

fn legacy_nat(host: &Netns) -> String {
    sh_in(
        host,
        "iptables-legacy-save -t nat 2>/dev/null; ip6tables-legacy-save -t nat 2>/dev/null",
    )
}

#[test]
fn without_nf_tables_add_falls_back_to_iptables_unless_nftables_is_asked_for() {
    common::require_root();
    let env = TestEnv::new();
    // Such a host runs iptables-legacy: plain iptables-restore is the legacy one.
    let legacy_bin = env.tmp.path().join("legacy-bin");
    std::fs::create_dir(&legacy_bin).unwrap();
    for v in ["iptables", "ip6tables"] {
        for tool in ["save", "restore"] {
            std::os::unix::fs::symlink(
                format!("/usr/sbin/{v}-legacy-{tool}"),
                legacy_bin.join(format!("{v}-{tool}")),
            )
            .unwrap();
        }
    }
    let path = format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", legacy_bin.display());
    let how = Run {
        path: Some(&path),
        no_nfnetlink: true,
        ..Run::default()
    };
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"isGateway": true, "ipMasq": true, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    let out = call(&env, how, "bridge", "ADD", "fb", ctr.path_str(), &c);
    let r = out.success();
    let ip = result_addrs(&r)[0].split('/').next().unwrap().to_string();
    let legacy = legacy_nat(&env.host);
    assert!(legacy.contains(&format!("-A POSTROUTING -s {ip}/32")), "{legacy}");
    assert!(!nft_ruleset(&env.host).contains("cni_plugins_masquerade"));
    let out = call(&env, how, "bridge", "DEL", "fb", ctr.path_str(), &c);
    assert!(out.ok(), "{out:?}");
    assert!(!legacy_nat(&env.host).contains("CNI-"), "{}", legacy_nat(&env.host));
    assert_clean(&env, "fb", Some(&ctr));

    let mut asked = c.clone();
    asked["ipMasqBackend"] = "nftables".into();
    let out = call(&env, how, "bridge", "ADD", "fb2", ctr.path_str(), &asked);
    let msg = out.failure(999);
    assert!(
        msg.contains("ipMasqBackend nftables needs nf_tables, which this kernel does not offer"),
        "{msg}"
    );
    assert_clean(&env, "fb2", Some(&ctr));
    assert!(!legacy_nat(&env.host).contains("CNI-"));
}

#[test]
fn cnibox_and_the_reference_delete_each_others_spoof_check_rules() {
    common::require_root();
    let Some(_) = common::reference_dir() else {
        eprintln!("skipped: the Go reference plugins are not installed");
        return;
    };
    let c = |env: &TestEnv| {
        conf(
            env,
            "1.0.0",
            json!({"macspoofchk": true, "ipam": ipam(&["10.1.2.0/24"])}),
        )
    };
    // the reference ADDs (through the nft binary), cnibox DELs over netlink
    let env = TestEnv::new();
    let ctr = env.container();
    let conf = c(&env);
    env.reference("bridge")
        .unwrap()
        .exec("ADD", "s1", ctr.path_str(), IFNAME, &conf)
        .success();
    assert!(nft_ruleset(&env.host).contains("macspoofchk-s1-eth0"));
    del(&env, "s1", ctr.path_str(), &conf).success();
    assert_clean(&env, "s1", Some(&ctr));

    // cnibox ADDs, the reference DELs
    let env = TestEnv::new();
    let ctr = env.container();
    let conf = c(&env);
    add(&env, "s2", &ctr, &conf).success();
    env.reference("bridge")
        .unwrap()
        .exec("DEL", "s2", ctr.path_str(), IFNAME, &conf)
        .success();
    let nft = nft_ruleset(&env.host);
    assert!(!nft.contains("s2-eth0"), "{nft}");
}

/// Neither backend: a kernel without nf_tables and no iptables tools installed. ipMasq's
/// ADD fails saying so and what to install, and leaves nothing behind.
#[test]
fn without_nf_tables_or_iptables_ipmasq_says_what_to_install() {
    common::require_root();
    let env = TestEnv::new();
    let how = Run {
        no_nfnetlink: true,
        hide_sbin: true,
        ..Run::default()
    };
    for v in common::ALL_VERSIONS {
        let ctr = env.container();
        let c = conf(
            &env,
            v,
            json!({"isGateway": true, "ipMasq": true, "ipam": ipam(&["10.1.2.0/24"])}),
        );
        let msg = call(&env, how, "bridge", "ADD", "nb", ctr.path_str(), &c).failure(999);
        assert!(
            msg.starts_with("set up masquerade: ipMasq needs nftables or iptables; neither was found"),
            "{v}: {msg}"
        );
        assert!(
            msg.ends_with("and iptables-restore is not installed (install the iptables package, or load nf_tables)"),
            "{v}: {msg}"
        );
        assert_clean(&env, "nb", Some(&ctr));
    }
}
