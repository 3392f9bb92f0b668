//! A link's kind and the data of that kind: IFLA_LINKINFO's IFLA_INFO_KIND and
//! IFLA_INFO_DATA, as rust-netlink's rtnetlink models them (`InfoKind`/`InfoData`), in one
//! enum. The kernel's reports decode into it ([`Link::kind`](super::Link::kind)) and create
//! requests encode from it ([`Handle::create_link`](super::Handle::create_link)).
//!
//! A new kind is one variant here, with its IFLA_INFO_DATA attribute numbers and its arm in
//! [`LinkKind::name`], [`LinkKind::decode`] and [`LinkKind::encode_data`] (and in
//! [`LinkKind::feature`] when a kernel may lack a part of it), and the variant in the round
//! trip of this file's tests. A kernel without the kind itself is detected for every kind
//! ([`Handle::create_link`](super::Handle::create_link) reports it as Unsupported, naming
//! the kind; [`LinkKind::module`] names what to load). Until it has a variant, a kind decodes as [`LinkKind::Other`] with the
//! kernel's name.
use super::types::MacvlanMode;
use super::wire::{self, attr, Nest};

// IFLA_INFO_DATA attributes, per kind (linux/if_link.h).
const IFLA_BR_VLAN_FILTERING: u16 = 7;
const IFLA_MACVLAN_MODE: u16 = 1;
const IFLA_MACVLAN_BC_QUEUE_LEN: u16 = 7;
const IFLA_IPVLAN_MODE: u16 = 1;
const IFLA_IPVLAN_FLAGS: u16 = 2;
const IFLA_VLAN_ID: u16 = 1;
const IFLA_VLAN_PROTOCOL: u16 = 5;
const IFLA_VRF_TABLE: u16 = 1;
const IFLA_TUN_OWNER: u16 = 1;
const IFLA_TUN_GROUP: u16 = 2;
const IFLA_TUN_TYPE: u16 = 3;
const IFLA_TUN_PI: u16 = 4;
const IFLA_TUN_VNET_HDR: u16 = 5;
const IFLA_TUN_PERSIST: u16 = 6;
const IFLA_TUN_MULTI_QUEUE: u16 = 7;
// IFLA_TUN_TYPE values: the IFF_TUN and IFF_TAP bits of TUNSETIFF
const TUN_TYPE_TUN: u8 = 1;
const TUN_TYPE_TAP: u8 = 2;

/// A link kind with its kind-specific data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkKind {
    /// One end of a veth pair (the peer is create-time data: see `VethSpec`).
    Veth,
    Bridge(BridgeData),
    Macvlan(MacvlanData),
    /// An intermediate functional block (bandwidth's ingress shaping).
    Ifb,
    /// A tun or tap device. The kernel reports its data but creates it only through
    /// `/dev/net/tun` (`crate::tun`), never from an rtnetlink request.
    Tun(TunData),
    /// A link with no lower link and no queue, whose packets go nowhere (the `dummy` plugin).
    Dummy,
    /// An ipvlan: shares its lower link's MAC, told apart by its addresses.
    Ipvlan(IpvlanData),
    /// An 802.1Q/802.1ad VLAN on its lower link.
    Vlan(VlanData),
    /// A VRF master: its slaves' routes live in its routing table.
    Vrf(VrfData),
    /// A kind without a variant yet, by the kernel's name (`vxlan`, `geneve`, …).
    Other(String),
}

/// IFLA_INFO_DATA of a bridge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeData {
    /// IFLA_BR_VLAN_FILTERING; None where the kernel has no VLAN filtering (or, creating,
    /// leaves the kernel's default).
    pub vlan_filtering: Option<bool>,
}

/// IFLA_INFO_DATA of a macvlan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MacvlanData {
    /// IFLA_MACVLAN_MODE; None for a mode this crate does not know.
    pub mode: Option<MacvlanMode>,
    /// IFLA_MACVLAN_BC_QUEUE_LEN: the broadcast/multicast queue length (kernels ≥ 5.11).
    pub bcqueuelen: Option<u32>,
}

