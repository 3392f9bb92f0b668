//! One side of a comparison: cnibox's applet or the reference's binary, in a host namespace
//! and temp dir of its own, shared by every case of a test (the two sides run the same cases
//! in the same order, so their worlds evolve alike). What a case runs: ADD, CHECK with ADD's
//! result, DEL; what it leaves: the kernel and disk state, as comparable values.
use crate::common::{self, CallOutput, Netns, PrivateMount, TestEnv};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::doc::Doc;
use super::samples::Applet;

/// A container for a case, with the earlier plugin's attachment when the applet is chained.
struct Prepared {
    ns: Option<Netns>,
    earlier: Option<(Doc, Value)>,
}

pub struct Side {
    pub applet: &'static Applet,
    pub reference: bool,
    pub env: TestEnv,
    /// The container the code cases share (with the earlier plugin's attachment for a
    /// chained applet), where the applet allows it.
    shared: RefCell<Option<Prepared>>,
}

fn msg_of(out: &CallOutput) -> String {
    if out.ok() {
        return String::new();
    }
    serde_json::from_str::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["msg"].as_str().map(str::to_string))
        .unwrap_or_else(|| format!("(no error object: {})", out.stderr.lines().next().unwrap_or("")))
}

impl Side {
    pub fn new(applet: &'static Applet, reference: bool) -> Side {
        common::require_root();
        let env = TestEnv::new();
        for dir in ["run/netns", "var-lib"] {
            std::fs::create_dir_all(env.tmp.path().join(dir)).unwrap();
        }
        (applet.host_setup)(&env);
        Side {
            applet,
            reference,
            env,
            shared: RefCell::new(None),
        }
    }

    fn fill(&self, s: &str) -> String {
        s.replace("$DATA", self.env.data_dir.to_str().unwrap())
            .replace("$TMP", self.env.tmp.path().to_str().unwrap())
    }

    fn netns_of(p: &Prepared) -> String {
        match &p.ns {
            Some(ns) => ns.path_str().to_string(),
            // host-local never opens it
            None => "/run/netns/keys-none".to_string(),
        }
    }

    /// Runs `verb` with `doc` on stdin (the applet under test on this side).
    fn exec(&self, verb: &str, id: &str, netns: &str, doc: &Doc, keys: Option<&Path>) -> CallOutput {
        let call = if self.reference {
            self.env
                .reference(self.applet.reference)
                .expect("the reference plugins are installed")
        } else {
            self.env.call(self.applet.name)
        };
        let tmp = self.env.tmp.path();
        // an unset key means a default path (host-local's /var/lib/cni/networks, tuning's
        // /run/cni/tuning, firewall's /run/cni/firewall): the side's own /run (with the
        // host's /run/netns in it) and /var/lib stand in for the host's
        let mut call = call
            .mount(PrivateMount::bind_tree(Path::new("/run/netns"), &tmp.join("run/netns")))
            .mount(PrivateMount::bind_tree(&tmp.join("run"), Path::new("/run")))
            .mount(PrivateMount::bind_tree(&tmp.join("var-lib"), Path::new("/var/lib")))
            .verb(verb, id, netns, self.applet.ifname)
            .stdin(doc.text());
        if let Some(file) = keys {
            call = call.env(cnibox::cni::json::keys::ENV, file.to_str().unwrap());
        }
        call.run()
    }

    fn prepare(&self) -> Prepared {
        let ns = self.applet.container.then(|| self.env.container());
        let earlier = self.applet.earlier.map(|config| {
            let mut doc = Doc::from(&config());
            doc.map_strings(&|s| self.fill(s));
            let applet = self.earlier_applet(&doc);
            let out = self
                .env
                .call(&applet)
                .verb(
                    "ADD",
                    "keys-earlier",
                    ns.as_ref().unwrap().path_str(),
                    self.applet.ifname,
                )
                .stdin(doc.text())
                .run();
            let result = out.success();
            (doc, result)
        });
        Prepared { ns, earlier }
    }

