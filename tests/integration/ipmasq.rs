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

/// A listing without the objects' handles (a restored ruleset gets new ones).
fn without_handles(mut v: serde_json::Value) -> serde_json::Value {
    for item in v.as_array_mut().unwrap() {
        for (_, obj) in item.as_object_mut().unwrap().iter_mut() {
            obj.as_object_mut().unwrap().remove("handle");
        }
    }
    v
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
    masq_text_indexed(comment, rules, &[])
}

/// The same with cnibox's index of the attachments (see [`index_text`]) where cnibox
/// declares it, after the chains.
fn masq_text_indexed(comment: &str, rules: &[(&str, &str)], indexed: &[(String, String)]) -> String {
    let mut t = String::from(
        "add table inet cni_plugins_masquerade { comment \"Masquerading for plugins from github.com/containernetworking/plugins\" ; }\n\
         add chain inet cni_plugins_masquerade masq_checks { comment \"Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet\" ; }\n\
         add chain inet cni_plugins_masquerade postrouting { type nat hook postrouting priority srcnat ; }\n",
    );
    if !indexed.is_empty() {
        t.push_str(&index_text(indexed));
    }
    t.push_str(
        "flush chain inet cni_plugins_masquerade postrouting\n\
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

/// cnibox's index of the attachments with rules (its own map in the table, beside the
/// reference's layout), in nft text: the map and the elements (attachment, data) given.
fn index_text(elements: &[(String, String)]) -> String {
    let mut t = String::from(
        "add map inet cni_plugins_masquerade cnibox_attachments { type ipv6_addr : ipv6_addr ; \
         comment \"cnibox: the attachments with rules in masq_checks (their comment's hash) : those rules' handles\" ; }\n",
    );
    for (key, data) in elements {
        t.push_str(&format!(
            "add element inet cni_plugins_masquerade cnibox_attachments {{ {key} : {data} }}\n"
        ));
    }
    t
}

/// An attachment's key as nft prints it: its comment's hash as an IPv6 address.
fn index_element(a: Attachment) -> String {
    let hex = ipmasq::instance_hash(a).replace('-', "");
    std::net::Ipv6Addr::from(u128::from_str_radix(&hex, 16).unwrap()).to_string()
}

/// An element's data as nft prints it: two rule handles, 64 bits each (0: none).
fn handles_data(handles: &[u64]) -> String {
    let mut h = handles.to_vec();
    h.resize(2, 0);
    std::net::Ipv6Addr::from((u128::from(h[0]) << 64) | u128::from(h[1])).to_string()
}

/// The elements of the index as nft lists them, (key, data), sorted (none without the map).
fn index_entries() -> Vec<(String, String)> {
    let out = Command::new("nft")
        .args([
            "-j",
            "list",
            "map",
            "inet",
            "cni_plugins_masquerade",
            "cnibox_attachments",
        ])
        .output()
        .unwrap();
    if !out.status.success() {
        return vec![];
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut elements: Vec<(String, String)> = v["nftables"][1]["map"]["elem"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| (e[0].as_str().unwrap().to_string(), e[1].as_str().unwrap().to_string()))
                .collect()
        })
        .unwrap_or_default();
    elements.sort();
    elements
}

/// The keys of the index.
fn index_elements() -> Vec<String> {
    index_entries().into_iter().map(|(k, _)| k).collect()
}

/// The handles of the attachment's rules in masq_checks, in order.
fn rule_handles(a: Attachment) -> Vec<u64> {
    let listing: serde_json::Value = serde_json::from_str(&nft_ok(&[
        "-j",
        "list",
        "chain",
        "inet",
        "cni_plugins_masquerade",
        "masq_checks",
    ]))
    .unwrap();
    let prefix = ipmasq::instance_hash(a);
    listing["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["rule"]["comment"].as_str().is_some_and(|c| c.starts_with(&prefix)))
        .map(|i| i["rule"]["handle"].as_u64().unwrap())
        .collect()
}

/// The index's element of `a` holds the handles of exactly its rules.
fn assert_indexed_with_its_handles(a: Attachment) {
    let data = index_entries()
        .into_iter()
        .find(|(k, _)| *k == index_element(a))
        .map(|(_, d)| d);
    assert_eq!(data, Some(handles_data(&rule_handles(a))), "{}", a.container_id);
}

#[test]
fn netlink_rules_list_exactly_like_the_nft_text_of_the_same_attachment() {
    private_netns();
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24", "2001:db8::3/64"])).unwrap();
    let via_netlink = ruleset_json();
    let comment = masq_comment();
    assert_indexed_with_its_handles(A);
    let elements = index_entries();
    private_netns();
    nft_f(&masq_text_indexed(
        &comment,
        &[("10.1.2.3", "10.1.2.0/24"), ("2001:db8::3", "2001:db8::/64")],
        &elements,
    ));
    assert_eq!(via_netlink, ruleset_json());
}

/// The index holds exactly the attachments that have rules, each with its rules' handles,
/// and `nft list ruleset` with it is still a ruleset nft reads back (a saved ruleset
/// restores).
#[test]
fn the_index_holds_each_attachment_with_rules_and_goes_with_them() {
    private_netns();
    assert!(index_elements().is_empty());
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24", "2001:db8::3/64"])).unwrap();
    ipmasq::setup(Backend::Nftables, B, &nets(&["10.1.2.5/24"])).unwrap();
    let mut both = vec![index_element(A), index_element(B)];
    both.sort();
    assert_eq!(index_elements(), both);
    assert_indexed_with_its_handles(A);
    assert_indexed_with_its_handles(B);
    // a repeated ADD replaces the rules and their handles
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.4/24"])).unwrap();
    assert_eq!(index_elements(), both);
    assert_indexed_with_its_handles(A);
    assert_eq!(masq_rules().len(), 2);

    let saved = nft_ok(&["list", "ruleset"]);
    let before = without_handles(ruleset_json());
    nft_ok(&["flush", "ruleset"]);
    nft_f(&saved);
    assert_eq!(without_handles(ruleset_json()), before, "{saved}");

    teardown(A).unwrap();
    assert_eq!(index_elements(), vec![index_element(B)]);
    teardown(A).unwrap(); // nothing left of A: no element to delete either
    teardown(B).unwrap();
    assert!(index_elements().is_empty());
    assert!(masq_rules().is_empty());
}

/// DEL deletes the rules by the handles the index has, without reading masq_checks: a
/// rule another implementation added for the same attachment meanwhile (no handle in the
/// index) is not seen. Without the handles, or when a handle is gone (the reference's DEL
/// removed the rules, and maybe its ADD made new ones), DEL finds the rules by comment.
#[test]
fn a_del_deletes_by_the_indexed_handles_and_by_comment_without_them() {
    private_netns();
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24"])).unwrap();
    ipmasq::setup(Backend::Nftables, B, &nets(&["10.1.2.5/24"])).unwrap();
    let comment = ipmasq::comment(A);
    nft_ok(&[
        "add",
        "rule",
        "inet",
        "cni_plugins_masquerade",
        "masq_checks",
        "ip",
        "saddr",
        "10.1.2.9",
        "masquerade",
        "comment",
        &format!("\"{comment}\""),
    ]);
    teardown(A).unwrap();
    let left = masq_rules();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter().any(|r| r.contains("10.1.2.9") && r.contains("id: ctr-a")),
        "{left:?}"
    );
    assert_eq!(index_elements(), vec![index_element(B)]);
    teardown(A).unwrap(); // unindexed now: found by comment
    assert_eq!(masq_rules().len(), 1);

    // the handles gone, other rules of the attachment in their place
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24"])).unwrap();
    nft_ok(&["flush", "chain", "inet", "cni_plugins_masquerade", "masq_checks"]);
    nft_f(&masq_text(&comment, &[("10.1.2.7", "10.1.2.0/24")]));
    teardown(A).unwrap();
    assert!(masq_rules().is_empty(), "{:?}", masq_rules());
    assert!(!index_elements().contains(&index_element(A)));

    // more rules than an element holds handles: indexed without them, found by comment
    let three = nets(&["10.1.2.3/24", "10.1.3.3/24", "2001:db8::3/64"]);
    ipmasq::setup(Backend::Nftables, A, &three).unwrap();
    assert!(index_entries().contains(&(index_element(A), handles_data(&[]))));
    assert_eq!(masq_rules().len(), 3);
    teardown(A).unwrap();
    assert!(masq_rules().is_empty());
    assert_eq!(index_elements(), vec![index_element(B)]);
}

/// The ADD's shortcut: an attachment without an element has no rules of cnibox's, so its
/// ADD does not read masq_checks. Rules another implementation made for the same
/// attachment (no element) then stay beside the new ones until the DEL, which finds
/// rules by their comment and removes them all.
#[test]
fn an_add_reads_masq_checks_only_when_the_index_has_its_attachment() {
    private_netns();
    ipmasq::setup(Backend::Nftables, B, &nets(&["10.1.2.5/24"])).unwrap();
    let comment = ipmasq::comment(A);
    nft_f(&masq_text(&comment, &[("10.1.2.3", "10.1.2.0/24")]));
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.4/24"])).unwrap();
    let rules = masq_rules();
    assert_eq!(rules.iter().filter(|r| r.contains("id: ctr-a")).count(), 2, "{rules:?}");
    // indexed now: a repeated ADD finds and replaces both
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.4/24"])).unwrap();
    let rules = masq_rules();
    assert_eq!(rules.iter().filter(|r| r.contains("id: ctr-a")).count(), 1, "{rules:?}");
    teardown(A).unwrap();
    assert_eq!(masq_rules().len(), 1);
    assert_eq!(index_elements(), vec![index_element(B)]);
}

/// The reference's DEL (and the nft binary) delete rules and leave the element: the next
/// ADD of the attachment reads the chain for nothing, and its DEL removes the element.
#[test]
fn an_element_whose_rules_another_del_removed_is_harmless() {
    private_netns();
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24"])).unwrap();
    nft_ok(&["flush", "chain", "inet", "cni_plugins_masquerade", "masq_checks"]);
    assert_eq!(index_elements(), vec![index_element(A)]);
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24"])).unwrap();
    assert_eq!(masq_rules().len(), 1);
    assert_eq!(index_elements(), vec![index_element(A)]);
    teardown(A).unwrap();
    assert!(masq_rules().is_empty());
    assert!(index_elements().is_empty());
    // and an element without rules goes with the DEL too
    ipmasq::setup(Backend::Nftables, A, &nets(&["10.1.2.3/24"])).unwrap();
    nft_ok(&["flush", "chain", "inet", "cni_plugins_masquerade", "masq_checks"]);
    teardown(A).unwrap();
    assert!(index_elements().is_empty());
}

/// GC removes the elements of the network's stale attachments with their rules, and
/// leaves other networks' elements alone.
#[test]
fn gc_removes_the_index_entries_of_stale_attachments_of_its_network() {
    private_netns();
    let other = Attachment { network: "net2", ..A };
    for att in [A, B, other] {
        ipmasq::setup(Backend::Nftables, att, &nets(&["10.9.0.2/16"])).unwrap();
    }
    ipmasq::gc("net1", &[("ctr-b".into(), "eth0".into())]).unwrap();
    let mut left = vec![index_element(B), index_element(other)];
    left.sort();
    assert_eq!(index_elements(), left);
    ipmasq::gc("net1", &[]).unwrap();
    assert_eq!(index_elements(), vec![index_element(other)]);
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
