//! Routes: add (exclusive, next to others as Go netlink's `RouteAddEcmp`, appended, or
//! replacing), list (with the next hops of multipath routes), delete.
use super::bytes;
use std::fmt::Write as _;
use std::io::Cursor;
use std::net::IpAddr;

use ipnetwork::IpNetwork;
use neli::consts::rtnl::{RtAddrFamily, RtScope, RtTable, Rta, Rtn, Rtprot};
use neli::rtnl::{Rtmsg, RtmsgBuilder};
use neli::types::{Buffer, RtBuffer};
use neli::FromBytesWithInput;

use super::handle::{Handle, Op, Result};
use super::transport::{Message, Transport};
use super::types::{Family, Scope};
use super::wire::{self, attr, Nest};

/// The main routing table.
pub const TABLE_MAIN: u32 = 254;
/// `rtm_protocol` values.
pub const PROTO_KERNEL: u8 = 2;
pub const PROTO_BOOT: u8 = 3;
pub const PROTO_STATIC: u8 = 4;

/// A route to add or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    pub dst: IpNetwork,
    pub gateway: Option<IpAddr>,
    /// Output link index.
    pub oif: Option<u32>,
    /// Defaults to Universe (as Go's netlink does).
    pub scope: Option<Scope>,
    /// Defaults to the main table.
    pub table: Option<u32>,
    /// Metric / priority.
    pub metric: Option<u32>,
    pub mtu: Option<u32>,
    pub advmss: Option<u32>,
    /// Preferred source address.
    pub prefsrc: Option<IpAddr>,
    /// Defaults to PROTO_BOOT, as `ip route add` and Go's netlink.
    pub protocol: Option<u8>,
}

impl RouteSpec {
    /// A route to `dst` with nothing else set.
    pub fn new(dst: IpNetwork) -> RouteSpec {
        RouteSpec {
            dst,
            gateway: None,
            oif: None,
            scope: None,
            table: None,
            metric: None,
            mtu: None,
            advmss: None,
            prefsrc: None,
            protocol: None,
        }
    }

    fn describe(&self) -> String {
        let mut s = format!("route {}", self.dst);
        if let Some(gw) = self.gateway {
            let _ = write!(s, " via {gw}");
        }
        if let Some(oif) = self.oif {
            let _ = write!(s, " dev index {oif}");
        }
        if let Some(t) = self.table.filter(|t| *t != TABLE_MAIN) {
            let _ = write!(s, " table {t}");
        }
        if let Some(m) = self.metric {
            let _ = write!(s, " metric {m}");
        }
        s
    }
}

/// A route as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    /// Destination; `0.0.0.0/0` or `::/0` for a default route.
    pub dst: IpNetwork,
    pub gateway: Option<IpAddr>,
    pub oif: Option<u32>,
    pub scope: Scope,
    pub table: u32,
    pub metric: Option<u32>,
    pub mtu: Option<u32>,
    pub advmss: Option<u32>,
    pub prefsrc: Option<IpAddr>,
    pub protocol: u8,
    /// `rtm_type`: 1 unicast, 2 local, 3 broadcast, ...
    pub route_type: u8,
    /// The next hops of a multipath route (RTA_MULTIPATH), e.g. an IPv6 default route to
    /// which a second interface added its gateway; empty for a single-path route, whose
    /// next hop is `gateway` and `oif`.
    pub nexthops: Vec<NextHop>,
}

/// One next hop of a multipath route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHop {
    pub gateway: Option<IpAddr>,
    pub oif: Option<u32>,
    /// `rtnh_hops`: the weight minus one.
    pub hops: u8,
}

impl RouteInfo {
    /// The route's next hops as (gateway, output link): the multipath list, or the route's
    /// own gateway and link.
    pub fn next_hops(&self) -> Vec<(Option<IpAddr>, Option<u32>)> {
        if self.nexthops.is_empty() {
            vec![(self.gateway, self.oif)]
        } else {
            self.nexthops.iter().map(|n| (n.gateway, n.oif)).collect()
        }
    }

    /// True when one of the next hops goes via `gw`.
    pub fn has_gateway(&self, gw: IpAddr) -> bool {
        self.next_hops().iter().any(|(g, _)| *g == Some(gw))
    }

