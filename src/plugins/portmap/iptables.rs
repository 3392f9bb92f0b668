//! The iptables backend: the reference 1.1.1 layout in the `nat` table, so a node switched
//! from the reference keeps working and either implementation's DEL removes the other's rules.
//!
//! ```text
//! PREROUTING, OUTPUT:     -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
//! POSTROUTING (first):    -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
//! CNI-HOSTPORT-MASQ:      -m mark --mark 0x2000/0x2000 -j MASQUERADE
//! CNI-HOSTPORT-SETMARK:   -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
//! CNI-HOSTPORT-DNAT:      -p tcp -m comment --comment "dnat name: \"NET\" id: \"ID\"" -m multiport --dports 8080,8081 [conditions] -j CNI-DN-<hash>
//! CNI-DN-<hash>:          per mapping: hairpin mark, localhost mark (IPv4), DNAT
//! ```
//!
//! The reference names the CNI-DN chain after network and container, so a container's
//! second interface on the same network would overwrite the first one's forwards. cnibox
//! keeps that chain for the first interface and gives each further one a chain of its own,
//! `CNI-DN-<hash(network/ID/ifname)>`, whose entry rules' comment ends in
//! ` ifname: "IFNAME"` (see [`shared_chain`]).
//!
//! Unlike the reference, which runs iptables once per check and once per change (a dozen
//! processes per family), each change is one `iptables-save -t nat` and one
//! `iptables-restore --noflush` per family ([`save_restore`](crate::firewall_rules::iptables::save_restore)), under
//! cnibox's xtables lock. Rules are written the way iptables-save prints them, so what is
//! read back compares word for word.
use super::config::{Conf, Protocol};
use super::{Attachment, Claim};
use crate::cni::netaddr::network_of;
use crate::cni::Error;
use crate::firewall_rules::iptables::save_restore::{self, quote, split_rule, Family, Script, Table};
use crate::firewall_rules::iptables::variants::{chain_locations, over_netlink};
use crate::firewall_rules::shared_chain::{self, Interface};
use crate::firewall_rules::tools::find_tool;
use crate::netlink::nftables::shapes::xtables::{self as xt, NatRule, NatTarget};
use crate::netlink::nftables::Nftables;
use crate::util::sha512;
use ipnetwork::IpNetwork;
use std::net::IpAddr;

pub const TOP_DNAT: &str = "CNI-HOSTPORT-DNAT";
pub const SET_MARK: &str = "CNI-HOSTPORT-SETMARK";
pub const MARK_MASQ: &str = "CNI-HOSTPORT-MASQ";
/// Created by versions before 0.7; torn down in case one of them did the ADD.
const OLD_TOP_SNAT: &str = "CNI-HOSTPORT-SNAT";
const DNAT_ENTRY: &str = "-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT";
const MASQ_ENTRY: &str = "-m comment --comment \"CNI portfwd requiring masquerade\" -j CNI-HOSTPORT-MASQ";
/// multiport takes at most 15 ports per rule.
const MULTIPORT_MAX: usize = 15;
/// iptables' comment limit.
const COMMENT_MAX: usize = 255;

/// `CNI-<prefix><sha512(key)>`, 28 characters (utils.MustFormatHashWithPrefix).
fn hashed_chain(prefix: &str, key: &str) -> String {
    let mut s = format!("CNI-{prefix}{}", sha512::hex(&sha512::digest(key.as_bytes())));
    s.truncate(28);
    s
}

/// `CNI-<prefix><sha512(network + container ID)>` (utils.MustFormatChainNameWithPrefix):
/// the reference's chain of an attachment, the container's first interface's in cnibox.
pub fn chain_name(prefix: &str, att: Attachment) -> String {
    hashed_chain(prefix, &format!("{}{}", att.network, att.container_id))
}

/// The CNI-DN chain of a further interface of the container on the network.
pub fn interface_chain(att: Attachment) -> String {
    hashed_chain(
        "DN-",
        &shared_chain::interface_key(att.network, att.container_id, att.ifname),
    )
}

fn dnat_chain(att: Attachment) -> String {
    chain_name("DN-", att)
}

