//! IP masquerade for container addresses (`ipMasq` of bridge and veth).
//!
//! Rules use the reference plugins' layouts exactly, so cnibox and the Go plugins can tear
//! down each other's rules:
//! * nftables: table `inet cni_plugins_masquerade`, chain `postrouting` (nat, srcnat) that
//!   skips multicast and jumps to `masq_checks`, and one rule per address in `masq_checks`
//!   whose comment starts with a hash of (network, ifname, container ID).
//! * iptables: a nat chain `CNI-<hash(network + container ID)>` per attachment, jumped to
//!   from `POSTROUTING -s <ip>`.
//!
//! Unlike the reference, teardown needs no addresses: nftables rules are found by their
//! comment hash and iptables rules by the chain they jump to. That is what lets DEL without
//! a netns (and without a prevResult) still remove the rules.
pub use super::firewall_tools::Error;
use super::firewall_tools::{self, err, nft_quote, nft_run, tool_available};
use super::xtables::split_rule;
use crate::cni::result::network_of;
use crate::util::sha512;
use ipnetwork::IpNetwork;
use std::process::{Command, Stdio};

const TABLE: &str = "cni_plugins_masquerade";
const CHECKS_CHAIN: &str = "masq_checks";
/// knftables' CommentLengthMax.
const NFT_COMMENT_MAX: usize = 128;
/// iptables chain names are at most 28 characters.
const IPT_CHAIN_LEN: usize = 28;

/// Where masquerade rules go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Nftables,
    Iptables,
}

/// The attachment whose addresses are masqueraded.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    pub network: &'a str,
    pub ifname: &'a str,
    pub container_id: &'a str,
}

/// The backend for `ipMasqBackend`: as configured, else nftables when `nft` is installed,
/// else iptables. (The reference prefers iptables; nftables is the better default: one
/// atomic transaction per change and no xtables lock.)
pub fn backend(configured: Option<&str>) -> Result<Backend, Error> {
    match configured {
        Some("nftables") => Ok(Backend::Nftables),
        Some("iptables") => Ok(Backend::Iptables),
        Some(other) => Err(err("ipMasqBackend", format!("unknown ipmasq backend {other:?}"))),
        None if tool_available("nft") || !tool_available("iptables") => Ok(Backend::Nftables),
        None => Ok(Backend::Iptables),
    }
}

/// Masquerade traffic from each address to anything outside its subnet (and not multicast).
pub fn setup(backend: Backend, att: Attachment, addrs: &[IpNetwork]) -> Result<(), Error> {
    if addrs.is_empty() {
        return Ok(());
    }
    match backend {
        Backend::Nftables => nft_setup(att, addrs),
        Backend::Iptables => addrs.iter().try_for_each(|a| ipt_setup(att, a)),
    }
}

/// Remove every masquerade rule of the attachment, from both backends (the attachment may
/// have been set up by another version or configuration). Missing tools, tables and chains
/// are not errors.
pub fn teardown(att: Attachment) -> Result<(), Error> {
    let mut errors = Vec::new();
    if tool_available("iptables") {
        for tool in ["iptables", "ip6tables"] {
            if let Err(e) = ipt_teardown(tool, att) {
                errors.push(e.to_string());
            }
        }
    }
    if tool_available("nft") {
        if let Err(e) = nft_delete_matching(&instance_hash(att), |_| true) {
            errors.push(e.to_string());
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(err("teardown ip masquerade", errors.join("; ")))
    }
}

/// Remove the nftables rules of `network` whose attachment is not in `valid`
/// ((container ID, ifname) pairs). The iptables layout cannot be attributed to a network.
pub fn gc(network: &str, valid: &[(String, String)]) -> Result<(), Error> {
    if !tool_available("nft") {
        return Ok(());
    }
    let keep: Vec<String> = valid
        .iter()
        .map(|(cid, ifname)| {
            comment(Attachment {
                network,
                ifname,
                container_id: cid,
            })
        })
        .collect();
    nft_delete_matching(&hash16(network), |c| !keep.iter().any(|k| k == c))
}

fn hash_hex(input: &str, len: usize) -> String {
    let mut s = sha512::hex(&sha512::digest(input.as_bytes()));
    s.truncate(len);
    s
}

fn hash16(input: &str) -> String {
    hash_hex(input, 16)
}

/// `<hash(network)>-<hash(ifname:cid)>`: the prefix of every nftables comment of an attachment.
fn instance_hash(att: Attachment) -> String {
    format!(
        "{}-{}",
        hash16(att.network),
        hash16(&format!("{}:{}", att.ifname, att.container_id))
    )
}

fn comment(att: Attachment) -> String {
    let strip = |s: &str| s.replace('"', "");
    let mut c = format!(
        "{}, net: {}, if: {}, id: {}",
        instance_hash(att),
        strip(att.network),
        strip(att.ifname),
        strip(att.container_id)
    );
    if c.len() > NFT_COMMENT_MAX {
        let mut end = NFT_COMMENT_MAX;
        while !c.is_char_boundary(end) {
            end -= 1;
        }
        c.truncate(end);
    }
    c
}

fn family_keyword(a: &IpNetwork) -> &'static str {
    if a.is_ipv4() {
        "ip"
    } else {
        "ip6"
    }
}