    fn earlier_applet(&self, doc: &Doc) -> String {
        match doc.value_at(&[], "type") {
            Some(Doc::Str(t)) => t,
            other => panic!("the earlier plugin's config has no type: {other:?}"),
        }
    }

    /// Undoes [`Side::prepare`]: the earlier attachment's DEL, its store, the container.
    fn release(&self, p: Prepared) {
        if let (Some((doc, _)), Some(ns)) = (&p.earlier, &p.ns) {
            let applet = self.earlier_applet(doc);
            let out = self
                .env
                .call(&applet)
                .verb("DEL", "keys-earlier", ns.path_str(), self.applet.ifname)
                .stdin(doc.text())
                .run();
            out.success();
            // the next case's earlier ADD gets the same address on both sides
            let _ = std::fs::remove_dir_all(self.env.tmp.path().join("earlier"));
        }
    }

    /// The config `verb` gets: the sample with its placeholders filled, then `edit`.
    /// `result`: ADD's result, for CHECK and DEL.
    fn config(&self, sample: &Value, p: &Prepared, result: Option<&Value>, edit: &dyn Fn(&mut Doc)) -> Doc {
        let mut doc = Doc::from(sample);
        doc.map_strings(&|s| self.fill(s));
        let prev = match (result, &p.earlier) {
            (Some(r), _) => Some(Doc::from(r)),
            (None, Some((_, earlier))) => Some(Doc::from(earlier)),
            (None, None) => None,
        };
        doc.edit_objects_at(&[], &mut |members| {
            members.retain_mut(|(_, v)| match v {
                Doc::Str(s) if s == "@prev" || s == "@result" => match (s.as_str(), &prev) {
                    ("@result", _) if result.is_none() => false,
                    (_, Some(p)) => {
                        *v = p.clone();
                        true
                    }
                    (_, None) => false,
                },
                _ => true,
            })
        });
        edit(&mut doc);
        doc
    }

    /// The data dir starts empty in each case, so that each side's n-th ADD gets the same
    /// address however many runs the other side made before.
    fn fresh_store(&self) {
        let _ = std::fs::remove_dir_all(&self.env.data_dir);
    }

    /// ADD, CHECK (with ADD's result) and DEL of the sample with `edit`: the outcome as the
    /// tests compare it, `{"add": {"result"|"code"}, "check", "del", "msgs"}` (`msgs`, the
    /// error messages, are for the reader and the documented differences, not compared), and
    /// with `state` the kernel and disk state after ADD and after DEL. A case gets a container
    /// of its own, or, a chained applet's code case where the applet allows it, the shared one.
    ///
    /// After a refused ADD there is no state to compare (the reference may leave what it made:
    /// README, "A failed ADD leaves nothing behind") and DEL runs with the same config as a
    /// runtime's cleanup does (`del_after_refused_add`); where that DEL fails, a DEL with the
    /// sample as written cleans up for the next case. With `keys`, every call appends the
    /// keys it reads there (the registry).
    pub fn run(&self, id: &str, sample: &Value, edit: &dyn Fn(&mut Doc), state: bool, keys: Option<&Path>) -> Value {
        self.fresh_store();
        let shared = !state && self.applet.share_container;
        if shared && self.shared.borrow().is_none() {
            *self.shared.borrow_mut() = Some(self.prepare());
        }
        let own = (!shared).then(|| self.prepare());
        let shared_guard = self.shared.borrow();
        let p = own.as_ref().or(shared_guard.as_ref()).unwrap();
        let netns = Self::netns_of(p);
        let masks = Masks::new(sample, &netns);
        let add = self.exec("ADD", id, &netns, &self.config(sample, p, None, edit), keys);
        let mut outcome = json!({"add": {"code": add.code}, "check": null, "del": null,
                                 "msgs": {"add": msg_of(&add)}});
        let cleaned = if add.ok() {
            let result = add.json();
            outcome["add"] = json!({"result": masks.apply(&result)});
            if state {
                outcome["after_add"] = self.state(p.ns.as_ref(), &masks);
            }
            let after = self.config(sample, p, Some(&result), edit);
            let check = self.exec("CHECK", id, &netns, &after, keys);
            let del = self.exec("DEL", id, &netns, &after, keys);
            outcome["check"] = json!(check.code);
            outcome["del"] = json!(del.code);
            outcome["msgs"]["check"] = json!(msg_of(&check));
            outcome["msgs"]["del"] = json!(msg_of(&del));
            del.ok()
        } else {
            // the DEL a runtime sends after a refused ADD, with the same config
            let del = self.exec("DEL", id, &netns, &self.config(sample, p, None, edit), keys);
            outcome["del_after_refused_add"] = json!(del.code);
            outcome["msgs"]["del"] = json!(msg_of(&del));
            del.ok()
        };
        if !cleaned {
            let same = |_: &mut Doc| {};
            self.exec("DEL", id, &netns, &self.config(sample, p, None, &same), keys);
        }
        if state {
            outcome["after_del"] = self.state(p.ns.as_ref(), &masks);
        }
        drop(shared_guard);
        if let Some(p) = own {
            self.release(p);
        }
        outcome
    }

