//! Finding and running one plugin process, as libcni's `pkg/invoke` does. The one copy:
//! IPAM delegation ([`super::delegate`]), cnitool's chain runner and the OCI hook
//! (`runtime::chain`) all run plugins through it.
//!
//! Where the two copies this replaces disagreed, libcni decides (each has a test below):
//! a name is invalid only when it holds a `/` (`.` and `..` are just not found); names and
//! output are quoted as Go's `%q`; the error object is decoded as Go's `encoding/json` does
//! into `types.Error` (a non-numeric `code` is a parse error, not code 0); a plugin that
//! fails with only stderr is `netplugin failed: "<stderr>": exit status N`; one that cannot
//! be started is `netplugin failed with no error message: fork/exec PATH: <errno>`; a
//! signal is worded as Go words it (its own table, not the C library's).
use super::error::{code, go_errno_text};
use super::json::{self, Json, Object};
use super::version::{go_list, go_quote};
use super::{AppletLookup, CniResult, Error, Plugin};
use serde_json::Value;
use std::fmt;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

/// The CNI variables of one invocation (all six are always set, possibly empty), plus any
/// further variables for the child.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    pub command: &'static str,
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    /// `CNI_ARGS`, joined as `k=v;k=v`.
    pub args: String,
    /// `CNI_PATH`, joined.
    pub path: String,
    /// More environment for the child (e.g. the delegation depth).
    pub env: Vec<(&'static str, String)>,
}

/// Why a plugin call gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecError {
    /// The plugin could not be found; the message says which and why.
    Find(String),
    /// The plugin failed or could not be started: its error object, or one made from its
    /// output as libcni's `pluginErr` does.
    Plugin(Error),
    /// The plugin succeeded but its result is unusable.
    BadResult(String),
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Find(m) | ExecError::BadResult(m) => f.write_str(m),
            ExecError::Plugin(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ExecError {}

/// libcni's `FindInPath` over a `CNI_PATH` string (`:`-separated; empty entries skipped).
pub fn find_in_path(plugin: &str, cni_path: &str) -> Result<PathBuf, ExecError> {
    // Go's filepath.SplitList: "" is no directories at all
    let dirs: Vec<&str> = if cni_path.is_empty() {
        Vec::new()
    } else {
        cni_path.split(':').collect()
    };
    find_in(plugin, &dirs)
}

/// libcni's `FindInPath` over a list of directories.
pub fn find(plugin: &str, dirs: &[PathBuf]) -> Result<PathBuf, ExecError> {
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    find_in(plugin, &dirs)
}

/// The first regular file `<dir>/<plugin>`.
fn find_in<S: AsRef<str>>(plugin: &str, dirs: &[S]) -> Result<PathBuf, ExecError> {
    if plugin.is_empty() {
        return Err(ExecError::Find("no plugin name provided".into()));
    }
    if plugin.contains('/') {
        return Err(ExecError::Find(format!("invalid plugin name: {plugin}")));
    }
    if dirs.is_empty() {
        return Err(ExecError::Find("no paths provided".into()));
    }
    for dir in dirs.iter().map(AsRef::as_ref).filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(plugin);
        if std::fs::metadata(&candidate).is_ok_and(|m| m.is_file()) {
            return Ok(candidate);
        }
    }
    Err(ExecError::Find(format!(
        "failed to find plugin {} in path {}",
        go_quote(plugin),
        go_list(dirs)
    )))
}

/// How often "text file busy" is retried (a plugin binary being replaced), as libcni does.
const BUSY_RETRIES: u32 = 5;

