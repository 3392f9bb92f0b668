//! The sample configs of each applet: between them a value for every key the applet's code
//! reads (the registry says which; `coverage` fails on a key without one and on a sample
//! key nothing reads), each value chosen so that a misread key shows in the result or the
//! kernel state where it can. A key's cases come from the first sample that holds it, so a
//! key another one overrides (`args.cni.mac` under `runtimeConfig.mac`) gets a sample of its
//! own.
//!
//! Placeholders: `$DATA` is the side's host-local data dir, `$TMP` its temp dir; the value
//! `@result` of `prevResult` is absent from ADD and is ADD's result in CHECK and DEL, `@prev`
//! is the earlier plugin's result in ADD and this plugin's ADD result in CHECK and DEL.
use crate::common::{run_ok, TestEnv};
use serde_json::{json, Value};
use std::sync::OnceLock;

use super::registry::Records;

/// Who answers a sample's spellings.
pub enum Oracle {
    /// The reference 1.1.1, given the same config.
    Reference,
    /// cnibox's own canonical run of the sample, because the reference cannot give its
    /// outcome (the reason): every key first held by such a sample must be in [`NEWER`].
    Cnibox(&'static str),
}

pub struct Sample {
    pub name: &'static str,
    pub oracle: Oracle,
    pub config: Value,
}

/// What of the kernel and disk state a run of the applet can change, beyond the links,
/// addresses and routes of the host and container namespaces (always compared).
pub struct StateParts {
    pub host_sysctls: &'static [&'static str],
    pub container_sysctls: &'static [&'static str],
    /// qdiscs of both namespaces and the filters on the host's ingress qdiscs
    pub tc: bool,
    /// `iptables-save`/`ip6tables-save` of the host
    pub iptables: bool,
    /// the host's nf_tables tables other than iptables-nft's
    pub nft: bool,
    /// `net.ipv4.conf.<link>.route_localnet` of every host link
    pub route_localnet: bool,
    /// the policy routing rules of both families in both namespaces
    pub rules: bool,
    /// directories (with placeholders) whose files are compared, name → content
    pub files: &'static [&'static str],
}

/// Links, addresses and routes only.
const LINKS_ADDRS_ROUTES: StateParts = StateParts {
    host_sysctls: &[],
    container_sysctls: &[],
    tc: false,
    iptables: false,
    nft: false,
    route_localnet: false,
    rules: false,
    files: &[],
};

