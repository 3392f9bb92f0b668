//! The plugin applets, one module each; every one reads as the steps of its ADD, DEL and
//! CHECK. What they are built from lives in [`crate::plugin_kit`] and
//! [`crate::firewall_rules`]; IPAM applets are in [`crate::ipam`]. The map of the crate is
//! docs/architecture.md.
//!
//! * [`bridge`]: the bridge plugin.
//! * [`veth`]: the veth plugin, also answering as `ptp`.
//! * [`macvlan`]: the macvlan plugin.
//! * [`firewall`]: the firewall plugin (chained: accept rules for container addresses).
//! * [`loopback`]: `lo` up in the container.
//! * [`tuning`]: sysctls and link attributes of the container interface (chained).
//! * [`bandwidth`]: rate limits on the host veth and an ifb (chained).
//! * [`portmap`]: host ports forwarded to the container (chained).
pub mod bandwidth;
pub mod bridge;
pub mod firewall;
pub mod loopback;
pub mod macvlan;
pub mod portmap;
pub mod tuning;
pub mod veth;
