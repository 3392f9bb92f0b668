//! The runtime side: network config lists, running plugin chains as libcni does, the
//! libcni-compatible result cache, GC, sandbox IP status, and the `cnitool` applet.
//!
//! [`Runtime`] is the library API (the OCI hook uses it too): `load_network`,
//! `add_network_list`, `del_network_list`, `check_network_list`, `status_network_list`,
//! `gc_network_list`, `cached_attachments`.
pub mod cache;
pub mod chain;
pub mod cnitool;
pub mod conflist;
pub mod gc;
pub mod lock;
pub mod names;
pub mod request;
pub mod sandbox_status;

pub use chain::{Attachment, ChainError, Runtime, RuntimeConf};
pub use conflist::NetworkList;
