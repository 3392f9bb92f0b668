//! IP addresses on links.
use std::io::Cursor;
use std::net::{IpAddr, Ipv4Addr};

use ipnetwork::IpNetwork;
use neli::consts::rtnl::{IfaF, RtAddrFamily, RtScope};
use neli::rtnl::{Ifaddrmsg, IfaddrmsgBuilder};
use neli::types::{Buffer, RtBuffer};
use neli::FromBytesWithInput;

use super::error::ErrorKind;
use super::handle::{Handle, Op, Result};
use super::link::{LinkRef, OperState};
use super::transport::{Message, Transport};
use super::types::{Family, Scope};
use super::wire::{self, attr};

pub const IFA_F_NODAD: u32 = 0x02;
pub const IFA_F_DADFAILED: u32 = 0x08;
pub const IFA_F_TENTATIVE: u32 = 0x40;
pub const IFA_F_PERMANENT: u32 = 0x80;
pub const IFA_F_NOPREFIXROUTE: u32 = 0x200;

/// Options for adding an address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddrOptions {
    /// Skip IPv6 duplicate address detection (IFA_F_NODAD): usable at once, never tentative.
    pub nodad: bool,
    /// Do not add the prefix route for the address (IFA_F_NOPREFIXROUTE).
    pub noprefixroute: bool,
}

/// An address as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub index: u32,
    /// The address with its prefix length (IFA_LOCAL, or IFA_ADDRESS when there is no local).
    pub address: IpNetwork,
    pub scope: Scope,
    /// IFA_F_* bits (from IFA_FLAGS when present, which has more than 8 bits).
    pub flags: u32,
    pub broadcast: Option<Ipv4Addr>,
    pub label: Option<String>,
}

impl Address {
    /// IPv6 DAD has not finished yet: the address cannot be used as a source.
    pub fn is_tentative(&self) -> bool {
        self.flags & IFA_F_TENTATIVE != 0
    }

    /// IPv6 DAD found a duplicate.
    pub fn is_dadfailed(&self) -> bool {
        self.flags & IFA_F_DADFAILED != 0
    }

    pub fn is_permanent(&self) -> bool {
        self.flags & IFA_F_PERMANENT != 0
    }
}

fn object(index: u32, net: IpNetwork) -> String {
    format!("{net} on link index {index}")
}

fn family_of(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        wire::AF_INET
    } else {
        wire::AF_INET6
    }
}

fn addr_msg(op: &Op, index: u32, net: IpNetwork, flags: u32, with_broadcast: bool) -> Result<Vec<u8>> {
    let ip = wire::ip_bytes(net.ip());
    let mut a = RtBuffer::new();
    a.push(attr(wire::IFA_LOCAL, Buffer::from(ip.clone())).map_err(|e| op.encode(e))?);
    a.push(attr(wire::IFA_ADDRESS, Buffer::from(ip)).map_err(|e| op.encode(e))?);
    if let (true, IpNetwork::V4(v4)) = (with_broadcast, net) {
        // As Go's netlink.AddrAdd: a broadcast address for prefixes that have one.
        if v4.prefix() < 31 {
            a.push(attr(wire::IFA_BROADCAST, v4.broadcast().octets()).map_err(|e| op.encode(e))?);
        }
    }
    if flags != 0 {
        a.push(attr(wire::IFA_FLAGS, flags).map_err(|e| op.encode(e))?);
    }
    let msg = IfaddrmsgBuilder::default()
        .ifa_family(RtAddrFamily::from(family_of(net.ip())))
        .ifa_prefixlen(net.prefix())
        .ifa_flags(IfaF::from_bits_retain(flags as u8))
        .ifa_scope(RtScope::from(Scope::Universe.to_raw()))
        .ifa_index(index)
        .rtattrs(a)
        .build()
        .map_err(|e| op.encode(e.to_string()))?;
    wire::encode(&msg).map_err(|e| op.encode(e))
}

impl<T: Transport> Handle<T> {
    /// `ip addr add NET dev INDEX [nodad]`; an existing identical address is an Exists error.
    pub fn add_address(&self, index: u32, net: IpNetwork, opts: AddrOptions) -> Result<()> {
        let op = Op::new("add address", object(index, net));
        let mut flags = 0;
        if opts.nodad {
            flags |= IFA_F_NODAD;
        }
        if opts.noprefixroute {
            flags |= IFA_F_NOPREFIXROUTE;
        }
        let msg = addr_msg(&op, index, net, flags, true)?;
        self.modify(&op, wire::RTM_NEWADDR, wire::NLM_F_CREATE | wire::NLM_F_EXCL, msg)
    }

