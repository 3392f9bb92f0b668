//! nfnetlink: the `NETLINK_NETFILTER` socket shared by every netfilter subsystem
//! (nf_tables for firewall rules, ctnetlink for conntrack entries).
//!
//! This module knows only what all subsystems share: the `nfgenmsg` header after the
//! netlink header (family, version, resource id), message types `(subsystem << 8) | msg`,
//! the batch envelope (`NFNL_MSG_BATCH_BEGIN`/`END` with the subsystem as resource id) and
//! the attribute bytes. Subsystem specifics live next to it: [`nftables`](super::nftables)
//! for nf_tables; a conntrack module builds its messages with [`Attrs`] and sends them
//! with [`NfSocket::request`] (ctnetlink is not batched).
//!
//! As in the route layer, no thread is started, every change asks for an ACK and waits for
//! it, and errors name the operation and the object:
//!
//! ```text
//! add rule inet cni_plugins_masquerade masq_checks: No such file or directory
//! ```
mod attrs;
mod socket;

pub use attrs::Attrs;
pub(crate) use attrs::{be32, be64};
pub use socket::{Batch, NfMessage, NfSocket};

/// nfnetlink subsystems (`NFNL_SUBSYS_*`).
pub const NFNL_SUBSYS_CTNETLINK: u8 = 1;
pub const NFNL_SUBSYS_NFTABLES: u8 = 10;

/// The nfgenmsg version every subsystem speaks.
pub(crate) const NFNETLINK_V0: u8 = 0;
pub(crate) const NFNL_MSG_BATCH_BEGIN: u16 = 16;
pub(crate) const NFNL_MSG_BATCH_END: u16 = 17;
/// Length of `struct nfgenmsg`.
pub const NFGENMSG_LEN: usize = 4;

/// The message type of `msg` in `subsys`.
pub fn msg_type(subsys: u8, msg: u8) -> u16 {
    (u16::from(subsys) << 8) | u16::from(msg)
}