/// The chain that holds an attachment's forwards, and the comment of the entry rules
/// jumping to it (the only place the layout names network and container).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    chain: String,
    comment: String,
}

impl Placement {
    /// The reference's chain, named after network and container.
    fn shared(att: Attachment) -> Placement {
        Placement {
            chain: dnat_chain(att),
            comment: trimmed(format!(r#"dnat name: "{}" id: "{}""#, att.network, att.container_id)),
        }
    }

    /// A further interface's own chain; its comment names the interface too, for GC.
    fn own(att: Attachment) -> Placement {
        Placement {
            chain: interface_chain(att),
            comment: trimmed(format!(
                r#"dnat name: "{}" id: "{}" ifname: "{}""#,
                att.network, att.container_id, att.ifname
            )),
        }
    }

    /// Where the attachment's forwards are in `t`: its own chain when it has one or when
    /// the shared chain is provably another interface's, else the shared chain.
    fn find(t: &Table, att: Attachment, iface: &Interface) -> Placement {
        let (own, shared) = (Placement::own(att), Placement::shared(att));
        match iface.uses_own_chain(t, &own.chain, &shared.chain, targets) {
            true => own,
            false => shared,
        }
    }
}

/// The container addresses the DNAT rules of `chain` forward to.
fn targets(t: &Table, chain: &str) -> Vec<IpAddr> {
    t.rules_of(chain)
        .filter_map(|r| arg(r, "--to-destination"))
        .filter_map(|to| {
            let (ip, _port) = to.rsplit_once(':')?;
            ip.trim_start_matches('[').trim_end_matches(']').parse().ok()
        })
        .collect()
}

/// iptables' comment limit, as the reference trims (trimComment).
fn trimmed(c: String) -> String {
    if c.len() <= COMMENT_MAX {
        return c;
    }
    let mut end = COMMENT_MAX - 2;
    while !c.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &c[..end])
}

fn mark(bit: u32) -> String {
    let v = 1u32 << bit;
    format!("{v:#x}/{v:#x}")
}

fn set_mark_rule(bit: u32) -> String {
    format!(
        "-m comment --comment \"CNI portfwd masquerade mark\" -j MARK --set-xmark {}",
        mark(bit)
    )
}

fn masq_rule(bit: u32) -> String {
    format!("-m mark --mark {} -j MASQUERADE", mark(bit))
}

fn host_prefix(ip: IpAddr) -> String {
    format!("{ip}/{}", Family::of(ip).host_prefix())
}

/// `ip:port`, brackets for IPv6.
fn ip_port(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

/// The rules of the attachment's CNI-DN chain for one container address, in order: for
/// each mapping of the family, the hairpin mark, the localhost mark (IPv4) and the DNAT.
fn dnat_rules(conf: &Conf, container: IpNetwork) -> Vec<String> {
    let v6 = container.is_ipv6();
    let set_mark = conf.external_set_mark_chain.as_deref().unwrap_or(SET_MARK);
    let mut rules = vec![];
    for m in conf.mappings.iter().filter(|m| m.applies_to(v6)) {
        let dst = m.dest().map(|d| format!("-d {} ", host_prefix(d))).unwrap_or_default();
        let proto = m.protocol.name();
        let base = format!("-p {proto} -m {proto} --dport {}", m.host_port);
        if conf.snat {
            // -s 0.0.0.0/0 is what iptables-save leaves out
            let hairpin = match conf.masq_all {
                true => String::new(),
                false => format!("-s {} ", network_of(container)),
            };
            rules.push(format!("{hairpin}{dst}{base} -j {}", quote(set_mark)));
            if !v6 && !conf.masq_all {
                rules.push(format!("-s 127.0.0.1/32 {dst}{base} -j {}", quote(set_mark)));
            }
        }
        rules.push(format!(
            "{dst}{base} -j DNAT --to-destination {}",
            ip_port(container.ip(), m.container_port)
        ));
    }
    rules
}

/// The entry rules in CNI-HOSTPORT-DNAT: per protocol (sorted), the host ports of every
/// mapping (of both families, as the reference lists them) in groups of 15.
fn entry_rules(conf: &Conf, place: &Placement, family: Family) -> Vec<String> {
    let mut protos: Vec<Protocol> = conf.mappings.iter().map(|m| m.protocol).collect();
    crate::util::sort::sort_by_key(&mut protos, |p| p.name());
    protos.dedup();
    let Placement { chain, comment } = place;
    let conditions: String = conf
        .conditions(family == Family::V6)
        .iter()
        .map(|w| format!(" {}", quote(w)))
        .collect();
    let mut rules = vec![];
    for proto in protos {
        let ports: Vec<String> = conf
            .mappings
            .iter()
            .filter(|m| m.protocol == proto)
            .map(|m| m.host_port.to_string())
            .collect();
        for group in ports.chunks(MULTIPORT_MAX) {
            rules.push(format!(
                "-p {} -m comment --comment {} -m multiport --dports {}{conditions} -j {chain}",
                proto.name(),
                quote(comment),
                group.join(",")
            ));
        }
    }
    rules
}

fn words(rule: &str) -> Vec<String> {
    split_rule(rule)
}

/// Rules of `chain` that jump to `target`.
fn jumps<'a>(t: &'a Table, chain: &'a str, target: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
    t.rules_of(chain)
        .filter(move |r| r.len() >= 2 && r[r.len() - 2] == "-j" && r[r.len() - 1] == target)
}

fn arg<'a>(rule: &'a [String], flag: &str) -> Option<&'a str> {
    rule.windows(2).find(|p| p[0] == flag).map(|p| p[1].as_str())
}

