//! IP masquerade for container addresses (`ipMasq` of bridge and veth).
//!
//! Rules use the reference plugins' layouts exactly, so cnibox and the Go plugins can tear
//! down each other's rules:
//! * nftables (over netlink, no `nft` process; the layout is the
//!   [`masquerade` shape](crate::netlink::nftables::shapes::masquerade)): table
//!   `inet cni_plugins_masquerade`, one rule per address in `masq_checks` whose comment
//!   starts with a hash of (network, ifname, container ID).
//! * iptables: a nat chain `CNI-<hash(network + container ID)>` per attachment, jumped to
//!   from `POSTROUTING -s <ip>`, changed with one `iptables-restore` per family. That name
//!   leaves out the interface: cnibox gives it to the container's first interface on the
//!   network and a chain `CNI-<hash(network/ID/ifname)>` to every further one, whose rules'
//!   comment names the interface too (see [`shared_chain`](super::shared_chain)).
//!
//! cnibox also keeps an index of the attachments that have nftables rules, with their rules'
//! handles (a map in the same table, see the shape), so an ADD reads `masq_checks` only
//! when its attachment already has rules there and a DEL deletes by handle; a DEL of an
//! attachment the index does not have, and GC, read the chain, to find the reference's
//! rules too.
//!
//! Unlike the reference, teardown needs no addresses: nftables rules are found by their
//! comment hash and iptables rules by the chain they jump to. That is what lets DEL without
//! a netns (and without a prevResult) still remove the rules; addresses only tell whether a
//! shared iptables chain is another interface's. Teardown runs no process unless an
//! iptables chain of the attachment exists (see [`super::iptables::variants`]).
use super::error::err;
pub use super::error::Error;
use super::iptables::save_restore::{self, Family as IpFamily, Script, Table};
use super::iptables::variants;
use super::shared_chain::{self, Interface};
use super::tools::missing_tool;
use crate::cni::netaddr::network_of;
use crate::netlink::nftables::shapes::masquerade as shape;
use crate::netlink::nftables::{Nftables, Transaction};
use crate::util::sha512;
use ipnetwork::IpNetwork;

/// knftables' CommentLengthMax.
const NFT_COMMENT_MAX: usize = 128;
/// iptables chain names are at most 28 characters.
const IPT_CHAIN_LEN: usize = 28;
/// How often a change is read and planned again when a concurrent change removed a rule
/// it was about to delete.
const ATTEMPTS: usize = 3;

/// Where masquerade rules go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Nftables,
    Iptables,
    /// `ipMasqBackend` unset: nftables, or iptables on a kernel without nf_tables.
    Auto,
}

/// The attachment whose addresses are masqueraded.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    pub network: &'a str,
    pub ifname: &'a str,
    pub container_id: &'a str,
}

/// The backend for `ipMasqBackend`. (The reference prefers iptables when unset; nftables is
/// the better default: one atomic transaction per change, no xtables lock, no process.)
pub fn backend(configured: Option<&str>) -> Result<Backend, Error> {
    match configured {
        Some("nftables") => Ok(Backend::Nftables),
        Some("iptables") => Ok(Backend::Iptables),
        Some(other) => Err(err("ipMasqBackend", format!("unknown ipmasq backend {other:?}"))),
        None => Ok(Backend::Auto),
    }
}

/// Masquerade traffic from each address to anything outside its subnet (and not multicast).
pub fn setup(backend: Backend, att: Attachment, addrs: &[IpNetwork]) -> Result<(), Error> {
    if addrs.is_empty() {
        return Ok(());
    }
    match backend {
        Backend::Iptables => ipt_setup(att, addrs),
        Backend::Nftables => nft_setup(att, addrs).map_err(|e| match e {
            NftFailure::Missing(e) => err(
                "set up nftables masquerade",
                format!("ipMasqBackend nftables needs nf_tables, which this kernel does not offer ({e})"),
            ),
            NftFailure::Failed(e) => e,
        }),
        Backend::Auto => match nft_setup(att, addrs) {
            Ok(()) => Ok(()),
            Err(NftFailure::Missing(nf)) => match missing_iptables(addrs) {
                Some(tool) => Err(neither_backend(&nf, &tool)),
                None => ipt_setup(att, addrs),
            },
            Err(NftFailure::Failed(e)) => Err(e),
        },
    }
}

/// The iptables tool the fallback would need for `addrs` and cannot find, if any.
fn missing_iptables(addrs: &[IpNetwork]) -> Option<String> {
    [IpFamily::V4, IpFamily::V6]
        .into_iter()
        .filter(|v| addrs.iter().any(|a| IpFamily::of(a.ip()) == *v))
        .find(|v| variants::default_tools(*v).is_none())
        .map(|v| format!("{}-restore", v.tool()))
}

