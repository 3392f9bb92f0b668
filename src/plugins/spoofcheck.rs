//! MAC spoof checking (`macspoofchk`): frames entering the bridge from a container's host
//! veth must carry the container's MAC as source, everything else is dropped.
//!
//! The nftables layout is the reference's (`pkg/link/spoofcheck.go`), so either
//! implementation can tear down the other's rules: table `bridge nat`, base chain
//! `PREROUTING` (filter, hook prerouting, priority -300, policy accept) with one rule per
//! attachment `iifname <host veth> jump cni-br-iface-<id>`, where `<id>` is
//! `<container id>-<ifname>`; that chain jumps to `cni-br-iface-<id>-mac`, which returns for
//! the container MAC and drops the rest. Every rule carries the comment `macspoofchk-<id>`.
//!
//! Setup and teardown are one nft transaction each.
pub use super::firewall_tools::Error;
use super::firewall_tools::{self, err, nft_json, nft_quote as quote, nft_run};

const FAMILY: &str = "bridge";
const TABLE: &str = "nat";
const BASE_CHAIN: &str = "PREROUTING";

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
    let (iface, macc, comment) = (att.iface_chain(), att.mac_chain(), quote(&att.comment()));
    let mut tx = format!(
        "add table {FAMILY} {TABLE}\n\
         add chain {FAMILY} {TABLE} {BASE_CHAIN} {{ type filter hook prerouting priority -300 ; policy accept ; }}\n\
         add chain {FAMILY} {TABLE} {iface}\n\
         add chain {FAMILY} {TABLE} {macc}\n\
         flush chain {FAMILY} {TABLE} {iface}\n\
         flush chain {FAMILY} {TABLE} {macc}\n"
    );
    for handle in base_rules(&att.comment())? {
        tx.push_str(&format!("delete rule {FAMILY} {TABLE} {BASE_CHAIN} handle {handle}\n"));
    }
    tx.push_str(&format!(
        "add rule {FAMILY} {TABLE} {BASE_CHAIN} iifname {} jump {iface} comment {comment}\n\
         add rule {FAMILY} {TABLE} {iface} jump {macc} comment {comment}\n\
         add rule {FAMILY} {TABLE} {macc} ether saddr {mac} return comment {comment}\n\
         add rule {FAMILY} {TABLE} {macc} drop comment {comment}\n",
        quote(host_iface)
    ));
    nft_run(&tx).map_err(|d| err("failed to setup spoof-check", d))
}

/// Remove the attachment's base-chain rule and both of its chains. Whatever is already gone
/// (table, chains, rules, or nft itself) is not an error.
pub fn teardown(att: Attachment) -> Result<(), Error> {
    if !firewall_tools::tool_available("nft") {
        return Ok(());
    }
    let Some(chains) = chains()? else {
        return Ok(());
    };
    let mut tx = String::new();
    for handle in base_rules(&att.comment())? {
        tx.push_str(&format!("delete rule {FAMILY} {TABLE} {BASE_CHAIN} handle {handle}\n"));
    }
    // The iface chain jumps to the mac chain: empty both, then delete in that order.
    let doomed: Vec<String> = [att.iface_chain(), att.mac_chain()]
        .into_iter()
        .filter(|c| chains.contains(c))
        .collect();
    for c in &doomed {
        tx.push_str(&format!("flush chain {FAMILY} {TABLE} {c}\n"));
    }
    for c in &doomed {
        tx.push_str(&format!("delete chain {FAMILY} {TABLE} {c}\n"));
    }
    if tx.is_empty() {
        return Ok(());
    }
    nft_run(&tx).map_err(|d| err("failed to teardown spoof-check", d))
}

/// Names of the chains in `bridge nat`; None when the table does not exist.
fn chains() -> Result<Option<Vec<String>>, Error> {
    let Some(v) = nft_json(&["list", "table", FAMILY, TABLE])? else {
        return Ok(None);
    };
    let names = v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["chain"]["name"].as_str().map(str::to_string))
        .collect();
    Ok(Some(names))
}

/// Handles of the base-chain rules carrying `comment`.
fn base_rules(comment: &str) -> Result<Vec<u64>, Error> {
    Ok(firewall_tools::nft_commented_rules(FAMILY, TABLE, BASE_CHAIN)?
        .into_iter()
        .filter(|(_, c)| c == comment)
        .map(|(h, _)| h)
        .collect())
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
