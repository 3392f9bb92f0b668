//! iptables through `iptables-save` and `iptables-restore --noflush`: read one table of one
//! family, work out what is missing, and apply the whole change as one restore (one process
//! per family and change, atomic per table) instead of one `iptables` process per rule.
//!
//! Rules are compared in `iptables-save`'s canonical spelling (matches, then `-m comment`,
//! then `-j`), so the rule descriptions callers build must be written that way; the tests
//! of each caller check that what it writes reads back unchanged.
//!
//! `iptables-save`/`iptables-restore` are whatever the host's alternatives point at
//! (iptables-nft or iptables-legacy), as the reference's `iptables` calls are. Where that
//! is iptables-nft, callers that go through [`nft::change`](super::nft::change)
//! (the firewall plugin) run neither: the same [`Table`] is read and the same [`Script`]
//! applied over nf_tables netlink.
use crate::firewall_rules::error::{err, Error};
use crate::firewall_rules::tools::{find_tool, missing_tool};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};

/// Serialises cnibox's read-plan-restore cycles on a host, so two ADDs never both decide a
/// missing chain must be created (the second restore would fail) or both insert the same
/// shared rule. (`iptables-restore -w` takes the xtables lock only for its own write, and
/// only iptables-legacy's: iptables-nft takes none, its batches being conditional on the
/// ruleset's generation, as cnibox's netlink path's are; there the lock only spares
/// cnibox's own ADDs from refusing each other's plans.)
const LOCK_FILE: &str = "xtables.lock";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The nf_tables family iptables-nft keeps this version's tables in.
    pub fn nf_family(self) -> crate::netlink::nftables::Family {
        match self {
            Family::V4 => crate::netlink::nftables::Family::Ip,
            Family::V6 => crate::netlink::nftables::Family::Ip6,
        }
    }

    pub fn of(ip: IpAddr) -> Family {
        if ip.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }

    /// The command the reference would run (`iptables`, `ip6tables`), for messages.
    pub fn tool(self) -> &'static str {
        match self {
            Family::V4 => "iptables",
            Family::V6 => "ip6tables",
        }
    }

    /// The host prefix length of the family, as `iptables-save` prints host addresses.
    pub fn host_prefix(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
}

/// One table as `iptables-save` printed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Chain name → policy (`ACCEPT`/`DROP` for built-in chains, `-` for user chains).
    pub chains: BTreeMap<String, String>,
    /// (chain, rule arguments after `-A CHAIN`) in order.
    pub rules: Vec<(String, Vec<String>)>,
}

impl Table {
    /// Parse `iptables-save -t TABLE` output (only the first table in it).
    pub fn parse(text: &str) -> Table {
        let mut t = Table::default();
        let mut seen_table = false;
        for line in text.lines() {
            let line = line.trim_end();
            if line.starts_with('*') {
                if seen_table {
                    break;
                }
                seen_table = true;
            } else if let Some(decl) = line.strip_prefix(':') {
                let mut parts = decl.split_whitespace();
                if let Some(name) = parts.next() {
                    t.chains
                        .insert(name.to_string(), parts.next().unwrap_or("-").to_string());
                }
            } else if line.starts_with("-A ") {
                let mut words = split_rule(line);
                if words.len() >= 2 {
                    let spec = words.split_off(2);
                    t.rules.push((words.pop().expect("two words"), spec));
                }
            } else if line == "COMMIT" {
                break;
            }
        }
        t
    }

    pub fn has_chain(&self, chain: &str) -> bool {
        self.chains.contains_key(chain)
    }

    pub fn policy(&self, chain: &str) -> Option<&str> {
        self.chains.get(chain).map(String::as_str)
    }

    pub fn rules_of<'a>(&'a self, chain: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
        self.rules
            .iter()
            .filter(move |(c, _)| c == chain)
            .map(|(_, spec)| spec.as_slice())
    }

    pub fn has_rule(&self, chain: &str, spec: &[String]) -> bool {
        self.rules_of(chain).any(|r| r == spec)
    }
}

/// A change to one table, applied by [`restore`] in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    table: &'static str,
    ops: Vec<Op>,
}

/// One line of a [`Script`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    NewChain(String),
    DeleteChain(String),
    InsertFirst(String, Vec<String>),
    Append(String, Vec<String>),
    Delete(String, Vec<String>),
}

