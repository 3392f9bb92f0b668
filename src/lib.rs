//! cnibox: the core CNI plugins and a CNI runtime in one static binary.
//!
//! * [`cni`]: the protocol (environment, config, versions, results and conversion, errors,
//!   the plugin entry point, delegation to IPAM plugins).
//! * [`netlink`], [`netns`], [`sysctl`]: the kernel side, shared by every plugin.
//! * [`ipam`]: the host-local IPAM plugin.
//! * [`plugins`]: bridge, veth (ptp) and macvlan.
//! * [`runtime`]: the runtime side (conflists, chains, result cache) behind `cnitool`.
//! * [`hook`]: the OCI hook and runtime wrapper.
//! * [`util`]: small self-contained helpers (SHA-512, base64, atomic file writes).
//! * [`applets`]: the one table of applet names and the argv[0] dispatch.
pub mod applets;
pub mod cni;
pub mod firewall_rules;
pub mod hook;
pub mod ipam;
pub mod netlink;
pub mod netns;
pub mod plugin_kit;
pub mod plugins;
pub mod runtime;
pub mod sysctl;
pub mod util;
