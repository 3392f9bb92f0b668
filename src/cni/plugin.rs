//! The plugin entry point (the Go `skel` package): environment, stdin, version gates,
//! dispatch to a [`Plugin`], printing the result or the error.
use super::error::code;
use super::json::{self, Json};
use super::result::pretty;
use super::{env, version, CniResult, Error};
use serde::Serialize;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::sync::Mutex;

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

impl Command {
    /// The verb as `CNI_COMMAND` spells it (exact, upper case).
    pub fn parse(s: &str) -> Option<Command> {
        Some(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "STATUS" => Command::Status,
            "GC" => Command::Gc,
            "VERSION" => Command::Version,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Status => "STATUS",
            Command::Gc => "GC",
            Command::Version => "VERSION",
        }
    }
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
    /// stdin parsed as JSON (an object), members as written: read it with Go's rules
    /// (`cni::json`).
    pub config: Json,
    /// The network name (validated).
    pub name: String,
    /// The config's `cniVersion` ("" is normalised to "0.1.0").
    pub cni_version: String,
    /// This binary's own applets, handed down from the applet table by the entry point, so
    /// a delegation to one of them runs in-process. `None`: every delegate is exec'd.
    pub applets: Option<AppletLookup>,
}

/// Looks one of this binary's applets up by name. The applet table at the top passes its
/// lookup down through [`run`]; nothing below it imports the table.
pub type AppletLookup = fn(&str) -> Option<&'static dyn Plugin>;

impl Request {
    /// A request for `command` with `config` as stdin and no environment beyond it: name and
    /// version come from the config (`""` or absent version: 0.1.0). For calling a plugin
    /// directly (tests, in-process use); the entry point builds requests from the real
    /// environment instead.
    pub fn from_config(command: Command, config: impl Into<Json>) -> Request {
        let config: Json = config.into();
        json::register("config", &config);
        let name = config_name(&config).unwrap_or_default();
        let cni_version = decode_version(&config).unwrap_or_else(|_| version::normalize("").to_string());
        Request {
            command,
            container_id: String::new(),
            netns: String::new(),
            ifname: String::new(),
            args: String::new(),
            path: String::new(),
            stdin: config.to_string().into_bytes(),
            config,
            name,
            cni_version,
            applets: None,
        }
    }
}

/// A CNI plugin: one method per verb. The entry point has already checked the environment,
/// the config's name and version, and the per-verb version gates.
pub trait Plugin: Sync {
    /// `CNI <about>` on stderr when `CNI_COMMAND` is unset.
    fn about(&self) -> &'static str;
    fn add(&self, req: &Request) -> Result<CniResult, Error>;
    fn del(&self, req: &Request) -> Result<(), Error>;
    fn check(&self, req: &Request) -> Result<(), Error>;
    /// The spec versions this plugin speaks (skel's `versionInfo`), oldest first.
    fn versions(&self) -> &'static [&'static str] {
        version::SUPPORTED
    }
    /// Default: ready (what skel answers for a plugin without STATUS).
    fn status(&self, _req: &Request) -> Result<(), Error> {
        Ok(())
    }
    /// Default: nothing to collect (what skel answers for a plugin without GC).
    fn gc(&self, _req: &Request) -> Result<(), Error> {
        Ok(())
    }
    /// A command line of the applet's own besides the CNI protocol (dhcp's `daemon`): the
    /// exit code when `args` (argv after the applet's name) are for it, `None` to run as a
    /// plugin.
    fn command_line(&self, _args: &[std::ffi::OsString]) -> Option<i32> {
        None
    }
}

/// The most stdin a plugin accepts: configs are a few KiB; this only stops a runaway writer.
pub const STDIN_LIMIT: u64 = 1 << 20;

/// The config's `cniVersion` once known, for the panic hook's error object.
static PANIC_CNI_VERSION: Mutex<Option<String>> = Mutex::new(None);

/// Run a plugin as the process entry point; returns the exit code. `applets` finds this
/// binary's other applets for in-process delegation.
pub fn run(plugin: &dyn Plugin, applets: AppletLookup) -> i32 {
    install_panic_hook();
    let getenv = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    run_with(
        plugin,
        Some(applets),
        &getenv,
        &mut stdin.lock(),
        &mut stdout.lock(),
        &mut stderr.lock(),
    )
}

