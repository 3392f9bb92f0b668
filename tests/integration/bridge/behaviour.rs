//! The bridge plugin, end to end in private namespaces: the reference test inventory
//! (bridge_test.go) for every spec version, plus cnibox's own guarantees.
use crate::bridge_support;
use crate::common;

use bridge_support::*;
use common::routes::{
    assert_own_subnet_routed_both_ways, default_route, multipath_check_case, network, two_networks_case,
};
use common::{Netns, TestEnv, ALL_VERSIONS};
use serde_json::{json, Value};

/// The per-version L3 case of the reference ("configures and deconfigures a bridge and veth
/// with default route with ADD/DEL[/CHECK]"): result shape, kernel state, CHECK, DEL.
fn l3_case(version: &str, subnets: &[&str], expect_gws: &[&str]) {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        version,
        json!({"isDefaultGateway": true, "mtu": 5000, "ipam": ipam(subnets)}),
    );
    let out = add(&env, "dummy-0", &ctr, &c);
    let v6_count = subnets.iter().filter(|s| s.contains(':')).count();
    if !has_interfaces(version) && (v6_count > 1 || subnets.len() - v6_count > 1) {
        let msg = out.failure(999);
        assert_eq!(
            msg,
            format!("CNI version {version} does not support more than 1 address per family")
        );
        // DEL reports host-local's refusal and still succeeds (the reference's DEL fails)
        let out = del(&env, "dummy-0", ctr.path_str(), &c);
        out.success();
        assert!(out.stderr.contains(&msg), "{out:?}");
        assert_clean(&env, "dummy-0", Some(&ctr));
        return;
    }
    let r = out.success();
    assert_eq!(r["cniVersion"], version);
    let veths = host_veths(&env.host);
    assert_eq!(veths.len(), 1, "{veths:?}");
    let host_veth = veths[0].clone();
    assert!(host_veth.starts_with("veth") && host_veth.len() == 12, "{host_veth}");
    if has_interfaces(version) {
        let ifs = r["interfaces"].as_array().unwrap();
        assert_eq!(ifs.len(), 3, "{r}");
        assert_eq!(ifs[0]["name"], BR);
        assert_eq!(ifs[1]["name"], host_veth.as_str());
        assert_eq!(ifs[2]["name"], IFNAME);
        assert_eq!(ifs[2]["sandbox"], ctr.path_str());
        for i in ifs {
            assert_eq!(i["mac"].as_str().unwrap().len(), 17, "{i}");
        }
        assert!(ifs[1].get("sandbox").is_none() && ifs[0].get("sandbox").is_none());
        let br = link_details(&env.host, BR);
        assert_eq!(br["address"], ifs[0]["mac"], "bridge MAC in the result");
        assert_ne!(ifs[0]["mac"], ifs[1]["mac"], "the bridge MAC must not follow its port");
        assert_eq!(link_details(&env.host, &host_veth)["address"], ifs[1]["mac"]);
        assert_eq!(link_details(&ctr, IFNAME)["address"], ifs[2]["mac"]);
        for ip in r["ips"].as_array().unwrap() {
            assert_eq!(ip["interface"], 2, "{r}");
        }
    }
    // kernel state
    let br = link_details(&env.host, BR);
    assert_eq!(br["linkinfo"]["info_kind"], "bridge");
    assert_eq!(br["mtu"], 5000);
    assert_eq!(br["promiscuity"], 0);
    assert_eq!(br["linkinfo"]["info_data"]["vlan_filtering"], 0);
    let hv = link_details(&env.host, &host_veth);
    assert_eq!(hv["master"], BR);
    assert_eq!(hv["mtu"], 5000);
    assert_eq!(hv["operstate"], "UP");
    let cv = link_details(&ctr, IFNAME);
    assert_eq!(cv["linkinfo"]["info_kind"], "veth");
    assert_eq!(cv["mtu"], 5000);
    let br_addrs = env.host.addrs(BR);
    for gw in expect_gws {
        assert!(
            br_addrs.contains(&gw.to_string()),
            "{gw} not on the bridge: {br_addrs:?}"
        );
    }
    let ctr_addrs = ctr.addrs(IFNAME);
    for a in result_addrs(&r) {
        assert!(ctr_addrs.contains(&a), "{a} not in the container: {ctr_addrs:?}");
    }
    assert_eq!(ctr.sysctl("net/ipv4/conf/eth0/arp_notify"), "1");
    assert_eq!(ctr.sysctl("net/ipv6/conf/eth0/accept_dad"), "0");
    assert_eq!(env.host.sysctl(&format!("net/ipv6/conf/{host_veth}/accept_ra")), "0");
    assert_eq!(env.host.sysctl(&format!("net/ipv6/conf/{BR}/accept_ra")), "0");
    let has_v4 = subnets.iter().any(|s| !s.contains(':'));
    if has_v4 {
        assert_eq!(env.host.sysctl("net/ipv4/ip_forward"), "1");
        let routes = ctr.ip(&["-4", "route", "show", "default"]);
        assert!(
            routes.contains(&format!("via {}", expect_gws[0].split('/').next().unwrap())),
            "{routes}"
        );
    }
    if v6_count > 0 {
        assert_eq!(env.host.sysctl("net/ipv6/conf/all/forwarding"), "1");
        let routes = ctr.ip(&["-6", "route", "show", "default"]);
        assert!(routes.contains("via"), "{routes}");
    }
    // container to gateway
    for gw in expect_gws {
        let gw = gw.split('/').next().unwrap();
        assert!(ctr.ping(gw), "container cannot reach gateway {gw}");
    }
    // CHECK
    let chk = check(&env, "dummy-0", &ctr, &c, &r);
    if check_allowed(version) {
        chk.success();
    } else {
        assert_eq!(chk.failure(1), "config version does not allow CHECK");
    }
    // DEL
    del(&env, "dummy-0", ctr.path_str(), &c).success();
    assert_clean(&env, "dummy-0", Some(&ctr));
    assert!(env.host.has_link(BR), "the bridge stays");
}

#[test]
fn ipv4_every_version() {
    for v in ALL_VERSIONS {
        l3_case(v, &["10.1.2.0/24"], &["10.1.2.1/24"]);
    }
}

#[test]
fn ipv6_every_version() {
    for v in ALL_VERSIONS {
        l3_case(v, &["2001:db8::/64"], &["2001:db8::1/64"]);
    }
}

#[test]
fn dual_stack_every_version() {
    for v in ALL_VERSIONS {
        l3_case(v, &["192.168.0.0/24", "fd00::/64"], &["192.168.0.1/24", "fd00::1/64"]);
    }
}

#[test]
fn one_v4_two_v6_every_version() {
    for v in ALL_VERSIONS {
        l3_case(
            v,
            &["192.168.0.0/24", "fd00::/64", "2001:db8::/64"],
            &["192.168.0.1/24", "fd00::1/64", "2001:db8::1/64"],
        );
    }
}

#[test]
fn resolv_conf_dns_from_ipam_and_the_override_rule() {
    let env = TestEnv::new();
    let resolv = env.tmp.path().join("resolv.conf");
    std::fs::write(&resolv, "nameserver 192.0.2.0\nsearch ipam.example\n").unwrap();
    let mut ip = ipam(&["10.1.2.0/24"]);
    ip["resolvConf"] = resolv.to_str().unwrap().into();
    for v in ALL_VERSIONS {
        let cases = [
            (
                json!({}),
                json!({"nameservers": ["192.0.2.0"], "search": ["ipam.example"]}),
            ),
            (
                json!({"dns": {"nameservers": ["10.1.2.1"]}}),
                json!({"nameservers": ["10.1.2.1"]}),
            ),
            // present but empty: overrides with nothing
            (json!({"dns": {"search": []}}), json!({})),
        ];
        for (extra, want) in cases {
            let ctr = env.container();
            let mut c = conf(&env, v, json!({"isGateway": true, "ipam": ip}));
            for (k, val) in extra.as_object().unwrap() {
                c[k] = val.clone();
            }
            let r = add(&env, "dns", &ctr, &c).success();
            assert_eq!(r["dns"], want, "{v} {extra}");
            del(&env, "dns", ctr.path_str(), &c).success();
            assert_clean(&env, "dns", Some(&ctr));
        }
    }
}

