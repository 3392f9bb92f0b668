//! Links: look them up, list them, change them, move them, delete them.
use std::fmt;
use std::io::Cursor;
use std::os::fd::AsRawFd;

use neli::consts::rtnl::{Iff, Ifla, RtAddrFamily};
use neli::rtnl::{Ifinfomsg, IfinfomsgBuilder};
use neli::types::{Buffer, RtBuffer};
use neli::FromBytesWithInput;

use super::error::ErrorKind;
use super::handle::{Handle, Op, Result};
use super::link_kind::LinkKind;
use super::transport::{Message, Transport};
use super::types::MacAddr;
use super::wire::{self, attr};
use crate::netns::Netns;

const IFF_UP: u32 = 0x1;
const IFF_PROMISC: u32 = 0x100;
const IFF_ALLMULTI: u32 = 0x200;
const IFF_LOWER_UP: u32 = 0x10000;
/// `struct ifinfomsg`: the fixed header in front of a link message's attributes.
pub(crate) const IFINFOMSG_LEN: usize = 16;

/// A network interface as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// The kind and its data (None for devices without rtnl kind, like `lo`).
    pub kind: Option<LinkKind>,
    /// The kind of the master when enslaved (`bridge` for a bridge port).
    pub slave_kind: Option<String>,
    pub mac: Option<MacAddr>,
    pub mtu: u32,
    /// The index of the master (bridge) this link is enslaved to.
    pub master: Option<u32>,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// Carrier present (IFF_LOWER_UP).
    pub lower_up: bool,
    pub oper_state: OperState,
    /// IFLA_LINK: for a veth the peer's index, for a macvlan its parent's. The index is in
    /// the namespace named by `link_netnsid` when that is set.
    pub peer_index: Option<u32>,
    /// The peer namespace id (IFLA_LINK_NETNSID) when the peer/parent is in another namespace.
    pub link_netnsid: Option<i32>,
    pub promisc: bool,
    /// Receives all multicast frames (IFF_ALLMULTI).
    pub allmulti: bool,
    /// Transmit queue length (IFLA_TXQLEN).
    pub txqlen: u32,
    /// All ifi_flags bits, for anything not broken out above.
    pub flags: u32,
    /// IFLA_IFALIAS, the free-form description (`ip link set … alias …`); None when unset
    /// or empty.
    pub alias: Option<String>,
}

impl Link {
    /// The kernel's name of the link's kind (`veth`, `macvlan`, …), None for `lo` and the like.
    pub fn kind_name(&self) -> Option<&str> {
        self.kind.as_ref().map(LinkKind::name)
    }
}

/// RFC 2863 operational state (IFLA_OPERSTATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperState {
    Unknown,
    NotPresent,
    Down,
    LowerLayerDown,
    Testing,
    Dormant,
    Up,
}

impl OperState {
    /// Only the fake transport encodes oper states.
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn to_raw(self) -> u8 {
        match self {
            OperState::Unknown => 0,
            OperState::NotPresent => 1,
            OperState::Down => 2,
            OperState::LowerLayerDown => 3,
            OperState::Testing => 4,
            OperState::Dormant => 5,
            OperState::Up => 6,
        }
    }

    fn from_raw(n: u8) -> OperState {
        match n {
            1 => OperState::NotPresent,
            2 => OperState::Down,
            3 => OperState::LowerLayerDown,
            4 => OperState::Testing,
            5 => OperState::Dormant,
            6 => OperState::Up,
            _ => OperState::Unknown,
        }
    }
}

/// A link named either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkRef<'a> {
    Index(u32),
    Name(&'a str),
}

impl fmt::Display for LinkRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkRef::Index(i) => write!(f, "link index {i}"),
            LinkRef::Name(n) => write!(f, "{n}"),
        }
    }
}

impl From<u32> for LinkRef<'_> {
    fn from(i: u32) -> Self {
        LinkRef::Index(i)
    }
}

impl<'a> From<&'a str> for LinkRef<'a> {
    fn from(n: &'a str) -> Self {
        LinkRef::Name(n)
    }
}

impl<'a> From<&'a String> for LinkRef<'a> {
    fn from(n: &'a String) -> Self {
        LinkRef::Name(n)
    }
}

impl<'a> From<&'a Link> for LinkRef<'a> {
    fn from(l: &'a Link) -> Self {
        LinkRef::Index(l.index)
    }
}

