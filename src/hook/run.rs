//! `oci-hook`: ADD at createRuntime (or prestart), DEL at poststop.
//!
//! ADD attaches `/proc/<pid>/ns/net` to each network through the same chain runner and
//! result cache as `cnitool`; a failed ADD deletes what it did and fails the hook, so the
//! runtime aborts the start. DEL runs from the cache (poststop has no pid and usually no
//! namespace), so it releases addresses and host-side state even when the namespace is
//! gone, and succeeds when there is nothing to do.
use super::bundle::{self, NetnsMode};
use super::settings::Settings;
use super::state::{Phase, State, MAX_STATE_BYTES};
use crate::netns::Netns;
use crate::runtime::conflist::{self, NetworkList};
use crate::runtime::{cache::Key, lock, Runtime, RuntimeConf};
use serde_json::{Map, Value};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;

pub use super::settings::{IPS_ANNOTATION, NETWORKS_ANNOTATION};

#[derive(argh::FromArgs, Debug)]
/// Attach an OCI container to CNI networks (createRuntime/prestart hook) or detach it
/// (poststop hook). Reads the OCI state JSON on stdin.
pub struct HookArgs {
    /// add or del (default: from the state's status)
    #[argh(positional)]
    pub phase: Option<String>,
    /// network to attach, repeatable (default: the cni.cnibox.io/networks annotation or
    /// CNIBOX_NETWORKS in the container's environment, else
    /// the first network in the conf dir)
    #[argh(option)]
    pub network: Vec<String>,
    /// network config dir (default /etc/cni/net.d)
    #[argh(option, default = "PathBuf::from(\"/etc/cni/net.d\")")]
    pub conf_dir: PathBuf,
    /// plugin dir (default /opt/cni/bin)
    #[argh(option, default = "PathBuf::from(\"/opt/cni/bin\")")]
    pub bin_dir: PathBuf,
    /// result cache dir (default /var/lib/cni)
    #[argh(option, default = "PathBuf::from(\"/var/lib/cni\")")]
    pub cache_dir: PathBuf,
    /// interface name of the first network (default eth0; later networks count up: eth1, …)
    #[argh(option, default = "String::from(\"eth0\")")]
    pub ifname: String,
    /// also append log lines to this file
    #[argh(option)]
    pub log_file: Option<PathBuf>,
}

/// Log lines go to stderr (runtimes show a failed hook's output) and to the log file.
struct Log {
    file: Option<std::fs::File>,
    id: String,
}

impl Log {
    fn line(&mut self, msg: impl std::fmt::Display) {
        let text = format!("cnibox oci-hook: {}: {msg}", self.id);
        eprintln!("{text}");
        if let Some(f) = &mut self.file {
            let _ = writeln!(f, "{text}");
        }
    }
}

/// The interface name for the `i`-th network: eth0, eth1, … (or the base with `i` appended
/// when it does not end in a number).
pub fn ifname_for(base: &str, i: usize) -> String {
    if i == 0 {
        return base.to_string();
    }
    let digits = base.len() - base.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, num) = base.split_at(base.len() - digits);
    let n: usize = num.parse().unwrap_or(0);
    format!("{stem}{}", n + i)
}

/// The applet; `applets` finds this binary's own applets, which the chains run in-process.
pub fn main(args: &[OsString], applets: crate::cni::AppletLookup) -> i32 {
    let parsed: HookArgs = match crate::util::argv::parse_args("cnibox oci-hook", args) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().take(MAX_STATE_BYTES + 1).read_to_end(&mut input) {
        eprintln!("cnibox oci-hook: read OCI state from stdin: {e}");
        return 1;
    }
    if input.len() as u64 > MAX_STATE_BYTES {
        eprintln!("cnibox oci-hook: OCI state on stdin is larger than {MAX_STATE_BYTES} bytes");
        return 1;
    }
    let state = match State::parse(&input) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cnibox oci-hook: {e}");
            return 1;
        }
    };
    let file = parsed.log_file.as_ref().and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| eprintln!("cnibox oci-hook: log file {}: {e}", p.display()))
            .ok()
    });
    let mut log = Log {
        file,
        id: state.id.clone(),
    };
    match run(&parsed, &state, &mut log, applets) {
        Ok(()) => 0,
        Err(Failure::Cause(e)) => {
            log.line(format!("error: {e}"));
            1
        }
        Err(Failure::Logged) => 1,
    }
}

/// Why the hook failed. A failed ADD logs its cause before it cleans up, so that the cause
/// comes first and any cleanup warnings after it.
enum Failure {
    Cause(String),
    Logged,
}

impl From<String> for Failure {
    fn from(cause: String) -> Failure {
        Failure::Cause(cause)
    }
}

impl From<&str> for Failure {
    fn from(cause: &str) -> Failure {
        Failure::Cause(cause.to_string())
    }
}

