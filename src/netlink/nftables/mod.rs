//! nf_tables over netlink: tables, chains and rules, in atomic transactions, without the
//! `nft` binary.
//!
//! An [`Nftables`] handle holds one [`NfSocket`] bound to one network namespace. Changes
//! are collected in a [`Transaction`] and committed as one nfnetlink batch: the kernel
//! applies all of it or none of it, and every message is ACKed, so a failure names the
//! message that failed (`add rule inet cni_plugins_masquerade masq_checks: …`). Reads are
//! dumps: [`Nftables::rules`] gives each rule's handle, comment and verdict, which is what
//! DEL, CHECK and GC need to find an attachment's rules and delete them by handle.
//!
//! Everything is encoded the way nft 1.x encodes it (expressions in [`expr`], comments as
//! libnftnl's `NFTNL_UDATA_*_COMMENT` userdata), so `nft list ruleset` and `nft -j list
//! ruleset` show rules made here exactly as if nft had made them, and the nft binary, the
//! Go plugins (through knftables) and cnibox delete each other's rules.
//!
//! # Rule shapes: how a plugin gets a new kind of rule
//!
//! Plugins describe rules in their own words and never build expressions. The translation
//! of those words into tables, chains and expressions is a *shape*, and shapes live here,
//! in [`shapes`], one file per user (`shapes/masquerade.rs` for ipMasq,
//! `shapes/spoofcheck.rs` for macspoofchk). To add one (say, portmap's DNAT):
//!
//! 1. Write down the rule as nft text and look at what nft sends: `nft --debug=netlink
//!    -f rules.nft` in a scratch namespace (`unshare -n`) prints the expressions.
//! 2. Add `shapes/<user>.rs` with the layout's names (table, chains, comment format) and
//!    one function per sentence of the plugin's words, e.g.
//!    `masquerade(tx, source, subnet, comment)`, composing the matchers of [`expr`]
//!    (`addr`, `ifname`, `l4proto`, `th_dport`, `nat`, `ct_state`, …) into a [`Rule`] and
//!    pushing it onto the [`Transaction`]. If nft encodes something no matcher covers, add
//!    the matcher to [`expr`] (with the debug output it reproduces), not to the shape.
//! 3. Give the shape its fixed part as a [`Layout`] (table, chains, entry rules) and its
//!    readers (rules by comment prefix) on top of [`Nftables::table_state`] /
//!    [`Nftables::rules`]. A plugin declares the layout with [`Transaction::declare`],
//!    which sends only what the kernel lacks (see `layout.rs` for why that matters).
//! 4. Test it against the kernel in a private namespace and compare with the same rules
//!    loaded through `nft -f` (`tests/integration/netlink/nftables.rs` has the pattern).
//!
//! The plugin then reads as its steps: open the handle, start a transaction, call the
//! shape's sentences, commit.
pub mod expr;
mod layout;
mod objects;
pub mod shapes;
mod wire;

pub use expr::{Expr, Verdict};
pub use layout::{commented, Layout, TableState};
pub use objects::{
    priority, BaseChain, Chain, ChainInfo, ChainType, Family, Hook, Policy, Rule, RuleInfo, Set, SetKey, Table,
};

use super::netfilter::{msg_type, Batch, NfSocket, NFNL_SUBSYS_NFTABLES};
use super::wire::{NLM_F_APPEND, NLM_F_CREATE, NLM_F_DUMP, NLM_F_ECHO};
use super::Result;
use crate::netns::Netns;
use wire::*;

/// nf_tables in one network namespace.
pub struct Nftables {
    sock: NfSocket,
}

