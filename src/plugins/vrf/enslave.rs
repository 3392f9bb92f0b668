//! The VRF side of the plugin, in the container namespace's handle (any transport, so the
//! steps are tested with the fake one): find or create the VRF, enslave the interface and
//! move what enslaving loses into the VRF's table, release it again, check it.
use std::time::Duration;

use super::Conf;
use crate::cni::Error;
use crate::netlink::{
    AddrOptions, Address, Family, Handle, Link, LinkKind, LinkSpec, RouteInfo, RouteSpec, Scope, Transport, VrfData,
    IFA_F_NODAD, IFA_F_NOPREFIXROUTE, TABLE_MAIN,
};
use crate::plugin_kit::kernel_support;
use crate::plugin_kit::rollback::Rollback;

/// The first wait for a restored IPv6 address's local route; doubled on each of the
/// [`ADDRESS_RETRIES`] retries (about 2.5 s in all), as the reference waits.
pub(super) const ADDRESS_BACKOFF: Duration = Duration::from_millis(10);
const ADDRESS_RETRIES: u32 = 8;

/// `rtm_type` of a unicast route, the only kind a link's routes are moved as.
const RTN_UNICAST: u8 = 1;

/// A VRF link and its table.
pub(super) struct VrfLink {
    link: Link,
    table: u32,
}

/// The VRF called `name`: None when no link has the name; an error when one that is not
/// a VRF does.
fn find_vrf<T: Transport>(h: &Handle<T>, name: &str) -> Result<Option<VrfLink>, Error> {
    let Some(link) = h.link_by_name(name)? else {
        return Ok(None);
    };
    match link.kind {
        Some(LinkKind::Vrf(VrfData { table })) => Ok(Some(VrfLink { link, table })),
        _ => Err(Error::internal(format!("Netlink {name} is not a VRF"))),
    }
}

/// The configured VRF: the existing one (whose table must be the configured one, if
/// any), or a new one, up, with the configured table or the first free one. A VRF this
/// ADD creates is deleted again if the ADD fails.
pub(super) fn ensure_vrf<'a, T: Transport>(
    h: &'a Handle<T>,
    conf: &Conf,
    rollback: &mut Rollback<'a>,
) -> Result<VrfLink, Error> {
    if let Some(vrf) = find_vrf(h, &conf.vrf_name)? {
        if conf.table != 0 && vrf.table != conf.table {
            return Err(Error::internal(format!(
                "VRF {} already exist with different routing table {}",
                conf.vrf_name, vrf.table
            )));
        }
        return Ok(vrf);
    }
    let name = &conf.vrf_name;
    let table = match conf.table {
        0 => free_table(
            &h.links()
                .map_err(|e| Error::internal(format!("createVRF: Failed to find links {e}")))?,
        )?,
        t => t,
    };
    let kind = LinkKind::Vrf(VrfData { table });
    h.create_link(&LinkSpec::new(name, kind.clone())).map_err(|e| {
        kernel_support::create_error(&kind, e, |e| Error::internal(format!("could not add VRF {name}: {e}")))
    })?;
    let link = h
        .link(name.as_str())
        .map_err(|e| Error::internal(format!("could not add VRF {name}: {e}")))?;
    let index = link.index;
    rollback.push(format!("delete VRF {name}"), move || {
        h.remove_link(index).map(drop).map_err(|e| e.to_string())
    });
    h.set_up(index)
        .map_err(|e| Error::internal(format!("could not set link up for VRF {name}: {e}")))?;
    Ok(VrfLink { link, table })
}

/// The first table from 1 up that no VRF of `links` uses, passing over the kernel's own
/// tables (253 default, 254 main, 255 local), which the reference would hand out once 1 to
/// 252 are taken.
fn free_table(links: &[Link]) -> Result<u32, Error> {
    // a Vec, not a HashSet: a host's few VRFs, without another hash table's code
    let taken: Vec<u32> = links
        .iter()
        .filter_map(|l| match l.kind {
            Some(LinkKind::Vrf(VrfData { table })) => Some(table),
            _ => None,
        })
        .collect();
    (1..u32::MAX)
        .find(|t| !(253..=255).contains(t) && !taken.contains(t))
        .ok_or_else(|| Error::internal("findFreeRoutingTableID: Failed to find an available routing id"))
}

