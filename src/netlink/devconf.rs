//! A link's IP settings, the `net/ipv4/conf/<dev>/*` and `net/ipv6/conf/<dev>/*` sysctls,
//! over rtnetlink instead of `/proc/sys`.
//!
//! Why: every `/proc/sys/net/...` path is looked up in one directory shared by all network
//! namespaces, where each namespace that ever opened a sysctl has its own `net` entry with
//! the same name, so every lookup walks the entries of every other namespace
//! (`proc_sys_compare`). On a node with 250 pods that is the largest cost that grows with
//! the node in an ADD. A netlink request names the link by index in the handle's own
//! namespace and costs the same on the 1,000th pod as on the first.
//!
//! What the kernel offers:
//! * IPv4: every `net/ipv4/conf/<dev>/<leaf>` is read from RTM_GETLINK's
//!   `IFLA_AF_SPEC`/`AF_INET`/`IFLA_INET_CONF` and set with the same attribute in an
//!   RTM_NEWLINK ([`Handle::set_ipv4_conf`]), exactly as a write of the sysctl sets it
//!   (`ipv4_devconf_set`: the value, and the mark that keeps a later change of `default`
//!   from overriding it).
//! * IPv6: `net/ipv6/conf/<dev>/<leaf>` is *read* from `IFLA_AF_SPEC`/`AF_INET6`/
//!   `IFLA_INET6_CONF`, but `inet6_set_link_af` accepts only `IFLA_INET6_TOKEN` and
//!   `IFLA_INET6_ADDR_GEN_MODE`: writing `accept_dad`, `accept_ra`, `disable_ipv6`,
//!   `keep_addr_on_down`, … still takes `/proc/sys` (see [`crate::sysctl`]).
//! * `net/ipv4/ip_forward` and `net/ipv6/conf/all/forwarding` are read with RTM_GETNETCONF
//!   ([`Handle::forwarding`]). Writing them stays a sysctl write: the sysctl handler turns
//!   forwarding on for every device of the namespace, which no netlink request does.
use neli::consts::rtnl::Ifla;
use neli::types::{Buffer, RtBuffer};

use super::bytes;
use super::handle::{Handle, Op, Result};
use super::link::{finish, link_msg, LinkRef};
use super::transport::{Message, Transport};
use super::types::Family;
use super::wire::{self, attr, Nest};

/// `IFLA_INET_CONF` inside `IFLA_AF_SPEC`/`AF_INET`.
pub(crate) const IFLA_INET_CONF: u16 = 1;
/// `IFLA_INET6_CONF` inside `IFLA_AF_SPEC`/`AF_INET6`.
pub(crate) const IFLA_INET6_CONF: u16 = 2;
pub(crate) const RTM_NEWNETCONF: u16 = 80;
pub(crate) const RTM_GETNETCONF: u16 = 82;
pub(crate) const NETCONFA_IFINDEX: u16 = 1;
pub(crate) const NETCONFA_FORWARDING: u16 = 2;
/// NETCONFA_IFINDEX of the namespace's `all` settings.
const NETCONFA_IFINDEX_ALL: i32 = -1;
/// `struct netconfmsg` (one byte, the family), padded to the attributes' alignment.
pub(crate) const NETCONFMSG_LEN: usize = 4;

/// `net/ipv4/conf/<dev>/<leaf>`: the kernel's `IPV4_DEVCONF_*` numbers (`uapi/linux/ip.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Ipv4Conf {
    Forwarding = 1,
    ArpNotify = 22,
    RouteLocalnet = 26,
}

/// `net/ipv6/conf/<dev>/<leaf>`: the kernel's `DEVCONF_*` numbers (`uapi/linux/ipv6.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Ipv6Conf {
    Forwarding = 0,
    AcceptRa = 3,
    DisableIpv6 = 26,
    AcceptDad = 27,
    NdiscNotify = 29,
    KeepAddrOnDown = 42,
    EnhancedDad = 46,
}

impl Ipv4Conf {
    /// The sysctl's leaf name, for messages.
    pub fn leaf(self) -> &'static str {
        match self {
            Ipv4Conf::Forwarding => "forwarding",
            Ipv4Conf::ArpNotify => "arp_notify",
            Ipv4Conf::RouteLocalnet => "route_localnet",
        }
    }
}

/// A link's IP settings as RTM_GETLINK reports them; a family the device has no settings
/// for (IPv6 disabled at boot, or compiled out) reads as None.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DevConf {
    ipv4: Option<Vec<u32>>,
    ipv6: Option<Vec<i32>>,
}

