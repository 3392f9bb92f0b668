//! iptables on an iptables-nft host without a process: a table is read over netlink into
//! the same [`Table`] `iptables-save` would print, and a [`Script`] (the lines
//! `iptables-restore --noflush` would get) is applied as one nf_tables transaction, each
//! rule encoded as iptables-nft 1.8.9 encodes it
//! ([`shapes::xtables`](crate::netlink::nftables::shapes::xtables)). So the callers'
//! planning is the same for both paths, and what either path writes the other reads.
//!
//! Only the options cnibox's scripts use are translated (`-s`, `-d`, `-i`, `-o`, `!`,
//! `-m comment --comment`, `-m conntrack --ctstate`, `-j ACCEPT|DROP|RETURN|CHAIN`). A rule
//! someone else wrote with anything more is read as a line no script can match, so it is
//! never taken for one of ours and never deleted.
//!
//! iptables-legacy hosts keep the process path ([`super::save_restore`]):
//! legacy tables are not reachable over nf_tables netlink.
use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::save_restore::{Family, Op, Script, Table};
use crate::firewall_rules::error::{err, Error};
use crate::netlink::nftables::expr::xt_ctstate;
use crate::netlink::nftables::shapes::xtables::{self as shape, Cond, Target, XtMatch, XtRule, XtTable};
use crate::netlink::nftables::{Nftables, Policy, Transaction};

/// One table of one family as read, in both forms: words for planning, handles for
/// deleting.
pub struct Snapshot {
    family: Family,
    table: &'static str,
    read: XtTable,
    /// What `iptables-save -t TABLE` would print, parsed.
    pub saved: Table,
}

/// Reads `table` of `family` over netlink.
pub fn read(family: Family, table: &'static str) -> Result<Snapshot, Error> {
    // with no chain required, every read is a table
    read_where(family, table, None).map(|s| s.expect("a read without a required chain"))
}

/// [`read`], or None when `chain` is given and the table has no such chain (its rules then
/// go unread).
fn read_where(family: Family, table: &'static str, chain: Option<&str>) -> Result<Option<Snapshot>, Error> {
    let op = || format!("read {} table {table}", family.tool());
    let nft = Nftables::shared().map_err(|e| err(op(), e))?;
    let read = match chain {
        None => shape::read(&nft, family.nf_family(), table).map(Some),
        Some(chain) => shape::read_if_chain(&nft, family.nf_family(), table, chain),
    }
    .map_err(|e| err(op(), e))?;
    Ok(read.map(|r| snapshot(family, table, r)))
}

fn snapshot(family: Family, table: &'static str, read: XtTable) -> Snapshot {
    let mut saved = Table::default();
    for c in &read.chains {
        let policy = match c.policy {
            Some(Policy::Accept) => "ACCEPT",
            Some(Policy::Drop) => "DROP",
            None => "-",
        };
        saved.chains.insert(c.name.clone(), policy.to_string());
    }
    for r in &read.rules {
        let words = match &r.rule {
            Some(rule) => words(rule),
            // a word no rule spelled in iptables' syntax can have
            None => vec![format!("<rule {} not read by cnibox>", r.handle)],
        };
        saved.rules.push((r.chain.clone(), words));
    }
    Snapshot {
        family,
        table,
        read,
        saved,
    }
}

/// `script` as one transaction on the table `snap` was read from (all lines or none), which
/// the kernel applies only if nothing was committed since the read (else it is refused as
/// [`is_generation_changed`](crate::netlink::Error::is_generation_changed): read and plan
/// again). Empty for an empty script. A `-D` deletes the first rule that reads as its
/// words, as iptables does.
fn transaction(snap: &Snapshot, script: &Script) -> Result<Transaction, Error> {
    let mut tx = Transaction::new();
    if script.is_empty() {
        return Ok(tx);
    }
    let op = || format!("change {} table {}", snap.family.tool(), snap.table);
    let family = snap.family.nf_family();
    let mut w = shape::Writer::new(&mut tx, family, snap.table, &snap.read);
    let mut deleted = vec![];
    for line in script.ops() {
        match line {
            Op::NewChain(c) => w.new_chain(&mut tx, c),
            Op::DeleteChain(c) => w.delete_chain(&mut tx, c),
            Op::InsertFirst(c, spec) | Op::Append(c, spec) => {
                let first = matches!(line, Op::InsertFirst(..));
                w.put_rule(&mut tx, c, &rule(spec).map_err(|e| err(op(), e))?, first)
            }
            Op::Delete(c, spec) => {
                let found = snap
                    .read
                    .rules
                    .iter()
                    .zip(&snap.saved.rules)
                    .find(|(r, (chain, words))| chain == c && words == spec && !deleted.contains(&r.handle));
                let Some((r, _)) = found else {
                    return Err(err(op(), format!("-D {c} {}: no such rule", spec.join(" "))));
                };
                deleted.push(r.handle);
                w.delete_rule(&mut tx, c, r.handle);
            }
        }
    }
    Ok(tx)
}

