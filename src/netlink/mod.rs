//! cnibox's route-netlink layer: links, addresses, routes and bridge ports, in the plugins' words.
//!
//! A [`Handle`] is one synchronous netlink socket bound to one network namespace; a plugin
//! opens one for the host and one for the container ([`Handle::open`]) and never switches
//! namespaces per request. No thread is ever started: requests go out on the calling thread,
//! each with its own sequence number, and every modifying request asks for an ACK and waits
//! for it, so kernel errors always surface as typed [`Error`]s naming operation and object:
//!
//! ```text
//! create veth vethab12cd34: File exists
//! ```
//!
//! Below the handle sits the [`Transport`] seam: [`Socket`] talks to the kernel, and
//! [`FakeTransport`] records requests and serves canned replies for tests without root.
//!
//! Modules: `handle` (request discipline), `link` (lookup, change, delete), `create` (veth,
//! bridge, macvlan), `bridge_port` (port flags and VLANs), `address`, `route`, `types`,
//! `names` (random veth names), `conntrack` (ctnetlink: find and delete tracked connections), `transport`, `fake`, `wire` (numbers and attribute bytes),
//! `error`.
mod address;
mod bridge_port;
pub mod conntrack;
mod create;
mod error;
mod fake;
mod handle;
mod link;
mod names;
mod route;
mod transport;
mod types;
mod wire;

pub use address::{
    AddrOptions, Address, IFA_F_DADFAILED, IFA_F_NODAD, IFA_F_NOPREFIXROUTE, IFA_F_PERMANENT, IFA_F_TENTATIVE,
};
pub use bridge_port::{PortFlags, PortVlan};
pub use create::{BridgeSpec, MacvlanMode, MacvlanSpec, VethSpec};
pub use error::{errno_text, Error, ErrorKind};
pub use fake::{attributes, encode_address, encode_link, FakeTransport, IFADDRMSG_LEN, IFINFOMSG_LEN, RTMSG_LEN};
pub use handle::{Handle, Result};
pub use link::{Link, LinkRef, OperState};
pub use names::{random_bytes, random_mac, random_name, random_veth_name};
pub use route::{RouteInfo, RouteSpec, PROTO_BOOT, PROTO_KERNEL, PROTO_STATIC, TABLE_MAIN};
pub use transport::{Message, Reply, Socket, Transport, TransportError};
pub use types::{Family, MacAddr, MacParseError, Scope};

#[cfg(test)]
mod tests;