/// A documented difference from v1.1.1 that shows in runs of an applet (the README's
/// "Differences", or a reference bug fixed upstream).
pub enum Documented {
    /// What it touches is masked in both outcomes.
    Masked(&'static str, fn(&mut Value)),
    /// The reference's outcome is turned into what cnibox does instead.
    Instead(&'static str, fn(&mut Value)),
}

impl Documented {
    pub fn why(&self) -> &'static str {
        match self {
            Documented::Masked(why, _) | Documented::Instead(why, _) => why,
        }
    }
}

/// Every link of both namespaces in the states after ADD and after DEL.
fn each_link(outcome: &mut Value, f: &dyn Fn(&mut Value)) {
    for state in ["after_add", "after_del"] {
        for ns in ["host", "container"] {
            if let Some(links) = outcome
                .get_mut(state)
                .and_then(|s| s.get_mut(ns))
                .and_then(|n| n.get_mut("links"))
                .and_then(Value::as_array_mut)
            {
                links.iter_mut().for_each(f);
            }
        }
    }
}

fn mask_txqlen_of(kind: &'static str) -> impl Fn(&mut Value) {
    move |link: &mut Value| {
        if link["kind"] == kind {
            link["txqlen"] = json!("<documented>");
        }
    }
}

/// Whether ADD succeeded in an outcome (its result is there).
fn added(outcome: &Value) -> bool {
    outcome["add"].get("result").is_some()
}

const VETH_TXQLEN: Documented = Documented::Masked(
    "v1.1.1 makes veths with txqueuelen 0 (fixed upstream in 3a49cff1; see veth.rs)",
    |o| each_link(o, &mask_txqlen_of("veth")),
);

const MACVLAN_TXQLEN: Documented = Documented::Masked(
    "v1.1.1 makes the macvlan with txqueuelen 0 (fixed upstream in 3a49cff1)",
    |o| each_link(o, &mask_txqlen_of("macvlan")),
);

const BANDWIDTH_DEL_CLEARS_THE_VETH: Documented = Documented::Masked(
    "README: bandwidth DEL also removes the host veth's qdiscs (the reference leaves them for \
     the veth's deletion)",
    |o| {
        let Some(tc) = o.pointer_mut("/after_del/host/tc") else {
            return;
        };
        if let Some(q) = tc["qdiscs"].as_array_mut() {
            q.retain(|q| q["dev"] != "<veth>");
        }
        if let Some(f) = tc["filters"].as_object_mut() {
            f.remove("<veth>");
        }
    },
);

const BRIDGE_L2_CHECK_PASSES: Documented = Documented::Instead(
    "README: bridge CHECK works for L2 configs (the reference delegates CHECK to an empty IPAM \
     type and fails)",
    |o| {
        let result = &o["add"]["result"];
        // 0.1.0 and 0.2.0 results have ip4/ip6 instead
        let l2 =
            result["ips"].as_array().map_or(true, Vec::is_empty) && result["ip4"].is_null() && result["ip6"].is_null();
        if added(o) && l2 {
            o["check"] = json!(0);
        }
    },
);

const BANDWIDTH_CHECK_WITHOUT_LIMITS_PASSES: Documented = Documented::Instead(
    "README: bandwidth CHECK without limits succeeds (v1.1.1 crashes)",
    |o| {
        if o["msgs"]["check"].as_str().is_some_and(|m| m.contains("panic")) {
            o["check"] = json!(0);
        }
    },
);

const PORTMAP_CHECK_PASSES: Documented = Documented::Instead(
    "README: portmap CHECK passes on what ADD made (v1.1.1's looks for the IPv4 rules in \
     ip6tables too and fails every pod)",
    |o| {
        if added(o) {
            o["check"] = json!(0);
        }
    },
);

pub struct Applet {
    /// cnibox's applet.
    pub name: &'static str,
    /// The Debian reference binary in /usr/lib/cni.
    pub reference: &'static str,
    pub ifname: &'static str,
    /// Whether the plugin works in a container namespace (host-local does not).
    pub container: bool,
    /// A chained plugin's earlier plugin (cnibox's, the same on both sides): its config.
    pub earlier: Option<fn() -> Value>,
    /// Whether the code cases share one container (with the earlier plugin's attachment,
    /// for a chained applet) instead of making their own: each case's DEL, or the clean-up
    /// DEL after a refused ADD, undoes what the case made.
    pub share_container: bool,
    /// The kernel module the applet's link kind needs, which a kernel may lack (this one has
    /// no `8021q`, `ipvlan` or `vrf`): ADD cannot succeed on either side without it, so only
    /// codes are compared (no spelling test), and a code case where both sides fail for want
    /// of the module says nothing about decoding and is left out (counted).
    pub module: Option<&'static str>,
    /// Run once in each side's world before any call.
    pub host_setup: fn(&TestEnv),
    pub state: StateParts,
    pub documented: &'static [Documented],
    /// Keys the applet's config holds for host-local, which it delegates to (the reference
    /// execs host-local with the same config): their cases run in host-local's suite.
    /// `x.*` is everything below `x`; `x` is `x` and everything below it. `ipam.type` is
    /// always the plugin's own (every plugin decodes `types.NetConf`).
    pub delegated: &'static [&'static str],
    pub samples: fn() -> Vec<Sample>,
    /// The keys the code reads, collected once per test process.
    pub records: OnceLock<Records>,
}

/// Keys cnibox reads that Debian's v1.1.1 lacks (added to the reference later, or cnibox's
/// own): the reference ignores them, so a mistyped one must fail cnibox's ADD with Go's
/// decode error (as the current reference does) instead of the reference's answer, and a
/// sample whose outcome depends on one is answered by cnibox's canonical run
/// ([`Oracle::Cnibox`]). Checked against the reference binaries: none may have the key's
/// JSON tag.
pub const NEWER: &[(&str, &str, &str)] = &[
    ("bridge", "ipMasqBackend", "reference v1.6"),
    ("bridge", "vlanTrunk", "reference v1.3"),
    ("bridge", "vlanTrunk[].id", "reference v1.3"),
    ("bridge", "vlanTrunk[].minID", "reference v1.3"),
    ("bridge", "vlanTrunk[].maxID", "reference v1.3"),
    ("bridge", "preserveDefaultVlan", "reference v1.3"),
    ("bridge", "disableContainerInterface", "reference v1.5"),
    ("bridge", "portIsolation", "reference v1.6"),
    ("veth", "ipMasqBackend", "reference v1.6"),
    ("macvlan", "linkInContainer", "reference v1.3"),
    ("macvlan", "bcqueuelen", "reference v1.6"),
    ("host-local", "ipam.routes[].mtu", "types.Route, cni v1.2"),
    ("host-local", "ipam.routes[].advmss", "types.Route, cni v1.2"),
    ("host-local", "ipam.routes[].priority", "types.Route, cni v1.2"),
    ("host-local", "ipam.routes[].scope", "types.Route, cni v1.2"),
    ("host-local", "ipam.routes[].table", "types.Route, cni v1.2"),
    (
        "host-local",
        "ipam.releaseAfterReboot",
        "cnibox's own (an earlier boot's reservations)",
    ),
    ("tuning", "txQLen", "reference v1.3"),
    ("tuning", "args.cni.txQLen", "reference v1.3"),
    ("portmap", "backend", "reference v1.6 (nftables)"),
    ("portmap", "masqAll", "reference v1.6"),
    (
        "firewall",
        "dataDir",
        "cnibox's own (the iptables backend's per-attachment records)",
    ),
    ("static", "ipam.routes[].mtu", "types.Route, cni v1.2"),
    ("static", "ipam.routes[].advmss", "types.Route, cni v1.2"),
    ("static", "ipam.routes[].priority", "types.Route, cni v1.2"),
    ("static", "ipam.routes[].scope", "types.Route, cni v1.2"),
    ("static", "ipam.routes[].table", "types.Route, cni v1.2"),
    ("vlan", "linkInContainer", "reference v1.3"),
    ("ipvlan", "linkInContainer", "reference v1.3"),
    ("sbr", "table", "reference v1.6"),
    ("sbr", "gateways", "reference after v1.9.1 (025aca14)"),
    ("sbr", "addSourceHints", "reference after v1.9.1 (025aca14)"),
];

