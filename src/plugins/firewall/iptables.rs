//! The iptables backend: the reference's layout in the filter table, rule for rule, so a
//! node switched from the Go plugin keeps its rules and either implementation's DEL and
//! CHECK work on what the other made.
//!
//! ```text
//! -A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD   (inserted first)
//! -A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN   (first)
//! -A CNI-FORWARD -d IP/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT   (per address)
//! -A CNI-FORWARD -s IP/32 -j ACCEPT                                              (per address)
//! ```
//! `ingressPolicy` `same-bridge`/`isolated` adds, per bridge (kept on DEL, as the reference
//! does: other containers may still use the bridge):
//! ```text
//! -A FORWARD -j CNI-ISOLATION-STAGE-1          (inserted first, so before CNI-FORWARD)
//! -A CNI-ISOLATION-STAGE-1 -i BR ! -o BR -j CNI-ISOLATION-STAGE-2   (inserted first)
//! -A CNI-ISOLATION-STAGE-1 -i BR -o BR -j DROP                      (isolated only, first)
//! -A CNI-ISOLATION-STAGE-1 -j RETURN                                 (appended once)
//! -A CNI-ISOLATION-STAGE-2 -o BR -j DROP                             (inserted first)
//! -A CNI-ISOLATION-STAGE-2 -j RETURN                                 (appended once)
//! ```
//! each with a comment. The rules shared by every bridge carry "(ingressPolicy: same-bridge)"
//! as the reference 1.1.1 writes them, or "(ingressPolicy: same-bridge|isolated)" as later
//! references write them (and cnibox does for `isolated`, which 1.1.1 lacks); either
//! spelling counts as present, so neither implementation duplicates the other's rules.
//!
//! An ACCEPT in CNI-FORWARD ends the packet's walk through the filter table's FORWARD, so
//! it overrides a DROP policy of FORWARD and any DROP rule after the jump (Docker's
//! `-P FORWARD DROP`). It cannot override a DROP rule placed before the jump, nor a drop in
//! another netfilter table or base chain on the forward hook (an nftables table of its own).
use super::config::IngressPolicy;
use crate::cni::version::go_list;
use crate::firewall_rules::iptables::save_restore::{Family, Script, Table};
use std::net::IpAddr;

pub const TABLE: &str = "filter";
pub const FORWARD: &str = "FORWARD";
pub const PRIV_CHAIN: &str = "CNI-FORWARD";
pub const STAGE1: &str = "CNI-ISOLATION-STAGE-1";
pub const STAGE2: &str = "CNI-ISOLATION-STAGE-2";

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn with_comment(mut matches: Vec<String>, comment: &str, target: &str) -> Vec<String> {
    matches.extend(words(&["-m", "comment", "--comment", comment, "-j", target]));
    matches
}

/// `FORWARD → CNI-FORWARD`.
pub fn forward_jump() -> Vec<String> {
    with_comment(vec![], "CNI firewall plugin rules", PRIV_CHAIN)
}

/// `CNI-FORWARD → admin chain`.
pub fn admin_jump(admin_chain: &str) -> Vec<String> {
    with_comment(vec![], "CNI firewall plugin admin overrides", admin_chain)
}

/// The two accept rules of one container address (no comment, as the reference).
pub fn address_rules(ip: IpAddr) -> [Vec<String>; 2] {
    let host = format!("{ip}/{}", Family::of(ip).host_prefix());
    [
        words(&[
            "-d",
            &host,
            "-m",
            "conntrack",
            "--ctstate",
            "RELATED,ESTABLISHED",
            "-j",
            "ACCEPT",
        ]),
        words(&["-s", &host, "-j", "ACCEPT"]),
    ]
}

/// The comment of the isolation rules shared by every bridge, as written.
fn shared_comment(policy: IngressPolicy) -> &'static str {
    match policy {
        IngressPolicy::Isolated => "CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)",
        _ => "CNI firewall plugin rules (ingressPolicy: same-bridge)",
    }
}

/// Both spellings of a shared rule's comment (1.1.1's and later references').
const SHARED_COMMENTS: [&str; 2] = [
    "CNI firewall plugin rules (ingressPolicy: same-bridge)",
    "CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)",
];

fn policy_comment(policy: IngressPolicy) -> String {
    format!("CNI firewall plugin rules (ingressPolicy: {})", policy.name())
}

/// A rule with a shared comment, in every spelling that counts as present; the first is
/// the one written for `policy`.
fn shared_rule(matches: &[&str], target: &str, policy: IngressPolicy) -> Vec<Vec<String>> {
    let written = shared_comment(policy);
    let mut spellings = vec![with_comment(words(matches), written, target)];
    for c in SHARED_COMMENTS.iter().filter(|c| **c != written) {
        spellings.push(with_comment(words(matches), c, target));
    }
    spellings
}

