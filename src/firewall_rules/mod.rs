//! The host's packet-filter rules the plugins write (none of it is an applet; the
//! `firewall` applet is [`crate::plugins::firewall`]):
//! * [`ipmasq`]: masquerade rules (`ipMasq` of bridge and veth), nftables or iptables.
//! * [`spoofcheck`]: MAC spoof-check rules (bridge `macspoofchk`).
//! * [`shared_chain`]: whose is an iptables chain the reference names after network and
//!   container alone (portmap's and ipMasq's), when a container has two interfaces on one
//!   network.
//! * [`iptables`]: the iptables backends: which variant holds a chain and which tools
//!   change it, `iptables-save`/`iptables-restore`, and the same over nf_tables netlink on
//!   an iptables-nft host.
//! * [`tools`]: finding `iptables-save`/`iptables-restore` and their variants.
//! * [`error`]: the error every one of them returns.
//! * [`host_lock`]: host-wide locks (iptables changes, portmap's host ports).
pub mod error;
pub mod host_lock;
pub mod ipmasq;
pub mod iptables;
pub mod shared_chain;
pub mod spoofcheck;
pub mod tools;