/// `ipMasq` without a backend: no nf_tables in the kernel, no iptables tools installed.
fn neither_backend(nf: &dyn std::fmt::Display, tool: &str) -> Error {
    err(
        "set up masquerade",
        format!(
            "ipMasq needs nftables or iptables; neither was found: this kernel offers no nf_tables \
             ({nf}) and {tool} is not installed (install the iptables package, or load nf_tables)"
        ),
    )
}

/// Remove every masquerade rule of the attachment, from both backends (the attachment may
/// have been set up by another version or configuration). `this` tells whether a shared
/// iptables chain is this interface's. Missing tables, chains, tools that are not needed,
/// and a kernel without nf_tables are not errors.
pub fn teardown(att: Attachment, this: &Interface) -> Result<(), Error> {
    let mut errors = Vec::new();
    for v in [IpFamily::V4, IpFamily::V6] {
        if let Err(e) = ipt_teardown(v, att, this) {
            errors.push(e.to_string());
        }
    }
    if let Err(e) = nft_teardown(att) {
        errors.push(e.to_string());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(err("teardown ip masquerade", errors.join("; ")))
    }
}

/// Remove what [`setup`] made for `addrs` (a failed ADD's rollback).
pub fn undo_setup(att: Attachment, addrs: &[IpNetwork]) -> Result<(), Error> {
    teardown(att, &Interface::with_addresses(addrs.iter().map(|a| a.ip()).collect()))
}

/// Remove the nftables rules of `network` whose attachment is not in `valid`
/// ((container ID, ifname) pairs). The iptables layout cannot be attributed to a network.
pub fn gc(network: &str, valid: &[(String, String)]) -> Result<(), Error> {
    let valid: Vec<Attachment> = valid
        .iter()
        .map(|(cid, ifname)| Attachment {
            network,
            ifname,
            container_id: cid,
        })
        .collect();
    let keep: Vec<String> = valid.iter().map(|a| comment(*a)).collect();
    let keep_keys: Vec<shape::AttachmentKey> = valid.iter().map(|a| index_key(*a)).collect();
    // the network's half of every key of the network
    let network_half = index_key(Attachment {
        network,
        ifname: "",
        container_id: "",
    });
    let stale = |nft: &Nftables| {
        Ok(shape::indexed(nft)?
            .into_iter()
            .filter(|k| k[..8] == network_half[..8] && !keep_keys.contains(k))
            .collect())
    };
    nft_gc(&hash16(network), |c| !keep.iter().any(|k| k == c), stale)
}

fn hash_hex(input: &str, len: usize) -> String {
    let mut s = sha512::hex(&sha512::digest(input.as_bytes()));
    s.truncate(len);
    s
}

pub fn hash16(input: &str) -> String {
    hash_hex(input, 16)
}

/// `<hash(network)>-<hash(ifname:cid)>`: the prefix of every nftables comment of an attachment.
pub fn instance_hash(att: Attachment) -> String {
    format!(
        "{}-{}",
        hash16(att.network),
        hash16(&format!("{}:{}", att.ifname, att.container_id))
    )
}

