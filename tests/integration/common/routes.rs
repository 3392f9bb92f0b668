//! Routing tables in comparable form, for the tests of containers on several networks and
//! their differential runs against the reference.
use super::{Call, Netns};
use serde_json::Value;

/// Test network `n` (0 or 1) of one family: its subnet and gateway (host-local's first
/// address), and the container interface it gets (`eth0`, `eth1`).
pub struct TestNetwork {
    pub subnet: &'static str,
    pub gateway: &'static str,
    pub ifname: &'static str,
    /// The family's default destination and `ip` option.
    pub default: &'static str,
    pub family: &'static str,
}

pub fn network(n: usize, v6: bool) -> TestNetwork {
    let (subnet, gateway) = match (n, v6) {
        (0, false) => ("10.1.2.0/24", "10.1.2.1"),
        (_, false) => ("10.1.3.0/24", "10.1.3.1"),
        (0, true) => ("2001:db8:a::/64", "2001:db8:a::1"),
        (_, true) => ("2001:db8:b::/64", "2001:db8:b::1"),
    };
    TestNetwork {
        subnet,
        gateway,
        ifname: ["eth0", "eth1"][n.min(1)],
        default: if v6 { "::/0" } else { "0.0.0.0/0" },
        family: if v6 { "-6" } else { "-4" },
    }
}

/// The main table of `family` ("-4" or "-6") as one line per route, sorted: destination,
/// protocol, metric and scope, then every next hop (`via GW dev DEV`; a multipath route
/// lists all of its next hops in one line). Link-local and multicast routes are left out.
pub fn route_lines(ns: &Netns, family: &str) -> Vec<String> {
    let mut out = vec![];
    for r in ns
        .ip_json(&[family, "route", "show", "table", "main"])
        .as_array()
        .unwrap()
    {
        let dst = r["dst"].as_str().unwrap_or_default();
        if dst.starts_with("fe80") || dst.starts_with("ff00") {
            continue;
        }
        let hop = |h: &Value| {
            let via = h["gateway"].as_str().map(|g| format!("via {g} ")).unwrap_or_default();
            format!("{via}dev {}", h["dev"].as_str().unwrap_or("-"))
        };
        let hops: Vec<String> = match r["nexthops"].as_array() {
            Some(list) => list.iter().map(hop).collect(),
            None => vec![hop(r)],
        };
        out.push(format!(
            "{dst} proto {} metric {} scope {}: {}",
            r["protocol"].as_str().unwrap_or("-"),
            r["metric"].as_u64().unwrap_or(0),
            r["scope"].as_str().unwrap_or("global"),
            hops.join(", ")
        ));
    }
    out.sort();
    out
}