fn has_any(t: &Table, chain: &str, spellings: &[Vec<String>]) -> bool {
    spellings.iter().any(|s| t.has_rule(chain, s))
}

/// What one ADD asks of one family.
pub struct Setup<'a> {
    pub admin_chain: &'a str,
    pub addresses: &'a [IpAddr],
    /// The bridge and the policy, when the policy is not `open`.
    pub isolation: Option<(&'a str, IngressPolicy)>,
}

/// The changes that make `t` hold everything `setup` needs, in the reference's order (its
/// `-I … 1` inserts included, so the resulting rule order is the reference's).
pub fn plan_add(t: &Table, setup: &Setup) -> Script {
    let mut s = Script::new(TABLE);
    if !setup.addresses.is_empty() {
        for chain in [PRIV_CHAIN, setup.admin_chain] {
            if !t.has_chain(chain) {
                s.new_chain(chain);
            }
        }
        if !t.has_rule(FORWARD, &forward_jump()) {
            s.insert_first(FORWARD, &forward_jump());
        }
        if !t.has_rule(PRIV_CHAIN, &admin_jump(setup.admin_chain)) {
            s.insert_first(PRIV_CHAIN, &admin_jump(setup.admin_chain));
        }
        for ip in setup.addresses {
            for rule in address_rules(*ip) {
                if !t.has_rule(PRIV_CHAIN, &rule) {
                    s.append(PRIV_CHAIN, &rule);
                }
            }
        }
    }
    if let Some((bridge, policy)) = setup.isolation {
        plan_isolation(t, &mut s, bridge, policy);
    }
    s
}

fn plan_isolation(t: &Table, s: &mut Script, bridge: &str, policy: IngressPolicy) {
    for chain in [STAGE1, STAGE2] {
        if !t.has_chain(chain) {
            s.new_chain(chain);
        }
    }
    let to_stage1 = shared_rule(&[], STAGE1, policy);
    if !has_any(t, FORWARD, &to_stage1) {
        s.insert_first(FORWARD, &to_stage1[0]);
    }
    let own = policy_comment(policy);
    let leave_bridge = with_comment(words(&["-i", bridge, "!", "-o", bridge]), &own, STAGE2);
    if !t.has_rule(STAGE1, &leave_bridge) {
        s.insert_first(STAGE1, &leave_bridge);
    }
    if policy == IngressPolicy::Isolated {
        let within = with_comment(words(&["-i", bridge, "-o", bridge]), &own, "DROP");
        if !t.has_rule(STAGE1, &within) {
            s.insert_first(STAGE1, &within);
        }
    }
    let ret = shared_rule(&[], "RETURN", policy);
    if !has_any(t, STAGE1, &ret) {
        s.append(STAGE1, &ret[0]);
    }
    let into_bridge = shared_rule(&["-o", bridge], "DROP", policy);
    if !has_any(t, STAGE2, &into_bridge) {
        s.insert_first(STAGE2, &into_bridge[0]);
    }
    if !has_any(t, STAGE2, &ret) {
        s.append(STAGE2, &ret[0]);
    }
}

/// Remove the address rules of `addresses` that are present (chains and jumps stay, shared).
pub fn plan_del(t: &Table, addresses: &[IpAddr]) -> Script {
    let mut s = Script::new(TABLE);
    for ip in addresses {
        for rule in address_rules(*ip) {
            if t.has_rule(PRIV_CHAIN, &rule) {
                s.delete(PRIV_CHAIN, &rule);
            }
        }
    }
    s
}