/// The reason `key` of `applet` is in [`NEWER`].
pub fn newer(applet: &str, key: &str) -> Option<&'static str> {
    NEWER
        .iter()
        .find(|(a, k, _)| *a == applet && *k == key)
        .map(|(_, _, why)| *why)
}

/// Merge `extra` over `base` (objects member by member).
fn with(mut base: Value, extra: Value) -> Value {
    crate::plugin_state::merge(&mut base, &extra);
    base
}

/// The members of the reference's `types.NetConf` that every plugin decodes, each with a
/// value (`prev`: the placeholder for `prevResult`).
fn net_conf(plugin_type: &str, prev: &str) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "keys",
        "type": plugin_type,
        "capabilities": {"mac": true},
        "ipam": {"type": "host-local"},
        "dns": {"nameservers": ["192.0.2.53"], "domain": "keys.example", "search": ["keys.example"], "options": ["ndots:2"]},
        "prevResult": prev,
    })
}

/// The least a sample of a plugin needs besides its own keys.
fn minimal(plugin_type: &str, prev: &str) -> Value {
    json!({"cniVersion": "1.0.0", "name": "keys", "type": plugin_type, "prevResult": prev})
}

fn host_local(subnet: &str) -> Value {
    json!({"type": "host-local", "subnet": subnet, "dataDir": "$DATA"})
}

fn nothing(_: &TestEnv) {}

/// The part of a delegating plugin's config that is host-local's.
const HOST_LOCAL_IPAM: &str = "ipam.*";

pub static BRIDGE: Applet = Applet {
    name: "bridge",
    reference: "bridge",
    ifname: "eth0",
    container: true,
    earlier: None,
    share_container: true,
    module: None,
    host_setup: nothing,
    state: StateParts {
        host_sysctls: &["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"],
        container_sysctls: &[
            "net/ipv6/conf/eth0/accept_dad",
            "net/ipv6/conf/eth0/enhanced_dad",
            "net/ipv4/conf/eth0/arp_notify",
        ],
        tc: false,
        iptables: true,
        nft: true,
        route_localnet: false,
        rules: false,
        files: &["$DATA/keys"],
    },
    documented: &[VETH_TXQLEN, BRIDGE_L2_CHECK_PASSES],
    delegated: &[
        HOST_LOCAL_IPAM,
        "runtimeConfig.ipRanges",
        "runtimeConfig.ips",
        "args.cni.ips",
    ],
    samples: || {
        vec![
            Sample {
                name: "gateway, masquerade, MTU, hairpin, DAD, spoof check, runtime MAC",
                oracle: Oracle::Reference,
                config: with(
                    net_conf("bridge", "@result"),
                    json!({
                        "bridge": "keysbr0", "isGateway": true, "isDefaultGateway": true, "forceAddress": true,
                        "ipMasq": true, "ipMasqBackend": "iptables", "mtu": 1400, "hairpinMode": true,
                        "enabledad": true, "macspoofchk": true,
                        "ipam": host_local("10.66.0.0/24"),
                        "runtimeConfig": {"mac": "c2:aa:00:00:00:01"},
                    }),
                ),
            },
            Sample {
                name: "promiscuous bridge (not with hairpin)",
                oracle: Oracle::Reference,
                config: with(
                    minimal("bridge", "@result"),
                    json!({"bridge": "keysbr1", "promiscMode": true, "ipam": host_local("10.67.0.0/24")}),
                ),
            },
            Sample {
                name: "MAC from args.cni (runtimeConfig.mac would override it)",
                oracle: Oracle::Reference,
                config: with(
                    minimal("bridge", "@result"),
                    json!({"bridge": "keysbr0", "args": {"cni": {"mac": "c2:aa:00:00:00:02"}}, "ipam": host_local("10.66.0.0/24")}),
                ),
            },
            Sample {
                name: "VLAN (no VLAN filtering in this kernel: both fail)",
                oracle: Oracle::Reference,
                config: with(minimal("bridge", "@result"), json!({"bridge": "keysbr2", "vlan": 5})),
            },
            Sample {
                name: "VLAN trunks (no VLAN filtering in this kernel: cnibox fails)",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(
                    minimal("bridge", "@result"),
                    json!({"bridge": "keysbr3", "vlanTrunk": [{"id": 5}, {"minID": 10, "maxID": 20}], "preserveDefaultVlan": false}),
                ),
            },
            Sample {
                name: "isolated port, container interface left down",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(
                    minimal("bridge", "@result"),
                    json!({"bridge": "keysbr4", "disableContainerInterface": true, "portIsolation": true}),
                ),
            },
        ]
    },
    records: OnceLock::new(),
};

