//! OCI hook mode: CNI networking for any OCI runtime (runc, crun), without a daemon.
//!
//! * `oci-hook` runs as a createRuntime (or prestart) hook to ADD the container's network
//!   namespace to one or more networks, and as a poststop hook to DEL it again.
//! * `oci-wrap` stands in for the runtime and adds those hooks to each bundle it creates.
pub mod bundle;
pub mod members;
pub mod run;
pub mod settings;
pub mod state;
pub mod wrap;

use std::path::PathBuf;

/// The options shared by `oci-hook` and `oci-wrap` (which hands them on to the hook).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOptions {
    pub network: Vec<String>,
    pub conf_dir: Option<PathBuf>,
    pub bin_dir: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    pub ifname: Option<String>,
    pub log_file: Option<PathBuf>,
}

impl HookOptions {
    /// The options as hook arguments.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![];
        for n in &self.network {
            a.extend(["--network".to_string(), n.clone()]);
        }
        let paths = [
            ("--conf-dir", &self.conf_dir),
            ("--bin-dir", &self.bin_dir),
            ("--cache-dir", &self.cache_dir),
            ("--log-file", &self.log_file),
        ];
        for (flag, value) in paths {
            if let Some(v) = value {
                a.extend([flag.to_string(), v.to_string_lossy().into_owned()]);
            }
        }
        if let Some(i) = &self.ifname {
            a.extend(["--ifname".to_string(), i.clone()]);
        }
        a
    }
}
