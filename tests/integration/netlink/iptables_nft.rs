//! iptables-nft's tables through the nf_tables layer (`shapes::xtables`) against the real
//! kernel, with this machine's iptables-nft 1.8.9 as the oracle: what the shape writes,
//! `iptables-save` prints exactly as the same rules made by `iptables -A`, and what
//! `iptables -A` made, the shape reads back in iptables' terms. Also the generation check
//! that makes a read-plan-commit atomic, as iptables-nft's own.
use crate::common;

use std::process::Command;

use cnibox::netlink::nftables::expr::xt_ctstate;
use cnibox::netlink::nftables::shapes::xtables::{self, Cond, Target, XtMatch, XtRule};
use cnibox::netlink::nftables::{Chain, Family, Nftables, Table, Transaction};

fn private_netns() -> Nftables {
    common::require_root();
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
    Nftables::current().unwrap()
}

fn run(argv: &[&str]) -> String {
    common::run_ok(Command::new(argv[0]).args(&argv[1..]))
}

/// `TOOL -w VERB CHAIN RULE`, the rule in `iptables-save`'s words.
fn run_rule(tool: &str, verb: &str, chain: &str, rule: &str) {
    let mut argv = vec![tool.to_string(), "-w".into(), verb.into(), chain.into()];
    argv.extend(cnibox::firewall_rules::iptables::save_restore::split_rule(rule));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    run(&argv);
}

/// The rules of `chain` as `iptables-save` prints them, without `-A CHAIN`.
fn saved(tool: &str, chain: &str) -> Vec<String> {
    let prefix = format!("-A {chain} ");
    run(&[tool, "-t", "filter"])
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        .collect()
}

fn cond<T>(value: T, negated: bool) -> Option<Cond<T>> {
    Some(Cond { value, negated })
}

/// Each rule as iptables' arguments and as the shape's words for it.
fn cases() -> Vec<(Family, &'static str, XtRule)> {
    let comment = |t: &str| XtMatch::Comment(t.into());
    vec![
        (
            Family::Ip,
            "-m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD",
            XtRule {
                matches: vec![comment("CNI firewall plugin rules")],
                target: Some(Target::Jump("CNI-FORWARD".into())),
                ..XtRule::default()
            },
        ),
        (
            Family::Ip,
            "-d 10.88.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
            XtRule {
                destination: cond("10.88.0.2/32".parse().unwrap(), false),
                matches: vec![XtMatch::CtState(xt_ctstate::RELATED | xt_ctstate::ESTABLISHED)],
                target: Some(Target::Accept),
                ..XtRule::default()
            },
        ),
        (
            Family::Ip,
            "-s 10.88.0.0/17 -i cni0 ! -o cni0 -m comment --comment x -j DROP",
            XtRule {
                source: cond("10.88.0.0/17".parse().unwrap(), false),
                in_iface: cond("cni0".into(), false),
                out_iface: cond("cni0".into(), true),
                matches: vec![comment("x")],
                target: Some(Target::Drop),
                ..XtRule::default()
            },
        ),
        (
            Family::Ip,
            "! -s 10.0.0.0/8 -o cni+ -m conntrack --ctstate INVALID,NEW -j RETURN",
            XtRule {
                source: cond("10.0.0.0/8".parse().unwrap(), true),
                out_iface: cond("cni+".into(), false),
                matches: vec![XtMatch::CtState(xt_ctstate::INVALID | xt_ctstate::NEW)],
                target: Some(Target::Return),
                ..XtRule::default()
            },
        ),
        (
            Family::Ip6,
            "-d fd00::2/128 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
            XtRule {
                destination: cond("fd00::2/128".parse().unwrap(), false),
                matches: vec![XtMatch::CtState(xt_ctstate::RELATED | xt_ctstate::ESTABLISHED)],
                target: Some(Target::Accept),
                ..XtRule::default()
            },
        ),
        (
            Family::Ip6,
            "-s fd00::/64 -j ACCEPT",
            XtRule {
                source: cond("fd00::/64".parse().unwrap(), false),
                target: Some(Target::Accept),
                ..XtRule::default()
            },
        ),
    ]
}

fn tool(family: Family) -> &'static str {
    if family == Family::Ip {
        "iptables"
    } else {
        "ip6tables"
    }
}