/// The entry point with its inputs and outputs passed in (testable without a process).
/// Prints the result (ADD), the VERSION reply, or an error object on `stdout`; returns the
/// exit code (0, or 1 for an error as Go plugins do). `applets` is handed to the plugin as
/// [`run`] hands it, so its delegations to this binary's applets run in-process; without an
/// applet table, every delegate is exec'd.
pub fn run_with(
    plugin: &dyn Plugin,
    applets: Option<AppletLookup>,
    getenv: &dyn Fn(&str) -> Option<String>,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    let mut cni_version = None;
    match dispatch(plugin, applets, getenv, stdin, stdout, stderr, &mut cni_version) {
        Ok(()) => 0,
        Err(e) => {
            if let Err(w) = stdout.write_all(error_json(&e, cni_version.as_deref()).as_bytes()) {
                let _ = writeln!(stderr, "error writing error JSON to stdout: {w}");
            }
            let _ = stdout.flush();
            1
        }
    }
}

fn dispatch(
    plugin: &dyn Plugin,
    applets: Option<AppletLookup>,
    getenv: &dyn Fn(&str) -> Option<String>,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    cni_version: &mut Option<String>,
) -> Result<(), Error> {
    let environment = match env::read(getenv) {
        Ok(e) => e,
        Err(e)
            if e.code == code::INVALID_ENVIRONMENT
                && getenv("CNI_COMMAND").unwrap_or_default().is_empty()
                && !plugin.about().is_empty() =>
        {
            // called by hand: say what this is, as skel does
            let _ = writeln!(stderr, "{}", plugin.about());
            let _ = writeln!(
                stderr,
                "CNI protocol versions supported: {}",
                plugin.versions().join(", ")
            );
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    // VERSION needs no config: stdin is not even read
    if environment.command == "VERSION" {
        return write_version(plugin, stdout);
    }

    let stdin_bytes = read_stdin(stdin)?;
    let config = parse_config(&stdin_bytes)?;
    // best effort, for the error object; the gates below decode it strictly
    if let Ok(v) = decode_version(&config) {
        remember_version(cni_version, &v);
    }
    let name = config_name(&config)?;
    let command = Command::parse(&environment.command).ok_or_else(|| {
        Error::new(
            code::INVALID_ENVIRONMENT,
            format!("unknown CNI_COMMAND: {}", environment.command),
        )
    })?;
    let conf_version = decode_version(&config)?;
    remember_version(cni_version, &conf_version);
    match command {
        Command::Add | Command::Del => version::check_supported_in(&conf_version, plugin.versions())?,
        Command::Check => version::check_verb_in(&conf_version, "CHECK", version::CHECK_MIN, plugin.versions())?,
        Command::Status => version::check_verb_in(&conf_version, "STATUS", version::STATUS_GC_MIN, plugin.versions())?,
        Command::Gc => version::check_verb_in(&conf_version, "GC", version::STATUS_GC_MIN, plugin.versions())?,
        Command::Version => {}
    }
    if matches!(command, Command::Add | Command::Del | Command::Check)
        && !environment.netns.is_empty()
        && !env::netns_override(&environment.netns_override)
        && is_own_netns(&environment.netns)?
    {
        return Err(Error::new(
            code::INVALID_NETNS,
            "plugin's netns and netns from CNI_NETNS should not be the same",
        ));
    }

    let req = Request {
        command,
        container_id: environment.container_id,
        netns: environment.netns,
        ifname: environment.ifname,
        args: environment.args,
        path: environment.path,
        stdin: stdin_bytes,
        config,
        name,
        cni_version: conf_version,
        applets,
    };
    match command {
        Command::Add => {
            let result = plugin.add(&req)?;
            let text = result.to_pretty_json(&req.cni_version)?;
            stdout
                .write_all(text.as_bytes())
                .and_then(|_| stdout.flush())
                .map_err(|e| Error::new(code::IO_FAILURE, format!("error writing result: {e}")))
        }
        Command::Del => plugin.del(&req),
        Command::Check => plugin.check(&req),
        Command::Status => plugin.status(&req),
        Command::Gc => plugin.gc(&req),
        Command::Version => write_version(plugin, stdout),
    }
}

fn write_version(plugin: &dyn Plugin, stdout: &mut dyn Write) -> Result<(), Error> {
    stdout
        .write_all(version::version_reply_for(plugin.versions()).as_bytes())
        .and_then(|_| stdout.flush())
        .map_err(|e| Error::new(code::IO_FAILURE, format!("error writing VERSION reply: {e}")))
}

fn remember_version(slot: &mut Option<String>, v: &str) {
    *slot = Some(v.to_string());
    if let Ok(mut g) = PANIC_CNI_VERSION.try_lock() {
        *g = Some(v.to_string());
    }
}

/// Read all of stdin, refusing more than [`STDIN_LIMIT`] bytes.
fn read_stdin(stdin: &mut dyn Read) -> Result<Vec<u8>, Error> {
    let mut buf = Vec::new();
    stdin
        .take(STDIN_LIMIT + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::new(code::IO_FAILURE, format!("error reading from stdin: {e}")))?;
    if buf.len() as u64 > STDIN_LIMIT {
        return Err(Error::new(
            code::IO_FAILURE,
            format!("error reading from stdin: network config is larger than {STDIN_LIMIT} bytes"),
        ));
    }
    Ok(buf)
}

/// skel's `validateConfig`, first half: stdin must be JSON (code 6).
fn parse_config(stdin: &[u8]) -> Result<Json, Error> {
    let config = json::parse(stdin).map_err(|e| config_decode_error(e.to_string()))?;
    json::register("config", &config);
    Ok(config)
}

fn config_decode_error(m: String) -> Error {
    Error::new(code::DECODING_FAILURE, format!("error unmarshall network config: {m}"))
}

/// skel's `validateConfig`, second half: a valid `name` (code 7; a non-string is code 6).
/// Unknown keys are the plugin's business.
fn config_name(config: &Json) -> Result<String, Error> {
    let name = match config {
        Json::Object(m) => json::opt_str(&json::Fields::of(m), "name", ".name")
            .map_err(|e| config_decode_error(e.msg))?
            .unwrap_or_default()
            .to_string(),
        Json::Null => String::new(),
        other => {
            return Err(config_decode_error(format!(
                "json: cannot unmarshal {} into Go value of type struct {{ Name string \"json:\\\"name\\\"\" }}",
                json::kind(other)
            )))
        }
    };
    env::validate_network_name(&name)?;
    Ok(name)
}

/// The config's `cniVersion` (`""` or absent: 0.1.0); a non-string is a decoding failure.
fn decode_version(config: &Json) -> Result<String, Error> {
    let fields = json::as_object(config, "").unwrap_or_default();
    match json::opt_str(&fields, "cniVersion", ".cniVersion") {
        Ok(v) => Ok(version::normalize(v.unwrap_or_default()).to_string()),
        Err(e) => Err(Error::new(
            code::DECODING_FAILURE,
            format!("decoding version from network config: {}", e.msg),
        )),
    }
}

/// True when `path` is the network namespace this process runs in. A path that cannot be
/// opened is not (DEL must work after the namespace is gone).
pub fn is_own_netns(path: &str) -> Result<bool, Error> {
    use std::os::unix::fs::MetadataExt;
    let Ok(target) = std::fs::metadata(path) else {
        return Ok(false);
    };
    let own = std::fs::metadata("/proc/thread-self/ns/net")
        .or_else(|_| std::fs::metadata("/proc/self/ns/net"))
        .map_err(|_| Error::new(code::INVALID_NETNS, "get plugin's netns failed"))?;
    Ok(target.dev() == own.dev() && target.ino() == own.ino())
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    #[serde(rename = "cniVersion", skip_serializing_if = "Option::is_none")]
    cni_version: Option<&'a str>,
    code: u32,
    msg: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    details: &'a str,
}

/// The error object as printed: indented like the reference, `cniVersion` first when known.
pub fn error_json(e: &Error, cni_version: Option<&str>) -> String {
    let out = ErrorOut {
        cni_version,
        code: e.code,
        msg: &e.msg,
        details: &e.details,
    };
    pretty(&out).unwrap_or_else(|_| format!("{{\"code\":{},\"msg\":\"internal error\"}}", e.code))
}

/// The error object for a panic (code 999): nothing may reach the user as a bare crash.
pub fn panic_error_json(message: &str, location: Option<&str>, cni_version: Option<&str>) -> String {
    let msg = match location {
        Some(at) => format!("plugin panicked: {message} (at {at})"),
        None => format!("plugin panicked: {message}"),
    };
    error_json(&Error::internal(msg), cni_version)
}

/// Release builds abort on panic, so the hook is the one place to print the error object.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic payload".to_string());
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line()));
        let cni_version = PANIC_CNI_VERSION.try_lock().ok().and_then(|g| g.clone());
        let out = panic_error_json(&message, location.as_deref(), cni_version.as_deref());
        // raw writes: the std handles may be locked or hold a half-written buffer
        write_fd(std::io::stdout().as_fd(), out.as_bytes());
        write_fd(
            std::io::stderr().as_fd(),
            format!("cnibox: panic: {message}\n").as_bytes(),
        );
        std::process::exit(1);
    }));
}