fn run(args: &HookArgs, state: &State, log: &mut Log, applets: crate::cni::AppletLookup) -> Result<(), Failure> {
    let phase = state.phase(args.phase.as_deref()).map_err(|e| e.to_string())?;
    let rt = Runtime::new(&args.conf_dir, vec![args.bin_dir.clone()], &args.cache_dir).with_applets(applets);
    let _one_hook_at_a_time = lock::hook(&args.cache_dir).map_err(|e| e.to_string())?;
    match phase {
        Phase::Add => add(args, state, &rt, log),
        Phase::Del => del(args, state, &rt, log).map_err(Failure::from),
    }
}

/// The networks to attach, from options, then the container's settings, then the conf
/// dir's first.
fn networks(args: &HookArgs, settings: &Settings, rt: &Runtime) -> Result<Vec<NetworkList>, String> {
    let mut names = args.network.clone();
    if names.is_empty() {
        names = settings.networks.clone();
    }
    if names.is_empty() {
        return conflist::first(&args.conf_dir)
            .map(|l| vec![l])
            .map_err(|e| e.to_string());
    }
    names
        .iter()
        .map(|n| rt.load_network(n).map_err(|e| e.to_string()))
        .collect()
}

/// The bundle's config.json, when the state names a bundle that has one.
fn bundle_config(state: &State, log: &mut Log) -> Option<bundle::Config> {
    if state.bundle.as_os_str().is_empty() {
        return None;
    }
    bundle::read_config(&state.bundle)
        .map_err(|e| log.line(format!("warning: {e}; relying on the namespace check")))
        .ok()
}

/// The container's environment (`KEY=value`), for its settings.
fn env(config: Option<&bundle::Config>) -> &[String] {
    config.map_or(&[], bundle::Config::env)
}

/// Why the container's network namespace is not this container's to configure, if it is not.
fn not_ours(mode: Option<&NetnsMode>) -> Option<String> {
    match mode? {
        NetnsMode::Host => Some("the container has no network namespace of its own".into()),
        NetnsMode::Join(path) if bundle::is_process_netns(path) => Some(format!(
            "the container joins the network namespace of another process ({path})"
        )),
        _ => None,
    }
}

fn add(args: &HookArgs, state: &State, rt: &Runtime, log: &mut Log) -> Result<(), Failure> {
    let config = bundle_config(state, log);
    let mode = config.as_ref().map(bundle::Config::netns_mode);
    if let Some(why) = not_ours(mode) {
        log.line(format!("{why}; nothing to do"));
        return Ok(());
    }
    let pid = state
        .pid()
        .ok_or("the OCI state has no pid: cannot find the container's network namespace")?;
    let netns_path = format!("/proc/{pid}/ns/net");
    let netns = Netns::open(&netns_path).map_err(|e| e.to_string())?;
    let own = Netns::current().map_err(|e| e.to_string())?;
    if netns.same_as(&own).map_err(|e| e.to_string())? {
        log.line("the container shares this hook's network namespace; not configuring the host");
        return Ok(());
    }
    // A namespace made elsewhere (Docker's sandbox, `ip netns add`) is this container's
    // unless another container already configured it.
    let first_ifname = ifname_for(&args.ifname, 0);
    if let Some(NetnsMode::Join(path)) = mode {
        if has_link(&netns, &first_ifname)? {
            log.line(format!(
                "the container joins {path}, which already has {first_ifname}: another container's; nothing to do"
            ));
            return Ok(());
        }
    }
    let settings = Settings::read(&state.annotations, env(config.as_ref()))?;
    let lists = networks(args, &settings, rt)?;
    if let Some(first) = lists.first() {
        require_capabilities(first, &settings.capability_args())?;
    }
    let mut done: Vec<(NetworkList, RuntimeConf)> = vec![];
    for (i, list) in lists.into_iter().enumerate() {
        let (capability_args, cni_args) = match i {
            0 => (settings.capability_args(), settings.cni_args.clone()),
            _ => (Map::new(), vec![]),
        };
        let conf = RuntimeConf {
            container_id: state.id.clone(),
            netns: netns_path.clone(),
            ifname: ifname_for(&args.ifname, i),
            args: cni_args,
            capability_args,
        };
        // A re-created container (same ID) may still have an attachment: DEL it first so
        // ADD does not fail with "duplicate allocation".
        let key = Key::new(&list.name, &conf.container_id, &conf.ifname).map_err(|e| e.to_string())?;
        if !matches!(rt.cache().read(&key), crate::runtime::cache::Cached::Missing) {
            log.line(format!(
                "{} {}: cached attachment found, deleting it first",
                list.name, conf.ifname
            ));
            if let Err(e) = rt.del_network_list(
                &list,
                &RuntimeConf {
                    netns: String::new(),
                    ..conf.clone()
                },
            ) {
                log.line(format!("warning: delete of the old attachment: {e}"));
            }
        }
        match rt.add_network_list(&list, &conf) {
            Ok(result) => {
                log.line(format!(
                    "attached to {} as {}: {}",
                    list.name,
                    conf.ifname,
                    summary(&result)
                ));
                done.push((list, conf));
            }
            Err(e) => {
                // The chain error already carries the plugin's message: say it once.
                log.line(format!("error: {e}"));
                done.push((list, conf));
                for (list, conf) in done.iter().rev() {
                    if let Err(e) = rt.del_network_list(list, conf) {
                        log.line(format!("warning: cleanup of {}: {e}", list.name));
                    }
                }
                return Err(Failure::Logged);
            }
        }
    }
    Ok(())
}