/// What enslaving a link to a VRF loses, saved before: its global IPv6 addresses and its
/// main-table routes of universe scope (the local and connected ones the kernel makes again).
struct Saved {
    addresses: Vec<Address>,
    routes: Vec<RouteInfo>,
}

fn save<T: Transport>(h: &Handle<T>, link: &Link) -> Result<Saved, Error> {
    let addresses = global_v6_addresses(h, link).map_err(|e| {
        Error::internal(format!(
            "failed getting global ipv6 addresses before slaving interface: {}",
            e.msg
        ))
    })?;
    let routes = h
        .routes(Family::All)
        .map_err(|_| Error::internal(format!("failed getting all routes for {}", link.name)))?
        .into_iter()
        .filter(|r| {
            r.table == TABLE_MAIN
                && r.oif == Some(link.index)
                && r.scope == Scope::Universe
                && r.route_type == RTN_UNICAST
        })
        .collect();
    Ok(Saved { addresses, routes })
}

fn global_v6_addresses<T: Transport>(h: &Handle<T>, link: &Link) -> Result<Vec<Address>, Error> {
    let all = h
        .addresses(Some(link.index), Family::V6)
        .map_err(|e| Error::internal(format!("failed getting list of IP addresses for {}: {e}", link.name)))?;
    Ok(all.into_iter().filter(|a| a.scope == Scope::Universe).collect())
}