    /// The kernel and disk state the applet can change, masked by `masks`.
    fn state(&self, ctr: Option<&Netns>, masks: &Masks) -> Value {
        let parts = &self.applet.state;
        let mut host = ns_state(&self.env.host, false, masks);
        host["sysctls"] = sysctls(&self.env.host, parts.host_sysctls);
        if parts.tc {
            host["tc"] = tc(&self.env.host);
        }
        if parts.iptables {
            host["iptables"] = iptables(&self.env.host).into();
        }
        if parts.nft {
            host["nft"] = nft(&self.env.host).into();
        }
        if parts.route_localnet {
            host["route_localnet"] = route_localnet(&self.env.host);
        }
        if parts.rules {
            host["rules"] = rules(&self.env.host);
        }
        let container = ctr.map(|c| {
            let mut s = ns_state(c, true, masks);
            s["sysctls"] = sysctls(c, parts.container_sysctls);
            if parts.tc {
                s["tc"] = tc(c);
            }
            if parts.rules {
                s["rules"] = rules(c);
            }
            s
        });
        let files: BTreeMap<&str, Value> = parts.files.iter().map(|d| (*d, files(&self.fill(d)))).collect();
        masks.apply(&json!({"host": host, "container": container, "files": files}))
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        if let Some(p) = self.shared.borrow_mut().take() {
            self.release(p);
        }
    }
}

/// What differs between two runs for no fault of either: random names and MACs, the path of
/// each side's container.
pub struct Masks {
    /// MACs the config sets: kept.
    macs: Vec<String>,
    netns: String,
}

impl Masks {
    pub fn new(sample: &Value, netns: &str) -> Masks {
        let text = sample.to_string();
        let macs = text
            .split('"')
            .filter(|w| crate::plugin_state::is_mac(w))
            .map(str::to_string)
            .collect();
        Masks {
            macs,
            netns: netns.to_string(),
        }
    }

    fn word(&self, w: &str) -> String {
        if crate::plugin_state::is_random_veth(w) {
            "<veth>".into()
        } else if crate::plugin_state::is_mac(w) && !self.macs.iter().any(|m| m.eq_ignore_ascii_case(w)) {
            "<mac>".into()
        } else {
            w.to_string()
        }
    }

    /// Masks every word of a string (a word: letters, digits and colons, as names and MACs
    /// are), and the container path.
    fn text(&self, s: &str) -> String {
        let s = s.replace(&self.netns, "<netns>");
        let mut out = String::new();
        let mut word = String::new();
        for c in s.chars().chain(std::iter::once('\0')) {
            if c.is_ascii_alphanumeric() || c == ':' {
                word.push(c);
                continue;
            }
            out.push_str(&self.word(&word));
            word.clear();
            if c != '\0' {
                out.push(c);
            }
        }
        out
    }