#[test]
fn l2_every_version() {
    for v in ALL_VERSIONS {
        let env = TestEnv::new();
        let ctr = env.container();
        let c = conf(&env, v, json!({"ipam": {}}));
        let out = add(&env, "l2", &ctr, &c);
        if has_interfaces(v) {
            let r = out.success();
            assert_eq!(r["interfaces"].as_array().unwrap().len(), 3);
            assert!(r.get("ips").map_or(true, |i| i.as_array().unwrap().is_empty()), "{r}");
            let cv = link_details(&ctr, IFNAME);
            assert!(cv["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "{cv}");
            assert!(ctr.addrs(IFNAME).iter().all(|a| a.starts_with("fe80")));
            let hv = &host_veths(&env.host)[0];
            assert_eq!(link_details(&env.host, hv)["operstate"], "UP");
            // the bridge MAC is pinned for L2 bridges too
            assert_ne!(r["interfaces"][0]["mac"], r["interfaces"][1]["mac"]);
            let chk = check(&env, "l2", &ctr, &c, &r);
            if check_allowed(v) {
                // the reference fails here (it delegates CHECK to an empty IPAM type)
                chk.success();
            } else {
                assert_eq!(chk.failure(1), "config version does not allow CHECK");
            }
        } else {
            assert_eq!(out.failure(999), "cannot convert: no valid IP addresses");
        }
        // a runtime DELs after a failed ADD too
        del(&env, "l2", ctr.path_str(), &c).success();
        assert_clean(&env, "l2", Some(&ctr));
    }
}

#[test]
fn existing_bridge_is_reused_with_its_mac() {
    let env = TestEnv::new();
    env.host.ip(&["link", "add", BR, "type", "bridge"]);
    let before = link_details(&env.host, BR);
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"ipam": ipam(&["10.1.2.0/24"]), "isGateway": true}),
    );
    let r = add(&env, "ex", &ctr, &c).success();
    let after = link_details(&env.host, BR);
    assert_eq!(before["ifindex"], after["ifindex"]);
    assert_eq!(before["address"], after["address"]);
    assert_eq!(r["interfaces"][0]["mac"], before["address"]);
    del(&env, "ex", ctr.path_str(), &c).success();
    assert_clean(&env, "ex", Some(&ctr));
    assert_eq!(link_details(&env.host, BR)["address"], before["address"]);
}

#[test]
fn existing_link_that_is_not_a_bridge_is_an_error() {
    let env = TestEnv::new();
    env.host
        .ip(&["link", "add", BR, "type", "veth", "peer", "name", "notbr1"]);
    let ctr = env.container();
    let c = conf(&env, "1.0.0", json!({"ipam": ipam(&["10.1.2.0/24"])}));
    let msg = add(&env, "nb", &ctr, &c).failure(999);
    assert_eq!(
        msg,
        format!("failed to create bridge \"{BR}\": \"{BR}\" already exists but is not a bridge")
    );
    assert!(reservations(&env).is_empty());
    assert!(!ctr.has_link(IFNAME));
}

/// `ensure bridge address` of the reference, through the plugin: an existing gateway
/// address on the bridge conflicts (IPv4, overlapping IPv6) unless forceAddress replaces
/// it; disjoint IPv6 subnets coexist. A conflict fails the ADD after IPAM, so it also
/// checks that the reservation is released and the veth removed.
#[test]
fn ensure_bridge_address_and_release_on_error() {
    let cases: [(&str, &str, &str, bool); 3] = [
        ("10.0.0.1/8", "10.1.0.0/16", "10.1.0.1/16", true),
        ("2001:db8:1::1/48", "2001:db8:1:2::/64", "2001:db8:1:2::1/64", true),
        ("fd00:1234::1/64", "2001:db8:1:2::/64", "2001:db8:1:2::1/64", false),
    ];
    for (existing, subnet, gw, conflicts) in cases {
        for force in [false, true] {
            let env = TestEnv::new();
            env.host.ip(&["link", "add", BR, "type", "bridge"]);
            env.host.ip(&["link", "set", BR, "up"]);
            env.host.ip(&["addr", "add", existing, "dev", BR, "nodad"]);
            let ctr = env.container();
            let c = conf(
                &env,
                "1.0.0",
                json!({"isGateway": true, "forceAddress": force, "ipMasq": true, "macspoofchk": true, "ipam": ipam(&[subnet])}),
            );
            let out = add(&env, "ea", &ctr, &c);
            let addrs = env.host.addrs(BR);
            if conflicts && !force {
                let msg = out.failure(999);
                assert_eq!(
                    msg,
                    format!("failed to set bridge addr: \"{BR}\" already has an IP address different from {gw}")
                );
                // everything this ADD did is undone
                assert_clean(&env, "ea", Some(&ctr));
                assert!(addrs.contains(&existing.to_string()));
                continue;
            }
            out.success();
            assert!(addrs.contains(&gw.to_string()), "{addrs:?}");
            assert_eq!(
                addrs.contains(&existing.to_string()),
                !conflicts,
                "{existing} {force}: {addrs:?}"
            );
            del(&env, "ea", ctr.path_str(), &c).success();
            assert_clean(&env, "ea", Some(&ctr));
        }
    }
}

#[test]
fn promiscuous_bridge() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"promiscMode": true, "mtu": 5000, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    let r = add(&env, "pr", &ctr, &c).success();
    let br = link_details(&env.host, BR);
    assert!(br["flags"].as_array().unwrap().iter().any(|f| f == "PROMISC"), "{br}");
    assert_eq!(br["mtu"], 5000);
    check(&env, "pr", &ctr, &c, &r).success();
    // CHECK compares the promisc state with the config
    let mut c2 = c.clone();
    c2["promiscMode"] = false.into();
    let msg = check(&env, "pr", &ctr, &c2, &r).failure(999);
    assert!(
        msg.contains("configured Promisc Mode false doesn't match current state: true"),
        "{msg}"
    );
    del(&env, "pr", ctr.path_str(), &c).success();
    assert_clean(&env, "pr", Some(&ctr));
    let msg = add(
        &env,
        "pr",
        &ctr,
        &conf(&env, "1.0.0", json!({"promiscMode": true, "hairpinMode": true})),
    )
    .failure(999);
    assert_eq!(msg, "cannot set hairpin mode and promiscuous mode at the same time");
}

#[test]
fn hairpin_mode_on_the_port() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"hairpinMode": true, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    add(&env, "hp", &ctr, &c).success();
    let hv = link_details(&env.host, &host_veths(&env.host)[0]);
    assert_eq!(hv["linkinfo"]["info_slave_data"]["hairpin"], true, "{hv}");
    del(&env, "hp", ctr.path_str(), &c).success();
    assert_clean(&env, "hp", Some(&ctr));
}

#[test]
fn stable_bridge_mac_across_attachments() {
    for subnet in ["10.1.2.0/24", "2001:db8::/64"] {
        let env = TestEnv::new();
        let c = conf(&env, "1.0.0", json!({"isGateway": true, "ipam": ipam(&[subnet])}));
        let a = env.container();
        let r = add(&env, "m1", &a, &c).success();
        let mac = r["interfaces"][0]["mac"].clone();
        let b = env.container();
        let r2 = add(&env, "m2", &b, &c).success();
        assert_eq!(r2["interfaces"][0]["mac"], mac);
        del(&env, "m1", a.path_str(), &c).success();
        assert_eq!(link_details(&env.host, BR)["address"], mac);
        del(&env, "m2", b.path_str(), &c).success();
        assert_eq!(link_details(&env.host, BR)["address"], mac);
        assert_clean(&env, "m1", Some(&a));
    }
}

