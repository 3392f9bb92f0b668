//! Finding and running one plugin process, as libcni's `pkg/invoke`: the runtime's
//! environment plus the six CNI variables, stdin the request, stdout the result or the
//! plugin's error object.
use crate::cni;
use serde_json::Value;
use std::fmt;
use std::io::{Read, Write};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The CNI variables of one invocation (all six are always set, possibly empty).
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    pub command: &'static str,
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    /// `CNI_ARGS` pairs, joined as `k=v;k=v`.
    pub args: Vec<(String, String)>,
    /// `CNI_PATH`, already joined.
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecError {
    /// The plugin could not be found or started; the message says which and why.
    Find(String),
    Spawn {
        path: PathBuf,
        msg: String,
    },
    /// The plugin failed: its error object (or one made from its output, as libcni does).
    Plugin(cni::Error),
    /// The plugin succeeded but its result is unusable.
    BadResult(String),
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Find(m) | ExecError::BadResult(m) => f.write_str(m),
            ExecError::Spawn { path, msg } => write!(f, "cannot run {}: {msg}", path.display()),
            ExecError::Plugin(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ExecError {}

/// The first regular file `<dir>/<plugin_type>` over `dirs` (`invoke.FindInPath`).
pub fn find(plugin_type: &str, dirs: &[PathBuf]) -> Result<PathBuf, ExecError> {
    if plugin_type.is_empty() {
        return Err(ExecError::Find("no plugin name provided".into()));
    }
    if plugin_type.contains('/') || plugin_type == "." || plugin_type == ".." || plugin_type.contains('\0') {
        return Err(ExecError::Find(format!("invalid plugin name: {plugin_type}")));
    }
    if dirs.is_empty() {
        return Err(ExecError::Find("no paths provided".into()));
    }
    for dir in dirs {
        let p = dir.join(plugin_type);
        if std::fs::metadata(&p).map(|m| m.is_file()).unwrap_or(false) {
            return Ok(p);
        }
    }
    let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(ExecError::Find(format!(
        "failed to find plugin {plugin_type:?} in path [{}]",
        list.join(" ")
    )))
}

/// Run the plugin; on success return stdout (stderr is passed on to ours), on failure the
/// error as libcni's `pluginErr` builds it.
pub fn run(plugin: &Path, stdin: &[u8], inv: &Invocation) -> Result<Vec<u8>, ExecError> {
    let cni_args: Vec<String> = inv.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut attempt = 0;
    let mut child = loop {
        let spawned = Command::new(plugin)
            .env("CNI_COMMAND", inv.command)
            .env("CNI_CONTAINERID", &inv.container_id)
            .env("CNI_NETNS", &inv.netns)
            .env("CNI_ARGS", cni_args.join(";"))
            .env("CNI_IFNAME", &inv.ifname)
            .env("CNI_PATH", &inv.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        match spawned {
            Ok(c) => break c,
            // A plugin binary being replaced right now: libcni waits and retries, so do we.
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < 5 => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            Err(e) => {
                return Err(ExecError::Spawn {
                    path: plugin.to_path_buf(),
                    msg: e.to_string(),
                })
            }
        }
    };
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    communicate(&mut child, stdin, &mut stdout, &mut stderr).map_err(|e| ExecError::Spawn {
        path: plugin.to_path_buf(),
        msg: format!("exchanging data with it: {e}"),
    })?;
    let status = child.wait().map_err(|e| ExecError::Spawn {
        path: plugin.to_path_buf(),
        msg: format!("waiting for it: {e}"),
    })?;
    if status.success() {
        if !stderr.is_empty() {
            let _ = std::io::stderr().write_all(&stderr);
        }
        return Ok(stdout);
    }
    Err(ExecError::Plugin(plugin_error(&status_text(status), &stdout, &stderr)))
}

/// Feed stdin and drain stdout and stderr at once, without threads: one poll loop over the
/// three pipes, so a plugin that writes before it has read all its input (or fills stderr)
/// cannot deadlock against us. A plugin that exits without reading just closes stdin.
fn communicate(
    child: &mut std::process::Child,
    input: &[u8],
    out_buf: &mut Vec<u8>,
    err_buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut stdin = child.stdin.take();
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let mut written = 0;
    if input.is_empty() {
        stdin = None;
    }
    let mut chunk = [0u8; 8192];
    while stdin.is_some() || out.is_some() || err.is_some() {
        // A closed pipe gets fd -1, which poll ignores.
        let mut fds = [
            libc::pollfd {
                fd: stdin.as_ref().map_or(-1, |p| p.as_raw_fd()),
                events: libc::POLLOUT,
                revents: 0,
            },
            libc::pollfd {
                fd: out.as_ref().map_or(-1, |p| p.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: err.as_ref().map_or(-1, |p| p.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds is a valid array of three pollfd for the duration of the call.
        if unsafe { libc::poll(fds.as_mut_ptr(), 3, -1) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[0].revents != 0 {
            if let Some(pipe) = stdin.as_mut() {
                // At most PIPE_BUF bytes: POLLOUT promises that much room, so this never blocks.
                let end = input.len().min(written + libc::PIPE_BUF);
                match pipe.write(&input[written..end]) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    // The plugin closed its stdin (EPIPE) or exited: it has all it wants.
                    Err(_) => written = input.len(),
                }
                if written == input.len() {
                    stdin = None;
                }
            }
        }
        for (idx, buf) in [(1, &mut *out_buf), (2, &mut *err_buf)] {
            if fds[idx].revents == 0 {
                continue;
            }
            let n = match idx {
                1 => out.as_mut().map(|p| p.read(&mut chunk)),
                _ => err.as_mut().map(|p| p.read(&mut chunk)),
            };
            match n {
                Some(Ok(0)) | None => {
                    if idx == 1 {
                        out = None;
                    } else {
                        err = None;
                    }
                }
                Some(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
                Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Some(Err(e)) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Go's `exec.ExitError` text.
fn status_text(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => {
            // Go prints the C library's signal description in lower case ("killed", "terminated").
            // SAFETY: strsignal returns a pointer to a NUL-terminated string that stays valid
            // until the next call; it is copied at once and this process is single-threaded.
            let text = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(s)) };
            format!("signal: {}", text.to_string_lossy().to_lowercase())
        }
        _ => status.to_string(),
    }
}

/// libcni's `pluginErr`: the error object from stdout; else stderr; else the exit status.
pub fn plugin_error(status: &str, stdout: &[u8], stderr: &[u8]) -> cni::Error {
    if stdout.is_empty() {
        return if stderr.is_empty() {
            cni::Error::new(0, format!("netplugin failed with no error message: {status}"))
        } else {
            cni::Error::new(0, format!("netplugin failed: {:?}", String::from_utf8_lossy(stderr)))
        };
    }
    let parsed: Result<Value, String> = serde_json::from_slice(stdout).map_err(|e| e.to_string());
    let obj = parsed.and_then(|v| match v {
        Value::Object(o) => Ok(o),
        other => Err(format!("expected an error object, got {other}")),
    });
    match obj {
        Ok(o) => {
            let code = o.get("code").and_then(Value::as_u64).unwrap_or(0);
            let msg = o.get("msg").and_then(Value::as_str).unwrap_or("");
            let details = o.get("details").and_then(Value::as_str).unwrap_or("");
            cni::Error::new(u32::try_from(code).unwrap_or(u32::MAX), msg).with_details(details)
        }
        Err(e) => cni::Error::new(
            0,
            format!(
                "netplugin failed but error parsing its diagnostic message {:?}: {e}",
                String::from_utf8_lossy(stdout)
            ),
        ),
    }
}

/// Parse an ADD result (`ExecPluginWithResult`): a JSON object; a missing or empty
/// `cniVersion` is taken to be the config's (cni#895); the result must parse in its version.
pub fn parse_result(stdout: &[u8], config_version: &str) -> Result<Value, ExecError> {
    let v: Value = serde_json::from_slice(stdout)
        .map_err(|e| ExecError::BadResult(format!("failed to unmarshal raw result: {e}")))?;
    let mut obj = match v {
        Value::Object(o) => o,
        Value::Null => serde_json::Map::new(),
        other => {
            return Err(ExecError::BadResult(format!(
                "failed to unmarshal raw result: not an object: {other}"
            )))
        }
    };
    let version = match obj.get("cniVersion") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            obj.insert("cniVersion".into(), Value::String(config_version.to_string()));
            config_version.to_string()
        }
    };
    let fixed = Value::Object(obj);
    // Validated as libcni does (its result types reject unknown versions and bad shapes),
    // but passed on as the plugin wrote it, so nothing the plugin said is lost.
    cni::CniResult::from_plugin_output(&fixed, &version).map_err(|e| ExecError::BadResult(e.to_string()))?;
    Ok(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_error_like_libcni() {
        let e = plugin_error(
            "exit status 1",
            br#"{"code":11,"msg":"try later","details":"busy"}"#,
            b"log",
        );
        assert_eq!(e, cni::Error::new(11, "try later").with_details("busy"));
        let e = plugin_error("exit status 3", b"", b"");
        assert_eq!(e.msg, "netplugin failed with no error message: exit status 3");
        assert_eq!(e.code, 0);
        let e = plugin_error("exit status 1", b"", b"boom\n");
        assert_eq!(e.msg, "netplugin failed: \"boom\\n\"");
        let e = plugin_error("exit status 1", b"not json", b"");
        assert!(
            e.msg
                .starts_with("netplugin failed but error parsing its diagnostic message \"not json\": "),
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

    #[test]
    fn big_input_and_output_at_once_do_not_deadlock() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("echo");
        // Copies stdin to stdout as it reads: the stdout pipe fills long before stdin is
        // fully written, so writing all input before reading would hang.
        std::fs::write(&p, "#!/bin/sh\ncat\n").unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let input = vec![b'x'; 1_000_000];
        let out = run(
            &p,
            &input,
            &Invocation {
                command: "ADD",
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(out.len(), input.len());
        // A plugin that never reads stdin and exits still gives a clean answer.
        std::fs::write(&p, "#!/bin/sh\necho '{\"code\":7,\"msg\":\"no\"}'\nexit 1\n").unwrap();
        let e = run(
            &p,
            &input,
            &Invocation {
                command: "ADD",
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(e, ExecError::Plugin(cni::Error::new(7, "no")));
    }

    #[test]
    fn runs_a_process_with_the_cni_environment() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p");
        std::fs::write(&p, "#!/bin/sh\ncat >/dev/null\necho \"{\\\"cmd\\\":\\\"$CNI_COMMAND\\\",\\\"args\\\":\\\"$CNI_ARGS\\\",\\\"netns\\\":\\\"$CNI_NETNS\\\"}\"\n").unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let inv = Invocation {
            command: "ADD",
            args: vec![("A".into(), "1".into()), ("B".into(), "2".into())],
            ..Default::default()
        };
        let out = run(&p, b"{}", &inv).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v, serde_json::json!({"cmd":"ADD","args":"A=1;B=2","netns":""}));
        std::fs::write(&p, "#!/bin/sh\nkill -9 $$\n").unwrap();
        let e = run(&p, b"{}", &inv).unwrap_err();
        assert_eq!(
            e,
            ExecError::Plugin(cni::Error::new(
                0,
                "netplugin failed with no error message: signal: killed"
            ))
        );
    }
}