/// How often a change is read and planned again when the ruleset keeps changing under it
/// (each attempt is a few requests; iptables-nft retries without a bound).
const ATTEMPTS: usize = 50;

/// Reads `table` of `family`, plans the change on what `iptables-save` would print, and
/// applies it atomically: on an iptables-nft host one nf_tables transaction, read and
/// planned again if anything was committed in between; on an iptables-legacy host one
/// `iptables-restore --noflush` after one `iptables-save`. Returns the script applied.
pub fn change(family: Family, table: &'static str, plan: impl Fn(&Table) -> Script) -> Result<Script, Error> {
    if !super::variants::over_netlink(family) {
        return save_plan_restore(family, table, plan);
    }
    let done = change_over_netlink(family, table, None, plan)?;
    // with no chain required, every read is a table
    Ok(done.expect("a read without a required chain"))
}

/// [`change`] where the chain `chain` exists, and nothing (Ok(None)) where it provably does
/// not (DEL: nothing was set up). On an iptables-nft host the read that plans the change
/// decides, in the same dump of the chains; on an iptables-legacy host the kernel's list of
/// the tables in use ([`chain_locations_in`](super::variants::chain_locations_in)), so no
/// process runs where nothing can be.
pub fn change_where_chain(
    family: Family,
    table: &'static str,
    chain: &str,
    plan: impl Fn(&Table) -> Script,
) -> Result<Option<Script>, Error> {
    if super::variants::over_netlink(family) {
        return change_over_netlink(family, table, Some(chain), plan);
    }
    // a failed look is no proof: read with iptables-save then
    let may_exist = super::variants::chain_locations_in(family, table, chain).map_or(true, |found| !found.is_empty());
    if !may_exist {
        return Ok(None);
    }
    save_plan_restore(family, table, plan).map(Some)
}

fn save_plan_restore(family: Family, table: &'static str, plan: impl Fn(&Table) -> Script) -> Result<Script, Error> {
    let script = plan(&super::save_restore::save(family, table)?);
    super::save_restore::restore(family, &script).map(|_| script)
}

/// Read, plan and apply until no commit came in between; None when `chain` is given and
/// the table lacks it.
fn change_over_netlink(
    family: Family,
    table: &'static str,
    chain: Option<&str>,
    plan: impl Fn(&Table) -> Script,
) -> Result<Option<Script>, Error> {
    let op = || format!("change {} table {table}", family.tool());
    let nft = Nftables::shared().map_err(|e| err(op(), e))?;
    let mut planned = None;
    nft.commit_planned(
        ATTEMPTS,
        |_| {
            planned = None;
            let Some(snap) = read_where(family, table, chain)? else {
                return Ok(Transaction::new());
            };
            let script = plan(&snap.saved);
            let tx = transaction(&snap, &script)?;
            planned = Some(script);
            Ok(tx)
        },
        |e| match e.is_generation_changed() {
            true => err(op(), format!("the ruleset changed during each of {ATTEMPTS} attempts")),
            false => err(op(), e),
        },
    )?;
    Ok(planned)
}

/// One table of the host's iptables as read the way its `iptables` reads it: over netlink
/// on an iptables-nft host, with `iptables-save` on an iptables-legacy one (see
/// [`over_netlink`](super::variants::over_netlink)). For reading only (CHECK); changes go
/// through [`change`].
pub enum HostTable {
    Netlink(Snapshot),
    Process(Family, Table),
}

impl HostTable {
    /// Reads `table` of `family`.
    pub fn read(family: Family, table: &'static str) -> Result<HostTable, Error> {
        if super::variants::over_netlink(family) {
            read(family, table).map(HostTable::Netlink)
        } else {
            super::save_restore::save(family, table).map(|t| HostTable::Process(family, t))
        }
    }

    /// The table as `iptables-save` prints it.
    pub fn saved(&self) -> &Table {
        match self {
            HostTable::Netlink(s) => &s.saved,
            HostTable::Process(_, t) => t,
        }
    }
}

/// A rule's words in `iptables-save`'s order: `-s`, `-d`, `-i`, `-o`, the matches, `-j`.
pub fn words(r: &XtRule) -> Vec<String> {
    let mut w: Vec<String> = vec![];
    let mut cond = |opt: &str, negated: bool, value: String| {
        if negated {
            w.push("!".into());
        }
        w.push(opt.into());
        w.push(value);
    };
    for (opt, c) in [("-s", &r.source), ("-d", &r.destination)] {
        if let Some(c) = c {
            cond(opt, c.negated, format!("{}/{}", c.value.network(), c.value.prefix()));
        }
    }
    for (opt, c) in [("-i", &r.in_iface), ("-o", &r.out_iface)] {
        if let Some(c) = c {
            cond(opt, c.negated, c.value.clone());
        }
    }
    for m in &r.matches {
        match m {
            XtMatch::Comment(text) => w.extend(["-m", "comment", "--comment", text].map(String::from)),
            XtMatch::CtState(states) => {
                let names: Vec<&str> = xt_ctstate::NAMES
                    .iter()
                    .filter(|(bit, _)| states & bit != 0)
                    .map(|(_, n)| *n)
                    .collect();
                w.extend(["-m", "conntrack", "--ctstate"].map(String::from));
                w.push(names.join(","));
            }
        }
    }
    if let Some(t) = &r.target {
        w.push("-j".into());
        w.push(match t {
            Target::Accept => "ACCEPT".into(),
            Target::Drop => "DROP".into(),
            Target::Return => "RETURN".into(),
            Target::Jump(c) => c.clone(),
        });
    }
    w
}