/// Both veth ends get their MACs in the create request (as veth does), so the kernel records
/// them as set (3) rather than random (1), which udev's `MACAddressPolicy=persistent` would
/// rewrite after ADD, breaking the MACs the result reported.
#[test]
fn both_veth_macs_are_set_at_creation_so_udev_keeps_them() {
    for v in ALL_VERSIONS {
        for requested in [None, Some("c2:11:22:33:44:05")] {
            let env = TestEnv::new();
            let ctr = env.container();
            let mut c = conf(&env, v, json!({"ipam": ipam(&["10.1.2.0/24"])}));
            if let Some(m) = requested {
                c["runtimeConfig"] = json!({"mac": m});
            }
            let r = add(&env, "macs", &ctr, &c).success();
            let host_veth = host_veths(&env.host)[0].clone();
            assert_eq!(env.host.addr_assign_type(&host_veth), "3", "{v}: host end");
            assert_eq!(ctr.addr_assign_type(IFNAME), "3", "{v}: container end");
            let cont_mac = link_details(&ctr, IFNAME)["address"].clone();
            if let Some(m) = requested {
                assert_eq!(cont_mac, m, "{v}");
            }
            if has_interfaces(v) {
                assert_eq!(
                    r["interfaces"][1]["mac"],
                    link_details(&env.host, &host_veth)["address"],
                    "{v}"
                );
                assert_eq!(r["interfaces"][2]["mac"], cont_mac, "{v}");
            }
            del(&env, "macs", ctr.path_str(), &c).success();
            assert_clean(&env, "macs", Some(&ctr));
        }
    }
}

#[test]
fn explicit_container_mac_precedence() {
    let env = TestEnv::new();
    let (env_mac, args_mac, rc_mac) = ("c2:11:22:33:44:01", "c2:11:22:33:44:02", "c2:11:22:33:44:03");
    let cases = [
        (json!({}), format!("IgnoreUnknown=1;MAC={env_mac}"), env_mac),
        (
            json!({"args": {"cni": {"mac": args_mac}}}),
            format!("IgnoreUnknown=1;MAC={env_mac}"),
            args_mac,
        ),
        (
            json!({"args": {"cni": {"mac": args_mac}}, "runtimeConfig": {"mac": rc_mac}}),
            format!("IgnoreUnknown=1;MAC={env_mac}"),
            rc_mac,
        ),
    ];
    for v in ALL_VERSIONS {
        for (extra, cni_args, want) in &cases {
            let ctr = env.container();
            let mut c = conf(&env, v, json!({"ipam": ipam(&["10.1.2.0/24"])}));
            for (k, val) in extra.as_object().unwrap() {
                c[k] = val.clone();
            }
            let r = add_args(&env, "mac", &ctr, &c, cni_args).success();
            if has_interfaces(v) {
                assert_eq!(r["interfaces"][2]["mac"], *want);
            }
            assert_eq!(link_details(&ctr, IFNAME)["address"], *want);
            env.call("bridge")
                .verb("DEL", "mac", ctr.path_str(), IFNAME)
                .env("CNI_ARGS", cni_args)
                .config(&c)
                .run()
                .success();
            assert_clean(&env, "mac", Some(&ctr));
        }
    }
}

#[test]
/// Bad CNI_ARGS fail ADD as in the reference; the cleanup DEL with the same arguments
/// succeeds (the reference's fails too, for ever: README, Differences).
fn bad_cni_args_fail_add_like_the_reference_and_del_still_cleans_up() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(&env, "1.0.0", json!({"ipam": ipam(&["10.1.2.0/24"])}));
    let msg = add_args(&env, "ba", &ctr, &c, "FOO=bar").failure(999);
    assert_eq!(msg, r#"ARGS: unknown args ["FOO=bar"]"#);
    let out = env
        .call("bridge")
        .verb("DEL", "ba", ctr.path_str(), IFNAME)
        .env("CNI_ARGS", "FOO=bar")
        .config(&c)
        .run();
    out.success();
    assert!(out.stderr.contains(r#"ARGS: unknown args ["FOO=bar"]"#), "{out:?}");
    let msg = add_args(&env, "ba", &ctr, &c, "MAC=zz:11:22:33:44:55").failure(999);
    assert!(msg.contains("invalid MAC address"), "{msg}");
    assert_clean(&env, "ba", Some(&ctr));
}

#[test]
fn ip_masquerade_with_both_backends() {
    for v in ALL_VERSIONS.iter().filter(|v| has_interfaces(v)) {
        for backend in [None, Some("nftables"), Some("iptables")] {
            let env = TestEnv::new();
            let ctr = env.container();
            let mut c = conf(
                &env,
                v,
                json!({"isGateway": true, "ipMasq": true, "ipam": ipam(&["10.1.2.0/24"])}),
            );
            if let Some(b) = backend {
                c["ipMasqBackend"] = b.into();
            }
            let r = add(&env, "masq", &ctr, &c).success();
            let ip = result_addrs(&r)[0].split('/').next().unwrap().to_string();
            if backend == Some("iptables") {
                let ipt = iptables_nat(&env.host);
                assert!(ipt.contains(&format!("-A POSTROUTING -s {ip}/32")), "{ipt}");
                assert!(!nft_ruleset(&env.host).contains("masq_checks"));
            } else {
                let nft = nft_ruleset(&env.host);
                let rules: Vec<&str> = nft.lines().filter(|l| l.contains("masquerade comment")).collect();
                assert_eq!(rules.len(), 1, "{nft}");
                assert!(rules[0].contains(&format!("ip saddr {ip} ip daddr != 10.1.2.0/24 masquerade")));
                assert!(rules[0].contains("net: testConfig, if: eth0, id: masq"), "{nft}");
            }
            del(&env, "masq", ctr.path_str(), &c).success();
            assert_clean(&env, "masq", Some(&ctr));
        }
    }
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"ipMasq": true, "ipMasqBackend": "pf", "ipam": ipam(&["10.1.2.0/24"])}),
    );
    assert_eq!(add(&env, "x", &ctr, &c).failure(999), "unknown ipmasq backend \"pf\"");
    assert_clean(&env, "x", Some(&ctr));
}

/// Regression: the iptables masquerade chain is named after network and container alone,
/// so the DEL of a container's second interface on the network removed the first one's
/// masquerade too (and the other way round).
#[test]
fn each_interface_on_one_network_keeps_its_own_masquerade() {
    for v in ALL_VERSIONS.iter().filter(|v| has_interfaces(v)) {
        for backend in ["iptables", "nftables"] {
            let env = TestEnv::new();
            let ctr = env.container();
            let c = conf(
                &env,
                v,
                json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": backend, "ipam": ipam(&["10.1.2.0/24"])}),
            );
            let call = |verb: &str, ifname: &str, c: &Value| {
                env.call("bridge")
                    .verb(verb, "two", ctr.path_str(), ifname)
                    .config(c)
                    .run()
            };
            let ip_of = |r: &Value| result_addrs(r)[0].split('/').next().unwrap().to_string();
            let what = format!("{v} {backend}");
            let eth0 = ip_of(&call("ADD", "eth0", &c).success());
            let r1 = call("ADD", "eth1", &c).success();
            let eth1 = ip_of(&r1);
            let mut both = vec![eth0.clone(), eth1.clone()];
            both.sort();
            assert_eq!(masqueraded(&env.host), both, "{what}");

            let mut with_prev = c.clone();
            if check_allowed(v) {
                with_prev["prevResult"] = r1.clone();
            }
            call("DEL", "eth1", &with_prev).success();
            assert_eq!(masqueraded(&env.host), vec![eth0.clone()], "{what}: after eth1's DEL");
            // repeated without prevResult, as after the runtime dropped its cache
            call("DEL", "eth1", &c).success();
            assert_eq!(
                masqueraded(&env.host),
                vec![eth0.clone()],
                "{what}: after eth1's second DEL"
            );

            // the other way round, without prevResult
            let eth1 = ip_of(&call("ADD", "eth1", &c).success());
            call("DEL", "eth0", &c).success();
            assert_eq!(masqueraded(&env.host), vec![eth1.clone()], "{what}: after eth0's DEL");
            call("DEL", "eth0", &c).success();
            assert_eq!(masqueraded(&env.host), vec![eth1], "{what}: after eth0's second DEL");
            call("DEL", "eth1", &c).success();
            assert_clean(&env, "two", Some(&ctr));
        }
    }
}