/// The rules of a saved table as the duplicate check reads them (the process path).
fn nat_rules_of(t: &Table) -> Vec<NatRule> {
    t.rules
        .iter()
        .map(|(chain, rule)| NatRule {
            chain: chain.clone(),
            protocol: arg(rule, "-p").and_then(Protocol::parse).map(Protocol::number),
            destination: arg(rule, "-d").and_then(|d| d.split('/').next()?.parse().ok()),
            dport: arg(rule, "--dport").and_then(|p| p.parse().ok()),
            comment: arg(rule, "--comment").map(String::from),
            target: match arg(rule, "-j") {
                None => NatTarget::None,
                Some("DNAT") => NatTarget::Dnat,
                Some(c) if rule.len() >= 2 && rule[rule.len() - 2] == "-j" => NatTarget::Jump(c.to_string()),
                Some(_) => NatTarget::Other,
            },
        })
        .collect()
}

/// The host ports forwarded by the CNI-DN chains among `rules`, for the duplicate check;
/// the owner is named by the comment of the entry rule jumping to the chain.
fn claims_of(rules: &[NatRule]) -> Vec<Claim> {
    let mut out = vec![];
    for r in rules {
        if !r.chain.starts_with("CNI-DN-") || r.target != NatTarget::Dnat {
            continue;
        }
        let Some(protocol) = r.protocol.and_then(Protocol::from_number) else {
            continue;
        };
        let Some(host_port) = r.dport else {
            continue;
        };
        let owner = rules
            .iter()
            .find(|e| e.chain == TOP_DNAT && e.target == NatTarget::Jump(r.chain.clone()))
            .and_then(|e| parse_comment(e.comment.as_deref()?));
        out.push(Claim {
            protocol,
            host_port,
            dest: r.destination,
            container_id: owner.as_ref().map(|o| o.container_id.clone()),
            owner: match owner {
                Some(o) => format!("container {} of network {}", o.container_id, o.network),
                None => format!("iptables chain {}", r.chain),
            },
        });
    }
    out
}

/// Whose chain an entry rule's comment says it jumps to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    network: String,
    container_id: String,
    /// Only a further interface's own chain names it.
    ifname: Option<String>,
}

fn parse_comment(c: &str) -> Option<Owner> {
    let rest = c.strip_prefix("dnat name: \"")?;
    let (network, rest) = rest.split_once("\" id: \"")?;
    let rest = rest.strip_suffix('"')?;
    // container IDs hold no quote: the first one ends the ID
    let (container_id, ifname) = match rest.split_once("\" ifname: \"") {
        Some((id, ifname)) => (id, Some(ifname.to_string())),
        None => (rest, None),
    };
    Some(Owner {
        network: network.to_string(),
        container_id: container_id.to_string(),
        ifname,
    })
}