/// An ifinfomsg addressed to a link: by index, or by name with index 0.
pub(crate) fn link_msg(op: &Op, link: LinkRef<'_>, family: u8) -> Result<(IfinfomsgBuilder, RtBuffer<Ifla, Buffer>)> {
    let mut attrs = RtBuffer::new();
    let builder = IfinfomsgBuilder::default().ifi_family(RtAddrFamily::from(family));
    let builder = match link {
        LinkRef::Index(i) => builder.ifi_index(i as libc::c_int),
        LinkRef::Name(n) => {
            attrs.push(attr(wire::IFLA_IFNAME, n).map_err(|e| op.encode(e))?);
            builder
        }
    };
    Ok((builder, attrs))
}

pub(crate) fn finish(op: &Op, builder: IfinfomsgBuilder, attrs: RtBuffer<Ifla, Buffer>) -> Result<Vec<u8>> {
    let msg = builder.rtattrs(attrs).build().map_err(|e| op.encode(e.to_string()))?;
    wire::encode(&msg).map_err(|e| op.encode(e))
}

impl<T: Transport> Handle<T> {
    /// The link called `name`, or None.
    pub fn link_by_name(&self, name: &str) -> Result<Option<Link>> {
        self.find_link(LinkRef::Name(name))
    }

    /// The link with index `index`, or None.
    pub fn link_by_index(&self, index: u32) -> Result<Option<Link>> {
        self.find_link(LinkRef::Index(index))
    }