/// IFLA_INFO_DATA of a tun/tap device, as the kernel reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunData {
    /// IFLA_TUN_TYPE: a tap (Ethernet frames) rather than a tun (IP packets).
    pub tap: bool,
    /// IFLA_TUN_OWNER / IFLA_TUN_GROUP: the user and group allowed to attach; None: anyone
    /// with CAP_NET_ADMIN.
    pub owner: Option<u32>,
    pub group: Option<u32>,
    /// IFLA_TUN_PI: packets carry the 4-byte packet-information header (no IFF_NO_PI).
    pub pi: bool,
    /// IFLA_TUN_VNET_HDR: packets carry a virtio-net header.
    pub vnet_hdr: bool,
    /// IFLA_TUN_PERSIST: the device outlives its last open file.
    pub persist: bool,
    /// IFLA_TUN_MULTI_QUEUE.
    pub multi_queue: bool,
}

/// IFLA_INFO_DATA of an ipvlan. Both attributes are 16 bits wide (`NLA_U16`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpvlanData {
    /// IFLA_IPVLAN_MODE; None for a mode this crate does not know.
    pub mode: Option<IpvlanMode>,
    /// IFLA_IPVLAN_FLAGS: 0 is bridge, `IPVLAN_F_PRIVATE` 1, `IPVLAN_F_VEPA` 2. Sent even
    /// when 0, as iproute2 and the reference's netlink library send it.
    pub flags: u16,
}

/// ipvlan modes (IFLA_IPVLAN_MODE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpvlanMode {
    L2,
    L3,
    L3s,
}

impl IpvlanMode {
    pub fn to_raw(self) -> u16 {
        match self {
            IpvlanMode::L2 => 0,
            IpvlanMode::L3 => 1,
            IpvlanMode::L3s => 2,
        }
    }

    pub fn from_raw(n: u16) -> Option<IpvlanMode> {
        Some(match n {
            0 => IpvlanMode::L2,
            1 => IpvlanMode::L3,
            2 => IpvlanMode::L3s,
            _ => return None,
        })
    }

    /// The mode as configs and `ip -d link` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            IpvlanMode::L2 => "l2",
            IpvlanMode::L3 => "l3",
            IpvlanMode::L3s => "l3s",
        }
    }
}

/// IFLA_INFO_DATA of a VLAN.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VlanData {
    /// IFLA_VLAN_ID (16 bits, host order): 0 … 4094.
    pub id: u16,
    /// IFLA_VLAN_PROTOCOL (an ethertype, network order); None leaves the kernel's 802.1Q.
    pub protocol: Option<VlanProtocol>,
}

/// The tag a VLAN puts on its frames (IFLA_VLAN_PROTOCOL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VlanProtocol {
    /// 802.1Q, ethertype 0x8100 (the kernel's default).
    Dot1Q,
    /// 802.1ad (QinQ), ethertype 0x88a8.
    Dot1Ad,
    /// Any other ethertype the kernel reports.
    Other(u16),
}

impl VlanProtocol {
    pub fn ethertype(self) -> u16 {
        match self {
            VlanProtocol::Dot1Q => 0x8100,
            VlanProtocol::Dot1Ad => 0x88a8,
            VlanProtocol::Other(t) => t,
        }
    }

    pub fn from_ethertype(t: u16) -> VlanProtocol {
        match t {
            0x8100 => VlanProtocol::Dot1Q,
            0x88a8 => VlanProtocol::Dot1Ad,
            other => VlanProtocol::Other(other),
        }
    }
}

/// IFLA_INFO_DATA of a VRF.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VrfData {
    /// IFLA_VRF_TABLE: the routing table of the VRF's slaves (required at creation).
    pub table: u32,
}

impl LinkKind {
    /// The kernel's name of the kind (IFLA_INFO_KIND).
    pub fn name(&self) -> &str {
        match self {
            LinkKind::Veth => "veth",
            LinkKind::Bridge(_) => "bridge",
            LinkKind::Macvlan(_) => "macvlan",
            LinkKind::Ifb => "ifb",
            LinkKind::Tun(_) => "tun",
            LinkKind::Dummy => "dummy",
            LinkKind::Ipvlan(_) => "ipvlan",
            LinkKind::Vlan(_) => "vlan",
            LinkKind::Vrf(_) => "vrf",
            LinkKind::Other(name) => name,
        }
    }

    /// The kernel module that provides the kind, for the error of a kernel without it (the
    /// module is named after the kind but for VLANs).
    pub fn module(&self) -> &str {
        match self {
            LinkKind::Vlan(_) => "8021q",
            other => other.name(),
        }
    }

