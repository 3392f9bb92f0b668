//! The `sbr` meta plugin (source-based routing), chained after the interface plugin: traffic
//! from each of the interface's addresses is routed by a table of its own.
//!
//! ADD, for each address prevResult gives the interface: a rule `from ADDR lookup TABLE`
//! (the kernel gives it the next priority below the `main` rule: 32765, 32764, …), a default
//! route via the address's gateway (or the configured `gateways`) in that table, and a copy
//! of the interface's main-table routes that belong to the address (its source or gateway
//! in the address's network, or neither set); then the interface's routes leave the main
//! table (or, with `addSourceHints`, its subnet routes stay there with the address as the
//! preferred source). Tables are the first ones from 100 that no rule names and no route
//! uses. With `table`, ADD only adds the rules, to that table, and leaves routes alone.
//!
//! DEL removes the rules `from ADDR lookup …` of the interface's addresses (of `table` only,
//! when set) and, without `table`, the interface's routes in the tables those rules named.
//! CHECK succeeds without looking, as the reference's.
//!
//! Like the reference, ADD and DEL hold an exclusive lock on the namespace file while they
//! work, so concurrent sbr calls (cnibox's or the reference's) in one namespace do not
//! pick the same table.
use crate::cni::config as cniconf;
use crate::cni::json::{self, Json};
use crate::cni::result::IpConfig;
use crate::cni::{CniResult, Error, Plugin, Request};
use crate::netlink::{self, Family, Handle, RouteInfo, RouteSpec, RuleInfo, Scope, SourceRule, TABLE_MAIN};
use crate::netns::Netns;
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::{go_kernel_text, netns_open};
use ipnetwork::IpNetwork;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};

pub struct Sbr;

/// The first table ADD considers.
const FIRST_TABLE: u32 = 100;
/// The kernel's own tables: default, main, local.
const RT_TABLE_DEFAULT: u32 = 253;
const RT_TABLE_LOCAL: u32 = 255;

/// The reference's `PluginConf`.
#[derive(Debug)]
struct Conf {
    table: Option<u32>,
    /// The configured `gateways`: at most one per family, replacing prevResult's.
    gateway_v4: Option<IpAddr>,
    gateway_v6: Option<IpAddr>,
    add_source_hints: bool,
    prev: Option<CniResult>,
}

const CTX: &str = "failed to parse network configuration";

/// `gateways`, checked as the reference checks them. It does so in the namespace, after
/// listing rules and routes and finding the link, and only without `table`; nothing has
/// changed by then, so checking them first refuses the same configs with the same words.
fn gateways(list: &[String]) -> Result<(Option<IpAddr>, Option<IpAddr>), Error> {
    if list.len() > 2 {
        return Err(Error::internal(
            "gateways list cannot contain more than 2 entries (one IPv4, one IPv6)",
        ));
    }
    let (mut v4, mut v6) = (None, None);
    for gw in list {
        let ip = crate::cni::netaddr::parse_ip(gw)
            .ok_or_else(|| Error::internal(format!("invalid static gateway IP address: {gw}")))?;
        let (slot, family) = if ip.is_ipv4() {
            (&mut v4, "IPv4")
        } else {
            (&mut v6, "IPv6")
        };
        if let Some(first) = slot {
            return Err(Error::internal(format!(
                "gateways list contains multiple {family} addresses: {first} and {gw}"
            )));
        }
        *slot = Some(ip);
    }
    Ok((v4, v6))
}

/// A `table` a rule can name; the reference sends a negative one as table 0 (for IPv4 the
/// kernel then picks a free table itself, IPv6 refuses it) and cuts one beyond 32 bits.
fn table_id(t: i64) -> Result<u32, Error> {
    u32::try_from(t).map_err(|_| Error::internal(format!("table {t} is not a routing table id (0 to 4294967295)")))
}

/// `table` alone, skipping what does not decode (DEL's fallback).
fn table_leniently(req: &Request) -> Option<u32> {
    json::leniently(|| {
        let obj = json::as_object(&req.config, "PluginConf").ok()?;
        json::opt_ptr_int(&obj, "table", "PluginConf.table")
            .ok()?
            .and_then(|t| table_id(t).ok())
    })
}