    /// This very route in `table` (its own table: the spec that deletes exactly it): every
    /// attribute kept, protocol and scope included. `None` for a route a [`RouteSpec`]
    /// cannot state: not unicast, or multipath.
    pub fn in_table(&self, table: u32) -> Option<RouteSpec> {
        if self.route_type != wire::RTN_UNICAST || !self.nexthops.is_empty() {
            return None;
        }
        Some(RouteSpec {
            dst: self.dst,
            gateway: self.gateway,
            oif: self.oif,
            scope: Some(self.scope),
            table: Some(table),
            metric: self.metric,
            mtu: self.mtu,
            advmss: self.advmss,
            prefsrc: self.prefsrc,
            protocol: Some(self.protocol),
        })
    }
}

/// What a request does with the spec: deletes match only on the fields the caller set.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Add,
    Delete,
}

fn route_msg(op: &Op, r: &RouteSpec, purpose: Purpose) -> Result<Vec<u8>> {
    let family = if r.dst.is_ipv4() { wire::AF_INET } else { wire::AF_INET6 };
    let table = r.table.unwrap_or(TABLE_MAIN);
    let mut a = RtBuffer::<Rta, Buffer>::new();
    if r.dst.prefix() > 0 {
        a.push(attr(wire::RTA_DST, Buffer::from(wire::ip_bytes(r.dst.network()))).map_err(|e| op.encode(e))?);
    }
    if let Some(gw) = r.gateway {
        a.push(attr(wire::RTA_GATEWAY, Buffer::from(wire::ip_bytes(gw))).map_err(|e| op.encode(e))?);
    }
    if let Some(oif) = r.oif {
        a.push(attr(wire::RTA_OIF, oif).map_err(|e| op.encode(e))?);
    }
    if let Some(m) = r.metric {
        a.push(attr(wire::RTA_PRIORITY, m).map_err(|e| op.encode(e))?);
    }
    if let Some(src) = r.prefsrc {
        a.push(attr(wire::RTA_PREFSRC, Buffer::from(wire::ip_bytes(src))).map_err(|e| op.encode(e))?);
    }
    a.push(attr(wire::RTA_TABLE, table).map_err(|e| op.encode(e))?);
    // The kernel compares metrics on delete, so a changed MTU would make the route unfindable.
    if purpose == Purpose::Add && (r.mtu.is_some() || r.advmss.is_some()) {
        let mut metrics = Nest::new();
        if let Some(mtu) = r.mtu {
            metrics.push(attr(wire::RTAX_MTU, mtu).map_err(|e| op.encode(e))?);
        }
        if let Some(mss) = r.advmss {
            metrics.push(attr(wire::RTAX_ADVMSS, mss).map_err(|e| op.encode(e))?);
        }
        a.push(attr(wire::RTA_METRICS, metrics).map_err(|e| op.encode(e))?);
    }
    // Tables above 255 only fit in RTA_TABLE; the header then says "compat".
    // On delete, protocol 0 and scope "nowhere" are the kernel's wildcards.
    let (default_protocol, default_scope) = match purpose {
        Purpose::Add => (PROTO_BOOT, Scope::Universe),
        Purpose::Delete => (0, Scope::Nowhere),
    };
    let header_table = if table < 256 {
        table as u8
    } else {
        wire::RT_TABLE_COMPAT
    };
    let msg = RtmsgBuilder::default()
        .rtm_family(RtAddrFamily::from(family))
        .rtm_dst_len(r.dst.prefix())
        .rtm_src_len(0)
        .rtm_tos(0)
        .rtm_table(RtTable::from(header_table))
        .rtm_protocol(Rtprot::from(r.protocol.unwrap_or(default_protocol)))
        .rtm_scope(RtScope::from(r.scope.unwrap_or(default_scope).to_raw()))
        .rtm_type(Rtn::from(wire::RTN_UNICAST))
        .rtattrs(a)
        .build()
        .map_err(|e| op.encode(e.to_string()))?;
    wire::encode(&msg).map_err(|e| op.encode(e))
}

impl<T: Transport> Handle<T> {
    /// Adds a route; an identical route is an Exists error (safe to treat as done).
    pub fn add_route(&self, route: &RouteSpec) -> Result<()> {
        let op = Op::new("add", route.describe());
        self.modify(
            &op,
            wire::RTM_NEWROUTE,
            wire::NLM_F_CREATE | wire::NLM_F_EXCL,
            route_msg(&op, route, Purpose::Add)?,
        )
    }

