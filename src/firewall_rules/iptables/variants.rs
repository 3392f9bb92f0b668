//! Where an attachment's iptables `nat` chain is, found without a process, and which tools
//! change it. With [`save_restore`](super::save_restore) this makes iptables cost nothing when there
//! is nothing to do, and one `iptables-restore --noflush` per family for a change (plus
//! one `iptables-save` when the change depends on rules that may already exist).
//!
//! * iptables-nft keeps its chains in nf_tables tables `ip nat` / `ip6 nat`, which a
//!   netlink dump lists ([`xtables::has_chain`](crate::netlink::nftables::shapes::xtables)).
//! * iptables-legacy tables are not visible over netlink; the kernel lists the legacy
//!   tables in use in this namespace in `/proc/net/ip_tables_names` (`ip6_tables_names`).
//!   Only when `nat` is listed there can a legacy chain exist, and only then is
//!   `iptables-legacy-save` run to look.
//!
//! Each variant's rules are changed with that variant's tools (`iptables-nft-restore`,
//! `iptables-legacy-restore`, or plain `iptables-restore` when it is that variant).
use std::path::PathBuf;
use std::sync::OnceLock;

use super::save_restore::Family as IpVersion;
use crate::firewall_rules::error::{err, Error};
use crate::firewall_rules::tools::{find_tool, missing_tool};
use crate::netlink::nftables::shapes::xtables;
use crate::netlink::nftables::Nftables;

fn legacy_names(v: IpVersion) -> &'static str {
    match v {
        IpVersion::V4 => "ip_tables_names",
        IpVersion::V6 => "ip6_tables_names",
    }
}

/// The two iptables backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Nft,
    Legacy,
}

/// The `-save`/`-restore` pair of one variant and IP version.
pub struct Tools {
    pub save: PathBuf,
    pub restore: PathBuf,
    pub variant: Variant,
}

/// Which variant plain `iptables-restore` is: the multi-binary it resolves to says. Looked
/// up once per process and IP version (PATH and the installed tools do not change under a
/// plugin call; a chain runner's in-process plugins share the answer).
fn plain_variant(v: IpVersion) -> Option<(PathBuf, Variant)> {
    static V4: OnceLock<Option<(PathBuf, Variant)>> = OnceLock::new();
    static V6: OnceLock<Option<(PathBuf, Variant)>> = OnceLock::new();
    let once = match v {
        IpVersion::V4 => &V4,
        IpVersion::V6 => &V6,
    };
    once.get_or_init(|| look_up_plain_variant(v)).clone()
}

fn look_up_plain_variant(v: IpVersion) -> Option<(PathBuf, Variant)> {
    let plain = find_tool(&format!("{}-restore", v.tool()))?;
    let real = std::fs::canonicalize(&plain).unwrap_or_else(|_| plain.clone());
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let variant = if name.contains("nft") {
        Variant::Nft
    } else {
        Variant::Legacy
    };
    Some((plain, variant))
}

/// The tools of `variant` (the explicitly named ones, else the plain ones if they are
/// that variant); None when not installed.
pub fn tools(v: IpVersion, variant: Variant) -> Option<Tools> {
    let infix = match variant {
        Variant::Nft => "nft",
        Variant::Legacy => "legacy",
    };
    let named = |what: &str| find_tool(&format!("{}-{infix}-{what}", v.tool()));
    if let (Some(save), Some(restore)) = (named("save"), named("restore")) {
        return Some(Tools { save, restore, variant });
    }
    let (restore, plain) = plain_variant(v)?;
    let save = find_tool(&format!("{}-save", v.tool()))?;
    (plain == variant).then_some(Tools { save, restore, variant })
}

/// Whether the iptables rules of `v` are read and written over nf_tables netlink
/// ([`nft`](super::nft)) rather than by running iptables-save/-restore:
/// when plain `iptables` (what the reference runs) is iptables-nft, whose tables are
/// nf_tables tables; and when no iptables is installed but nf_tables is there (nothing else
/// writes those tables then, and an iptables-nft installed later reads them as its own).
/// An iptables-legacy host keeps the processes: its tables are not reachable over netlink.
/// No process is run to decide.
pub fn over_netlink(v: IpVersion) -> bool {
    match plain_variant(v) {
        Some((_, Variant::Nft)) => true,
        Some((_, Variant::Legacy)) => false,
        None => Nftables::shared().is_ok(),
    }
}

/// The tools ADD uses: plain `iptables-restore`'s variant, as the reference runs plain
/// `iptables`.
pub fn default_tools(v: IpVersion) -> Option<Tools> {
    let (_, variant) = plain_variant(v)?;
    tools(v, variant)
}

/// The tools for `variant`, or the clear error that they are needed and missing.
pub fn needed_tools(v: IpVersion, variant: Variant, op: &str) -> Result<Tools, Error> {
    tools(v, variant).ok_or_else(|| {
        let name = match variant {
            Variant::Nft => format!("{}-nft-restore", v.tool()),
            Variant::Legacy => format!("{}-legacy-restore", v.tool()),
        };
        missing_tool(op, &name)
    })
}

/// Where the `nat` chain `chain` exists or may exist: `Nft` when the nf_tables dump shows
/// it, `Legacy` when a legacy `nat` table is in use in this namespace. No process is run.
pub fn chain_locations(v: IpVersion, chain: &str) -> Result<Vec<Variant>, Error> {
    chain_locations_in(v, "nat", chain)
}

/// [`chain_locations`] for a chain of any table (the firewall plugin's are in `filter`).
pub fn chain_locations_in(v: IpVersion, table: &str, chain: &str) -> Result<Vec<Variant>, Error> {
    let op = || format!("look for {} chain {chain}", v.tool());
    let mut found = Vec::new();
    match Nftables::shared() {
        Ok(nft) => {
            if xtables::has_chain(&nft, v.nf_family(), table, chain).map_err(|e| err(op(), e))? {
                found.push(Variant::Nft);
            }
        }
        Err(e) if e.is_netfilter_missing() => {}
        Err(e) => return Err(err(op(), e)),
    }
    if legacy_table_in_use(v, table) {
        found.push(Variant::Legacy);
    }
    Ok(found)
}

/// `/proc/thread-self/net` is the calling thread's namespace; `/proc/net` would be the
/// main thread's.
fn legacy_table_in_use(v: IpVersion, table: &str) -> bool {
    std::fs::read_to_string(format!("/proc/thread-self/net/{}", legacy_names(v)))
        .map(|s| s.lines().any(|l| l.trim() == table))
        .unwrap_or(false)
}
