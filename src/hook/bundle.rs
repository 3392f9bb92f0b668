//! The bundle's `config.json`: does the container get a network namespace of its own, and
//! adding cnibox's hooks to it (for `oci-wrap`).
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

pub fn read_config(bundle: &Path) -> Result<Value, String> {
    let path = bundle.join("config.json");
    let bytes = std::fs::read(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("parse {}: {e}", path.display()))
}

pub fn netns_mode(config: &Value) -> NetnsMode {
    let entry = config["linux"]["namespaces"]
        .as_array()
        .and_then(|list| list.iter().find(|n| n["type"].as_str() == Some("network")));
    match entry {
        None => NetnsMode::Host,
        Some(n) => match n["path"].as_str() {
            Some(p) if !p.is_empty() => NetnsMode::Join(p.to_string()),
            _ => NetnsMode::New,
        },
    }
}

/// A namespace reached through a process (`/proc/<pid>/ns/net`, what Docker writes for
/// `--net container:A`): that process's, never one made for this container.
pub fn is_process_netns(path: &str) -> bool {
    std::path::Path::new(path).starts_with("/proc")
}

/// Add a createRuntime hook (`<exe> oci-hook add …`) and a poststop hook
/// (`<exe> oci-hook del …`) unless an identical entry is already there, so wrapping the
/// same bundle twice does not run the hooks twice. Returns whether the config changed.
pub fn add_hooks(config: &mut Value, exe: &str, hook_args: &[String]) -> bool {
    let mut changed = false;
    if !config.is_object() {
        *config = json!({});
    }
    let hooks = config
        .as_object_mut()
        .expect("object")
        .entry("hooks")
        .or_insert_with(|| json!({}));
    if !hooks.is_object() {
        *hooks = json!({});
    }
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

    #[test]
    fn netns_modes() {
        assert_eq!(
            netns_mode(&json!({"linux":{"namespaces":[{"type":"pid"},{"type":"network"}]}})),
            NetnsMode::New
        );
        assert_eq!(
            netns_mode(&json!({"linux":{"namespaces":[{"type":"network","path":"/run/netns/x"}]}})),
            NetnsMode::Join("/run/netns/x".into())
        );
        assert_eq!(
            netns_mode(&json!({"linux":{"namespaces":[{"type":"pid"}]}})),
            NetnsMode::Host
        );
        assert_eq!(netns_mode(&json!({})), NetnsMode::Host);
        assert!(is_process_netns("/proc/4242/ns/net"));
        assert!(is_process_netns("/proc/4242/task/4243/ns/net"));
        assert!(!is_process_netns("/run/docker/netns/3f2a9c"));
        assert!(!is_process_netns("/procfs/x"));
    }

    #[test]
    fn hooks_are_added_once_and_existing_hooks_kept() {
        let mut c = json!({"hooks":{"poststop":[{"path":"/bin/true"}]}});
        let args = vec!["--network".to_string(), "n1".to_string()];
        assert!(add_hooks(&mut c, "/usr/local/bin/cnibox", &args));
        assert!(
            !add_hooks(&mut c, "/usr/local/bin/cnibox", &args),
            "nothing left to add"
        );
        let cr = c["hooks"]["createRuntime"].as_array().unwrap();
        assert_eq!(cr.len(), 1);
        assert_eq!(cr[0]["args"], json!(["cnibox", "oci-hook", "add", "--network", "n1"]));
        let ps = c["hooks"]["poststop"].as_array().unwrap();
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0]["path"], "/bin/true");
        assert_eq!(ps[1]["args"][2], "del");
    }
}
