//! Masquerade rules in a private network namespace, for both backends.
use crate::common;

use cnibox::firewall_rules::ipmasq::{self, Attachment, Backend};
use cnibox::firewall_rules::shared_chain::Interface;
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

/// A DEL's teardown that knows no addresses (no prevResult, no netns).
fn teardown(att: Attachment) -> Result<(), ipmasq::Error> {
    ipmasq::teardown(att, &Interface::for_del(None, "", att.ifname))
}

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

    teardown(A).unwrap();
    let rules = masq_rules();
    assert_eq!(rules.len(), 1);
    assert!(rules[0].contains("id: ctr-b"), "{rules:?}");
    teardown(A).unwrap(); // again: nothing left to do
    teardown(B).unwrap();
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
    teardown(A).unwrap();
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

    teardown(A).unwrap();
    assert!(!sh("iptables -w -t nat -S").contains(&chain));
    assert!(!sh("ip6tables -w -t nat -S").contains(&chain));
    teardown(A).unwrap();
}

// ------------------------------------------------ nftables over netlink vs the nft binary

fn nft_ok(args: &[&str]) -> String {
    let out = Command::new("nft").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn nft_f(script: &str) {
    use std::io::Write;
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "nft -f: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `nft -j list ruleset` without the metainfo entry (it names nft's version).
fn ruleset_json() -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(&nft_ok(&["-j", "list", "ruleset"])).unwrap();
    v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i.get("metainfo").is_none())
        .cloned()
        .collect()
}

/// The comment cnibox gave the attachment's rules (read back from the listing).
fn masq_comment() -> String {
    let rules = masq_rules();
    let line = &rules[0];
    let start = line.find("comment \"").unwrap() + 9;
    line[start..line.len() - 1].to_string()
}

/// The nft text the previous (nft-binary) implementation generated for an attachment, as
/// the reference's nftables backend lays it out.
fn masq_text(comment: &str, rules: &[(&str, &str)]) -> String {
    let mut t = String::from(
        "add table inet cni_plugins_masquerade { comment \"Masquerading for plugins from github.com/containernetworking/plugins\" ; }\n\
         add chain inet cni_plugins_masquerade masq_checks { comment \"Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet\" ; }\n\
         add chain inet cni_plugins_masquerade postrouting { type nat hook postrouting priority srcnat ; }\n\
         flush chain inet cni_plugins_masquerade postrouting\n\
         add rule inet cni_plugins_masquerade postrouting ip daddr == 224.0.0.0/4 return\n\
         add rule inet cni_plugins_masquerade postrouting ip6 daddr == ff00::/8 return\n\
         add rule inet cni_plugins_masquerade postrouting goto masq_checks\n",
    );
    for (fam, ip, subnet) in rules
        .iter()
        .map(|(ip, s)| (if ip.contains(':') { "ip6" } else { "ip" }, ip, s))
    {
        t.push_str(&format!(
            "add rule inet cni_plugins_masquerade masq_checks {fam} saddr == {ip} {fam} daddr != {subnet} masquerade comment \"{comment}\"\n"
        ));
    }
    t
}

#[test]
fn netlink_rules_list_exactly_like_the_nft_text_of_the_same_attachment() {
    private_netns();
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24", "2001:db8::3/64"])).unwrap();
    let via_netlink = ruleset_json();
    let comment = masq_comment();
    private_netns();
    nft_f(&masq_text(
        &comment,
        &[("10.1.2.3", "10.1.2.0/24"), ("2001:db8::3", "2001:db8::/64")],
    ));
    assert_eq!(via_netlink, ruleset_json());
}

#[test]
fn the_nft_binary_deletes_what_netlink_made() {
    private_netns();
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24"])).unwrap();
    let listing = nft_ok(&["-a", "list", "chain", "inet", "cni_plugins_masquerade", "masq_checks"]);
    let handle = listing
        .lines()
        .find(|l| l.contains("masquerade comment"))
        .and_then(|l| l.rsplit("# handle ").next())
        .unwrap()
        .trim()
        .to_string();
    nft_ok(&[
        "delete",
        "rule",
        "inet",
        "cni_plugins_masquerade",
        "masq_checks",
        "handle",
        &handle,
    ]);
    assert!(masq_rules().is_empty());
    nft_ok(&["delete", "table", "inet", "cni_plugins_masquerade"]);
    // and the next ADD builds the layout again
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24"])).unwrap();
    assert_eq!(masq_rules().len(), 1);
}

#[test]
fn teardown_deletes_what_the_nft_binary_made() {
    private_netns();
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24"])).unwrap();
    let comment = masq_comment();
    nft_ok(&["delete", "table", "inet", "cni_plugins_masquerade"]);
    nft_f(&masq_text(
        &comment,
        &[("10.1.2.3", "10.1.2.0/24"), ("10.1.2.4", "10.1.2.0/24")],
    ));
    ipmasq::setup(Backend::Nftables, B, &nets(&["10.1.2.5/24"])).unwrap();
    assert_eq!(masq_rules().len(), 3);
    teardown(A).unwrap();
    let left = masq_rules();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].contains("id: ctr-b"));
}

#[test]
fn a_failed_batch_mid_way_changes_nothing() {
    private_netns();
    // A regular chain where the layout wants its base chain: the third message of the
    // batch (after the table and masq_checks) fails.
    nft_ok(&["add", "table", "inet", "cni_plugins_masquerade"]);
    nft_ok(&["add", "chain", "inet", "cni_plugins_masquerade", "postrouting"]);
    let before = ruleset_json();
    for backend in [Backend::Nftables, Backend::Auto] {
        let e = ipmasq::setup(backend, A, &nets(&["10.1.2.3/24"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "set up nftables masquerade: add chain inet cni_plugins_masquerade postrouting: File exists"
        );
        assert_eq!(ruleset_json(), before, "masq_checks must not have been created");
    }
    // nothing half-made for iptables either: an error is not a reason to fall back
    assert!(!sh("iptables-save -t nat").contains("CNI-"));
}

#[test]
fn iptables_legacy_chains_are_found_and_removed() {
    private_netns();
    // An attachment made by the reference on an iptables-legacy host.
    let chain = ipmasq::iptables_chain(A);
    let script = format!(
        "iptables-legacy -w -t nat -N {chain} && \
         iptables-legacy -w -t nat -A {chain} -d 10.1.2.0/24 -m comment --comment 'name: \"net1\" id: \"ctr-a\"' -j ACCEPT && \
         iptables-legacy -w -t nat -A {chain} ! -d 224.0.0.0/4 -m comment --comment 'name: \"net1\" id: \"ctr-a\"' -j MASQUERADE && \
         iptables-legacy -w -t nat -A POSTROUTING -s 10.1.2.3/32 -m comment --comment 'name: \"net1\" id: \"ctr-a\"' -j {chain} && \
         iptables-legacy -w -t nat -A POSTROUTING -s 10.9.9.9/32 -j ACCEPT && echo made"
    );
    assert_eq!(sh(&script).trim(), "made");
    assert!(std::fs::read_to_string("/proc/thread-self/net/ip_tables_names")
        .unwrap()
        .contains("nat"));
    teardown(A).unwrap();
    let left = sh("iptables-legacy-save -t nat");
    assert!(!left.contains(&chain), "{left}");
    assert!(
        left.contains("-A POSTROUTING -s 10.9.9.9/32 -j ACCEPT"),
        "other rules stay: {left}"
    );
    teardown(A).unwrap();
}
