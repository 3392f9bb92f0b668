//! Running a network list as libcni does (`AddNetworkList`, `DelNetworkList`,
//! `CheckNetworkList`, `GetStatusNetworkList`), with the result cache and the locks.
//! This is the library API the `cnitool` applet and the OCI hook share.
use super::cache::{Cache, CacheError, Cached, Entry, Key, KIND_V1};
use super::conflist::{self, ConfError, NetworkList, PluginConf};
use super::lock::{self, LockError};
use super::request;
use crate::cni;
use crate::cni::invoke::{self, ExecError, Invocation};
use crate::cni::json::{self, Json};
use crate::cni::version;
use crate::cni::{AppletLookup, CniResult};
use serde_json::{Map, Value};
use std::fmt;
use std::path::PathBuf;

/// Where a runtime finds configs, plugins and its cache.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// Network configs (`NETCONFPATH`, default /etc/cni/net.d).
    pub conf_dir: PathBuf,
    /// Plugin directories (`CNI_PATH`, default /opt/cni/bin).
    pub bin_dirs: Vec<PathBuf>,
    /// Result cache and locks (default /var/lib/cni).
    pub cache_dir: PathBuf,
    /// This binary's own applets, handed down from the applet table: a plugin of the chain
    /// that is this very binary runs in-process (as IPAM delegation does), any other is
    /// exec'd. `None`: every plugin is exec'd.
    pub applets: Option<AppletLookup>,
}

/// The per-attachment arguments of one operation (libcni's `RuntimeConf`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeConf {
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    /// `CNI_ARGS` pairs.
    pub args: Vec<(String, String)>,
    /// Capability arguments; each plugin gets those its `capabilities` enable.
    pub capability_args: Map<String, Value>,
}

/// An attachment GC must keep: `{"containerID","ifname"}` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Attachment {
    pub container_id: String,
    pub ifname: String,
}

#[derive(Debug)]
pub enum ChainError {
    Config(ConfError),
    /// A name, version or argument the operation cannot run with.
    Invalid(String),
    /// A plugin failed; `op` is libcni's word for the verb (`add`, `delete`, `check`, …).
    Plugin {
        plugin: String,
        op: &'static str,
        error: ExecError,
    },
    Cache(String),
    Lock(LockError),
    /// GC: a stale attachment could not be deleted.
    Stale {
        container_id: String,
        ifname: String,
        error: Box<ChainError>,
    },
    /// GC collects every error instead of stopping at the first.
    Many(Vec<ChainError>),
}

impl ChainError {
    /// The plugin's own error object, when a plugin failed (the first one, for GC).
    pub fn plugin_error(&self) -> Option<&cni::Error> {
        match self {
            ChainError::Plugin {
                error: ExecError::Plugin(e),
                ..
            } => Some(e),
            ChainError::Stale { error, .. } => error.plugin_error(),
            ChainError::Many(all) => all.iter().find_map(ChainError::plugin_error),
            _ => None,
        }
    }
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainError::Config(e) => write!(f, "{e}"),
            ChainError::Invalid(m) | ChainError::Cache(m) => f.write_str(m),
            ChainError::Plugin { plugin, op, error } => write!(f, "plugin {plugin} failed ({op}): {error}"),
            ChainError::Lock(e) => write!(f, "{e}"),
            ChainError::Stale {
                container_id,
                ifname,
                error,
            } => {
                write!(f, "failed to delete stale attachment {container_id} {ifname}: {error}")
            }
            ChainError::Many(all) => {
                let lines: Vec<String> = all.iter().map(ToString::to_string).collect();
                f.write_str(&lines.join("\n"))
            }
        }
    }
}

impl std::error::Error for ChainError {}

impl From<ConfError> for ChainError {
    fn from(e: ConfError) -> Self {
        ChainError::Config(e)
    }
}

impl From<LockError> for ChainError {
    fn from(e: LockError) -> Self {
        ChainError::Lock(e)
    }
}

impl From<CacheError> for ChainError {
    fn from(e: CacheError) -> Self {
        match e {
            CacheError::InvalidKey(m) => ChainError::Invalid(m),
            other => ChainError::Cache(other.to_string()),
        }
    }
}

fn version_at_least(list: &NetworkList, min: &str) -> Result<bool, ChainError> {
    version::compare(&list.cni_version, min)
        .map(|o| o != std::cmp::Ordering::Less)
        .map_err(|e| ChainError::Invalid(format!("network {:?}: {e}", list.name)))
}

