//! The bundle's `config.json`: does the container get a network namespace of its own, and
//! adding cnibox's hooks to it (for `oci-wrap`).
//!
//! Neither side decodes the whole document: a container's config is ~10 kB (Docker's has
//! every mount, capability and masked path), and a `Value` of it cost the static binary
//! 0.4 ms (0.2 ms more to write it back), paid by the wrapper and by both hooks of every
//! container. With `members`, the hook decodes only the two members it reads and the
//! wrapper only `hooks`, copying every other byte as it is.
use super::members;
use serde_json::{json, Value};
use std::path::Path;

/// How the container's network namespace is set up by its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetnsMode {
    /// A new namespace (the usual case): configure it.
    New,
    /// Joins an existing namespace at this path.
    Join(String),
    /// No network namespace entry: the container shares the runtime's (the host's).
    Host,
}

/// What the hook reads of a bundle's config: `process.env` and the network entry of
/// `linux.namespaces`, each decoded on its own; the rest is skipped unbuilt. A member that is
/// absent or `null` counts as empty, as it did when the hook indexed a whole `Value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    env: Vec<String>,
    netns: NetnsMode,
}

impl Config {
    pub fn parse(bytes: &[u8]) -> Result<Config, String> {
        // the top-level object is scanned once; each member of it is scanned on its own
        let top = members::parse(bytes).map_err(|e| e.to_string())?;
        let nested = |outer: &str, inner: &str| -> Result<Value, String> {
            let Some(o) = top.value(bytes, outer) else {
                return Ok(Value::Null);
            };
            match members::member(o, inner).map_err(|e| format!("{outer}: {e}"))? {
                Some(v) => serde_json::from_slice(v).map_err(|e| format!("{outer}.{inner}: {e}")),
                None => Ok(Value::Null),
            }
        };
        let env = nested("process", "env")?;
        let env = env.as_array().into_iter().flatten().filter_map(Value::as_str);
        let namespaces = nested("linux", "namespaces")?;
        let network = namespaces
            .as_array()
            .and_then(|list| list.iter().find(|n| n["type"].as_str() == Some("network")));
        let netns = match network {
            None => NetnsMode::Host,
            Some(n) => match n["path"].as_str() {
                Some(p) if !p.is_empty() => NetnsMode::Join(p.to_string()),
                _ => NetnsMode::New,
            },
        };
        Ok(Config {
            env: env.map(str::to_string).collect(),
            netns,
        })
    }

    /// The container's environment, `KEY=value` entries.
    pub fn env(&self) -> &[String] {
        &self.env
    }

    pub fn netns_mode(&self) -> &NetnsMode {
        &self.netns
    }
}

/// `<bundle>/config.json`.
pub fn config_path(bundle: &Path) -> std::path::PathBuf {
    bundle.join("config.json")
}

/// The raw `<bundle>/config.json`.
pub fn read_bytes(bundle: &Path) -> Result<Vec<u8>, String> {
    let path = config_path(bundle);
    std::fs::read(&path).map_err(|e| format!("read {}: {e}", path.display()))
}

/// The hook's view of `<bundle>/config.json`.
pub fn read_config(bundle: &Path) -> Result<Config, String> {
    let bytes = read_bytes(bundle)?;
    Config::parse(&bytes).map_err(|e| format!("parse {}: {e}", config_path(bundle).display()))
}

/// A namespace reached through a process (`/proc/<pid>/ns/net`, what Docker writes for
/// `--net container:A`): that process's, never one made for this container.
pub fn is_process_netns(path: &str) -> bool {
    std::path::Path::new(path).starts_with("/proc")
}