    /// The link, or a NotFound error naming it.
    pub fn link<'a>(&self, link: impl Into<LinkRef<'a>>) -> Result<Link> {
        let link = link.into();
        self.find_link(link)?
            .ok_or_else(|| Op::new("get", link.to_string()).error(ErrorKind::NotFound))
    }

    /// The index of a link named either way (no request when it is already an index).
    pub fn link_index<'a>(&self, link: impl Into<LinkRef<'a>>) -> Result<u32> {
        match link.into() {
            LinkRef::Index(i) => Ok(i),
            named => Ok(self.link(named)?.index),
        }
    }

    fn find_link(&self, link: LinkRef<'_>) -> Result<Option<Link>> {
        let op = Op::new("get", link.to_string());
        match self.link_message(&op, link) {
            Ok(m) => Ok(Some(decode_link(&op, &m)?)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The kernel's RTM_NEWLINK about one link; NotFound when there is none.
    pub(crate) fn link_message(&self, op: &Op, link: LinkRef<'_>) -> Result<Message> {
        let (b, a) = link_msg(op, link, wire::AF_UNSPEC)?;
        let msgs = self.get(op, wire::RTM_GETLINK, finish(op, b, a)?)?;
        msgs.into_iter()
            .find(|m| m.kind == wire::RTM_NEWLINK)
            .ok_or_else(|| op.error(ErrorKind::NotFound))
    }

    /// Every link in the handle's namespace.
    pub fn links(&self) -> Result<Vec<Link>> {
        let op = Op::new("list", "links");
        let msg = IfinfomsgBuilder::default()
            .ifi_family(RtAddrFamily::Unspecified)
            .build()
            .map_err(|e| op.encode(e.to_string()))?;
        let msgs = self.dump(&op, wire::RTM_GETLINK, wire::encode(&msg).map_err(|e| op.encode(e))?)?;
        msgs.iter()
            .filter(|m| m.kind == wire::RTM_NEWLINK)
            .map(|m| decode_link(&op, m))
            .collect()
    }

    /// `ip link set LINK up`
    pub fn set_up<'a>(&self, link: impl Into<LinkRef<'a>>) -> Result<()> {
        self.set_flag(link.into(), "set up", IFF_UP, true)
    }

    /// `ip link set LINK down`
    pub fn set_down<'a>(&self, link: impl Into<LinkRef<'a>>) -> Result<()> {
        self.set_flag(link.into(), "set down", IFF_UP, false)
    }

    /// `ip link set LINK promisc on|off`
    pub fn set_promisc<'a>(&self, link: impl Into<LinkRef<'a>>, on: bool) -> Result<()> {
        self.set_flag(
            link.into(),
            if on { "set promisc on" } else { "set promisc off" },
            IFF_PROMISC,
            on,
        )
    }

    /// `ip link set LINK allmulticast on|off`
    pub fn set_allmulti<'a>(&self, link: impl Into<LinkRef<'a>>, on: bool) -> Result<()> {
        self.set_flag(
            link.into(),
            if on {
                "set allmulticast on"
            } else {
                "set allmulticast off"
            },
            IFF_ALLMULTI,
            on,
        )
    }

    fn set_flag(&self, link: LinkRef<'_>, what: &str, flag: u32, on: bool) -> Result<()> {
        let op = Op::new(what, link.to_string());
        let (b, a) = link_msg(&op, link, wire::AF_UNSPEC)?;
        let b = b
            .ifi_flags(Iff::from_bits_retain(if on { flag } else { 0 }))
            .ifi_change(Iff::from_bits_retain(flag));
        self.modify(&op, wire::RTM_NEWLINK, 0, finish(&op, b, a)?)
    }

    /// Enslaves the link to `master` (a bridge index), or releases it with None.
    pub fn set_master<'a>(&self, link: impl Into<LinkRef<'a>>, master: Option<u32>) -> Result<()> {
        let link = link.into();
        let op = match master {
            Some(m) => Op::new(format!("set master {m} of"), link.to_string()),
            None => Op::new("release from master", link.to_string()),
        };
        self.set_attr(&op, link, wire::IFLA_MASTER, master.unwrap_or(0))
    }

    pub fn set_mtu<'a>(&self, link: impl Into<LinkRef<'a>>, mtu: u32) -> Result<()> {
        let link = link.into();
        self.set_attr(
            &Op::new(format!("set mtu {mtu} of"), link.to_string()),
            link,
            wire::IFLA_MTU,
            mtu,
        )
    }

    /// `ip link set LINK txqueuelen N`
    pub fn set_txqlen<'a>(&self, link: impl Into<LinkRef<'a>>, qlen: u32) -> Result<()> {
        let link = link.into();
        self.set_attr(
            &Op::new(format!("set txqueuelen {qlen} of"), link.to_string()),
            link,
            wire::IFLA_TXQLEN,
            qlen,
        )
    }

    pub fn set_mac<'a>(&self, link: impl Into<LinkRef<'a>>, mac: MacAddr) -> Result<()> {
        let link = link.into();
        self.set_attr(
            &Op::new(format!("set mac {mac} of"), link.to_string()),
            link,
            wire::IFLA_ADDRESS,
            mac.0,
        )
    }

    /// Renames the link with index `index` (the kernel requires it to be down).
    pub fn set_name(&self, index: u32, name: &str) -> Result<()> {
        let link = LinkRef::Index(index);
        self.set_attr(
            &Op::new(format!("rename to {name}"), link.to_string()),
            link,
            wire::IFLA_IFNAME,
            name,
        )
    }

    /// Moves the link into another namespace (its index may change there).
    pub fn set_netns<'a>(&self, link: impl Into<LinkRef<'a>>, netns: &Netns) -> Result<()> {
        let link = link.into();
        let op = Op::new(format!("move to netns {}", netns.path().display()), link.to_string());
        self.set_attr(&op, link, wire::IFLA_NET_NS_FD, netns.as_raw_fd() as u32)
    }

    /// Moves the link with index `index` into `netns` and names it `name` there, in one
    /// request (`ip link set … netns … name …`): the kernel moves it first, under `name`
    /// when its own name is taken there, then renames it. A failed rename leaves it moved
    /// under its old name. The link never carries `name` in this namespace.
    pub fn move_and_rename(&self, index: u32, netns: &Netns, name: &str) -> Result<()> {
        let link = LinkRef::Index(index);
        let op = Op::new(
            format!("move to netns {} as {name}", netns.path().display()),
            link.to_string(),
        );
        let (b, mut a) = link_msg(&op, link, wire::AF_UNSPEC)?;
        a.push(attr(wire::IFLA_NET_NS_FD, netns.as_raw_fd() as u32).map_err(|e| op.encode(e))?);
        a.push(attr(wire::IFLA_IFNAME, name).map_err(|e| op.encode(e))?);
        self.modify(&op, wire::RTM_NEWLINK, 0, finish(&op, b, a)?)
    }

    /// Sets the link's alias (IFLA_IFALIAS); `""` removes it. Sent without a NUL, as `ip`
    /// and Go's netlink send it, so an empty one is a zero-length attribute, which the kernel
    /// takes as "no alias".
    pub fn set_alias<'a>(&self, link: impl Into<LinkRef<'a>>, alias: &str) -> Result<()> {
        let link = link.into();
        let op = match alias {
            "" => Op::new("remove alias of", link.to_string()),
            a => Op::new(format!("set alias {a} of"), link.to_string()),
        };
        self.set_attr(&op, link, wire::IFLA_IFALIAS, Buffer::from(alias.as_bytes().to_vec()))
    }

    fn set_attr(&self, op: &Op, link: LinkRef<'_>, ty: u16, value: impl neli::Size + neli::ToBytes) -> Result<()> {
        let (b, mut a) = link_msg(op, link, wire::AF_UNSPEC)?;
        a.push(attr(ty, value).map_err(|e| op.encode(e))?);
        // RTM_NEWLINK without CREATE changes an existing link; unlike RTM_SETLINK it also
        // applies IFLA_LINKINFO, so every change goes the same way.
        self.modify(op, wire::RTM_NEWLINK, 0, finish(op, b, a)?)
    }

    /// Deletes the link (a veth takes its peer with it).
    pub fn delete_link<'a>(&self, link: impl Into<LinkRef<'a>>) -> Result<()> {
        let link = link.into();
        let op = Op::new("delete", link.to_string());
        let (b, a) = link_msg(&op, link, wire::AF_UNSPEC)?;
        self.modify(&op, wire::RTM_DELLINK, 0, finish(&op, b, a)?)
    }

    /// Teardown's delete: a link that is already gone is not an error. Returns whether
    /// this call deleted it.
    pub fn remove_link<'a>(&self, link: impl Into<LinkRef<'a>>) -> Result<bool> {
        match self.delete_link(link) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Decodes an RTM_NEWLINK message.
pub(crate) fn decode_link(op: &Op, m: &Message) -> Result<Link> {
    let msg = Ifinfomsg::from_bytes_with_input(&mut Cursor::new(&m.payload), m.payload.len())
        .map_err(|e| op.decode(format!("link message: {e}")))?;
    let flags = msg.ifi_flags().bits();
    let mut link = Link {
        index: *msg.ifi_index() as u32,
        name: String::new(),
        kind: None,
        slave_kind: None,
        mac: None,
        mtu: 0,
        master: None,
        up: flags & IFF_UP != 0,
        lower_up: flags & IFF_LOWER_UP != 0,
        oper_state: OperState::Unknown,
        peer_index: None,
        link_netnsid: None,
        promisc: flags & IFF_PROMISC != 0,
        allmulti: flags & IFF_ALLMULTI != 0,
        txqlen: 0,
        flags,
        alias: None,
    };
    for a in msg.rtattrs().iter() {
        let p = a.rta_payload().as_ref();
        match u16::from(*a.rta_type()) & 0x3fff {
            wire::IFLA_IFNAME => link.name = wire::as_string(p),
            wire::IFLA_MTU => link.mtu = wire::as_u32(p).unwrap_or(0),
            wire::IFLA_TXQLEN => link.txqlen = wire::as_u32(p).unwrap_or(0),
            wire::IFLA_ADDRESS => link.mac = <[u8; 6]>::try_from(p).ok().map(MacAddr),
            wire::IFLA_MASTER => link.master = wire::as_u32(p).filter(|m| *m != 0),
            wire::IFLA_LINK => link.peer_index = wire::as_u32(p).filter(|l| *l != 0),
            wire::IFLA_LINK_NETNSID => link.link_netnsid = wire::as_u32(p).map(|n| n as i32),
            wire::IFLA_OPERSTATE => link.oper_state = OperState::from_raw(wire::as_u8(p).unwrap_or(0)),
            wire::IFLA_LINKINFO => decode_linkinfo(p, &mut link),
            wire::IFLA_IFALIAS => link.alias = Some(wire::as_string(p)).filter(|a| !a.is_empty()),
            _ => {}
        }
    }
    // IFLA_LINK names the link itself for plain devices.
    if link.peer_index == Some(link.index) && link.link_netnsid.is_none() {
        link.peer_index = None;
    }
    Ok(link)
}

fn decode_linkinfo(p: &[u8], link: &mut Link) {
    link.kind = LinkKind::decode(p);
    link.slave_kind = wire::find(p, wire::IFLA_INFO_SLAVE_KIND).map(wire::as_string);
}
