//! Creating links, each in one RTM_NEWLINK request: [`Handle::create_link`] for every kind
//! whose creation is its [`LinkKind`] (bridges, macvlans, ifbs, and the kinds to come), and
//! veth pairs, whose peer is create-time data.
//!
//! Name, MTU and MAC go into the create request itself (for both veth ends), so udev's
//! MAC policy cannot rewrite them afterwards, and a link meant for another namespace is
//! born there (IFLA_NET_NS_FD) instead of being created on the host and moved.
use std::os::fd::AsRawFd;

use neli::consts::rtnl::{Ifla, RtAddrFamily};
use neli::rtnl::IfinfomsgBuilder;
use neli::types::{Buffer, RtBuffer};

use super::handle::{Handle, Op, Result};
use super::link::Link;
use super::link_kind::{linkinfo, BridgeData, LinkKind, MacvlanData};
use super::names::random_veth_name;
use super::transport::Transport;
use super::types::{MacAddr, MacvlanMode};
use super::wire::{self, attr, Nest};
use crate::netns::Netns;

/// A veth pair: `name` stays in the handle's namespace, `peer_name` is created in `peer_netns`.
#[derive(Debug, Clone, Copy, Default)]
pub struct VethSpec<'a> {
    pub name: &'a str,
    pub peer_name: &'a str,
    /// Where the peer is born; None keeps it in the handle's namespace.
    pub peer_netns: Option<&'a Netns>,
    /// MTU of both ends.
    pub mtu: Option<u32>,
    pub mac: Option<MacAddr>,
    pub peer_mac: Option<MacAddr>,
    /// Enslave the host end to this bridge index at creation.
    pub master: Option<u32>,
}

/// How many random host names [`Handle::create_veth_random_name`] tries (as the reference).
pub const VETH_NAME_ATTEMPTS: usize = 10;

/// Why [`Handle::create_veth_random_name`] created no pair.
#[derive(Debug)]
pub enum VethError {
    /// The peer's (container-side) name is taken in its namespace.
    PeerExists,
    /// Every random host name tried was taken.
    NoUniqueName { attempts: usize },
    /// No random name: the kernel's random pool failed.
    Random(std::io::Error),
    /// Any other failure of the create request or of the lookup after it.
    Netlink(super::Error),
}

/// The outcome of one veth create request.
enum Created {
    Link(Link),
    /// The name in the handle's namespace is taken (the kernel's error).
    HostExists(super::Error),
    /// The peer's name is taken in the peer's namespace.
    PeerExists,
}

/// A bridge.
#[derive(Debug, Clone, Copy, Default)]
pub struct BridgeSpec<'a> {
    pub name: &'a str,
    pub mtu: Option<u32>,
    pub mac: Option<MacAddr>,
    /// Turn on VLAN filtering (IFLA_BR_VLAN_FILTERING); fails as Unsupported on kernels without it.
    pub vlan_filtering: bool,
}

/// A macvlan on `parent` (an index in the handle's namespace), born in `netns`.
#[derive(Debug, Clone, Copy)]
pub struct MacvlanSpec<'a> {
    pub name: &'a str,
    pub parent: u32,
    pub mode: MacvlanMode,
    /// Where the macvlan is born; None keeps it in the handle's namespace.
    pub netns: Option<&'a Netns>,
    pub mtu: Option<u32>,
    pub mac: Option<MacAddr>,
    /// IFLA_MACVLAN_BC_QUEUE_LEN: the broadcast/multicast queue length.
    pub bcqueuelen: Option<u32>,
}

/// An ifb (intermediate functional block) device, created up: the bandwidth plugin shapes
/// a container's egress on one.
#[derive(Debug, Clone, Copy, Default)]
pub struct IfbSpec<'a> {
    pub name: &'a str,
    pub mtu: Option<u32>,
    /// Transmit queue length; the reference creates its ifbs with 0.
    pub txqlen: Option<u32>,
}

/// A link of any kind but veth: its kind and data, and where it is born.
#[derive(Debug, Clone)]
pub struct LinkSpec<'a> {
    pub name: &'a str,
    pub kind: LinkKind,
    /// IFLA_LINK: the lower link a stacked link (macvlan, ipvlan, vlan) sits on, an index
    /// in the handle's namespace.
    pub lower: Option<u32>,
    /// Where the link is born; None keeps it in the handle's namespace.
    pub netns: Option<&'a Netns>,
    pub mtu: Option<u32>,
    pub mac: Option<MacAddr>,
    /// Transmit queue length.
    pub txqlen: Option<u32>,
    /// Created administratively up.
    pub up: bool,
}

impl<'a> LinkSpec<'a> {
    /// A link of `kind` called `name`, everything else the kernel's default.
    pub fn new(name: &'a str, kind: LinkKind) -> Self {
        LinkSpec {
            name,
            kind,
            lower: None,
            netns: None,
            mtu: None,
            mac: None,
            txqlen: None,
            up: false,
        }
    }
}

