//! The reference's dhcp plugin and daemon (Debian's, v1.1.1) beside cnibox's on the same
//! server; and each plugin with the other's daemon (they speak the same protocol).
use super::*;
use crate::plugin_state::with_prev;
use nix::sys::signal::Signal;

/// Debian's daemon has no `-resendtimeout`.
const REFERENCE_DAEMON: &[&str] = &["-timeout", "1s", "-resendmax", "1s"];
/// The container interface's MAC, the same for both runs: dnsmasq picks an address from it.
const MAC: &str = "02:00:00:00:77:01";

fn daemon_flags(which: Which) -> &'static [&'static str] {
    match which {
        Which::Cnibox => DAEMON,
        Which::Reference => REFERENCE_DAEMON,
    }
}

/// What an ADD and a DEL through `which`'s plugin and daemon come to: ADD's result, the
/// server's lease while held (its expiry left out), and the server's leases after DEL.
fn lease_life(
    lan: &mut Lan,
    which: Which,
    id: &str,
    conf: &Value,
    cni_args: &str,
) -> (Value, ServerLease, Vec<ServerLease>) {
    lan.start_daemon(which, daemon_flags(which));
    let ns = lan.env.container();
    interface_in(lan, &ns, MAC);
    let call = |verb: &str, c: &Value| {
        dhcp_call(lan, which)
            .verb(verb, id, ns.path_str(), "eth0")
            .env("CNI_ARGS", cni_args)
            .config(c)
            .run()
    };
    let result = call("ADD", conf).success();
    let ip = Lan::address_of(&result);
    let mut held = None;
    wait_until(Duration::from_secs(5), "the lease in dnsmasq's file", || {
        held = lan.lease_of(&ip);
        held.as_ref().map(drop).ok_or_else(|| format!("{:?}", lan.leases()))
    });
    let mut held = held.unwrap();
    held.expires = 0;
    call("DEL", &with_prev(conf, &result)).success();
    lan.wait_released(&ip);
    let after = lan.leases();
    lan.stop_daemon(Signal::SIGTERM);
    // now: the next run's macvlan with the same MAC cannot come up beside it
    ns.ip(&["link", "del", "eth0"]);
    (result, held, after)
}

/// The same ADD and DEL through the reference's plugin and daemon, then through cnibox's,
/// against one dnsmasq: equal results, the same lease in dnsmasq's file (MAC, address,
/// host name, client identifier), nothing left after DEL. With a host name from
/// `K8S_POD_NAME` and option 121 requested too.
#[test]
fn same_results_and_server_state_as_the_reference() {
    if common::reference_dir().is_none() {
        return;
    }
    let mut lan = Lan::new(Uplink::Macvlan);
    let opts = ServerOpts {
        extra: vec![format!("--dhcp-option=121,10.99.0.0/16,{NET}.254,0.0.0.0/0,{SERVER}")],
        ..ServerOpts::default()
    };
    lan.start_server(ServerKind::Dnsmasq, &opts);
    let rich = json!({
        "provide": [{"option": "host-name", "fromArg": "K8S_POD_NAME"}],
        "request": [{"option": "121"}],
    });
    let cases = [
        ("1.0.0", json!({})),
        ("0.3.1", json!({})),
        ("0.2.0", json!({})),
        ("1.0.0", rich),
    ];
    for (n, (version, ipam)) in cases.iter().enumerate() {
        let conf = ipam_conf(&lan, version, ipam.clone());
        let id = format!("diff{n}");
        let args = "IgnoreUnknown=1;K8S_POD_NAME=web-0";
        let theirs = lease_life(&mut lan, Which::Reference, &id, &conf, args);
        let ours = lease_life(&mut lan, Which::Cnibox, &id, &conf, args);
        assert_eq!(
            ours.0, theirs.0,
            "{version} {ipam}: results (left: cnibox, right: the reference)"
        );
        assert_eq!(ours.1, theirs.1, "{version} {ipam}: the lease in dnsmasq's file");
        assert_eq!(ours.2, theirs.2, "{version} {ipam}: dnsmasq's leases after DEL");
        assert!(ours.2.is_empty(), "{:?}", ours.2);
        eprintln!("{version} {ipam}: {}", ours.0);
    }
}

/// ADD, CHECK and DEL through `plugin`'s plugins and `daemon`'s daemon, one of each (they
/// speak the same protocol): the lease is in the server's file while held and gone after
/// DEL; with cnibox's plugin the container reaches the server, with cnibox's daemon no
/// record is left.
fn interop(plugin: Which, daemon: Which, id: &str) {
    if common::reference_dir().is_none() {
        return;
    }
    let mut lan = Lan::new(Uplink::Macvlan);
    lan.start_server(ServerKind::Dnsmasq, &ServerOpts::default());
    lan.start_daemon(daemon, daemon_flags(daemon));
    let ns = lan.env.container();
    let conf = lan.conf("1.0.0", json!({}));
    let call = |verb: &str, c: &Value| lan.plugin(plugin).exec(verb, id, ns.path_str(), "eth0", c);
    let result = call("ADD", &conf).success();
    let ip = Lan::address_of(&result);
    assert!(lan.lease_of(&ip).is_some());
    if plugin == Which::Cnibox {
        assert!(ns.ping(SERVER));
    }
    let checked = with_prev(&conf, &result);
    call("CHECK", &checked).success();
    call("DEL", &checked).success();
    lan.wait_released(&ip);
    if daemon == Which::Cnibox {
        assert!(lan.records().is_empty());
    }
}

/// cnibox's plugins with the reference's daemon: ADD, CHECK (the reference's daemon has no
/// DHCP.Check: CHECK asks DHCP.Allocate, as the reference's plugin does), DEL.
#[test]
fn cnibox_plugin_with_the_reference_daemon() {
    interop(Which::Cnibox, Which::Reference, "interop1");
}

/// The reference's plugins with cnibox's daemon: ADD, CHECK, DEL.
#[test]
fn the_reference_plugin_with_cniboxs_daemon() {
    interop(Which::Reference, Which::Cnibox, "interop2");
}

/// No server: both fail ADD with the same error, each after its daemon's timeouts (the
/// reference's take about 18 s with a 1 s timeout: four quick retries and one backed off).
#[test]
fn no_server_is_the_same_error_as_the_references() {
    if common::reference_dir().is_none() {
        return;
    }
    let mut lan = Lan::new(Uplink::Macvlan);
    let mut answer = |which: Which, flags: &[&str]| {
        lan.start_daemon(which, flags);
        let ns = lan.env.container();
        interface_in(&lan, &ns, MAC);
        let conf = ipam_conf(&lan, "1.0.0", json!({}));
        let out = dhcp_call(&lan, which).exec("ADD", "noserver", ns.path_str(), "eth0", &conf);
        lan.stop_daemon(Signal::SIGTERM);
        ns.ip(&["link", "del", "eth0"]);
        out.failure(999)
    };
    let theirs = answer(Which::Reference, REFERENCE_DAEMON);
    let ours = answer(Which::Cnibox, &["-timeout", "1s", "-resendtimeout", "3s"]);
    assert_eq!(ours, theirs);
    assert!(lan.records().is_empty());
}