#[test]
fn the_shape_writes_what_iptables_writes_and_reads_what_it_wrote() {
    let nft = private_netns();
    for family in [Family::Ip, Family::Ip6] {
        let t = tool(family);
        run(&[t, "-w", "-N", "BY-IPTABLES"]);
        run(&[t, "-w", "-N", "CNI-FORWARD"]);
        for (f, args, _) in cases() {
            if f == family {
                run_rule(t, "-A", "BY-IPTABLES", args);
            }
        }
        // the shape reads them back, rule for rule
        let read = xtables::read(&nft, family, "filter").unwrap();
        let theirs: Vec<XtRule> = read
            .rules
            .iter()
            .filter(|r| r.chain == "BY-IPTABLES")
            .map(|r| r.rule.clone().expect("read"))
            .collect();
        let want: Vec<XtRule> = cases().into_iter().filter(|c| c.0 == family).map(|c| c.2).collect();
        assert_eq!(theirs, want);
        // and writes the same rules, which iptables prints alike
        let mut tx = Transaction::new();
        let mut w = xtables::Writer::new(&mut tx, family, "filter", &read);
        w.new_chain(&mut tx, "BY-CNIBOX");
        for r in &want {
            w.put_rule(&mut tx, "BY-CNIBOX", r, false);
        }
        nft.commit(tx).unwrap();
        let save = format!("{t}-save");
        assert_eq!(saved(&save, "BY-CNIBOX"), saved(&save, "BY-IPTABLES"));
        let expected: Vec<&str> = cases().iter().filter(|c| c.0 == family).map(|c| c.1).collect();
        assert_eq!(saved(&save, "BY-CNIBOX"), expected);
        // iptables deletes them by their words
        for args in expected {
            run_rule(t, "-D", "BY-CNIBOX", args);
        }
        assert!(saved(&save, "BY-CNIBOX").is_empty());
    }
}

#[test]
fn a_rule_with_more_than_the_shape_reads_is_not_taken_for_one() {
    let nft = private_netns();
    run(&[
        "iptables", "-w", "-A", "FORWARD", "-p", "tcp", "--dport", "22", "-j", "ACCEPT",
    ]);
    run(&[
        "iptables",
        "-w",
        "-A",
        "FORWARD",
        "-m",
        "addrtype",
        "--dst-type",
        "LOCAL",
        "-j",
        "ACCEPT",
    ]);
    run(&["iptables", "-w", "-A", "FORWARD", "-j", "LOG"]);
    // the same expressions as `-s 10.9.0.1/32 -j ACCEPT`, with nft's userdata comment
    run(&[
        "nft",
        "add rule ip filter FORWARD ip saddr 10.9.0.1 counter accept comment \"x\"",
    ]);
    let read = xtables::read(&nft, Family::Ip, "filter").unwrap();
    assert_eq!(read.rules.len(), 4);
    assert!(read.rules.iter().all(|r| r.rule.is_none()), "{:?}", read.rules);
    // `iptables -A FORWARD` made the built-in chain, with its policy
    assert!(read.chains.iter().any(|c| c.name == "FORWARD" && c.policy.is_some()));
}

/// A built-in chain is made on first use, as iptables-nft makes it, and an existing one
/// (with an administrator's DROP policy) is left as it is.
#[test]
fn a_builtin_chain_is_created_once_and_its_policy_kept() {
    let nft = private_netns();
    let accept = XtRule {
        source: cond("10.1.0.1/32".parse().unwrap(), false),
        target: Some(Target::Accept),
        ..XtRule::default()
    };
    let read = xtables::read(&nft, Family::Ip, "filter").unwrap();
    assert!(!read.exists);
    let mut tx = Transaction::new();
    xtables::Writer::new(&mut tx, Family::Ip, "filter", &read).put_rule(&mut tx, "FORWARD", &accept, true);
    nft.commit(tx).unwrap();
    let save = run(&["iptables-save", "-t", "filter"]);
    assert!(
        save.contains(":FORWARD ACCEPT") && save.contains("-A FORWARD -s 10.1.0.1/32 -j ACCEPT"),
        "{save}"
    );
    let listed = run(&["nft", "list", "chain", "ip", "filter", "FORWARD"]);
    assert!(
        listed.contains("type filter hook forward priority filter; policy accept;"),
        "{listed}"
    );
    run(&["iptables", "-w", "-P", "FORWARD", "DROP"]);
    let read = xtables::read(&nft, Family::Ip, "filter").unwrap();
    let mut tx = Transaction::new();
    xtables::Writer::new(&mut tx, Family::Ip, "filter", &read).put_rule(&mut tx, "FORWARD", &accept, false);
    nft.commit(tx).unwrap();
    let save = run(&["iptables-save", "-t", "filter"]);
    assert!(save.contains(":FORWARD DROP"), "{save}");
    assert_eq!(save.matches("-A FORWARD -s 10.1.0.1/32 -j ACCEPT").count(), 2, "{save}");
}

#[test]
fn a_batch_planned_on_an_old_generation_changes_nothing() {
    let nft = private_netns();
    let before = nft.generation().unwrap();
    let table = |name| Table {
        family: Family::Ip,
        name,
        comment: None,
    };
    // someone commits after the read
    let mut other = Transaction::new();
    other.add_table(&table("someone"));
    nft.commit(other).unwrap();
    assert_ne!(nft.generation().unwrap(), before);
    let mut planned = Transaction::new();
    planned
        .only_if_generation(before)
        .add_table(&table("planned"))
        .add_chain(&Chain {
            family: Family::Ip,
            table: "planned",
            name: "c",
            base: None,
            comment: None,
        });
    let e = nft.commit(planned).unwrap_err();
    assert!(e.is_generation_changed(), "{e}");
    assert!(!nft.has_table(Family::Ip, "planned").unwrap());
    // planned on the current generation, it applies
    let mut again = Transaction::new();
    again
        .only_if_generation(nft.generation().unwrap())
        .add_table(&table("planned"));
    nft.commit(again).unwrap();
    assert!(nft.has_table(Family::Ip, "planned").unwrap());
}