#[test]
fn mac_spoof_check_rules() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"macspoofchk": true, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    let r = add(&env, "dummy-0", &ctr, &c).success();
    let mac = r["interfaces"][2]["mac"].as_str().unwrap();
    let veth = r["interfaces"][1]["name"].as_str().unwrap();
    let pre = sh_in(&env.host, "nft list chain bridge nat PREROUTING");
    // nft names priority -300 of the bridge family "dstnat"
    assert!(
        pre.contains("type filter hook prerouting priority dstnat; policy accept;"),
        "{pre}"
    );
    assert!(
        pre.contains(&format!(
            "iifname \"{veth}\" jump cni-br-iface-dummy-0-eth0 comment \"macspoofchk-dummy-0-eth0\""
        )),
        "{pre}"
    );
    let ch = sh_in(&env.host, "nft list chain bridge nat cni-br-iface-dummy-0-eth0");
    assert!(
        ch.contains("jump cni-br-iface-dummy-0-eth0-mac comment \"macspoofchk-dummy-0-eth0\""),
        "{ch}"
    );
    let mc = sh_in(&env.host, "nft list chain bridge nat cni-br-iface-dummy-0-eth0-mac");
    let rules: Vec<&str> = mc.lines().filter(|l| l.contains("comment")).collect();
    assert_eq!(rules.len(), 2, "{mc}");
    assert!(rules[0].contains(&format!("ether saddr {mac} return")), "{mc}");
    assert!(rules[1].trim().starts_with("drop"), "{mc}");
    // a spoofed source MAC gets nowhere; the real one works
    let gw_peer = env.container();
    let c2 = conf(&env, "1.0.0", json!({"ipam": ipam(&["10.1.2.0/24"])}));
    let r2 = add(&env, "peer", &gw_peer, &c2).success();
    let peer_ip = result_addrs(&r2)[0].split('/').next().unwrap().to_string();
    assert!(ctr.ping(&peer_ip));
    ctr.ip(&["link", "set", IFNAME, "address", "c2:00:00:00:00:99"]);
    ctr.ip(&["neigh", "flush", "all"]);
    assert!(!ctr.ping(&peer_ip), "spoofed frames must be dropped");
    del(&env, "peer", gw_peer.path_str(), &c2).success();
    del(&env, "dummy-0", ctr.path_str(), &c).success();
    assert_clean(&env, "dummy-0", Some(&ctr));
}

#[test]
fn disable_container_interface() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"disableContainerInterface": true, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    assert_eq!(
        add(&env, "dc", &ctr, &c).failure(999),
        "cannot use IPAM when DisableContainerInterface flag is set"
    );
    assert_clean(&env, "dc", Some(&ctr));
    let c = conf(&env, "1.0.0", json!({"disableContainerInterface": true}));
    add(&env, "dc", &ctr, &c).success();
    let cv = link_details(&ctr, IFNAME);
    assert!(!cv["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "{cv}");
    del(&env, "dc", ctr.path_str(), &c).success();
    assert_clean(&env, "dc", Some(&ctr));
}

#[test]
fn port_isolation_on_and_off() {
    for on in [false, true] {
        let env = TestEnv::new();
        let ctr = env.container();
        let c = conf(
            &env,
            "1.0.0",
            json!({"portIsolation": on, "ipam": ipam(&["10.1.2.0/24"])}),
        );
        add(&env, "iso", &ctr, &c).success();
        let hv = link_details(&env.host, &host_veths(&env.host)[0]);
        assert_eq!(hv["linkinfo"]["info_slave_data"]["isolated"], on, "{hv}");
        del(&env, "iso", ctr.path_str(), &c).success();
        assert_clean(&env, "iso", Some(&ctr));
    }
}

#[test]
fn vlan_id_validation() {
    for v in ["1.0.0", "0.4.0"] {
        let env = TestEnv::new();
        let ctr = env.container();
        let c = conf(&env, v, json!({"vlan": 0, "ipam": ipam(&["10.1.2.0/24"])}));
        add(&env, "vl", &ctr, &c).success();
        del(&env, "vl", ctr.path_str(), &c).success();
        for bad in [-100, 5000] {
            let c = conf(&env, v, json!({"vlan": bad, "ipam": ipam(&["10.1.2.0/24"])}));
            let msg = add(&env, "vl", &ctr, &c).failure(999);
            assert_eq!(msg, format!("invalid VLAN ID {bad} (must be between 0 and 4094)"));
            // DEL reports the refusal and still succeeds (the reference's DEL fails)
            let out = del(&env, "vl", ctr.path_str(), &c);
            out.success();
            assert!(out.stderr.contains(&msg), "{out:?}");
        }
        assert_clean(&env, "vl", Some(&ctr));
    }
}

#[test]
fn vlan_trunk_parsing_errors() {
    let env = TestEnv::new();
    let ctr = env.container();
    let cases = [
        (
            json!([{"minID": 100}]),
            "minID and maxID should be configured simultaneously, maxID is missing",
        ),
        (
            json!([{"maxID": 100}]),
            "minID and maxID should be configured simultaneously, minID is missing",
        ),
        (json!([{"minID": 0, "maxID": 100}]), "incorrect trunk minID parameter"),
        (
            json!([{"minID": -100, "maxID": 100}]),
            "incorrect trunk minID parameter",
        ),
        (
            json!([{"minID": 5000, "maxID": 6000}]),
            "incorrect trunk minID parameter",
        ),
        (
            json!([{"minID": 100, "maxID": 5000}]),
            "incorrect trunk maxID parameter",
        ),
        (json!([{"minID": 100, "maxID": -1}]), "incorrect trunk maxID parameter"),
        (json!([{"id": 0}]), "incorrect trunk id parameter"),
        (json!([{"id": 5000}]), "incorrect trunk id parameter"),
        (
            json!([{"minID": 210, "maxID": 200}]),
            "minID is greater than maxID in trunk parameter",
        ),
    ];
    for (trunk, msg) in cases {
        let c = conf(&env, "1.0.0", json!({"vlanTrunk": trunk}));
        assert_eq!(add(&env, "tr", &ctr, &c).failure(999), msg, "{trunk}");
    }
    assert_clean(&env, "tr", Some(&ctr));
}

/// True when this kernel has bridge VLAN filtering (probed in a throwaway namespace).
fn kernel_has_vlan_filtering() -> bool {
    let ns = Netns::new("vf");
    ns.ip_raw(&["link", "add", "vfprobe", "type", "bridge", "vlan_filtering", "1"])
        .status
        .success()
}

/// VLAN configs (`vlan`, `vlanTrunk`, both, `preserveDefaultVlan`, gateway on `<br>.<vlan>`)
/// need bridge VLAN filtering; without it ADD fails naming the feature.
#[test]
fn vlan_features() {
    let configs = [
        json!({"vlan": 100, "ipam": {}}),
        json!({"vlanTrunk": [{"id": 101}, {"minID": 200, "maxID": 210}], "ipam": {}}),
        json!({"vlan": 100, "vlanTrunk": [{"id": 101}, {"minID": 200, "maxID": 210}], "ipam": {}}),
        json!({"vlan": 100, "preserveDefaultVlan": false, "ipam": {}}),
        json!({"vlan": 100, "isDefaultGateway": true, "ipam": ipam(&["10.1.2.0/24"])}),
    ];
    let supported = kernel_has_vlan_filtering();
    for extra in configs {
        let env = TestEnv::new();
        let ctr = env.container();
        let c = conf(&env, "1.0.0", extra.clone());
        let out = add(&env, "vl", &ctr, &c);
        if !supported {
            let msg = out.failure(999);
            assert_eq!(
                msg,
                format!(
                    "failed to create bridge \"{BR}\": bridge VLAN filtering is not supported by this kernel (vlan_filtering: Operation not supported)"
                )
            );
            assert_clean(&env, "vl", Some(&ctr));
            eprintln!("skipped {extra}: bridge VLAN filtering is not supported by this kernel");
            continue;
        }
        let r = out.success();
        let br = link_details(&env.host, BR);
        assert_eq!(br["linkinfo"]["info_data"]["vlan_filtering"], 1);
        let port = r["interfaces"][1]["name"].as_str().unwrap().to_string();
        let vlans = env.host.ip_json(&["-d", "vlan", "show", "dev", &port]);
        let vids: Vec<u64> = vlans[0]["vlans"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|v| {
                let lo = v["vlan"].as_u64().unwrap();
                let hi = v["vlanEnd"].as_u64().unwrap_or(lo);
                lo..=hi
            })
            .collect();
        if extra["vlan"] == 100 {
            assert!(vids.contains(&100), "{vlans}");
        }
        if extra.get("vlanTrunk").is_some() {
            assert!(vids.contains(&101) && vids.contains(&205), "{vlans}");
        }
        if extra.get("preserveDefaultVlan") == Some(&json!(false)) {
            assert_eq!(vids, vec![100], "{vlans}");
        }
        if extra.get("isDefaultGateway").is_some() {
            assert_eq!(r["interfaces"].as_array().unwrap().len(), 4);
            assert!(env
                .host
                .addrs(&format!("{BR}.100"))
                .contains(&"10.1.2.1/24".to_string()));
        }
        del(&env, "vl", ctr.path_str(), &c).success();
        assert_clean(&env, "vl", Some(&ctr));
    }
}

#[test]
fn container_name_collision_is_an_error() {
    let env = TestEnv::new();
    let ctr = env.container();
    ctr.ip(&["link", "add", IFNAME, "type", "veth", "peer", "name", "other0"]);
    let c = conf(&env, "1.0.0", json!({"ipam": ipam(&["10.1.2.0/24"])}));
    let msg = add(&env, "cc", &ctr, &c).failure(999);
    assert_eq!(msg, "container veth name provided (eth0) already exists");
    assert!(host_veths(&env.host).is_empty());
    assert!(reservations(&env).is_empty());
}

#[test]
fn check_failures() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"isDefaultGateway": true, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    let r = add(&env, "ck", &ctr, &c).success();
    let chk = env.call("bridge").exec("CHECK", "ck", ctr.path_str(), IFNAME, &c);
    assert_eq!(chk.failure(999), "Required prevResult missing");
    let mut wrong = r.clone();
    wrong["ips"][0]["address"] = "10.1.2.99/24".into();
    assert_eq!(
        check(&env, "ck", &ctr, &c, &wrong).failure(999),
        "Failed to match addr 10.1.2.99/24 on interface eth0"
    );
    let mut wrong = r.clone();
    wrong["interfaces"][2]["mac"] = "c2:00:00:00:00:01".into();
    assert!(check(&env, "ck", &ctr, &c, &wrong)
        .failure(999)
        .contains("doesn't match container Mac"));
    let mut wrong = r.clone();
    wrong["routes"] = json!([{"dst": "192.168.7.0/24"}]);
    assert_eq!(
        check(&env, "ck", &ctr, &c, &wrong).failure(999),
        "Expected Route 192.168.7.0/24 not found in routing table"
    );
    // the host veth taken away
    env.host
        .ip(&["link", "del", r["interfaces"][1]["name"].as_str().unwrap()]);
    assert!(check(&env, "ck", &ctr, &c, &r).failure(999).contains("not found"));
    del(&env, "ck", ctr.path_str(), &c).success();
    assert_clean(&env, "ck", Some(&ctr));
}