pub static VETH: Applet = Applet {
    name: "veth",
    reference: "ptp",
    ifname: "eth0",
    container: true,
    earlier: None,
    share_container: true,
    module: None,
    host_setup: nothing,
    state: StateParts {
        host_sysctls: &["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"],
        container_sysctls: &[],
        tc: false,
        iptables: true,
        nft: false,
        route_localnet: false,
        rules: false,
        files: &["$DATA/keys"],
    },
    documented: &[VETH_TXQLEN],
    delegated: &[HOST_LOCAL_IPAM, "runtimeConfig", "args"],
    samples: || {
        vec![Sample {
            name: "masquerade, MTU",
            oracle: Oracle::Reference,
            config: with(
                net_conf("ptp", "@result"),
                json!({"ipMasq": true, "ipMasqBackend": "iptables", "mtu": 1400, "ipam": host_local("10.66.0.0/24")}),
            ),
        }]
    },
    records: OnceLock::new(),
};

/// macvlan's master in the host namespace, and its peer.
const MASTER: &str = "keysm0";

/// [`MASTER`] and its peer, up.
fn master_veth(env: &TestEnv) {
    env.host
        .ip(&["link", "add", MASTER, "type", "veth", "peer", "name", "keysm1"]);
    env.host.ip(&["link", "set", MASTER, "up"]);
    env.host.ip(&["link", "set", "keysm1", "up"]);
}

pub static MACVLAN: Applet = Applet {
    name: "macvlan",
    reference: "macvlan",
    ifname: "eth0",
    container: true,
    earlier: None,
    share_container: true,
    module: None,
    host_setup: master_veth,
    state: StateParts {
        files: &["$DATA/keys"],
        ..LINKS_ADDRS_ROUTES
    },
    documented: &[MACVLAN_TXQLEN],
    delegated: &[HOST_LOCAL_IPAM, "runtimeConfig.ipRanges", "runtimeConfig.ips", "args"],
    samples: || {
        vec![
            Sample {
                name: "master, mode, MTU, MAC",
                oracle: Oracle::Reference,
                config: with(
                    net_conf("macvlan", "@result"),
                    json!({"master": MASTER, "mode": "private", "mtu": 1400, "mac": "c2:cc:00:00:00:01",
                           "ipam": host_local("10.66.0.0/24")}),
                ),
            },
            Sample {
                name: "runtime MAC (it overrides mac)",
                oracle: Oracle::Reference,
                config: with(
                    minimal("macvlan", "@result"),
                    json!({"master": MASTER, "runtimeConfig": {"mac": "c2:cc:00:00:00:02"}, "ipam": host_local("10.66.0.0/24")}),
                ),
            },
            Sample {
                name: "broadcast queue length",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(
                    minimal("macvlan", "@result"),
                    json!({"master": MASTER, "bcqueuelen": 100, "ipam": host_local("10.66.0.0/24")}),
                ),
            },
            Sample {
                name: "master in the container (there is none there: ADD fails, unless the key is missed)",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(
                    minimal("macvlan", "@result"),
                    json!({"master": MASTER, "linkInContainer": true, "ipam": host_local("10.66.0.0/24")}),
                ),
            },
        ]
    },
    records: OnceLock::new(),
};

