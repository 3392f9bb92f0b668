//! The `cnitool` applet: run a network config list against a network namespace, in the
//! spirit of upstream `cnitool`, on top of [`Runtime`].
use super::chain::{Attachment, ChainError, Runtime, RuntimeConf};
use super::conflist::NetworkList;
use super::sandbox_status::{self, IpPreference};
use crate::util::sha512;
use argh::FromArgs;
use serde_json::{Map, Value};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

#[derive(FromArgs, Debug)]
/// Add, check or delete a network list's interfaces in a network namespace; report plugin
/// status; garbage-collect stale attachments; show a sandbox's IPs from the result cache.
#[argh(note = "Environment:
  NETCONFPATH    network configs (.conflist, .conf, .json), default /etc/cni/net.d
  CNI_PATH       plugin directories, ':'-separated, default /opt/cni/bin
  CNI_IFNAME     interface name in the namespace, default eth0
  CNI_ARGS       extra arguments, K=V;K2=V2
  CAP_ARGS       capability arguments as a JSON object, e.g. '{{\"portMappings\":[…]}}'
  CNI_CACHE_DIR  result cache and locks, default /var/lib/cni")]
struct Cli {
    #[argh(subcommand)]
    cmd: Cmd,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
enum Cmd {
    Add(AddCmd),
    Check(CheckCmd),
    Del(DelCmd),
    Status(StatusCmd),
    Gc(GcCmd),
    SandboxStatus(SandboxStatusCmd),
}

#[derive(FromArgs, Debug)]
/// run ADD for every plugin of NETWORK and print the result
#[argh(subcommand, name = "add")]
struct AddCmd {
    /// the network's name (its "name" in NETCONFPATH)
    #[argh(positional)]
    network: String,
    /// the network namespace path, e.g. /run/netns/NAME
    #[argh(positional)]
    netns: String,
    /// container ID (default: cnitool- plus the hex of the first 10 bytes of the SHA-512 of the absolute netns path)
    #[argh(option)]
    container_id: Option<String>,
}

#[derive(FromArgs, Debug)]
/// run CHECK for every plugin of NETWORK with the cached result
#[argh(subcommand, name = "check")]
struct CheckCmd {
    /// the network's name (its "name" in NETCONFPATH)
    #[argh(positional)]
    network: String,
    /// the network namespace path, e.g. /run/netns/NAME
    #[argh(positional)]
    netns: String,
    /// container ID (default: derived from the netns path, as for add)
    #[argh(option)]
    container_id: Option<String>,
}

#[derive(FromArgs, Debug)]
/// run DEL for every plugin of NETWORK in reverse order with the cached result and config
#[argh(subcommand, name = "del")]
struct DelCmd {
    /// the network's name (its "name" in NETCONFPATH)
    #[argh(positional)]
    network: String,
    /// the network namespace path, e.g. /run/netns/NAME
    #[argh(positional)]
    netns: String,
    /// container ID (default: derived from the netns path, as for add)
    #[argh(option)]
    container_id: Option<String>,
}

#[derive(FromArgs, Debug)]
/// run STATUS for every plugin of NETWORK (spec 1.1.0 and later)
#[argh(subcommand, name = "status")]
struct StatusCmd {
    /// the network's name (its "name" in NETCONFPATH)
    #[argh(positional)]
    network: String,
}

#[derive(FromArgs, Debug)]
/// delete every cached attachment of NETWORK not kept, then send GC to its plugins
#[argh(subcommand, name = "gc")]
struct GcCmd {
    /// the network's name (its "name" in NETCONFPATH)
    #[argh(positional)]
    network: String,
    /// an attachment to keep, CONTAINER-ID:IFNAME (repeatable)
    #[argh(option)]
    keep: Vec<String>,
}

#[derive(FromArgs, Debug)]
/// print a container's IPs from the cached results of all its attachments
#[argh(subcommand, name = "sandbox-status")]
struct SandboxStatusCmd {
    /// the container ID the attachments were added under
    #[argh(positional)]
    container_id: String,
    /// the interface whose addresses are the pod's IPs (default eth0)
    #[argh(option, default = "String::from(\"eth0\")")]
    primary_ifname: String,
    /// which address of the primary interface is the primary IP, as containerd's ip_pref:
    /// ipv4 (default: the first IPv4 address), ipv6, or cni (the first address)
    #[argh(option, default = "IpPreference::default()")]
    ip_pref: IpPreference,
}

/// Upstream cnitool's container ID: `cnitool-` and the hex of the first 10 bytes of the
/// SHA-512 of the absolute netns path.
pub fn container_id_for(netns_abs: &str) -> String {
    let digest = sha512::digest(netns_abs.as_bytes());
    format!("cnitool-{}", sha512::hex(&digest[..10]))
}

/// Go's `filepath.Abs`: joined to the working directory if relative, then cleaned lexically.
pub fn absolute(path: &str) -> Result<String, String> {
    let p = Path::new(path);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| format!("cannot resolve {path:?}: {e}"))?
            .join(p)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out.into_os_string()
        .into_string()
        .map_err(|p| format!("netns path {p:?} is not UTF-8"))
}

