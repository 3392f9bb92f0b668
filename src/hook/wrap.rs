//! `oci-wrap`: stand in for an OCI runtime (runc, crun) so that containers created through
//! it get cnibox's hooks, e.g. `docker run --runtime cnibox …` where Docker's runtime entry
//! is `cnibox oci-wrap --runtime /usr/bin/runc [hook options] --`.
//!
//! On `create` and `run` it adds the createRuntime and poststop hooks to the bundle's
//! `config.json` (written atomically), then execs the real runtime with the original
//! arguments unchanged; every other subcommand goes straight to the runtime.
use super::bundle;
use super::HookOptions;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

#[derive(argh::FromArgs, Debug)]
/// Run an OCI runtime with cnibox's network hooks added to every container it creates.
/// Usage: cnibox oci-wrap --runtime PATH [hook options] -- RUNTIME-ARGS…
pub struct WrapArgs {
    /// the real OCI runtime (e.g. /usr/bin/runc)
    #[argh(option)]
    pub runtime: PathBuf,
    #[argh(option)]
    /// network to attach (repeatable; passed to the hook)
    pub network: Vec<String>,
    #[argh(option)]
    /// network config dir for the hook
    pub conf_dir: Option<PathBuf>,
    #[argh(option)]
    /// plugin dir for the hook
    pub bin_dir: Option<PathBuf>,
    #[argh(option)]
    /// result cache dir for the hook
    pub cache_dir: Option<PathBuf>,
    #[argh(option)]
    /// interface name in the container for the hook
    pub ifname: Option<String>,
    #[argh(option)]
    /// log file for the hook
    pub log_file: Option<PathBuf>,
    /// the runtime's own arguments (after --)
    #[argh(positional, greedy)]
    pub runtime_args: Vec<String>,
}

impl WrapArgs {
    fn hook_options(&self) -> HookOptions {
        HookOptions {
            network: self.network.clone(),
            conf_dir: self.conf_dir.clone(),
            bin_dir: self.bin_dir.clone(),
            cache_dir: self.cache_dir.clone(),
            ifname: self.ifname.clone(),
            log_file: self.log_file.clone(),
        }
    }
}

/// Global options of runc and crun that take a separate value.
const VALUE_FLAGS: &[&str] = &[
    "--root",
    "--log",
    "--log-format",
    "--criu",
    "--rootless",
    "--cgroup-manager",
];

/// The runtime's subcommand and the position of its arguments.
pub fn subcommand(args: &[String]) -> Option<(usize, &str)> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a.starts_with('-') {
            if VALUE_FLAGS.contains(&a) {
                i += 1;
            }
            i += 1;
            continue;
        }
        return Some((i, a));
    }
    None
}

/// The bundle of a create/run: `--bundle X`, `-b X`, `--bundle=X`, else the working directory.
pub fn bundle_dir(sub_args: &[String], cwd: &Path) -> PathBuf {
    let mut it = sub_args.iter();
    while let Some(a) = it.next() {
        let value = match a.as_str() {
            "--bundle" | "-b" => it.next().cloned(),
            s => s
                .strip_prefix("--bundle=")
                .or_else(|| s.strip_prefix("-b="))
                .map(str::to_string),
        };
        if let Some(v) = value {
            return cwd.join(v);
        }
    }
    cwd.to_path_buf()
}

/// Add the hooks to `<bundle>/config.json` atomically.
pub fn inject(bundle_dir: &Path, exe: &str, hook_args: &[String]) -> Result<(), String> {
    let mut config = bundle::read_config(bundle_dir)?;
    bundle::add_hooks(&mut config, exe, hook_args);
    let path = bundle_dir.join("config.json");
    let bytes = serde_json::to_vec(&config).map_err(|e| format!("encode {}: {e}", path.display()))?;
    crate::util::atomic::write(&path, &bytes).map_err(|e| format!("write {}: {e}", path.display()))
}

/// The `oci-wrap` applet.
pub fn main(args: &[OsString]) -> i32 {
    let parsed: WrapArgs = match crate::util::argv::parse_args("cnibox oci-wrap", args) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Some((i, sub)) = subcommand(&parsed.runtime_args) {
        if sub == "create" || sub == "run" {
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
            let bundle = bundle_dir(&parsed.runtime_args[i + 1..], &cwd);
            let exe = match std::fs::read_link("/proc/self/exe") {
                Ok(p) => p.to_string_lossy().into_owned(),
                Err(e) => {
                    eprintln!("cnibox oci-wrap: cannot find this binary through /proc/self/exe: {e}");
                    return 1;
                }
            };
            if let Err(e) = inject(&bundle, &exe, &parsed.hook_options().to_args()) {
                eprintln!("cnibox oci-wrap: {e}");
                return 1;
            }
        }
    }
    let err = std::process::Command::new(&parsed.runtime)
        .args(&parsed.runtime_args)
        .exec();
    eprintln!("cnibox oci-wrap: exec {}: {err}", parsed.runtime.display());
    127
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn finds_the_subcommand_after_global_options() {
        let args = v(&[
            "--root",
            "/run/docker/runtime-runc/moby",
            "--log",
            "/x/log.json",
            "--log-format",
            "json",
            "--systemd-cgroup",
            "create",
            "--bundle",
            "/b",
            "id",
        ]);
        assert_eq!(subcommand(&args), Some((7, "create")));
        assert_eq!(
            subcommand(&v(&["--debug", "--root=/r", "delete", "x"])),
            Some((2, "delete"))
        );
        assert_eq!(subcommand(&v(&["--version"])), None);
    }

    #[test]
    fn bundle_from_flags_or_cwd() {
        let cwd = Path::new("/work");
        assert_eq!(bundle_dir(&v(&["--bundle", "/b", "id"]), cwd), PathBuf::from("/b"));
        assert_eq!(bundle_dir(&v(&["-b", "rel", "id"]), cwd), PathBuf::from("/work/rel"));
        assert_eq!(bundle_dir(&v(&["--bundle=/c", "id"]), cwd), PathBuf::from("/c"));
        assert_eq!(bundle_dir(&v(&["--pid-file", "/p", "id"]), cwd), PathBuf::from("/work"));
    }

    #[test]
    fn inject_writes_hooks_atomically() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), br#"{"ociVersion":"1.0.2","linux":{}}"#).unwrap();
        inject(dir.path(), "/usr/local/bin/cnibox", &v(&["--network", "n"])).unwrap();
        let c: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap()).unwrap();
        assert_eq!(c["hooks"]["createRuntime"][0]["path"], "/usr/local/bin/cnibox");
        assert_eq!(c["ociVersion"], "1.0.2");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
        assert!(inject(&dir.path().join("missing"), "/x", &[])
            .unwrap_err()
            .contains("config.json"));
    }
}
