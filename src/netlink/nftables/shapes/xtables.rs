//! Reading iptables-nft's tables: an iptables chain made through the nf_tables backend is
//! an ordinary chain of table `ip nat` / `ip6 nat`, so whether an attachment's `CNI-…`
//! chain exists can be asked without running iptables.
use super::super::{Family, Nftables};
use crate::netlink::Result;

/// Whether `table` of `family` (Ip or Ip6) has a chain named `chain`.
pub fn has_chain(nft: &Nftables, family: Family, table: &str, chain: &str) -> Result<bool> {
    Ok(nft.chains(family, table)?.iter().any(|c| c.name == chain))
}