pub static HOST_LOCAL: Applet = Applet {
    name: "host-local",
    reference: "host-local",
    ifname: "eth0",
    container: false,
    earlier: None,
    share_container: false,
    module: None,
    host_setup: |env| {
        std::fs::write(
            env.tmp.path().join("resolv.conf"),
            "nameserver 192.0.2.53\ndomain keys.example\nsearch keys.example\noptions ndots:2\n",
        )
        .unwrap();
    },
    state: StateParts {
        files: &["$DATA/keys"],
        ..LINKS_ADDRS_ROUTES
    },
    documented: &[],
    delegated: &[],
    samples: || {
        let range = |net: &str, start: &str, end: &str, gw: &str| {
            json!({"subnet": format!("{net}.0/24"), "rangeStart": format!("{net}.{start}"),
                   "rangeEnd": format!("{net}.{end}"), "gateway": format!("{net}.{gw}")})
        };
        vec![
            Sample {
                // three range sets (runtimeConfig's, the old-style single range, ranges),
                // an address requested in two of them
                name: "every kind of range, requested addresses, routes, resolv.conf",
                oracle: Oracle::Reference,
                config: json!({
                    "cniVersion": "1.0.0", "name": "keys",
                    "ipam": with(
                        range("10.66.0", "10", "20", "1"),
                        json!({"type": "host-local", "Name": "keys-overwritten",
                               "ranges": [[range("10.67.0", "30", "40", "254")]],
                               "routes": [{"dst": "192.0.2.0/24", "gw": "10.66.0.1"}],
                               "dataDir": "$DATA", "resolvConf": "$TMP/resolv.conf"}),
                    ),
                    "runtimeConfig": {"ipRanges": [[range("10.68.0", "50", "60", "254")]], "ips": ["10.68.0.55"]},
                    "args": {"cni": {"ips": ["10.67.0.35"]}},
                }),
            },
            Sample {
                name: "route attributes",
                oracle: Oracle::Cnibox("keys v1.1.1's types.Route lacks"),
                config: json!({
                    "cniVersion": "1.0.0", "name": "keys",
                    "ipam": {"type": "host-local", "subnet": "10.69.0.0/24", "dataDir": "$DATA",
                             "routes": [{"dst": "192.0.2.0/24", "gw": "10.69.0.1", "mtu": 1400, "advmss": 1360,
                                         "priority": 5, "scope": 0, "table": 100}]},
                }),
            },
            Sample {
                // it shows only after a reboot: its null and mistyped cases are what count
                name: "keeping an earlier boot's reservations",
                oracle: Oracle::Cnibox("a key of cnibox's own"),
                config: json!({
                    "cniVersion": "1.0.0", "name": "keys",
                    "ipam": {"type": "host-local", "subnet": "10.69.0.0/24", "dataDir": "$DATA", "releaseAfterReboot": false},
                }),
            },
        ]
    },
    records: OnceLock::new(),
};

pub static LOOPBACK: Applet = Applet {
    name: "loopback",
    reference: "loopback",
    ifname: "lo",
    container: true,
    earlier: None,
    share_container: true,
    module: None,
    host_setup: nothing,
    state: LINKS_ADDRS_ROUTES,
    documented: &[],
    delegated: &[],
    samples: || {
        vec![Sample {
            name: "the types.NetConf keys",
            oracle: Oracle::Reference,
            config: net_conf("loopback", "@result"),
        }]
    },
    records: OnceLock::new(),
};

/// A ptp attachment, the interface chained plugins work on.
fn earlier_ptp() -> Value {
    json!({"cniVersion": "1.0.0", "name": "keys-earlier", "type": "ptp",
           "ipam": {"type": "host-local", "subnet": "10.70.0.0/24", "dataDir": "$TMP/earlier"}})
}