#[test]
fn status_and_gc() {
    let env = TestEnv::new();
    let c = conf(
        &env,
        "1.1.0",
        json!({"ipMasq": true, "ipMasqBackend": "nftables", "ipam": ipam(&["10.1.2.0/24"])}),
    );
    env.call("bridge").command("STATUS").config(&c).run().success();
    let l2 = conf(&env, "1.1.0", json!({}));
    env.call("bridge").command("STATUS").config(&l2).run().success();
    let (a, b) = (env.container(), env.container());
    add(&env, "keep", &a, &c).success();
    add(&env, "stale", &b, &c).success();
    let mut gc = c.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "keep", "ifname": IFNAME}]);
    env.call("bridge").command("GC").config(&gc).run().success();
    let nft = nft_ruleset(&env.host);
    assert!(nft.contains("id: keep\""), "{nft}");
    assert!(!nft.contains("id: stale\""), "{nft}");
    // GC was forwarded to host-local: only the kept attachment's reservation is left
    let held: Vec<String> = env
        .store(NET)
        .values()
        .filter(|v| v.starts_with("keep"))
        .cloned()
        .collect();
    assert_eq!(reservations(&env).len(), 1, "{:?}", env.store(NET));
    assert_eq!(held.len(), 1);
    del(&env, "stale", b.path_str(), &c).success();
    del(&env, "keep", a.path_str(), &c).success();
    assert_clean(&env, "keep", Some(&a));
}

#[test]
fn containers_reach_each_other_and_the_gateway() {
    let env = TestEnv::new();
    let c = conf(
        &env,
        "1.0.0",
        json!({"isGateway": true, "ipam": ipam(&["10.1.2.0/24", "fd00:1::/64"])}),
    );
    let (a, b) = (env.container(), env.container());
    let ra = add(&env, "a", &a, &c).success();
    let rb = add(&env, "b", &b, &c).success();
    for ip in result_addrs(&rb) {
        assert!(a.ping(ip.split('/').next().unwrap()), "a -> {ip}");
    }
    for ip in result_addrs(&ra) {
        assert!(b.ping(ip.split('/').next().unwrap()), "b -> {ip}");
    }
    assert!(a.ping("10.1.2.1") && a.ping("fd00:1::1"));
    del(&env, "a", a.path_str(), &c).success();
    del(&env, "b", b.path_str(), &c).success();
    assert_clean(&env, "a", Some(&a));
}

/// Parallel ADDs racing to create the same bridge both succeed.
#[test]
fn parallel_adds_share_a_new_bridge() {
    for round in 0..5 {
        let env = TestEnv::new();
        let c = conf(
            &env,
            "1.0.0",
            json!({"isGateway": true, "ipam": ipam(&["10.1.2.0/24"])}),
        );
        let ctrs: Vec<Netns> = (0..4).map(|_| env.container()).collect();
        let outs: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = ctrs
                .iter()
                .enumerate()
                .map(|(i, ns)| {
                    let (env, c) = (&env, &c);
                    s.spawn(move || add(env, &format!("p{i}"), ns, c))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for o in &outs {
            o.success();
        }
        assert_eq!(host_veths(&env.host).len(), 4, "round {round}");
        for (i, ns) in ctrs.iter().enumerate() {
            del(&env, &format!("p{i}"), ns.path_str(), &c).success();
        }
        assert_clean(&env, "p0", None);
    }
}

/// DEL succeeds, and leaves nothing of the attachment, in every state it may find.
#[test]
fn del_idempotency_matrix() {
    type Breaker = fn(&TestEnv, &Netns, &Value);
    let cases: [(&str, Breaker, bool); 7] = [
        ("second DEL", |_, _, _| {}, false),
        ("empty CNI_NETNS", |_, _, _| {}, true),
        ("netns gone", |_, _, _| {}, false),
        (
            "link gone",
            |_, ctr, _| {
                ctr.ip(&["link", "del", IFNAME]);
            },
            false,
        ),
        (
            "bridge gone",
            |env, _, _| {
                env.host.ip(&["link", "del", BR]);
            },
            false,
        ),
        (
            "masquerade rules gone",
            |env, _, _| {
                sh_in(
                    &env.host,
                    "nft delete table inet cni_plugins_masquerade; iptables -t nat -F; iptables -t nat -X",
                );
            },
            false,
        ),
        (
            "spoof-check table gone",
            |env, _, _| {
                sh_in(&env.host, "nft delete table bridge nat");
            },
            false,
        ),
    ];
    for backend in ["nftables", "iptables"] {
        for (name, breaker, empty_netns) in cases {
            for version in ["0.3.1", "1.0.0", "1.1.0"] {
                let env = TestEnv::new();
                let ctr = env.container();
                let c = conf(
                    &env,
                    version,
                    json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": backend, "macspoofchk": true,
                           "ipam": ipam(&["10.1.2.0/24"])}),
                );
                let r = add(&env, "dm", &ctr, &c).success();
                breaker(&env, &ctr, &c);
                let path = ctr.path_str().to_string();
                let ctr = if name == "netns gone" {
                    drop(ctr);
                    // the kernel destroys a namespace (and the veth in it) asynchronously
                    wait_until(|| host_veths(&env.host).is_empty());
                    None
                } else {
                    Some(ctr)
                };
                let netns = if empty_netns { "" } else { path.as_str() };
                // DEL without prevResult, then with it (a runtime's cache may or may not have one)
                let out = del(&env, "dm", netns, &c);
                assert!(out.ok(), "{name} ({backend}, {version}): {out:?}");
                if empty_netns {
                    // without a netns and a prevResult nothing names the veth pair
                    assert!(ctr.as_ref().unwrap().has_link(IFNAME), "{name}");
                }
                let mut with_prev = c.clone();
                with_prev["prevResult"] = r.clone();
                let out = del(&env, "dm", netns, &with_prev);
                assert!(out.ok(), "{name} second DEL ({backend}, {version}): {out:?}");
                // with a prevResult even an empty CNI_NETNS removes the pair (via its host end)
                assert_clean(&env, "dm", ctr.as_ref());
            }
        }
    }
}