/// `config` with a createRuntime hook (`<exe> oci-hook add …`) and a poststop hook
/// (`<exe> oci-hook del …`) added, unless an identical entry is already there, so wrapping
/// the same bundle twice does not run the hooks twice: `None` when nothing was missing.
/// Only `hooks` is parsed and rewritten; every other byte is copied as it is.
pub fn add_hooks(config: &[u8], exe: &str, hook_args: &[String]) -> Result<Option<Vec<u8>>, String> {
    let object = members::parse(config).map_err(|e| e.to_string())?;
    let found = object.get("hooks");
    let mut hooks = match &found {
        Some(v) => serde_json::from_slice(&config[v.clone()]).map_err(|e| format!("hooks: {e}"))?,
        None => json!({}),
    };
    if !add_hook_entries(&mut hooks, exe, hook_args) {
        return Ok(None);
    }
    let hooks = hooks.to_string();
    let mut out = Vec::with_capacity(config.len() + hooks.len() + 16);
    match found {
        Some(v) => {
            out.extend_from_slice(&config[..v.start]);
            out.extend_from_slice(hooks.as_bytes());
            out.extend_from_slice(&config[v.end..]);
        }
        None => {
            out.extend_from_slice(&config[..object.body_start]);
            out.extend_from_slice(b"\"hooks\":");
            out.extend_from_slice(hooks.as_bytes());
            if !object.members.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(&config[object.body_start..]);
        }
    }
    Ok(Some(out))
}

