//! The plugin entry point (the Go `skel` package): environment, stdin, version gates,
//! dispatch to a [`Plugin`], printing the result or the error.
use super::{CniResult, Error};

/// `CNI_COMMAND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Status,
    Gc,
    Version,
}

/// Everything a plugin gets for one call: the environment and the (already validated) config.
#[derive(Debug, Clone)]
pub struct Request {
    pub command: Command,
    pub container_id: String,
    /// Empty when not given (DEL may have no netns).
    pub netns: String,
    pub ifname: String,
    /// `CNI_ARGS`, raw.
    pub args: String,
    /// `CNI_PATH`, raw (`:`-separated).
    pub path: String,
    /// stdin, raw: delegates get exactly these bytes.
    pub stdin: Vec<u8>,
    /// stdin parsed as JSON (an object).
    pub config: serde_json::Value,
    /// The network name (validated).
    pub name: String,
    /// The config's `cniVersion` ("" is normalised to "0.1.0").
    pub cni_version: String,
}

/// A CNI plugin: one method per verb. The entry point has already checked the environment,
/// the config's name and version, and the per-verb version gates.
pub trait Plugin: Sync {
    /// `CNI <about>` on stderr when `CNI_COMMAND` is unset.
    fn about(&self) -> &'static str;
    fn add(&self, req: &Request) -> Result<CniResult, Error>;
    fn del(&self, req: &Request) -> Result<(), Error>;
    fn check(&self, req: &Request) -> Result<(), Error>;
    /// Default: ready (what skel answers for a plugin without STATUS).
    fn status(&self, _req: &Request) -> Result<(), Error> {
        Ok(())
    }
    /// Default: nothing to collect (what skel answers for a plugin without GC).
    fn gc(&self, _req: &Request) -> Result<(), Error> {
        Ok(())
    }
}

/// Run a plugin as the process entry point; returns the exit code.
pub fn run(_plugin: &dyn Plugin) -> i32 {
    unimplemented!("stage0: the protocol-core work writes this")
}