/// An attachment's nftables comment, the reference's format (also the firewall plugin's).
pub fn comment(att: Attachment) -> String {
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

/// Why the nftables path did not work: the kernel has no nf_tables (a fallback may
/// apply), or it failed.
enum NftFailure {
    Missing(crate::netlink::Error),
    Failed(Error),
}

/// The attachment's rules, after the layout where it is missing, then the attachment in
/// the index with their handles (a second commit: the kernel gives the handles at the
/// first). Its stale rules (an ADD repeated without a DEL in between) are looked for only
/// when the index has the attachment: reading all of `masq_checks` on every ADD was the
/// part of an ADD that grew with the node. (The rules stand without their element between
/// the two commits: a DEL then finds them by comment.)
fn nft_setup(att: Attachment, addrs: &[IpNetwork]) -> Result<(), NftFailure> {
    let op = "set up nftables masquerade";
    let failed = |e: crate::netlink::Error| {
        if e.is_netfilter_missing() {
            NftFailure::Missing(e)
        } else {
            NftFailure::Failed(err(op, e))
        }
    };
    let nft = Nftables::shared().map_err(failed)?;
    let prefix = instance_hash(att);
    let key = index_key(att);
    let c = comment(att);
    let echoed = nft.commit_planned_echoed(
        ATTEMPTS,
        |nft| {
            let now = shape::state(nft).map_err(failed)?;
            let mut tx = Transaction::new();
            tx.declare(&shape::layout(), &now);
            plan_removal(nft, &mut tx, &prefix, &key, Removal::Add).map_err(failed)?;
            for a in addrs {
                shape::masquerade(&mut tx, a.ip(), network_of(*a), &c);
            }
            Ok(tx)
        },
        failed,
    )?;
    let handles = shape::handles_in(&echoed, &c);
    let mut tx = Transaction::new();
    // without every handle, none: its rules are then found by their comment
    shape::index(&mut tx, &key, if handles.len() == addrs.len() { &handles } else { &[] });
    nft.commit(tx).map_err(failed)
}

/// Deletes the attachment's rules, and its element in the index.
fn nft_teardown(att: Attachment) -> Result<(), Error> {
    let op = "delete nftables masquerade rules";
    let nft = match Nftables::shared() {
        Ok(n) => n,
        Err(e) if e.is_netfilter_missing() => return Ok(()),
        Err(e) => return Err(err(op, e)),
    };
    let (prefix, key) = (instance_hash(att), index_key(att));
    let mut attempt = 0;
    nft.commit_planned(
        ATTEMPTS,
        |nft| {
            attempt += 1;
            let mut tx = Transaction::new();
            let first_attempt = attempt == 1;
            plan_removal(nft, &mut tx, &prefix, &key, Removal::Del { first_attempt }).map_err(|e| err(op, e))?;
            Ok(tx)
        },
        |e| err(op, e),
    )
}

/// Whose removal of an attachment's rules [`plan_removal`] plans.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// An ADD's, of what an earlier ADD of the attachment left: nothing when the index does
    /// not have the attachment (cnibox made no rules for it); else every rule with its
    /// comment, read from the chain, as the reference's ADD replaces them (a repeated ADD
    /// is rare, and the chain is the only place rules another implementation added meanwhile
    /// are seen).
    Add,
    /// A DEL's: by the handles the index has on the first attempt (a rule gone since,
    /// deleted by another implementation, makes the commit fail as stale, and the next
    /// attempt reads the chain); by comment in all of `masq_checks` when the index has no
    /// handles or no element (the reference, or an older cnibox, made the rules).
    Del { first_attempt: bool },
}

/// Plans the deletion of the attachment's rules (those commented with `prefix`) and of its
/// element in the index.
fn plan_removal(
    nft: &Nftables,
    tx: &mut Transaction,
    prefix: &str,
    key: &shape::AttachmentKey,
    removal: Removal,
) -> crate::netlink::Result<()> {
    let indexed = shape::indexed_rules(nft, key)?;
    match (&indexed, removal) {
        (None, Removal::Add) => {}
        (Some(handles), Removal::Del { first_attempt: true }) if !handles.is_empty() => {
            for h in handles {
                shape::delete(tx, *h);
            }
        }
        _ => {
            for (h, _) in shape::rules(nft)?.iter().filter(|(_, c)| c.starts_with(prefix)) {
                shape::delete(tx, *h);
            }
        }
    }
    if indexed.is_some() {
        shape::unindex(tx, key);
    }
    Ok(())
}

/// Deletes the `masq_checks` rules whose comment starts with `prefix` and passes `also`,
/// and the index's elements `stale_keys` names, in one transaction.
fn nft_gc(
    prefix: &str,
    also: impl Fn(&str) -> bool,
    stale_keys: impl Fn(&Nftables) -> crate::netlink::Result<Vec<shape::AttachmentKey>>,
) -> Result<(), Error> {
    let op = "delete nftables masquerade rules";
    let nft = match Nftables::shared() {
        Ok(n) => n,
        Err(e) if e.is_netfilter_missing() => return Ok(()),
        Err(e) => return Err(err(op, e)),
    };
    nft.commit_planned(
        ATTEMPTS,
        |nft| {
            let mut tx = Transaction::new();
            for (h, c) in shape::rules(nft).map_err(|e| err(op, e))? {
                if c.starts_with(prefix) && also(&c) {
                    shape::delete(&mut tx, h);
                }
            }
            for key in stale_keys(nft).map_err(|e| err(op, e))? {
                shape::unindex(&mut tx, &key);
            }
            Ok(tx)
        },
        |e| err(op, e),
    )
}

/// The attachment's key in the index: the 16 bytes its comment's hash spells in hex.
fn index_key(att: Attachment) -> shape::AttachmentKey {
    let mut key = [0u8; 16];
    let hex: Vec<u8> = instance_hash(att).bytes().filter(|b| *b != b'-').collect();
    for (k, pair) in key.iter_mut().zip(hex.chunks(2)) {
        let digit = |b: u8| (b as char).to_digit(16).expect("sha512 hex") as u8;
        *k = digit(pair[0]) << 4 | digit(pair[1]);
    }
    key
}