/// Add cnibox's two entries to a config's `hooks` object; whether anything was added.
fn add_hook_entries(hooks: &mut Value, exe: &str, hook_args: &[String]) -> bool {
    if !hooks.is_object() {
        *hooks = json!({});
    }
    let mut changed = false;
    for (kind, phase) in [("createRuntime", "add"), ("poststop", "del")] {
        let mut args = vec!["cnibox".to_string(), "oci-hook".to_string(), phase.to_string()];
        args.extend(hook_args.iter().cloned());
        let entry = json!({ "path": exe, "args": args });
        let list = hooks
            .as_object_mut()
            .expect("object")
            .entry(kind)
            .or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        let list = list.as_array_mut().expect("array");
        if !list.contains(&entry) {
            list.push(entry);
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(config: Value) -> NetnsMode {
        Config::parse(config.to_string().as_bytes())
            .unwrap()
            .netns_mode()
            .clone()
    }

    #[test]
    fn netns_modes() {
        assert_eq!(
            mode(json!({"linux":{"namespaces":[{"type":"pid"},{"type":"network"}]}})),
            NetnsMode::New
        );
        assert_eq!(
            mode(json!({"linux":{"namespaces":[{"type":"network","path":"/run/netns/x"}]}})),
            NetnsMode::Join("/run/netns/x".into())
        );
        assert_eq!(
            mode(json!({"linux":{"namespaces":[{"type":"network","path":""}]}})),
            NetnsMode::New
        );
        assert_eq!(mode(json!({"linux":{"namespaces":[{"type":"pid"}]}})), NetnsMode::Host);
        assert_eq!(mode(json!({})), NetnsMode::Host);
        assert!(is_process_netns("/proc/4242/ns/net"));
        assert!(is_process_netns("/proc/4242/task/4243/ns/net"));
        assert!(!is_process_netns("/run/docker/netns/3f2a9c"));
        assert!(!is_process_netns("/procfs/x"));
    }

    #[test]
    fn the_hook_reads_env_and_namespaces_and_skips_the_rest() {
        let c = Config::parse(
            br#"{"ociVersion":"1.0.2","process":{"args":["sh"],"env":["PATH=/bin","IPV4=10.0.0.9"],"cwd":"/"},
                 "mounts":[{"destination":"/proc","type":"proc"}],"hooks":{"prestart":[{"path":"/x"}]},
                 "linux":{"namespaces":[{"type":"network","path":"/run/netns/n"}],"maskedPaths":["/proc/kcore"]}}"#,
        )
        .unwrap();
        assert_eq!(c.env(), ["PATH=/bin", "IPV4=10.0.0.9"]);
        assert_eq!(*c.netns_mode(), NetnsMode::Join("/run/netns/n".into()));
        // null members are empty ones, as for a Value
        let c = Config::parse(br#"{"process":{"env":null},"linux":{"namespaces":[{"type":"network","path":null}]}}"#)
            .unwrap();
        assert!(c.env().is_empty());
        assert_eq!(*c.netns_mode(), NetnsMode::New);
        let c = Config::parse(br#"{"process":null,"linux":null}"#).unwrap();
        assert_eq!((c.env().len(), c.netns_mode()), (0, &NetnsMode::Host));
        assert!(Config::parse(b"{").is_err());
        // entries that are not strings are skipped, as before; broken JSON is an error
        let c = Config::parse(br#"{"process":{"env":[7,"A=1"]}}"#).unwrap();
        assert_eq!(c.env(), ["A=1"]);
        assert!(Config::parse(br#"{"process":{"env":[7}}"#).is_err());
        assert!(Config::parse(br#"{"process":"x"}"#).is_err());
    }

    #[test]
    fn hooks_are_added_once_and_everything_else_kept() {
        let config = json!({
            "ociVersion": "1.0.2-dev",
            "process": {"env": ["A=1"], "args": ["true"]},
            "linux": {"namespaces": [{"type": "network"}], "sysctl": {"net.ipv4.ip_forward": "1"}},
            "hooks": {"poststop": [{"path": "/bin/true"}], "prestart": [{"path": "/proc/1/exe", "args": ["libnetwork-setkey"]}]}
        });
        let args = vec!["--network".to_string(), "n1".to_string()];
        let once = add_hooks(config.to_string().as_bytes(), "/usr/local/bin/cnibox", &args)
            .unwrap()
            .expect("hooks added");
        let c: Value = serde_json::from_slice(&once).unwrap();
        let cr = c["hooks"]["createRuntime"].as_array().unwrap();
        assert_eq!(cr.len(), 1);
        assert_eq!(cr[0]["path"], "/usr/local/bin/cnibox");
        assert_eq!(cr[0]["args"], json!(["cnibox", "oci-hook", "add", "--network", "n1"]));
        let ps = c["hooks"]["poststop"].as_array().unwrap();
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0]["path"], "/bin/true");
        assert_eq!(ps[1]["args"][2], "del");
        assert_eq!(c["hooks"]["prestart"], config["hooks"]["prestart"]);
        // every other member comes through unchanged
        let mut rest = c.clone();
        rest.as_object_mut().unwrap().remove("hooks");
        let mut want = config.clone();
        want.as_object_mut().unwrap().remove("hooks");
        assert_eq!(rest, want);
        // a second pass finds nothing to add
        assert_eq!(add_hooks(&once, "/usr/local/bin/cnibox", &args).unwrap(), None);
        // every byte outside `hooks` is kept, layout included
        let pretty = serde_json::to_string_pretty(&config).unwrap();
        let out = String::from_utf8(add_hooks(pretty.as_bytes(), "/x", &[]).unwrap().unwrap()).unwrap();
        let at = pretty.find("\"hooks\": ").unwrap() + "\"hooks\": ".len();
        assert_eq!(out[..at], pretty[..at]);
        assert!(
            out.ends_with(&pretty[pretty.find("\n  },\n  \"linux\"").unwrap() + 4..]),
            "{out}"
        );
        // no hooks member at all, or an empty object
        let empty: Value = serde_json::from_slice(&add_hooks(b" { } ", "/x", &[]).unwrap().unwrap()).unwrap();
        assert_eq!(
            empty["hooks"]["poststop"][0]["args"],
            json!(["cnibox", "oci-hook", "del"])
        );
        let bare = add_hooks(br#"{"ociVersion":"1.0.2"}"#, "/x", &[]).unwrap().unwrap();
        let bare: Value = serde_json::from_slice(&bare).unwrap();
        assert_eq!(
            bare["hooks"]["createRuntime"][0]["args"],
            json!(["cnibox", "oci-hook", "add"])
        );
        assert_eq!(bare["ociVersion"], "1.0.2");
    }

    #[test]
    fn a_config_that_is_not_an_object_is_an_error() {
        for bad in [
            &b"[]"[..],
            b"\"x\"",
            b"{",
            b"",
            br#"{"hooks": }"#,
            br#"{"hooks": [1}"#,
            br#"{"hooks": nul}"#,
        ] {
            assert!(add_hooks(bad, "/x", &[]).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