fn write_fd(fd: std::os::fd::BorrowedFd, mut data: &[u8]) {
    while !data.is_empty() {
        match nix::unistd::write(fd, data) {
            Ok(0) | Err(_) => return,
            Ok(n) => data = &data[n..],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::result::{IpConfig, Route};
    use serde_json::{json, Value};
    use std::collections::HashMap;

    /// Records every request; ADD returns one IPv4 address unless told otherwise.
    #[derive(Default)]
    struct Fake {
        calls: Mutex<Vec<Request>>,
        add_result: Option<CniResult>,
        fail_with: Option<Error>,
    }

    impl Fake {
        fn record(&self, req: &Request) -> Result<(), Error> {
            self.calls.lock().unwrap().push(req.clone());
            match &self.fail_with {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            }
        }
        fn calls(&self) -> Vec<Request> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl Plugin for Fake {
        fn about(&self) -> &'static str {
            "CNI fake plugin v0"
        }
        fn add(&self, req: &Request) -> Result<CniResult, Error> {
            self.record(req)?;
            Ok(self.add_result.clone().unwrap_or_else(|| CniResult {
                ips: vec![IpConfig {
                    interface: None,
                    address: "10.1.2.3/24".parse().unwrap(),
                    gateway: Some("10.1.2.1".parse().unwrap()),
                }],
                routes: vec![Route::new("0.0.0.0/0".parse().unwrap(), None)],
                ..CniResult::default()
            }))
        }
        fn del(&self, req: &Request) -> Result<(), Error> {
            self.record(req)
        }
        fn check(&self, req: &Request) -> Result<(), Error> {
            self.record(req)
        }
    }

    struct Out {
        code: i32,
        stdout: String,
        stderr: String,
    }

    impl Out {
        fn json(&self) -> Value {
            serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", self.stdout))
        }
        fn error(&self) -> (u64, String, String) {
            assert_eq!(self.code, 1, "stdout: {}", self.stdout);
            let v = self.json();
            (
                v["code"].as_u64().unwrap(),
                v["msg"].as_str().unwrap().to_string(),
                v["details"].as_str().unwrap_or("").to_string(),
            )
        }
    }

    fn base_env(cmd: &str) -> HashMap<String, String> {
        [
            ("CNI_COMMAND", cmd),
            ("CNI_CONTAINERID", "ctr1"),
            ("CNI_NETNS", "/nonexistent/netns/for/tests"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", "/opt/cni/bin"),
            ("CNI_ARGS", "IgnoreUnknown=1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn call_env(plugin: &dyn Plugin, env: &HashMap<String, String>, stdin: &[u8]) -> Out {
        let getenv = |k: &str| env.get(k).cloned();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(plugin, None, &getenv, &mut &stdin[..], &mut out, &mut err);
        Out {
            code,
            stdout: String::from_utf8(out).unwrap(),
            stderr: String::from_utf8(err).unwrap(),
        }
    }

    fn call(plugin: &dyn Plugin, cmd: &str, config: &Value) -> Out {
        call_env(plugin, &base_env(cmd), config.to_string().as_bytes())
    }

    fn conf(version: &str) -> Value {
        json!({"cniVersion": version, "name": "net1", "type": "fake", "extra": {"ignored": true}})
    }

    #[test]
    fn about_when_no_command() {
        let p = Fake::default();
        let out = call_env(&p, &HashMap::new(), b"");
        assert_eq!(out.code, 0);
        assert_eq!(out.stdout, "");
        assert_eq!(
            out.stderr,
            "CNI fake plugin v0\nCNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0\n"
        );
        let mut env = base_env("ADD");
        env.insert("CNI_COMMAND".into(), String::new());
        assert_eq!(call_env(&p, &env, b"").code, 0);
    }

    #[test]
    fn no_about_text_means_the_missing_command_is_an_error() {
        struct Mute;
        impl Plugin for Mute {
            fn about(&self) -> &'static str {
                ""
            }
            fn add(&self, _: &Request) -> Result<CniResult, Error> {
                unreachable!("not called")
            }
            fn del(&self, _: &Request) -> Result<(), Error> {
                unreachable!("not called")
            }
            fn check(&self, _: &Request) -> Result<(), Error> {
                unreachable!("not called")
            }
        }
        let out = call_env(&Mute, &HashMap::new(), b"");
        assert_eq!(
            out.error(),
            (4, "required env variables [CNI_COMMAND] missing".into(), String::new())
        );
        assert_eq!(out.stderr, "");
    }

    #[test]
    fn missing_env_is_code_4_without_version() {
        let p = Fake::default();
        let mut env = base_env("ADD");
        env.remove("CNI_NETNS");
        env.remove("CNI_IFNAME");
        let out = call_env(&p, &env, conf("1.0.0").to_string().as_bytes());
        assert_eq!(
            out.stdout,
            "{\n    \"code\": 4,\n    \"msg\": \"required env variables [CNI_NETNS,CNI_IFNAME] missing\"\n}"
        );
        assert_eq!(out.code, 1);
        assert!(p.calls().is_empty());
    }

    #[test]
    fn invalid_env_values() {
        let p = Fake::default();
        let mut env = base_env("ADD");
        env.insert("CNI_CONTAINERID".into(), "bad id".into());
        let out = call_env(&p, &env, conf("1.0.0").to_string().as_bytes());
        assert_eq!(
            out.error(),
            (4, "invalid characters in containerID".into(), "bad id".into())
        );
        let mut env = base_env("CHECK");
        env.insert("CNI_IFNAME".into(), "waytoolonginterface".into());
        let out = call_env(&p, &env, conf("1.0.0").to_string().as_bytes());
        assert_eq!(
            out.error(),
            (
                4,
                "interface name is too long".into(),
                "interface name should be less than 16 characters".into()
            )
        );
    }

    #[test]
    fn version_reply_ignores_stdin() {
        let p = Fake::default();
        let env: HashMap<String, String> = [("CNI_COMMAND".to_string(), "VERSION".to_string())].into();
        let out = call_env(&p, &env, b"this is not json");
        assert_eq!(out.code, 0);
        assert_eq!(out.stdout, version::version_reply());
        assert!(out.stdout.ends_with("]}\n"));
    }

    #[test]
    fn add_prints_result_in_config_version() {
        for v in version::SUPPORTED {
            let p = Fake::default();
            let out = call(&p, "ADD", &conf(v));
            assert_eq!(out.code, 0, "{v}: {}", out.stdout);
            assert!(!out.stdout.ends_with('\n'));
            assert!(
                out.stdout.starts_with(&format!("{{\n    \"cniVersion\": \"{v}\",")),
                "{}",
                out.stdout
            );
            let expected = p.add_result.clone().unwrap_or_else(|| p.add(&p.calls()[0]).unwrap());
            assert_eq!(out.json(), expected.to_json(v).unwrap());
        }
    }

    #[test]
    fn missing_version_means_0_1_0() {
        let p = Fake::default();
        let out = call(&p, "ADD", &json!({"name": "n"}));
        assert_eq!(out.code, 0);
        assert_eq!(out.json()["cniVersion"], "0.1.0");
        assert_eq!(p.calls()[0].cni_version, "0.1.0");
        let out = call(&p, "ADD", &json!({"name": "n", "cniVersion": ""}));
        assert_eq!(out.json()["cniVersion"], "0.1.0");
    }

    #[test]
    fn request_carries_env_and_config() {
        let p = Fake::default();
        let config = conf("1.0.0");
        let out = call(&p, "DEL", &config);
        assert_eq!((out.code, out.stdout.as_str()), (0, ""));
        let req = &p.calls()[0];
        assert_eq!(req.command, Command::Del);
        assert_eq!(req.container_id, "ctr1");
        assert_eq!(req.netns, "/nonexistent/netns/for/tests");
        assert_eq!(req.ifname, "eth0");
        assert_eq!(req.args, "IgnoreUnknown=1");
        assert_eq!(req.path, "/opt/cni/bin");
        assert_eq!(req.stdin, config.to_string().into_bytes());
        assert_eq!(req.config, Json::from(config));
        assert_eq!(req.name, "net1");
        assert_eq!(req.cni_version, "1.0.0");
    }

    #[test]
    fn del_without_netns() {
        let p = Fake::default();
        let mut env = base_env("DEL");
        env.remove("CNI_NETNS");
        let out = call_env(&p, &env, conf("0.4.0").to_string().as_bytes());
        assert_eq!(out.code, 0, "{}", out.stdout);
        assert_eq!(p.calls()[0].netns, "");
    }

    #[test]
    fn stdin_errors() {
        let p = Fake::default();
        let env = base_env("ADD");
        let out = call_env(&p, &env, b"{not json");
        let (code, msg, _) = out.error();
        assert_eq!(code, 6);
        assert!(msg.starts_with("error unmarshall network config: "), "{msg}");
        assert!(!out.json().as_object().unwrap().contains_key("cniVersion"));

        let out = call_env(&p, &env, b"");
        assert_eq!(out.error().0, 6);

        let out = call_env(&p, &env, b"[1,2]");
        assert_eq!(
            out.error().1,
            "error unmarshall network config: json: cannot unmarshal array into Go value of type struct { Name string \"json:\\\"name\\\"\" }"
        );

        let out = call_env(&p, &env, br#"{"name": 5}"#);
        assert_eq!(
            out.error().1,
            "error unmarshall network config: json: cannot unmarshal number into Go struct field .name of type string"
        );

        let out = call_env(&p, &env, br#"{"cniVersion": "1.0.0"}"#);
        assert_eq!(out.error(), (7, "missing network name".into(), String::new()));
        assert_eq!(out.json()["cniVersion"], "1.0.0");
        let out = call_env(&p, &env, b"null");
        assert_eq!(out.error().1, "missing network name");

        let out = call_env(&p, &env, br#"{"name": "bad/name"}"#);
        assert_eq!(
            out.error(),
            (7, "invalid characters found in network name".into(), "bad/name".into())
        );

        let out = call_env(&p, &env, br#"{"name": "n", "cniVersion": 1}"#);
        assert_eq!(
            out.error(),
            (
                6,
                "decoding version from network config: json: cannot unmarshal number into Go struct field .cniVersion of type string".into(),
                String::new()
            )
        );
        assert!(p.calls().is_empty());
    }

    #[test]
    fn deeply_nested_json_is_a_decoding_error() {
        let p = Fake::default();
        let deep = format!(
            "{{\"name\":\"n\",\"x\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let out = call_env(&p, &base_env("ADD"), deep.as_bytes());
        let (code, msg, _) = out.error();
        assert_eq!(code, 6);
        assert!(msg.contains("recursion limit exceeded"), "{msg}");
    }

    #[test]
    fn stdin_is_bounded() {
        let p = Fake::default();
        let pad = " ".repeat(STDIN_LIMIT as usize);
        let big = format!("{{\"name\":\"n\"}}{pad}");
        let out = call_env(&p, &base_env("ADD"), big.as_bytes());
        assert_eq!(
            out.error(),
            (
                5,
                "error reading from stdin: network config is larger than 1048576 bytes".into(),
                String::new()
            )
        );
        // exactly the limit is fine
        let fit = format!("{{\"name\":\"n\"}}{}", &pad[..pad.len() - 12]);
        assert_eq!(fit.len() as u64, STDIN_LIMIT);
        assert_eq!(call_env(&p, &base_env("ADD"), fit.as_bytes()).code, 0);
    }

    #[test]
    fn unknown_command_after_stdin_validation() {
        let p = Fake::default();
        let env: HashMap<String, String> = [("CNI_COMMAND".to_string(), "FOO".to_string())].into();
        let out = call_env(&p, &env, br#"{"name":"n","cniVersion":"1.0.0"}"#);
        assert_eq!(out.error(), (4, "unknown CNI_COMMAND: FOO".into(), String::new()));
        let out = call_env(&p, &env, b"{");
        assert_eq!(out.error().0, 6);
        // commands are case-sensitive
        let out = call_env(&p, &base_env("add"), conf("1.0.0").to_string().as_bytes());
        assert_eq!(out.error().1, "unknown CNI_COMMAND: add");
    }

    #[test]
    fn version_gate_per_verb_and_version() {
        for v in version::SUPPORTED {
            for cmd in ["ADD", "DEL", "CHECK", "STATUS", "GC"] {
                let p = Fake::default();
                let out = call(&p, cmd, &conf(v));
                let allowed = match cmd {
                    "CHECK" => version::at_least(v, "0.4.0"),
                    "STATUS" | "GC" => *v == "1.1.0",
                    _ => true,
                };
                if allowed {
                    assert_eq!(out.code, 0, "{cmd} {v}: {}", out.stdout);
                } else {
                    assert_eq!(
                        out.error(),
                        (1, format!("config version does not allow {cmd}"), String::new()),
                        "{cmd} {v}"
                    );
                    assert_eq!(out.json()["cniVersion"], *v);
                    assert!(p.calls().is_empty());
                }
            }
        }
    }

    #[test]
    fn unsupported_version_is_code_1_with_details() {
        for cmd in ["ADD", "DEL"] {
            let p = Fake::default();
            let out = call(&p, cmd, &conf("9.9.9"));
            assert_eq!(
                out.error(),
                (
                    1,
                    "incompatible CNI versions".into(),
                    r#"config is "9.9.9", plugin supports ["0.1.0" "0.2.0" "0.3.0" "0.3.1" "0.4.0" "1.0.0" "1.1.0"]"#
                        .into()
                )
            );
            assert_eq!(out.json()["cniVersion"], "9.9.9");
        }
        let out = call(&Fake::default(), "CHECK", &conf("9.9.9"));
        assert_eq!(out.error().1, "plugin version does not allow CHECK");
    }

    #[test]
    fn plugin_errors_pass_through_with_config_version() {
        let p = Fake {
            fail_with: Some(Error::new(11, "try later").with_details("ipam busy")),
            ..Default::default()
        };
        let out = call(&p, "ADD", &conf("0.4.0"));
        assert_eq!(
            out.stdout,
            "{\n    \"cniVersion\": \"0.4.0\",\n    \"code\": 11,\n    \"msg\": \"try later\",\n    \"details\": \"ipam busy\"\n}"
        );
        assert_eq!(out.code, 1);
    }

    #[test]
    fn result_conversion_errors_are_reported() {
        let p = Fake {
            add_result: Some(CniResult::default()),
            ..Default::default()
        };
        for v in ["0.1.0", "0.2.0"] {
            let out = call(&p, "ADD", &conf(v));
            assert_eq!(
                out.error(),
                (999, "cannot convert: no valid IP addresses".into(), String::new())
            );
        }
        let out = call(&p, "ADD", &conf("0.3.1"));
        assert_eq!(out.code, 0);
    }

    #[test]
    fn own_netns_is_refused_before_the_plugin_runs() {
        for cmd in ["ADD", "DEL", "CHECK"] {
            let p = Fake::default();
            let mut env = base_env(cmd);
            env.insert("CNI_NETNS".into(), "/proc/thread-self/ns/net".into());
            let out = call_env(&p, &env, conf("1.0.0").to_string().as_bytes());
            assert_eq!(
                out.error(),
                (
                    8,
                    "plugin's netns and netns from CNI_NETNS should not be the same".into(),
                    String::new()
                ),
                "{cmd}"
            );
            assert!(p.calls().is_empty(), "{cmd}");
            for yes in ["1", "true", "TRUE"] {
                env.insert("CNI_NETNS_OVERRIDE".into(), yes.into());
                let out = call_env(&p, &env, conf("1.0.0").to_string().as_bytes());
                assert_eq!(out.code, 0, "{cmd} override {yes}: {}", out.stdout);
            }
            env.insert("CNI_NETNS_OVERRIDE".into(), "0".into());
            assert_eq!(call_env(&p, &env, conf("1.0.0").to_string().as_bytes()).error().0, 8);
        }
    }

    #[test]
    fn netns_identity() {
        assert!(is_own_netns("/proc/thread-self/ns/net").unwrap());
        assert!(!is_own_netns("/nonexistent/netns").unwrap());
        let f = tempfile::NamedTempFile::new().unwrap();
        assert!(!is_own_netns(f.path().to_str().unwrap()).unwrap());
    }

    #[test]
    fn status_and_gc_default_to_success() {
        let p = Fake::default();
        let mut env: HashMap<String, String> = [
            ("CNI_COMMAND".to_string(), "STATUS".to_string()),
            ("CNI_PATH".to_string(), "/x".to_string()),
        ]
        .into();
        let out = call_env(&p, &env, conf("1.1.0").to_string().as_bytes());
        assert_eq!((out.code, out.stdout.as_str()), (0, ""));
        env.insert("CNI_COMMAND".into(), "GC".into());
        let out = call_env(&p, &env, conf("1.1.0").to_string().as_bytes());
        assert_eq!((out.code, out.stdout.as_str()), (0, ""));
        env.remove("CNI_PATH");
        let out = call_env(&p, &env, conf("1.1.0").to_string().as_bytes());
        assert_eq!(out.error().1, "required env variables [CNI_PATH] missing");
    }

    #[test]
    fn error_object_layout() {
        let e = Error::new(7, "bad").with_details("very bad");
        assert_eq!(
            error_json(&e, Some("1.1.0")),
            "{\n    \"cniVersion\": \"1.1.0\",\n    \"code\": 7,\n    \"msg\": \"bad\",\n    \"details\": \"very bad\"\n}"
        );
        assert_eq!(
            error_json(&Error::new(4, "x"), None),
            "{\n    \"code\": 4,\n    \"msg\": \"x\"\n}"
        );
    }

    #[test]
    fn panic_object() {
        let s = panic_error_json("index out of bounds", Some("src/x.rs:10"), Some("0.4.0"));
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(
            v,
            json!({"cniVersion": "0.4.0", "code": 999, "msg": "plugin panicked: index out of bounds (at src/x.rs:10)"})
        );
        let v: Value = serde_json::from_str(&panic_error_json("boom", None, None)).unwrap();
        assert_eq!(v, json!({"code": 999, "msg": "plugin panicked: boom"}));
    }

    /// A reader that always fails, counting the attempts (skel_test.go's BadReader).
    struct BadReader(std::cell::Cell<usize>);

    impl Read for BadReader {
        fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
            self.0.set(self.0.get() + 1);
            Err(std::io::Error::other("banana"))
        }
    }

    fn call_reader(plugin: &dyn Plugin, env: &HashMap<String, String>, stdin: &mut dyn Read) -> Out {
        let getenv = |k: &str| env.get(k).cloned();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(plugin, None, &getenv, stdin, &mut out, &mut err);
        Out {
            code,
            stdout: String::from_utf8(out).unwrap(),
            stderr: String::from_utf8(err).unwrap(),
        }
    }

    #[test]
    fn stdin_read_failure_is_code_5() {
        let p = Fake::default();
        let mut r = BadReader(Default::default());
        let out = call_reader(&p, &base_env("ADD"), &mut r);
        assert_eq!(
            out.error(),
            (5, "error reading from stdin: banana".into(), String::new())
        );
        assert!(p.calls().is_empty());
    }

    #[test]
    fn version_does_not_read_stdin() {
        let p = Fake::default();
        let mut r = BadReader(Default::default());
        let out = call_reader(&p, &base_env("VERSION"), &mut r);
        assert_eq!(out.code, 0);
        assert_eq!(r.0.get(), 0);
        assert_eq!(
            serde_json::from_str::<Value>(&out.stdout).unwrap(),
            json!({"cniVersion": "1.1.0", "supportedVersions": version::SUPPORTED})
        );
        assert_eq!(out.stderr, "");
    }

    #[test]
    fn check_gate_details() {
        // below 0.4.0: refused before anything else looks at the config
        let out = call(&Fake::default(), "CHECK", &conf("0.3.0"));
        assert_eq!(out.error().1, "config version does not allow CHECK");
        // an unparsable version is a decoding failure for the gated verbs...
        for cmd in ["CHECK", "GC", "STATUS"] {
            let mut env = base_env(cmd);
            env.insert("CNI_PATH".into(), "/x".into());
            let out = call_env(&Fake::default(), &env, br#"{"cniVersion":"adsfsadf","name":"test"}"#);
            assert_eq!(out.error().0, 6, "{cmd}");
        }
        // ...and plainly incompatible for ADD
        let out = call_env(
            &Fake::default(),
            &base_env("ADD"),
            br#"{"cniVersion":"adsfsadf","name":"test"}"#,
        );
        assert_eq!(out.error().0, 1);
    }

    #[test]
    fn plain_plugin_errors_keep_their_code() {
        let p = Fake {
            fail_with: Some(Error::new(1234, "insufficient something")),
            ..Default::default()
        };
        let out = call(&p, "DEL", &conf("1.0.0"));
        assert_eq!(out.error(), (1234, "insufficient something".into(), String::new()));
        let p = Fake {
            fail_with: Some(Error::internal("potato")),
            ..Default::default()
        };
        let out = call(&p, "CHECK", &conf("1.0.0"));
        assert_eq!(out.error(), (999, "potato".into(), String::new()));
    }

    #[test]
    fn request_from_config() {
        let r = Request::from_config(Command::Check, json!({"name": "n1", "cniVersion": "0.4.0", "x": 1}));
        assert_eq!(
            (r.command, r.name.as_str(), r.cni_version.as_str()),
            (Command::Check, "n1", "0.4.0")
        );
        assert_eq!(json::parse(&r.stdin).unwrap(), r.config);
        let r = Request::from_config(Command::Add, json!({"name": "n1"}));
        assert_eq!(r.cni_version, "0.1.0");
        assert_eq!(r.container_id, "");
    }

    #[test]
    fn command_names() {
        for c in [
            Command::Add,
            Command::Del,
            Command::Check,
            Command::Status,
            Command::Gc,
            Command::Version,
        ] {
            assert_eq!(Command::parse(c.as_str()), Some(c));
        }
        assert_eq!(Command::parse("add"), None);
        assert_eq!(Command::parse(""), None);
    }
}
