//! MAC spoof checking (`macspoofchk`): frames entering the bridge from a container's host
//! veth must carry the container's MAC as source, everything else is dropped.
//!
//! The nftables layout is the reference's (`pkg/link/spoofcheck.go`), so either
//! implementation can tear down the other's rules: table `bridge nat`, base chain
//! `PREROUTING` (filter, hook prerouting, priority -300, policy accept) with one rule per
//! attachment `iifname <host veth> jump cni-br-iface-<id>`, where `<id>` is
//! `<container id>-<ifname>`; that chain jumps to `cni-br-iface-<id>-mac`, which returns for
//! the container MAC and drops the rest. Every rule carries the comment `macspoofchk-<id>`.
//! The translation into nf_tables is the
//! [`spoofcheck` shape](crate::netlink::nftables::shapes::spoofcheck).
//!
//! Setup and teardown are one netlink transaction each; no process is run.
use super::error::err;
pub use super::error::Error;
use crate::netlink::nftables::shapes::spoofcheck as shape;
use crate::netlink::nftables::{Nftables, Transaction};
use crate::netlink::MacAddr;

/// How often a change is read and planned again when a concurrent change got there first.
const ATTEMPTS: usize = 3;

/// One attachment's rule set.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    pub container_id: &'a str,
    pub ifname: &'a str,
}

impl Attachment<'_> {
    /// `<container id>-<ifname>`, the reference's refID.
    pub fn id(&self) -> String {
        format!("{}-{}", self.container_id, self.ifname)
    }

    pub fn iface_chain(&self) -> String {
        format!("cni-br-iface-{}", self.id())
    }

    pub fn mac_chain(&self) -> String {
        format!("{}-mac", self.iface_chain())
    }

    pub fn comment(&self) -> String {
        format!("macspoofchk-{}", self.id())
    }
}

/// Allow only `mac` as source address on frames from `host_iface`. Re-running it for the
/// same attachment replaces the previous rules.
pub fn setup(att: Attachment, host_iface: &str, mac: &str) -> Result<(), Error> {
    let op = "failed to setup spoof-check";
    let mac: MacAddr = mac
        .parse()
        .map_err(|e| err(op, format!("container MAC {mac:?}: {e}")))?;
    let (iface, macc, comment) = (att.iface_chain(), att.mac_chain(), att.comment());
    let names = shape::Names {
        iface_chain: &iface,
        mac_chain: &macc,
        comment: &comment,
    };
    let nft = Nftables::shared().map_err(|e| err(op, e))?;
    nft.commit_planned(
        ATTEMPTS,
        |nft| {
            let now = shape::state(nft).map_err(|e| err(op, e))?;
            let mut tx = Transaction::new();
            tx.declare(&shape::layout(), &now);
            for handle in shape::base_rules_in(&now, &comment) {
                shape::delete_base_rule(&mut tx, handle);
            }
            shape::allow_only(&mut tx, names, host_iface, mac.0);
            Ok(tx)
        },
        |e| err(op, e),
    )
}

/// Remove the attachment's base-chain rule and both of its chains. Whatever is already gone
/// (table, chains, rules, or nf_tables itself) is not an error.
pub fn teardown(att: Attachment) -> Result<(), Error> {
    let op = "failed to teardown spoof-check";
    let nft = match Nftables::shared() {
        Ok(n) => n,
        Err(e) if e.is_netfilter_missing() => return Ok(()),
        Err(e) => return Err(err(op, e)),
    };
    let (iface, macc, comment) = (att.iface_chain(), att.mac_chain(), att.comment());
    let names = shape::Names {
        iface_chain: &iface,
        mac_chain: &macc,
        comment: &comment,
    };
    nft.commit_planned(
        ATTEMPTS,
        |nft| {
            let mut tx = Transaction::new();
            let chains = shape::chains(nft).map_err(|e| err(op, e))?;
            if chains.is_empty() {
                return Ok(tx); // no table
            }
            for handle in shape::base_rules(nft, &comment).map_err(|e| err(op, e))? {
                shape::delete_base_rule(&mut tx, handle);
            }
            shape::delete_chains(&mut tx, names, &chains);
            Ok(tx)
        },
        |e| err(op, e),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_reference() {
        let a = Attachment {
            container_id: "dummy-0",
            ifname: "eth0",
        };
        assert_eq!(a.iface_chain(), "cni-br-iface-dummy-0-eth0");
        assert_eq!(a.mac_chain(), "cni-br-iface-dummy-0-eth0-mac");
        assert_eq!(a.comment(), "macspoofchk-dummy-0-eth0");
    }
}
