//! iptables, three ways to the same rules:
//! * [`variants`]: which variant (iptables-nft, iptables-legacy) holds a chain, found
//!   without a process, and which tools change it;
//! * [`save_restore`]: one `iptables-save` to read, one `iptables-restore --noflush` per
//!   family to change, planned as a [`save_restore::Script`] against a
//!   [`save_restore::Table`];
//! * [`nft`]: the same `Table` read and the same `Script` applied over nf_tables netlink on
//!   an iptables-nft host, without a process.
pub mod nft;
pub mod save_restore;
pub mod variants;
