//! Opening, checking and entering network namespaces.
use crate::common;

use std::os::fd::AsRawFd;

use cnibox::netns::{ErrorKind, Netns};

fn private_thread_netns() {
    common::require_root();
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

#[test]
fn a_bind_mounted_netns_opens_and_is_not_current() {
    private_thread_netns();
    let c = common::Netns::new("c");
    let ns = Netns::open(&c.path).unwrap();
    assert_eq!(ns.path(), c.path.as_path());
    assert!(!ns.is_current().unwrap());
    assert!(Netns::current().unwrap().is_current().unwrap());
    assert!(ns.same_as(&Netns::open(&c.path).unwrap()).unwrap());
    assert!(!ns.same_as(&Netns::current().unwrap()).unwrap());
}

#[test]
fn proc_pid_ns_net_opens() {
    private_thread_netns();
    // the thread's own namespace through /proc/<pid>/task/<tid>/ns/net
    let tid = nix::unistd::gettid();
    let ns = Netns::open(format!("/proc/{}/task/{tid}/ns/net", std::process::id())).unwrap();
    assert!(ns.is_current().unwrap());
}

#[test]
fn a_missing_path_is_not_found() {
    let e = Netns::open("/run/netns/cnibox-no-such-netns").unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(
        e.to_string(),
        "open netns /run/netns/cnibox-no-such-netns: does not exist"
    );
}

#[test]
fn a_regular_file_is_not_a_netns() {
    let f = tempfile::NamedTempFile::new().unwrap();
    let e = Netns::open(f.path()).unwrap_err();
    assert!(e.is_not_netns(), "{e}");
    assert_eq!(
        e.to_string(),
        format!("open netns {}: not a network namespace", f.path().display())
    );
}

#[test]
fn another_kind_of_namespace_is_not_a_netns() {
    for kind in ["uts", "ipc", "mnt"] {
        let path = format!("/proc/self/ns/{kind}");
        let e = Netns::open(&path).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::NotNetns), "{path}: {e}");
    }
}

#[test]
fn other_proc_files_are_not_a_netns() {
    let e = Netns::open("/proc/self/status").unwrap_err();
    assert!(e.is_not_netns(), "{e}");
    let e = Netns::open("/proc/self/ns").unwrap_err();
    assert!(e.is_not_netns(), "{e}");
}

#[test]
fn run_enters_and_always_comes_back() {
    private_thread_netns();
    let c = common::Netns::new("c");
    let ns = Netns::open(&c.path).unwrap();
    let home = Netns::current().unwrap();

    let inside = ns.run(|| Netns::current().unwrap().same_as(&ns).unwrap()).unwrap();
    assert!(inside);
    assert!(home.is_current().unwrap());

    // an error inside comes back out, and so does the thread
    let r: Result<(), String> = ns.run(|| Err("failed inside".to_string())).unwrap();
    assert_eq!(r.unwrap_err(), "failed inside");
    assert!(home.is_current().unwrap());

    // and on panic
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ns.run(|| panic!("boom")).unwrap();
    }));
    assert!(caught.is_err());
    assert!(home.is_current().unwrap(), "back home after a panic inside");
}

#[test]
fn links_created_inside_run_land_in_that_namespace() {
    private_thread_netns();
    let c = common::Netns::new("c");
    let ns = Netns::open(&c.path).unwrap();
    ns.run(|| common::run_ok(std::process::Command::new("ip").args(["link", "add", "inside0", "type", "bridge"])))
        .unwrap();
    assert!(c.has_link("inside0"));
    let here = common::run_ok(std::process::Command::new("ip").args(["-j", "link", "show"]));
    assert!(!here.contains("inside0"));
}

#[test]
fn the_descriptor_keeps_a_deleted_namespace_usable() {
    private_thread_netns();
    let c = common::Netns::new("c");
    let ns = Netns::open(&c.path).unwrap();
    let path = c.path.clone();
    drop(c); // `ip netns del`
    assert!(!path.exists());
    assert!(ns.as_raw_fd() >= 0);
    let inside = ns.run(|| Netns::current().unwrap().same_as(&ns).unwrap()).unwrap();
    assert!(inside);
}

use libc::NS_GET_NSTYPE;

fn bridge_conf(env: &common::TestEnv, version: &str) -> serde_json::Value {
    serde_json::json!({"cniVersion": version, "name": "nsnet", "type": "bridge", "bridge": "nsbr0",
        "isGateway": true, "ipam": {"type": "host-local", "subnet": "10.77.0.0/24", "dataDir": env.data_dir}})
}

fn with_prev(conf: &serde_json::Value, prev: serde_json::Value) -> serde_json::Value {
    let mut c = conf.clone();
    c["prevResult"] = prev;
    c
}

fn first_ipv4(ns: &common::Netns) -> String {
    let addrs = ns.addrs("eth0");
    let a = addrs
        .iter()
        .find(|a| !a.contains(':'))
        .expect("an IPv4 address on eth0");
    a.split('/').next().unwrap().to_string()
}

