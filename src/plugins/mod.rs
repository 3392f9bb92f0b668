//! The plugin applets, one module each (a file, or a folder when it has several), each
//! reading as the steps of its ADD, DEL and CHECK; the applet table (`crate::applets`) names
//! them and says what each is. What they are built from lives in [`crate::plugin_kit`] and
//! [`crate::firewall_rules`]; the IPAM applets are in [`crate::ipam`]. The map of the crate,
//! and the files a new applet touches, is docs/architecture.md.
pub mod bandwidth;
pub mod bridge;
pub mod dummy;
pub mod firewall;
pub mod flannel;
pub mod host_device;
pub mod ipvlan;
pub mod loopback;
pub mod macvlan;
pub mod portmap;
pub mod sbr;
pub mod tap;
pub mod tuning;
pub mod veth;
pub mod vlan;
pub mod vrf;
