//! The CNI protocol, plugin side: what the spec and the Go `skel` package define.
pub mod args;
pub mod config;
pub mod delegate;
pub mod env;
pub mod error;
pub mod invoke;
pub mod json;
pub mod netaddr;
pub mod plugin;
pub mod result;
pub mod version;

pub use error::Error;
pub use plugin::{AppletLookup, Command, Plugin, Request};
pub use result::CniResult;