fn which(family: Family) -> &'static str {
    match family {
        Family::V4 => "ipv4",
        Family::V6 => "ipv6",
    }
}

/// Whether one of `chains` may exist in `family`'s nat table, asked without running
/// iptables ([`chain_locations`]: iptables-nft's chains over netlink, a legacy nat table in
/// use). DEL, GC and the duplicate check skip the iptables tools when it says no.
fn may_have_any(family: Family, chains: &[&str]) -> bool {
    chains.iter().any(|c| {
        // cannot tell: ask iptables
        chain_locations(family, c).map_or(true, |found| !found.is_empty())
    })
}

/// The nat table, or None when the family's tools are missing or cannot read it (no
/// kernel support): nothing of ours can be there then (as the reference's
/// maybeGetIptables).
fn save_if_usable(family: Family) -> Option<Table> {
    let tool = match family {
        Family::V4 => "iptables-save",
        Family::V6 => "ip6tables-save",
    };
    find_tool(tool)?;
    save_restore::save(family, "nat").ok()
}

/// The nat table, required (ADD, CHECK): a missing or failing tool is an error naming it.
fn save_required(family: Family) -> Result<Table, Error> {
    save_restore::save(family, "nat").map_err(|e| Error::internal(format!("failed to open iptables: {e}")))
}

fn lock() -> Result<save_restore::Lock, Error> {
    save_restore::lock().map_err(|e| Error::internal(e.to_string()))
}

/// Create `chain` if `t` lacks it.
fn ensure_chain(t: &Table, chain: &str, s: &mut Script) {
    if !t.has_chain(chain) {
        s.new_chain(chain);
    }
}

/// Remove every rule of `entry` jumping to `chain`, the rules of `chain`, then `chain`.
fn remove_chain(t: &Table, chain: &str, entry: &str, s: &mut Script) {
    if !t.has_chain(chain) {
        return;
    }
    for r in jumps(t, entry, chain) {
        s.delete(entry, r);
    }
    for r in t.rules_of(chain) {
        s.delete(chain, r);
    }
    s.delete_chain(chain);
}

/// The host ports this family's table forwards (none without the tools).
pub fn claims(family: Family) -> Result<Vec<Claim>, Error> {
    if !may_have_any(family, &[TOP_DNAT]) {
        return Ok(vec![]);
    }
    // On an iptables-nft host the table is read over netlink: `iptables-save` is a process
    // of several milliseconds per ADD, paid on every node whose reference portmap (or
    // cnibox's iptables backend) left CNI-HOSTPORT-DNAT behind.
    if over_netlink(family) {
        let nft = Nftables::shared().map_err(|e| Error::internal(format!("failed to open iptables: {e}")))?;
        let rules = xt::nat_rules(&nft, family.nf_family())
            .map_err(|e| Error::internal(format!("failed to read {} table nat: {e}", family.tool())))?;
        return Ok(claims_of(&rules));
    }
    Ok(save_if_usable(family)
        .map(|t| claims_of(&nat_rules_of(&t)))
        .unwrap_or_default())
}

