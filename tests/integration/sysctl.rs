//! sysctls read and written inside a chosen network namespace.
use crate::common;

use cnibox::netns::Netns;
use cnibox::sysctl;

fn private_thread_netns() {
    common::require_root();
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

#[test]
fn ip_forward_is_written_in_the_container_only() {
    private_thread_netns();
    let c = common::Netns::new("c");
    let ns = Netns::open(&c.path).unwrap();
    sysctl::set(sysctl::IPV4_FORWARD, "0").unwrap();
    sysctl::set_in(&ns, sysctl::IPV4_FORWARD, "1").unwrap();
    assert_eq!(c.sysctl("net/ipv4/ip_forward"), "1");
    assert_eq!(sysctl::get_in(&ns, "net.ipv4.ip_forward").unwrap(), "1");
    assert_eq!(
        sysctl::get(sysctl::IPV4_FORWARD).unwrap(),
        "0",
        "the host namespace is untouched"
    );
    assert!(Netns::current().unwrap().is_current().unwrap());
}

#[test]
fn per_interface_keys_in_a_container() {
    private_thread_netns();
    let c = common::Netns::new("c");
    c.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "eth1"]);
    let ns = Netns::open(&c.path).unwrap();
    let keys = [
        (sysctl::ipv6_conf("eth0", "accept_dad"), "0"),
        (sysctl::ipv4_conf("eth0", "arp_notify"), "1"),
        (sysctl::ipv6_conf("eth0", "accept_ra"), "0"),
        (sysctl::ipv6_conf("eth0", "ndisc_notify"), "1"),
        (sysctl::ipv6_conf("eth0", "keep_addr_on_down"), "1"),
        (sysctl::ipv6_conf("eth0", "disable_ipv6"), "1"),
    ];
    for (key, value) in &keys {
        sysctl::set_in(&ns, key, value).unwrap();
        assert_eq!(c.sysctl(key), *value, "{key}");
        assert_eq!(sysctl::get_in(&ns, key).unwrap(), *value, "{key}");
    }
    // enhanced_dad only exists on newer kernels
    let key = sysctl::ipv6_conf("eth0", "enhanced_dad");
    match sysctl::set_in(&ns, &key, "0") {
        Ok(()) => assert_eq!(c.sysctl(&key), "0"),
        Err(e) => assert!(e.is_not_found(), "{e}"),
    }
    // the host has no eth0
    let e = sysctl::get(&sysctl::ipv6_conf("eth0", "accept_dad")).unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.to_string(), "read sysctl net/ipv6/conf/eth0/accept_dad: no such key");
}

#[test]
fn a_key_missing_in_the_container_is_not_found() {
    private_thread_netns();
    let c = common::Netns::new("c");
    let ns = Netns::open(&c.path).unwrap();
    let e = sysctl::set_in(&ns, &sysctl::ipv4_conf("nosuch0", "arp_notify"), "1").unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(
        e.to_string(),
        "write sysctl net/ipv4/conf/nosuch0/arp_notify: no such key"
    );
}

#[test]
fn a_bad_value_is_an_io_error_naming_the_key() {
    private_thread_netns();
    let e = sysctl::set(sysctl::IPV4_FORWARD, "banana").unwrap_err();
    assert!(matches!(e.kind, sysctl::ErrorKind::Io(_)), "{e}");
    assert!(e.to_string().starts_with("write sysctl net/ipv4/ip_forward: "), "{e}");
}

#[test]
fn a_namespace_whose_mount_is_gone_still_works_through_its_descriptor() {
    common::require_root();
    let c = common::Netns::new("c");
    let ns = Netns::open(&c.path).unwrap();
    drop(c);
    // the namespace lives on through the descriptor, so this still works
    assert_eq!(sysctl::get_in(&ns, "net/ipv4/ip_forward").unwrap(), "0");
}

/// sysctls are opened in a procfs instance of the process's own, mounted nowhere: in
/// /proc every namespace that ever opened a sysctl has an entry its lookups walk, so the
/// same open cost ~1 ms on a node with 1,000 pods. They read and write the calling
/// namespace's values exactly as /proc/sys does.
#[test]
fn sysctls_go_through_a_procfs_instance_of_the_process_mounted_nowhere() {
    private_thread_netns();
    // only procfs mounts: the other tests running beside this one mount and unmount
    // namespace files in /run/netns all the time (this compared every mount and failed on them)
    let proc_mounts = || {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.split(" - ").nth(1).is_some_and(|fs| fs.starts_with("proc ")))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let mounts = proc_mounts();
    assert!(sysctl::through_private_procfs(), "root on Linux >= 5.8 can make one");
    assert_eq!(proc_mounts(), mounts, "mounted nowhere");
    let proc_sys = |key: &str| {
        std::fs::read_to_string(format!("/proc/sys/{key}"))
            .unwrap()
            .trim()
            .to_string()
    };
    sysctl::set(sysctl::IPV4_FORWARD, "1").unwrap();
    assert_eq!(proc_sys("net/ipv4/ip_forward"), "1");
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "0").unwrap();
    assert_eq!(sysctl::get(sysctl::IPV4_FORWARD).unwrap(), "0");
    // another namespace through the same instance
    let c = common::Netns::new("c");
    let ns = Netns::open(&c.path).unwrap();
    sysctl::set_in(&ns, sysctl::IPV6_FORWARDING_ALL, "1").unwrap();
    assert_eq!(c.sysctl("net/ipv6/conf/all/forwarding"), "1");
    assert_eq!(
        proc_sys("net/ipv6/conf/all/forwarding"),
        "0",
        "not the calling namespace's"
    );
    // released, and made again when needed
    sysctl::close_shared();
    assert_eq!(sysctl::get_in(&ns, sysctl::IPV6_FORWARDING_ALL).unwrap(), "1");
    assert!(sysctl::through_private_procfs());
}
