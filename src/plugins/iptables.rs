//! iptables `nat` chains per attachment, as the reference's iptables backend makes them,
//! with as few processes as possible: none when there is nothing to do, one
//! `iptables-restore --noflush` per family for a change (plus one `iptables-save` when the
//! change depends on rules that may already exist).
//!
//! Whether an attachment's chain exists is found out without a process:
//! * iptables-nft keeps its chains in nf_tables tables `ip nat` / `ip6 nat`, which a
//!   netlink dump lists ([`xtables::has_chain`]).
//! * iptables-legacy tables are not visible over netlink; the kernel lists the legacy
//!   tables in use in this namespace in `/proc/net/ip_tables_names` (`ip6_tables_names`).
//!   Only when `nat` is listed there can a legacy chain exist, and only then is
//!   `iptables-legacy-save` run to look.
//!
//! Each variant's rules are changed with that variant's tools (`iptables-nft-restore`,
//! `iptables-legacy-restore`, or plain `iptables-restore` when it is that variant).
use std::path::PathBuf;

use super::firewall_tools::{err, find_tool, missing_tool, run, Error};
use crate::netlink::nftables::shapes::xtables;
use crate::netlink::nftables::{Family, Nftables};

/// IPv4 (`iptables`) or IPv6 (`ip6tables`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpVersion {
    V4,
    V6,
}

impl IpVersion {
    fn prefix(self) -> &'static str {
        match self {
            IpVersion::V4 => "iptables",
            IpVersion::V6 => "ip6tables",
        }
    }

    fn nf_family(self) -> Family {
        match self {
            IpVersion::V4 => Family::Ip,
            IpVersion::V6 => Family::Ip6,
        }
    }

    fn legacy_names(self) -> &'static str {
        match self {
            IpVersion::V4 => "ip_tables_names",
            IpVersion::V6 => "ip6_tables_names",
        }
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

/// Which variant plain `iptables-restore` is: the multi-binary it resolves to says.
fn plain_variant(v: IpVersion) -> Option<(PathBuf, Variant)> {
    let plain = find_tool(&format!("{}-restore", v.prefix()))?;
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
    let named = |what: &str| find_tool(&format!("{}-{infix}-{what}", v.prefix()));
    if let (Some(save), Some(restore)) = (named("save"), named("restore")) {
        return Some(Tools { save, restore, variant });
    }
    let (restore, plain) = plain_variant(v)?;
    let save = find_tool(&format!("{}-save", v.prefix()))?;
    (plain == variant).then_some(Tools { save, restore, variant })
}

/// The tools ADD uses: those of plain `iptables-restore`, as the reference runs plain
/// `iptables`.
pub fn default_tools(v: IpVersion) -> Option<Tools> {
    let (_, variant) = plain_variant(v)?;
    tools(v, variant)
}

/// Where the `nat` chain `chain` exists or may exist: `Nft` when the nf_tables dump shows
/// it, `Legacy` when a legacy `nat` table is in use in this namespace. No process is run.
pub fn chain_locations(v: IpVersion, chain: &str) -> Result<Vec<Variant>, Error> {
    let mut found = Vec::new();
    match Nftables::current() {
        Ok(nft) => {
            if xtables::has_chain(&nft, v.nf_family(), "nat", chain)
                .map_err(|e| err(format!("look for {} chain {chain}", v.prefix()), e))?
            {
                found.push(Variant::Nft);
            }
        }
        Err(e) if e.is_netfilter_missing() => {}
        Err(e) => return Err(err(format!("look for {} chain {chain}", v.prefix()), e)),
    }
    if legacy_nat_in_use(v) {
        found.push(Variant::Legacy);
    }
    Ok(found)
}

/// `/proc/thread-self/net` is the calling thread's namespace; `/proc/net` would be the
/// main thread's.
fn legacy_nat_in_use(v: IpVersion) -> bool {
    std::fs::read_to_string(format!("/proc/thread-self/net/{}", v.legacy_names()))
        .map(|s| s.lines().any(|l| l.trim() == "nat"))
        .unwrap_or(false)
}

/// `<save> -t nat`, as lines of rules (`-A …`) and chain declarations (`:NAME …`).
pub fn save_nat(t: &Tools) -> Result<Vec<String>, Error> {
    let out = run(&t.save, &["-t", "nat"], None).map_err(|e| err(format!("run {}", t.save.display()), e))?;
    Ok(out.lines().map(str::to_string).collect())
}

/// Applies `lines` (without the `*nat`/`COMMIT` envelope) as one atomic
/// `<restore> -w --noflush`.
pub fn restore_nat(t: &Tools, lines: &[String]) -> Result<(), Error> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut script = String::from("*nat\n");
    for l in lines {
        script.push_str(l);
        script.push('\n');
    }
    script.push_str("COMMIT\n");
    run(&t.restore, &["-w", "--noflush"], Some(&script))
        .map(drop)
        .map_err(|e| err(format!("run {}", t.restore.display()), e))
}

/// The tools for `variant`, or the clear error that they are needed and missing.
pub fn needed_tools(v: IpVersion, variant: Variant, op: &str) -> Result<Tools, Error> {
    tools(v, variant).ok_or_else(|| {
        let name = match variant {
            Variant::Nft => format!("{}-nft-restore", v.prefix()),
            Variant::Legacy => format!("{}-legacy-restore", v.prefix()),
        };
        missing_tool(op, &name)
    })
}

/// An iptables-save/-restore argument, quoted as iptables-save prints it.
pub fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Whether a saved rule line jumps to `chain`.
pub fn jumps_to(line: &str, chain: &str) -> bool {
    split_rule(line).windows(2).any(|w| w[0] == "-j" && w[1] == chain)
}

/// Split one line of `iptables-save` into arguments (double quotes with backslash escapes).
fn split_rule(line: &str) -> Vec<String> {
    let mut words = vec![];
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_matches_iptables_save() {
        assert_eq!(quote(r#"name: "n" id: "c""#), r#""name: \"n\" id: \"c\"""#);
    }

    #[test]
    fn jumps_are_found_by_target() {
        let l = r#"-A POSTROUTING -s 10.0.0.1/32 -m comment --comment "x -j CNI-q \"y\"" -j CNI-abc"#;
        assert!(jumps_to(l, "CNI-abc"));
        assert!(!jumps_to(l, "CNI-ab"));
        assert!(!jumps_to(l, "CNI-q"), "a quoted comment is one word");
        assert_eq!(split_rule(l)[7], r#"x -j CNI-q "y""#);
    }
}
