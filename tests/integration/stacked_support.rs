//! The world of the applets that make one link in the container (ipvlan, vlan, dummy): a
//! private host namespace with a master `mst0` (a veth end, up), one container, a
//! host-local network, and what their tests look at.
use serde_json::{json, Value};

use crate::common::{CallOutput, Netns, TestEnv, ALL_VERSIONS};
use crate::plugin_state::{
    addrs, at_least, has_interfaces, link_names, links, mask, merge, reservations, routes, with_prev,
};

/// What an ADD left: the result (MACs and the sandbox masked), links, addresses, routes.
#[derive(Debug, PartialEq)]
pub struct Outcome {
    result: Value,
    links: Vec<String>,
    addrs: Vec<String>,
    routes: Vec<String>,
}

pub struct World {
    pub env: TestEnv,
    pub ns: Netns,
    applet: &'static str,
    net: &'static str,
    ifname: &'static str,
    /// The applet's own keys in every config.
    keys: Value,
}

impl World {
    pub fn new(applet: &'static str, net: &'static str, ifname: &'static str, keys: Value) -> World {
        let env = TestEnv::new();
        env.host
            .ip(&["link", "add", "mst0", "type", "veth", "peer", "name", "mst0p"]);
        env.host.ip(&["link", "set", "mst0", "up"]);
        env.host.ip(&["link", "set", "mst0p", "up"]);
        let ns = env.container();
        World {
            env,
            ns,
            applet,
            net,
            ifname,
            keys,
        }
    }

    /// The applet's config on `mst0` with host-local addresses from 10.1.2.0/24, and `extra`.
    pub fn conf(&self, version: &str, extra: Value) -> Value {
        let mut c = json!({
            "cniVersion": version,
            "name": self.net,
            "type": self.applet,
            "master": "mst0",
            "ipam": {"type": "host-local", "dataDir": self.env.data_dir, "ranges": [[{"subnet": "10.1.2.0/24"}]]},
        });
        merge(&mut c, &self.keys);
        merge(&mut c, &extra);
        c
    }

    /// cnibox's applet, `verb` on the container.
    pub fn call(&self, verb: &str, c: &Value) -> CallOutput {
        self.call_in(verb, self.ns.path_str(), c)
    }

    pub fn call_in(&self, verb: &str, netns: &str, c: &Value) -> CallOutput {
        self.env.call(self.applet).exec(verb, "ctr1", netns, self.ifname, c)
    }

    /// The Go reference's applet, `verb` on the container; None where Debian has none.
    pub fn reference(&self, verb: &str, c: &Value) -> Option<CallOutput> {
        let call = self.env.reference(self.applet)?;
        Some(call.exec(verb, "ctr1", self.ns.path_str(), self.ifname, c))
    }

    /// The container interface's `linkinfo` as `ip -d -j link` shows it.
    pub fn linkinfo(&self) -> Value {
        self.ns.ip_json(&["-d", "link", "show", self.ifname])[0]["linkinfo"].clone()
    }

    /// A master `name` inside the container (a veth end, up), for `linkInContainer`.
    pub fn container_master(&self, name: &str) {
        let peer = format!("{name}p");
        self.ns
            .ip(&["link", "add", name, "type", "veth", "peer", "name", &peer]);
        self.ns.ip(&["link", "set", name, "up"]);
    }

    /// `linkInContainer`: ADD, CHECK and DEL with the master `eth1` inside the container;
    /// returns that config.
    pub fn on_a_master_in_the_container(&self) -> Value {
        self.container_master("eth1");
        let c = self.conf("1.0.0", json!({"master": "eth1", "linkInContainer": true}));
        let r = self.call("ADD", &c).success();
        assert_eq!(self.linkinfo()["info_kind"], self.applet);
        self.call("CHECK", &with_prev(&c, &r)).success();
        self.call("DEL", &with_prev(&c, &r)).success();
        self.assert_clean("linkInContainer");
        c
    }

    /// Nothing but `lo` in the container, no address reserved.
    pub fn assert_clean(&self, what: &str) {
        assert_eq!(link_names(&self.ns), Vec::<String>::new(), "{what}: links left");
        assert_eq!(
            reservations(&self.env, self.net),
            Vec::<String>::new(),
            "{what}: reservation left"
        );
    }