pub static TUNING: Applet = Applet {
    name: "tuning",
    reference: "tuning",
    ifname: "eth0",
    container: true,
    earlier: Some(earlier_ptp),
    share_container: true,
    module: None,
    host_setup: nothing,
    state: StateParts {
        container_sysctls: &["net/ipv4/conf/eth0/arp_notify", "net/ipv4/conf/eth0/arp_ignore"],
        files: &["$TMP/tuning"],
        ..LINKS_ADDRS_ROUTES
    },
    documented: &[],
    delegated: &[],
    samples: || {
        let sysctl = json!({"net.ipv4.conf.eth0.arp_notify": "1"});
        vec![
            Sample {
                name: "sysctl, MAC, MTU, promisc, allmulti",
                oracle: Oracle::Reference,
                config: with(
                    net_conf("tuning", "@prev"),
                    json!({"sysctl": sysctl, "mac": "c2:dd:00:00:00:01", "mtu": 1300, "promisc": true,
                           "allmulti": true, "dataDir": "$TMP/tuning"}),
                ),
            },
            Sample {
                name: "runtime MAC",
                oracle: Oracle::Reference,
                config: with(
                    minimal("tuning", "@prev"),
                    json!({"runtimeConfig": {"mac": "c2:dd:00:00:00:02"}, "dataDir": "$TMP/tuning"}),
                ),
            },
            Sample {
                // v1.1.1 panics on args.cni.sysctl without a top-level sysctl (README)
                name: "args.cni (each overrides the config's)",
                oracle: Oracle::Reference,
                config: with(
                    minimal("tuning", "@prev"),
                    json!({"sysctl": sysctl, "dataDir": "$TMP/tuning",
                           "args": {"cni": {"sysctl": {"net.ipv4.conf.eth0.arp_ignore": "1"}, "mac": "c2:dd:00:00:00:03",
                                            "mtu": 1200, "promisc": true, "allmulti": true}}}),
                ),
            },
            Sample {
                name: "transmit queue length",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(
                    minimal("tuning", "@prev"),
                    json!({"txQLen": 500, "dataDir": "$TMP/tuning"}),
                ),
            },
            Sample {
                name: "transmit queue length from args.cni",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(
                    minimal("tuning", "@prev"),
                    json!({"args": {"cni": {"txQLen": 400}}, "dataDir": "$TMP/tuning"}),
                ),
            },
        ]
    },
    records: OnceLock::new(),
};

pub static BANDWIDTH: Applet = Applet {
    name: "bandwidth",
    reference: "bandwidth",
    ifname: "eth0",
    container: true,
    earlier: Some(earlier_ptp),
    // the reference's DEL leaves the host veth's qdiscs (documented below): the next ADD
    // on that veth would fail
    share_container: false,
    module: None,
    host_setup: nothing,
    state: StateParts {
        tc: true,
        ..LINKS_ADDRS_ROUTES
    },
    documented: &[BANDWIDTH_DEL_CLEARS_THE_VETH, BANDWIDTH_CHECK_WITHOUT_LIMITS_PASSES],
    delegated: &[],
    samples: || {
        vec![
            Sample {
                name: "static limits",
                oracle: Oracle::Reference,
                config: with(
                    net_conf("bandwidth", "@prev"),
                    json!({"ingressRate": 8000000, "ingressBurst": 16000000, "egressRate": 4000000, "egressBurst": 8000000}),
                ),
            },
            Sample {
                name: "runtime limits",
                oracle: Oracle::Reference,
                config: with(
                    minimal("bandwidth", "@prev"),
                    json!({"runtimeConfig": {"bandwidth": {"ingressRate": 2000000, "ingressBurst": 4000000,
                                                           "egressRate": 1000000, "egressBurst": 2000000}}}),
                ),
            },
        ]
    },
    records: OnceLock::new(),
};

/// The chain a portmap sample names as `externalSetMarkChain`, made in each host namespace.
const MARK_CHAIN: &str = "KEYS-MARK";

pub static PORTMAP: Applet = Applet {
    name: "portmap",
    reference: "portmap",
    ifname: "eth0",
    container: true,
    earlier: Some(earlier_ptp),
    share_container: true,
    module: None,
    host_setup: |env| {
        for tool in ["iptables", "ip6tables"] {
            run_ok(env.host.command(tool).args(["-w", "-t", "nat", "-N", MARK_CHAIN]));
        }
    },
    state: StateParts {
        iptables: true,
        route_localnet: true,
        ..LINKS_ADDRS_ROUTES
    },
    documented: &[PORTMAP_CHECK_PASSES],
    delegated: &[],
    samples: || {
        let mappings = json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "198.51.100.1"}]});
        vec![
            Sample {
                name: "SNAT, mark bit, extra conditions, a mapping",
                oracle: Oracle::Reference,
                config: with(
                    net_conf("portmap", "@prev"),
                    // snat and markMasqBit other than their defaults (true, 13), so they show
                    json!({"snat": false, "markMasqBit": 14, "conditionsV4": ["-s", "192.0.2.0/24"],
                           "conditionsV6": ["-s", "2001:db8::/32"], "backend": "iptables", "runtimeConfig": mappings}),
                ),
            },
            Sample {
                name: "an external mark chain (not with markMasqBit)",
                oracle: Oracle::Reference,
                config: with(
                    minimal("portmap", "@prev"),
                    json!({"externalSetMarkChain": MARK_CHAIN, "backend": "iptables", "runtimeConfig": mappings}),
                ),
            },
            Sample {
                name: "masquerade everything",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(
                    minimal("portmap", "@prev"),
                    json!({"masqAll": true, "backend": "iptables", "runtimeConfig": mappings}),
                ),
            },
        ]
    },
    records: OnceLock::new(),
};

