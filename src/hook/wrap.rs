//! `oci-wrap`: stand in for an OCI runtime (runc, crun) so that containers created through
//! it get cnibox's hooks, e.g. `docker run --runtime cnibox …` where Docker's runtime entry
//! is `cnibox oci-wrap --runtime /usr/bin/runc [hook options] --`, or just the `oci-wrap`
//! symlink (runc and the hook's default directories; no shell script in between).
//!
//! On `create` and `run` it adds the createRuntime and poststop hooks to the bundle's
//! `config.json` (replaced atomically, and only when they are not there yet), then execs
//! the real runtime with the original arguments unchanged; every other subcommand goes
//! straight to the runtime.
//!
//! Its own options end at `--` or at the first argument that is not one of them, so a
//! Docker `runtimeArgs` list works with or without a trailing `--` (dockerd appends the
//! runtime's arguments to it). Its own errors also go where the runtime's would: the
//! `--log FILE` of the runtime's arguments, in runc's format (`--log-format json` is what
//! containerd's shim passes and what Docker reads back to explain a failed start).
use super::bundle;
use super::HookOptions;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

#[derive(argh::FromArgs, Debug)]
/// Run an OCI runtime with cnibox's network hooks added to every container it creates.
/// Usage: cnibox oci-wrap [--runtime PATH] [hook options] [--] RUNTIME-ARGS…
pub struct WrapArgs {
    /// the real OCI runtime (default: runc, found on PATH)
    #[argh(option, default = "PathBuf::from(\"runc\")")]
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
}

/// The options of [`WrapArgs`], all of which take a value: where the wrapper's own
/// arguments end and the runtime's begin.
const OWN_OPTIONS: &[&str] = &[
    "--runtime",
    "--network",
    "--conf-dir",
    "--bin-dir",
    "--cache-dir",
    "--ifname",
    "--log-file",
];

/// Split the command line into the wrapper's arguments and the runtime's: at `--`, or at
/// the first argument that is not one of the wrapper's options.
pub fn split_args(args: &[String]) -> (&[String], &[String]) {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return (&args[..i], &args[i + 1..]);
        }
        if OWN_OPTIONS.contains(&a) {
            i += 2;
        } else if a == "--help" || a == "-h" {
            i += 1;
        } else {
            break;
        }
    }
    let i = i.min(args.len());
    (&args[..i], &args[i..])
}

/// The runtime's log (`--log FILE` among its global options), where runc writes its errors
/// and where containerd's shim looks for the reason of a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeLog {
    pub path: PathBuf,
    pub json: bool,
}

impl RuntimeLog {
    /// From the runtime's global options (before the subcommand).
    pub fn find(runtime_args: &[String]) -> Option<RuntimeLog> {
        let globals = match subcommand(runtime_args) {
            Some((i, _)) => &runtime_args[..i],
            None => runtime_args,
        };
        let (mut path, mut json) = (None, false);
        let mut it = globals.iter();
        while let Some(a) = it.next() {
            let (flag, value) = match a.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (a.as_str(), None),
            };
            match flag {
                "--log" => path = value.or_else(|| it.next().cloned()),
                "--log-format" => json = value.or_else(|| it.next().cloned()).as_deref() == Some("json"),
                _ => {}
            }
        }
        path.filter(|p| !p.is_empty()).map(|p| RuntimeLog {
            path: PathBuf::from(p),
            json,
        })
    }

    /// One error line as runc writes it: logrus's JSON or text layout.
    pub fn line(&self, msg: &str, time: &str) -> String {
        if self.json {
            serde_json::json!({ "level": "error", "msg": msg, "time": time }).to_string()
        } else {
            format!("time={time:?} level=error msg={msg:?}")
        }
    }

    fn append(&self, msg: &str) {
        let time = crate::util::time::rfc3339_utc(std::time::SystemTime::now());
        let line = self.line(msg, &time);
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = written {
            eprintln!("cnibox oci-wrap: write {}: {e}", self.path.display());
        }
    }
}

