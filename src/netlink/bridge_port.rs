//! Bridge port settings: hairpin and isolation flags, and port VLANs.
use super::bytes::{self, CStruct};
use std::io::Cursor;

use neli::consts::rtnl::{Ifla, RtAddrFamily};
use neli::rtnl::{Ifinfomsg, IfinfomsgBuilder};
use neli::types::{Buffer, RtBuffer};
use neli::FromBytesWithInput;

use super::handle::{Handle, Op, Result};
use super::link::{finish, link_msg, LinkRef};
use super::transport::Transport;
use super::wire::{self, attr, Nest};

/// Bridge port flags to change; None leaves a flag as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortFlags {
    /// Send frames back out of the port they came in on (IFLA_BRPORT_MODE).
    pub hairpin: Option<bool>,
    /// Isolated ports cannot talk to each other, only to non-isolated ports (IFLA_BRPORT_ISOLATED).
    pub isolated: Option<bool>,
}

/// One VLAN on a bridge port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortVlan {
    pub vid: u16,
    /// Untagged ingress frames get this VLAN.
    pub pvid: bool,
    /// Egress frames leave untagged.
    pub untagged: bool,
}

impl<T: Transport> Handle<T> {
    /// Sets bridge port flags of an enslaved link.
    pub fn set_port_flags<'a>(&self, port: impl Into<LinkRef<'a>>, flags: PortFlags) -> Result<()> {
        let port = LinkRef::Index(self.link_index(port)?);
        let op = Op::new("set bridge port flags of", port.to_string()).feature("bridge port flags");
        let mut info = Nest::new();
        if let Some(on) = flags.hairpin {
            info.push(attr(wire::IFLA_BRPORT_MODE, on as u8).map_err(|e| op.encode(e))?);
        }
        if let Some(on) = flags.isolated {
            info.push(attr(wire::IFLA_BRPORT_ISOLATED, on as u8).map_err(|e| op.encode(e))?);
        }
        // Without NLA_F_NESTED the bridge reads IFLA_PROTINFO as a bare STP state byte.
        let protinfo = attr(wire::IFLA_PROTINFO | wire::NLA_F_NESTED, info).map_err(|e| op.encode(e))?;
        self.bridge_request(&op, wire::RTM_SETLINK, port, protinfo)
    }

    /// Adds a VLAN to a bridge port (needs a kernel with bridge VLAN filtering support).
    pub fn add_port_vlan<'a>(&self, port: impl Into<LinkRef<'a>>, vlan: PortVlan) -> Result<()> {
        let port = LinkRef::Index(self.link_index(port)?);
        let op = Op::new(format!("add vlan {} to", vlan.vid), port.to_string()).feature("bridge VLAN filtering");
        self.bridge_request(&op, wire::RTM_SETLINK, port, vlan_spec(&op, vlan)?)
    }

    /// Removes a VLAN from a bridge port.
    pub fn delete_port_vlan<'a>(&self, port: impl Into<LinkRef<'a>>, vid: u16) -> Result<()> {
        let port = LinkRef::Index(self.link_index(port)?);
        let op = Op::new(format!("delete vlan {vid} from"), port.to_string()).feature("bridge VLAN filtering");
        let vlan = PortVlan {
            vid,
            pvid: false,
            untagged: false,
        };
        self.bridge_request(&op, wire::RTM_DELLINK, port, vlan_spec(&op, vlan)?)
    }

    /// The VLANs configured on a bridge port (empty on kernels without VLAN filtering, and
    /// for links that are not bridge ports).
    pub fn port_vlans<'a>(&self, port: impl Into<LinkRef<'a>>) -> Result<Vec<PortVlan>> {
        let index = self.link_index(port)?;
        let op = Op::new("list vlans of", LinkRef::Index(index).to_string());
        // Only a dump reaches the bridge driver's getlink; it answers for every port.
        let mut attrs: RtBuffer<Ifla, Buffer> = RtBuffer::new();
        attrs.push(attr(wire::IFLA_EXT_MASK, wire::RTEXT_FILTER_BRVLAN).map_err(|e| op.encode(e))?);
        let msg = IfinfomsgBuilder::default()
            .ifi_family(RtAddrFamily::from(wire::AF_BRIDGE))
            .rtattrs(attrs)
            .build()
            .map_err(|e| op.encode(e.to_string()))?;
        let msgs = self.dump(&op, wire::RTM_GETLINK, wire::encode(&msg).map_err(|e| op.encode(e))?)?;
        let mut vlans = vec![];
        for m in msgs.iter().filter(|m| m.kind == wire::RTM_NEWLINK) {
            let info = Ifinfomsg::from_bytes_with_input(&mut Cursor::new(&m.payload), m.payload.len())
                .map_err(|e| op.decode(format!("link message: {e}")))?;
            if *info.ifi_index() as u32 != index {
                continue;
            }
            for a in info.rtattrs().iter() {
                if u16::from(*a.rta_type()) & 0x3fff != wire::IFLA_AF_SPEC {
                    continue;
                }
                for (ty, v) in wire::attrs(a.rta_payload().as_ref()) {
                    if ty != wire::IFLA_BRIDGE_VLAN_INFO {
                        continue;
                    }
                    // struct bridge_vlan_info: flags u16, vid u16
                    let (Some(flags), Some(vid)) = (bytes::read_host16(v), v.get(2..).and_then(bytes::read_host16))
                    else {
                        continue;
                    };
                    vlans.push(PortVlan {
                        vid,
                        pvid: flags & wire::BRIDGE_VLAN_INFO_PVID != 0,
                        untagged: flags & wire::BRIDGE_VLAN_INFO_UNTAGGED != 0,
                    });
                }
            }
        }
        Ok(vlans)
    }

    /// An AF_BRIDGE request on a port: the bridge driver handles these, not the link core.
    fn bridge_request(&self, op: &Op, kind: u16, port: LinkRef<'_>, a: neli::rtnl::Rtattr<Ifla, Buffer>) -> Result<()> {
        let (b, mut attrs): (_, RtBuffer<Ifla, Buffer>) = link_msg(op, port, wire::AF_BRIDGE)?;
        attrs.push(a);
        self.modify(op, kind, 0, finish(op, b, attrs)?)
    }
}

/// IFLA_AF_SPEC { IFLA_BRIDGE_VLAN_INFO struct bridge_vlan_info { u16 flags; u16 vid } }
fn vlan_spec(op: &Op, vlan: PortVlan) -> Result<neli::rtnl::Rtattr<Ifla, Buffer>> {
    let mut flags = 0u16;
    if vlan.pvid {
        flags |= wire::BRIDGE_VLAN_INFO_PVID;
    }
    if vlan.untagged {
        flags |= wire::BRIDGE_VLAN_INFO_UNTAGGED;
    }
    // struct bridge_vlan_info: flags u16, vid u16
    let info = CStruct::zeroed(4).u16(0, flags).u16(2, vlan.vid).into_bytes();
    let mut spec = Nest::new();
    spec.push(attr(wire::IFLA_BRIDGE_VLAN_INFO, info).map_err(|e| op.encode(e))?);
    attr(wire::IFLA_AF_SPEC | wire::NLA_F_NESTED, spec).map_err(|e| op.encode(e))
}