/// The default route's next hops of `family` as `via GW dev DEV`, sorted, whether they are
/// separate routes (IPv4) or one multipath route (IPv6).
pub fn default_next_hops(ns: &Netns, family: &str) -> Vec<String> {
    let mut out: Vec<String> = route_lines(ns, family)
        .iter()
        .filter(|l| l.starts_with("default "))
        .flat_map(|l| {
            let hops = l.split_once(": ").map(|(_, h)| h).unwrap_or_default();
            hops.split(", ").map(str::to_string).collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out
}

/// New links in `ns` skip IPv6 DAD (`conf/default/accept_dad=0`): the routing tests are not
/// about DAD, and waiting for it on every ADD (both implementations do on macvlan, the
/// reference also on veth) would only make them slow.
pub fn without_dad(ns: &Netns) {
    ns.exec(&["sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad"]);
}

/// What a routing daemon (or another interface) does to a container's IPv6 default route:
/// a second next hop appended through a link of its own (`rtx0`), so the route becomes
/// multipath.
pub fn append_v6_default_next_hop(ns: &Netns) {
    ns.ip(&["link", "add", "rtx0", "type", "veth", "peer", "name", "rtx1"]);
    ns.ip(&["link", "set", "rtx0", "up"]);
    ns.ip(&["link", "set", "rtx1", "up"]);
    ns.ip(&["-6", "addr", "add", "2001:db8:ffff::2/64", "dev", "rtx0", "nodad"]);
    ns.ip(&[
        "-6",
        "route",
        "append",
        "default",
        "via",
        "2001:db8:ffff::1",
        "dev",
        "rtx0",
        "metric",
        "1024",
    ]);
    let hops = default_next_hops(ns, "-6");
    assert!(hops.len() >= 2, "the default route did not become multipath: {hops:?}");
}

/// Makes plugin config `c` network `n` of one family: its name (`neta`, `netb`), its subnet
/// as the only host-local range, and IPAM `routes`.
pub fn make_network(c: &mut Value, n: usize, v6: bool, routes: Value) {
    c["name"] = ["neta", "netb"][n.min(1)].into();
    c["ipam"]["ranges"] = serde_json::json!([[{ "subnet": network(n, v6).subnet }]]);
    c["ipam"]["routes"] = routes;
}

/// IPAM routes with network `n`'s default route (no gateway: the plugin fills it in).
pub fn default_route(n: usize, v6: bool) -> Value {
    serde_json::json!([{ "dst": network(n, v6).default }])
}

/// The subnet of `net` is routed twice on its interface: the kernel's route and, beside it,
/// the IPAM route via the gateway.
pub fn assert_own_subnet_routed_both_ways(ns: &Netns, net: &TestNetwork, what: &str) {
    let lines = route_lines(ns, net.family);
    let on = |l: &&String| l.starts_with(&format!("{} ", net.subnet));
    assert!(
        lines.iter().filter(on).any(|l| l.contains(" proto kernel ")),
        "{what}: no kernel route: {lines:?}"
    );
    let via = format!(": via {} dev {}", net.gateway, net.ifname);
    assert!(
        lines.iter().filter(on).any(|l| l.ends_with(&via)),
        "{what}: no route via the gateway: {lines:?}"
    );
}

/// The versions the differential routing tests run: one of each result shape (0.2.0, 0.4.0,
/// 1.0.0) that the reference speaks; the regression tests themselves run every version.
pub const DIFFERENTIAL_VERSIONS: &[&str] = &["0.2.0", "0.4.0", "1.0.0"];

fn check_allowed(version: &str) -> bool {
    !matches!(version, "0.1.0" | "0.2.0" | "0.3.0" | "0.3.1")
}

fn with_prev(c: &Value, prev: &Value) -> Value {
    let mut c = c.clone();
    c["prevResult"] = prev.clone();
    c
}

/// A container on networks 0 and 1 of one family, whose configs (`conf(n)`) both carry
/// the default route, through any plugin (`call()`): both ADDs succeed and the container
/// has a default next hop via each gateway (IPv4: two routes; IPv6: one multipath route),
/// CHECK of either attachment passes (versions with CHECK), and DEL of network 1 leaves
/// network 0's next hop alone.
pub fn two_networks_case(call: &dyn Fn() -> Call, ctr: &Netns, version: &str, v6: bool, conf: &dyn Fn(usize) -> Value) {
    let nets = [network(0, v6), network(1, v6)];
    let confs = [conf(0), conf(1)];
    let results: Vec<Value> = nets
        .iter()
        .zip(&confs)
        .map(|(net, c)| call().exec("ADD", "two", ctr.path_str(), net.ifname, c).success())
        .collect();
    let fam = nets[0].family;
    let hop = |net: &TestNetwork| format!("via {} dev {}", net.gateway, net.ifname);
    assert_eq!(
        default_next_hops(ctr, fam),
        vec![hop(&nets[0]), hop(&nets[1])],
        "{version} {fam}: {:?}",
        route_lines(ctr, fam)
    );
    if check_allowed(version) {
        for ((net, c), r) in nets.iter().zip(&confs).zip(&results) {
            call()
                .exec("CHECK", "two", ctr.path_str(), net.ifname, &with_prev(c, r))
                .success();
        }
    }
    call()
        .exec(
            "DEL",
            "two",
            ctr.path_str(),
            nets[1].ifname,
            &with_prev(&confs[1], &results[1]),
        )
        .success();
    assert_eq!(default_next_hops(ctr, fam), vec![hop(&nets[0])], "{version} {fam}");
    call()
        .exec(
            "DEL",
            "two",
            ctr.path_str(),
            nets[0].ifname,
            &with_prev(&confs[0], &results[0]),
        )
        .success();
}

/// CHECK tolerates later additions (as the spec asks): `conf` is network 0 (IPv6) with the
/// default route via its gateway; after a routing daemon appended a next hop to it, CHECK
/// still finds the gateway among the route's next hops.
pub fn multipath_check_case(call: &dyn Fn() -> Call, ctr: &Netns, conf: &Value) {
    let ifname = network(0, true).ifname;
    let r = call().exec("ADD", "mp", ctr.path_str(), ifname, conf).success();
    append_v6_default_next_hop(ctr);
    call()
        .exec("CHECK", "mp", ctr.path_str(), ifname, &with_prev(conf, &r))
        .success();
    call()
        .exec("DEL", "mp", ctr.path_str(), ifname, &with_prev(conf, &r))
        .success();
}

/// The routing tables (IPv4, IPv6) a container has after ADD of networks 0 and 1
/// (`conf(n)`) through `call()`; both are deleted again afterwards.
pub fn tables_after_two_adds(
    call: &dyn Fn() -> Call,
    ctr: &Netns,
    v6: bool,
    conf: &dyn Fn(usize) -> Value,
) -> (Vec<String>, Vec<String>) {
    let nets = [network(0, v6), network(1, v6)];
    let results: Vec<Value> = nets
        .iter()
        .enumerate()
        .map(|(n, net)| {
            call()
                .exec("ADD", "two", ctr.path_str(), net.ifname, &conf(n))
                .success()
        })
        .collect();
    let tables = (route_lines(ctr, "-4"), route_lines(ctr, "-6"));
    for (n, net) in nets.iter().enumerate().rev() {
        call()
            .exec(
                "DEL",
                "two",
                ctr.path_str(),
                net.ifname,
                &with_prev(&conf(n), &results[n]),
            )
            .success();
    }
    tables
}
