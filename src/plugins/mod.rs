//! The plugin applets (bridge, veth alias ptp, macvlan, portmap) and the pieces they share.
//!
//! * [`bridge`]: the bridge plugin.
//! * [`veth`]: the veth plugin, also answering as `ptp`.
//! * [`macvlan`]: the macvlan plugin.
//! * [`portmap`]: the portmap plugin (chained): host ports forwarded to the container.
//!
//! Each plugin module reads as the steps of its ADD, DEL and CHECK; the shared pieces are:
//! * [`iface`]: addresses and routes of an IPAM result on the container interface (and CHECK).
//! * [`l3`]: IPAM delegation with release on failure.
//! * [`rollback`]: undo what a failed ADD did.
//! * [`container_link`]: idempotent removal of the container interface on DEL.
//! * [`teardown`]: DEL attempts every step and reports the first failure.
//! * [`ipmasq`]: masquerade rules; [`firewall_tools`]: running nft and iptables.
//! * [`spoofcheck`]: MAC spoof-check rules (bridge `macspoofchk`).
pub mod bridge;
pub mod container_link;
pub mod firewall_tools;
pub mod iface;
pub mod ipmasq;
pub mod l3;
pub mod macvlan;
pub mod portmap;
pub mod rollback;
pub mod spoofcheck;
pub mod teardown;
pub mod veth;