pub(super) fn warn(msg: impl fmt::Display) {
    eprintln!("cnibox: warning: {msg}");
}

struct CachedArgs {
    cni_args: Vec<(String, String)>,
    capability_args: Map<String, Value>,
}

/// What the cache holds for an attachment, made ready for DEL or CHECK.
struct FromCache {
    /// The list ADD ran with, when the cache has it.
    list: Option<NetworkList>,
    /// The `CNI_ARGS` pairs and capability arguments ADD ran with (only with `list`).
    args: Option<CachedArgs>,
    result: Option<Value>,
    /// Why the cache could not be used, if it could not.
    problem: Option<String>,
}

impl Runtime {
    pub fn new(conf_dir: impl Into<PathBuf>, bin_dirs: Vec<PathBuf>, cache_dir: impl Into<PathBuf>) -> Runtime {
        Runtime {
            conf_dir: conf_dir.into(),
            bin_dirs,
            cache_dir: cache_dir.into(),
            applets: None,
        }
    }

    /// The same runtime, running this binary's own applets in-process.
    pub fn with_applets(mut self, applets: AppletLookup) -> Runtime {
        self.applets = Some(applets);
        self
    }

    pub fn cache(&self) -> Cache {
        Cache::new(&self.cache_dir)
    }

    /// The network called `name` in `conf_dir`.
    pub fn load_network(&self, name: &str) -> Result<NetworkList, ChainError> {
        Ok(conflist::load(&self.conf_dir, name)?)
    }

    pub(super) fn cni_path(&self) -> String {
        let dirs: Vec<String> = self.bin_dirs.iter().map(|d| d.display().to_string()).collect();
        dirs.join(":")
    }

    fn invocation(&self, command: &'static str, rt: &RuntimeConf) -> Invocation {
        Invocation {
            command,
            container_id: rt.container_id.clone(),
            netns: rt.netns.clone(),
            ifname: rt.ifname.clone(),
            args: rt
                .args
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(";"),
            path: self.cni_path(),
            env: Vec::new(),
        }
    }

    pub(super) fn call(
        &self,
        plugin: &PluginConf,
        op: &'static str,
        stdin: &[u8],
        inv: &Invocation,
    ) -> Result<Vec<u8>, ChainError> {
        let fail = |error| ChainError::Plugin {
            plugin: plugin.describe(),
            op,
            error,
        };
        let path = invoke::find(&plugin.plugin_type, &self.bin_dirs).map_err(fail)?;
        if let Some((own, applets)) = self.own_applet(&path, &plugin.plugin_type) {
            return invoke::run_in_process(own, applets, stdin, inv).map_err(fail);
        }
        invoke::exec(&path, stdin, inv).map_err(fail)
    }

    /// The applet behind `path` when `path` is this very binary and answers to `name`
    /// (exec'ing ourselves under a name we do not answer to is left to fail as exec fails).
    /// Also the lookup, which the applet's own delegations need.
    fn own_applet(&self, path: &std::path::Path, name: &str) -> Option<(&'static dyn cni::Plugin, AppletLookup)> {
        let lookup = self.applets?;
        if !crate::util::same_file(path, std::path::Path::new("/proc/self/exe")) {
            return None;
        }
        Some((lookup(name)?, lookup))
    }

    /// ADD every plugin in order, each getting the previous result; cache the final result
    /// with the list and arguments it came from, and return it.
    pub fn add_network_list(&self, list: &NetworkList, rt: &RuntimeConf) -> Result<Value, ChainError> {
        let key = Key::new(&list.name, &rt.container_id, &rt.ifname)?;
        let _locks = lock::attachment(&self.cache_dir, &key)?;
        if self.cache().from_earlier_boot(&key) && !list.keeps_earlier_boots() {
            // the same container in an earlier boot: what plugins keep on disk for that
            // attachment (an address) goes before the new ADD
            if let Err(e) = self.del_plugins_and_cache(list, rt, &key) {
                warn(format!(
                    "{}: delete of the attachment cached in an earlier boot: {e}",
                    key.file_name()
                ));
            }
        }
        let inv = self.invocation("ADD", rt);
        let mut prev: Option<Value> = None;
        for plugin in &list.plugins {
            let stdin = request::build(
                plugin,
                &list.name,
                &list.cni_version,
                prev.as_ref(),
                &rt.capability_args,
            );
            let out = self.call(plugin, "add", &stdin, &inv)?;
            let result = invoke::parse_result(&out, &list.cni_version).map_err(|error| ChainError::Plugin {
                plugin: plugin.describe(),
                op: "add",
                error,
            })?;
            prev = Some(result);
        }
        let result = prev.unwrap_or(Value::Null);
        let entry = Entry {
            kind: KIND_V1.into(),
            container_id: rt.container_id.clone(),
            config: list.bytes.clone(),
            ifname: rt.ifname.clone(),
            network: list.name.clone(),
            netns: rt.netns.clone(),
            cni_args: rt.args.clone(),
            capability_args: rt.capability_args.clone(),
            result: Some(result.clone()),
        };
        self.cache()
            .write(&key, &entry)
            .map_err(|e| ChainError::Cache(format!("failed to set network {:?} cached result: {e}", list.name)))?;
        Ok(result)
    }

