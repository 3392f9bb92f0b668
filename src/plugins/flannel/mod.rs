//! The `flannel` meta plugin (flannel-io/cni-plugin, which every flannel and k3s node runs):
//! it reads the node's subnet from flanneld's `subnet.env`, fills in a delegate config
//! (bridge with host-local by default) and hands the attachment to that plugin: in-process
//! when it is one of cnibox's applets, exec'd from `CNI_PATH` otherwise.
//!
//! ADD stores the delegate config under `<dataDir>/<containerID>`, byte for byte what
//! flannel's plugin stores (Go's `json.Marshal` of the map), and DEL hands exactly those
//! bytes to the delegate, then removes the file; a missing file is a DEL already done.
//! CHECK hands them, with the runtime's `prevResult`, to the delegate's CHECK (flannel's
//! own CHECK checks nothing).
//!
//! * [`subnet_env`]: `subnet.env`, read as flannel reads it.
//! * [`delegate`]: the delegate config flannel's plugin builds.
pub mod delegate;
pub mod subnet_env;

use crate::cni::config::{self as cniconf, del_config};
use crate::cni::json::{self, Json, Object};
#[cfg(test)]
use crate::cni::Command;
use crate::cni::{delegate as run, CniResult, Error, Plugin, Request};
use std::path::{Path, PathBuf};

pub struct Flannel;

pub const DEFAULT_SUBNET_FILE: &str = "/run/flannel/subnet.env";
pub const DEFAULT_DATA_DIR: &str = "/var/lib/cni/flannel";

/// flannel's `NetConf`: the embedded `types.NetConf` plus its own keys; `ipam`,
/// `delegate` and `runtimeConfig` are maps it passes on.
pub struct NetConf {
    pub name: String,
    pub cni_version: String,
    pub subnet_file: PathBuf,
    pub data_dir: PathBuf,
    pub ipam: Option<Object>,
    pub delegate: Option<Object>,
    pub runtime_config: Option<Object>,
}

/// A decoded `map[string]interface{}` member as the object Go would marshal again.
fn map_member(obj: &json::Fields, key: &str, path: &str) -> Result<Option<Object>, Error> {
    Ok(json::opt_map(obj, key, path, "map[string]interface {}")?.map(|m| Object::from_map(&m)))
}

/// `loadFlannelNetConf`: the keys, with flannel's defaults for the two paths.
pub fn load(req: &Request) -> Result<NetConf, Error> {
    let ctx = |e: Error| e.context("failed to load netconf");
    cniconf::check_net_conf_but(&req.config, "NetConf", &["ipam"]).map_err(ctx)?;
    let obj = json::as_object(&req.config, "NetConf").map_err(ctx)?;
    let path = |key: &str, default: &str| -> Result<PathBuf, Error> {
        Ok(PathBuf::from(
            json::opt_str(&obj, key, &format!("NetConf.{key}"))
                .map_err(ctx)?
                .unwrap_or(default),
        ))
    };
    Ok(NetConf {
        name: req.name.clone(),
        cni_version: json::opt_str(&obj, "cniVersion", "NetConf.cniVersion")
            .map_err(ctx)?
            .unwrap_or_default()
            .to_string(),
        subnet_file: path("subnetFile", DEFAULT_SUBNET_FILE)?,
        data_dir: path("dataDir", DEFAULT_DATA_DIR)?,
        ipam: map_member(&obj, "ipam", "NetConf.ipam").map_err(ctx)?,
        delegate: map_member(&obj, "delegate", "NetConf.delegate").map_err(ctx)?,
        runtime_config: map_member(&obj, "runtimeConfig", "NetConf.runtimeConfig").map_err(ctx)?,
    })
}

/// Where ADD keeps the delegate config of a container.
fn scratch_file(data_dir: &Path, container_id: &str) -> PathBuf {
    data_dir.join(container_id)
}

/// The request the delegate gets: the same environment, `config` as its stdin.
fn delegate_request(req: &Request, config: &[u8]) -> Result<Request, Error> {
    let doc = json::parse(config).map_err(|e| Error::internal(format!("failed to parse netconf: {e}")))?;
    json::register("config", &doc);
    let fields = json::as_object(&doc, "NetConf")?;
    let version = json::opt_str(&fields, "cniVersion", "NetConf.cniVersion")?.unwrap_or_default();
    Ok(Request {
        stdin: config.to_vec(),
        cni_version: crate::cni::version::normalize(version).to_string(),
        config: doc,
        ..req.clone()
    })
}