    /// Adds a route next to the routes that exist for the same destination, as Go netlink's
    /// `RouteAddEcmp` (NLM_F_CREATE without NLM_F_EXCL), which the reference plugins use for
    /// IPAM routes. For IPv4 it becomes a route of its own (a second default route via
    /// another interface, or a gateway route beside the kernel's subnet route); for IPv6
    /// a gateway route with the metric of an existing one joins it as a further next hop
    /// of one multipath route. Only an identical route is an Exists error.
    pub fn add_route_ecmp(&self, route: &RouteSpec) -> Result<()> {
        let op = Op::new("add", route.describe());
        self.modify(
            &op,
            wire::RTM_NEWROUTE,
            wire::NLM_F_CREATE,
            route_msg(&op, route, Purpose::Add)?,
        )
    }

    /// Adds a route next to existing ones for the same destination (an IPv6 ECMP next hop,
    /// or a second IPv4 route with another metric), without replacing them.
    pub fn append_route(&self, route: &RouteSpec) -> Result<()> {
        let op = Op::new("append", route.describe());
        self.modify(
            &op,
            wire::RTM_NEWROUTE,
            wire::NLM_F_CREATE | wire::NLM_F_APPEND,
            route_msg(&op, route, Purpose::Add)?,
        )
    }

    /// Adds the route or replaces the one with the same destination, table and metric.
    pub fn replace_route(&self, route: &RouteSpec) -> Result<()> {
        let op = Op::new("replace", route.describe());
        self.modify(
            &op,
            wire::RTM_NEWROUTE,
            wire::NLM_F_CREATE | wire::NLM_F_REPLACE,
            route_msg(&op, route, Purpose::Add)?,
        )
    }

    /// Deletes the route matching the fields set in the spec (dst, gateway, oif, table,
    /// metric, prefsrc; scope and protocol only when given); a missing route is NotFound.
    pub fn delete_route(&self, route: &RouteSpec) -> Result<()> {
        let op = Op::new("delete", route.describe());
        self.modify(&op, wire::RTM_DELROUTE, 0, route_msg(&op, route, Purpose::Delete)?)
    }

    /// Routes of every table in a family (filter on `table` for the main one).
    pub fn routes(&self, family: Family) -> Result<Vec<RouteInfo>> {
        let op = Op::new("list", "routes");
        // Strict checking rejects a dump request whose header carries anything but the family.
        let msg = RtmsgBuilder::default()
            .rtm_family(RtAddrFamily::from(family.af()))
            .rtm_dst_len(0)
            .rtm_src_len(0)
            .rtm_tos(0)
            .rtm_table(RtTable::from(0))
            .rtm_protocol(Rtprot::from(0))
            .rtm_scope(RtScope::from(0))
            .rtm_type(Rtn::from(0))
            .build()
            .map_err(|e| op.encode(e.to_string()))?;
        let msgs = self.dump(&op, wire::RTM_GETROUTE, wire::encode(&msg).map_err(|e| op.encode(e))?)?;
        let mut out = vec![];
        for m in msgs.iter().filter(|m| m.kind == wire::RTM_NEWROUTE) {
            let r = decode_route(&op, m)?;
            let family_ok = match family {
                Family::All => true,
                Family::V4 => r.dst.is_ipv4(),
                Family::V6 => r.dst.is_ipv6(),
            };
            if family_ok {
                out.push(r);
            }
        }
        Ok(out)
    }
}

