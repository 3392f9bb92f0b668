//! A link's kind and the data of that kind: IFLA_LINKINFO's IFLA_INFO_KIND and
//! IFLA_INFO_DATA, as rust-netlink's rtnetlink models them (`InfoKind`/`InfoData`), in one
//! enum. The kernel's reports decode into it ([`Link::kind`](super::Link::kind)) and create
//! requests encode from it ([`Handle::create_link`](super::Handle::create_link)).
//!
//! A new kind is one variant here, with its IFLA_INFO_DATA attribute numbers and its arm in
//! [`LinkKind::name`], [`LinkKind::decode`] and [`LinkKind::encode_data`] (and in
//! [`LinkKind::feature`] when a kernel may lack it), and the variant in the round trip of
//! this file's tests. Until it has a variant, a kind decodes as [`LinkKind::Other`] with the
//! kernel's name.
use super::types::MacvlanMode;
use super::wire::{self, attr, Nest};

// IFLA_INFO_DATA attributes, per kind (linux/if_link.h).
const IFLA_BR_VLAN_FILTERING: u16 = 7;
const IFLA_MACVLAN_MODE: u16 = 1;
const IFLA_MACVLAN_BC_QUEUE_LEN: u16 = 7;

/// A link kind with its kind-specific data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkKind {
    /// One end of a veth pair (the peer is create-time data: see `VethSpec`).
    Veth,
    Bridge(BridgeData),
    Macvlan(MacvlanData),
    /// An intermediate functional block (bandwidth's ingress shaping).
    Ifb,
    /// A kind without a variant yet, by the kernel's name (`dummy`, `vxlan`, …).
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

impl LinkKind {
    /// The kernel's name of the kind (IFLA_INFO_KIND).
    pub fn name(&self) -> &str {
        match self {
            LinkKind::Veth => "veth",
            LinkKind::Bridge(_) => "bridge",
            LinkKind::Macvlan(_) => "macvlan",
            LinkKind::Ifb => "ifb",
            LinkKind::Other(name) => name,
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
            _ => None,
        }
    }

    /// The kind in an IFLA_LINKINFO payload; None without IFLA_INFO_KIND (`lo`, …).
    pub(crate) fn decode(linkinfo: &[u8]) -> Option<LinkKind> {
        let name = wire::as_string(wire::find(linkinfo, wire::IFLA_INFO_KIND)?);
        let data = wire::find(linkinfo, wire::IFLA_INFO_DATA).unwrap_or_default();
        let u32_of = |ty| wire::find(data, ty).and_then(wire::as_u32);
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
            LinkKind::Veth | LinkKind::Ifb | LinkKind::Other(_) => {}
        }
        Ok((!d.is_empty()).then_some(d))
    }

    /// IFLA_LINKINFO { IFLA_INFO_KIND, [IFLA_INFO_DATA] } for a request.
    pub(crate) fn encode(&self) -> Result<neli::rtnl::Rtattr<neli::consts::rtnl::Ifla, neli::types::Buffer>, String> {
        linkinfo(self.name(), self.encode_data()?)
    }
}

/// IFLA_LINKINFO with `data` the caller built (a veth's peer is create-time only).
pub(crate) fn linkinfo(
    kind: &str,
    data: Option<Nest>,
) -> Result<neli::rtnl::Rtattr<neli::consts::rtnl::Ifla, neli::types::Buffer>, String> {
    let mut info = Nest::new();
    info.push(attr(wire::IFLA_INFO_KIND, kind)?);
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
            LinkKind::Other("dummy".into()),
        ] {
            assert_eq!(round_trip(kind.clone()), Some(kind));
        }
    }

    #[test]
    fn linkinfo_without_a_kind_is_no_kind() {
        assert_eq!(LinkKind::decode(&[]), None);
    }
}