/// The attributes common to every created link.
fn base_attrs(op: &Op, name: &str, mtu: Option<u32>, mac: Option<MacAddr>) -> Result<RtBuffer<Ifla, Buffer>> {
    let mut a = RtBuffer::new();
    a.push(attr(wire::IFLA_IFNAME, name).map_err(|e| op.encode(e))?);
    if let Some(mtu) = mtu {
        a.push(attr(wire::IFLA_MTU, mtu).map_err(|e| op.encode(e))?);
    }
    if let Some(mac) = mac {
        a.push(attr(wire::IFLA_ADDRESS, mac.0).map_err(|e| op.encode(e))?);
    }
    Ok(a)
}

fn ifinfo(op: &Op, attrs: RtBuffer<Ifla, Buffer>) -> Result<Vec<u8>> {
    let msg = IfinfomsgBuilder::default()
        .ifi_family(RtAddrFamily::Unspecified)
        .rtattrs(attrs)
        .build()
        .map_err(|e| op.encode(e.to_string()))?;
    wire::encode(&msg).map_err(|e| op.encode(e))
}

impl<T: Transport> Handle<T> {
    /// Creates a link of any kind but veth (see [`LinkSpec`]); a link born in another
    /// namespace is not looked up afterwards. A kernel without the kind's
    /// [feature](LinkKind::feature) fails as Unsupported.
    pub fn create_link(&self, spec: &LinkSpec<'_>) -> Result<()> {
        let op = Op::new(format!("create {}", spec.kind.name()), spec.name).link_kind(spec.kind.name());
        let op = match spec.kind.feature() {
            Some(f) => op.feature(f),
            None => op,
        };
        // The attributes in the order of the reference's netlink library (`linkModify`), which
        // is also iproute2's for `ip link add link LOWER name NAME type KIND …`: the request
        // is then the same bytes as theirs (src/netlink/kind_requests.rs).
        let mut a = RtBuffer::<Ifla, Buffer>::new();
        if let Some(lower) = spec.lower {
            a.push(attr(wire::IFLA_LINK, lower).map_err(|e| op.encode(e))?);
        }
        a.push(attr(wire::IFLA_IFNAME, spec.name).map_err(|e| op.encode(e))?);
        if let Some(mtu) = spec.mtu {
            a.push(attr(wire::IFLA_MTU, mtu).map_err(|e| op.encode(e))?);
        }
        if let Some(q) = spec.txqlen {
            a.push(attr(wire::IFLA_TXQLEN, q).map_err(|e| op.encode(e))?);
        }
        if let Some(mac) = spec.mac {
            a.push(attr(wire::IFLA_ADDRESS, mac.0).map_err(|e| op.encode(e))?);
        }
        if let Some(ns) = spec.netns {
            // The descriptor is read by the kernel while handling this request; `ns` outlives it.
            a.push(attr(wire::IFLA_NET_NS_FD, ns.as_raw_fd() as u32).map_err(|e| op.encode(e))?);
        }
        a.push(spec.kind.encode().map_err(|e| op.encode(e))?);
        let up = neli::consts::rtnl::Iff::from_bits_retain(if spec.up { libc::IFF_UP as u32 } else { 0 });
        let msg = IfinfomsgBuilder::default()
            .ifi_family(RtAddrFamily::Unspecified)
            .ifi_flags(up)
            .ifi_change(up)
            .rtattrs(a)
            .build()
            .map_err(|e| op.encode(e.to_string()))?;
        let payload = wire::encode(&msg).map_err(|e| op.encode(e))?;
        self.modify(&op, wire::RTM_NEWLINK, wire::NLM_F_CREATE | wire::NLM_F_EXCL, payload)
    }

    /// Creates an ifb device, up, and returns it. A kernel without ifb fails as Unsupported.
    pub fn create_ifb(&self, spec: &IfbSpec<'_>) -> Result<Link> {
        self.create_link(&LinkSpec {
            mtu: spec.mtu,
            txqlen: spec.txqlen,
            up: true,
            ..LinkSpec::new(spec.name, LinkKind::Ifb)
        })?;
        self.link(spec.name)
    }

    /// Creates a veth pair and returns the end in this handle's namespace.
    ///
    /// If the kernel reports a clash and `name` is free here, the clash is the peer's name
    /// in its namespace: the error then names `peer <peer_name>`.
    pub fn create_veth(&self, spec: &VethSpec<'_>) -> Result<Link> {
        match self.try_create_veth(spec)? {
            Created::Link(link) => Ok(link),
            Created::HostExists(e) => Err(e),
            Created::PeerExists => {
                let peer = format!("peer {}", spec.peer_name);
                Err(super::Error::from_errno("create veth", &peer, libc::EEXIST, None))
            }
        }
    }

