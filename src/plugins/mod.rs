//! The plugin applets: bridge, veth (alias ptp) and macvlan, and what they share.
pub mod ipmasq;