fn has_link(netns: &Netns, name: &str) -> Result<bool, String> {
    let h = crate::netlink::Handle::open(netns).map_err(|e| e.to_string())?;
    h.link_by_name(name)
        .map(|l| l.is_some())
        .map_err(|e| format!("look up {name} in the container's namespace: {e}"))
}

/// Capability arguments reach only plugins that declare them (libcni drops the rest): a
/// requested address or MAC no plugin takes is an error, not a silently random one.
fn require_capabilities(list: &NetworkList, caps: &Map<String, Value>) -> Result<(), String> {
    for key in caps.keys() {
        if !list.plugins.iter().any(|p| p.capabilities.get(key) == Some(&true)) {
            return Err(format!(
                "network {:?} has no plugin with the {key:?} capability (\"capabilities\": {{\"{key}\": true}}): \
                 the requested {key} cannot be applied",
                list.name
            ));
        }
    }
    Ok(())
}

fn summary(result: &Value) -> String {
    let ips: Vec<&str> = result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["address"].as_str())
        .collect();
    if ips.is_empty() {
        "no addresses".into()
    } else {
        ips.join(", ")
    }
}

fn del(args: &HookArgs, state: &State, rt: &Runtime, log: &mut Log) -> Result<(), String> {
    // poststop normally has no pid; an explicit `del` on a running container has one.
    let netns = state
        .pid()
        .map(|p| format!("/proc/{p}/ns/net"))
        .filter(|p| std::path::Path::new(p).exists());
    let mut errors = vec![];
    let mut seen = vec![];
    for entry in rt.cached_attachments(Some(&state.id)) {
        let list = match NetworkList::from_bytes(&entry.config) {
            Ok(l) => l,
            Err(_) => match rt.load_network(&entry.network) {
                Ok(l) => l,
                Err(e) => {
                    errors.push(format!("{}: no usable config to delete with: {e}", entry.network));
                    continue;
                }
            },
        };
        let conf = RuntimeConf {
            container_id: state.id.clone(),
            netns: netns.clone().unwrap_or_default(),
            ifname: entry.ifname.clone(),
            args: entry.cni_args.clone(),
            capability_args: entry.capability_args.clone(),
        };
        seen.push((entry.network.clone(), entry.ifname.clone()));
        match rt.del_network_list(&list, &conf) {
            Ok(()) => log.line(format!("detached from {} ({})", entry.network, entry.ifname)),
            Err(e) => errors.push(format!("{}: {e}", entry.network)),
        }
    }
    // Without a cache entry (lost, or never written because the hook was killed), DEL the
    // configured networks anyway: plugins release what they hold without a prevResult. Not
    // for a namespace ADD leaves alone: nothing was attached, and the interfaces there are
    // another container's.
    let config = bundle_config(state, log);
    if not_ours(config.as_ref().map(bundle::Config::netns_mode)).is_some() {
        return finish(errors);
    }
    let settings = Settings::read(&state.annotations, env(config.as_ref())).unwrap_or_default();
    if let Ok(lists) = networks(args, &settings, rt) {
        for (i, list) in lists.into_iter().enumerate() {
            let ifname = ifname_for(&args.ifname, i);
            if seen.iter().any(|(n, f)| *n == list.name && *f == ifname) {
                continue;
            }
            let conf = RuntimeConf {
                container_id: state.id.clone(),
                netns: netns.clone().unwrap_or_default(),
                ifname,
                ..RuntimeConf::default()
            };
            if let Err(e) = rt.del_network_list(&list, &conf) {
                errors.push(format!("{}: {e}", list.name));
            }
        }
    }
    finish(errors)
}

fn finish(errors: Vec<String>) -> Result<(), String> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_count_up() {
        assert_eq!(ifname_for("eth0", 0), "eth0");
        assert_eq!(ifname_for("eth0", 2), "eth2");
        assert_eq!(ifname_for("net9", 1), "net10");
        assert_eq!(ifname_for("veth", 1), "veth1");
    }

    #[test]
    fn a_requested_address_or_mac_needs_a_plugin_that_takes_it() {
        let list = crate::runtime::conflist::NetworkList::from_bytes(
            br#"{"cniVersion":"1.0.0","name":"n","plugins":[
                {"type":"bridge","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}},
                {"type":"tuning","capabilities":{"mac":true}}]}"#,
        )
        .unwrap();
        let caps = |json: &str| serde_json::from_str::<Map<String, Value>>(json).unwrap();
        assert_eq!(
            require_capabilities(&list, &caps(r#"{"mac":"0a:58:0a:01:00:09"}"#)),
            Ok(())
        );
        assert_eq!(require_capabilities(&list, &caps("{}")), Ok(()));
        assert_eq!(
            require_capabilities(&list, &caps(r#"{"ips":["10.1.0.9/24"]}"#)).unwrap_err(),
            "network \"n\" has no plugin with the \"ips\" capability (\"capabilities\": {\"ips\": true}): \
             the requested ips cannot be applied"
        );
    }
}