    /// Creates a veth pair whose end in this handle's namespace gets a random name
    /// (`veth` + 8 hex digits, as the reference's); `spec.name` is ignored. A clash on that
    /// name is retried with a fresh one, up to [`VETH_NAME_ATTEMPTS`] times; a clash on the
    /// peer's name is [`VethError::PeerExists`] at once.
    pub fn create_veth_random_name(&self, spec: &VethSpec<'_>) -> std::result::Result<Link, VethError> {
        for _ in 0..VETH_NAME_ATTEMPTS {
            let name = random_veth_name().map_err(VethError::Random)?;
            let spec = VethSpec { name: &name, ..*spec };
            match self.try_create_veth(&spec).map_err(VethError::Netlink)? {
                Created::Link(link) => return Ok(link),
                Created::HostExists(_) => continue,
                Created::PeerExists => return Err(VethError::PeerExists),
            }
        }
        Err(VethError::NoUniqueName {
            attempts: VETH_NAME_ATTEMPTS,
        })
    }

    /// One create request; a name clash comes back typed, telling whose name it was.
    fn try_create_veth(&self, spec: &VethSpec<'_>) -> Result<Created> {
        let op = Op::new("create veth", spec.name);
        let mut peer = base_attrs(&op, spec.peer_name, spec.mtu, spec.peer_mac)?;
        if let Some(ns) = spec.peer_netns {
            // The descriptor is read by the kernel while handling this request; `ns` outlives it.
            peer.push(attr(wire::IFLA_NET_NS_FD, ns.as_raw_fd() as u32).map_err(|e| op.encode(e))?);
        }
        let peer = IfinfomsgBuilder::default()
            .ifi_family(RtAddrFamily::Unspecified)
            .rtattrs(peer)
            .build()
            .map_err(|e| op.encode(e.to_string()))?;
        let mut data = Nest::new();
        data.push(attr(wire::VETH_INFO_PEER, peer).map_err(|e| op.encode(e))?);

        let mut a = base_attrs(&op, spec.name, spec.mtu, spec.mac)?;
        if let Some(master) = spec.master {
            a.push(attr(wire::IFLA_MASTER, master).map_err(|e| op.encode(e))?);
        }
        a.push(linkinfo(LinkKind::Veth.name(), Some(data)).map_err(|e| op.encode(e))?);
        match self.modify(
            &op,
            wire::RTM_NEWLINK,
            wire::NLM_F_CREATE | wire::NLM_F_EXCL,
            ifinfo(&op, a)?,
        ) {
            // EEXIST names no side: the host name being free here means it was the peer's
            Err(e) if e.is_exists() => match self.link_by_name(spec.name)? {
                Some(_) => Ok(Created::HostExists(e)),
                None => Ok(Created::PeerExists),
            },
            Err(e) => Err(e),
            Ok(()) => self.link(spec.name).map(Created::Link),
        }
    }

    /// Creates a bridge and returns it.
    pub fn create_bridge(&self, spec: &BridgeSpec<'_>) -> Result<Link> {
        let data = BridgeData {
            vlan_filtering: spec.vlan_filtering.then_some(true),
        };
        self.create_link(&LinkSpec {
            mtu: spec.mtu,
            mac: spec.mac,
            ..LinkSpec::new(spec.name, LinkKind::Bridge(data))
        })?;
        self.link(spec.name)
    }

    /// Turns VLAN filtering of an existing bridge on or off.
    pub fn set_vlan_filtering<'a>(&self, bridge: impl Into<super::LinkRef<'a>>, on: bool) -> Result<()> {
        let bridge = bridge.into();
        let op = Op::new(
            format!("set vlan_filtering {} on", if on { "on" } else { "off" }),
            bridge.to_string(),
        )
        .feature("bridge vlan_filtering");
        let (b, mut a) = super::link::link_msg(&op, bridge, wire::AF_UNSPEC)?;
        let kind = LinkKind::Bridge(BridgeData {
            vlan_filtering: Some(on),
        });
        a.push(kind.encode().map_err(|e| op.encode(e))?);
        // IFLA_LINKINFO is only applied through RTM_NEWLINK (RTM_SETLINK acks and ignores it).
        self.modify(&op, wire::RTM_NEWLINK, 0, super::link::finish(&op, b, a)?)
    }

    /// Creates a macvlan; it is born in `spec.netns`, so it is not looked up afterwards.
    pub fn create_macvlan(&self, spec: &MacvlanSpec<'_>) -> Result<()> {
        let data = MacvlanData {
            mode: Some(spec.mode),
            bcqueuelen: spec.bcqueuelen,
        };
        self.create_link(&LinkSpec {
            lower: Some(spec.parent),
            netns: spec.netns,
            mtu: spec.mtu,
            mac: spec.mac,
            ..LinkSpec::new(spec.name, LinkKind::Macvlan(data))
        })
    }
}