/// Run the plugin with `stdin`; its stdout on success (its stderr is passed on to ours),
/// else the error libcni would report.
pub fn exec(path: &Path, stdin: &[u8], inv: &Invocation) -> Result<Vec<u8>, ExecError> {
    let io_error = |e: std::io::Error| {
        ExecError::Plugin(Error::new(
            code::IO_FAILURE,
            format!("running {}: buffering stdin: {e}", path.display()),
        ))
    };
    let mut input = stdin_file(stdin).map_err(io_error)?;
    let mut attempt = 0;
    let output = loop {
        input.seek(SeekFrom::Start(0)).map_err(io_error)?;
        let child_stdin = input.try_clone().map_err(io_error)?;
        let spawned = std::process::Command::new(path)
            .env("CNI_COMMAND", inv.command)
            .env("CNI_CONTAINERID", &inv.container_id)
            .env("CNI_NETNS", &inv.netns)
            .env("CNI_IFNAME", &inv.ifname)
            .env("CNI_ARGS", &inv.args)
            .env("CNI_PATH", &inv.path)
            .envs(inv.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::from(child_stdin))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output();
        match spawned {
            Ok(out) => break out,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < BUSY_RETRIES => {
                attempt += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => {
                return Err(ExecError::Plugin(Error::new(
                    code::UNKNOWN,
                    format!(
                        "netplugin failed with no error message: fork/exec {}: {}",
                        path.display(),
                        go_errno_text(&e)
                    ),
                )))
            }
        }
    };
    if output.status.success() {
        forward_stderr(&output.stderr);
        return Ok(output.stdout);
    }
    Err(ExecError::Plugin(plugin_error(
        &exit_text(&output.status),
        &output.stdout,
        &output.stderr,
    )))
}

/// Run one of this binary's own plugin applets in-process, as `exec` would run it as a
/// process: the same entry point gets the invocation's variables (the rest of our
/// environment as a child would inherit it) and `stdin`, and its stdout, stderr and exit
/// code are read exactly as those of a child. No fork, no exec. `applets` is the table the
/// exec'd applet's own entry point would have: without it, the plugin's IPAM delegation
/// (bridge → host-local) would exec the very process start this function saves.
pub fn run_in_process(
    plugin: &dyn Plugin,
    applets: AppletLookup,
    stdin: &[u8],
    inv: &Invocation,
) -> Result<Vec<u8>, ExecError> {
    let getenv = |key: &str| -> Option<String> {
        let own = match key {
            "CNI_COMMAND" => Some(inv.command),
            "CNI_CONTAINERID" => Some(inv.container_id.as_str()),
            "CNI_NETNS" => Some(inv.netns.as_str()),
            "CNI_IFNAME" => Some(inv.ifname.as_str()),
            "CNI_ARGS" => Some(inv.args.as_str()),
            "CNI_PATH" => Some(inv.path.as_str()),
            _ => inv.env.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str()),
        };
        match own {
            Some(v) => Some(v.to_string()),
            None => std::env::var_os(key).map(|v| v.to_string_lossy().into_owned()),
        }
    };
    let mut input = stdin;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let code = super::plugin::run_with(plugin, Some(applets), &getenv, &mut input, &mut stdout, &mut stderr);
    if code == 0 {
        forward_stderr(&stderr);
        return Ok(stdout);
    }
    Err(ExecError::Plugin(plugin_error(
        &format!("exit status {code}"),
        &stdout,
        &stderr,
    )))
}

/// libcni's `pluginErr`: the plugin's error object passes through unchanged; without one,
/// its stderr (or nothing) becomes the message, with code 0. `status` is how it ended.
pub fn plugin_error(status: &str, stdout: &[u8], stderr: &[u8]) -> Error {
    if stdout.is_empty() {
        if stderr.is_empty() {
            return Error::new(
                code::UNKNOWN,
                format!("netplugin failed with no error message: {status}"),
            );
        }
        return Error::new(
            code::UNKNOWN,
            format!(
                "netplugin failed: {}: {status}",
                go_quote(&String::from_utf8_lossy(stderr))
            ),
        );
    }
    forward_stderr(stderr);
    match parse_error_object(stdout) {
        Ok(e) => e,
        Err(why) => Error::new(
            code::UNKNOWN,
            format!(
                "netplugin failed but error parsing its diagnostic message {}: {why}",
                go_quote(&String::from_utf8_lossy(stdout))
            ),
        ),
    }
}