impl Script {
    pub fn new(table: &'static str) -> Script {
        Script { table, ops: vec![] }
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The lines, in order (what [`nft::change`](super::nft::change) turns into one
    /// nf_tables transaction on an iptables-nft host).
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    pub fn new_chain(&mut self, chain: &str) {
        self.ops.push(Op::NewChain(chain.to_string()));
    }

    /// `-X CHAIN` (it must be empty and unreferenced by then).
    pub fn delete_chain(&mut self, chain: &str) {
        self.ops.push(Op::DeleteChain(chain.to_string()));
    }

    /// Insert at the top of `chain` (`-I CHAIN 1`).
    pub fn insert_first(&mut self, chain: &str, spec: &[String]) {
        self.ops.push(Op::InsertFirst(chain.to_string(), spec.to_vec()));
    }

    pub fn append(&mut self, chain: &str, spec: &[String]) {
        self.ops.push(Op::Append(chain.to_string(), spec.to_vec()));
    }

    pub fn delete(&mut self, chain: &str, spec: &[String]) {
        self.ops.push(Op::Delete(chain.to_string(), spec.to_vec()));
    }

    /// The script that takes the table back to where this one found it (for a failed ADD
    /// of several families: the ones already changed are undone).
    pub fn undo(&self) -> Script {
        let ops = self
            .ops
            .iter()
            .rev()
            .map(|op| match op {
                Op::NewChain(c) => Op::DeleteChain(c.clone()),
                Op::DeleteChain(c) => Op::NewChain(c.clone()),
                Op::InsertFirst(c, s) | Op::Append(c, s) => Op::Delete(c.clone(), s.clone()),
                Op::Delete(c, s) => Op::Append(c.clone(), s.clone()),
            })
            .collect();
        Script { table: self.table, ops }
    }

    /// The restore input.
    pub fn text(&self) -> String {
        let mut s = format!("*{}\n", self.table);
        for op in &self.ops {
            let (head, spec) = match op {
                Op::NewChain(c) => (format!("-N {c}"), &[][..]),
                Op::DeleteChain(c) => (format!("-X {c}"), &[][..]),
                Op::InsertFirst(c, spec) => (format!("-I {c} 1"), &spec[..]),
                Op::Append(c, spec) => (format!("-A {c}"), &spec[..]),
                Op::Delete(c, spec) => (format!("-D {c}"), &spec[..]),
            };
            s.push_str(&head);
            for w in spec {
                s.push(' ');
                s.push_str(&quote(w));
            }
            s.push('\n');
        }
        s.push_str("COMMIT\n");
        s
    }
}

/// One argument as `iptables-restore` reads it: words with spaces or quotes are
/// double-quoted with backslash escapes. Callers never pass newlines (names are checked).
pub fn quote(w: &str) -> String {
    if !w.is_empty() && !w.contains(|c: char| c.is_whitespace() || c == '"' || c == '\\' || c == '\'') {
        return w.to_string();
    }
    let mut s = String::from("\"");
    for c in w.chars() {
        if c == '"' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

/// Split one line of `iptables-save` into arguments (double quotes with backslash escapes).
pub fn split_rule(line: &str) -> Vec<String> {
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

fn tool_path(name: &str) -> Result<std::path::PathBuf, Error> {
    find_tool(name).ok_or_else(|| missing_tool(&format!("run {name}"), name))
}

fn save_tool(family: Family) -> &'static str {
    match family {
        Family::V4 => "iptables-save",
        Family::V6 => "ip6tables-save",
    }
}

fn restore_tool(family: Family) -> &'static str {
    match family {
        Family::V4 => "iptables-restore",
        Family::V6 => "ip6tables-restore",
    }
}

/// `iptables-save -t TABLE` of one family, parsed.
pub fn save(family: Family, table: &str) -> Result<Table, Error> {
    save_with(&tool_path(save_tool(family))?, table)
}

/// A tool's file name, for messages (`iptables-restore`, whichever directory it is in).
fn tool_name(tool: &Path) -> String {
    tool.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `TOOL -t TABLE` with a given save tool (e.g. `iptables-legacy-save`), parsed.
pub fn save_with(tool: &Path, table: &str) -> Result<Table, Error> {
    let name = tool_name(tool);
    let out = Command::new(tool)
        .args(["-t", table])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| err(format!("run {name}"), e))?;
    if !out.status.success() {
        return Err(err(
            format!("{name} -t {table}"),
            String::from_utf8_lossy(&out.stderr).trim(),
        ));
    }
    Ok(Table::parse(&String::from_utf8_lossy(&out.stdout)))
}

/// Apply `script` with `iptables-restore --noflush -w` (nothing else in the table changes;
/// a failing line fails the whole script and changes nothing). An empty script runs nothing.
pub fn restore(family: Family, script: &Script) -> Result<(), Error> {
    if script.is_empty() {
        return Ok(());
    }
    restore_with(&tool_path(restore_tool(family))?, script)
}

/// [`restore`] with a given restore tool (e.g. `iptables-legacy-restore`).
pub fn restore_with(tool: &Path, script: &Script) -> Result<(), Error> {
    if script.is_empty() {
        return Ok(());
    }
    let name = tool_name(tool);
    let mut child = Command::new(tool)
        .args(["--noflush", "-w"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| err(format!("run {name}"), e))?;
    let text = script.text();
    let wrote = child.stdin.take().expect("piped").write_all(text.as_bytes());
    let out = child.wait_with_output().map_err(|e| err(format!("run {name}"), e))?;
    if !out.status.success() {
        let detail = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(err(
            format!("{name} --noflush"),
            format!("{detail} (input: {})", text.trim_end().replace('\n', "; ")),
        ));
    }
    wrote.map_err(|e| err(format!("write to {name}"), e))
}

/// The host-wide lock around one read-plan-restore cycle; released on drop.
pub type Lock = crate::firewall_rules::host_lock::Held;

pub fn lock() -> Result<Lock, Error> {
    crate::firewall_rules::host_lock::exclusive(LOCK_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        split_rule(s)
    }

    #[test]
    fn save_output_parses_into_chains_and_rules() {
        let text = "# Generated by iptables-save v1.8.9 (nf_tables)\n*filter\n:INPUT ACCEPT [0:0]\n\
                    :FORWARD DROP [0:0]\n:CNI-FORWARD - [0:0]\n\
                    -A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD\n\
                    -A CNI-FORWARD -s 10.88.0.2/32 -j ACCEPT\nCOMMIT\n# Completed\n";
        let t = Table::parse(text);
        assert_eq!(t.policy("FORWARD"), Some("DROP"));
        assert_eq!(t.policy("CNI-FORWARD"), Some("-"));
        assert!(!t.has_chain("OUTPUT"));
        assert!(t.has_rule(
            "FORWARD",
            &words("-m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD")
        ));
        assert!(t.has_rule("CNI-FORWARD", &words("-s 10.88.0.2/32 -j ACCEPT")));
        assert!(!t.has_rule("FORWARD", &words("-s 10.88.0.2/32 -j ACCEPT")));
    }

    #[test]
    fn script_quotes_what_restore_would_split() {
        let mut s = Script::new("filter");
        s.new_chain("CNI-X");
        s.insert_first("FORWARD", &words("-m comment --comment \"a \\\"b\\\"\" -j CNI-X"));
        s.delete("CNI-X", &words("-s 10.0.0.1/32 -j ACCEPT"));
        assert_eq!(
            s.text(),
            "*filter\n-N CNI-X\n-I FORWARD 1 -m comment --comment \"a \\\"b\\\"\" -j CNI-X\n\
             -D CNI-X -s 10.0.0.1/32 -j ACCEPT\nCOMMIT\n"
        );
        // what is written splits back into the same words
        let line = s.text().lines().nth(2).unwrap().to_string();
        assert_eq!(
            split_rule(&line)[3..],
            words("-m comment --comment \"a \\\"b\\\"\" -j CNI-X")[..]
        );
        assert!(Script::new("filter").is_empty());
        assert_eq!(
            s.undo().text(),
            "*filter\n-A CNI-X -s 10.0.0.1/32 -j ACCEPT\n-D FORWARD -m comment --comment \"a \\\"b\\\"\" -j CNI-X\n-X CNI-X\nCOMMIT\n"
        );
    }
}
