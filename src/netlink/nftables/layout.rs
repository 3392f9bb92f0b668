//! A table's fixed part (its chains, and the entry rules it owns outright), declared only
//! where what the kernel holds is missing or differs.
//!
//! Why not re-send it on every ADD, as nft's `add` and the reference plugins do: re-adding
//! a chain that exists and rewriting entry rules that are already right both leave objects
//! the kernel frees after an RCU grace period, and the release of the netfilter socket (at
//! the latest the plugin's exit) waits for that work (`nft_rcv_nl_event` flushes the
//! namespace's nf_tables destroy work). That wait was 8-24 ms on a 2-core VM: more than
//! all the rest of a bridge ADD with ipMasq. A commit that only adds objects leaves
//! nothing to wait for. (Deleting a rule always leaves some. cnibox's own sockets no
//! longer wait when they close, see [`NfSocket`](crate::netlink::netfilter::NfSocket)'s
//! drop, but every other close in the namespace, nft's and iptables-nft's, still does.)
use super::{Chain, ChainInfo, Family, Nftables, Rule, RuleInfo, Set, Table, Transaction};
use crate::netlink::Result;

/// What a shape declares: the table, every chain and set it must have, and the chains
/// whose rules are the layout's alone (in order), rewritten as a whole when they differ.
pub struct Layout<'a> {
    pub table: Table<'a>,
    pub chains: Vec<Chain<'a>>,
    pub sets: Vec<Set<'a>>,
    pub entry_rules: Vec<(&'a str, Vec<Rule<'a>>)>,
}

/// A table as the kernel holds it now: its chains and rules, from [`Nftables::table_state`]
/// (every rule), or [`Nftables::layout_state`] (the layout's entry rules, and its sets).
pub struct TableState {
    pub chains: Vec<ChainInfo>,
    pub rules: Vec<RuleInfo>,
    /// The names of the table's sets; read only by [`Nftables::layout_state`] of a
    /// layout that has sets.
    pub sets: Vec<String>,
}

impl TableState {
    pub fn has_chain(&self, name: &str) -> bool {
        self.chains.iter().any(|c| c.name == name)
    }

    pub fn has_set(&self, name: &str) -> bool {
        self.sets.iter().any(|s| s == name)
    }

    /// Whether `chain` exists as declared: a base chain on the same hook and priority (and
    /// policy, where the declaration names one), or a regular chain.
    fn has_chain_as(&self, chain: &Chain) -> bool {
        self.chains.iter().any(|c| {
            c.name == chain.name
                && match chain.base {
                    None => c.hook.is_none(),
                    Some(b) => {
                        c.hook == Some((b.hook as u32, b.priority)) && b.policy.map_or(true, |p| c.policy == Some(p))
                    }
                }
        })
    }

    /// The rules of one chain, in order.
    pub fn rules_of<'s>(&'s self, chain: &'s str) -> impl Iterator<Item = &'s RuleInfo> + 's {
        self.rules.iter().filter(move |r| r.chain == chain)
    }

    /// (handle, comment) of every commented rule of `chain`.
    pub fn commented(&self, chain: &str) -> Vec<(u64, String)> {
        commented(self.rules_of(chain))
    }
}

/// (handle, comment) of every commented rule among `rules`: how shapes find an
/// attachment's rules.
pub fn commented<'r>(rules: impl IntoIterator<Item = &'r RuleInfo>) -> Vec<(u64, String)> {
    rules
        .into_iter()
        .filter_map(|r| Some((r.handle, r.comment.clone()?)))
        .collect()
}

impl Nftables {
    /// The chains and rules of `table` (nothing when it does not exist).
    pub fn table_state(&self, family: Family, table: &str) -> Result<TableState> {
        Ok(TableState {
            chains: self.chains(family, table)?,
            rules: self.table_rules(family, table)?,
            sets: vec![],
        })
    }

    /// What [`Transaction::declare`] needs of `layout`'s table and no more: its chains, its
    /// sets (when the layout has any) and the rules of the entry chains. Unlike
    /// [`table_state`](Self::table_state) it does not grow with the rules of other chains.
    pub fn layout_state(&self, layout: &Layout) -> Result<TableState> {
        let Table { family, name, .. } = layout.table;
        let chains = self.chains(family, name)?;
        let mut now = TableState {
            rules: vec![],
            sets: vec![],
            chains,
        };
        if now.chains.is_empty() {
            return Ok(now); // no table (a table without chains is declared again: harmless)
        }
        if !layout.sets.is_empty() {
            now.sets = self.sets(family, name)?;
        }
        for (chain, _) in &layout.entry_rules {
            if now.has_chain(chain) {
                now.rules.extend(self.rules(family, name, chain)?);
            }
        }
        Ok(now)
    }
}

impl Transaction {
    /// Adds what `layout` has and `now` lacks: the table and chains that are missing, and
    /// the entry rules of every chain whose rules are not exactly the layout's (after a
    /// flush of that chain, so two ADDs racing to write them leave one copy). Nothing when
    /// the layout is in place.
    pub fn declare(&mut self, layout: &Layout, now: &TableState) -> &mut Self {
        if now.chains.is_empty() {
            self.add_table(&layout.table);
        }
        // A chain that exists in another form is declared again: the kernel then updates
        // it or refuses (a regular chain where a base chain belongs: "File exists").
        for c in layout.chains.iter().filter(|c| !now.has_chain_as(c)) {
            self.add_chain(c);
        }
        for set in layout.sets.iter().filter(|s| !now.sets.iter().any(|n| n == s.name)) {
            self.add_set(set);
        }
        for (chain, rules) in &layout.entry_rules {
            let have: Vec<&RuleInfo> = now.rules_of(chain).collect();
            let same = have.len() == rules.len() && have.iter().zip(rules).all(|(h, r)| is_rule(h, r));
            if !same {
                self.flush_chain(layout.table.family, layout.table.name, chain);
                for r in rules {
                    self.add_rule(r);
                }
            }
        }
        self
    }
}

/// Whether a dumped rule is `rule`: the same expressions and comment.
fn is_rule(have: &RuleInfo, rule: &Rule) -> bool {
    have.comment.as_deref() == rule.comment && have.is_made_of(&rule.exprs)
}