/// `{"code","msg","details"}` as Go decodes it into `types.Error`: other keys
/// (`cniVersion`) are ignored, missing ones are zero, a wrong type is an error.
fn parse_error_object(stdout: &[u8]) -> Result<Error, String> {
    let v = json::parse(stdout).map_err(|e| e.to_string())?;
    let obj = match &v {
        Json::Object(_) | Json::Null => json::as_object(&v, "types.Error").map_err(|e| e.msg)?,
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type types.Error",
                json::kind(other)
            ))
        }
    };
    let code = json::value_field(&obj, "code", "uint", |c| {
        match c {
            Json::Number(n) => n.as_u64().and_then(|c| u32::try_from(c).ok()),
            _ => None,
        }
        .ok_or_else(|| {
            Error::internal(format!(
                "json: cannot unmarshal {c} into Go struct field Error.code of type uint"
            ))
        })
    })
    .map_err(|e| e.msg)?
    .unwrap_or(0);
    let text = |key: &str| -> Result<String, String> {
        Ok(json::opt_str(&obj, key, &format!("Error.{key}"))
            .map_err(|e| e.msg)?
            .unwrap_or_default()
            .to_string())
    };
    Ok(Error::new(code, text("msg")?).with_details(text("details")?))
}

/// Go's text for how a process ended (`exit status 3`, `signal: killed`).
pub fn exit_text(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(c) = status.code() {
        return format!("exit status {c}");
    }
    let Some(sig) = status.signal() else {
        return "unknown exit status".to_string();
    };
    let name = match usize::try_from(sig)
        .ok()
        .and_then(|n| GO_SIGNALS.get(n.wrapping_sub(1)))
    {
        Some(name) => name.to_string(),
        None => format!("signal {sig}"),
    };
    if status.core_dumped() {
        format!("signal: {name} (core dumped)")
    } else {
        format!("signal: {name}")
    }
}

/// Go's names of the Linux signals 1..=31 (its own table, the same whatever the C library).
const GO_SIGNALS: [&str; 31] = [
    "hangup",
    "interrupt",
    "quit",
    "illegal instruction",
    "trace/breakpoint trap",
    "aborted",
    "bus error",
    "floating point exception",
    "killed",
    "user defined signal 1",
    "segmentation fault",
    "user defined signal 2",
    "broken pipe",
    "alarm clock",
    "terminated",
    "stack fault",
    "child exited",
    "continued",
    "stopped (signal)",
    "stopped",
    "stopped (tty input)",
    "stopped (tty output)",
    "urgent I/O condition",
    "CPU time limit exceeded",
    "file size limit exceeded",
    "virtual timer expired",
    "profiling timer expired",
    "window changed",
    "I/O possible",
    "power failure",
    "bad system call",
];

/// The plugin's stderr is log output: hand it on to ours.
fn forward_stderr(stderr: &[u8]) {
    if !stderr.is_empty() {
        let _ = std::io::stderr().write_all(stderr);
    }
}