    pub fn apply(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.apply(v)).collect()),
            Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (self.text(k), self.apply(v))).collect()),
            other => other.clone(),
        }
    }
}

/// `ip -j -d -n NS -batch -` of `commands`: one process, each command's JSON array.
fn ip_batch(ns: &Netns, commands: &str) -> Vec<Value> {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["-j", "-d", "-n", &ns.name, "-batch", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(commands.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "ip -batch {commands:?} in {}", ns.name);
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect()
}

/// Links (all but the host's `lo`), addresses (not link-local) and routes of every table
/// and family.
fn ns_state(ns: &Netns, with_lo: bool, masks: &Masks) -> Value {
    let [links_addrs, routes_all] = &ip_batch(ns, "addr show\nroute show table all\n")[..] else {
        panic!("ip -batch in {}: two answers wanted", ns.name);
    };
    let mut links = vec![];
    let mut addrs = vec![];
    for l in links_addrs.as_array().unwrap() {
        let name = l["ifname"].as_str().unwrap();
        if name == "lo" && !with_lo {
            continue;
        }
        let flags: Vec<&str> = l["flags"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let info = &l["linkinfo"];
        let kind = info["info_kind"].as_str().unwrap_or("device");
        let mut link = json!({
            "name": name, "kind": kind, "mtu": l["mtu"], "up": flags.contains(&"UP"),
            "allmulti": flags.contains(&"ALLMULTI"), "promisc": l["promiscuity"].as_u64().unwrap_or(0) > 0,
            "master": l["master"], "address": l["address"], "txqlen": l["txqlen"],
        });
        match kind {
            "macvlan" => link["data"] = info["info_data"].clone(),
            "bridge" => link["vlan_filtering"] = info["info_data"]["vlan_filtering"].clone(),
            _ => {}
        }
        if info["info_slave_kind"] == "bridge" {
            let port = &info["info_slave_data"];
            link["port"] = json!({"hairpin": port["hairpin"], "isolated": port["isolated"]});
        }
        links.push(link);
        for a in l["addr_info"].as_array().unwrap() {
            if a["scope"] == "link" {
                continue;
            }
            addrs.push(format!(
                "{name} {}/{} scope {}",
                a["local"].as_str().unwrap(),
                a["prefixlen"],
                a["scope"]
            ));
        }
    }
    addrs.sort();
    let mut routes = vec![];
    for r in routes_all.as_array().unwrap() {
        let dst = r["dst"].as_str().unwrap_or_default();
        let local = matches!(
            r["type"].as_str(),
            Some("local" | "broadcast" | "multicast" | "anycast")
        );
        if local || dst.starts_with("fe80") || dst.starts_with("ff00") || r["table"] == "local" {
            continue;
        }
        let mut r = r.clone();
        // the kernel's own attributes, not a plugin's
        r.as_object_mut().unwrap().remove("flags");
        routes.push(masks.apply(&r));
    }
    routes.sort_by_key(Value::to_string);
    json!({"links": links, "addrs": addrs, "routes": routes})
}

/// The policy routing rules of both families (`ip rule` shows one family at a time).
fn rules(ns: &Netns) -> Value {
    let family = |f: &str| -> Value {
        let out = common::run_ok(Command::new("ip").args(["-j", f, "-n", &ns.name, "rule", "show"]));
        serde_json::from_str(&out).unwrap()
    };
    json!({"ipv4": family("-4"), "ipv6": family("-6")})
}

/// Files of `/proc/sys/<key>`, read by a thread that entered `ns` (null when missing).
fn sysctls(ns: &Netns, keys: &'static [&'static str]) -> Value {
    if keys.is_empty() {
        return Value::Null;
    }
    let values = in_netns(ns, move || {
        keys.iter()
            .map(|k| {
                let v = std::fs::read_to_string(format!("/proc/sys/{k}")).ok();
                (k.to_string(), v.map(|v| v.trim().to_string()))
            })
            .collect::<BTreeMap<_, _>>()
    });
    json!(values)
}

/// `route_localnet` of every link of `ns` (portmap's hairpin SNAT turns it on).
fn route_localnet(ns: &Netns) -> Value {
    let values = in_netns(ns, || {
        let mut out = BTreeMap::new();
        for e in std::fs::read_dir("/proc/sys/net/ipv4/conf").unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let v = std::fs::read_to_string(e.path().join("route_localnet")).unwrap_or_default();
            out.insert(name, v.trim().to_string());
        }
        out
    });
    json!(values)
}

