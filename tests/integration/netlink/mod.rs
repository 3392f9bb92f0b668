//! The netlink layer against the real kernel, one file per family: `rtnetlink` (links,
//! addresses, routes, tc) and `nftables` (nf_tables, with `nft` as the oracle).
mod nftables;
mod rtnetlink;