fn nft_setup(att: Attachment, addrs: &[IpNetwork]) -> Result<(), Error> {
    let stale = nft_rules()?
        .into_iter()
        .filter(|(_, c)| c.starts_with(&instance_hash(att)));
    let mut tx = format!(
        "add table inet {TABLE} {{ comment \"Masquerading for plugins from github.com/containernetworking/plugins\" ; }}\n\
         add chain inet {TABLE} {CHECKS_CHAIN} {{ comment \"Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet\" ; }}\n\
         add chain inet {TABLE} postrouting {{ type nat hook postrouting priority srcnat ; }}\n\
         flush chain inet {TABLE} postrouting\n\
         add rule inet {TABLE} postrouting ip daddr == 224.0.0.0/4 return\n\
         add rule inet {TABLE} postrouting ip6 daddr == ff00::/8 return\n\
         add rule inet {TABLE} postrouting goto {CHECKS_CHAIN}\n"
    );
    for (handle, _) in stale {
        tx.push_str(&format!("delete rule inet {TABLE} {CHECKS_CHAIN} handle {handle}\n"));
    }
    let c = comment(att);
    for a in addrs {
        let fam = family_keyword(a);
        let subnet = network_of(*a);
        tx.push_str(&format!(
            "add rule inet {TABLE} {CHECKS_CHAIN} {fam} saddr == {} {fam} daddr != {subnet} masquerade comment {}\n",
            a.ip(),
            nft_quote(&c)
        ));
    }
    nft_run(&tx).map_err(|d| err("set up nftables masquerade", d))
}

/// (handle, comment) of every rule in `masq_checks`; none when the table is missing.
fn nft_rules() -> Result<Vec<(u64, String)>, Error> {
    firewall_tools::nft_commented_rules("inet", TABLE, CHECKS_CHAIN)
}

fn nft_delete_matching(prefix: &str, also: impl Fn(&str) -> bool) -> Result<(), Error> {
    let doomed: Vec<u64> = nft_rules()?
        .into_iter()
        .filter(|(_, c)| c.starts_with(prefix) && also(c))
        .map(|(h, _)| h)
        .collect();
    if doomed.is_empty() {
        return Ok(());
    }
    let tx: String = doomed
        .iter()
        .map(|h| format!("delete rule inet {TABLE} {CHECKS_CHAIN} handle {h}\n"))
        .collect();
    nft_run(&tx).map_err(|d| err("delete nftables masquerade rules", d))
}

/// `CNI-` + sha512(network + container ID), 28 characters, as the reference names it.
pub fn iptables_chain(att: Attachment) -> String {
    let mut s = String::from("CNI-");
    s.push_str(&hash_hex(
        &format!("{}{}", att.network, att.container_id),
        IPT_CHAIN_LEN - 4,
    ));
    s
}

fn iptables_comment(att: Attachment) -> String {
    format!("name: {:?} id: {:?}", att.network, att.container_id)
}

fn ipt_tool(a: &IpNetwork) -> &'static str {
    if a.is_ipv4() {
        "iptables"
    } else {
        "ip6tables"
    }
}

fn ipt_setup(att: Attachment, addr: &IpNetwork) -> Result<(), Error> {
    let tool = ipt_tool(addr);
    let chain = iptables_chain(att);
    let comment = iptables_comment(att);
    let multicast = if addr.is_ipv4() { "224.0.0.0/4" } else { "ff00::/8" };
    let subnet = network_of(*addr).to_string();
    // Another ADD of the same network may create the chain at the same time: "exists" is fine.
    if let Err(e) = ipt(tool, &["-N", &chain]) {
        if !e.contains("already exists") {
            return Err(err(format!("create {tool} chain {chain}"), e));
        }
    }
    let src = addr.ip().to_string();
    let rules: [(&str, Vec<&str>); 3] = [
        (&chain, vec!["-d", &subnet, "-j", "ACCEPT"]),
        (&chain, vec!["!", "-d", multicast, "-j", "MASQUERADE"]),
        ("POSTROUTING", vec!["-s", &src, "-j", &chain]),
    ];
    for (target_chain, mut spec) in rules {
        spec.extend_from_slice(&["-m", "comment", "--comment", &comment]);
        // AppendUnique, as go-iptables does: check first, append only when missing.
        let mut check = vec!["-C", target_chain];
        check.extend_from_slice(&spec);
        if ipt(tool, &check).is_ok() {
            continue;
        }
        let mut append = vec!["-A", target_chain];
        append.extend_from_slice(&spec);
        ipt(tool, &append).map_err(|e| err(format!("append {tool} rule to {target_chain}"), e))?;
    }
    Ok(())
}