/// Set up forwarding to `container` (one family), replacing what the attachment had.
pub fn forward(conf: &Conf, att: Attachment, container: IpNetwork) -> Result<(), Error> {
    let family = Family::of(container.ip());
    let _lock = lock()?;
    let t = save_required(family)?;
    let mut s = Script::new("nat");
    // The marking chains first: the DNAT chain's rules jump to them.
    if conf.snat && conf.external_set_mark_chain.is_none() {
        let bit = conf.mark_masq_bit;
        ensure_chain(&t, SET_MARK, &mut s);
        let set_mark = words(&set_mark_rule(bit));
        if !t.has_rule(SET_MARK, &set_mark) {
            s.append(SET_MARK, &set_mark);
        }
        ensure_chain(&t, MARK_MASQ, &mut s);
        let masq = words(&masq_rule(bit));
        if !t.has_rule(MARK_MASQ, &masq) {
            s.append(MARK_MASQ, &masq);
        }
        // first in POSTROUTING, ahead of the bridge and ptp masquerade rules
        if !t.has_rule("POSTROUTING", &words(MASQ_ENTRY)) {
            s.insert_first("POSTROUTING", &words(MASQ_ENTRY));
        }
    }
    ensure_chain(&t, TOP_DNAT, &mut s);
    for entry in ["PREROUTING", "OUTPUT"] {
        if !t.has_rule(entry, &words(DNAT_ENTRY)) {
            s.append(entry, &words(DNAT_ENTRY));
        }
    }
    // The attachment's chain and entry rules are rewritten: what an earlier ADD left goes.
    let place = Placement::find(&t, att, &Interface::with_addresses(vec![container.ip()]));
    let chain = &place.chain;
    for r in jumps(&t, TOP_DNAT, chain) {
        s.delete(TOP_DNAT, r);
    }
    match t.has_chain(chain) {
        true => t.rules_of(chain).for_each(|r| s.delete(chain, r)),
        false => s.new_chain(chain),
    }
    for r in dnat_rules(conf, container) {
        s.append(chain, &words(&r));
    }
    for r in entry_rules(conf, &place, family) {
        s.append(TOP_DNAT, &words(&r));
    }
    save_restore::restore(family, &s).map_err(|e| Error::internal(format!("unable to setup DNAT: {e}")))
}

/// Verify the attachment's rules for `container` are all there.
pub fn check(conf: &Conf, att: Attachment, container: IpNetwork) -> Result<(), Error> {
    let family = Family::of(container.ip());
    let t = save_required(family)?;
    let place = Placement::find(&t, att, &Interface::with_addresses(vec![container.ip()]));
    let chain = &place.chain;
    let fail = |what: String| {
        Err(Error::internal(format!(
            "could not check {} dnat: {what}",
            which(family)
        )))
    };
    if !t.has_chain(chain) {
        return fail(format!("chain {chain} not found in iptables table nat"));
    }
    for r in dnat_rules(conf, container) {
        if !t.has_rule(chain, &words(&r)) {
            return fail(format!("rule {r} in chain {chain} not found in table nat"));
        }
    }
    // Conditions are the user's words, which iptables-save may spell and place differently
    // (an address condition goes before `-p`): an entry rule is found by its protocol,
    // comment and ports.
    for r in entry_rules(conf, &place, family) {
        let w = words(&r);
        let same = |x: &[String], flag: &str| arg(x, flag) == arg(&w, flag);
        let found = jumps(&t, TOP_DNAT, chain)
            .any(|x| x == &w[..] || ["-p", "--comment", "--dports"].iter().all(|f| same(x, f)));
        if !found {
            return fail(format!("rule {r} in chain {TOP_DNAT} not found in table nat"));
        }
    }
    for entry in ["PREROUTING", "OUTPUT"] {
        if !t.has_rule(entry, &words(DNAT_ENTRY)) {
            return fail(format!("rule {DNAT_ENTRY} in chain {entry} not found in table nat"));
        }
    }
    Ok(())
}

/// Run `plan` on the nat table of each family where one of `chains` may exist (missing
/// tools and tables are nothing to do), and apply what it planned, under the lock.
fn change_existing(
    chains: &[&str],
    plan: impl Fn(&Table, &mut Script),
    what: impl Fn(Family) -> String,
) -> Result<(), Error> {
    for family in [Family::V4, Family::V6] {
        if !may_have_any(family, chains) {
            continue;
        }
        let _lock = lock()?;
        let Some(t) = save_if_usable(family) else {
            continue;
        };
        let mut s = Script::new("nat");
        plan(&t, &mut s);
        save_restore::restore(family, &s).map_err(|e| Error::internal(format!("{}: {e}", what(family))))?;
    }
    Ok(())
}

/// Remove the attachment's chains and entry rules from both families: its own chain, or
/// the shared one unless that is provably another interface's. Missing tools, tables and
/// chains are not errors (DEL is idempotent).
pub fn teardown(att: Attachment, iface: &Interface) -> Result<(), Error> {
    change_existing(
        &[&dnat_chain(att), &interface_chain(att), &chain_name("SN-", att)],
        |t, s| {
            remove_chain(t, &Placement::find(t, att, iface).chain, TOP_DNAT, s);
            remove_chain(t, &chain_name("SN-", att), OLD_TOP_SNAT, s);
        },
        |family| format!("could not teardown {} dnat", which(family)),
    )
}

