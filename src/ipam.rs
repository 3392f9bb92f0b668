//! The IPAM applets and what they share.
//! * [`host_local`]: the host-local IPAM plugin.
//! * [`resolv`]: reading a resolv.conf into a result's DNS.
pub mod host_local;
pub mod resolv;