/// DEL without a netns deletes the host veth named in prevResult only when it is this
/// attachment's port (enslaved to the bridge, with the MAC ADD reported).
#[test]
fn del_without_netns_leaves_a_veth_that_is_not_this_attachments() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"isGateway": true, "ipam": ipam(&["10.1.7.0/24"])}),
    );
    let r = add(&env, "fv", &ctr, &c).success();
    let host_veth = r["interfaces"][1]["name"].as_str().unwrap().to_string();
    let mut forged = r.clone();
    forged["interfaces"][1]["mac"] = json!("02:00:00:00:00:01");
    let mut with_prev = c.clone();
    with_prev["prevResult"] = forged;
    assert!(del(&env, "fv", "", &with_prev).ok());
    assert!(env.host.has_link(&host_veth), "a port with another MAC is left alone");
    with_prev["prevResult"] = r;
    assert!(del(&env, "fv", "", &with_prev).ok());
    assert!(!env.host.has_link(&host_veth));
    assert!(!ctr.has_link(IFNAME), "the peer goes with the host end");
}

#[test]
fn dad_is_off_unless_enabled() {
    for enable in [false, true] {
        let env = TestEnv::new();
        let ctr = env.container();
        let c = conf(
            &env,
            "1.0.0",
            json!({"enabledad": enable, "isGateway": true, "ipam": ipam(&["fd00:5::/64"])}),
        );
        add(&env, "dad", &ctr, &c).success();
        let want = if enable { "1" } else { "0" };
        assert_eq!(ctr.sysctl("net/ipv6/conf/eth0/accept_dad"), want);
        if enable {
            assert_eq!(ctr.sysctl("net/ipv6/conf/eth0/enhanced_dad"), "1");
        }
        // either way the address is usable when ADD returns
        let addrs = ctr.ip_json(&["-6", "addr", "show", "dev", IFNAME, "tentative"]);
        assert!(addrs.as_array().unwrap().is_empty(), "{addrs}");
        del(&env, "dad", ctr.path_str(), &c).success();
        assert_clean(&env, "dad", Some(&ctr));
    }
}

/// The port VLAN listing behind `preserveDefaultVlan: false`: a fresh port holds the
/// bridge's default PVID when the kernel filters VLANs, nothing otherwise.
#[test]
fn port_vlans_of_a_fresh_port() {
    let supported = kernel_has_vlan_filtering();
    let ns = Netns::new("pv");
    ns.ip(&["link", "add", "br0", "type", "bridge"]);
    ns.ip(&["link", "add", "p0", "type", "veth", "peer", "name", "p1"]);
    ns.ip(&["link", "set", "p0", "master", "br0"]);
    let netns = cnibox::netns::Netns::open(&ns.path).unwrap();
    let h = cnibox::netlink::Handle::open(&netns).unwrap();
    let vlans = h.port_vlans("p0").unwrap();
    if supported {
        assert_eq!(
            vlans,
            vec![cnibox::netlink::PortVlan {
                vid: 1,
                pvid: true,
                untagged: true
            }]
        );
    } else {
        assert!(vlans.is_empty(), "{vlans:?}");
        eprintln!("partly skipped: bridge VLAN filtering is not supported by this kernel");
    }
    // not a port: nothing
    assert!(h.port_vlans("br0").unwrap().is_empty());
}

/// A VLAN config on an existing bridge: the port VLAN request is what needs the feature.
#[test]
fn vlan_on_an_existing_bridge() {
    let env = TestEnv::new();
    env.host.ip(&["link", "add", BR, "type", "bridge"]);
    let ctr = env.container();
    let c = conf(&env, "1.0.0", json!({"vlan": 100, "ipam": ipam(&["10.1.2.0/24"])}));
    let out = add(&env, "vx", &ctr, &c);
    if kernel_has_vlan_filtering() {
        out.success();
        del(&env, "vx", ctr.path_str(), &c).success();
    } else {
        let msg = out.failure(999);
        assert!(msg.starts_with("failed to setup vlan tag on interface \"veth"), "{msg}");
        assert!(
            msg.ends_with("bridge VLAN filtering is not supported by this kernel (Operation not supported)"),
            "{msg}"
        );
        eprintln!("skipped the VLAN checks: bridge VLAN filtering is not supported by this kernel");
    }
    assert_clean(&env, "vx", Some(&ctr));
}

/// DEL leaves a container interface of another kind alone (it is not this plugin's) and
/// still releases the address.
#[test]
fn del_leaves_a_foreign_interface_alone() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(&env, "1.0.0", json!({"ipam": ipam(&["10.1.2.0/24"])}));
    add(&env, "fo", &ctr, &c).success();
    ctr.ip(&["link", "del", IFNAME]);
    ctr.ip(&["link", "add", IFNAME, "type", "bridge"]);
    del(&env, "fo", ctr.path_str(), &c).success();
    assert!(ctr.has_link(IFNAME));
    assert_eq!(links_of_kind(&ctr, "bridge"), vec![IFNAME.to_string()]);
    assert_clean(&env, "fo", None);
}

/// STATUS is forwarded to IPAM and fails when IPAM cannot be found.
#[test]
fn status_fails_without_its_ipam_plugin() {
    let env = TestEnv::new();
    let c = conf(&env, "1.1.0", json!({"ipam": {"type": "no-such-ipam"}}));
    let out = env.call("bridge").command("STATUS").config(&c).run();
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("no-such-ipam"), "{out:?}");
    let old = conf(&env, "1.0.0", json!({"ipam": {"type": "no-such-ipam"}}));
    let out = env.call("bridge").command("STATUS").config(&old).run();
    assert!(out.stdout.contains("config version does not allow STATUS"), "{out:?}");
}

/// The shipped example networks using the bridge run through cnitool: ADD, the gateways
/// answer, CHECK, DEL, nothing left (reservations kept in the test's dir).
#[test]
fn example_conflists_work_with_cnitool() {
    let cases = [
        ("10-bridge.conflist", "cnibox-bridge", "cnibox0", vec!["10.88.0.1"]),
        (
            "40-host-local-dualstack.conflist",
            "cnibox-dualstack",
            "cnibox1",
            vec!["10.90.0.1", "fd00:90::1"],
        ),
    ];
    for (file, network, bridge, gateways) in cases {
        let env = TestEnv::new();
        let ns = env.container();
        let path = format!("{}/plugins.d/{file}", env!("CARGO_MANIFEST_DIR"));
        let mut list: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(list["plugins"][0]["type"], "bridge");
        list["plugins"][0]["ipam"]["dataDir"] = json!(env.data_dir);
        let conf_dir = env.tmp.path().join("net.d");
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::write(conf_dir.join(file), list.to_string()).unwrap();
        let tool = |verb: &str| {
            env.tool("cnitool")
                .args([verb, network, ns.path_str()])
                .env("NETCONFPATH", conf_dir.to_str().unwrap())
                .env("CNI_PATH", env.bin_dir.to_str().unwrap())
                .env("CNI_CACHE_DIR", env.cache_dir.to_str().unwrap())
                .run()
        };
        let r = tool("add").success();
        assert_eq!(r["interfaces"][0]["name"], bridge, "{r}");
        for gw in &gateways {
            assert!(ns.ping(gw), "{file}: gateway {gw}");
        }
        tool("check").success();
        tool("del").success();
        assert!(!ns.has_link(IFNAME));
        assert!(host_veths(&env.host).is_empty());
        let held: Vec<_> = env
            .store(network)
            .keys()
            .filter(|k| k.parse::<std::net::IpAddr>().is_ok())
            .cloned()
            .collect();
        assert!(held.is_empty(), "{file}: {held:?}");
        assert!(!nft_ruleset(&env.host).contains(&format!("net: {network},")));
    }
}