    /// DEL of `c` in every state it can meet without the link, each succeeding and
    /// releasing the address its IPAM reserved: nothing in the container, again, no
    /// `CNI_NETNS`, the netns gone, the master gone.
    pub fn del_states(&self, c: &Value) {
        // the reservation an ADD would have made, by the IPAM plugin itself
        self.env
            .call("host-local")
            .exec("ADD", "ctr1", self.ns.path_str(), self.ifname, c)
            .success();
        assert_eq!(reservations(&self.env, self.net).len(), 1);
        self.call("DEL", c).success();
        self.assert_clean("DEL");
        self.call("DEL", c).success();
        self.call_in("DEL", "", c).success();
        let gone = self.env.container().path_str().to_string();
        self.call_in("DEL", &gone, c).success();
        self.env.host.ip(&["link", "del", "mst0"]);
        self.call("DEL", c).success();
    }

    /// What an ADD of `extra` leaves, by cnibox or the reference. None where Debian has no
    /// reference.
    pub fn outcome(&self, version: &str, reference: bool, extra: Value) -> Option<Outcome> {
        let c = self.conf(version, extra);
        let out = if reference {
            self.reference("ADD", &c)?
        } else {
            self.call("ADD", &c)
        };
        let mut r = mask(&out.success());
        if r["interfaces"][0]["sandbox"] == json!(self.ns.path_str()) {
            r["interfaces"][0]["sandbox"] = json!("<netns>");
        }
        // Deliberate: the reference v1.1.1 creates its links with txqueuelen 0 (it sent
        // IFLA_TXQLEN 0; the current reference sends none, as cnibox): both sides read
        // as the kernel's default.
        let links = links(&self.ns)
            .into_iter()
            .map(|l| l.replace(" qlen 0", " qlen 1000"))
            .collect();
        Some(Outcome {
            result: r,
            links,
            addrs: addrs(&self.ns),
            routes: routes(&self.ns),
        })
    }

    /// ADD of `c` in `version`, `after_add` on the result, then CHECK (0.4.0 on) and DEL
    /// twice. The result has the container interface with the first address of
    /// 10.1.2.0/24 on it, as the container has; nothing is left at the end.
    pub fn add_check_del(&self, version: &str, c: &Value, after_add: impl Fn(&Value)) {
        let r = self.call("ADD", c).success();
        if has_interfaces(version) {
            assert_eq!(r["interfaces"][0]["name"], self.ifname, "{version}: {r}");
            assert_eq!(r["interfaces"][0]["sandbox"], json!(self.ns.path_str()));
            assert_eq!(r["ips"][0]["address"], "10.1.2.2/24");
            assert_eq!(r["ips"][0]["interface"], json!(0));
        } else {
            assert_eq!(r["ip4"]["ip"], "10.1.2.2/24", "{version}: {r}");
        }
        assert_eq!(
            addrs(&self.ns),
            vec![format!("{} 10.1.2.2/24 scope global", self.ifname)]
        );
        after_add(&r);
        let del = if at_least(version, "0.4.0") {
            self.call("CHECK", &with_prev(c, &r)).success();
            with_prev(c, &r)
        } else {
            c.clone()
        };
        self.call("DEL", &del).success();
        self.call("DEL", &del).success();
        self.assert_clean(version);
    }

    /// On a kernel without the applet's link kind (`reason`, cnibox's answer): ADD fails in
    /// every version with the reference's code and leaves nothing; the reference, where
    /// Debian has it, refuses the same request as `refused`.
    pub fn refused_in_every_version(applet: &'static str, keys: Value, reason: &str, refused: Option<&str>) {
        for version in ALL_VERSIONS {
            let w = World::new(applet, "refused", "net1", keys.clone());
            let c = w.conf(version, json!({}));
            assert_eq!(w.call("ADD", &c).failure(999), reason, "{version}");
            w.assert_clean(version);
            // Debian ships no reference for every applet (dummy)
            let Some(refused) = refused.filter(|_| !at_least(version, "1.1.0")) else {
                continue;
            };
            if let Some(out) = w.reference("ADD", &c) {
                assert_eq!(out.failure(999), refused, "{version}");
            }
        }
    }

    /// cnibox answers each `(verb, netns, config)` as the reference does, and fails each
    /// without leaving anything.
    pub fn same_answers_as_the_reference(&self, cases: &[(&str, &str, Value)]) {
        for (verb, netns, c) in cases {
            let Some(theirs) = self.env.reference(self.applet) else {
                return;
            };
            let theirs = theirs.exec(verb, "ctr1", netns, self.ifname, c);
            let ours = self.call_in(verb, netns, c);
            assert_eq!(ours.answer(), theirs.answer(), "{verb} {c}");
            assert_ne!(ours.answer().0, 0, "{verb} {c}");
            self.assert_clean(verb);
        }
    }
}