fn load(req: &Request) -> Result<Conf, Error> {
    let ctx = |e: Error| e.context(CTX);
    cniconf::check_net_conf(&req.config, "PluginConf").map_err(ctx)?;
    let obj = json::as_object(&req.config, "PluginConf").map_err(ctx)?;
    let table = json::opt_ptr_int(&obj, "table", "PluginConf.table").map_err(ctx)?;
    let gateway_list = json::opt_str_list(&obj, "gateways", "PluginConf.gateways").map_err(ctx)?;
    let add_source_hints = json::opt_bool(&obj, "addSourceHints", "PluginConf.addSourceHints")
        .map_err(ctx)?
        .unwrap_or(false);
    let version = json::opt_str(&obj, "cniVersion", "PluginConf.cniVersion")
        .map_err(ctx)?
        .unwrap_or("");
    let prev = json::opt_map(&obj, "prevResult", "PluginConf.prevResult", "map[string]interface {}")
        .map_err(ctx)?
        .map(|raw| {
            CniResult::from_new_result(&Json::Object(json::Object::from_map(&raw)), version)
                .map_err(|e| e.context("could not parse prevResult"))
        })
        .transpose()?;
    let table = table.map(table_id).transpose()?;
    let (gateway_v4, gateway_v6) = match table {
        None => gateways(&gateway_list.unwrap_or_default())?,
        Some(_) => (None, None),
    };
    Ok(Conf {
        table,
        gateway_v4,
        gateway_v6,
        add_source_hints,
        prev,
    })
}

/// The addresses of prevResult on `ifname`: those whose interface is `ifname`, or names no
/// interface, or an index prevResult does not have (the reference's `getIPCfgs`).
fn addresses_of(ifname: &str, prev: &CniResult) -> Result<Vec<IpConfig>, Error> {
    if prev.ips.is_empty() {
        return Err(Error::internal(format!(
            "No IP addresses supplied on interface: {ifname}"
        )));
    }
    Ok(prev
        .ips
        .iter()
        .filter(|ip| match ip.interface.and_then(|i| prev.interfaces.get(i)) {
            Some(intf) => intf.name == ifname,
            None => true,
        })
        .cloned()
        .collect())
}

/// An exclusive lock on the namespace file, as the reference takes it (flock on the path it
/// opens), held until dropped.
fn lock(ns: &Netns) -> Result<nix::fcntl::Flock<OwnedFd>, Error> {
    let fd = ns
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::internal(format!("lock {}: {e}", ns.path().display())))?;
    crate::util::flock::wait(fd, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|e| Error::internal(format!("lock {}: {}", ns.path().display(), e.desc())))
}

/// `Failed to …: <errno text>`, the reference's words for a netlink failure.
fn failed(what: &str) -> impl Fn(netlink::Error) -> Error + '_ {
    move |e| Error::internal(format!("{what}: {}", go_kernel_text(&e)))
}

/// The whole address as a rule's source (`/32` or `/128`).
fn host_net(ip: IpAddr) -> IpNetwork {
    IpNetwork::new(ip, if ip.is_ipv4() { 32 } else { 128 }).expect("a host prefix fits its family")
}

/// The rule ADD made for `src` and `table`, as DEL or a rollback names it.
fn source_rule_info(src: IpAddr, table: u32) -> RuleInfo {
    RuleInfo {
        family: if src.is_ipv4() { Family::V4 } else { Family::V6 },
        priority: 0,
        src: Some(host_net(src)),
        dst: None,
        table,
        action: 1,
        more_selectors: false,
    }
}

fn add_rule<'a>(h: &'a Handle, rb: &mut Rollback<'a>, ip: IpAddr, table: u32, failure: &str) -> Result<(), Error> {
    let rule = SourceRule {
        src: host_net(ip),
        table,
    };
    h.add_source_rule(&rule).map_err(failed(failure))?;
    rb.push(format!("remove rule from {ip} lookup {table}"), move || {
        h.delete_rule(&source_rule_info(ip, table)).map_err(|e| e.to_string())
    });
    Ok(())
}

/// The tables in use (named by a rule, or holding a route), sorted for [`next_free`]. A
/// sorted `Vec`, not a `BTreeSet<u32>`: the set's code cost 3.5 KB of the binary.
fn tables_in_use(h: &Handle) -> Result<Vec<u32>, Error> {
    let rules = h.rules(Family::All).map_err(failed("Failed to list all rules"))?;
    let routes = h.routes(Family::All).map_err(failed("Failed to list all routes"))?;
    let mut tables: Vec<u32> = rules
        .iter()
        .map(|r| r.table)
        .chain(routes.iter().map(|r| r.table))
        .collect();
    crate::util::sort::sort(&mut tables);
    Ok(tables)
}

/// The first table from `from` on that is not in `used` (sorted).
fn next_free(used: &[u32], from: u32) -> u32 {
    (from..).find(|t| used.binary_search(t).is_err()).unwrap_or(from)
}