impl DevConf {
    pub fn ipv4(&self, key: Ipv4Conf) -> Option<u32> {
        // IFLA_INET_CONF's array starts at IPV4_DEVCONF_FORWARDING, which is 1.
        self.ipv4.as_ref()?.get(key as usize - 1).copied()
    }

    pub fn ipv6(&self, key: Ipv6Conf) -> Option<i32> {
        self.ipv6.as_ref()?.get(key as usize).copied()
    }

    /// Decodes the `IFLA_AF_SPEC` of an RTM_NEWLINK message (its attributes after the ifinfomsg).
    pub(crate) fn decode(link_attrs: &[u8]) -> DevConf {
        let mut conf = DevConf::default();
        let Some(spec) = wire::find(link_attrs, wire::IFLA_AF_SPEC) else {
            return conf;
        };
        for (family, nest) in wire::attrs(spec) {
            match family as u8 {
                wire::AF_INET => {
                    conf.ipv4 = wire::find(nest, IFLA_INET_CONF)
                        .map(|p| p.chunks_exact(4).filter_map(bytes::read_host32).collect())
                }
                wire::AF_INET6 => {
                    conf.ipv6 = wire::find(nest, IFLA_INET6_CONF)
                        .map(|p| p.chunks_exact(4).filter_map(bytes::read_host_i32).collect())
                }
                _ => {}
            }
        }
        conf
    }
}

impl<T: Transport> Handle<T> {
    /// The link's IPv4 and IPv6 settings (one RTM_GETLINK).
    pub fn devconf<'a>(&self, link: impl Into<LinkRef<'a>>) -> Result<DevConf> {
        let link = link.into();
        let op = Op::new("get ip settings of", link.to_string());
        let m = self.link_message(&op, link)?;
        Ok(DevConf::decode(
            m.payload.get(super::link::IFINFOMSG_LEN..).unwrap_or(&[]),
        ))
    }

    /// Sets `net/ipv4/conf/<link>/<leaf>` for each (leaf, value), in one request.
    pub fn set_ipv4_conf<'a>(&self, link: impl Into<LinkRef<'a>>, settings: &[(Ipv4Conf, u32)]) -> Result<()> {
        let link = link.into();
        let what: Vec<String> = settings.iter().map(|(k, v)| format!("{}={v}", k.leaf())).collect();
        let op = Op::new(format!("set ipv4 {} of", what.join(" ")), link.to_string()).feature("IPv4");
        let enc = |e: String| op.encode(e);
        let mut conf = Nest::new();
        for (key, value) in settings {
            conf.push(attr(*key as u16, *value).map_err(enc)?);
        }
        let mut inet = Nest::new();
        inet.push(attr(IFLA_INET_CONF | wire::NLA_F_NESTED, conf).map_err(enc)?);
        let mut spec = Nest::new();
        spec.push(attr(wire::AF_INET as u16 | wire::NLA_F_NESTED, inet).map_err(enc)?);
        let (b, mut a): (_, RtBuffer<Ifla, Buffer>) = link_msg(&op, link, wire::AF_UNSPEC)?;
        a.push(attr(wire::IFLA_AF_SPEC | wire::NLA_F_NESTED, spec).map_err(enc)?);
        self.modify(&op, wire::RTM_NEWLINK, 0, finish(&op, b, a)?)
    }

    /// The namespace's forwarding switch for `family` (`net/ipv4/ip_forward`,
    /// `net/ipv6/conf/all/forwarding`); None when the kernel has no such family.
    pub fn forwarding(&self, family: Family) -> Result<Option<bool>> {
        let (af, what) = match family {
            Family::V4 => (wire::AF_INET, "ipv4"),
            Family::V6 => (wire::AF_INET6, "ipv6"),
            Family::All => unreachable!("forwarding is per family"),
        };
        let op = Op::new("get forwarding of", what);
        let mut payload = vec![0u8; NETCONFMSG_LEN];
        payload[0] = af;
        payload.extend(wire::raw_attr(NETCONFA_IFINDEX, &bytes::host_i32(NETCONFA_IFINDEX_ALL)));
        let msgs = match self.get(&op, RTM_GETNETCONF, payload) {
            Ok(m) => m,
            Err(e) if e.errno() == Some(libc::EAFNOSUPPORT) || e.errno() == Some(libc::EOPNOTSUPP) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(msgs
            .iter()
            .filter(|m| m.kind == RTM_NEWNETCONF)
            .find_map(netconf_forwarding)
            .map(|v| v != 0))
    }
}

fn netconf_forwarding(m: &Message) -> Option<u32> {
    let attrs = m.payload.get(NETCONFMSG_LEN..)?;
    wire::find(attrs, NETCONFA_FORWARDING).and_then(wire::as_u32)
}
