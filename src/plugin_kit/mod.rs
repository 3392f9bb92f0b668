//! What the plugin applets are built from (none of it is an applet):
//! * [`netns_open`]: every opening of `CNI_NETNS` (ADD/CHECK, the reference's texts, DEL).
//! * [`check_preamble`]: what every CHECK verifies first (prevResult, the container interface).
//! * [`iface`]: addresses and routes of an IPAM result on the container interface (and CHECK).
//! * [`container_link`]: idempotent removal of the container interface on DEL (and, for a
//!   plugin whose attachment is that link and its addresses, the whole DEL).
//! * [`lower_link`]: a link stacked on a host interface (the "master"): namespaces, master,
//!   MTU bound, creation in the container.
//! * [`kernel_support`]: a kernel without the link kind a plugin creates, named with the
//!   module to load.
//! * [`ipam_delegation`]: IPAM ADD with release on failure, GC forwarding, the masquerade
//!   attachment.
//! * [`rollback`]: undo what a failed ADD did.
//! * [`teardown`]: DEL attempts every step and reports the first failure.
pub mod check_preamble;
pub mod container_link;
pub mod iface;
pub mod ipam_delegation;
pub mod kernel_support;
pub mod lower_link;
pub mod netns_open;
pub mod rollback;
pub mod teardown;

// The plugin boundary: where the kernel-side layers' typed errors become CNI errors. The
// layers below know nothing of the CNI protocol; a plugin reports their failures as plain
// errors (code 999) whose message names the operation and object, as the reference does.
impl From<crate::netlink::Error> for crate::cni::Error {
    fn from(e: crate::netlink::Error) -> Self {
        crate::cni::Error::internal(e)
    }
}

/// A kernel failure in the words Go's netlink gives the reference: the bare errno text
/// (`file exists`, `invalid argument`); a failure without an errno keeps its whole message.
pub fn go_kernel_text(e: &crate::netlink::Error) -> String {
    match e.errno() {
        Some(n) => {
            let text = crate::netlink::errno_text(n);
            let mut c = text.chars();
            c.next()
                .map(|f| f.to_lowercase().chain(c).collect())
                .unwrap_or_default()
        }
        None => e.to_string(),
    }
}

impl From<crate::netns::Error> for crate::cni::Error {
    fn from(e: crate::netns::Error) -> Self {
        crate::cni::Error::internal(e)
    }
}

impl From<crate::sysctl::Error> for crate::cni::Error {
    fn from(e: crate::sysctl::Error) -> Self {
        crate::cni::Error::internal(e)
    }
}

impl From<crate::tun::Error> for crate::cni::Error {
    fn from(e: crate::tun::Error) -> Self {
        crate::cni::Error::internal(e)
    }
}