/// The delegate's `type` in a config ADD stored.
fn delegate_type(config: &Json) -> Result<String, Error> {
    let fields = json::as_object(config, "NetConf")?;
    Ok(json::opt_str(&fields, "type", "NetConf.type")?
        .unwrap_or_default()
        .to_string())
}

/// The stored delegate config of a container; `None` when there is none.
fn stored(data_dir: &Path, container_id: &str) -> Result<Option<Vec<u8>>, Error> {
    let file = scratch_file(data_dir, container_id);
    match std::fs::read(&file) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::internal(format!(
            "open {}: {}",
            file.display(),
            crate::cni::error::go_errno_text(&e)
        ))),
    }
}

/// `saveScratchNetConf`: the directory with mode 0700, the file 0600, synced.
fn save(data_dir: &Path, container_id: &str, config: &[u8]) -> Result<(), Error> {
    let io = |what: &Path, e: std::io::Error| {
        Error::internal(format!("{}: {}", what.display(), crate::cni::error::go_errno_text(&e)))
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data_dir)
        .map_err(|e| io(data_dir, e))?;
    let file = scratch_file(data_dir, container_id);
    crate::util::atomic::write(&file, config).map_err(|e| io(&file, e))
}

use std::os::unix::fs::DirBuilderExt;

impl Plugin for Flannel {
    fn about(&self) -> &'static str {
        "CNI flannel plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req).map_err(|e| e.context("failed to load flannel netconf file"))?;
        let env = subnet_env::load(&conf.subnet_file).map_err(|e| {
            Error::internal(format!(
                "failed to load flannel 'subnet.env' file: {}. Check the flannel pod log for this node.",
                e.msg
            ))
        })?;
        let config = delegate::build(&conf, &env)?;
        let bytes = config.to_go_bytes();
        save(&conf.data_dir, &req.container_id, &bytes)?;
        let sub = delegate_request(req, &bytes)?;
        let kind = delegate_type(&config)?;
        run::add(&kind, &sub).map_err(|e| e.context("failed to delegate add"))
    }

    /// The stored config goes to the delegate as it is; the file goes once the delegate's DEL
    /// succeeded. Without the file there is nothing to do (DEL ran already, or ADD never got
    /// that far); a file that is not a config is only reported, as flannel does.
    fn del(&self, req: &Request) -> Result<(), Error> {
        let data_dir = del_config(
            "flannel",
            || load(req).map(|c| c.data_dir),
            || PathBuf::from(DEFAULT_DATA_DIR),
        );
        let Some(bytes) = stored(&data_dir, &req.container_id)? else {
            return Ok(());
        };
        let kind = match json::parse(&bytes).map_err(|e| e.to_string()).and_then(|doc| {
            json::as_object(&doc, "NetConf")
                .and_then(|f| json::opt_str(&f, "type", "NetConf.type").map(|t| t.unwrap_or_default().to_string()))
                .map_err(|e| e.msg)
        }) {
            Ok(kind) => kind,
            Err(e) => {
                // the interface stays on the bridge until the node reboots, as with flannel
                eprintln!("cnibox flannel: DEL: failed to parse netconf: {e}");
                return Ok(());
            }
        };
        run::del(&kind, &delegate_request(req, &bytes)?)?;
        let _ = std::fs::remove_file(scratch_file(&data_dir, &req.container_id));
        Ok(())
    }

    /// The delegate's CHECK on the stored config and the runtime's `prevResult`.
    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req).map_err(|e| e.context("failed to load flannel netconf file"))?;
        let bytes = stored(&conf.data_dir, &req.container_id)?.ok_or_else(|| {
            Error::internal(format!(
                "no delegate config for container {} in {}: was ADD run?",
                req.container_id,
                conf.data_dir.display()
            ))
        })?;
        let mut config = json::parse(&bytes).map_err(|e| Error::internal(format!("failed to parse netconf: {e}")))?;
        let fields = json::as_object(&req.config, "NetConf")?;
        if let (Some(prev), Some(obj)) = (json::opt_raw(&fields, "prevResult"), config.as_object_mut()) {
            obj.insert("prevResult", prev.clone());
        }
        let kind = delegate_type(&config)?;
        run::check(&kind, &delegate_request(req, &config.to_go_bytes())?)
    }
}

#[cfg(test)]
mod tests;