/// Before: where `NS_GET_NSTYPE` is missing (ENOSYS under qemu-user and some seccomp
/// profiles; ENOTTY before Linux 4.11 took another path) every namespace was "not a
/// network namespace": bridge ADD failed with that message, loopback with `unknown FS magic
/// … 6e736673` (nsfs's own magic), and DEL took the namespace for gone and succeeded,
/// leaving the container's interfaces behind.
#[test]
fn plugins_check_the_namespace_without_ns_get_nstype() {
    for errno in [libc::ENOSYS, libc::ENOTTY] {
        let env = common::TestEnv::new();
        let (a, b, l) = (env.container(), env.container(), env.container());
        let conf = bridge_conf(&env, "1.1.0");
        let call = |verb: &str, id: &str, ns: &common::Netns, conf: &serde_json::Value| {
            let c = env.call("bridge").refusing_ioctl(NS_GET_NSTYPE, errno);
            c.exec(verb, id, ns.path_str(), "eth0", conf)
        };
        let ra = call("ADD", "a", &a, &conf).success();
        let rb = call("ADD", "b", &b, &conf).success();
        assert!(a.ping(&first_ipv4(&b)), "errno {errno}: a reaches b");
        call("CHECK", "a", &a, &with_prev(&conf, ra.clone())).success();
        call("CHECK", "b", &b, &with_prev(&conf, rb)).success();
        call("DEL", "a", &a, &with_prev(&conf, ra)).success();
        assert!(
            !a.has_link("eth0"),
            "errno {errno}: DEL removed the container's interface"
        );

        let lo = serde_json::json!({"cniVersion": "1.1.0", "name": "lo", "type": "loopback"});
        let lo_call = |verb: &str| {
            let c = env.call("loopback").refusing_ioctl(NS_GET_NSTYPE, errno);
            c.exec(verb, "l", l.path_str(), "lo", &lo)
        };
        l.ip(&["link", "set", "lo", "down"]);
        lo_call("ADD").success();
        assert!(l.ip(&["link", "show", "lo"]).contains(",UP"), "errno {errno}: lo is up");
        lo_call("DEL").success();
        assert!(
            !l.ip(&["link", "show", "lo"]).contains(",UP"),
            "errno {errno}: lo is down again"
        );
    }
}

/// Before: a namespace whose kind the kernel would not tell (`NS_GET_NSTYPE` refused with
/// EPERM, as a seccomp profile may) was "not a network namespace", and DEL took it for a
/// namespace already gone: it succeeded and left the container's interfaces behind.
#[test]
fn a_namespace_that_cannot_be_checked_fails_every_command() {
    let env = common::TestEnv::new();
    let refused = |plugin: &str| env.call(plugin).refusing_ioctl(NS_GET_NSTYPE, libc::EPERM);
    let expect_refused = |out: common::CallOutput, what: &str| {
        let msg = out.failure(999);
        assert!(
            msg.contains("cannot tell whether it is a network namespace: Operation not permitted"),
            "{what}: {msg}"
        );
    };
    for version in common::ALL_VERSIONS {
        let c = env.container();
        let conf = bridge_conf(&env, version);
        let added = env
            .call("bridge")
            .exec("ADD", "x", c.path_str(), "eth0", &conf)
            .success();
        let conf = with_prev(&conf, added);
        expect_refused(refused("bridge").exec("ADD", "y", c.path_str(), "eth1", &conf), "ADD");
        if !["0.1.0", "0.2.0", "0.3.0", "0.3.1"].contains(version) {
            expect_refused(
                refused("bridge").exec("CHECK", "x", c.path_str(), "eth0", &conf),
                "CHECK",
            );
        }
        expect_refused(refused("bridge").exec("DEL", "x", c.path_str(), "eth0", &conf), "DEL");
        assert!(
            c.has_link("eth0"),
            "{version}: a refused DEL leaves everything for the next try"
        );
        env.call("bridge")
            .exec("DEL", "x", c.path_str(), "eth0", &conf)
            .success();
        assert!(!c.has_link("eth0"), "{version}: the next DEL removes it");
    }
    // DEL of the plugins that open the namespace their own way
    let c = env.container();
    let ptp = serde_json::json!({"cniVersion": "1.1.0", "name": "nsptp", "type": "ptp",
        "ipam": {"type": "host-local", "subnet": "10.78.0.0/24", "dataDir": env.data_dir}});
    env.call("ptp").exec("ADD", "p", c.path_str(), "eth0", &ptp).success();
    expect_refused(refused("ptp").exec("DEL", "p", c.path_str(), "eth0", &ptp), "ptp DEL");
    assert!(c.has_link("eth0"));
    env.call("ptp").exec("DEL", "p", c.path_str(), "eth0", &ptp).success();
    let lo = serde_json::json!({"cniVersion": "1.1.0", "name": "lo", "type": "loopback"});
    expect_refused(
        refused("loopback").exec("DEL", "l", c.path_str(), "lo", &lo),
        "loopback DEL",
    );
    assert!(
        c.ip(&["link", "show", "lo"]).contains(",UP"),
        "a refused loopback DEL leaves lo up"
    );
}
