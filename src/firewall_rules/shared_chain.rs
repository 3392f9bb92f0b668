//! Whose is an iptables chain the reference names after network and container alone?
//!
//! The reference's iptables layouts name an attachment's chain after its network and
//! container ID, not its interface (portmap's `CNI-DN-…`, ipMasq's `CNI-…`): a container
//! with two interfaces on one network gets one chain for both, the second interface's rules
//! join the first one's, and the DEL of either removes both. cnibox keeps that chain for
//! the first interface, so an attachment looks exactly like the reference's as long as the
//! container has one interface on the network (and either implementation's DEL removes
//! the other's chain), and gives every further interface a chain of its own, named after
//! the interface too ([`interface_key`]).
//!
//! The shared chain names no interface; the container addresses its rules name (portmap's
//! DNAT targets, ipMasq's POSTROUTING sources) tell whose it is.
//! [`Interface::uses_own_chain`] takes the interface's own chain when the shared one is
//! provably another interface's: none of those addresses is the interface's, when the
//! plugin knows its addresses (ADD's result, DEL's prevResult), else one of them is on
//! another interface of the container, read in `CNI_NETNS` (a DEL repeated after the
//! runtime dropped its cache).
//! Without either (no prevResult, the namespace gone) the chain is taken to be this
//! interface's, as the reference does: the container is going away then.
use crate::firewall_rules::iptables::save_restore::Table;
use crate::netlink::{Family, Handle};
use crate::netns::Netns;
use std::cell::OnceCell;
use std::net::IpAddr;

/// The hash input of an interface's own chain: `network/containerID/ifname`. Network names
/// and container IDs cannot hold a `/`, so it never equals the input of a shared chain's
/// name (network and container ID run together) nor another interface's.
pub fn interface_key(network: &str, container_id: &str, ifname: &str) -> String {
    format!("{network}/{container_id}/{ifname}")
}

/// What a plugin knows of the addresses of the interface it is called for.
pub struct Interface<'a> {
    /// Its addresses, when known.
    own: Option<Vec<IpAddr>>,
    netns: &'a str,
    ifname: &'a str,
    /// The addresses of the container's other interfaces, read once when needed.
    others: OnceCell<Vec<IpAddr>>,
}

impl<'a> Interface<'a> {
    /// ADD (and CHECK): the addresses it gets.
    pub fn with_addresses(own: Vec<IpAddr>) -> Interface<'a> {
        Interface {
            own: Some(own),
            netns: "",
            ifname: "",
            others: OnceCell::new(),
        }
    }

    /// DEL: the addresses of prevResult when there is one, else what `netns` shows.
    pub fn for_del(own: Option<Vec<IpAddr>>, netns: &'a str, ifname: &'a str) -> Interface<'a> {
        Interface {
            own,
            netns,
            ifname,
            others: OnceCell::new(),
        }
    }

    /// Whether the attachment's rules are (or go) in its `own` chain of `t` rather than the
    /// `shared` one: its own exists, or the shared one exists and is provably another
    /// interface's (`addrs_of` reads the container addresses a chain's rules name).
    pub fn uses_own_chain(
        &self,
        t: &Table,
        own: &str,
        shared: &str,
        addrs_of: impl FnOnce(&Table, &str) -> Vec<IpAddr>,
    ) -> bool {
        t.has_chain(own) || (t.has_chain(shared) && self.owns_not(&addrs_of(t, shared)))
    }

    /// Whether the shared chain whose rules name `chain_addrs` is provably another
    /// interface's: none of them is this interface's, or (its addresses unknown) one of them
    /// is on another interface of the container.
    fn owns_not(&self, chain_addrs: &[IpAddr]) -> bool {
        if chain_addrs.is_empty() {
            return false;
        }
        match &self.own {
            Some(own) => !chain_addrs.iter().any(|a| own.contains(a)),
            None => {
                let others = self.others.get_or_init(|| others_in(self.netns, self.ifname));
                chain_addrs.iter().any(|a| others.contains(a))
            }
        }
    }
}

/// The addresses of every link in `netns` but `ifname`; none when the namespace cannot be
/// read (gone, or not given): nothing proves then that a chain is another interface's.
fn others_in(netns: &str, ifname: &str) -> Vec<IpAddr> {
    if netns.is_empty() {
        return vec![];
    }
    let read = || -> Result<Vec<IpAddr>, String> {
        let ns = match Netns::open(netns) {
            Ok(ns) => ns,
            // gone with its container: nothing to tell
            Err(e) if e.is_not_found() || e.is_not_netns() => return Ok(vec![]),
            Err(e) => return Err(e.to_string()),
        };
        let h = Handle::open(&ns).map_err(|e| e.to_string())?;
        let this = h.link_by_name(ifname).map_err(|e| e.to_string())?.map(|l| l.index);
        let all = h.addresses(None, Family::All).map_err(|e| e.to_string())?;
        Ok(all
            .into_iter()
            .filter(|a| Some(a.index) != this)
            .map(|a| a.address.ip())
            .collect())
    };
    read().unwrap_or_else(|e| {
        eprintln!("cnibox: the addresses in {netns:?} cannot tell whose a shared chain is: {e}");
        vec![]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(s: &[&str]) -> Vec<IpAddr> {
        s.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn known_addresses_decide() {
        let i = Interface::with_addresses(ips(&["10.0.0.3", "fd00::3"]));
        assert!(i.owns_not(&ips(&["10.0.0.2"])));
        assert!(!i.owns_not(&ips(&["10.0.0.3"])));
        assert!(!i.owns_not(&ips(&["10.0.0.2", "10.0.0.3"])));
        // a chain that names no address cannot be told apart
        assert!(!i.owns_not(&[]));
        // an interface without addresses made no chain
        assert!(Interface::with_addresses(vec![]).owns_not(&ips(&["10.0.0.2"])));
    }

    #[test]
    fn without_addresses_or_namespace_the_chain_is_this_interfaces() {
        let i = Interface::for_del(None, "", "eth1");
        assert!(!i.owns_not(&ips(&["10.0.0.2"])));
        let gone = Interface::for_del(None, "/nonexistent/netns", "eth1");
        assert!(!gone.owns_not(&ips(&["10.0.0.2"])));
    }

    #[test]
    fn interface_keys_never_name_a_shared_chain() {
        // a shared chain's key is network and container ID run together: no `/` in either
        assert_eq!(interface_key("net", "ctr", "eth1"), "net/ctr/eth1");
    }
}