/// The reference's CHECK: the jumps, then every address rule; the messages are its own.
/// cnibox also checks the isolation rules of a non-open policy (the reference does not).
pub fn check(t: &Table, setup: &Setup) -> Result<(), String> {
    if setup.addresses.is_empty() {
        return Ok(());
    }
    if !t.has_rule(FORWARD, &forward_jump()) {
        return Err(format!(
            "expected {FORWARD} rule {} not found",
            go_list(&forward_jump())
        ));
    }
    let admin = admin_jump(setup.admin_chain);
    if !t.has_rule(PRIV_CHAIN, &admin) {
        return Err(format!("expected {PRIV_CHAIN} rule {} not found", go_list(&admin)));
    }
    for ip in setup.addresses {
        for rule in address_rules(*ip) {
            if !t.has_rule(PRIV_CHAIN, &rule) {
                return Err(format!("expected rule {} not found", go_list(&rule)));
            }
        }
    }
    if let Some((bridge, policy)) = setup.isolation {
        if !plan_add(
            t,
            &Setup {
                addresses: &[],
                ..*setup
            },
        )
        .is_empty()
        {
            return Err(format!(
                "expected isolation rules of bridge {bridge} (ingressPolicy: {}) not found",
                policy.name()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firewall_rules::iptables::save_restore::split_rule;

    /// What the reference 1.1.1 binary leaves after one ADD of 10.88.0.2 (iptables-save).
    const AFTER_REFERENCE_ADD: &str = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n\
        :CNI-ADMIN - [0:0]\n:CNI-FORWARD - [0:0]\n\
        -A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD\n\
        -A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN\n\
        -A CNI-FORWARD -d 10.88.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n\
        -A CNI-FORWARD -s 10.88.0.2/32 -j ACCEPT\nCOMMIT\n";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn setup<'a>(addresses: &'a [IpAddr], isolation: Option<(&'a str, IngressPolicy)>) -> Setup<'a> {
        Setup {
            admin_chain: "CNI-ADMIN",
            addresses,
            isolation,
        }
    }

    #[test]
    fn first_add_creates_the_reference_layout_in_one_script() {
        let a = [ip("10.88.0.2")];
        let s = plan_add(&Table::default(), &setup(&a, None));
        assert_eq!(
            s.text(),
            "*filter\n-N CNI-FORWARD\n-N CNI-ADMIN\n\
             -I FORWARD 1 -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD\n\
             -I CNI-FORWARD 1 -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN\n\
             -A CNI-FORWARD -d 10.88.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n\
             -A CNI-FORWARD -s 10.88.0.2/32 -j ACCEPT\nCOMMIT\n"
        );
    }

    #[test]
    fn nothing_to_do_on_the_reference_state_and_check_passes() {
        let t = Table::parse(AFTER_REFERENCE_ADD);
        let a = [ip("10.88.0.2")];
        assert!(plan_add(&t, &setup(&a, None)).is_empty());
        assert_eq!(check(&t, &setup(&a, None)), Ok(()));
        let d = plan_del(&t, &a);
        assert_eq!(d.text().lines().count(), 4);
    }

    #[test]
    fn check_messages_are_the_references() {
        let t = Table::parse(AFTER_REFERENCE_ADD);
        let other = [ip("10.88.0.3")];
        assert_eq!(
            check(&t, &setup(&other, None)).unwrap_err(),
            "expected rule [-d 10.88.0.3/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT] not found"
        );
        assert_eq!(
            check(&Table::default(), &setup(&other, None)).unwrap_err(),
            "expected FORWARD rule [-m comment --comment CNI firewall plugin rules -j CNI-FORWARD] not found"
        );
    }

    #[test]
    fn ipv6_addresses_are_host_routes() {
        let [d, s] = address_rules(ip("fd00::2"));
        assert_eq!(d[1], "fd00::2/128");
        assert_eq!(s, split_rule("-s fd00::2/128 -j ACCEPT"));
    }

    #[test]
    fn isolation_rules_of_either_reference_spelling_count_as_present() {
        // 1.1.1's same-bridge layout (iptables-save), then an isolated ADD of the same bridge
        let t = Table::parse(
            "*filter\n:FORWARD ACCEPT [0:0]\n:CNI-ISOLATION-STAGE-1 - [0:0]\n:CNI-ISOLATION-STAGE-2 - [0:0]\n\
             -A FORWARD -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j CNI-ISOLATION-STAGE-1\n\
             -A CNI-ISOLATION-STAGE-1 -i cni0 ! -o cni0 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j CNI-ISOLATION-STAGE-2\n\
             -A CNI-ISOLATION-STAGE-1 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j RETURN\n\
             -A CNI-ISOLATION-STAGE-2 -o cni0 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j DROP\n\
             -A CNI-ISOLATION-STAGE-2 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j RETURN\nCOMMIT\n",
        );
        assert!(plan_add(&t, &setup(&[], Some(("cni0", IngressPolicy::SameBridge)))).is_empty());
        let iso = plan_add(&t, &setup(&[], Some(("cni0", IngressPolicy::Isolated))));
        assert_eq!(
            iso.text(),
            "*filter\n-I CNI-ISOLATION-STAGE-1 1 -i cni0 ! -o cni0 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: isolated)\" -j CNI-ISOLATION-STAGE-2\n\
             -I CNI-ISOLATION-STAGE-1 1 -i cni0 -o cni0 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: isolated)\" -j DROP\nCOMMIT\n"
        );
    }
}
