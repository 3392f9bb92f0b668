//! The DEL matrix of the applets that create the container's interface or its addresses:
//! for every spec version, DEL in every situation a runtime can produce — normal, repeated,
//! empty CNI_NETNS, netns deleted, container interface deleted by someone else, bridge or
//! master deleted, no prevResult, a prevResult of another version, a corrupt cache (through
//! cnitool). Every cell must succeed and leave no address, link, rule, cache file or plugin
//! state behind (a moved host link is back on the host).
//! One container namespace is reused across cells where that is sound.
//!
//! Each such applet runs it from its own module, as the test `<applet>::del_matrix` every
//! plugin applet has (`applets::every_plugin_applet_has_its_del_matrix_and_common_keys`),
//! with its [`Subject`]: its keys and what its attachment hangs on.
use crate::common;
use crate::plugin_state::rules;

use common::*;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cell {
    Normal,
    Repeated,
    EmptyNetns,
    NetnsDeleted,
    IfaceDeletedBySomeoneElse,
    BridgeOrMasterDeleted,
    NoPrevResult,
    PrevResultOfAnotherVersion,
    CorruptCache,
}

const CELLS: &[Cell] = &[
    Cell::Normal,
    Cell::Repeated,
    Cell::EmptyNetns,
    Cell::NetnsDeleted,
    Cell::IfaceDeletedBySomeoneElse,
    Cell::BridgeOrMasterDeleted,
    Cell::NoPrevResult,
    Cell::PrevResultOfAnotherVersion,
    Cell::CorruptCache,
];

/// The master of [`Attachment::InterfaceOnMaster`]: a veth the matrix creates on the host.
pub const MASTER: &str = "dmm0";

/// The link of [`Attachment::HostLink`]: a veth end the matrix creates on the host (its
/// peer `dmh0p` stays there).
pub const HOST_LINK: &str = "dmh0";

/// An applet under the matrix.
pub struct Subject {
    pub applet: &'static str,
    /// The applet's own keys, beside `cniVersion`, `name` and an `ipam` of host-local.
    pub keys: Value,
    pub attachment: Attachment,
}

/// What an applet's attachment consists of, which decides the cells that apply to it.
#[derive(Clone, Copy, PartialEq)]
pub enum Attachment {
    /// Addresses only (an IPAM applet): no container interface to delete.
    Addresses,
    /// A container interface of its own (veth).
    Interface,
    /// A container interface on a bridge the applet creates (the bridge's name).
    InterfaceOnBridge(&'static str),
    /// A container interface on the host link [`MASTER`].
    InterfaceOnMaster,
    /// The host link [`HOST_LINK`] moved into the container (host-device): DEL moves it
    /// back; a cell that deletes the container namespace destroys it, as the kernel destroys
    /// a virtual link with its namespace, and the matrix makes it again.
    HostLink,
}

/// A value in a subject's keys that stands for the matrix's IPAM data dir (made per run),
/// for an applet that takes its IPAM section whole (flannel).
pub const DATA_DIR: &str = "{data_dir}";

fn conf(env: &TestEnv, subject: &Subject, version: &str) -> Value {
    let ipam = json!({"type": "host-local", "subnet": "10.1.2.0/24", "dataDir": env.data_dir});
    let mut c = json!({"cniVersion": version, "name": "delnet", "type": subject.applet, "ipam": ipam});
    if subject.attachment == Attachment::HostLink {
        c["dataDir"] = json!(plugin_state_dir(env));
    }
    for (k, v) in subject.keys.as_object().expect("keys are an object") {
        c[k] = v.clone();
    }
    fn place(v: &mut Value, data_dir: &Value) {
        match v {
            Value::String(s) if s == DATA_DIR => *v = data_dir.clone(),
            Value::Array(items) => items.iter_mut().for_each(|i| place(i, data_dir)),
            Value::Object(m) => m.values_mut().for_each(|i| place(i, data_dir)),
            _ => {}
        }
    }
    place(&mut c, &json!(env.data_dir));
    c
}

/// Where an applet of the matrix keeps state of its own (host-device's records).
fn plugin_state_dir(env: &TestEnv) -> std::path::PathBuf {
    env.tmp.path().join("plugin-state")
}

/// Link names, addresses and rules of the host namespace. Not ifindexes, flags or
/// link-local addresses: a bridge a cell deleted on purpose comes back with new ones.
fn host_state(env: &TestEnv) -> String {
    let mut links = env.host.links();
    links.sort();
    let addrs: String = env
        .host
        .ip(&["-o", "addr", "show"])
        .lines()
        .map(|l| l.split_whitespace().skip(1).take(3).collect::<Vec<_>>().join(" ") + "\n")
        .filter(|l| !l.contains(" fe80:"))
        .collect();
    links.join(" ") + "\n" + &addrs + &rules(&env.host)
}

struct Matrix<'a> {
    env: &'a TestEnv,
    subject: &'a Subject,
    conf_dir: std::path::PathBuf,
    baseline: String,
}