    /// What a create request of this kind needs from the kernel beyond rtnetlink, named in
    /// the Unsupported error when the kernel lacks it.
    pub(crate) fn feature(&self) -> Option<&'static str> {
        match self {
            LinkKind::Ifb => Some("ifb"),
            LinkKind::Bridge(BridgeData {
                vlan_filtering: Some(_),
            }) => Some("bridge vlan_filtering"),
            LinkKind::Macvlan(MacvlanData {
                bcqueuelen: Some(_), ..
            }) => Some("macvlan bcqueuelen"),
            LinkKind::Tun(_) => Some("tun/tap creation over rtnetlink (use /dev/net/tun)"),
            _ => None,
        }
    }

    /// The kind in an IFLA_LINKINFO payload; None without IFLA_INFO_KIND (`lo`, …).
    pub(crate) fn decode(linkinfo: &[u8]) -> Option<LinkKind> {
        let name = wire::as_string(wire::find(linkinfo, wire::IFLA_INFO_KIND)?);
        let data = wire::find(linkinfo, wire::IFLA_INFO_DATA).unwrap_or_default();
        let u32_of = |ty| wire::find(data, ty).and_then(wire::as_u32);
        let u16_of = |ty| wire::find(data, ty).and_then(wire::as_u16);
        Some(match name.as_str() {
            "veth" => LinkKind::Veth,
            "bridge" => LinkKind::Bridge(BridgeData {
                vlan_filtering: wire::find(data, IFLA_BR_VLAN_FILTERING)
                    .and_then(wire::as_u8)
                    .map(|v| v != 0),
            }),
            "macvlan" => LinkKind::Macvlan(MacvlanData {
                mode: u32_of(IFLA_MACVLAN_MODE).and_then(MacvlanMode::from_raw),
                bcqueuelen: u32_of(IFLA_MACVLAN_BC_QUEUE_LEN),
            }),
            "ifb" => LinkKind::Ifb,
            "tun" => {
                let flag = |ty| wire::find(data, ty).and_then(wire::as_u8).is_some_and(|v| v != 0);
                LinkKind::Tun(TunData {
                    tap: wire::find(data, IFLA_TUN_TYPE).and_then(wire::as_u8) == Some(TUN_TYPE_TAP),
                    owner: u32_of(IFLA_TUN_OWNER),
                    group: u32_of(IFLA_TUN_GROUP),
                    pi: flag(IFLA_TUN_PI),
                    vnet_hdr: flag(IFLA_TUN_VNET_HDR),
                    persist: flag(IFLA_TUN_PERSIST),
                    multi_queue: flag(IFLA_TUN_MULTI_QUEUE),
                })
            }
            "dummy" => LinkKind::Dummy,
            "ipvlan" => LinkKind::Ipvlan(IpvlanData {
                mode: u16_of(IFLA_IPVLAN_MODE).and_then(IpvlanMode::from_raw),
                flags: u16_of(IFLA_IPVLAN_FLAGS).unwrap_or(0),
            }),
            "vlan" => LinkKind::Vlan(VlanData {
                id: u16_of(IFLA_VLAN_ID).unwrap_or(0),
                protocol: wire::find(data, IFLA_VLAN_PROTOCOL)
                    .and_then(wire::as_be16)
                    .map(VlanProtocol::from_ethertype),
            }),
            "vrf" => LinkKind::Vrf(VrfData {
                table: u32_of(IFLA_VRF_TABLE).unwrap_or(0),
            }),
            _ => LinkKind::Other(name),
        })
    }

    /// IFLA_INFO_DATA for a request: None when the kind has none to send.
    pub(crate) fn encode_data(&self) -> Result<Option<Nest>, String> {
        let mut d = Nest::new();
        match self {
            LinkKind::Bridge(b) => {
                if let Some(on) = b.vlan_filtering {
                    d.push(attr(IFLA_BR_VLAN_FILTERING, on as u8)?);
                }
            }
            LinkKind::Macvlan(m) => {
                if let Some(mode) = m.mode {
                    d.push(attr(IFLA_MACVLAN_MODE, mode.to_raw())?);
                }
                if let Some(len) = m.bcqueuelen {
                    d.push(attr(IFLA_MACVLAN_BC_QUEUE_LEN, len)?);
                }
            }
            // What the kernel reports; a request carrying it is refused (tun_validate).
            LinkKind::Tun(t) => {
                d.push(attr(IFLA_TUN_TYPE, if t.tap { TUN_TYPE_TAP } else { TUN_TYPE_TUN })?);
                if let Some(uid) = t.owner {
                    d.push(attr(IFLA_TUN_OWNER, uid)?);
                }
                if let Some(gid) = t.group {
                    d.push(attr(IFLA_TUN_GROUP, gid)?);
                }
                d.push(attr(IFLA_TUN_PI, t.pi as u8)?);
                d.push(attr(IFLA_TUN_VNET_HDR, t.vnet_hdr as u8)?);
                d.push(attr(IFLA_TUN_PERSIST, t.persist as u8)?);
                d.push(attr(IFLA_TUN_MULTI_QUEUE, t.multi_queue as u8)?);
            }
            LinkKind::Ipvlan(i) => {
                if let Some(mode) = i.mode {
                    d.push(attr(IFLA_IPVLAN_MODE, mode.to_raw())?);
                }
                d.push(attr(IFLA_IPVLAN_FLAGS, i.flags)?);
            }
            LinkKind::Vlan(v) => {
                d.push(attr(IFLA_VLAN_ID, v.id)?);
                if let Some(p) = v.protocol {
                    d.push(attr(IFLA_VLAN_PROTOCOL, wire::be16(p.ethertype()))?);
                }
            }
            LinkKind::Vrf(v) => d.push(attr(IFLA_VRF_TABLE, v.table)?),
            LinkKind::Veth | LinkKind::Ifb | LinkKind::Dummy | LinkKind::Other(_) => {}
        }
        Ok((!d.is_empty()).then_some(d))
    }

    /// IFLA_LINKINFO { IFLA_INFO_KIND, [IFLA_INFO_DATA] } for a request.
    pub(crate) fn encode(&self) -> Result<neli::rtnl::Rtattr<neli::consts::rtnl::Ifla, neli::types::Buffer>, String> {
        linkinfo(self.name(), self.encode_data()?)
    }
}