/// Target extensions iptables has (names that are not chains to jump to).
const TARGET_EXTENSIONS: &[&str] = &[
    "AUDIT",
    "CHECKSUM",
    "CONNMARK",
    "CT",
    "DNAT",
    "LOG",
    "MARK",
    "MASQUERADE",
    "NFLOG",
    "NFQUEUE",
    "NOTRACK",
    "REDIRECT",
    "REJECT",
    "SNAT",
    "TCPMSS",
    "TRACE",
];

/// The rule a script line's words say; an error names what is not translated (a caller
/// writing an option this module does not know is a bug, caught by its tests).
pub fn rule(spec: &[String]) -> Result<XtRule, String> {
    let mut r = XtRule::default();
    let mut it = spec.iter().map(String::as_str).peekable();
    let unknown = |w: &str| format!("iptables option {w:?} is not translated to nf_tables");
    while let Some(word) = it.next() {
        let negated = word == "!";
        let opt = if negated {
            it.next().ok_or("a lone \"!\"")?
        } else {
            word
        };
        let mut value = || it.next().map(str::to_string).ok_or(format!("{opt} without a value"));
        match opt {
            "-s" | "-d" => {
                let v = value()?;
                let net: IpNetwork = match v.parse() {
                    Ok(n) => n,
                    Err(_) => IpNetwork::from(v.parse::<IpAddr>().map_err(|_| format!("bad address {v:?}"))?),
                };
                let c = Some(Cond { value: net, negated });
                if opt == "-s" {
                    r.source = c;
                } else {
                    r.destination = c;
                }
            }
            "-i" | "-o" => {
                let c = Some(Cond {
                    value: value()?,
                    negated,
                });
                if opt == "-i" {
                    r.in_iface = c;
                } else {
                    r.out_iface = c;
                }
            }
            "-m" if !negated => match (value()?.as_str(), it.next(), it.next()) {
                ("comment", Some("--comment"), Some(text)) => r.matches.push(XtMatch::Comment(text.into())),
                ("conntrack", Some("--ctstate"), Some(states)) => {
                    let mut bits = 0;
                    for s in states.split(',') {
                        let (bit, _) = xt_ctstate::NAMES
                            .iter()
                            .find(|(_, n)| *n == s)
                            .ok_or(format!("conntrack state {s:?} is not translated"))?;
                        bits |= bit;
                    }
                    r.matches.push(XtMatch::CtState(bits));
                }
                (m, _, _) => return Err(unknown(&format!("-m {m}"))),
            },
            "-j" if !negated => {
                r.target = Some(match value()?.as_str() {
                    "ACCEPT" => Target::Accept,
                    "DROP" => Target::Drop,
                    "RETURN" => Target::Return,
                    // a chain (any name but a target extension's: those are upper case)
                    c if !c.is_empty() && !TARGET_EXTENSIONS.contains(&c) => Target::Jump(c.into()),
                    t => return Err(unknown(&format!("-j {t}"))),
                })
            }
            o => return Err(unknown(o)),
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firewall_rules::iptables::save_restore::split_rule;

    #[test]
    fn the_firewalls_rules_translate_and_read_back_in_save_order() {
        for line in [
            "-m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD",
            "-d 10.88.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
            "-s 10.88.0.2/32 -j ACCEPT",
            "-s fd00::2/128 -j ACCEPT",
            "-i cni0 ! -o cni0 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j CNI-ISOLATION-STAGE-2",
            "-i cni0 -o cni0 -m comment --comment x -j DROP",
            "-m comment --comment y -j RETURN",
            "-o cni+ -j DROP",
            "! -s 10.0.0.0/8 -m conntrack --ctstate INVALID,NEW",
        ] {
            let spec = split_rule(line);
            let r = rule(&spec).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(words(&r), spec, "{line}");
        }
    }

    #[test]
    fn options_that_are_not_translated_are_named() {
        for (line, what) in [
            ("-p tcp -j ACCEPT", "\"-p\""),
            ("-m addrtype --dst-type LOCAL -j ACCEPT", "\"-m addrtype\""),
            ("-j MASQUERADE", "\"-j MASQUERADE\""),
            ("-m conntrack --ctstate DNAT", "\"DNAT\""),
        ] {
            let e = rule(&split_rule(line)).unwrap_err();
            assert!(e.contains(what), "{line}: {e}");
        }
    }
}
