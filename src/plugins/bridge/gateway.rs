//! Gateways and default routes from an IPAM result (the reference's `calcGateways`).
use super::config::NetConf;
use crate::cni::result::Route;
use crate::cni::CniResult;
use ipnetwork::IpNetwork;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Index of the container interface in the result (`[bridge, host veth, container]`).
pub const CONTAINER_INDEX: usize = 2;

/// `subnet network address + 1`: the gateway when IPAM names none.
pub fn first_host(net: &IpNetwork) -> IpAddr {
    match net.network() {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a).wrapping_add(1))),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a).wrapping_add(1))),
    }
}

fn default_dst(v4: bool) -> IpNetwork {
    if v4 {
        "0.0.0.0/0".parse().expect("literal")
    } else {
        "::/0".parse().expect("literal")
    }
}

/// Points every address at the container interface, fills in missing gateways (isGateway),
/// adds a default route per family (isDefaultGateway), and returns the gateway addresses the
/// bridge must carry (with the prefix of their subnets).
///
/// Unlike the reference, an IPAM default route without a gateway counts as the family's
/// default route: it gets the gateway filled in instead of a second, identical default
/// route being appended (which made the reference fail with "file exists").
pub fn apply(result: &mut CniResult, conf: &NetConf) -> Vec<IpNetwork> {
    let mut gateways = vec![];
    let mut default_done = [false, false];
    for i in 0..result.ips.len() {
        let ip = &mut result.ips[i];
        ip.interface = Some(CONTAINER_INDEX);
        if ip.gateway.is_none() && conf.is_gateway {
            ip.gateway = Some(first_host(&ip.address));
        }
        let (v4, gw, prefix) = (ip.address.is_ipv4(), ip.gateway, ip.address.prefix());
        let family = usize::from(!v4);
        if conf.is_default_gateway && !default_done[family] {
            let dst = default_dst(v4);
            match result.routes.iter_mut().find(|r| r.dst == dst) {
                Some(r) if r.gw.is_some() => {}
                Some(r) => r.gw = gw,
                None => result.routes.push(Route::new(dst, gw)),
            }
            default_done[family] = true;
        }
        if conf.is_gateway {
            if let Some(gw) = gw {
                let net = IpNetwork::new(gw, prefix).expect("prefix of a valid address");
                if !gateways.contains(&net) {
                    gateways.push(net);
                }
            }
        }
    }
    gateways
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::result::IpConfig;

    fn conf(gw: bool, default_gw: bool) -> NetConf {
        let req = crate::cni::Request {
            command: crate::cni::Command::Add,
            container_id: "c".into(),
            netns: "/x".into(),
            ifname: "eth0".into(),
            args: String::new(),
            path: String::new(),
            stdin: vec![],
            name: "n".into(),
            cni_version: "1.0.0".into(),
            config: serde_json::json!({"isGateway": gw, "isDefaultGateway": default_gw}).into(),
            applets: None,
        };
        super::super::config::load(&req).unwrap()
    }

    fn ip(a: &str, gw: Option<&str>) -> IpConfig {
        IpConfig {
            interface: None,
            address: a.parse().unwrap(),
            gateway: gw.map(|g| g.parse().unwrap()),
        }
    }

    #[test]
    fn gateway_defaults_to_network_plus_one() {
        assert_eq!(first_host(&"10.1.2.7/24".parse().unwrap()).to_string(), "10.1.2.1");
        assert_eq!(
            first_host(&"2001:db8::7/64".parse().unwrap()).to_string(),
            "2001:db8::1"
        );
        let mut r = CniResult {
            ips: vec![ip("10.1.2.7/24", None), ip("2001:db8::7/64", Some("2001:db8::fe"))],
            ..Default::default()
        };
        let gws = apply(&mut r, &conf(true, false));
        assert_eq!(r.ips[0].gateway.unwrap().to_string(), "10.1.2.1");
        assert_eq!(r.ips[0].interface, Some(2));
        assert_eq!(r.ips[1].interface, Some(2));
        let gws: Vec<String> = gws.iter().map(|g| g.to_string()).collect();
        assert_eq!(gws, vec!["10.1.2.1/24", "2001:db8::fe/64"]);
        assert!(r.routes.is_empty());
    }

    #[test]
    fn no_gateway_without_is_gateway() {
        let mut r = CniResult {
            ips: vec![ip("10.1.2.7/24", None)],
            ..Default::default()
        };
        assert!(apply(&mut r, &conf(false, false)).is_empty());
        assert_eq!(r.ips[0].gateway, None);
    }

    #[test]
    fn default_route_added_once_per_family() {
        let mut r = CniResult {
            ips: vec![ip("10.1.2.7/24", None), ip("10.1.3.7/24", None), ip("fd00::7/64", None)],
            ..Default::default()
        };
        apply(&mut r, &conf(false, true));
        let routes: Vec<String> = r
            .routes
            .iter()
            .map(|r| format!("{} via {}", r.dst, r.gw.unwrap()))
            .collect();
        assert_eq!(routes, vec!["0.0.0.0/0 via 10.1.2.1", "::/0 via fd00::1"]);
    }

    #[test]
    fn ipam_default_route_with_gateway_is_kept() {
        let mut r = CniResult {
            ips: vec![ip("10.1.2.7/24", None)],
            routes: vec![Route::new(
                "0.0.0.0/0".parse().unwrap(),
                Some("10.1.2.254".parse().unwrap()),
            )],
            ..Default::default()
        };
        apply(&mut r, &conf(true, true));
        assert_eq!(r.routes.len(), 1);
        assert_eq!(r.routes[0].gw.unwrap().to_string(), "10.1.2.254");
    }

    #[test]
    fn ipam_default_route_without_gateway_is_not_duplicated() {
        let mut r = CniResult {
            ips: vec![ip("10.1.2.7/24", None)],
            routes: vec![Route::new("0.0.0.0/0".parse().unwrap(), None)],
            ..Default::default()
        };
        apply(&mut r, &conf(true, true));
        assert_eq!(r.routes.len(), 1);
        assert_eq!(r.routes[0].gw.unwrap().to_string(), "10.1.2.1");
    }
}