/// A bridge attachment with a gateway: firewall's `same-bridge` policy needs the bridge.
fn earlier_bridge() -> Value {
    json!({"cniVersion": "1.0.0", "name": "keys-earlier", "type": "bridge", "bridge": "keysbr9", "isGateway": true,
           "ipam": {"type": "host-local", "subnet": "10.71.0.0/24", "dataDir": "$TMP/earlier"}})
}

pub static FIREWALL: Applet = Applet {
    name: "firewall",
    reference: "firewall",
    ifname: "eth0",
    container: true,
    earlier: Some(earlier_bridge),
    share_container: true,
    module: None,
    host_setup: nothing,
    state: StateParts {
        iptables: true,
        ..LINKS_ADDRS_ROUTES
    },
    documented: &[],
    delegated: &[],
    samples: || {
        vec![Sample {
            name: "iptables backend, admin chain, same-bridge policy",
            oracle: Oracle::Reference,
            config: with(
                net_conf("firewall", "@prev"),
                json!({"backend": "iptables", "iptablesAdminChainName": "KEYS-ADMIN", "ingressPolicy": "same-bridge",
                       "firewalldZone": "trusted", "dataDir": "$TMP/firewall"}),
            ),
        }]
    },
    records: OnceLock::new(),
};

const STATIC_REFUSES_A_MASK_NO_PREFIX: Documented = Documented::Instead(
    "README: static refuses an `Address` whose mask is no prefix (the reference prints the \
     address as <nil> or with a hex mask)",
    |o| {
        let unprintable = o["add"]["result"]["ips"].as_array().is_some_and(|ips| {
            ips.iter()
                .any(|ip| !ip["address"].as_str().is_some_and(|a| a.contains('/')))
        });
        if unprintable {
            o["add"] = json!({"code": 1});
            o["check"] = Value::Null;
            o["del"] = Value::Null;
            o.as_object_mut().unwrap().remove("after_add");
        }
    },
);

pub static STATIC: Applet = Applet {
    name: "static",
    reference: "static",
    ifname: "eth0",
    container: false,
    earlier: None,
    share_container: false,
    module: None,
    host_setup: nothing,
    // nothing is made: the result is the outcome
    state: LINKS_ADDRS_ROUTES,
    documented: &[STATIC_REFUSES_A_MASK_NO_PREFIX],
    delegated: &[],
    samples: || {
        let ipam = |extra: Value| {
            with(
                json!({"type": "static", "addresses": [{"address": "10.80.0.2/24"}]}),
                extra,
            )
        };
        vec![
            Sample {
                // the second address is the reference's untagged net.IPNet member, which only
                // the exact key `Address` fills (any other spelling is `address`, a string)
                name: "addresses with a gateway and as a net.IPNet, routes, dns",
                oracle: Oracle::Reference,
                config: with(
                    net_conf("static", "@result"),
                    json!({"ipam": {
                        "type": "static", "Name": "keys-overwritten",
                        "addresses": [{"address": "10.80.0.2/24", "gateway": "10.80.0.1", "Version": "4"},
                                      {"Address": {"IP": "10.81.0.2", "Mask": "////AA=="}}],
                        "routes": [{"dst": "192.0.2.0/24", "gw": "10.80.0.1"}],
                        "dns": {"nameservers": ["192.0.2.54"], "domain": "static.example", "search": ["static.example"],
                                "options": ["ndots:3"]},
                    }}),
                ),
            },
            Sample {
                name: "args.cni.ips (they replace the addresses)",
                oracle: Oracle::Reference,
                config: with(
                    minimal("static", "@result"),
                    json!({"ipam": ipam(json!({})), "args": {"cni": {"ips": ["10.82.0.2/24"]}}}),
                ),
            },
            Sample {
                name: "runtimeConfig.ips (they replace the addresses)",
                oracle: Oracle::Reference,
                config: with(
                    minimal("static", "@result"),
                    json!({"ipam": ipam(json!({})), "runtimeConfig": {"ips": ["10.83.0.2/24"]}}),
                ),
            },
            Sample {
                // printed for 1.1.0 only
                name: "route attributes",
                oracle: Oracle::Cnibox("keys v1.1.1's types.Route lacks"),
                config: with(
                    minimal("static", "@result"),
                    json!({"cniVersion": "1.1.0", "ipam": ipam(json!({
                        "routes": [{"dst": "192.0.2.0/24", "gw": "10.80.0.1", "mtu": 1400, "advmss": 1360,
                                    "priority": 5, "scope": 0, "table": 100}]}))}),
                ),
            },
        ]
    },
    records: OnceLock::new(),
};