fn ipt_teardown(tool: &str, att: Attachment) -> Result<(), Error> {
    let chain = iptables_chain(att);
    let listing = match ipt(tool, &["-S", "POSTROUTING"]) {
        Ok(l) => l,
        Err(e) if is_not_exist(&e) => return Ok(()),
        Err(e) => return Err(err(format!("list {tool} POSTROUTING"), e)),
    };
    for line in listing.lines() {
        let words = split_rule(line);
        if words.first().map(String::as_str) != Some("-A") || !jumps_to(&words, &chain) {
            continue;
        }
        let mut args: Vec<&str> = vec!["-D"];
        args.extend(words[1..].iter().map(String::as_str));
        if let Err(e) = ipt(tool, &args) {
            if !is_not_exist(&e) {
                return Err(err(format!("delete {tool} POSTROUTING rule"), e));
            }
        }
    }
    for op in ["-F", "-X"] {
        if let Err(e) = ipt(tool, &[op, &chain]) {
            if !is_not_exist(&e) {
                return Err(err(format!("{op} {tool} chain {chain}"), e));
            }
        }
    }
    Ok(())
}

fn jumps_to(words: &[String], chain: &str) -> bool {
    words.windows(2).any(|w| w[0] == "-j" && w[1] == chain)
}

/// go-iptables' IsNotExist patterns.
fn is_not_exist(msg: &str) -> bool {
    [
        "does not exist",
        "No such file or directory",
        "No chain/target/match by that name",
        "Bad rule (does a matching rule exist in that chain?)",
    ]
    .iter()
    .any(|p| msg.contains(p))
}

/// Run `<tool> -w -t nat ARGS`; Ok(stdout) or Err(stderr).
fn ipt(tool: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(tool)
        .args(["-w", "-t", "nat"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run {tool}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ATT: Attachment = Attachment {
        network: "brnet",
        ifname: "eth0",
        container_id: "ctrA",
    };

    #[test]
    fn iptables_chain_matches_the_reference() {
        // Observed with the Go bridge v1.1.1 (reference doc §2.0).
        assert_eq!(iptables_chain(ATT), "CNI-cf7b292a3456547459e1c807");
        assert_eq!(iptables_comment(ATT), r#"name: "brnet" id: "ctrA""#);
    }

    #[test]
    fn nft_comment_starts_with_the_instance_hash_and_is_bounded() {
        let c = comment(ATT);
        assert!(c.starts_with(&instance_hash(ATT)));
        assert!(c.ends_with(", net: brnet, if: eth0, id: ctrA"), "{c}");
        let long = "x".repeat(200);
        let att = Attachment {
            container_id: &long,
            ..ATT
        };
        assert_eq!(comment(att).len(), NFT_COMMENT_MAX);
        let quoted = Attachment { network: "a\"b", ..ATT };
        assert!(!comment(quoted).contains('"'));
    }

    #[test]
    fn backend_names() {
        assert_eq!(backend(Some("iptables")), Ok(Backend::Iptables));
        assert_eq!(backend(Some("nftables")), Ok(Backend::Nftables));
        assert_eq!(backend(Some("pf")).unwrap_err().detail, "unknown ipmasq backend \"pf\"");
    }

    #[test]
    fn iptables_save_lines_split_like_a_shell() {
        let line = r#"-A POSTROUTING -s 10.22.0.4/32 -m comment --comment "name: \"brnet\" id: \"ctrA\"" -j CNI-cf7b292a3456547459e1c807"#;
        let w = split_rule(line);
        assert_eq!(w[7], r#"name: "brnet" id: "ctrA""#);
        assert!(jumps_to(&w, "CNI-cf7b292a3456547459e1c807"));
        assert!(!jumps_to(&w, "CNI-other"));
    }

    #[test]
    fn not_exist_patterns() {
        assert!(is_not_exist("iptables: No chain/target/match by that name."));
        assert!(!is_not_exist("iptables: Permission denied"));
    }
}