/// Upstream cnitool's `CNI_ARGS` parsing: `K=V` pairs, both parts non-empty.
pub fn parse_cni_args(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(';')
        .map(|pair| match pair.split('=').collect::<Vec<_>>()[..] {
            [k, v] if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("invalid CNI_ARGS pair {pair:?}")),
        })
        .collect()
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn env_or(name: &str, default: &str) -> String {
    env(name)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn runtime_from_env() -> Runtime {
    let bin_dirs = env_or("CNI_PATH", "/opt/cni/bin")
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    Runtime::new(
        env_or("NETCONFPATH", "/etc/cni/net.d"),
        bin_dirs,
        env_or("CNI_CACHE_DIR", "/var/lib/cni"),
    )
}

fn runtime_conf(netns: &str, container_id: Option<String>) -> Result<RuntimeConf, String> {
    let netns = absolute(netns)?;
    let args = match env("CNI_ARGS").filter(|a| !a.is_empty()) {
        Some(a) => parse_cni_args(&a)?,
        None => vec![],
    };
    let capability_args = match env("CAP_ARGS").filter(|a| !a.is_empty()) {
        // from_slice as everywhere else: a `from_str` would link a second copy of the JSON
        // parser (5.5 KB); both read a `&str`'s bytes alike
        Some(text) => match serde_json::from_slice::<Value>(text.as_bytes()) {
            Ok(Value::Object(m)) => m,
            Ok(other) => return Err(format!("CAP_ARGS must be a JSON object, got {other}")),
            Err(e) => return Err(format!("CAP_ARGS is not valid JSON: {e}")),
        },
        None => Map::new(),
    };
    Ok(RuntimeConf {
        container_id: container_id.unwrap_or_else(|| container_id_for(&netns)),
        // Set but empty stays empty, as upstream: the chain then rejects the empty name.
        ifname: env("CNI_IFNAME").unwrap_or_else(|| "eth0".into()),
        netns,
        args,
        capability_args,
    })
}

/// What a failed command prints: the plugin's error object on stdout (if a plugin failed),
/// the full message on stderr.
fn report(err: &ChainError, version: &str) -> i32 {
    if let Some(obj) = err.plugin_error() {
        let mut v = obj.to_json(version);
        if version.is_empty() {
            v.as_object_mut().map(|o| o.remove("cniVersion"));
        }
        println!("{}", pretty(&v));
    }
    eprintln!("cnitool: {err}");
    1
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("cnitool: {msg}");
    1
}

/// Go's `MarshalIndent(…, "", "    ")`, as plugins and upstream cnitool print results.
fn pretty(v: &Value) -> String {
    use serde::Serialize;
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    v.serialize(&mut ser).expect("a JSON value serialises");
    String::from_utf8(buf).expect("serde_json writes UTF-8")
}

fn parse_keep(spec: &str) -> Result<Attachment, String> {
    match spec.split(':').collect::<Vec<_>>()[..] {
        [cid, ifname] if !cid.is_empty() && !ifname.is_empty() => Ok(Attachment {
            container_id: cid.to_string(),
            ifname: ifname.to_string(),
        }),
        _ => Err(format!("--keep {spec:?}: expected CONTAINER-ID:IFNAME")),
    }
}

/// Run an ADD, CHECK or DEL. With `cache_fallback`, a network whose config is gone from
/// disk is taken from the cache entry of this attachment, so it can still be torn down.
fn attachment_cmd(
    rt: &Runtime,
    network: &str,
    netns: &str,
    container_id: Option<String>,
    cache_fallback: bool,
    op: impl Fn(&NetworkList, &RuntimeConf) -> Result<(), ChainError>,
) -> i32 {
    let conf = match runtime_conf(netns, container_id) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let list = match rt.load_network(network) {
        Ok(list) => list,
        Err(e) => match cache_fallback.then(|| rt.cached_network(network, &conf)).flatten() {
            Some(list) => {
                super::chain::warn(format!("{e}; using the config cached at ADD"));
                list
            }
            None => return fail(e),
        },
    };
    op(&list, &conf).map_or_else(|e| report(&e, &list.cni_version), |_| 0)
}

/// Entry point: `args` are the arguments after the applet name; `applets` finds this
/// binary's own applets, which the chains run in-process.
pub fn main(args: &[OsString], applets: crate::cni::AppletLookup) -> i32 {
    let cli: Cli = match crate::util::argv::parse_args("cnitool", args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rt = runtime_from_env().with_applets(applets);
    let with_list = |name: &str, f: &dyn Fn(&NetworkList) -> i32| match rt.load_network(name) {
        Ok(list) => f(&list),
        Err(e) => fail(e),
    };
    match cli.cmd {
        Cmd::Add(c) => attachment_cmd(&rt, &c.network, &c.netns, c.container_id, false, |list, conf| {
            rt.add_network_list(list, conf)
                .map(|result| println!("{}", pretty(&result)))
        }),
        Cmd::Check(c) => attachment_cmd(&rt, &c.network, &c.netns, c.container_id, true, |list, conf| {
            rt.check_network_list(list, conf)
        }),
        Cmd::Del(c) => attachment_cmd(&rt, &c.network, &c.netns, c.container_id, true, |list, conf| {
            rt.del_network_list(list, conf)
        }),
        Cmd::Status(c) => with_list(&c.network, &|list| {
            rt.status_network_list(list)
                .map_or_else(|e| report(&e, &list.cni_version), |_| 0)
        }),
        Cmd::Gc(c) => {
            let keep: Result<Vec<Attachment>, String> = c.keep.iter().map(|k| parse_keep(k)).collect();
            match keep {
                Err(e) => fail(e),
                Ok(keep) => with_list(&c.network, &|list| {
                    rt.gc_network_list(list, &keep)
                        .map_or_else(|e| report(&e, &list.cni_version), |_| 0)
                }),
            }
        }
        Cmd::SandboxStatus(c) => {
            if let Err(e) = super::names::container_id(&c.container_id) {
                return fail(e);
            }
            let entries = rt.cached_attachments(Some(&c.container_id));
            if entries.is_empty() {
                return fail(format!(
                    "no cached attachments for container {:?} in {}",
                    c.container_id,
                    rt.cache().results_dir().display()
                ));
            }
            match sandbox_status::from_entries(&entries, &c.primary_ifname, c.ip_pref) {
                Ok(s) => {
                    println!("{}", pretty(&serde_json::to_value(&s).expect("status serialises")));
                    0
                }
                Err(e) => fail(format!("sandbox status of container {:?}: {e}", c.container_id)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_id_matches_upstream_derivation() {
        // printf %s /var/run/netns/testing | sha512sum | cut -c1-20
        assert_eq!(
            container_id_for("/var/run/netns/testing"),
            "cnitool-77383ca0a0715733ca6f"
        );
    }

    #[test]
    fn absolute_paths_are_cleaned() {
        assert_eq!(absolute("/run//netns/./a/../b/").unwrap(), "/run/netns/b");
        assert_eq!(absolute("/..").unwrap(), "/");
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute("x").unwrap(), cwd.join("x").to_str().unwrap());
    }

    #[test]
    fn cni_args_like_upstream() {
        assert_eq!(
            parse_cni_args("A=1;B=2").unwrap(),
            vec![("A".into(), "1".into()), ("B".into(), "2".into())]
        );
        assert_eq!(parse_cni_args("A=1;").unwrap_err(), "invalid CNI_ARGS pair \"\"");
        assert_eq!(parse_cni_args("A=").unwrap_err(), "invalid CNI_ARGS pair \"A=\"");
        assert_eq!(parse_cni_args("A=b=c").unwrap_err(), "invalid CNI_ARGS pair \"A=b=c\"");
    }

    #[test]
    fn keep_specs() {
        assert_eq!(
            parse_keep("c1:eth0").unwrap(),
            Attachment {
                container_id: "c1".into(),
                ifname: "eth0".into()
            }
        );
        assert_eq!(
            parse_keep("c1").unwrap_err(),
            "--keep \"c1\": expected CONTAINER-ID:IFNAME"
        );
        assert!(parse_keep("a:b:c").is_err());
    }
}
