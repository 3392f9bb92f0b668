//! cnibox's dhcp applet and daemon against dnsmasq and udhcpd.
use super::*;
use crate::common::ALL_VERSIONS;
use crate::plugin_state::with_prev;
use nix::sys::signal::Signal;

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn log_has(lan: &Lan, id: &str, what: &str) -> Result<(), String> {
    match lan.log_of(id).iter().any(|l| l.contains(what)) {
        true => Ok(()),
        false => Err(format!(
            "no {what:?} in the daemon's log:\n{}\nserver:\n{}",
            lan.daemon_log(),
            lan.server_log()
        )),
    }
}

/// One container's lease through `uplink` from a `kind` server: ADD gives the address,
/// the gateway and the default route, configured in the container and reachable; the
/// lease is in the server's file under the attachment's client ID (dnsmasq) and MAC;
/// CHECK holds; DEL releases it from the server's file and the daemon's records. The
/// daemon's log and the server's lease file along the way are printed (`--nocapture`).
fn a_lease_life(uplink: Uplink, kind: ServerKind) {
    let mut lan = Lan::new(uplink);
    lan.start_server(kind, &ServerOpts::default());
    lan.start_daemon(Which::Cnibox, DAEMON);
    let ns = lan.env.container();
    let id = common::unique("c");
    let conf = lan.conf("1.0.0", json!({}));
    let result = lan.call("ADD", &id, &ns, &conf).success();
    let ip = Lan::address_of(&result);
    assert!(ip.starts_with(NET), "{result}");
    assert_eq!(result["ips"][0]["address"], format!("{ip}/24"));
    assert_eq!(result["ips"][0]["gateway"], SERVER);
    assert_eq!(result["routes"], json!([{"dst": "0.0.0.0/0", "gw": SERVER}]));
    assert_eq!(
        ns.addrs("eth0")
            .iter()
            .filter(|a| a.starts_with(NET))
            .collect::<Vec<_>>(),
        [&format!("{ip}/24")]
    );
    assert!(ns.ping(SERVER), "the container reaches the server");
    let mac = ns.ip_json(&["link", "show", "eth0"])[0]["address"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until(SECS(5), "the lease in the server's file", || match lan.lease_of(&ip) {
        Some(l) if l.mac == mac => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let client_id = format!("{id}/{NETWORK}/eth0");
    if kind == ServerKind::Dnsmasq {
        assert_eq!(lan.lease_of(&ip).unwrap().client_id, Lan::client_id_hex(&client_id));
    }
    assert_eq!(lan.records().len(), 1);
    eprintln!("server's leases while held: {:?}", lan.leases());
    lan.call("CHECK", &id, &ns, &with_prev(&conf, &result)).success();
    lan.call("DEL", &id, &ns, &with_prev(&conf, &result)).success();
    lan.wait_released(&ip);
    assert!(lan.records().is_empty(), "{:?}", lan.records());
    assert!(!ns.has_link("eth0"));
    for event in ["acquiring lease", "lease acquired", "releasing lease"] {
        log_has(&lan, &client_id, event).unwrap();
    }
    eprintln!(
        "daemon's log:\n{}server's leases after DEL: {:?}",
        lan.daemon_log(),
        lan.leases()
    );
}

#[test]
fn dnsmasq_through_a_macvlan_master() {
    a_lease_life(Uplink::Macvlan, ServerKind::Dnsmasq);
}

#[test]
fn dnsmasq_through_a_bridge_with_a_veth_uplink() {
    a_lease_life(Uplink::Bridge, ServerKind::Dnsmasq);
}

#[test]
fn udhcpd_through_a_macvlan_master() {
    a_lease_life(Uplink::Macvlan, ServerKind::Udhcpd);
}

#[test]
fn udhcpd_through_a_bridge_with_a_veth_uplink() {
    a_lease_life(Uplink::Bridge, ServerKind::Udhcpd);
}

/// ADD answers in the config's version (0.1.0 and 0.2.0: `ip4`), CHECK from 0.4.0 on, DEL
/// releases in every version.
#[test]
fn every_spec_version() {
    let mut lan = Lan::new(Uplink::Macvlan);
    lan.start_server(ServerKind::Dnsmasq, &ServerOpts::default());
    lan.start_daemon(Which::Cnibox, DAEMON);
    for version in ALL_VERSIONS {
        let ns = lan.env.container();
        let id = common::unique("v");
        let conf = lan.conf(version, json!({}));
        let result = lan.call("ADD", &id, &ns, &conf).success();
        assert_eq!(result["cniVersion"], *version);
        let ip = Lan::address_of(&result);
        if *version < "0.3.0" {
            assert_eq!(result["ip4"]["gateway"], SERVER, "{version}: {result}");
            assert_eq!(result["ip4"]["routes"], json!([{"dst": "0.0.0.0/0", "gw": SERVER}]));
        } else {
            assert_eq!(result["ips"][0]["gateway"], SERVER, "{version}: {result}");
        }
        assert!(lan.lease_of(&ip).is_some(), "{version}");
        let del = if *version >= "0.4.0" {
            lan.call("CHECK", &id, &ns, &with_prev(&conf, &result)).success();
            with_prev(&conf, &result)
        } else {
            conf.clone()
        };
        lan.call("DEL", &id, &ns, &del).success();
        lan.wait_released(&ip);
    }
    assert!(lan.records().is_empty());
}

/// The daemon's log shows `n` renewals of `id`'s lease.
fn renewals_seen(lan: &Lan, id: &str, n: usize) {
    wait_until(SECS(20), &format!("{n} renewals"), || {
        let seen = lan.log_of(id).iter().filter(|l| l.contains("lease renewed")).count();
        match seen >= n {
            true => Ok(()),
            false => Err(format!(
                "{seen} so far:\n{}\nserver:\n{}",
                lan.daemon_log(),
                lan.server_log()
            )),
        }
    });
}

/// dnsmasq renewing every 3 s (its shortest lease is two minutes, and it sends a T1 of 3 s
/// as given), with T2 at `t2` s and addresses from `range`, and cnibox's daemon; through a
/// macvlan master. Also returns the server's options, to start it again.
fn renewing_every_3s(t2: u32, range: (u8, u8)) -> (Lan, ServerOpts) {
    let mut lan = Lan::new(Uplink::Macvlan);
    let opts = ServerOpts {
        lease: 120,
        t1: Some(3),
        t2: Some(t2),
        range,
        ..ServerOpts::default()
    };
    lan.start_server(ServerKind::Dnsmasq, &opts);
    lan.start_daemon(Which::Cnibox, DAEMON);
    (lan, opts)
}

/// dnsmasq's shortest lease is two minutes: T1 of 3 s makes the daemon renew every 3 s,
/// and the expiry in dnsmasq's file moves on with each renewal. The lease's life in the
/// daemon's log and dnsmasq's file is printed (`--nocapture`).
#[test]
fn dnsmasq_short_renewal_times_are_kept() {
    let (lan, _) = renewing_every_3s(100, (10, 250));
    let ns = lan.env.container();
    let id = common::unique("r");
    let conf = lan.conf("1.0.0", json!({}));
    let ip = Lan::address_of(&lan.call("ADD", &id, &ns, &conf).success());
    let first = lan.lease_of(&ip).expect("the lease").expires;
    eprintln!("dnsmasq's file after ADD: {:?}", lan.lease_of(&ip));
    renewals_seen(&lan, &id, 2);
    wait_until(SECS(5), "a later expiry in dnsmasq's file", || {
        match lan.lease_of(&ip) {
            Some(l) if l.expires > first => Ok(()),
            other => Err(format!("{other:?}, first {first}")),
        }
    });
    eprintln!("dnsmasq's file after the renewals: {:?}", lan.lease_of(&ip));
    lan.call("DEL", &id, &ns, &conf).success();
    lan.wait_released(&ip);
    eprintln!(
        "daemon's log:\n{}dnsmasq's file after DEL: {:?}",
        lan.daemon_log(),
        lan.leases()
    );
}

/// udhcpd with a 3 s lease: renewed at T1 (half of it) again and again; the lease outlives
/// several of its own lifetimes.
#[test]
fn udhcpd_short_leases_are_renewed() {
    let mut lan = Lan::new(Uplink::Macvlan);
    let opts = ServerOpts {
        lease: 3,
        ..ServerOpts::default()
    };
    lan.start_server(ServerKind::Udhcpd, &opts);
    lan.start_daemon(Which::Cnibox, DAEMON);
    let ns = lan.env.container();
    let id = common::unique("r");
    let conf = lan.conf("1.0.0", json!({}));
    let ip = Lan::address_of(&lan.call("ADD", &id, &ns, &conf).success());
    renewals_seen(&lan, &id, 4);
    assert!(lan.lease_of(&ip).is_some(), "{:?}", lan.leases());
    assert!(ns.ping(SERVER));
    lan.call("DEL", &id, &ns, &conf).success();
}

/// The server goes away before T1: renewing (unicast) goes unanswered, at T2 the daemon
/// rebinds (broadcast), and the server, back with its lease file, answers that.
#[test]
fn rebinds_after_t2_when_its_server_was_away() {
    let (mut lan, opts) = renewing_every_3s(6, (10, 250));
    let ns = lan.env.container();
    let id = common::unique("b");
    let conf = lan.conf("1.0.0", json!({}));
    let ip = Lan::address_of(&lan.call("ADD", &id, &ns, &conf).success());
    lan.stop_server();
    wait_until(SECS(15), "rebinding", || log_has(&lan, &id, "rebinding"));
    lan.start_server(ServerKind::Dnsmasq, &opts);
    wait_until(SECS(15), "the lease rebound", || log_has(&lan, &id, "lease rebound"));
    log_has(&lan, &id, "renewing lease").unwrap();
    assert!(lan.lease_of(&ip).is_some());
    lan.call("DEL", &id, &ns, &conf).success();
    lan.wait_released(&ip);
}

/// The server is replaced by one that serves another range: the renewal gets a NAK, the
/// daemon acquires again, gets another address and takes the interface down (its address
/// is no lease's any more); CHECK fails, naming both addresses; DEL releases the new lease.
#[test]
fn a_nak_at_renewal_acquires_again() {
    let (mut lan, first) = renewing_every_3s(100, (10, 20));
    let ns = lan.env.container();
    let id = common::unique("n");
    let conf = lan.conf("1.0.0", json!({}));
    let result = lan.call("ADD", &id, &ns, &conf).success();
    let old = Lan::address_of(&result);
    lan.stop_server();
    std::fs::remove_file(lan.path("dnsmasq.leases")).unwrap();
    lan.start_server(
        ServerKind::Dnsmasq,
        &ServerOpts {
            range: (100, 110),
            ..first
        },
    );
    wait_until(SECS(15), "the lease acquired again", || {
        log_has(&lan, &id, "lease acquired again")
    });
    log_has(&lan, &id, "lease refused with Nak").unwrap();
    let new = lan
        .leases()
        .into_iter()
        .find(|l| l.client_id == Lan::client_id_hex(&format!("{id}/{NETWORK}/eth0")));
    let new = new.expect("the new lease in dnsmasq's file").ip;
    assert!(new.as_str() >= "10.77.0.100" && new != old, "{new}");
    let down = ns.ip_json(&["link", "show", "eth0"])[0]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f != "UP");
    assert!(down, "the interface with the lost address is down");
    let msg = lan.call("CHECK", &id, &ns, &with_prev(&conf, &result)).failure(999);
    assert_eq!(
        msg,
        format!("error calling DHCP.Check: {id}/{NETWORK}/eth0: the lease is for {new}/24, the container has {old}/24")
    );
    lan.call("DEL", &id, &ns, &with_prev(&conf, &result)).success();
    lan.wait_released(&new);
}

/// Two containers on one LAN: two addresses, two leases, each reaches the other; each DEL
/// releases its own.
#[test]
fn two_containers_on_one_lan() {
    let mut lan = Lan::new(Uplink::Macvlan);
    lan.start_server(ServerKind::Dnsmasq, &ServerOpts::default());
    lan.start_daemon(Which::Cnibox, DAEMON);
    let conf = lan.conf("1.0.0", json!({}));
    let (a, b) = (lan.env.container(), lan.env.container());
    let (ida, idb) = (common::unique("a"), common::unique("b"));
    let ipa = Lan::address_of(&lan.call("ADD", &ida, &a, &conf).success());
    let ipb = Lan::address_of(&lan.call("ADD", &idb, &b, &conf).success());
    assert_ne!(ipa, ipb);
    assert!(lan.lease_of(&ipa).is_some() && lan.lease_of(&ipb).is_some());
    assert!(a.ping(&ipb) && b.ping(&ipa));
    lan.call("DEL", &ida, &a, &conf).success();
    lan.wait_released(&ipa);
    assert!(lan.lease_of(&ipb).is_some(), "the other lease stays");
    assert_eq!(lan.records().len(), 1);
    lan.call("DEL", &idb, &b, &conf).success();
    lan.wait_released(&ipb);
}

/// One lease fails (its interface is deleted under it): at its renewal the daemon forgets
/// it, CHECK of it fails as no lease held, its DEL succeeds; the other container's lease
/// goes on renewing and is released by its own DEL.
#[test]
fn a_failed_lease_leaves_the_others_going() {
    let (lan, _) = renewing_every_3s(100, (10, 250));
    let conf = lan.conf("1.0.0", json!({}));
    let (a, b) = (lan.env.container(), lan.env.container());
    let (ida, idb) = (common::unique("fa"), common::unique("fb"));
    let result_a = lan.call("ADD", &ida, &a, &conf).success();
    let ipb = Lan::address_of(&lan.call("ADD", &idb, &b, &conf).success());
    a.ip(&["link", "del", "eth0"]);
    wait_until(SECS(15), "the failed lease forgotten", || {
        log_has(&lan, &ida, "the lease is forgotten")
    });
    let before = lan.log_of(&idb).iter().filter(|l| l.contains("lease renewed")).count();
    renewals_seen(&lan, &idb, before + 2);
    let msg = lan.call("CHECK", &ida, &a, &with_prev(&conf, &result_a)).failure(999);
    assert_eq!(
        msg,
        format!("error calling DHCP.Check: {ida}/{NETWORK}/eth0: no DHCP lease is held")
    );
    lan.call("DEL", &ida, &a, &with_prev(&conf, &result_a)).success();
    assert_eq!(lan.records().len(), 1, "{:?}", lan.records());
    assert!(b.ping(SERVER));
    lan.call("DEL", &idb, &b, &conf).success();
    lan.wait_released(&ipb);
}

/// No server answers: ADD fails as the reference's (`no more tries`) once `-resendtimeout`
/// has passed; the container keeps nothing and the daemon no lease.
#[test]
fn no_server_at_add_fails_with_the_references_error() {
    let mut lan = Lan::new(Uplink::Macvlan);
    lan.start_daemon(Which::Cnibox, &["-timeout", "1s", "-resendtimeout", "3s"]);
    let ns = lan.env.container();
    let id = common::unique("x");
    let msg = lan.call("ADD", &id, &ns, &lan.conf("1.0.0", json!({}))).failure(999);
    assert_eq!(msg, "error calling DHCP.Allocate: no more tries");
    assert_eq!(ns.links(), ["lo"]);
    assert!(lan.records().is_empty());
    log_has(&lan, &id, "no more tries").unwrap();
    // the daemon serves on
    lan.start_server(ServerKind::Dnsmasq, &ServerOpts::default());
    lan.call("ADD", &id, &ns, &lan.conf("1.0.0", json!({}))).success();
}

/// Without a daemon: the reference's error, with how to start one in `details`; STATUS
/// says the plugin is not available (50).
#[test]
fn a_missing_daemon_is_a_clear_error() {
    let lan = Lan::new(Uplink::Macvlan);
    let ns = lan.env.container();
    let conf = lan.conf("1.1.0", json!({}));
    let out = lan.call("ADD", "nodaemon", &ns, &conf);
    let msg = out.failure(999);
    assert_eq!(
        msg,
        format!(
            "error dialing DHCP daemon: dial unix {}: connect: no such file or directory",
            lan.socket().display()
        )
    );
    assert!(
        out.json()["details"].as_str().unwrap().contains("cnibox dhcp daemon"),
        "{out:?}"
    );
    assert_eq!(ns.links(), ["lo"]);
    let status = lan.env.call("dhcp").command("STATUS").config(&conf).run();
    assert!(status.failure(50).starts_with("error dialing DHCP daemon"));
}

/// The daemon dies (SIGKILL) between ADD and DEL: the next one restores the lease from its
/// record, renews it, answers CHECK, and DEL releases it.
#[test]
fn the_daemon_killed_and_restarted_between_add_and_del() {
    let (mut lan, _) = renewing_every_3s(100, (10, 250));
    let ns = lan.env.container();
    let id = common::unique("k");
    let conf = lan.conf("1.0.0", json!({}));
    let result = lan.call("ADD", &id, &ns, &conf).success();
    let ip = Lan::address_of(&result);
    lan.stop_daemon(Signal::SIGKILL);
    assert!(lan.socket().exists(), "a killed daemon leaves its socket");
    lan.start_daemon(Which::Cnibox, DAEMON);
    log_has(&lan, &id, "lease restored").unwrap();
    lan.call("CHECK", &id, &ns, &with_prev(&conf, &result)).success();
    renewals_seen(&lan, &id, 1);
    lan.call("DEL", &id, &ns, &with_prev(&conf, &result)).success();
    lan.wait_released(&ip);
    assert!(lan.records().is_empty());
}

/// SIGTERM ends the daemon and nothing else: the lease stays with the server and in the
/// records, the socket and the pid file go; the next daemon releases it on DEL.
#[test]
fn sigterm_releases_nothing() {
    let mut lan = Lan::new(Uplink::Macvlan);
    lan.start_server(ServerKind::Dnsmasq, &ServerOpts::default());
    lan.start_daemon(Which::Cnibox, DAEMON);
    assert!(lan.path("dhcp.pid").exists());
    let ns = lan.env.container();
    let id = common::unique("t");
    let conf = lan.conf("1.0.0", json!({}));
    let ip = Lan::address_of(&lan.call("ADD", &id, &ns, &conf).success());
    lan.stop_daemon(Signal::SIGTERM);
    assert_path_gone(&lan.socket());
    assert_path_gone(&lan.path("dhcp.pid"));
    assert!(lan.lease_of(&ip).is_some());
    assert_eq!(lan.records().len(), 1);
    lan.start_daemon(Which::Cnibox, DAEMON);
    lan.call("DEL", &id, &ns, &conf).success();
    lan.wait_released(&ip);
}

/// The daemon is one thread, and between exchanges it holds no socket in a container: only
/// its listening socket (and signalfd) are open.
#[test]
fn the_daemon_is_one_thread_and_holds_nothing_of_the_containers() {
    let mut lan = Lan::new(Uplink::Macvlan);
    lan.start_server(ServerKind::Dnsmasq, &ServerOpts::default());
    lan.start_daemon(Which::Cnibox, DAEMON);
    let conf = lan.conf("1.0.0", json!({}));
    let containers: Vec<(String, Netns)> = (0..3).map(|_| (common::unique("o"), lan.env.container())).collect();
    for (id, ns) in &containers {
        lan.call("ADD", id, ns, &conf).success();
    }
    let pid = lan.daemon_pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.lines().any(|l| l == "Threads:\t1"), "{status}");
    // the plugins' connections close as they exit
    wait_until(SECS(5), "only the listening socket open", || {
        let sockets = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:")))
            .count();
        match sockets {
            1 => Ok(()),
            n => Err(format!("{n} sockets")),
        }
    });
    for (id, ns) in &containers {
        lan.call("DEL", id, ns, &conf).success();
    }
}

/// `provide` (the host name from `K8S_POD_NAME`) reaches the server, `request` asks for
/// option 121, whose routes replace the router's default route; `priority` sets each
/// route's metric.
#[test]
fn options_reach_the_server_and_classless_routes_come_back() {
    let mut lan = Lan::new(Uplink::Macvlan);
    let opts = ServerOpts {
        extra: vec![format!("--dhcp-option=121,10.99.0.0/16,{NET}.254,0.0.0.0/0,{SERVER}")],
        ..ServerOpts::default()
    };
    lan.start_server(ServerKind::Dnsmasq, &opts);
    lan.start_daemon(Which::Cnibox, DAEMON);
    let ns = lan.env.container();
    let id = common::unique("p");
    let conf = lan.conf(
        "1.1.0",
        json!({
            "provide": [{"option": "host-name", "fromArg": "K8S_POD_NAME"}],
            "request": [{"option": "121"}],
            "priority": 50,
        }),
    );
    let result = lan
        .plugin(Which::Cnibox)
        .verb("ADD", &id, ns.path_str(), "eth0")
        .env(
            "CNI_ARGS",
            "IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default",
        )
        .config(&conf)
        .run()
        .success();
    assert_eq!(
        result["routes"],
        json!([
            {"dst": "10.99.0.0/16", "gw": format!("{NET}.254"), "priority": 50},
            {"dst": "0.0.0.0/0", "gw": SERVER, "priority": 50},
        ])
    );
    let ip = Lan::address_of(&result);
    assert_eq!(lan.lease_of(&ip).unwrap().hostname, "web-0");
    let routes = ns.ip(&["route", "show", "10.99.0.0/16"]);
    assert!(
        routes.contains(&format!("via {NET}.254")) && routes.contains("metric 50"),
        "{routes}"
    );
    lan.call("DEL", &id, &ns, &conf).success();
}

/// Started by systemd's socket activation (`LISTEN_PID`, `LISTEN_FDS=1`, the socket as
/// descriptor 3), the daemon serves on that socket and leaves it alone when it stops.
#[test]
fn the_daemon_takes_systemds_socket() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let mut lan = Lan::new(Uplink::Macvlan);
    let socket = lan.path("activated.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let fd = listener.as_raw_fd();
    let log = std::fs::File::create(lan.path("activated.log")).unwrap();
    // unshare execs sh in its own process: `$$` is the daemon's PID after sh's exec too
    let mut c = lan.env.host.command("unshare");
    c.args(["-m", "--propagation", "slave", "sh", "-c"])
        .arg("LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" dhcp daemon -statedir \"$1\"")
        .arg(common::cnibox())
        .arg(lan.state_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    // SAFETY: only dup2(2) or fcntl(2) between fork and exec.
    unsafe {
        c.pre_exec(move || {
            // dup2 of a descriptor onto itself keeps its close-on-exec flag
            let r = match fd {
                3 => libc::fcntl(3, libc::F_SETFD, 0),
                _ => libc::dup2(fd, 3),
            };
            match r {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(()),
            }
        });
    }
    // the Lan ends it, even when the test fails
    lan.daemon = Some(super::Daemon {
        child: c.spawn().unwrap(),
    });
    drop(listener);
    let mut conf = lan.conf("1.1.0", json!({}));
    conf["ipam"]["daemonSocketPath"] = json!(socket);
    let status = || lan.env.call("dhcp").command("STATUS").config(&conf).run();
    wait_until(SECS(10), "the activated daemon", || match status() {
        s if s.ok() => Ok(()),
        s => Err(format!(
            "{s:?}; {}",
            std::fs::read_to_string(lan.path("activated.log")).unwrap_or_default()
        )),
    });
    let log = std::fs::read_to_string(lan.path("activated.log")).unwrap();
    assert!(log.contains("listening on the socket systemd passed"), "{log}");
    lan.stop_daemon(Signal::SIGTERM);
    assert!(socket.exists(), "systemd's socket stays");
}

/// Socket activation with a descriptor 3 that is no socket fails at start, naming it. Before,
/// the daemon took whatever descriptor 3 was (the test's own listener, closed at exec, left
/// it to the signalfd) and served on it: it said it was listening and never accepted.
#[test]
fn the_daemon_refuses_an_activation_descriptor_that_is_no_socket() {
    let mut lan = Lan::new(Uplink::Macvlan);
    let log = std::fs::File::create(lan.path("activated.log")).unwrap();
    let mut c = lan.env.host.command("unshare");
    c.args(["-m", "--propagation", "slave", "sh", "-c"])
        .arg("LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" dhcp daemon -statedir \"$1\" 3</dev/null")
        .arg(common::cnibox())
        .arg(lan.state_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    lan.daemon = Some(super::Daemon {
        child: c.spawn().unwrap(),
    });
    let child = &mut lan.daemon.as_mut().unwrap().child;
    let mut exited = None;
    wait_until(SECS(5), "the daemon to exit", || match child.try_wait().unwrap() {
        Some(status) => {
            exited = Some(status);
            Ok(())
        }
        None => Err("still running".into()),
    });
    assert!(!exited.unwrap().success());
    let log = std::fs::read_to_string(lan.path("activated.log")).unwrap();
    assert!(log.contains("LISTEN_FDS=1, but descriptor 3 is no socket"), "{log}");
}

/// The DEL matrix of the dhcp applet, called directly on an interface made for it, in every
/// spec version: normal, repeated, without CNI_NETNS, the namespace deleted, the interface
/// deleted, no prevResult, a prevResult of another version, the daemon restarted since ADD,
/// and its record gone. Every DEL succeeds and leaves no record; where the interface is
/// still there the lease is released.
#[test]
fn del_matrix() {
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Cell {
        Normal,
        Repeated,
        EmptyNetns,
        NetnsDeleted,
        LinkDeleted,
        NoPrevResult,
        PrevResultOfAnotherVersion,
        DaemonRestarted,
        RecordGone,
    }
    use Cell::*;
    let cells = [
        Normal,
        Repeated,
        EmptyNetns,
        NetnsDeleted,
        LinkDeleted,
        NoPrevResult,
        PrevResultOfAnotherVersion,
        DaemonRestarted,
        RecordGone,
    ];
    let mut lan = Lan::new(Uplink::Macvlan);
    lan.start_server(ServerKind::Dnsmasq, &ServerOpts::default());
    lan.start_daemon(Which::Cnibox, DAEMON);
    let mut n = 0;
    for version in ALL_VERSIONS {
        let conf = ipam_conf(&lan, version, json!({}));
        for cell in cells {
            n += 1;
            let what = format!("{version} {cell:?}");
            let mut ns = lan.env.container();
            interface_in(&lan, &ns, &format!("02:00:00:00:{:02x}:{:02x}", n / 256, n % 256));
            let id = format!("dm{n}");
            let call = |lan: &Lan, verb: &str, netns: &str, c: &Value| {
                dhcp_call(lan, Which::Cnibox).exec(verb, &id, netns, "eth0", c)
            };
            let result = call(&lan, "ADD", ns.path_str(), &conf).success();
            let ip = Lan::address_of(&result);
            let normal = if *version >= "0.4.0" {
                with_prev(&conf, &result)
            } else {
                conf.clone()
            };
            let path = ns.path_str().to_string();
            let releases = !matches!(cell, NetnsDeleted | LinkDeleted | RecordGone);
            match cell {
                Normal => call(&lan, "DEL", &path, &normal).success(),
                Repeated => {
                    call(&lan, "DEL", &path, &normal).success();
                    call(&lan, "DEL", &path, &normal).success();
                    call(&lan, "DEL", &path, &conf).success()
                }
                EmptyNetns => call(&lan, "DEL", "", &normal).success(),
                NetnsDeleted => {
                    ns = lan.env.container();
                    call(&lan, "DEL", &path, &normal).success();
                    call(&lan, "DEL", &path, &normal).success()
                }
                LinkDeleted => {
                    ns.ip(&["link", "del", "eth0"]);
                    call(&lan, "DEL", &path, &normal).success()
                }
                NoPrevResult => call(&lan, "DEL", &path, &conf).success(),
                PrevResultOfAnotherVersion => {
                    let other = if *version >= "1.0.0" { "0.4.0" } else { "1.0.0" };
                    let parsed = cnibox::cni::CniResult::from_json(&cnibox::cni::json::Json::from(&result)).unwrap();
                    call(&lan, "DEL", &path, &with_prev(&conf, &parsed.to_json(other).unwrap())).success()
                }
                DaemonRestarted => {
                    lan.stop_daemon(Signal::SIGKILL);
                    lan.start_daemon(Which::Cnibox, DAEMON);
                    call(&lan, "DEL", &path, &normal).success()
                }
                RecordGone => {
                    lan.stop_daemon(Signal::SIGKILL);
                    std::fs::remove_dir_all(lan.state_dir()).unwrap();
                    lan.start_daemon(Which::Cnibox, DAEMON);
                    call(&lan, "DEL", &path, &normal).success()
                }
            };
            assert!(lan.records().is_empty(), "{what}: records left: {:?}", lan.records());
            if releases {
                lan.wait_released(&ip);
            }
            drop(ns);
        }
    }
    eprintln!("DEL matrix dhcp: {n} cells passed");
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("dhcp");
}

/// Replies a hostile or broken server sends before the right ones (truncated, another
/// transaction, another client, no usable address, an option running past the end, a lease
/// of 0 s) are ignored; the lease comes from the good ones, and an infinite lease (2^32-1 s)
/// is held without renewals.
#[test]
fn hostile_replies_are_ignored() {
    let mut lan = Lan::new(Uplink::Macvlan);
    lan.start_daemon(Which::Cnibox, DAEMON);
    let server = hostile::serve(&lan.lan);
    let ns = lan.env.container();
    let id = common::unique("h");
    let result = lan.call("ADD", &id, &ns, &lan.conf("1.0.0", json!({}))).success();
    assert_eq!(result["ips"][0]["address"], format!("{NET}.42/24"));
    let sent = server.join().unwrap();
    assert_eq!(sent, 22, "replies sent");
    log_has(&lan, &id, "expiration is never").unwrap();
    assert!(lan.daemon_running(), "the daemon lives");
    lan.call("DEL", &id, &ns, &lan.conf("1.0.0", json!({}))).success();
}

/// A server in the LAN namespace (a thread with a UDP socket on port 67 there) that
/// answers each client message with broken replies first and a good one last.
mod hostile {
    use crate::common::Netns;
    use std::net::{Ipv4Addr, UdpSocket};
    use std::os::fd::AsRawFd;

    fn reply(kind: u8, xid: &[u8], chaddr: &[u8], yiaddr: [u8; 4], lease: u32, extra: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; 236];
        m[..4].copy_from_slice(&[2, 1, 6, 0]);
        m[4..8].copy_from_slice(xid);
        m[16..20].copy_from_slice(&yiaddr);
        m[28..44].copy_from_slice(chaddr);
        m.extend_from_slice(&[
            99, 130, 83, 99, 53, 1, kind, 54, 4, 10, 77, 0, 1, 1, 4, 255, 255, 255, 0, 3, 4, 10, 77, 0, 1,
        ]);
        m.extend_from_slice(&[51, 4]);
        m.extend_from_slice(&lease.to_be_bytes());
        m.extend_from_slice(extra);
        m.push(255);
        m
    }

    /// Serves one DISCOVER and one REQUEST; returns how many replies it sent.
    pub fn serve(lan: &Netns) -> std::thread::JoinHandle<usize> {
        let ns = std::fs::File::open(&lan.path).unwrap();
        std::thread::spawn(move || {
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let s = UdpSocket::bind("0.0.0.0:67").unwrap();
            let dev = b"srv0\0";
            // SAFETY: setsockopt with a buffer of the length given.
            let rc = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_BINDTODEVICE,
                    dev.as_ptr() as *const libc::c_void,
                    dev.len() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0);
            s.set_broadcast(true).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
            let to = (Ipv4Addr::BROADCAST, 68);
            let good: [u8; 4] = [10, 77, 0, 42];
            let mut sent = 0;
            let mut buf = [0u8; 1500];
            for answer in [2u8, 5] {
                loop {
                    let (n, _) = s.recv_from(&mut buf).expect("a client message");
                    let kind = buf[240..n].windows(3).find(|w| w[0] == 53 && w[1] == 1).map(|w| w[2]);
                    if kind == Some(if answer == 2 { 1 } else { 3 }) {
                        break;
                    }
                }
                let (xid, chaddr) = (buf[4..8].to_vec(), buf[28..44].to_vec());
                let mut other_xid = xid.clone();
                other_xid[0] ^= 0xff;
                let mut other_mac = chaddr.clone();
                other_mac[5] ^= 0xff;
                let well = reply(answer, &xid, &chaddr, good, 600, &[]);
                let mut bad = vec![
                    well[..100].to_vec(),
                    well[..250].to_vec(),
                    reply(answer, &other_xid, &chaddr, good, 600, &[]),
                    reply(answer, &xid, &other_mac, good, 600, &[]),
                    reply(answer, &xid, &chaddr, [0, 0, 0, 0], 600, &[]),
                    reply(answer, &xid, &chaddr, [255, 255, 255, 255], 600, &[]),
                    reply(answer, &xid, &chaddr, [10, 77, 0, 0], 600, &[]),
                    reply(answer, &xid, &chaddr, good, 600, &[121, 200, 1]),
                    reply(answer, &xid, &chaddr, good, 0, &[]),
                ];
                let mut no_end = well.clone();
                no_end.pop();
                bad.push(no_end);
                let last = if answer == 5 {
                    reply(answer, &xid, &chaddr, good, u32::MAX, &[])
                } else {
                    well
                };
                bad.push(last);
                for m in bad {
                    s.send_to(&m, to).unwrap();
                    sent += 1;
                }
            }
            sent
        })
    }
}
