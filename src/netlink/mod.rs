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
//! `testing::FakeTransport` records requests and serves canned replies for tests without root
//! (compiled only into tests).
//!
//! Modules: `handle` (request discipline), `link` (lookup, change, delete), `link_events`
//! (waiting for a link's state from the kernel's notifications, without the RTNL lock), `link_kind` (a
//! link's kind and its data, decoded and encoded), `devconf` (a link's IPv4/IPv6 settings,
//! the per-device sysctls, over rtnetlink), `create` (veth pairs, and every other
//! kind from its `LinkKind`), `bridge_port` (port flags and VLANs), `address`, `route`, `rule` (policy-routing rules), `types`,
//! `names` (random veth names), [`tc`] (qdiscs and filters: tbf, ingress, u32 + mirred), `transport`, `testing` (the fake, tests only), `wire` (numbers and attribute bytes),
//! `error`.
//!
//! Netfilter has its own socket family: [`netfilter`] (the `NETLINK_NETFILTER` socket, the
//! nfnetlink header and batches, shared by nf_tables and conntrack) and [`nftables`]
//! (tables, chains, rules, and the rule shapes the plugins use).
mod address;
mod bridge_port;
pub mod bytes;
pub mod conntrack;
mod create;
mod devconf;
mod error;
mod handle;
mod link;
mod link_events;
mod link_kind;
mod names;
pub mod netfilter;
pub mod nftables;
mod route;
mod rule;
pub mod tc;
mod transport;
mod types;
mod wire;

pub use address::{
    AddrOptions, Address, IFA_F_DADFAILED, IFA_F_NODAD, IFA_F_NOPREFIXROUTE, IFA_F_PERMANENT, IFA_F_TENTATIVE,
};
pub use bridge_port::{PortFlags, PortVlan};
pub use create::{BridgeSpec, IfbSpec, LinkSpec, MacvlanSpec, VethError, VethSpec, VETH_NAME_ATTEMPTS};
pub use devconf::{DevConf, Ipv4Conf, Ipv6Conf};
pub use error::{errno_text, Error, ErrorKind};
pub use handle::{Handle, Result};
pub use link::{Link, LinkRef, OperState};
pub use link_events::{Heard, LinkEvents};
pub use link_kind::{
    BridgeData, IpvlanData, IpvlanMode, LinkKind, MacvlanData, TunData, VlanData, VlanProtocol, VrfData,
};
pub use names::{random_bytes, random_mac, random_name, random_veth_name};
pub use route::{NextHop, RouteInfo, RouteSpec, PROTO_BOOT, PROTO_KERNEL, PROTO_STATIC, TABLE_MAIN};
pub use rule::{RuleInfo, SourceRule};
pub use transport::{Message, Reply, Socket, Transport, TransportError};
pub use types::{Family, MacAddr, MacParseError, MacvlanMode, Scope};

/// Test scaffolding: a fake transport and message encoders, for tests without root. Built
/// only for tests (`cfg(test)` or the `test-support` feature the tests turn on).
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod testing;

#[cfg(test)]
mod kind_requests;
#[cfg(test)]
mod tests;