/// Remove the chains of `network`'s attachments whose container ID is not in `valid`:
/// the entry rules' comments say which network and container a chain belongs to.
pub fn gc(network: &str, valid: &[(String, String)]) -> Result<(), Error> {
    change_existing(
        &[TOP_DNAT],
        |t, s| gc_plan(t, s, network, valid),
        |_| "portmap GC".to_string(),
    )
}

/// A shared chain goes when no interface of its container is valid (it does not say which
/// interface it is), an interface's own chain when that interface is not.
fn gc_plan(t: &Table, s: &mut Script, network: &str, valid: &[(String, String)]) {
    let mut stale: Vec<String> = t
        .rules_of(TOP_DNAT)
        .filter_map(|r| {
            let o = parse_comment(arg(r, "--comment")?)?;
            let att = Attachment {
                network,
                container_id: &o.container_id,
                ifname: o.ifname.as_deref().unwrap_or_default(),
            };
            let (chain, alive) = match &o.ifname {
                None => (dnat_chain(att), valid.iter().any(|(cid, _)| *cid == o.container_id)),
                Some(i) => (
                    interface_chain(att),
                    valid.iter().any(|(cid, ifname)| *cid == o.container_id && ifname == i),
                ),
            };
            // a trimmed comment does not name the container: such a chain is left
            let ours = o.network == network && arg(r, "-j") == Some(chain.as_str());
            (ours && !alive).then_some(chain)
        })
        .collect();
    crate::util::sort::sort(&mut stale);
    stale.dedup();
    for chain in &stale {
        remove_chain(t, chain, TOP_DNAT, s);
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::{Backend, Conf, PortMapping};
    use super::*;

    const ATT: Attachment = Attachment {
        network: "mynet",
        container_id: "ctr1",
        ifname: "eth0",
    };

    fn conf(mappings: Vec<PortMapping>) -> Conf {
        Conf {
            backend: Backend::Iptables,
            snat: true,
            masq_all: false,
            mark_masq_bit: 13,
            external_set_mark_chain: None,
            conditions_v4: vec![],
            conditions_v6: vec![],
            nft_conditions_v4: Default::default(),
            nft_conditions_v6: Default::default(),
            mappings,
            container_v4: None,
            container_v6: None,
        }
    }

    fn pm(host: u16, cont: u16, p: Protocol, ip: Option<&str>) -> PortMapping {
        PortMapping {
            host_port: host,
            container_port: cont,
            protocol: p,
            host_ip: ip.map(|s| s.parse().unwrap()),
        }
    }

    fn sample() -> Conf {
        conf(vec![
            pm(8080, 80, Protocol::Tcp, None),
            pm(8081, 81, Protocol::Udp, Some("10.0.0.1")),
            pm(8443, 443, Protocol::Tcp, Some("fd00::1")),
        ])
    }

    /// What iptables-save printed after the reference 1.1.1 ADD of `sample()` for
    /// 10.0.0.2/24 and fd00::2/64 (network mynet, container ctr1).
    #[test]
    fn rules_are_the_reference_layout_as_iptables_save_prints_it() {
        let c = sample();
        assert_eq!(dnat_chain(ATT), "CNI-DN-5145007e2a8415ce07579");
        assert_eq!(
            dnat_rules(&c, "10.0.0.2/24".parse().unwrap()),
            vec![
                "-s 10.0.0.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
                "-s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
                "-p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.0.0.2:80",
                "-s 10.0.0.0/24 -d 10.0.0.1/32 -p udp -m udp --dport 8081 -j CNI-HOSTPORT-SETMARK",
                "-s 127.0.0.1/32 -d 10.0.0.1/32 -p udp -m udp --dport 8081 -j CNI-HOSTPORT-SETMARK",
                "-d 10.0.0.1/32 -p udp -m udp --dport 8081 -j DNAT --to-destination 10.0.0.2:81",
            ]
        );
        assert_eq!(
            dnat_rules(&c, "fd00::2/64".parse().unwrap()),
            vec![
                "-s fd00::/64 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
                "-p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00::2]:80",
                "-s fd00::/64 -d fd00::1/128 -p tcp -m tcp --dport 8443 -j CNI-HOSTPORT-SETMARK",
                "-d fd00::1/128 -p tcp -m tcp --dport 8443 -j DNAT --to-destination [fd00::2]:443",
            ]
        );
        assert_eq!(
            entry_rules(&c, &Placement::shared(ATT), Family::V4),
            vec![
                r#"-p tcp -m comment --comment "dnat name: \"mynet\" id: \"ctr1\"" -m multiport --dports 8080,8443 -j CNI-DN-5145007e2a8415ce07579"#,
                r#"-p udp -m comment --comment "dnat name: \"mynet\" id: \"ctr1\"" -m multiport --dports 8081 -j CNI-DN-5145007e2a8415ce07579"#,
            ]
        );
        assert_eq!(
            set_mark_rule(13),
            r#"-m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000"#
        );
        assert_eq!(masq_rule(0), "-m mark --mark 0x1/0x1 -j MASQUERADE");
    }

    #[test]
    fn multiport_groups_of_fifteen() {
        let c = conf((1..=16).map(|p| pm(p, 80, Protocol::Tcp, None)).collect());
        let e = entry_rules(&c, &Placement::shared(ATT), Family::V4);
        assert_eq!(e.len(), 2);
        assert!(e[0].contains("--dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 -j"));
        assert!(e[1].contains("--dports 16 -j"));
    }

    #[test]
    fn snat_off_external_chain_and_masq_all() {
        let mut c = conf(vec![pm(80, 8080, Protocol::Sctp, None)]);
        c.snat = false;
        assert_eq!(
            dnat_rules(&c, "10.1.0.5/16".parse().unwrap()),
            vec!["-p sctp -m sctp --dport 80 -j DNAT --to-destination 10.1.0.5:8080"]
        );
        c.snat = true;
        c.external_set_mark_chain = Some("KUBE-MARK-MASQ".into());
        c.masq_all = true;
        assert_eq!(
            dnat_rules(&c, "10.1.0.5/16".parse().unwrap())[0],
            "-p sctp -m sctp --dport 80 -j KUBE-MARK-MASQ"
        );
    }

    #[test]
    fn conditions_follow_the_ports_and_are_quoted() {
        let mut c = conf(vec![pm(80, 8080, Protocol::Tcp, None)]);
        c.conditions_v4 = vec!["-m".into(), "comment".into(), "--comment".into(), "a b".into()];
        assert!(entry_rules(&c, &Placement::shared(ATT), Family::V4)[0]
            .ends_with(r#"--dports 80 -m comment --comment "a b" -j CNI-DN-5145007e2a8415ce07579"#));
        assert!(!entry_rules(&c, &Placement::shared(ATT), Family::V6)[0].contains("a b"));
    }

    #[test]
    fn long_comments_are_trimmed_as_the_reference() {
        let long = "x".repeat(300);
        let c = Placement::shared(Attachment {
            network: "n",
            container_id: &long,
            ifname: "eth0",
        })
        .comment;
        assert_eq!(c.len(), 256);
        assert!(c.ends_with("..."));
    }

    const SAVED: &str = r#"# Generated by iptables-save v1.8.9 (nf_tables)
*nat
:PREROUTING ACCEPT [0:0]
:CNI-DN-5145007e2a8415ce07579 - [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A CNI-DN-5145007e2a8415ce07579 -s 10.0.0.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-5145007e2a8415ce07579 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.0.0.2:80
-A CNI-DN-5145007e2a8415ce07579 -d 10.0.0.1/32 -p udp -m udp --dport 8081 -j DNAT --to-destination 10.0.0.2:81
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"mynet\" id: \"ctr1\"" -m multiport --dports 8080,8443 -j CNI-DN-5145007e2a8415ce07579
COMMIT
"#;

    #[test]
    fn saved_tables_parse_into_claims_and_removals() {
        let t = Table::parse(SAVED);
        assert!(t.has_chain("CNI-HOSTPORT-DNAT"));
        assert!(t.has_rule("PREROUTING", &words(DNAT_ENTRY)));
        let claims = claims_of(&nat_rules_of(&t));
        assert_eq!(claims.len(), 2);
        assert_eq!(claims[0].protocol, Protocol::Tcp);
        assert_eq!(claims[0].host_port, 8080);
        assert_eq!(claims[0].dest, None);
        assert_eq!(claims[0].owner, "container ctr1 of network mynet");
        assert_eq!(claims[0].container_id.as_deref(), Some("ctr1"));
        assert_eq!(claims[1].dest, Some("10.0.0.1".parse().unwrap()));
        let mut s = Script::new("nat");
        remove_chain(&t, "CNI-DN-5145007e2a8415ce07579", TOP_DNAT, &mut s);
        let text = s.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7, "{text}");
        assert!(lines[1].starts_with("-D CNI-HOSTPORT-DNAT -p tcp -m comment"), "{text}");
        assert!(
            lines[2].starts_with("-D CNI-DN-5145007e2a8415ce07579 -s 10.0.0.0/24"),
            "{text}"
        );
        assert_eq!(lines[5], "-X CNI-DN-5145007e2a8415ce07579");
        assert_eq!(
            parse_comment(r#"dnat name: "mynet" id: "ctr1""#),
            Some(Owner {
                network: "mynet".into(),
                container_id: "ctr1".into(),
                ifname: None
            })
        );
    }

    #[test]
    fn rules_written_read_back_word_for_word() {
        let c = sample();
        let mut s = Script::new("nat");
        for r in entry_rules(&c, &Placement::shared(ATT), Family::V4) {
            s.append(TOP_DNAT, &words(&r));
        }
        let t = Table::parse(&s.text());
        for r in entry_rules(&c, &Placement::shared(ATT), Family::V4) {
            assert!(t.has_rule(TOP_DNAT, &words(&r)), "{r}");
        }
    }

    /// The second interface's chain: the reference's naming with the interface in the hash
    /// input, its comment naming the interface (read back for GC).
    #[test]
    fn a_further_interface_has_its_own_chain_and_comment() {
        let eth1 = Attachment { ifname: "eth1", ..ATT };
        let own = Placement::own(eth1);
        assert_eq!(own.chain, interface_chain(eth1));
        assert_ne!(own.chain, dnat_chain(eth1));
        assert!(own.chain.starts_with("CNI-DN-") && own.chain.len() == 28);
        assert_eq!(own.comment, r#"dnat name: "mynet" id: "ctr1" ifname: "eth1""#);
        assert_eq!(
            parse_comment(&own.comment),
            Some(Owner {
                network: "mynet".into(),
                container_id: "ctr1".into(),
                ifname: Some("eth1".into())
            })
        );
    }

    /// Whose the shared chain is follows the addresses its DNAT rules forward to.
    #[test]
    fn the_shared_chain_is_the_interface_whose_address_it_forwards_to() {
        let t = Table::parse(SAVED);
        assert_eq!(
            targets(&t, "CNI-DN-5145007e2a8415ce07579"),
            vec!["10.0.0.2".parse::<IpAddr>().unwrap(); 2]
        );
        let at = |ip: &str| Interface::with_addresses(vec![ip.parse().unwrap()]);
        assert_eq!(Placement::find(&t, ATT, &at("10.0.0.2")), Placement::shared(ATT));
        let eth1 = Attachment { ifname: "eth1", ..ATT };
        assert_eq!(Placement::find(&t, eth1, &at("10.0.0.3")), Placement::own(eth1));
        // no shared chain yet: the first interface takes it
        let empty = Table::default();
        assert_eq!(Placement::find(&empty, eth1, &at("10.0.0.3")), Placement::shared(eth1));
        let v6 = Table::parse("*nat\n:CNI-DN-x - [0:0]\n-A CNI-DN-x -p tcp -m tcp --dport 80 -j DNAT --to-destination [fd00::2]:80\nCOMMIT\n");
        assert_eq!(targets(&v6, "CNI-DN-x"), vec!["fd00::2".parse::<IpAddr>().unwrap()]);
    }
}