impl<T: Transport> Handle<T> {
    /// The route the kernel would use to reach `dst` (`ip route get`); None when it has
    /// none (unreachable).
    pub fn route_get(&self, dst: IpAddr) -> Result<Option<RouteInfo>> {
        let op = Op::new("get", format!("route to {dst}"));
        let (family, bits) = match dst {
            IpAddr::V4(_) => (wire::AF_INET, 32),
            IpAddr::V6(_) => (wire::AF_INET6, 128),
        };
        let mut a = RtBuffer::<Rta, Buffer>::new();
        a.push(attr(wire::RTA_DST, Buffer::from(wire::ip_bytes(dst))).map_err(|e| op.encode(e))?);
        let msg = RtmsgBuilder::default()
            .rtm_family(RtAddrFamily::from(family))
            .rtm_dst_len(bits)
            .rtm_src_len(0)
            .rtm_tos(0)
            .rtm_table(RtTable::from(0))
            .rtm_protocol(Rtprot::from(0))
            .rtm_scope(RtScope::from(0))
            .rtm_type(Rtn::from(0))
            .rtattrs(a)
            .build()
            .map_err(|e| op.encode(e.to_string()))?;
        match self.get(&op, wire::RTM_GETROUTE, wire::encode(&msg).map_err(|e| op.encode(e))?) {
            Ok(msgs) => match msgs.iter().find(|m| m.kind == wire::RTM_NEWROUTE) {
                Some(m) => decode_route(&op, m).map(Some),
                None => Ok(None),
            },
            Err(e) if matches!(e.errno(), Some(libc::ENETUNREACH | libc::EHOSTUNREACH)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

pub(crate) fn decode_route(op: &Op, m: &Message) -> Result<RouteInfo> {
    let msg = Rtmsg::from_bytes_with_input(&mut Cursor::new(&m.payload), m.payload.len())
        .map_err(|e| op.decode(format!("route message: {e}")))?;
    let family = u8::from(*msg.rtm_family());
    let mut r = RouteInfo {
        dst: IpNetwork::new(
            if family == wire::AF_INET6 {
                IpAddr::from([0u16; 8])
            } else {
                IpAddr::from([0u8; 4])
            },
            0,
        )
        .map_err(|e| op.decode(e.to_string()))?,
        gateway: None,
        oif: None,
        scope: Scope::from_raw(u8::from(*msg.rtm_scope())),
        table: u8::from(*msg.rtm_table()) as u32,
        metric: None,
        mtu: None,
        advmss: None,
        prefsrc: None,
        protocol: u8::from(*msg.rtm_protocol()),
        route_type: u8::from(*msg.rtm_type()),
        nexthops: vec![],
    };
    for a in msg.rtattrs().iter() {
        let p = a.rta_payload().as_ref();
        match u16::from(*a.rta_type()) & 0x3fff {
            wire::RTA_DST => {
                let ip = wire::as_ip(p).ok_or_else(|| op.decode("bad RTA_DST"))?;
                r.dst = IpNetwork::new(ip, *msg.rtm_dst_len()).map_err(|e| op.decode(e.to_string()))?;
            }
            wire::RTA_GATEWAY => r.gateway = wire::as_ip(p),
            wire::RTA_OIF => r.oif = wire::as_u32(p),
            wire::RTA_PRIORITY => r.metric = wire::as_u32(p),
            wire::RTA_PREFSRC => r.prefsrc = wire::as_ip(p),
            wire::RTA_TABLE => r.table = wire::as_u32(p).unwrap_or(r.table),
            wire::RTA_MULTIPATH => r.nexthops = decode_multipath(p),
            wire::RTA_METRICS => {
                r.mtu = wire::find(p, wire::RTAX_MTU).and_then(wire::as_u32);
                r.advmss = wire::find(p, wire::RTAX_ADVMSS).and_then(wire::as_u32);
            }
            _ => {}
        }
    }
    Ok(r)
}

/// Size of `struct rtnexthop` (len u16, flags u8, hops u8, ifindex i32), before its attributes.
const RTNH_LEN: usize = 8;

/// RTA_MULTIPATH: a sequence of `rtnexthop` headers, each followed by its own attributes
/// (RTA_GATEWAY, ...) up to `rtnh_len`, each aligned to 4 bytes. A truncated entry ends it.
fn decode_multipath(mut p: &[u8]) -> Vec<NextHop> {
    let mut out = vec![];
    while p.len() >= RTNH_LEN {
        let len = usize::from(bytes::read_host16(p).unwrap_or(0));
        if len < RTNH_LEN || len > p.len() {
            break;
        }
        let ifindex = bytes::read_host32(&p[4..]).unwrap_or(0);
        out.push(NextHop {
            gateway: wire::find(&p[RTNH_LEN..len], wire::RTA_GATEWAY).and_then(wire::as_ip),
            oif: (ifindex != 0).then_some(ifindex),
            hops: p[3],
        });
        p = &p[((len + 3) & !3).min(p.len())..];
    }
    out
}