/// `f` run by a thread that entered `ns` (sysctls under /proc/sys/net are the reader's).
fn in_netns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    crate::portmap_support::in_ns(ns, f).join().unwrap()
}

fn tc_json(ns: &Netns, args: &[&str]) -> Value {
    let out = common::run_ok(Command::new("tc").args(["-j", "-n", &ns.name]).args(args));
    if out.trim().is_empty() {
        return json!([]);
    }
    serde_json::from_str(&out).unwrap()
}

/// Qdiscs, and the filters of each ingress qdisc (their action indexes are per namespace
/// and freed asynchronously: left out).
fn tc(ns: &Netns) -> Value {
    let qdiscs = tc_json(ns, &["qdisc", "show"]);
    let mut filters = BTreeMap::new();
    for q in qdiscs.as_array().unwrap() {
        if q["kind"] != "ingress" {
            continue;
        }
        let dev = q["dev"].as_str().unwrap();
        let mut f = tc_json(ns, &["filter", "show", "dev", dev, "ingress"]);
        for f in f.as_array_mut().unwrap() {
            if let Some(acts) = f["options"]["actions"].as_array_mut() {
                for a in acts {
                    a.as_object_mut().unwrap().remove("index");
                }
            }
        }
        filters.insert(dev.to_string(), f);
    }
    json!({"qdiscs": qdiscs, "filters": filters})
}

/// Every table's chains and rules of both families, without counters.
fn iptables(ns: &Netns) -> Vec<String> {
    let mut out = vec![];
    for tool in ["iptables-save", "ip6tables-save"] {
        let o = ns.command(tool).output().unwrap();
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            if line.starts_with('#') || line == "COMMIT" {
                continue;
            }
            let line = match line.find(" [") {
                Some(i) if line.starts_with(':') => &line[..i],
                _ => line,
            };
            out.push(format!("{tool} {line}"));
        }
    }
    out
}

/// The nf_tables tables other than those of iptables-nft, without handles and counters.
fn nft(ns: &Netns) -> Vec<String> {
    let listing = ns.command("nft").args(["list", "ruleset"]).output().unwrap();
    let mut out = vec![];
    let mut skipping = false;
    for line in String::from_utf8_lossy(&listing.stdout).lines() {
        if let Some(head) = line.strip_prefix("table ") {
            let words: Vec<&str> = head.split_whitespace().collect();
            skipping = matches!(words[..], [family, name, ..]
                if matches!(family, "ip" | "ip6") && matches!(name, "filter" | "nat" | "mangle" | "raw" | "security"));
        }
        if skipping {
            continue;
        }
        let line = match line.find(" # handle") {
            Some(i) => &line[..i],
            None => line,
        };
        let line = match line.find("counter packets") {
            Some(i) => format!("{}counter", &line[..i]),
            None => line.to_string(),
        };
        out.push(line.trim().to_string());
    }
    out
}

/// Files of `dir`, name → content (JSON parsed), without lock files and cnibox's host-local
/// index (README: host-local is flat at scale; the reference has none).
fn files(dir: &str) -> Value {
    let mut out = BTreeMap::new();
    for (name, content) in common::read_dir_map(Path::new(dir)) {
        if name == "lock" || name.starts_with(".cnibox") {
            continue;
        }
        let v = serde_json::from_str::<Value>(&content).unwrap_or(Value::String(content));
        out.insert(name, v);
    }
    json!(out)
}