/// Report the wrapper's own failure on stderr and in the runtime's log; returns `code`.
fn fail(log: Option<&RuntimeLog>, msg: &str, code: i32) -> i32 {
    let msg = format!("cnibox oci-wrap: {msg}");
    eprintln!("{msg}");
    if let Some(l) = log {
        l.append(&msg);
    }
    code
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

/// Add the hooks to `<bundle>/config.json`, replacing it atomically; a config that already
/// has them is left as it is. No fsync: the bundle lives under /run and dies with the
/// container, runc and containerd never fsync it, and the two fsyncs cost milliseconds of
/// every container start on a busy disk.
pub fn inject(bundle_dir: &Path, exe: &str, hook_args: &[String]) -> Result<(), String> {
    let config = bundle::read_bytes(bundle_dir)?;
    let path = bundle::config_path(bundle_dir);
    let added = bundle::add_hooks(&config, exe, hook_args).map_err(|e| format!("parse {}: {e}", path.display()))?;
    match added {
        None => Ok(()),
        Some(bytes) => {
            crate::util::atomic::write_volatile(&path, &bytes).map_err(|e| format!("write {}: {e}", path.display()))
        }
    }
}

/// The `oci-wrap` applet.
pub fn main(args: &[OsString]) -> i32 {
    let Some(args) = args
        .iter()
        .map(|a| a.to_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()
    else {
        return fail(None, "arguments must be UTF-8", 2);
    };
    let (own, runtime_args) = split_args(&args);
    let log = RuntimeLog::find(runtime_args);
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    let parsed = match <WrapArgs as argh::FromArgs>::from_args(&["cnibox oci-wrap"], &own) {
        Ok(p) => p,
        Err(e) if e.status.is_ok() => {
            print!("{}", e.output);
            return 0;
        }
        Err(e) => return fail(log.as_ref(), e.output.trim(), 2),
    };
    if let Some((i, sub)) = subcommand(runtime_args) {
        if sub == "create" || sub == "run" {
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
            let bundle = bundle_dir(&runtime_args[i + 1..], &cwd);
            let exe = match std::fs::read_link("/proc/self/exe") {
                Ok(p) => p.to_string_lossy().into_owned(),
                Err(e) => {
                    let msg = format!("cannot find this binary through /proc/self/exe: {e}");
                    return fail(log.as_ref(), &msg, 1);
                }
            };
            if let Err(e) = inject(&bundle, &exe, &parsed.hook_options().to_args()) {
                return fail(log.as_ref(), &e, 1);
            }
        }
    }
    let err = std::process::Command::new(&parsed.runtime).args(runtime_args).exec();
    let msg = format!("exec runtime {}: {err}", parsed.runtime.display());
    fail(log.as_ref(), &msg, 127)
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
    fn own_arguments_end_at_the_separator_or_the_first_foreign_one() {
        let a = v(&[
            "--runtime",
            "/r",
            "--network",
            "n",
            "--",
            "--root",
            "/x",
            "create",
            "id",
        ]);
        let (own, rt) = split_args(&a);
        assert_eq!((own.len(), rt), (4, &a[5..]));
        // dockerd appends the shim's arguments to runtimeArgs: no `--` needed
        let a = v(&["--runtime", "/r", "--root", "/x", "--log", "/l", "create", "id"]);
        let (own, rt) = split_args(&a);
        assert_eq!((own, rt), (&a[..2], &a[2..]));
        let a = v(&["--runtime", "/r", "delete", "id"]);
        assert_eq!(split_args(&a).1, &a[2..]);
        assert!(split_args(&v(&["--root", "/x", "create"])).0.is_empty());
        let a = v(&["--runtime"]);
        assert_eq!(split_args(&a), (&a[..], &a[1..]));
        // every option named here is one argh accepts
        for opt in OWN_OPTIONS {
            let args = ["--runtime", "/r", opt, "x"];
            let args = if *opt == "--runtime" { &args[2..] } else { &args[..] };
            assert!(<WrapArgs as argh::FromArgs>::from_args(&["w"], args).is_ok(), "{opt}");
        }
        // and every option argh accepts is named here (one left out would end the
        // wrapper's arguments early, passing it and its value to runc)
        let help = match <WrapArgs as argh::FromArgs>::from_args(&["w"], &["--help"]) {
            Err(early) => early.output,
            Ok(_) => panic!("--help parsed as arguments"),
        };
        let accepted: Vec<&str> = help
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(|w| w.trim_end_matches(','))
            .filter(|w| w.starts_with("--") && *w != "--help")
            .collect();
        assert!(!accepted.is_empty(), "no options in the help text:\n{help}");
        for opt in accepted {
            assert!(
                OWN_OPTIONS.contains(&opt),
                "{opt} is an option of oci-wrap but not in OWN_OPTIONS"
            );
        }
    }

    #[test]
    fn runtime_log_from_global_options() {
        let a = v(&[
            "--root",
            "/r",
            "--log",
            "/b/log.json",
            "--log-format",
            "json",
            "create",
            "--log",
            "x",
        ]);
        assert_eq!(
            RuntimeLog::find(&a),
            Some(RuntimeLog {
                path: "/b/log.json".into(),
                json: true
            })
        );
        let l = RuntimeLog::find(&v(&["--log=/l", "--log-format=text", "state", "id"])).unwrap();
        assert_eq!((l.path.to_str(), l.json), (Some("/l"), false));
        assert_eq!(RuntimeLog::find(&v(&["create", "--log", "/x"])), None);
        assert_eq!(RuntimeLog::find(&v(&["--log", "", "create"])), None);
        let json = RuntimeLog {
            path: "/l".into(),
            json: true,
        };
        let line: serde_json::Value =
            serde_json::from_str(&json.line("cnibox oci-wrap: exec \"x\"", "2026-01-02T03:04:05Z")).unwrap();
        assert_eq!(
            line,
            serde_json::json!({"level": "error", "msg": "cnibox oci-wrap: exec \"x\"", "time": "2026-01-02T03:04:05Z"})
        );
        let text = RuntimeLog { json: false, ..json };
        assert_eq!(
            text.line("bad \"x\"", "T"),
            "time=\"T\" level=error msg=\"bad \\\"x\\\"\""
        );
    }

    #[test]
    fn errors_reach_the_runtime_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = RuntimeLog {
            path: dir.path().join("log.json"),
            json: true,
        };
        assert_eq!(fail(Some(&log), "exec runtime /nope: gone", 127), 127);
        assert_eq!(fail(Some(&log), "second", 1), 1);
        let text = std::fs::read_to_string(&log.path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["msg"], "cnibox oci-wrap: exec runtime /nope: gone");
        assert_eq!(lines[1]["level"], "error");
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
        // a second create of the same bundle (a retry) finds the hooks and writes nothing:
        // the file is the same inode (a replacement would be a new one)
        use std::os::unix::fs::MetadataExt;
        let inode = |d: &Path| std::fs::metadata(d.join("config.json")).unwrap().ino();
        let before = inode(dir.path());
        inject(dir.path(), "/usr/local/bin/cnibox", &v(&["--network", "n"])).unwrap();
        assert_eq!(inode(dir.path()), before);
        assert!(inject(&dir.path().join("missing"), "/x", &[])
            .unwrap_err()
            .contains("config.json"));
    }

    #[test]
    fn a_malformed_config_is_an_error_naming_it_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let broken = br#"{"ociVersion":"1.0.2","hooks":{"prestart":[1}}"#;
        std::fs::write(&path, broken).unwrap();
        let e = inject(dir.path(), "/x", &[]).unwrap_err();
        assert_eq!(e, format!("parse {}: mismatched bracket at byte 44", path.display()));
        assert_eq!(std::fs::read(&path).unwrap(), broken);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left behind"
        );
    }
}
