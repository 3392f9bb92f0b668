//! cnibox: the core CNI plugins and a CNI runtime in one static binary.
//!
//! The map of the crate (its layers, which way they point, where a new applet's files go)
//! is docs/architecture.md; each module's own documentation says what it holds. In short:
//! [`applets`] is the table of applets at the top; [`plugins`] and [`ipam`] are the plugin
//! applets, built from [`plugin_kit`] and [`firewall_rules`]; [`runtime`] and [`hook`] run
//! plugins; [`cni`] is the protocol; [`netlink`], [`netns`], [`sysctl`] and [`tun`] are the kernel;
//! [`util`] holds self-contained helpers.
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
pub mod tun;
pub mod util;