    /// `ip addr del NET dev INDEX`; a missing address is a NotFound error.
    pub fn delete_address(&self, index: u32, net: IpNetwork) -> Result<()> {
        let op = Op::new("delete address", object(index, net));
        let msg = addr_msg(&op, index, net, 0, false)?;
        self.modify(&op, wire::RTM_DELADDR, 0, msg)
    }

    /// Addresses of one link (or all links with None) in a family, with their flags.
    pub fn addresses(&self, index: Option<u32>, family: Family) -> Result<Vec<Address>> {
        let op = match index {
            Some(i) => Op::new("list addresses of", format!("link index {i}")),
            None => Op::new("list", "addresses"),
        };
        // Strict checking allows the kernel to filter by link; the filter below keeps the
        // result right if it did not.
        let msg = IfaddrmsgBuilder::default()
            .ifa_family(RtAddrFamily::from(family.af()))
            .ifa_prefixlen(0)
            .ifa_scope(RtScope::from(0))
            .ifa_index(index.unwrap_or(0))
            .build()
            .map_err(|e| op.encode(e.to_string()))?;
        let msgs = self.dump(&op, wire::RTM_GETADDR, wire::encode(&msg).map_err(|e| op.encode(e))?)?;
        let mut out = vec![];
        for m in msgs.iter().filter(|m| m.kind == wire::RTM_NEWADDR) {
            let a = decode_address(&op, m)?;
            let family_ok = match family {
                Family::All => true,
                Family::V4 => a.address.is_ipv4(),
                Family::V6 => a.address.is_ipv6(),
            };
            if family_ok && index.map_or(true, |i| i == a.index) {
                out.push(a);
            }
        }
        Ok(out)
    }
}

/// How often [`Handle::settle_addresses`] looks again (as the reference plugins do).
const SETTLE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

impl<T: Transport> Handle<T> {
    /// Waits until no address of the link is tentative (IPv6 DAD still running), polling
    /// like the reference plugins' `SettleAddresses`. A DAD failure ends the wait at once
    /// with a [`ErrorKind::DadFailed`] error.
    ///
    /// DAD cannot run on a link without carrier (a macvlan whose master is down or has no
    /// peer): the kernel keeps its addresses tentative until carrier comes and runs DAD
    /// then. So a link without carrier ends the wait at once, successfully, with the
    /// addresses still tentative; and at the deadline only a link that is oper-up is a
    /// [`ErrorKind::Timeout`] error (the reference's current rule), any other state is not.
    pub fn settle_addresses<'a>(&self, link: impl Into<LinkRef<'a>>, timeout: std::time::Duration) -> Result<()> {
        let link = link.into();
        let op = Op::new("settle addresses of", link.to_string());
        let index = self.link_index(link)?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let addrs = self.addresses(Some(index), Family::All)?;
            if let Some(a) = addrs.iter().find(|a| a.is_dadfailed()) {
                return Err(op.error(ErrorKind::DadFailed {
                    address: a.address.to_string(),
                }));
            }
            if !addrs.iter().any(Address::is_tentative) {
                return Ok(());
            }
            let state = self.link(index)?;
            if !state.lower_up {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                if state.oper_state != OperState::Up {
                    return Ok(());
                }
                let secs = crate::util::time::seconds(timeout);
                return Err(op
                    .error(ErrorKind::Timeout)
                    .with_detail(format!("still tentative after {secs} seconds")));
            }
            std::thread::sleep(SETTLE_INTERVAL);
        }
    }
}

pub(crate) fn decode_address(op: &Op, m: &Message) -> Result<Address> {
    let msg = Ifaddrmsg::from_bytes_with_input(&mut Cursor::new(&m.payload), m.payload.len())
        .map_err(|e| op.decode(format!("address message: {e}")))?;
    let (mut local, mut address, mut broadcast, mut label, mut flags) = (None, None, None, None, None);
    for a in msg.rtattrs().iter() {
        let p = a.rta_payload().as_ref();
        match u16::from(*a.rta_type()) & 0x3fff {
            wire::IFA_LOCAL => local = wire::as_ip(p),
            wire::IFA_ADDRESS => address = wire::as_ip(p),
            wire::IFA_BROADCAST => broadcast = <[u8; 4]>::try_from(p).ok().map(Ipv4Addr::from),
            wire::IFA_LABEL => label = Some(wire::as_string(p)),
            wire::IFA_FLAGS => flags = wire::as_u32(p),
            _ => {}
        }
    }
    let ip = local
        .or(address)
        .ok_or_else(|| op.decode("address message without an address"))?;
    let address = IpNetwork::new(ip, *msg.ifa_prefixlen()).map_err(|e| op.decode(e.to_string()))?;
    Ok(Address {
        index: *msg.ifa_index(),
        address,
        scope: Scope::from_raw(u8::from(*msg.ifa_scope())),
        flags: flags.unwrap_or(msg.ifa_flags().bits() as u32),
        broadcast,
        label,
    })
}