/// Enslaves `ifname` to the VRF and puts back what that lost: the saved IPv6 addresses
/// (waiting, with backoff from `backoff`, for their local routes in the VRF's table) and
/// the saved routes, in the VRF's table. On a later failure the rollback releases it and
/// puts its routes back in the main table.
pub(super) fn add_interface<'a, T: Transport>(
    h: &'a Handle<T>,
    vrf: &VrfLink,
    ifname: &str,
    backoff: Duration,
    rollback: &mut Rollback<'a>,
) -> Result<(), Error> {
    let vrf_name = vrf.link.name.as_str();
    let link = h
        .link_by_name(ifname)?
        .ok_or_else(|| Error::internal(format!("could not get link by name {ifname}")))?;
    if let Some(master) = link.master {
        return Err(match h.link_by_index(master) {
            Ok(Some(m)) => Error::internal(format!("interface {ifname} has already a master set: {}", m.name)),
            Ok(None) => Error::internal(format!(
                "interface {ifname} has already a master set, could not retrieve the name: Link not found"
            )),
            Err(e) => Error::internal(format!(
                "interface {ifname} has already a master set, could not retrieve the name: {e}"
            )),
        });
    }
    let saved = save(h, &link)?;
    h.set_master(link.index, Some(vrf.link.index))
        .map_err(|e| Error::internal(format!("could not set vrf {vrf_name} as master of {ifname}: {e}")))?;
    let index = link.index;
    let (addresses, routes) = (saved.addresses.clone(), saved.routes.clone());
    rollback.push(format!("release {ifname} from VRF {vrf_name}"), move || {
        // released, the link cycles again: its IPv6 addresses first, then the routes via them
        h.set_master(index, None).map_err(|e| e.to_string())?;
        for a in &addresses {
            match h.add_address(index, a.address, address_options(a)) {
                Err(e) if !e.is_exists() => return Err(e.to_string()),
                _ => {}
            }
        }
        for r in &routes {
            h.replace_route(&in_table(r, TABLE_MAIN)).map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    let after = global_v6_addresses(h, &link).map_err(|e| {
        Error::internal(format!(
            "failed getting global ipv6 addresses after slaving interface: {}",
            e.msg
        ))
    })?;
    for lost in saved
        .addresses
        .iter()
        .filter(|a| !after.iter().any(|b| b.address == a.address))
    {
        h.add_address(index, lost.address, address_options(lost)).map_err(|e| {
            Error::internal(format!(
                "could not restore address {} to {ifname} @ {vrf_name}: {e}",
                lost.address
            ))
        })?;
        wait_for_local_route(h, vrf, &link, lost, backoff)?;
    }
    for r in &saved.routes {
        let moved = in_table(r, vrf.table);
        h.replace_route(&moved)
            .map_err(|e| Error::internal(format!("could not add route '{}': {e}", go_route(&moved))))?;
    }
    Ok(())
}

/// The options an address was added with, from its flags: it goes back as it was.
fn address_options(a: &Address) -> AddrOptions {
    AddrOptions {
        nodad: a.flags & IFA_F_NODAD != 0,
        noprefixroute: a.flags & IFA_F_NOPREFIXROUTE != 0,
    }
}

/// A restored address is usable once the kernel has its local route in the VRF's table.
fn wait_for_local_route<T: Transport>(
    h: &Handle<T>,
    vrf: &VrfLink,
    link: &Link,
    address: &Address,
    backoff: Duration,
) -> Result<(), Error> {
    let host = netlink_host(address);
    for retry in 0..=ADDRESS_RETRIES {
        let routes = h.routes(Family::All).map_err(|e| {
            Error::internal(format!(
                "failed getting routes for {} table {} for dst {}: {e}",
                link.name, vrf.table, address.address
            ))
        })?;
        if routes
            .iter()
            .any(|r| r.dst == host && r.table == vrf.table && r.oif == Some(link.index))
        {
            return Ok(());
        }
        if retry < ADDRESS_RETRIES {
            std::thread::sleep(backoff * (1 << retry));
        }
    }
    Err(Error::internal(format!(
        "failed getting local/host addresses for {} in table {} with dst {}",
        link.name, vrf.table, address.address
    )))
}

/// The address as a host route's destination (`/128`, `/32`).
fn netlink_host(a: &Address) -> ipnetwork::IpNetwork {
    let bits = if a.address.is_ipv4() { 32 } else { 128 };
    ipnetwork::IpNetwork::new(a.address.ip(), bits).expect("a full-length prefix is valid")
}

/// `r` as a route of `table`, everything else kept.
fn in_table(r: &RouteInfo, table: u32) -> RouteSpec {
    RouteSpec {
        gateway: r.gateway,
        oif: r.oif,
        scope: Some(r.scope),
        table: Some(table),
        metric: r.metric,
        mtu: r.mtu,
        advmss: r.advmss,
        prefsrc: r.prefsrc,
        protocol: Some(r.protocol),
        ..RouteSpec::new(r.dst)
    }
}

/// A route as the reference's netlink library prints it (`Route.String`).
fn go_route(r: &RouteSpec) -> String {
    let nil = || "<nil>".to_string();
    format!(
        "{{Ifindex: {} Dst: {} Src: {} Gw: {} Flags: [] Table: {} Realm: 0}}",
        r.oif.unwrap_or(0),
        r.dst,
        r.prefsrc.map_or_else(nil, |s| s.to_string()),
        r.gateway.map_or_else(nil, |g| g.to_string()),
        r.table.unwrap_or(TABLE_MAIN)
    )
}

/// DEL: releases `ifname` from the VRF when it is in it, then deletes the VRF if nothing
/// is left in it. A VRF, interface or name that is not there is nothing to undo; an
/// interface in another master stays there (the reference releases it from whatever master
/// it has, and fails DEL when the interface is gone).
pub(super) fn remove_interface<T: Transport>(h: &Handle<T>, vrf_name: &str, ifname: &str) -> Result<(), Error> {
    let vrf = match find_vrf(h, vrf_name) {
        Ok(Some(vrf)) => vrf,
        Ok(None) => return Ok(()),
        Err(e) => {
            eprintln!("cnibox vrf: DEL: {}: nothing of ours to remove", e.msg);
            return Ok(());
        }
    };
    if let Some(link) = h.link_by_name(ifname)? {
        if link.master == Some(vrf.link.index) {
            match h.set_master(link.index, None) {
                Err(e) if !e.is_not_found() => {
                    return Err(Error::internal(format!(
                        "resetMaster: could reset master to {ifname}: {e}"
                    )))
                }
                _ => {}
            }
        }
    }
    if enslaved(h, &vrf)?.is_empty() {
        h.remove_link(vrf.link.index)?;
    }
    Ok(())
}

/// The links whose master is the VRF.
fn enslaved<T: Transport>(h: &Handle<T>, vrf: &VrfLink) -> Result<Vec<Link>, Error> {
    let links = h
        .links()
        .map_err(|e| Error::internal(format!("getAssignedInterfaces: Failed to find links {e}")))?;
    Ok(links.into_iter().filter(|l| l.master == Some(vrf.link.index)).collect())
}

/// CHECK: the VRF exists and `ifname` is in it.
pub(super) fn check_enslaved<T: Transport>(h: &Handle<T>, vrf_name: &str, ifname: &str) -> Result<(), Error> {
    let vrf = find_vrf(h, vrf_name)?.ok_or_else(|| Error::internal("Link not found"))?;
    if !enslaved(h, &vrf)?.iter().any(|l| l.name == ifname) {
        return Err(Error::internal(format!(
            "failed to find {ifname} associated to vrf {vrf_name}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::testing::{self, attributes, FakeTransport, IFADDRMSG_LEN, IFINFOMSG_LEN, RTMSG_LEN};
    use crate::netlink::Message;
    use std::net::IpAddr;

    const RTM_DELLINK: u16 = 17;
    const RTM_NEWADDR: u16 = 20;
    const RTM_NEWROUTE: u16 = 24;
    const IFLA_MASTER: u16 = 10;
    const IFLA_LINKINFO: u16 = 18;
    const RTA_GATEWAY: u16 = 5;
    const RTA_TABLE: u16 = 15;

    fn handle() -> Handle<FakeTransport> {
        Handle::with_transport(FakeTransport::new())
    }

    fn link(index: u32, name: &str, kind: LinkKind, master: Option<u32>) -> Link {
        Link {
            master,
            ..testing::link(index, name, kind)
        }
    }

    fn vrf(index: u32, name: &str, table: u32) -> Link {
        link(index, name, LinkKind::Vrf(VrfData { table }), None)
    }

    /// The VRF `blue`, index 5, table 10.
    fn blue() -> VrfLink {
        VrfLink {
            link: vrf(5, "blue", 10),
            table: 10,
        }
    }

    fn eth0(master: Option<u32>) -> Link {
        link(2, "eth0", LinkKind::Veth, master)
    }

    fn conf(table: u32) -> Conf {
        Conf {
            vrf_name: "blue".into(),
            table,
        }
    }

    fn route(dst: &str, gw: Option<&str>, oif: u32, scope: Scope, table: u32, route_type: u8) -> RouteInfo {
        RouteInfo {
            dst: dst.parse().unwrap(),
            gateway: gw.map(|g| g.parse().unwrap()),
            oif: Some(oif),
            scope,
            table,
            metric: Some(100),
            mtu: None,
            advmss: None,
            prefsrc: None,
            protocol: 4,
            route_type,
            nexthops: vec![],
        }
    }

    fn address(net: &str, scope: Scope, flags: u32) -> Address {
        Address {
            index: 2,
            address: net.parse().unwrap(),
            scope,
            flags,
            broadcast: None,
            label: None,
        }
    }

    fn attr(m: &Message, header: usize, ty: u16) -> Option<Vec<u8>> {
        attributes(&m.payload, header)
            .into_iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, p)| p)
    }

    /// A new VRF gets the first table no VRF of the namespace has, and is brought up.
    #[test]
    fn a_new_vrf_gets_the_first_free_table_and_comes_up() {
        let h = handle();
        let t = h.transport();
        t.push_errno(libc::ENODEV); // no link "blue"
        t.push_links(&[eth0(None), vrf(7, "red", 1)]);
        t.push_ack(); // create
        t.push_links(&[vrf(5, "blue", 2)]);
        t.push_ack(); // up
        let mut rollback = Rollback::new();
        let v = ensure_vrf(&h, &conf(0), &mut rollback).unwrap();
        rollback.commit();
        assert_eq!((v.link.index, v.table), (5, 2));
        let reqs = t.requests();
        assert_eq!(reqs.len(), 5);
        // kind vrf, IFLA_VRF_TABLE 2 (see netlink::kind_requests for the whole request)
        let info = attr(&reqs[2], IFINFOMSG_LEN, IFLA_LINKINFO).unwrap();
        assert_eq!(
            info,
            [&[7, 0, 1, 0][..], b"vrf\0", &[12, 0, 2, 0, 8, 0, 1, 0, 2, 0, 0, 0]].concat()
        );
    }

    #[test]
    fn an_existing_vrf_is_used_when_its_table_is_the_configured_one() {
        let h = handle();
        h.transport().push_links(&[vrf(5, "blue", 10)]);
        let mut rollback = Rollback::new();
        assert_eq!(ensure_vrf(&h, &conf(10), &mut rollback).unwrap().table, 10);
        h.transport().push_links(&[vrf(5, "blue", 10)]);
        assert_eq!(ensure_vrf(&h, &conf(0), &mut rollback).unwrap().table, 10);
        h.transport().push_links(&[vrf(5, "blue", 10)]);
        let e = ensure_vrf(&h, &conf(11), &mut rollback).err().unwrap();
        assert_eq!(e.msg, "VRF blue already exist with different routing table 10");
        h.transport().push_links(&[eth0(None)]);
        let e = ensure_vrf(&h, &conf(0), &mut rollback).err().unwrap();
        assert_eq!(e.msg, "Netlink blue is not a VRF");
        rollback.commit();
        assert_eq!(h.transport().requests().len(), 4, "nothing was created");
    }

    #[test]
    fn a_kernel_without_vrf_is_named() {
        let h = handle();
        h.transport().push_errno(libc::ENODEV);
        h.transport().push_kernel_error(libc::EOPNOTSUPP, "Unknown device type");
        let mut rollback = Rollback::new();
        let e = ensure_vrf(&h, &conf(10), &mut rollback).err().unwrap();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (999, "vrf: the kernel has no vrf support (modprobe vrf)")
        );
    }

    /// A failed ADD deletes the VRF it created.
    #[test]
    fn a_vrf_this_add_created_goes_when_the_add_fails() {
        let h = handle();
        let t = h.transport();
        t.push_errno(libc::ENODEV);
        t.push_ack();
        t.push_links(&[vrf(5, "blue", 10)]);
        t.push_errno(libc::EPERM); // up
        {
            let mut rollback = Rollback::new();
            let e = ensure_vrf(&h, &conf(10), &mut rollback).err().unwrap();
            assert_eq!(
                e.msg,
                "could not set link up for VRF blue: set up link index 5: Operation not permitted"
            );
        }
        let reqs = t.requests();
        assert_eq!(reqs.len(), 5);
        assert_eq!(reqs[4].kind, RTM_DELLINK);
    }

    #[test]
    fn free_tables_pass_over_the_kernels_own() {
        let vrfs: Vec<Link> = (1..=252).map(|t| vrf(100 + t, "v", t)).collect();
        assert_eq!(free_table(&vrfs).unwrap(), 256);
        assert_eq!(free_table(&[]).unwrap(), 1);
        assert_eq!(free_table(&[vrf(5, "a", 1), vrf(6, "b", 3)]).unwrap(), 2);
    }

    /// The reference's steps: save the global IPv6 addresses and the main table's routes of
    /// the link, enslave, put back the addresses the kernel dropped and wait for their local
    /// routes in the VRF table, replace the saved routes into the VRF table.
    #[test]
    fn enslaving_moves_the_routes_and_puts_back_lost_ipv6_addresses() {
        let h = handle();
        let t = h.transport();
        let blue = blue();
        t.push_links(&[eth0(None)]);
        t.push_addresses(&[
            address("2001:db8::5/64", Scope::Universe, IFA_F_NODAD),
            address("fe80::1/64", Scope::Link, 0),
        ]);
        t.push_routes(&[
            route(
                "0.0.0.0/0",
                Some("10.0.0.1"),
                2,
                Scope::Universe,
                TABLE_MAIN,
                RTN_UNICAST,
            ),
            // connected: the kernel makes it again in the VRF table
            route("10.0.0.0/24", None, 2, Scope::Link, TABLE_MAIN, RTN_UNICAST),
            // another table, another link: not this link's main-table routes
            route("10.9.0.0/16", Some("10.0.0.1"), 2, Scope::Universe, 100, RTN_UNICAST),
            route(
                "10.8.0.0/16",
                Some("10.0.0.1"),
                3,
                Scope::Universe,
                TABLE_MAIN,
                RTN_UNICAST,
            ),
        ]);
        t.push_ack(); // set master
        t.push_addresses(&[]); // the global address is gone
        t.push_ack(); // put it back
        t.push_routes(&[route("2001:db8::5/128", None, 2, Scope::Host, 10, 2)]);
        t.push_ack(); // replace the default route into table 10
        let mut rollback = Rollback::new();
        add_interface(&h, &blue, "eth0", Duration::ZERO, &mut rollback).unwrap();
        rollback.commit();

        let reqs = t.requests();
        assert_eq!(reqs.len(), 8);
        assert_eq!(
            attr(&reqs[3], IFINFOMSG_LEN, IFLA_MASTER),
            Some(5u32.to_ne_bytes().to_vec())
        );
        assert_eq!(reqs[5].kind, RTM_NEWADDR);
        assert_eq!(reqs[5].payload[1], 64, "prefix length kept");
        let flags = attr(&reqs[5], IFADDRMSG_LEN, 8).unwrap();
        assert_eq!(flags, IFA_F_NODAD.to_ne_bytes().to_vec(), "nodad kept");
        let moved = &reqs[7];
        assert_eq!(moved.kind, RTM_NEWROUTE);
        assert_eq!(moved.flags & 0x100, 0x100, "NLM_F_REPLACE");
        assert_eq!(attr(moved, RTMSG_LEN, RTA_TABLE), Some(10u32.to_ne_bytes().to_vec()));
        let gw: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            attr(moved, RTMSG_LEN, RTA_GATEWAY),
            Some(crate::netlink::testing::ip_payload(gw))
        );
        assert_eq!(moved.payload[5], 4, "rtm_protocol kept");
    }

    #[test]
    fn a_restored_address_without_its_local_route_fails_after_the_retries() {
        let h = handle();
        let t = h.transport();
        let blue = blue();
        t.push_links(&[eth0(None)]);
        t.push_addresses(&[address("2001:db8::5/64", Scope::Universe, 0)]);
        t.push_routes(&[]);
        t.push_ack();
        t.push_addresses(&[]);
        t.push_ack();
        for _ in 0..=ADDRESS_RETRIES {
            t.push_routes(&[route("2001:db8::5/128", None, 2, Scope::Host, 11, 2)]);
        }
        {
            let mut rollback = Rollback::new();
            let e = add_interface(&h, &blue, "eth0", Duration::ZERO, &mut rollback).unwrap_err();
            assert_eq!(
                e.msg,
                "failed getting local/host addresses for eth0 in table 10 with dst 2001:db8::5/64"
            );
        }
        // the rollback released the link and put its address back (no routes to put back)
        let reqs = t.requests();
        assert_eq!(reqs.len(), 6 + ADDRESS_RETRIES as usize + 1 + 2);
        let release = &reqs[reqs.len() - 2];
        assert_eq!(
            attr(release, IFINFOMSG_LEN, IFLA_MASTER),
            Some(0u32.to_ne_bytes().to_vec())
        );
        assert_eq!(reqs.last().unwrap().kind, RTM_NEWADDR);
    }

    #[test]
    fn a_link_in_another_master_is_refused_by_name() {
        let h = handle();
        h.transport().push_links(&[eth0(Some(9))]);
        h.transport()
            .push_links(&[link(9, "br0", LinkKind::Bridge(Default::default()), None)]);
        let blue = blue();
        let mut rollback = Rollback::new();
        let e = add_interface(&h, &blue, "eth0", Duration::ZERO, &mut rollback).unwrap_err();
        assert_eq!(e.msg, "interface eth0 has already a master set: br0");
        h.transport().push_errno(libc::ENODEV);
        let e = add_interface(&h, &blue, "eth0", Duration::ZERO, &mut rollback).unwrap_err();
        assert_eq!(e.msg, "could not get link by name eth0");
    }

    /// DEL releases the interface and deletes the VRF once it is empty.
    #[test]
    fn del_releases_the_interface_and_deletes_the_empty_vrf() {
        let h = handle();
        let t = h.transport();
        t.push_links(&[vrf(5, "blue", 10)]);
        t.push_links(&[eth0(Some(5))]);
        t.push_ack(); // release
        t.push_links(&[vrf(5, "blue", 10), eth0(None)]);
        t.push_ack(); // delete the VRF
        remove_interface(&h, "blue", "eth0").unwrap();
        let reqs = t.requests();
        assert_eq!(reqs.len(), 5);
        assert_eq!(
            attr(&reqs[2], IFINFOMSG_LEN, IFLA_MASTER),
            Some(0u32.to_ne_bytes().to_vec())
        );
        assert_eq!(reqs[4].kind, RTM_DELLINK);
    }

    /// A VRF that still holds another attachment's interface stays; an interface that is
    /// gone, or in another master, is left as it is.
    #[test]
    fn del_keeps_a_vrf_in_use_and_what_is_not_its_own() {
        let h = handle();
        let t = h.transport();
        t.push_links(&[vrf(5, "blue", 10)]);
        t.push_errno(libc::ENODEV); // eth0 gone
        t.push_links(&[vrf(5, "blue", 10), link(3, "net1", LinkKind::Veth, Some(5))]);
        remove_interface(&h, "blue", "eth0").unwrap();
        assert_eq!(t.requests().len(), 3);

        let h = handle();
        let t = h.transport();
        t.push_links(&[vrf(5, "blue", 10)]);
        t.push_links(&[eth0(Some(9))]); // in a bridge, not the VRF: stays there
        t.push_links(&[vrf(5, "blue", 10), eth0(Some(9))]);
        t.push_ack();
        remove_interface(&h, "blue", "eth0").unwrap();
        let reqs = t.requests();
        assert_eq!(reqs.len(), 4);
        assert_eq!(reqs[3].kind, RTM_DELLINK, "the empty VRF goes");
    }

    #[test]
    fn del_of_a_vrf_that_is_gone_or_is_not_one_is_done() {
        let h = handle();
        h.transport().push_errno(libc::ENODEV);
        remove_interface(&h, "blue", "eth0").unwrap();
        h.transport().push_links(&[eth0(None)]);
        remove_interface(&h, "eth0", "eth0").unwrap();
        assert_eq!(h.transport().requests().len(), 2);
    }

    #[test]
    fn check_finds_the_interface_in_the_vrf() {
        let h = handle();
        let t = h.transport();
        t.push_links(&[vrf(5, "blue", 10)]);
        t.push_links(&[vrf(5, "blue", 10), eth0(Some(5))]);
        check_enslaved(&h, "blue", "eth0").unwrap();
        t.push_links(&[vrf(5, "blue", 10)]);
        t.push_links(&[vrf(5, "blue", 10), eth0(None)]);
        assert_eq!(
            check_enslaved(&h, "blue", "eth0").unwrap_err().msg,
            "failed to find eth0 associated to vrf blue"
        );
        t.push_errno(libc::ENODEV);
        assert_eq!(check_enslaved(&h, "blue", "eth0").unwrap_err().msg, "Link not found");
    }

    #[test]
    fn routes_print_as_the_references_library_prints_them() {
        let r = in_table(
            &route(
                "0.0.0.0/0",
                Some("10.0.0.1"),
                2,
                Scope::Universe,
                TABLE_MAIN,
                RTN_UNICAST,
            ),
            10,
        );
        assert_eq!(
            go_route(&r),
            "{Ifindex: 2 Dst: 0.0.0.0/0 Src: <nil> Gw: 10.0.0.1 Flags: [] Table: 10 Realm: 0}"
        );
    }
}
