//! A kernel without a link kind a plugin creates (dummy, ipvlan, vlan and vrf are modules
//! a kernel may be built without): the plugin fails with the reference's code and a message
//! that names the kind and the module to load, instead of the kernel's bare "Operation not
//! supported".
use crate::cni::Error;
use crate::netlink::{self, ErrorKind, LinkKind};

/// The error of a create request for a link of `kind` that the kernel refused because it
/// has no such kind (`Handle::create_link` reports that as Unsupported naming the kind):
/// `ipvlan: the kernel has no ipvlan support (modprobe ipvlan)`. None for any other error.
pub fn missing_kind(kind: &LinkKind, e: &netlink::Error) -> Option<Error> {
    match e.kind() {
        ErrorKind::Unsupported { feature } if feature == kind.name() => Some(Error::internal(message(kind))),
        _ => None,
    }
}

/// The message of [`missing_kind`], which the tests skip with.
pub fn message(kind: &LinkKind) -> String {
    let name = kind.name();
    format!("{name}: the kernel has no {name} support (modprobe {})", kind.module())
}

/// `e` from creating a link of `kind`, as the plugin reports it: [`missing_kind`], or the
/// plain error in `context` (`failed to create ipvlan: …`).
pub fn create_error(kind: &LinkKind, e: netlink::Error, context: impl FnOnce(netlink::Error) -> Error) -> Error {
    missing_kind(kind, &e).unwrap_or_else(|| context(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::testing::FakeTransport;
    use crate::netlink::{Handle, IpvlanData, LinkSpec, VlanData};

    fn refused(kind: &LinkKind, detail: &str) -> netlink::Error {
        let h = Handle::with_transport(FakeTransport::new());
        h.transport().push_kernel_error(libc::EOPNOTSUPP, detail);
        h.create_link(&LinkSpec::new("x0", kind.clone())).unwrap_err()
    }

    #[test]
    fn a_missing_kind_names_its_module() {
        let vlan = LinkKind::Vlan(VlanData::default());
        let e = missing_kind(&vlan, &refused(&vlan, "Unknown device type")).unwrap();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (999, "vlan: the kernel has no vlan support (modprobe 8021q)")
        );
        let ipvlan = LinkKind::Ipvlan(IpvlanData::default());
        let e = create_error(&ipvlan, refused(&ipvlan, "Unknown device type"), |_| unreachable!());
        assert_eq!(e.msg, "ipvlan: the kernel has no ipvlan support (modprobe ipvlan)");
    }

    #[test]
    fn other_refusals_keep_their_own_words() {
        let vlan = LinkKind::Vlan(VlanData::default());
        let e = create_error(&vlan, refused(&vlan, "VLANs not supported on lo"), |e| {
            Error::internal(format!("failed to create vlan: {e}"))
        });
        assert_eq!(
            e.msg,
            "failed to create vlan: create vlan x0: Operation not supported (VLANs not supported on lo)"
        );
        // the kind named by the error must be the one created
        assert!(missing_kind(&LinkKind::Dummy, &refused(&vlan, "Unknown device type")).is_none());
    }
}