/// `CNI-` + sha512(network + container ID), 28 characters, as the reference names it: the
/// container's first interface's chain.
pub fn iptables_chain(att: Attachment) -> String {
    format!(
        "CNI-{}",
        hash_hex(&format!("{}{}", att.network, att.container_id), IPT_CHAIN_LEN - 4)
    )
}

/// The chain of a further interface of the container on the network.
pub fn iptables_interface_chain(att: Attachment) -> String {
    let key = shared_chain::interface_key(att.network, att.container_id, att.ifname);
    format!("CNI-{}", hash_hex(&key, IPT_CHAIN_LEN - 4))
}

/// An iptables chain of an attachment and the comment of its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IptChain {
    name: String,
    comment: String,
}

impl IptChain {
    /// The reference's: named and commented after network and container.
    fn shared(att: Attachment) -> IptChain {
        IptChain {
            name: iptables_chain(att),
            comment: format!("name: {:?} id: {:?}", att.network, att.container_id),
        }
    }

    /// A further interface's own.
    fn own(att: Attachment) -> IptChain {
        IptChain {
            name: iptables_interface_chain(att),
            comment: format!(
                "name: {:?} id: {:?} ifname: {:?}",
                att.network, att.container_id, att.ifname
            ),
        }
    }

    /// The attachment's chain in `t`: its own when it has one or when the shared chain is
    /// provably another interface's, else the shared one.
    fn find(t: &Table, att: Attachment, this: &Interface) -> IptChain {
        let (own, shared) = (IptChain::own(att), IptChain::shared(att));
        match this.uses_own_chain(t, &own.name, &shared.name, sources) {
            true => own,
            false => shared,
        }
    }
}