impl Matrix<'_> {
    fn call(&self, verb: &str, id: &str, netns: &str, conf: &Value) -> CallOutput {
        self.env
            .call(self.subject.applet)
            .verb(verb, id, netns, "eth0")
            .config(conf)
            .run()
    }

    fn cnitool(&self, verb: &str, id: &str, ns: &Netns) -> CallOutput {
        self.env
            .tool("cnitool")
            .args([verb, "delnet", ns.path_str(), "--container-id", id])
            .env("NETCONFPATH", self.conf_dir.to_str().unwrap())
            .env("CNI_PATH", self.env.bin_dir.to_str().unwrap())
            .env("CNI_CACHE_DIR", self.env.cache_dir.to_str().unwrap())
            .run()
    }

    /// Recreate what a cell deleted on purpose (the bridge, the master), so the host state
    /// can be compared with the baseline.
    fn restore(&self, version: &str) {
        match self.subject.attachment {
            Attachment::InterfaceOnMaster if !self.env.host.has_link(MASTER) => add_master(self.env),
            Attachment::HostLink if !self.env.host.has_link(HOST_LINK) => {
                // the pair dies with the namespace its end was in, asynchronously
                let peer = format!("{HOST_LINK}p");
                for _ in 0..250 {
                    if !self.env.host.has_link(&peer) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                add_host_link(self.env);
            }
            Attachment::InterfaceOnBridge(bridge) if !self.env.host.has_link(bridge) => {
                let ns = self.env.container();
                let c = conf(self.env, self.subject, version);
                self.call("ADD", "rewarm", ns.path_str(), &c).success();
                self.call("DEL", "rewarm", ns.path_str(), &c).success();
            }
            _ => {}
        }
    }

    /// Nothing of attachment `id` is left: no address reserved, host back to the baseline,
    /// the container namespace (if it still exists) holds only lo, no cache file.
    fn assert_clean(&self, what: &str, id: &str, ns: Option<&Netns>) {
        let held: Vec<(String, String)> = self
            .env
            .store("delnet")
            .into_iter()
            .filter(|(k, _)| k.parse::<std::net::IpAddr>().is_ok())
            .collect();
        assert!(held.is_empty(), "{what}: addresses left reserved: {held:?}");
        // a deleted namespace takes its veth peers with it asynchronously: give the kernel
        // a moment before calling a difference a leak
        let mut state = host_state(self.env);
        for _ in 0..100 {
            if state == self.baseline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            state = host_state(self.env);
        }
        assert_eq!(self.baseline, state, "{what}: host state differs from the baseline");
        if let Some(ns) = ns {
            assert_eq!(ns.links(), ["lo"], "{what}: links left in the container");
        }
        let state = read_dir_map(&plugin_state_dir(self.env));
        assert!(state.is_empty(), "{what}: plugin state left: {state:?}");
        let cache = self.env.cache_dir.join("results").join(format!("delnet-{id}-eth0"));
        assert!(!cache.exists(), "{what}: cache file left");
        let results: Vec<_> = std::fs::read_dir(self.env.cache_dir.join("results"))
            .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(results.is_empty(), "{what}: cache dir holds {results:?}");
    }

    fn applies(&self, cell: Cell) -> bool {
        match cell {
            Cell::IfaceDeletedBySomeoneElse => self.subject.attachment != Attachment::Addresses,
            Cell::BridgeOrMasterDeleted => matches!(
                self.subject.attachment,
                Attachment::InterfaceOnBridge(_) | Attachment::InterfaceOnMaster
            ),
            _ => true,
        }
    }

    /// Run one cell; returns the id used.
    fn run(&self, version: &str, cell: Cell, ns: &mut Netns, n: usize) {
        let id = format!("dm{n}");
        let what = format!("{} {version} {cell:?}", self.subject.applet);
        let c = conf(self.env, self.subject, version);
        let with_prev = |prev: &Value| {
            let mut d = c.clone();
            d["prevResult"] = prev.clone();
            d
        };
        if cell == Cell::CorruptCache {
            let add = self.cnitool("add", &id, ns);
            assert!(add.ok(), "{what}: cnitool add: {add:?}");
            let file = self.env.cache_dir.join("results").join(format!("delnet-{id}-eth0"));
            let bytes = std::fs::read(&file).unwrap();
            std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
            let del = self.cnitool("del", &id, ns);
            assert!(del.ok(), "{what}: cnitool del: {del:?}");
            self.assert_clean(&what, &id, Some(ns));
            return;
        }
        let result = self.call("ADD", &id, ns.path_str(), &c).success();
        // what a runtime sends on DEL in the normal case: prevResult from 0.4.0 on
        let normal = if version >= "0.4.0" {
            with_prev(&result)
        } else {
            c.clone()
        };
        let path = ns.path_str().to_string();
        match cell {
            Cell::Normal => self.call("DEL", &id, &path, &normal).success(),
            Cell::Repeated => {
                self.call("DEL", &id, &path, &normal).success();
                self.call("DEL", &id, &path, &normal).success();
                self.call("DEL", &id, &path, &c).success()
            }
            Cell::EmptyNetns => {
                self.call("DEL", &id, "", &normal).success();
                // the runtime removes the namespace; the container side goes with it
                *ns = self.env.container();
                Value::Null
            }
            Cell::NetnsDeleted => {
                *ns = self.env.container();
                self.call("DEL", &id, &path, &normal).success();
                self.call("DEL", &id, &path, &normal).success()
            }
            Cell::IfaceDeletedBySomeoneElse => {
                ns.ip(&["link", "del", "eth0"]);
                self.call("DEL", &id, &path, &normal).success()
            }
            Cell::BridgeOrMasterDeleted => {
                let dev = match self.subject.attachment {
                    Attachment::InterfaceOnBridge(bridge) => bridge,
                    _ => MASTER,
                };
                self.env.host.ip(&["link", "del", dev]);
                self.call("DEL", &id, &path, &normal).success()
            }
            Cell::NoPrevResult => self.call("DEL", &id, &path, &c).success(),
            Cell::PrevResultOfAnotherVersion => {
                let other = if version >= "1.0.0" { "0.4.0" } else { "1.0.0" };
                let parsed = cnibox::cni::CniResult::from_json(&cnibox::cni::json::Json::from(&result)).unwrap();
                let prev = parsed.to_json(other).unwrap();
                self.call("DEL", &id, &path, &with_prev(&prev)).success()
            }
            Cell::CorruptCache => unreachable!(),
        };
        self.restore(version);
        self.assert_clean(&what, &id, Some(ns));
    }
}

