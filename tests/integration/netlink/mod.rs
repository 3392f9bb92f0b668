//! The netlink layer against the real kernel, one file per family: `rtnetlink` (links,
//! addresses, routes, tc) and `nftables` (nf_tables, with `nft` as the oracle), and
//! `iptables_nft` (iptables-nft's tables through the nf_tables layer, with iptables as
//! the oracle).
mod iptables_nft;
mod nftables;
mod rtnetlink;
