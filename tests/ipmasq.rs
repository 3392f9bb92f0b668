//! Masquerade rules in a private network namespace, for both backends.
mod common;

use cnibox::plugins::ipmasq::{self, Attachment, Backend};
use ipnetwork::IpNetwork;
use std::process::Command;

/// Move this test's thread into a fresh network namespace (its child processes follow).
fn private_netns() {
    common::require_root();
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
}

fn sh(cmd: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn masq_rules() -> Vec<String> {
    sh("nft list chain inet cni_plugins_masquerade masq_checks 2>/dev/null")
        .lines()
        .filter(|l| l.contains("masquerade comment"))
        .map(|l| l.trim().to_string())
        .collect()
}

const A: Attachment = Attachment {
    network: "net1",
    ifname: "eth0",
    container_id: "ctr-a",
};
const B: Attachment = Attachment {
    network: "net1",
    ifname: "eth0",
    container_id: "ctr-b",
};

fn nets(s: &[&str]) -> Vec<IpNetwork> {
    s.iter().map(|a| a.parse().unwrap()).collect()
}

#[test]
fn nftables_setup_is_idempotent_and_teardown_needs_no_addresses() {
    private_netns();
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24", "2001:db8::3/64"])).unwrap();
    let rules = masq_rules();
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert!(
        rules[0].starts_with("ip saddr 10.1.2.3 ip daddr != 10.1.2.0/24 masquerade"),
        "{rules:?}"
    );
    assert!(
        rules[1].starts_with("ip6 saddr 2001:db8::3 ip6 daddr != 2001:db8::/64 masquerade"),
        "{rules:?}"
    );
    let post = sh("nft list chain inet cni_plugins_masquerade postrouting");
    assert!(post.contains("type nat hook postrouting priority srcnat"), "{post}");
    assert!(
        post.contains("ip daddr 224.0.0.0/4 return") && post.contains("goto masq_checks"),
        "{post}"
    );

    // A second ADD of the same attachment replaces its rules instead of adding more.
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.4/24"])).unwrap();
    let rules = masq_rules();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert!(rules[0].contains("10.1.2.4"));

    ipmasq::setup(Backend::Nftables, B, &nets(&["10.1.2.5/24"])).unwrap();
    assert_eq!(masq_rules().len(), 2);
    // postrouting keeps exactly its three rules however many attachments there are
    assert_eq!(
        sh("nft list chain inet cni_plugins_masquerade postrouting")
            .matches("return")
            .count(),
        2
    );

    ipmasq::teardown(A).unwrap();
    let rules = masq_rules();
    assert_eq!(rules.len(), 1);
    assert!(rules[0].contains("id: ctr-b"), "{rules:?}");
    ipmasq::teardown(A).unwrap(); // again: nothing left to do
    ipmasq::teardown(B).unwrap();
    assert!(masq_rules().is_empty());
}

#[test]
fn nftables_gc_keeps_only_valid_attachments_of_the_network() {
    private_netns();
    let other = Attachment { network: "net2", ..A };
    for att in [A, B, other] {
        ipmasq::setup(Backend::Nftables, att, &nets(&["10.9.0.2/16"])).unwrap();
    }
    ipmasq::gc("net1", &[("ctr-b".into(), "eth0".into())]).unwrap();
    let rules = masq_rules();
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert!(rules.iter().any(|r| r.contains("net: net1, if: eth0, id: ctr-b")));
    assert!(
        rules.iter().any(|r| r.contains("net: net2")),
        "another network is untouched"
    );
    ipmasq::gc("net1", &[]).unwrap();
    assert_eq!(masq_rules().len(), 1);
}

#[test]
fn teardown_without_any_rules_or_tables_succeeds() {
    private_netns();
    ipmasq::teardown(A).unwrap();
    ipmasq::gc("net1", &[]).unwrap();
}

#[test]
fn iptables_layout_matches_the_reference_and_tears_down_by_chain() {
    private_netns();
    ipmasq::setup(Backend::Iptables, A, &nets(&["10.1.2.3/24"])).unwrap();
    ipmasq::setup(Backend::Iptables, A, &nets(&["10.1.2.3/24"])).unwrap(); // AppendUnique
    let chain = ipmasq::iptables_chain(A);
    let post = sh("iptables -w -t nat -S POSTROUTING");
    assert_eq!(post.matches(&format!("-j {chain}")).count(), 1, "{post}");
    assert!(
        post.contains(&format!(
            "-A POSTROUTING -s 10.1.2.3/32 -m comment --comment \"name: \\\"net1\\\" id: \\\"ctr-a\\\"\" -j {chain}"
        )),
        "{post}"
    );
    let rules = sh(&format!("iptables -w -t nat -S {chain}"));
    assert!(
        rules.contains("-d 10.1.2.0/24") && rules.contains("-j ACCEPT"),
        "{rules}"
    );
    assert!(
        rules.contains("! -d 224.0.0.0/4") && rules.contains("-j MASQUERADE"),
        "{rules}"
    );
    assert_eq!(rules.lines().count(), 3, "chain declaration plus two rules: {rules}");

    ipmasq::setup(Backend::Iptables, A, &nets(&["2001:db8::3/64"])).unwrap();
    assert!(sh("ip6tables -w -t nat -S POSTROUTING").contains(&chain));

    ipmasq::teardown(A).unwrap();
    assert!(!sh("iptables -w -t nat -S").contains(&chain));
    assert!(!sh("ip6tables -w -t nat -S").contains(&chain));
    ipmasq::teardown(A).unwrap();
}