/// DEL with a CNI_NETNS path that no longer holds a namespace (a runtime removed the bind
/// mount but left the file): nothing to remove inside, the rest is cleaned up.
#[test]
fn del_with_a_netns_path_that_is_a_plain_file() {
    let env = TestEnv::new();
    let ctr = env.container();
    let c = conf(
        &env,
        "1.0.0",
        json!({"ipMasq": true, "macspoofchk": true, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    add(&env, "pf", &ctr, &c).success();
    let plain = env.tmp.path().join("not-a-netns");
    std::fs::write(&plain, b"").unwrap();
    del(&env, "pf", plain.to_str().unwrap(), &c).success();
    // the pair is still there (its namespace lives on), everything else is gone
    assert!(ctr.has_link(IFNAME));
    ctr.ip(&["link", "del", IFNAME]);
    assert_clean(&env, "pf", Some(&ctr));
}

/// Regression (#18): a DEL for another attachment in the same namespace (a container that
/// joined it, a runtime rolling back a failed ADD) must not remove the interface ADD made.
/// With a prevResult the container link is proven by the MAC ADD reported, or by its veth
/// peer being the host end prevResult names (a chained tuning's DEL may have put back the
/// MAC from before its ADD); without one the name is all DEL has, as in the reference.
#[test]
fn del_removes_the_container_link_only_when_prev_result_proves_it() {
    let env = TestEnv::new();
    let c = conf(&env, "1.0.0", json!({"ipam": ipam(&["10.58.0.0/24"])}));
    let ns = env.container();
    let r = add(&env, "owner", &ns, &c).success();
    let mac = r["interfaces"][2]["mac"].as_str().unwrap().to_string();

    // another attachment's prevResult: other MAC, other host veth
    let mut other = r.clone();
    other["interfaces"][2]["mac"] = json!("02:11:22:33:44:55");
    other["interfaces"][1]["name"] = json!("vethnotours");
    let mut with_other = c.clone();
    with_other["prevResult"] = other;
    let out = env
        .call("bridge")
        .verb("DEL", "joiner", ns.path_str(), IFNAME)
        .config(&with_other)
        .run();
    out.success();
    assert!(
        out.stderr.contains("is not the interface ADD reported: left alone"),
        "{out:?}"
    );
    assert!(ns.has_link(IFNAME), "the owner's eth0 stays");
    assert_eq!(reservations(&env).len(), 1, "the owner's address stays reserved");

    // this attachment's prevResult with the container MAC changed since (tuning): the peer proves it
    let mut tuned = r.clone();
    tuned["interfaces"][2]["mac"] = json!("02:aa:bb:cc:dd:ee");
    let mut with_tuned = c.clone();
    with_tuned["prevResult"] = tuned;
    assert_ne!(mac, "02:aa:bb:cc:dd:ee");
    env.call("bridge")
        .verb("DEL", "owner", ns.path_str(), IFNAME)
        .config(&with_tuned)
        .run()
        .success();
    assert!(!ns.has_link(IFNAME));
    assert_clean(&env, "owner", Some(&ns));
}

/// A container on two networks whose IPAM both carry the default route (podman's networks
/// all do; or both set `isDefaultGateway`, whose routes name the gateway): the second ADD
/// succeeds and the container has a default route via each gateway (IPv4: two routes;
/// IPv6: one multipath route), CHECK of either attachment passes, and DEL of each removes
/// only its own next hop.
#[test]
fn a_container_on_two_networks_gets_a_default_route_from_each() {
    for v in ALL_VERSIONS {
        for (v6, default_gateway) in [(false, false), (true, false), (false, true), (true, true)] {
            let env = TestEnv::new();
            let ctr = env.container();
            let conf = |n: usize| {
                if default_gateway {
                    let mut c = network_conf(&env, v, n, v6, json!([]));
                    c["isDefaultGateway"] = json!(true);
                    c
                } else {
                    network_conf(&env, v, n, v6, default_route(n, v6))
                }
            };
            two_networks_case(&|| env.call("bridge"), &ctr, v, v6, &conf);
            assert!(host_veths(&env.host).is_empty());
        }
    }
}

/// An IPAM route to the network's own subnet goes in beside the kernel's subnet route
/// (for IPv4 both have metric 0), as the reference adds it.
#[test]
fn an_ipam_route_to_the_own_subnet_is_added_beside_the_kernel_route() {
    for v in ALL_VERSIONS {
        for v6 in [false, true] {
            let net = network(0, v6);
            let env = TestEnv::new();
            let ctr = env.container();
            let c = network_conf(&env, v, 0, v6, json!([{"dst": net.subnet}]));
            let r = env
                .call("bridge")
                .exec("ADD", "own", ctr.path_str(), net.ifname, &c)
                .success();
            assert_own_subnet_routed_both_ways(&ctr, &net, v);
            if check_allowed(v) {
                let mut c = c.clone();
                c["prevResult"] = r;
                env.call("bridge")
                    .exec("CHECK", "own", ctr.path_str(), net.ifname, &c)
                    .success();
            }
            env.call("bridge")
                .exec("DEL", "own", ctr.path_str(), net.ifname, &c)
                .success();
        }
    }
}

/// CHECK tolerates later additions (as the spec asks): after another interface appended a
/// next hop to the container's IPv6 default route, the route is multipath and CHECK still
/// finds the attachment's gateway among its next hops.
#[test]
fn check_passes_after_the_default_route_became_multipath() {
    for v in ALL_VERSIONS.iter().filter(|v| check_allowed(v)) {
        let env = TestEnv::new();
        let ctr = env.container();
        let c = network_conf(&env, v, 0, true, json!([{"dst": "::/0", "gw": "2001:db8:a::1"}]));
        multipath_check_case(&|| env.call("bridge"), &ctr, &c);
    }
}

/// On a machine without nft, iptables or any other sbin tool (hidden in a private mount
/// namespace of the call): masquerade over nf_tables needs none, and the iptables backend
/// fails ADD saying what is missing and what to install, leaving nothing behind. DEL needs
/// no tool either.
#[test]
fn masquerade_on_a_machine_without_firewall_tools() {
    for v in ALL_VERSIONS {
        for (backend, subnet, missing) in [
            (None, "10.1.2.0/24", None),
            (Some("iptables"), "10.1.2.0/24", Some("iptables-restore")),
            (Some("iptables"), "2001:db8:a::/64", Some("ip6tables-restore")),
        ] {
            let env = TestEnv::new();
            let ctr = env.container();
            let mut c = conf(
                &env,
                v,
                json!({"isGateway": true, "ipMasq": true, "ipam": ipam(&[subnet])}),
            );
            if let Some(b) = backend {
                c["ipMasqBackend"] = b.into();
            }
            let out = env
                .call("bridge")
                .without_sbin_tools()
                .exec("ADD", "bare", ctr.path_str(), IFNAME, &c);
            match missing {
                None => {
                    out.success();
                    assert!(nft_ruleset(&env.host).contains("masquerade comment"), "{v}");
                }
                Some(tool) => assert_eq!(out.failure(999), common::missing_iptables_message(tool), "{v}"),
            }
            env.call("bridge")
                .without_sbin_tools()
                .exec("DEL", "bare", ctr.path_str(), IFNAME, &c)
                .success();
            assert_clean(&env, "bare", Some(&ctr));
        }
    }
}

/// DEL in every situation a runtime produces, in every spec version: the shared matrix
/// (`reliability::del_matrix`).
#[test]
fn del_matrix() {
    use crate::reliability::del_matrix::{self, Attachment, Subject};
    del_matrix::run(Subject {
        applet: "bridge",
        keys: json!({"bridge": "dmbr0", "isGateway": true, "ipMasq": true}),
        attachment: Attachment::InterfaceOnBridge("dmbr0"),
    });
}

/// The keys every config shares, mistyped, answered as the reference answers them.
#[test]
fn common_keys() {
    crate::common_keys::same_as_the_reference("bridge");
}

/// The syscalls of one bridge call, as `strace -f -e trace=open,openat,sendto` prints them
/// (netlink payloads as hex escapes; strings up to 400 bytes).
fn traced(env: &TestEnv, verb: &str, id: &str, ns: &Netns, c: &Value) -> String {
    traced_calls(env, verb, id, ns, c, "open,openat,sendto").0
}

/// One call under `strace -f` of `syscalls`: the trace (payloads to 400 bytes) and the result.
fn traced_calls(env: &TestEnv, verb: &str, id: &str, ns: &Netns, c: &Value, syscalls: &str) -> (String, Value) {
    let log = env.tmp.path().join(common::unique("strace"));
    let result = env
        .call("bridge")
        .verb(verb, id, ns.path_str(), IFNAME)
        .config(c)
        .run_under(&[
            "strace",
            "-f",
            "-qq",
            "-e",
            &format!("trace={syscalls}"),
            "-s",
            "400",
            "-o",
            log.to_str().unwrap(),
        ])
        .success();
    (std::fs::read_to_string(&log).unwrap(), result)
}

/// `s` as strace escapes netlink payload bytes.
fn strace_hex(s: &str) -> String {
    s.bytes().map(|b| format!("\\x{b:02x}")).collect()
}

/// An ADD of a new attachment and a DEL of one cnibox made read no rule of the
/// masquerade table beyond its three entry rules (`postrouting`): the index of
/// attachments answers for its attachment in one lookup, and the DEL deletes by the
/// handles it holds. Before, every ADD dumped the whole table and every DEL all of
/// `masq_checks`, one rule per container on the node: the part of both that grew as the
/// node filled.
#[test]
fn add_and_del_read_no_masquerade_rules_of_other_attachments() {
    let env = TestEnv::new();
    let c = conf(
        &env,
        "1.1.0",
        json!({"isGateway": true, "ipMasq": true, "ipMasqBackend": "nftables", "ipam": ipam(&["10.1.2.0/24"])}),
    );
    let (a, b, d) = (env.container(), env.container(), env.container());
    add(&env, "first", &a, &c).success();
    add(&env, "second", &b, &c).success();
    let entry_chain = strace_hex("postrouting");
    let rule_dumps = |trace: &str| -> Vec<String> {
        trace
            .lines()
            .filter(|l| l.contains("NFT_MSG_GETRULE") && !l.contains(&entry_chain))
            .map(str::to_string)
            .collect()
    };
    let add_trace = traced(&env, "ADD", "third", &d, &c);
    assert_eq!(rule_dumps(&add_trace), Vec::<String>::new(), "ADD");
    assert!(add_trace.contains("NFT_MSG_GETSETELEM"), "asks the index:\n{add_trace}");
    let del_trace = traced(&env, "DEL", "third", &d, &c);
    assert_eq!(rule_dumps(&del_trace), Vec::<String>::new(), "DEL");
    let nft = nft_ruleset(&env.host);
    assert!(!nft.contains("id: third\""), "{nft}");
    assert!(nft.contains("id: first\"") && nft.contains("id: second\""), "{nft}");
    for (id, ns) in [("first", &a), ("second", &b)] {
        del(&env, id, ns.path_str(), &c).success();
    }
    assert!(!nft_ruleset(&env.host).contains("masquerade comment"));
}

/// Once the container end is up, an ADD asks the kernel for no link: every RTM_GETLINK
/// takes the RTNL lock, which the kernel then holds to announce the new interface over IPv6
/// to every port of the bridge (the longer, the fuller the bridge). The port's coming up is
/// heard from the link notifications (subscribed before), and the result still carries the
/// MACs the kernel holds. Before, three lookups came after the container end's link-up.
#[test]
fn no_link_is_asked_for_after_the_container_end_comes_up() {
    let env = TestEnv::new();
    let c = conf(
        &env,
        "1.1.0",
        json!({"isGateway": true, "ipMasq": true, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    let (a, b) = (env.container(), env.container());
    add(&env, "first", &a, &c).success();
    let (trace, result) = traced_calls(&env, "ADD", "second", &b, &c, "sendto,setsockopt");
    let lines: Vec<&str> = trace.lines().collect();
    // the container socket's messages are not decoded by name (strace cannot see it from
    // the host): RTM_NEWLINK is 0x10, RTM_GETLINK 0x12; the link-up request carries
    // ifi_flags = ifi_change = IFF_UP
    let up = r#"\x01\x00\x00\x00\x01\x00\x00\x00""#;
    let link_up = lines
        .iter()
        .rposition(|l| l.contains("nlmsg_type=0x10 ") && l.contains(up))
        .unwrap_or_else(|| panic!("no link-up of the container end:\n{trace}"));
    let asked: Vec<&&str> = lines[link_up..]
        .iter()
        .filter(|l| l.contains("RTM_GETLINK") || l.contains("nlmsg_type=0x12 "))
        .collect();
    assert!(asked.is_empty(), "{asked:#?}");
    let subscribed = lines[..link_up]
        .iter()
        .any(|l| l.contains("NETLINK_ADD_MEMBERSHIP") && l.contains("[1]"));
    assert!(subscribed, "subscribed to RTNLGRP_LINK before the link-up:\n{trace}");
    // the result's MACs are the kernel's
    let ifaces = result["interfaces"].as_array().unwrap();
    let host_mac = |dev: &str| env.host.ip_json(&["link", "show", "dev", dev])[0]["address"].clone();
    assert_eq!(ifaces[0]["mac"], host_mac(ifaces[0]["name"].as_str().unwrap()));
    assert_eq!(ifaces[1]["mac"], host_mac(ifaces[1]["name"].as_str().unwrap()));
    assert_eq!(
        ifaces[2]["mac"],
        b.ip_json(&["link", "show", "dev", IFNAME])[0]["address"]
    );
    assert_eq!(
        link_details(&env.host, ifaces[1]["name"].as_str().unwrap())["operstate"],
        "UP"
    );
    for (id, ns) in [("first", &a), ("second", &b)] {
        del(&env, id, ns.path_str(), &c).success();
    }
}

/// The container's `arp_notify` is set over netlink (RTM_SETLINK, IFLA_INET_CONF), and
/// the forwarding switch read with RTM_GETNETCONF: an ADD opens no `/proc/sys` path for
/// either, and both read 1 in /proc as the reference leaves them. Before, each was a
/// lookup in /proc/sys/net, whose cost grows with the namespaces on the node.
#[test]
fn ipv4_device_settings_and_forwarding_go_over_netlink() {
    let env = TestEnv::new();
    let c = conf(
        &env,
        "1.1.0",
        json!({"isGateway": true, "ipam": ipam(&["10.1.2.0/24"])}),
    );
    let (a, b) = (env.container(), env.container());
    add(&env, "first", &a, &c).success(); // turns forwarding on
    let trace = traced(&env, "ADD", "second", &b, &c);
    let opened: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains(" open(") || l.contains(" openat("))
        .collect();
    for leaf in ["arp_notify", "ip_forward"] {
        assert!(!opened.iter().any(|l| l.contains(leaf)), "{leaf}: {opened:#?}");
    }
    assert!(trace.contains("RTM_GETNETCONF"), "{trace}");
    assert_eq!(b.sysctl("net/ipv4/conf/eth0/arp_notify"), "1");
    assert_eq!(env.host.sysctl("net/ipv4/ip_forward"), "1");
    for (id, ns) in [("first", &a), ("second", &b)] {
        del(&env, id, ns.path_str(), &c).success();
    }
}
