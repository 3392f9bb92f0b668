//! The world of the applets that make one link in the container (ipvlan, vlan, dummy): a
//! private host namespace with a master `mst0` (a veth end, up), one container, a
//! host-local network, and what their tests look at.
use serde_json::{json, Value};

use crate::common::{CallOutput, Netns, TestEnv};
use crate::plugin_state::{addrs, link_names, links, mask, merge, reservations, routes};

pub struct World {
    pub env: TestEnv,
    pub ns: Netns,
    applet: &'static str,
    net: &'static str,
    ifname: &'static str,
    /// The applet's own keys in every config.
    keys: Value,
}

/// `c` with `prevResult` set to `prev`.
pub fn with_prev(c: &Value, prev: &Value) -> Value {
    let mut c = c.clone();
    c["prevResult"] = prev.clone();
    c
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

    /// What an ADD of `extra` leaves, by cnibox or the reference: the result (MACs and the
    /// sandbox masked), links, addresses, routes. None where Debian has no reference.
    pub fn outcome(
        &self,
        version: &str,
        reference: bool,
        extra: Value,
    ) -> Option<(Value, Vec<String>, Vec<String>, Vec<String>)> {
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
        Some((r, links, addrs(&self.ns), routes(&self.ns)))
    }
}