fn add_host_link(env: &TestEnv) {
    env.host.ip(&[
        "link",
        "add",
        HOST_LINK,
        "type",
        "veth",
        "peer",
        "name",
        &format!("{HOST_LINK}p"),
    ]);
    env.host.ip(&["link", "set", HOST_LINK, "up"]);
}

fn add_master(env: &TestEnv) {
    env.host
        .ip(&["link", "add", MASTER, "type", "veth", "peer", "name", "dmm0p"]);
    env.host.ip(&["link", "set", MASTER, "up"]);
}

/// Runs the matrix for `subject`: every cell that applies, in every spec version.
pub fn run(subject: Subject) {
    let plugin = subject.applet;
    let env = TestEnv::new();
    if !run_ok(std::process::Command::new(cnibox()).arg("--list"))
        .lines()
        .any(|l| l == plugin)
    {
        eprintln!("SKIP: the {plugin} applet is not in this build");
        return;
    }
    match subject.attachment {
        Attachment::InterfaceOnMaster => add_master(&env),
        Attachment::HostLink => add_host_link(&env),
        _ => {}
    }
    let conf_dir = env.tmp.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let mut m = Matrix {
        env: &env,
        subject: &subject,
        conf_dir,
        baseline: String::new(),
    };
    // the baseline: what a clean ADD+DEL leaves (the bridge, global tables)
    let warm_ns = env.container();
    let c = conf(&env, &subject, "1.0.0");
    m.call("ADD", "warm", warm_ns.path_str(), &c).success();
    m.call("DEL", "warm", warm_ns.path_str(), &c).success();
    m.baseline = host_state(&env);
    let mut ns = env.container();
    let (mut ran, mut na) = (0, 0);
    let mut table = String::new();
    for (vi, version) in ALL_VERSIONS.iter().enumerate() {
        let plugin_list = {
            let mut p = conf(&env, &subject, version);
            p.as_object_mut().unwrap().remove("name");
            p.as_object_mut().unwrap().remove("cniVersion");
            json!({"cniVersion": version, "name": "delnet", "plugins": [p]})
        };
        std::fs::write(m.conf_dir.join("delnet.conflist"), plugin_list.to_string()).unwrap();
        table += &format!("{plugin} {version}:");
        for (ci, cell) in CELLS.iter().enumerate() {
            if !m.applies(*cell) {
                na += 1;
                table += " -";
                continue;
            }
            m.run(version, *cell, &mut ns, vi * 100 + ci);
            ran += 1;
            table += " ok";
        }
        table += "\n";
    }
    eprintln!("DEL matrix {plugin}: {ran} cells passed, {na} not applicable\n{table}");
}