thread_local! {
    /// [`Nftables::shared`]'s socket and the inode of the namespace it was opened in.
    static SHARED: std::cell::RefCell<Option<(u64, std::rc::Rc<Nftables>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Closes the thread's [`Nftables::shared`] socket (once its last user has dropped it).
/// Why not leave it to the process's exit: the exit's close is the kernel's usual one,
/// which waits out the namespace's pending nf_tables destroy work (an RCU grace period
/// after every DEL); a dropped [`NfSocket`] does not (see its `Drop`).
pub fn close_shared() {
    let shared = SHARED.with(|cell| cell.borrow_mut().take());
    drop(shared);
}

impl Nftables {
    /// nf_tables of the calling thread's current namespace.
    pub fn current() -> Result<Nftables> {
        Ok(Nftables {
            sock: NfSocket::current()?,
        })
    }

    /// nf_tables of the calling thread's current namespace, through one socket per thread
    /// and namespace that serves every firewall step of the call (a chain run in-process
    /// makes one socket, not one per plugin and step). It stays open until
    /// [`close_shared`], which the applet table calls when the applet is done, or until the
    /// thread moves to another namespace.
    pub fn shared() -> Result<std::rc::Rc<Nftables>> {
        use std::os::unix::fs::MetadataExt;
        // The namespace's identity: a thread that moved to another namespace gets a new socket.
        let ns = std::fs::metadata("/proc/thread-self/ns/net")
            .map(|m| m.ino())
            .unwrap_or(0);
        SHARED.with(|cell| {
            let mut cell = cell.borrow_mut();
            match &*cell {
                Some((ino, nft)) if *ino == ns && ns != 0 => Ok(nft.clone()),
                _ => {
                    let nft = std::rc::Rc::new(Nftables::current()?);
                    *cell = Some((ns, nft.clone()));
                    Ok(nft)
                }
            }
        })
    }

    /// nf_tables of `netns` (the socket is created inside it).
    pub fn open(netns: &Netns) -> Result<Nftables> {
        Ok(Nftables {
            sock: NfSocket::open(netns)?,
        })
    }

    /// The socket, for requests of other netfilter subsystems in the same namespace.
    pub fn socket(&self) -> &NfSocket {
        &self.sock
    }

    /// Applies the transaction atomically: every change, or none.
    pub fn commit(&self, tx: Transaction) -> Result<()> {
        self.commit_echoed(tx).map(drop)
    }

    /// The same, returning the rules added with [`Transaction::add_rule_echoed`] as the
    /// kernel committed them (with their handles).
    pub fn commit_echoed(&self, tx: Transaction) -> Result<Vec<RuleInfo>> {
        let echoed = self.sock.commit(tx.batch)?;
        Ok(echoed
            .iter()
            .filter(|m| m.kind == msg_type(NFNL_SUBSYS_NFTABLES, NFT_MSG_NEWRULE))
            .filter_map(|m| objects::decode_rule(&m.attrs))
            .collect())
    }

    /// Reads, plans and commits a change: `plan` reads what it needs and returns the
    /// transaction (empty: nothing to do). While the kernel refuses the commit because the
    /// ruleset changed since the read ([`Error::is_stale_plan`](crate::netlink::Error::is_stale_plan)),
    /// it reads and plans again, up to `attempts` times. A failed plan is returned as it
    /// is; a failed commit, or the last refusal when every attempt was refused, through
    /// `commit_error`.
    pub fn commit_planned<E>(
        &self,
        attempts: usize,
        plan: impl FnMut(&Nftables) -> std::result::Result<Transaction, E>,
        commit_error: impl Fn(crate::netlink::Error) -> E,
    ) -> std::result::Result<(), E> {
        self.commit_planned_echoed(attempts, plan, commit_error).map(drop)
    }

    /// [`commit_planned`](Self::commit_planned), returning what
    /// [`commit_echoed`](Self::commit_echoed) returns.
    pub fn commit_planned_echoed<E>(
        &self,
        attempts: usize,
        mut plan: impl FnMut(&Nftables) -> std::result::Result<Transaction, E>,
        commit_error: impl Fn(crate::netlink::Error) -> E,
    ) -> std::result::Result<Vec<RuleInfo>, E> {
        let mut refused = None;
        for _ in 0..attempts {
            let tx = plan(self)?;
            if tx.is_empty() {
                return Ok(vec![]);
            }
            match self.commit_echoed(tx) {
                Ok(echoed) => return Ok(echoed),
                Err(e) if e.is_stale_plan() => refused = Some(e),
                Err(e) => return Err(commit_error(e)),
            }
        }
        Err(commit_error(refused.expect("at least one attempt")))
    }

    /// The ruleset's generation: it changes with every commit in the namespace (by anyone:
    /// nft, iptables-nft, another plugin). Read before reading what a change is planned
    /// on, and given to [`Transaction::only_if_generation`].
    pub fn generation(&self) -> Result<u32> {
        let msgs = self.sock.request(
            "get generation",
            "nf_tables",
            msg_type(NFNL_SUBSYS_NFTABLES, NFT_MSG_GETGEN),
            0,
            0,
            0,
            &[],
        )?;
        Ok(msgs
            .iter()
            .find_map(|m| crate::netlink::wire::find(&m.attrs, NFTA_GEN_ID).and_then(crate::netlink::netfilter::be32))
            .unwrap_or(0))
    }

    /// Whether the table exists.
    pub fn has_table(&self, family: Family, name: &str) -> Result<bool> {
        let mut a = crate::netlink::netfilter::Attrs::new();
        a.string(NFTA_TABLE_NAME, name);
        let object = format!("{family} {name}");
        match self.sock.request(
            "get table",
            &object,
            msg_type(NFNL_SUBSYS_NFTABLES, NFT_MSG_GETTABLE),
            0,
            family as u8,
            0,
            a.as_bytes(),
        ) {
            Ok(m) => Ok(m
                .iter()
                .any(|m| objects::decode_table_name(&m.attrs).as_deref() == Some(name))),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The chains of a table (none when the table does not exist).
    pub fn chains(&self, family: Family, table: &str) -> Result<Vec<ChainInfo>> {
        Ok(self
            .dump_chains(family, Some(table))?
            .into_iter()
            .filter(|c| c.table == table)
            .collect())
    }

    /// The chains of every table of `family` (to see what else sits on a hook).
    pub fn all_chains(&self, family: Family) -> Result<Vec<ChainInfo>> {
        self.dump_chains(family, None)
    }

    fn dump_chains(&self, family: Family, table: Option<&str>) -> Result<Vec<ChainInfo>> {
        let mut a = crate::netlink::netfilter::Attrs::new();
        if let Some(table) = table {
            a.string(NFTA_CHAIN_TABLE, table);
        }
        let msgs = self.sock.request(
            "list chains",
            &format!("{family} {}", table.unwrap_or("*")),
            msg_type(NFNL_SUBSYS_NFTABLES, NFT_MSG_GETCHAIN),
            NLM_F_DUMP,
            family as u8,
            0,
            a.as_bytes(),
        )?;
        Ok(msgs
            .iter()
            .filter(|m| m.family == family as u8)
            .filter_map(|m| objects::decode_chain(&m.attrs))
            .collect())
    }

    /// The rules of a chain in order, with handles and comments (none when the table or
    /// the chain does not exist).
    pub fn rules(&self, family: Family, table: &str, chain: &str) -> Result<Vec<RuleInfo>> {
        Ok(self
            .dump_rules(family, table, Some(chain))?
            .into_iter()
            .filter(|r| r.chain == chain)
            .collect())
    }

    /// The rules of every chain of a table, chain by chain (none without the table).
    pub fn table_rules(&self, family: Family, table: &str) -> Result<Vec<RuleInfo>> {
        self.dump_rules(family, table, None)
    }

    /// The names of a table's sets (none without the table).
    pub fn sets(&self, family: Family, table: &str) -> Result<Vec<String>> {
        let mut a = crate::netlink::netfilter::Attrs::new();
        a.string(NFTA_SET_TABLE, table);
        let msgs = self.dump("list sets", format!("{family} {table}"), NFT_MSG_GETSET, family, &a)?;
        Ok(msgs.iter().filter_map(|m| objects::decode_set_name(&m.attrs)).collect())
    }

    /// The element `key` of a set, with its data (empty in a set without data): one lookup
    /// in the set, whatever its size. None when the table, the set or the element does not
    /// exist.
    pub fn element(&self, family: Family, table: &str, set: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let a = objects::element_attrs(table, set, key, None);
        match self.sock.request(
            "get element",
            &format!("{family} {table} {set}"),
            msg_type(NFNL_SUBSYS_NFTABLES, NFT_MSG_GETSETELEM),
            0,
            family as u8,
            0,
            a.as_bytes(),
        ) {
            Ok(msgs) => Ok(msgs
                .iter()
                .flat_map(|m| objects::decode_elements(&m.attrs))
                .find(|(k, _)| k == key)
                .map(|(_, data)| data)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every key of a set (none without the table or the set).
    pub fn elements(&self, family: Family, table: &str, set: &str) -> Result<Vec<Vec<u8>>> {
        let a = objects::element_location(table, set);
        let msgs = self.dump(
            "list elements",
            format!("{family} {table} {set}"),
            NFT_MSG_GETSETELEM,
            family,
            &a,
        )?;
        Ok(msgs
            .iter()
            .flat_map(|m| objects::decode_elements(&m.attrs))
            .map(|(k, _)| k)
            .collect())
    }

    /// A dump of `family`'s objects of one kind, filtered by `attrs`; nothing when what it
    /// is filtered by (the table, the chain, the set) does not exist.
    fn dump(
        &self,
        op: &str,
        object: String,
        msg: u8,
        family: Family,
        attrs: &crate::netlink::netfilter::Attrs,
    ) -> Result<Vec<crate::netlink::netfilter::NfMessage>> {
        let msgs = self.sock.request(
            op,
            &object,
            msg_type(NFNL_SUBSYS_NFTABLES, msg),
            NLM_F_DUMP,
            family as u8,
            0,
            attrs.as_bytes(),
        );
        match msgs {
            Err(e) if e.is_not_found() => Ok(vec![]),
            Err(e) => Err(e),
            Ok(msgs) => Ok(msgs.into_iter().filter(|m| m.family == family as u8).collect()),
        }
    }

    fn dump_rules(&self, family: Family, table: &str, chain: Option<&str>) -> Result<Vec<RuleInfo>> {
        let a = match chain {
            Some(chain) => objects::rule_location(table, chain),
            None => objects::table_location(table),
        };
        let object = format!("{family} {table} {}", chain.unwrap_or("*"));
        let msgs = self.dump("list rules", object, NFT_MSG_GETRULE, family, &a)?;
        Ok(msgs.iter().filter_map(|m| objects::decode_rule(&m.attrs)).collect())
    }
}

/// Changes to apply together. Each add is "add" in nft's sense: an existing table or chain
/// is left as it is (with its rules). Re-adding what exists is correct but not free (see
/// [`Transaction::declare`]).
pub struct Transaction {
    batch: Batch,
}

impl Default for Transaction {
    fn default() -> Self {
        Transaction::new()
    }
}

impl Transaction {
    pub fn new() -> Transaction {
        Transaction {
            batch: Batch::new(NFNL_SUBSYS_NFTABLES),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// Apply the transaction only if the ruleset is still at `generation` (from
    /// [`Nftables::generation`], read before the state the changes were planned on);
    /// otherwise nothing is applied and the commit fails with
    /// [`is_generation_changed`](crate::netlink::Error::is_generation_changed). iptables-nft
    /// makes its changes the same way, instead of taking a lock.
    pub fn only_if_generation(&mut self, generation: u32) -> &mut Self {
        self.batch.only_if_generation(generation);
        self
    }

    pub fn len(&self) -> usize {
        self.batch.len()
    }

    fn push(&mut self, op: &str, object: String, msg: u8, flags: u16, family: Family, attrs: Vec<u8>) {
        self.batch.push(
            op,
            object,
            msg_type(NFNL_SUBSYS_NFTABLES, msg),
            flags,
            family as u8,
            attrs,
        );
    }

    /// `add table` (kept if it exists).
    pub fn add_table(&mut self, t: &Table) -> &mut Self {
        let attrs = objects::table_attrs(t).into_bytes();
        self.push(
            "add table",
            format!("{} {}", t.family, t.name),
            NFT_MSG_NEWTABLE,
            NLM_F_CREATE,
            t.family,
            attrs,
        );
        self
    }

    /// `delete table` with everything in it.
    pub fn delete_table(&mut self, family: Family, name: &str) -> &mut Self {
        let mut a = crate::netlink::netfilter::Attrs::new();
        a.string(NFTA_TABLE_NAME, name);
        self.push(
            "delete table",
            format!("{family} {name}"),
            NFT_MSG_DELTABLE,
            0,
            family,
            a.into_bytes(),
        );
        self
    }

    /// `add chain` (kept, with its rules, if it exists).
    pub fn add_chain(&mut self, c: &Chain) -> &mut Self {
        let attrs = objects::chain_attrs(c).into_bytes();
        let object = format!("{} {} {}", c.family, c.table, c.name);
        self.push("add chain", object, NFT_MSG_NEWCHAIN, NLM_F_CREATE, c.family, attrs);
        self
    }

    /// `flush chain`: delete all of its rules.
    pub fn flush_chain(&mut self, family: Family, table: &str, chain: &str) -> &mut Self {
        let attrs = objects::rule_location(table, chain).into_bytes();
        self.push(
            "flush chain",
            format!("{family} {table} {chain}"),
            NFT_MSG_DELRULE,
            0,
            family,
            attrs,
        );
        self
    }

    /// `delete chain` (it must be empty and unreferenced by then).
    pub fn delete_chain(&mut self, family: Family, table: &str, chain: &str) -> &mut Self {
        let mut a = crate::netlink::netfilter::Attrs::new();
        a.string(NFTA_CHAIN_TABLE, table).string(NFTA_CHAIN_NAME, chain);
        self.push(
            "delete chain",
            format!("{family} {table} {chain}"),
            NFT_MSG_DELCHAIN,
            0,
            family,
            a.into_bytes(),
        );
        self
    }

    /// `add set` (kept, with its elements, if it exists).
    pub fn add_set(&mut self, set: &Set) -> &mut Self {
        let attrs = objects::set_attrs(set).into_bytes();
        let object = format!("{} {} {}", set.family, set.table, set.name);
        self.push("add set", object, NFT_MSG_NEWSET, NLM_F_CREATE, set.family, attrs);
        self
    }

    /// `add element`, with `data` in a map (nothing changes if the set holds the key already).
    pub fn add_element(
        &mut self,
        family: Family,
        table: &str,
        set: &str,
        key: &[u8],
        data: Option<&[u8]>,
    ) -> &mut Self {
        let attrs = objects::element_attrs(table, set, key, data).into_bytes();
        let object = format!("{family} {table} {set}");
        self.push("add element", object, NFT_MSG_NEWSETELEM, NLM_F_CREATE, family, attrs);
        self
    }

    /// `delete element` (the set must hold it).
    pub fn delete_element(&mut self, family: Family, table: &str, set: &str, key: &[u8]) -> &mut Self {
        let attrs = objects::element_attrs(table, set, key, None).into_bytes();
        let object = format!("{family} {table} {set}");
        self.push("delete element", object, NFT_MSG_DELSETELEM, 0, family, attrs);
        self
    }

    /// `add rule`: appended at the end of its chain.
    pub fn add_rule(&mut self, r: &Rule) -> &mut Self {
        self.append_rule(r, None)
    }

    /// `add rule` with cnibox's tag in the rule's userdata, after its comment: listed by
    /// nft exactly like [`add_rule`](Self::add_rule)'s, and read back as
    /// [`RuleInfo::tag`].
    pub fn add_rule_tagged(&mut self, r: &Rule, tag: &str) -> &mut Self {
        self.append_rule(r, Some(tag))
    }

    /// `add rule`, echoed back by the kernel at the commit with its handle (see
    /// [`Nftables::commit_echoed`]).
    pub fn add_rule_echoed(&mut self, r: &Rule) -> &mut Self {
        self.push_rule(r, None, NLM_F_ECHO)
    }

    fn append_rule(&mut self, r: &Rule, tag: Option<&str>) -> &mut Self {
        self.push_rule(r, tag, 0)
    }

    fn push_rule(&mut self, r: &Rule, tag: Option<&str>, flags: u16) -> &mut Self {
        let attrs = objects::rule_attrs_tagged(r, None, tag).into_bytes();
        let object = format!("{} {} {}", r.family, r.table, r.chain);
        self.push(
            "add rule",
            object,
            NFT_MSG_NEWRULE,
            NLM_F_CREATE | NLM_F_APPEND | flags,
            r.family,
            attrs,
        );
        self
    }

    /// `insert rule`: put at the start of its chain.
    pub fn insert_rule(&mut self, r: &Rule) -> &mut Self {
        let attrs = objects::rule_attrs(r, None).into_bytes();
        let object = format!("{} {} {}", r.family, r.table, r.chain);
        self.push("insert rule", object, NFT_MSG_NEWRULE, NLM_F_CREATE, r.family, attrs);
        self
    }

    /// `delete rule … handle H`.
    pub fn delete_rule(&mut self, family: Family, table: &str, chain: &str, handle: u64) -> &mut Self {
        let mut a = objects::rule_location(table, chain);
        a.be64(NFTA_RULE_HANDLE, handle);
        let object = format!("{family} {table} {chain} handle {handle}");
        self.push("delete rule", object, NFT_MSG_DELRULE, 0, family, a.into_bytes());
        self
    }
}