const SBR_DEL_EMPTIES_ITS_TABLES: Documented = Documented::Instead(
    "README: sbr DEL leaves nothing of ADD's (it also removes the interface's routes in the \
     tables its rules named; the reference leaves them)",
    |o| {
        if let Some(routes) = o
            .pointer_mut("/after_del/container/routes")
            .and_then(Value::as_array_mut)
        {
            routes.retain(|r| r["table"].is_null() || r["table"] == "main" || r["dev"] != "eth0");
        }
    },
);

pub static SBR: Applet = Applet {
    name: "sbr",
    reference: "sbr",
    ifname: "eth0",
    container: true,
    // on-link subnet routes, which the sbr tables copy (ptp's go via the gateway), and room
    // for another gateway in the subnet
    earlier: Some(earlier_bridge),
    // the reference's DEL leaves the tables' routes (documented below), and ADD moves the
    // interface's routes out of main for good: each case starts from the earlier plugin's ADD
    share_container: false,
    module: None,
    host_setup: nothing,
    state: StateParts {
        rules: true,
        ..LINKS_ADDRS_ROUTES
    },
    documented: &[SBR_DEL_EMPTIES_ITS_TABLES],
    delegated: &[],
    samples: || {
        vec![
            Sample {
                name: "a table per address",
                oracle: Oracle::Reference,
                config: net_conf("sbr", "@prev"),
            },
            Sample {
                name: "a given table (rules only)",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(minimal("sbr", "@prev"), json!({"table": 150})),
            },
            Sample {
                name: "a given gateway, the subnet route kept in main with a source hint",
                oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
                config: with(
                    minimal("sbr", "@prev"),
                    json!({"gateways": ["10.71.0.254"], "addSourceHints": true}),
                ),
            },
        ]
    },
    records: OnceLock::new(),
};

/// A link on [`MASTER`] with a host-local address: vlan's and ipvlan's samples.
fn on_master(plugin_type: &str, extra: Value) -> Vec<Sample> {
    let ipam = json!({"master": MASTER, "ipam": host_local("10.66.0.0/24")});
    vec![
        Sample {
            name: "master, MTU, IPAM",
            oracle: Oracle::Reference,
            config: with(with(net_conf(plugin_type, "@result"), ipam.clone()), extra),
        },
        Sample {
            name: "master in the container (there is none there)",
            oracle: Oracle::Cnibox("keys v1.1.1 lacks"),
            config: with(
                with(minimal(plugin_type, "@result"), ipam),
                json!({"linkInContainer": true}),
            ),
        },
    ]
}

pub static VLAN: Applet = Applet {
    name: "vlan",
    reference: "vlan",
    ifname: "eth0",
    container: true,
    earlier: None,
    share_container: true,
    module: Some("8021q"),
    host_setup: master_veth,
    state: LINKS_ADDRS_ROUTES,
    documented: &[],
    // read by host-local in DEL (ADD never gets as far)
    delegated: &[HOST_LOCAL_IPAM, "runtimeConfig", "args"],
    samples: || on_master("vlan", json!({"vlanId": 5, "mtu": 1400})),
    records: OnceLock::new(),
};

pub static IPVLAN: Applet = Applet {
    name: "ipvlan",
    reference: "ipvlan",
    ifname: "eth0",
    container: true,
    earlier: None,
    share_container: true,
    module: Some("ipvlan"),
    host_setup: master_veth,
    state: LINKS_ADDRS_ROUTES,
    documented: &[],
    // read by host-local in DEL (ADD never gets as far)
    delegated: &[HOST_LOCAL_IPAM, "runtimeConfig", "args"],
    samples: || on_master("ipvlan", json!({"mode": "l3", "mtu": 1400})),
    records: OnceLock::new(),
};

pub static VRF: Applet = Applet {
    name: "vrf",
    reference: "vrf",
    ifname: "eth0",
    container: true,
    earlier: Some(earlier_ptp),
    share_container: true,
    module: Some("vrf"),
    host_setup: nothing,
    state: LINKS_ADDRS_ROUTES,
    documented: &[],
    delegated: &[],
    samples: || {
        vec![Sample {
            name: "a VRF with its table",
            oracle: Oracle::Reference,
            config: with(net_conf("vrf", "@prev"), json!({"vrfname": "keysvrf", "table": 7})),
        }]
    },
    records: OnceLock::new(),
};