    fn read_cached(&self, key: &Key) -> FromCache {
        let mut out = FromCache {
            list: None,
            args: None,
            result: None,
            problem: None,
        };
        match self.cache().read(key) {
            Cached::Missing => {}
            Cached::Corrupt(why) => {
                out.problem = Some(format!(
                    "cache file {} is unusable: {why}",
                    self.cache().path(key).display()
                ))
            }
            Cached::Legacy(result) => out.result = Some(result),
            Cached::Entry(entry) => {
                if !entry.config.is_empty() {
                    match NetworkList::from_bytes(&entry.config) {
                        Ok(l) if l.name == key.network && !l.plugins.is_empty() => out.list = Some(l),
                        Ok(l) => warn(format!(
                            "cached config for {} is for network {:?}; using the config on disk",
                            key.file_name(),
                            l.name
                        )),
                        Err(e) => warn(format!(
                            "cached config for {} does not parse ({e}); using the config on disk",
                            key.file_name()
                        )),
                    }
                }
                if out.list.is_some() {
                    out.args = Some(CachedArgs {
                        cni_args: entry.cni_args.clone(),
                        capability_args: entry.capability_args.clone(),
                    });
                }
                out.result = entry.result.clone();
            }
        }
        out
    }

    /// The cached result in the list's version, for `prevResult`.
    fn prev_result(list: &NetworkList, result: Option<Value>) -> Result<Option<Value>, String> {
        match result {
            None => Ok(None),
            Some(r) => {
                let to = if list.cni_version.is_empty() {
                    "0.1.0"
                } else {
                    list.cni_version.as_str()
                };
                // Same version: passed on as cached; otherwise converted as libcni's GetAsVersion.
                let cached = Json::from(&r);
                let declared = json::as_object(&cached, "Result")
                    .and_then(|o| json::opt_str(&o, "cniVersion", "Result.cniVersion").map(|v| v == Some(to)));
                if declared == Ok(true) {
                    return Ok(Some(r));
                }
                CniResult::from_json(&cached)
                    .and_then(|c| c.to_json(to))
                    .map(Some)
                    .map_err(|e| format!("failed to convert cached result to config version {to:?}: {e}"))
            }
        }
    }

    /// The list ADD ran with, from the cache, for DEL and CHECK when the network's config is
    /// gone from disk.
    pub fn cached_network(&self, name: &str, rt: &RuntimeConf) -> Option<NetworkList> {
        let key = Key::new(name, &rt.container_id, &rt.ifname).ok()?;
        self.read_cached(&key).list
    }

    /// The list and arguments DEL and CHECK run with: the cached ones when the cache has
    /// them (the config on disk may have changed since ADD), else the given ones.
    fn effective(list: &NetworkList, rt: &RuntimeConf, cached: &mut FromCache) -> (NetworkList, RuntimeConf) {
        let list = cached.list.take().unwrap_or_else(|| list.clone());
        let mut rt = rt.clone();
        if let Some(args) = cached.args.take() {
            if !args.cni_args.is_empty() {
                rt.args = args.cni_args;
            }
            rt.capability_args = args.capability_args;
        }
        (list, rt)
    }

