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
