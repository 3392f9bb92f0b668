//! The plugin applets (bridge, veth alias ptp, macvlan, loopback, tuning, bandwidth, portmap) and the pieces they share.
//!
//! * [`bridge`]: the bridge plugin.
//! * [`veth`]: the veth plugin, also answering as `ptp`.
//! * [`macvlan`]: the macvlan plugin.
//! * [`firewall`]: the firewall plugin (chained: accept rules for container addresses).
//! * [`loopback`]: `lo` up in the container.
//! * [`tuning`]: sysctls and link attributes of the container interface (chained).
//! * [`bandwidth`]: rate limits on the host veth and an ifb (chained).
//! * [`portmap`]: host ports forwarded to the container (chained).
//!
//! Each plugin module reads as the steps of its ADD, DEL and CHECK; the shared pieces are:
//! * [`iface`]: addresses and routes of an IPAM result on the container interface (and CHECK).
//! * [`l3`]: IPAM delegation with release on failure, GC forwarding, the masquerade attachment.
//! * [`check`]: what every CHECK verifies first (prevResult, the container interface).
//! * [`rollback`]: undo what a failed ADD did.
//! * [`container_link`]: idempotent removal of the container interface on DEL.
//! * [`teardown`]: DEL attempts every step and reports the first failure.
//! * [`ipmasq`]: masquerade rules; [`iptables`]: where an attachment's iptables chains are,
//!   and which tools change them; [`xtables`]: iptables-save and one iptables-restore per
//!   family and change; [`firewall_tools`]: finding the tools; [`host_lock`]: host-wide
//!   locks (xtables changes, portmap's host ports).
//! * [`shared_chain`]: whose is an iptables chain the reference names after network and
//!   container alone (portmap's and ipMasq's), when a container has two interfaces on one
//!   network.
//! * [`spoofcheck`]: MAC spoof-check rules (bridge `macspoofchk`).
//! * [`netns_open`]: every opening of `CNI_NETNS` (ADD/CHECK, the reference's texts, DEL).
pub mod bandwidth;
pub mod bridge;
pub mod check;
pub mod container_link;
pub mod firewall;
pub mod firewall_tools;
pub mod host_lock;
pub mod iface;
pub mod ipmasq;
pub mod iptables;
pub mod iptables_nft;
pub mod l3;
pub mod loopback;
pub mod macvlan;
pub mod netns_open;
pub mod portmap;
pub mod rollback;
pub mod shared_chain;
pub mod spoofcheck;
pub mod teardown;
pub mod tuning;
pub mod veth;
pub mod xtables;

// The plugin boundary: where the kernel-side layers' typed errors become CNI errors. The
// layers below know nothing of the CNI protocol; a plugin reports their failures as plain
// errors (code 999) whose message names the operation and object, as the reference does.
impl From<crate::netlink::Error> for crate::cni::Error {
    fn from(e: crate::netlink::Error) -> Self {
        crate::cni::Error::internal(e)
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