/// The container addresses `POSTROUTING` sends to `chain`.
fn sources(t: &Table, chain: &str) -> Vec<std::net::IpAddr> {
    postrouting_jumps(t, chain)
        .filter_map(|spec| {
            spec.windows(2).find(|w| w[0] == "-s")?[1]
                .split('/')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// The `POSTROUTING` rules jumping to `chain`.
fn postrouting_jumps<'a>(t: &'a Table, chain: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
    t.rules_of("POSTROUTING")
        .filter(move |spec| spec.windows(2).any(|w| w[0] == "-j" && w[1] == chain))
}

/// The rule arguments in iptables-save's spelling: matches, the comment, the target.
fn ipt_spec(matches: &[&str], comment: &str, target: &str) -> Vec<String> {
    let mut spec: Vec<String> = matches.iter().map(|s| s.to_string()).collect();
    spec.extend(["-m", "comment", "--comment", comment, "-j", target].map(String::from));
    spec
}

/// One `iptables-restore` per IP version, adding what is missing (AppendUnique, as
/// go-iptables does): the chain, its ACCEPT/MASQUERADE rules and the POSTROUTING jumps.
/// The current rules are read only when the chain already exists.
fn ipt_setup(att: Attachment, addrs: &[IpNetwork]) -> Result<(), Error> {
    let this = Interface::with_addresses(addrs.iter().map(|a| a.ip()).collect());
    let _lock = save_restore::lock()?;
    for v in [IpFamily::V4, IpFamily::V6] {
        let mine: Vec<&IpNetwork> = addrs.iter().filter(|a| IpFamily::of(a.ip()) == v).collect();
        if mine.is_empty() {
            continue;
        }
        let op = format!("set up {} masquerade", v.tool());
        let tools = variants::default_tools(v).ok_or_else(|| missing_tool(&op, &format!("{}-restore", v.tool())))?;
        let mut table = Table::default();
        for chain in [iptables_chain(att), iptables_interface_chain(att)] {
            if variants::chain_locations(v, &chain)?.contains(&tools.variant) {
                table = save_restore::save_with(&tools.save, "nat")?;
                break;
            }
        }
        let IptChain { name: chain, comment } = IptChain::find(&table, att, &this);
        let mut script = Script::new("nat");
        if !table.has_chain(&chain) {
            script.new_chain(&chain);
        }
        let multicast = if v == IpFamily::V4 { "224.0.0.0/4" } else { "ff00::/8" };
        let mut added: Vec<(String, Vec<String>)> = Vec::new();
        for a in mine {
            let subnet = network_of(*a).to_string();
            let source = format!("{}/{}", a.ip(), v.host_prefix());
            let rules = [
                (chain.as_str(), ipt_spec(&["-d", &subnet], &comment, "ACCEPT")),
                (
                    chain.as_str(),
                    ipt_spec(&["!", "-d", multicast], &comment, "MASQUERADE"),
                ),
                ("POSTROUTING", ipt_spec(&["-s", &source], &comment, &chain)),
            ];
            for (target, spec) in rules {
                let rule = (target.to_string(), spec);
                if !table.has_rule(target, &rule.1) && !added.contains(&rule) {
                    script.append(target, &rule.1);
                    added.push(rule);
                }
            }
        }
        save_restore::restore_with(&tools.restore, &script).map_err(|e| err(op, e))?;
    }
    Ok(())
}

/// Removes the attachment's chain and the POSTROUTING jumps to it, in every variant that
/// has it: its own chain, or the shared one unless that is provably another interface's.
/// Nothing is run when no variant has either.
fn ipt_teardown(v: IpFamily, att: Attachment, this: &Interface) -> Result<(), Error> {
    let mut found = variants::chain_locations(v, &iptables_chain(att))?;
    for variant in variants::chain_locations(v, &iptables_interface_chain(att))? {
        if !found.contains(&variant) {
            found.push(variant);
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let _lock = save_restore::lock()?;
    let op = format!("tear down {} masquerade", v.tool());
    for variant in found {
        let tools = variants::needed_tools(v, variant, &op)?;
        let table = save_restore::save_with(&tools.save, "nat")?;
        let chain = IptChain::find(&table, att, this).name;
        if !table.has_chain(&chain) {
            continue; // a legacy nat table without this chain, or another interface's
        }
        let mut script = Script::new("nat");
        for spec in postrouting_jumps(&table, &chain) {
            script.delete("POSTROUTING", spec);
        }
        for spec in table.rules_of(&chain) {
            script.delete(&chain, spec);
        }
        script.delete_chain(&chain);
        save_restore::restore_with(&tools.restore, &script).map_err(|e| err(op.clone(), e))?;
    }
    Ok(())
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
        assert_eq!(IptChain::shared(ATT).comment, r#"name: "brnet" id: "ctrA""#);
    }

    /// The shared chain is the interface's whose address POSTROUTING sends there; a further
    /// interface gets its own chain, commented with its name.
    #[test]
    fn a_further_interface_has_its_own_chain() {
        let saved = "*nat\n:POSTROUTING ACCEPT [0:0]\n:CNI-cf7b292a3456547459e1c807 - [0:0]\n\
                     -A POSTROUTING -s 10.1.2.3/32 -m comment --comment \"name: \\\"brnet\\\" id: \\\"ctrA\\\"\" -j CNI-cf7b292a3456547459e1c807\n\
                     COMMIT\n";
        let t = Table::parse(saved);
        let shared = IptChain::shared(ATT);
        assert_eq!(
            sources(&t, &shared.name),
            vec!["10.1.2.3".parse::<std::net::IpAddr>().unwrap()]
        );
        let at = |ip: &str| Interface::with_addresses(vec![ip.parse().unwrap()]);
        assert_eq!(IptChain::find(&t, ATT, &at("10.1.2.3")), shared);
        let eth1 = Attachment { ifname: "eth1", ..ATT };
        let own = IptChain::find(&t, eth1, &at("10.1.2.4"));
        assert_eq!(own, IptChain::own(eth1));
        assert_eq!(own.name.len(), IPT_CHAIN_LEN);
        assert_ne!(own.name, shared.name);
        assert_eq!(own.comment, r#"name: "brnet" id: "ctrA" ifname: "eth1""#);
        // the first interface of a container takes the reference's chain
        assert_eq!(
            IptChain::find(&Table::default(), eth1, &at("10.1.2.4")),
            IptChain::shared(eth1)
        );
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
    fn without_either_backend_the_error_says_what_to_install() {
        assert_eq!(
            neither_backend(&"nf_tables: not supported", "iptables-restore").to_string(),
            "set up masquerade: ipMasq needs nftables or iptables; neither was found: this kernel \
             offers no nf_tables (nf_tables: not supported) and iptables-restore is not installed \
             (install the iptables package, or load nf_tables)"
        );
    }

    #[test]
    fn backend_names() {
        assert_eq!(backend(Some("iptables")), Ok(Backend::Iptables));
        assert_eq!(backend(Some("nftables")), Ok(Backend::Nftables));
        assert_eq!(backend(None), Ok(Backend::Auto));
        assert_eq!(backend(Some("pf")).unwrap_err().detail, "unknown ipmasq backend \"pf\"");
    }
}