/// IFLA_LINKINFO with `data` the caller built (a veth's peer is create-time only). The kind
/// goes without a terminating NUL, as iproute2 and the reference's netlink library send it
/// (the kernel reads it either way), so a create request is the same bytes as theirs.
pub(crate) fn linkinfo(
    kind: &str,
    data: Option<Nest>,
) -> Result<neli::rtnl::Rtattr<neli::consts::rtnl::Ifla, neli::types::Buffer>, String> {
    let mut info = Nest::new();
    info.push(attr(wire::IFLA_INFO_KIND, neli::types::Buffer::from(kind.as_bytes()))?);
    if let Some(d) = data {
        info.push(attr(wire::IFLA_INFO_DATA, d)?);
    }
    attr(wire::IFLA_LINKINFO, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(kind: LinkKind) -> Option<LinkKind> {
        let info = kind.encode().unwrap();
        let bytes = wire::encode(&info).unwrap();
        // skip the IFLA_LINKINFO header: decode reads its payload
        LinkKind::decode(&bytes[4..])
    }

    #[test]
    fn kinds_decode_as_they_encode() {
        for kind in [
            LinkKind::Veth,
            LinkKind::Ifb,
            LinkKind::Bridge(BridgeData {
                vlan_filtering: Some(true),
            }),
            LinkKind::Bridge(BridgeData::default()),
            LinkKind::Macvlan(MacvlanData {
                mode: Some(MacvlanMode::Vepa),
                bcqueuelen: Some(100),
            }),
            LinkKind::Tun(TunData {
                tap: true,
                owner: Some(1000),
                group: None,
                pi: false,
                vnet_hdr: true,
                persist: true,
                multi_queue: true,
            }),
            LinkKind::Tun(TunData::default()),
            LinkKind::Dummy,
            LinkKind::Ipvlan(IpvlanData {
                mode: Some(IpvlanMode::L3s),
                flags: 0,
            }),
            LinkKind::Ipvlan(IpvlanData {
                mode: Some(IpvlanMode::L2),
                flags: 2,
            }),
            LinkKind::Vlan(VlanData {
                id: 4094,
                protocol: Some(VlanProtocol::Dot1Ad),
            }),
            LinkKind::Vlan(VlanData { id: 0, protocol: None }),
            LinkKind::Vrf(VrfData { table: u32::MAX }),
            LinkKind::Other("vxlan".into()),
        ] {
            assert_eq!(round_trip(kind.clone()), Some(kind));
        }
    }

    #[test]
    fn linkinfo_without_a_kind_is_no_kind() {
        assert_eq!(LinkKind::decode(&[]), None);
    }
}