/// Whether the main-table route `r` goes to the table of `ip`: its preferred source or its
/// gateway lies in the address's network, or it has neither (a route of the link itself).
fn belongs_to(r: &RouteInfo, ip: &IpConfig) -> bool {
    let within = |a: Option<IpAddr>| a.is_some_and(|a| ip.address.contains(a));
    within(r.prefsrc) || within(r.gateway) || (r.prefsrc.is_none() && r.gateway.is_none())
}

/// Deletes the route; one already gone is fine (the copy of a default route replaced the
/// default route ADD added first, so both undo steps name one route).
fn delete_route_if_there(h: &Handle, route: &RouteSpec) -> netlink::Result<()> {
    match h.delete_route(route) {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

/// The default route of `family` via `gw` on `oif` in `table`.
fn default_route(v4: bool, gw: IpAddr, oif: u32, table: u32) -> RouteSpec {
    let dst = if v4 { "0.0.0.0/0" } else { "::/0" };
    RouteSpec {
        gateway: Some(gw),
        oif: Some(oif),
        table: Some(table),
        ..RouteSpec::new(dst.parse().expect("a default route parses"))
    }
}

fn link(h: &Handle, ifname: &str) -> Result<netlink::Link, Error> {
    h.link_by_name(ifname)?
        .ok_or_else(|| Error::internal(format!("Cannot find network interface {ifname}: Link not found")))
}

/// ADD without `table` (the reference's `doRoutes`).
fn route_by_source<'a>(
    h: &'a Handle,
    rb: &mut Rollback<'a>,
    ifname: &str,
    ips: &[IpConfig],
    conf: &Conf,
) -> Result<(), Error> {
    let used = tables_in_use(h)?;
    let mut table = next_free(&used, FIRST_TABLE);
    let link = link(h, ifname)?;
    let routes: Vec<RouteInfo> = h
        .routes(Family::All)
        .map_err(failed("Unable to list routes"))?
        .into_iter()
        .filter(|r| r.table == TABLE_MAIN && r.oif == Some(link.index) && r.nexthops.is_empty())
        .collect();
    for ip in ips {
        let addr = ip.address.ip();
        add_rule(h, rb, addr, table, "Failed to add rule")?;
        let configured = if addr.is_ipv4() {
            conf.gateway_v4
        } else {
            conf.gateway_v6
        };
        // the previous plugin may have removed the default route: each table gets its own
        if let Some(gw) = configured.or(ip.gateway) {
            let route = default_route(addr.is_ipv4(), gw, link.index, table);
            h.add_route(&route)
                .map_err(|e| Error::internal(format!("Failed to add default route to {gw}: {}", go_kernel_text(&e))))?;
            rb.push(format!("remove default route via {gw} from table {table}"), move || {
                delete_route_if_there(h, &route).map_err(|e| e.to_string())
            });
        }
        // the routes are copied now and leave the main table only once every address has its
        // copies: two addresses of one subnet each need them. A configured gateway's default
        // route is not replaced by a copy of the main table's (the reference's copy does so
        // whenever the interface has a default route in main, undoing `gateways`).
        let keeps_own_default =
            |r: &&RouteInfo| configured.is_none() || r.dst.prefix() != 0 || r.dst.is_ipv4() != addr.is_ipv4();
        for r in routes.iter().filter(|r| belongs_to(r, ip)).filter(keeps_own_default) {
            let Some(copy) = r.in_table(table) else { continue };
            h.replace_route(&copy).map_err(failed("Failed to readd route"))?;
            rb.push(format!("remove the copy of {} in table {table}", r.dst), move || {
                delete_route_if_there(h, &copy).map_err(|e| e.to_string())
            });
        }
        table = next_free(&used, table + 1);
    }
    if conf.add_source_hints {
        add_source_hints(h, link.index, ips, &routes);
        return Ok(());
    }
    for r in &routes {
        let Some(spec) = r.in_table(r.table) else { continue };
        h.delete_route(&spec).map_err(failed("Failed to delete route"))?;
        rb.push(format!("put back {} in the main table", r.dst), move || {
            h.add_route(&spec).map_err(|e| e.to_string())
        });
    }
    Ok(())
}

/// `addSourceHints`: each address's subnet route stays in (or comes back to) the main table
/// with the address as preferred source, so traffic that names no source still finds its
/// way by destination; the link's other main-table routes go. Failures here are warnings,
/// as in the reference.
fn add_source_hints(h: &Handle, oif: u32, ips: &[IpConfig], routes: &[RouteInfo]) {
    for ip in ips {
        let subnet = crate::cni::netaddr::network_of(ip.address);
        let hint = RouteSpec {
            oif: Some(oif),
            prefsrc: Some(ip.address.ip()),
            scope: Some(Scope::Link),
            table: Some(TABLE_MAIN),
            ..RouteSpec::new(subnet)
        };
        if let Err(e) = h.replace_route(&hint) {
            eprintln!("cnibox sbr: warning: failed to add subnet route to main table: {e}");
        }
    }
    for r in routes.iter().filter(|r| r.scope != Scope::Link) {
        let Some(spec) = r.in_table(r.table) else { continue };
        if let Err(e) = h.delete_route(&spec) {
            eprintln!("cnibox sbr: warning: failed to delete route: {e}");
        }
    }
}

/// DEL's work in the namespace (the reference's `tidyRules`): the rules from `addresses`,
/// of `table` when set (0: any), and without `table` the link's routes in the tables those
/// rules named. Keeps going after a failure and reports the last.
fn tidy(h: &Handle, ifname: &str, table: Option<u32>, prev: Option<&CniResult>) -> Result<(), Error> {
    let link = h.link_by_name(ifname)?;
    let addresses: Vec<IpAddr> = match &link {
        Some(l) => h
            .addresses(Some(l.index), Family::All)
            .map_err(failed("Failed to list all addrs"))?
            .iter()
            .map(|a| a.address.ip())
            .collect(),
        // the link is gone, and its routes with it: prevResult still says which rules were
        // this interface's (the reference leaves them)
        None => match prev {
            Some(p) => addresses_of(ifname, p)
                .unwrap_or_default()
                .iter()
                .map(|i| i.address.ip())
                .collect(),
            None => return Ok(()),
        },
    };
    let rules = h.rules(Family::All).map_err(|e| match table {
        Some(t) => Error::internal(format!(
            "failed to list rules of table {t} to tidy: {}",
            go_kernel_text(&e)
        )),
        None => Error::internal(format!("Failed to list all rules to tidy: {}", go_kernel_text(&e))),
    })?;
    let mut last_error = None;
    // the tables of the rules deleted (repeats are harmless: it is only asked `contains`)
    let mut emptied = Vec::new();
    for rule in rules
        .iter()
        .filter(|r| table.filter(|t| *t != 0).map_or(true, |t| r.table == t))
        .filter(|r| addresses.iter().any(|a| r.is_lookup_from(*a)))
    {
        match h.delete_rule(rule) {
            Ok(()) => {
                emptied.push(rule.table);
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => last_error = Some(Error::internal(format!("Failed to delete rule {}", go_kernel_text(&e)))),
        }
    }
    if let (Some(link), None) = (&link, table) {
        // only tables such a rule can have been given by ADD: never main, default or local
        emptied.retain(|t| !(RT_TABLE_DEFAULT..=RT_TABLE_LOCAL).contains(t) && *t != 0);
        let routes = h.routes(Family::All).map_err(failed("Failed to list all routes"))?;
        for r in routes
            .iter()
            .filter(|r| emptied.contains(&r.table) && r.oif == Some(link.index))
        {
            if let Some(spec) = r.in_table(r.table) {
                delete_route_if_there(h, &spec)
                    .map_err(failed("Failed to delete route"))
                    .unwrap_or_else(|e| last_error = Some(e));
            }
        }
    }
    last_error.map_or(Ok(()), Err)
}

impl Plugin for Sbr {
    fn about(&self) -> &'static str {
        concat!("sbr plugin cnibox ", env!("CARGO_PKG_VERSION"))
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let mut conf = load(req)?;
        let prev = conf
            .prev
            .take()
            .ok_or_else(|| Error::internal("This plugin must be called as chained plugin"))?;
        let ips = addresses_of(&req.ifname, &prev)?;
        let ns = netns_open::open(&req.netns)?;
        let _lock = lock(&ns)?;
        let h = Handle::open(&ns)?;
        if ips.is_empty() {
            // none of the addresses is this interface's: nothing to route by source (the
            // reference still empties the interface's main-table routes)
            link(&h, &req.ifname)?;
            return Ok(prev);
        }
        let mut rb = Rollback::new();
        match conf.table {
            Some(table) => {
                for ip in &ips {
                    add_rule(&h, &mut rb, ip.address.ip(), table, "failed to add rule")?;
                }
            }
            None => route_by_source(&h, &mut rb, &req.ifname, &ips, &conf)?,
        }
        rb.commit();
        Ok(prev)
    }

    fn del(&self, req: &Request) -> Result<(), Error> {
        // DEL needs `table` and prevResult; a config ADD refuses (bad gateways, a prevResult
        // of another version) still names them
        let (table, prev) = cniconf::del_config(
            "sbr",
            || load(req).map(|c| (c.table, c.prev)),
            || (table_leniently(req), None),
        );
        let Some(ns) = netns_open::open_for_del(&req.netns)? else {
            return Ok(());
        };
        let _lock = lock(&ns)?;
        let h = Handle::open(&ns)?;
        let prev = prev.or_else(|| cniconf::prev_result_in_its_own_version(req));
        tidy(&h, &req.ifname, table, prev.as_ref())
    }

    /// The reference's CHECK does nothing; neither does this one.
    fn check(&self, _req: &Request) -> Result<(), Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::result::Interface;

    fn ip(address: &str, interface: Option<usize>) -> IpConfig {
        IpConfig {
            interface,
            address: address.parse().unwrap(),
            gateway: None,
        }
    }

    #[test]
    fn gateways_are_one_per_family_with_the_references_messages() {
        let list = |l: &[&str]| gateways(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let (v4, v6) = list(&["10.0.0.1", "2001:db8::1"]).unwrap();
        assert_eq!(
            (v4.unwrap().to_string(), v6.unwrap().to_string()),
            ("10.0.0.1".into(), "2001:db8::1".into())
        );
        assert_eq!(list(&[]).unwrap(), (None, None));
        assert_eq!(
            list(&["10.0.0.1", "10.0.0.2"]).unwrap_err().msg,
            "gateways list contains multiple IPv4 addresses: 10.0.0.1 and 10.0.0.2"
        );
        assert_eq!(list(&["x"]).unwrap_err().msg, "invalid static gateway IP address: x");
        assert_eq!(
            list(&["1.1.1.1", "::1", "2.2.2.2"]).unwrap_err().msg,
            "gateways list cannot contain more than 2 entries (one IPv4, one IPv6)"
        );
    }

    /// An address is the interface's when its index names it, names nothing, or points past
    /// the list (the reference's `getIPCfgs`).
    #[test]
    fn addresses_of_an_interface_as_the_reference_picks_them() {
        let prev = CniResult {
            interfaces: vec![
                Interface {
                    name: "eth0".into(),
                    ..Default::default()
                },
                Interface {
                    name: "net1".into(),
                    ..Default::default()
                },
            ],
            ips: vec![
                ip("10.0.0.2/24", Some(0)),
                ip("10.0.1.2/24", Some(1)),
                ip("10.0.2.2/24", None),
                ip("10.0.3.2/24", Some(7)),
            ],
            ..Default::default()
        };
        let picked: Vec<String> = addresses_of("eth0", &prev)
            .unwrap()
            .iter()
            .map(|i| i.address.to_string())
            .collect();
        assert_eq!(picked, ["10.0.0.2/24", "10.0.2.2/24", "10.0.3.2/24"]);
        let none = CniResult::default();
        assert_eq!(
            addresses_of("eth0", &none).unwrap_err().msg,
            "No IP addresses supplied on interface: eth0"
        );
    }

    #[test]
    fn a_route_belongs_to_the_address_whose_network_holds_its_source_or_gateway() {
        let route = |prefsrc: Option<&str>, gateway: Option<&str>| RouteInfo {
            dst: "192.168.0.0/16".parse().unwrap(),
            gateway: gateway.map(|g| g.parse().unwrap()),
            oif: Some(2),
            scope: Scope::Universe,
            table: TABLE_MAIN,
            metric: None,
            mtu: None,
            advmss: None,
            prefsrc: prefsrc.map(|s| s.parse().unwrap()),
            protocol: netlink::PROTO_BOOT,
            route_type: 1,
            nexthops: vec![],
        };
        let a = ip("10.0.0.2/24", None);
        assert!(belongs_to(&route(Some("10.0.0.2"), None), &a));
        assert!(belongs_to(&route(None, Some("10.0.0.1")), &a));
        assert!(belongs_to(&route(None, None), &a), "a route of the link itself");
        assert!(!belongs_to(&route(None, Some("10.9.0.1")), &a));
        assert!(!belongs_to(
            &route(Some("10.9.0.2"), Some("10.0.0.1")),
            &ip("2001:db8::2/64", None)
        ));
    }

    #[test]
    fn tables_are_the_first_free_from_the_candidate() {
        let used = [100, 101, 103, 254, 255];
        assert_eq!(next_free(&used, FIRST_TABLE), 102);
        assert_eq!(next_free(&used, 103), 104);
        assert_eq!(table_id(0).unwrap(), 0);
        assert_eq!(table_id(4_294_967_295).unwrap(), u32::MAX);
        assert!(table_id(4_294_967_296).is_err());
    }
}