/// stdin for the child as an in-memory file: no pipe to feed, so no deadlock with a child
/// that writes before it reads (or never reads), and it can be rewound for a retry.
fn stdin_file(data: &[u8]) -> std::io::Result<std::fs::File> {
    let fd = nix::sys::memfd::memfd_create(c"cni-stdin", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(data)?;
    Ok(file)
}

/// An ADD result for a runtime (`ExecPluginWithResult`): a JSON object; a missing or empty
/// `cniVersion` is taken to be the config's (cni#895); the result must parse in its version.
/// Returned as the plugin wrote it (with the version filled in), so nothing it said is lost.
pub fn parse_result(stdout: &[u8], config_version: &str) -> Result<Value, ExecError> {
    let v = json::parse(stdout).map_err(|e| ExecError::BadResult(format!("failed to unmarshal raw result: {e}")))?;
    let mut obj = match v {
        Json::Object(o) => o,
        Json::Null => Object::new(),
        other => {
            return Err(ExecError::BadResult(format!(
                "failed to unmarshal raw result: not an object: {other}"
            )))
        }
    };
    let version = match obj.map_get("cniVersion") {
        Some(Json::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            obj.insert("cniVersion", Json::from(config_version));
            config_version.to_string()
        }
    };
    let fixed = Json::Object(obj);
    // Validated as libcni does (its result types reject unknown versions and bad shapes).
    CniResult::from_plugin_output(&fixed, &version).map_err(|e| ExecError::BadResult(e.to_string()))?;
    Ok(fixed.to_value())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn add() -> Invocation {
        Invocation {
            command: "ADD",
            ..Default::default()
        }
    }

    #[test]
    fn plugin_error_like_libcni() {
        let e = plugin_error(
            "exit status 1",
            br#"{"code":11,"msg":"try later","details":"busy"}"#,
            b"log",
        );
        assert_eq!(e, Error::new(11, "try later").with_details("busy"));
        let e = plugin_error("exit status 3", b"", b"");
        assert_eq!(e.msg, "netplugin failed with no error message: exit status 3");
        assert_eq!(e.code, 0);
        let e = plugin_error("exit status 1", b"not json", b"");
        assert!(
            e.msg
                .starts_with("netplugin failed but error parsing its diagnostic message \"not json\": "),
            "{}",
            e.msg
        );
    }

    /// Settled: cnitool's copy left the exit status out; libcni's pluginErr has it.
    #[test]
    fn stderr_only_failure_names_the_exit_status() {
        let e = plugin_error("exit status 1", b"", b"boom\n");
        assert_eq!(
            (e.code, e.msg.as_str()),
            (0, "netplugin failed: \"boom\\n\": exit status 1")
        );
    }

    /// Settled: cnitool's copy took a non-numeric `code` as 0 and kept the message; Go's
    /// decoder into `types.Error` (Code uint) fails, so libcni reports a parse error.
    #[test]
    fn a_non_numeric_code_is_a_parse_error() {
        let e = plugin_error("exit status 1", br#"{"code":"11","msg":"x"}"#, b"");
        assert_eq!(e.code, 0);
        assert_eq!(
            e.msg,
            r#"netplugin failed but error parsing its diagnostic message "{\"code\":\"11\",\"msg\":\"x\"}": json: cannot unmarshal "11" into Go struct field Error.code of type uint"#
        );
        let e = plugin_error("exit status 1", br#"{"code":7,"msg":false}"#, b"");
        assert!(
            e.msg
                .ends_with("json: cannot unmarshal bool into Go struct field Error.msg of type string"),
            "{}",
            e.msg
        );
    }

    #[test]
    fn result_version_fixup() {
        let v = parse_result(br#"{"ips":[]}"#, "1.0.0").unwrap();
        assert_eq!(v["cniVersion"], "1.0.0");
        let v = parse_result(br#"{"cniVersion":"0.4.0","ips":[]}"#, "1.0.0").unwrap();
        assert_eq!(v["cniVersion"], "0.4.0");
        let e = parse_result(br#"{"cniVersion":"7.0.0"}"#, "1.0.0").unwrap_err();
        assert_eq!(e.to_string(), "unsupported CNI result version \"7.0.0\"");
        assert!(parse_result(b"", "1.0.0")
            .unwrap_err()
            .to_string()
            .starts_with("failed to unmarshal raw result"));
    }

    #[test]
    fn find_rules() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("plug"), b"").unwrap();
        let dirs = vec![PathBuf::from("/nonexistent"), d.path().to_path_buf()];
        assert_eq!(find("plug", &dirs).unwrap(), d.path().join("plug"));
        assert_eq!(
            find("sub", &dirs).unwrap_err().to_string(),
            format!(
                "failed to find plugin \"sub\" in path [/nonexistent {}]",
                d.path().display()
            )
        );
        assert_eq!(
            find("../plug", &dirs).unwrap_err().to_string(),
            "invalid plugin name: ../plug"
        );
        assert_eq!(find("", &dirs).unwrap_err().to_string(), "no plugin name provided");
        assert_eq!(find("plug", &[]).unwrap_err().to_string(), "no paths provided");
    }

    /// Settled: cnitool's copy rejected `.` and `..` as invalid names; libcni only rejects
    /// a path separator, so they are simply not found (a directory is no plugin).
    #[test]
    fn dot_names_are_not_found_rather_than_invalid() {
        let d = tempfile::tempdir().unwrap();
        let dirs = vec![d.path().to_path_buf()];
        for name in [".", ".."] {
            assert_eq!(
                find(name, &dirs).unwrap_err().to_string(),
                format!("failed to find plugin \"{name}\" in path [{}]", d.path().display())
            );
        }
    }

    /// Settled: cnitool's copy quoted with Rust's `{:?}`; libcni's `%q` escapes differently.
    #[test]
    fn names_and_stderr_are_quoted_as_go_does() {
        let d = tempfile::tempdir().unwrap();
        let e = find("a\u{7f}b", &[d.path().to_path_buf()]).unwrap_err();
        assert!(
            e.to_string().starts_with(r#"failed to find plugin "a\x7fb" in path"#),
            "{e}"
        );
        let e = plugin_error("exit status 1", b"", "bad \u{7f}\n".as_bytes());
        assert_eq!(e.msg, r#"netplugin failed: "bad \x7f\n": exit status 1"#);
    }

    /// Settled: cnitool's copy said `cannot run PATH: ...`; libcni folds a failed start
    /// into pluginErr, code 0, with Go's `fork/exec` text.
    #[test]
    fn a_plugin_that_cannot_start_is_a_plugin_error_with_go_text() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("plug");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = exec(&p, b"{}", &add()).unwrap_err();
        assert_eq!(
            e,
            ExecError::Plugin(Error::new(
                0,
                format!(
                    "netplugin failed with no error message: fork/exec {}: permission denied",
                    p.display()
                )
            ))
        );
    }

    /// Settled: delegation's copy named only a few signals (SIGUSR1 was `signal 10`),
    /// cnitool's asked the C library (whose words differ between glibc and musl); Go has
    /// its own table.
    #[test]
    fn signals_are_worded_as_go_does() {
        let d = tempfile::tempdir().unwrap();
        for (sig, text) in [
            ("USR1", "user defined signal 1"),
            ("KILL", "killed"),
            ("TERM", "terminated"),
            ("ALRM", "alarm clock"),
        ] {
            let p = script(d.path(), "sig", &format!("kill -{sig} $$"));
            let e = exec(&p, b"{}", &add()).unwrap_err();
            assert_eq!(
                e,
                ExecError::Plugin(Error::new(
                    0,
                    format!("netplugin failed with no error message: signal: {text}")
                ))
            );
        }
    }

    #[test]
    fn big_input_and_output_at_once_do_not_deadlock() {
        let d = tempfile::tempdir().unwrap();
        // Copies stdin to stdout as it reads: the stdout pipe fills long before stdin is
        // fully read, so a writer feeding a pipe before reading would hang.
        let p = script(d.path(), "echo", "cat");
        let input = vec![b'x'; 1_000_000];
        let out = exec(&p, &input, &add()).unwrap();
        assert_eq!(out.len(), input.len());
        // A plugin that never reads stdin and exits still gives a clean answer.
        let p = script(d.path(), "echo", "echo '{\"code\":7,\"msg\":\"no\"}'\nexit 1");
        let e = exec(&p, &input, &add()).unwrap_err();
        assert_eq!(e, ExecError::Plugin(Error::new(7, "no")));
    }

    #[test]
    fn runs_a_process_with_the_cni_environment() {
        let d = tempfile::tempdir().unwrap();
        let p = script(
            d.path(),
            "p",
            "cat >/dev/null\necho \"{\\\"cmd\\\":\\\"$CNI_COMMAND\\\",\\\"args\\\":\\\"$CNI_ARGS\\\",\\\"netns\\\":\\\"$CNI_NETNS\\\",\\\"x\\\":\\\"$X\\\"}\"",
        );
        let inv = Invocation {
            command: "ADD",
            args: "A=1;B=2".into(),
            env: vec![("X", "y".into())],
            ..Default::default()
        };
        let out = exec(&p, b"{}", &inv).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v, serde_json::json!({"cmd":"ADD","args":"A=1;B=2","netns":"","x":"y"}));
        let p = script(d.path(), "p", "kill -9 $$");
        let e = exec(&p, b"{}", &inv).unwrap_err();
        assert_eq!(
            e,
            ExecError::Plugin(Error::new(0, "netplugin failed with no error message: signal: killed"))
        );
    }
}