    /// DEL every plugin in reverse order with the cached result, then drop the cache entry.
    /// A missing, empty or corrupt cache never blocks DEL: it runs without `prevResult`.
    /// An attachment cached in an earlier boot is DELeted as one whose namespace and result
    /// are gone: without `CNI_NETNS` and without `prevResult`.
    pub fn del_network_list(&self, list: &NetworkList, rt: &RuntimeConf) -> Result<(), ChainError> {
        let key = Key::new(&list.name, &rt.container_id, &rt.ifname)?;
        let _locks = lock::attachment(&self.cache_dir, &key)?;
        self.del_locked(list, rt, &key)
    }

    pub(super) fn del_locked(&self, list: &NetworkList, rt: &RuntimeConf, key: &Key) -> Result<(), ChainError> {
        self.del_plugins_and_cache(list, rt, key)?;
        lock::remove_attachment(&self.cache_dir, key);
        Ok(())
    }

    /// DEL's work without removing the attachment's lock file: for an ADD that deletes
    /// the attachment first and goes on holding that lock (removing the file would let the
    /// next caller lock a new one beside it).
    fn del_plugins_and_cache(&self, list: &NetworkList, rt: &RuntimeConf, key: &Key) -> Result<(), ChainError> {
        let mut cached = self.read_cached(key);
        if let Some(p) = &cached.problem {
            warn(format!("{p}; deleting without prevResult"));
        }
        let earlier_boot = self.cache().from_earlier_boot(key);
        if earlier_boot {
            // the names and addresses in its result may be another attachment's now
            cached.result = None;
        }
        let (list, mut rt) = Self::effective(list, rt, &mut cached);
        if earlier_boot {
            // and its namespace is gone: a path to it names another one now, if any
            rt.netns.clear();
        }
        let prev = if version_at_least(&list, "0.4.0")? {
            Self::prev_result(&list, cached.result.take()).unwrap_or_else(|e| {
                warn(format!("{}: {e}; deleting without prevResult", key.file_name()));
                None
            })
        } else {
            None
        };
        let inv = self.invocation("DEL", &rt);
        for plugin in list.plugins.iter().rev() {
            let stdin = request::build(
                plugin,
                &list.name,
                &list.cni_version,
                prev.as_ref(),
                &rt.capability_args,
            );
            self.call(plugin, "delete", &stdin, &inv)?;
        }
        self.cache().remove(key)?;
        Ok(())
    }

    /// CHECK every plugin in order with the cached result (libcni's rules: an error below
    /// 0.4.0, nothing to do with `disableCheck`).
    pub fn check_network_list(&self, list: &NetworkList, rt: &RuntimeConf) -> Result<(), ChainError> {
        let key = Key::new(&list.name, &rt.container_id, &rt.ifname)?;
        let _locks = lock::attachment(&self.cache_dir, &key)?;
        let mut cached = self.read_cached(&key);
        let (list, rt) = Self::effective(list, rt, &mut cached);
        if !version_at_least(&list, "0.4.0")? {
            return Err(ChainError::Invalid(format!(
                "configuration version {:?} does not support the CHECK command",
                list.cni_version
            )));
        }
        if list.disable_check {
            return Ok(());
        }
        let cache_err =
            |e: String| ChainError::Cache(format!("failed to get network {:?} cached result: {e}", list.name));
        if let Some(p) = cached.problem.take() {
            return Err(cache_err(p));
        }
        let prev = Self::prev_result(&list, cached.result.take()).map_err(cache_err)?;
        let inv = self.invocation("CHECK", &rt);
        for plugin in &list.plugins {
            let stdin = request::build(
                plugin,
                &list.name,
                &list.cni_version,
                prev.as_ref(),
                &rt.capability_args,
            );
            self.call(plugin, "check", &stdin, &inv)?;
        }
        Ok(())
    }

    /// STATUS every plugin in order, stopping at the first error; below 1.1.0 there is no
    /// STATUS and the network counts as ready.
    pub fn status_network_list(&self, list: &NetworkList) -> Result<(), ChainError> {
        if !version_at_least(list, "1.1.0")? {
            return Ok(());
        }
        let inv = self.invocation("STATUS", &RuntimeConf::default());
        for plugin in &list.plugins {
            let stdin = request::build_bare(plugin, &list.name, &list.cni_version, &[]);
            self.call(plugin, "status", &stdin, &inv)?;
        }
        Ok(())
    }

    /// Every cached attachment, or only those of one container.
    pub fn cached_attachments(&self, container_id: Option<&str>) -> Vec<Entry> {
        self.cache()
            .list()
            .into_iter()
            .filter(|e| container_id.map_or(true, |c| e.container_id == c))
            .collect()
    }
}
