//! The DEL side of a container interface: remove it from the container namespace, treating
//! everything that is already gone as success (the spec requires DEL to be idempotent).
use super::netns_open::open_for_del;
use crate::cni::Error;
use crate::netlink::Handle;

/// What DEL found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removed {
    /// The link existed and was deleted.
    Deleted,
    /// `CNI_NETNS` was empty, the namespace is gone, or the link is gone.
    AlreadyGone,
    /// A link of that name exists but is not of the kind this plugin creates: left alone.
    NotOurs(String),
}

/// Delete `ifname` in the container namespace if it is a link of `kind` (e.g. "veth").
pub fn delete(netns_path: &str, ifname: &str, kind: &str) -> Result<Removed, Error> {
    let Some(ns) = open_for_del(netns_path)? else {
        return Ok(Removed::AlreadyGone);
    };
    let h = Handle::open(&ns)?;
    let Some(link) = h.link_by_name(ifname)? else {
        return Ok(Removed::AlreadyGone);
    };
    if link.kind.as_deref() != Some(kind) {
        let found = link.kind.unwrap_or_else(|| "device".into());
        eprintln!("cnibox: DEL: {ifname} in {netns_path} is a {found}, not a {kind}: left alone");
        return Ok(Removed::NotOurs(found));
    }
    // Someone else may delete it between lookup and delete.
    match h.remove_link(link.index)? {
        true => Ok(Removed::Deleted),
        false => Ok(Removed::AlreadyGone),
    }
}
