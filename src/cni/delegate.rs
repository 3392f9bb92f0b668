//! Delegation to an IPAM plugin (the Go `invoke.Delegate*`): find `<type>` in `CNI_PATH`,
//! give it the same environment (only `CNI_COMMAND` changed) and the same stdin, and read
//! its answer as libcni does.
//!
//! When the plugin found is this very binary, the applet runs in-process instead of being
//! exec'd; its result still goes through the config version's shape, so the caller sees
//! exactly what an exec'd plugin would have printed.
use super::invoke::{self, ExecError, Invocation};
use super::{CniResult, Command, Error, Plugin, Request};
use std::path::Path;

/// How deep delegations may nest. A main plugin delegates to its IPAM plugin (depth 1),
/// which does not delegate further; a config whose `ipam.type` names a plugin that itself
/// delegates (`"ipam": {"type": "macvlan"}` in a macvlan config) hands it the same stdin, so
/// it delegates to itself again and again: in process until the stack overflows, exec'd
/// until the process table fills. Such a loop is cut off with an error instead.
pub const MAX_DEPTH: u32 = 3;

/// Carries the depth to exec'd delegates (and through Go plugins, which pass their
/// environment on to their own delegates).
pub const DEPTH_ENV: &str = "CNIBOX_DELEGATION_DEPTH";

thread_local! {
    /// In-process delegations currently running on this thread.
    static IN_PROCESS_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The nesting depth of the delegation about to start.
fn depth() -> u32 {
    let inherited = std::env::var(DEPTH_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0);
    inherited.saturating_add(IN_PROCESS_DEPTH.with(|d| d.get()))
}

pub fn add(ipam_type: &str, req: &Request) -> Result<CniResult, Error> {
    let result = run(ipam_type, req, Command::Add)?;
    result.ok_or_else(|| Error::internal(format!("delegated plugin {ipam_type:?} returned no result")))
}

pub fn del(ipam_type: &str, req: &Request) -> Result<(), Error> {
    run(ipam_type, req, Command::Del).map(drop)
}

pub fn check(ipam_type: &str, req: &Request) -> Result<(), Error> {
    run(ipam_type, req, Command::Check).map(drop)
}

pub fn status(ipam_type: &str, req: &Request) -> Result<(), Error> {
    run(ipam_type, req, Command::Status).map(drop)
}

pub fn gc(ipam_type: &str, req: &Request) -> Result<(), Error> {
    run(ipam_type, req, Command::Gc).map(drop)
}

/// Run `command` on the delegate; `Some(result)` for ADD.
/// A delegate that is this very binary runs in-process, through the request's applet table.
pub fn run(ipam_type: &str, req: &Request, command: Command) -> Result<Option<CniResult>, Error> {
    let depth = depth();
    if depth >= MAX_DEPTH {
        return Err(Error::internal(format!(
            "delegating to {ipam_type:?}: delegations nested {depth} deep; the IPAM type names a plugin that delegates again (a loop)"
        )));
    }
    let path = invoke::find_in_path(ipam_type, &req.path).map_err(into_error)?;
    let this_binary = req
        .applets
        .filter(|_| crate::util::same_file(&path, Path::new("/proc/self/exe")));
    if let Some(lookup) = this_binary {
        let Some(plugin) = lookup(ipam_type) else {
            // exec'ing ourselves under a name we do not answer to could only fail
            return Err(Error::internal(format!(
                "{} is this binary, which has no applet named {ipam_type:?}",
                path.display()
            )));
        };
        IN_PROCESS_DEPTH.with(|d| d.set(d.get() + 1));
        let result = in_process(plugin, req, command);
        IN_PROCESS_DEPTH.with(|d| d.set(d.get() - 1));
        return result;
    }
    let stdout = exec(&path, req, command, depth + 1)?;
    if command != Command::Add {
        return Ok(None);
    }
    let value = super::json::parse(&stdout).map_err(|e| {
        Error::internal(format!(
            "failed to unmarshal raw result: {e} result {}",
            String::from_utf8_lossy(&stdout)
        ))
    })?;
    CniResult::from_plugin_output(&value, &req.cni_version).map(Some)
}

fn in_process(plugin: &dyn Plugin, req: &Request, command: Command) -> Result<Option<CniResult>, Error> {
    let mut sub = req.clone();
    sub.command = command;
    // the copy is the delegate's own document, as an exec'd delegate parses its own
    super::json::register("config", &sub.config);
    match command {
        Command::Add => {
            let result = plugin.add(&sub)?;
            // what an exec'd delegate would print, read back as the caller reads its output
            let text = result.to_pretty_json(&req.cni_version)?;
            let printed =
                super::json::parse(text.as_bytes()).map_err(|e| Error::internal(format!("encoding result: {e}")))?;
            CniResult::from_plugin_output(&printed, &req.cni_version).map(Some)
        }
        Command::Del => plugin.del(&sub).map(|_| None),
        Command::Check => plugin.check(&sub).map(|_| None),
        Command::Status => plugin.status(&sub).map(|_| None),
        Command::Gc => plugin.gc(&sub).map(|_| None),
        Command::Version => Err(Error::internal("VERSION is not delegated")),
    }
}

/// Exec the delegate with the request's stdin and environment (only `CNI_COMMAND` set
/// to `command`); its stdout on success.
fn exec(path: &Path, req: &Request, command: Command, depth: u32) -> Result<Vec<u8>, Error> {
    let inv = Invocation {
        command: command.as_str(),
        container_id: req.container_id.clone(),
        netns: req.netns.clone(),
        ifname: req.ifname.clone(),
        args: req.args.clone(),
        path: req.path.clone(),
        env: vec![(DEPTH_ENV, depth.to_string())],
    };
    invoke::exec(path, &req.stdin, &inv).map_err(into_error)
}

/// Delegation reports every failure as a CNI error: the plugin's own, or code 999.
fn into_error(e: ExecError) -> Error {
    match e {
        ExecError::Plugin(e) => e,
        ExecError::Find(m) | ExecError::BadResult(m) => Error::internal(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Finding as delegation reports it (code 999).
    fn find_in_path(plugin: &str, cni_path: &str) -> Result<PathBuf, Error> {
        invoke::find_in_path(plugin, cni_path).map_err(into_error)
    }
    use crate::cni::result::IpConfig;
    use crate::cni::AppletLookup;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Mutex;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn req(dir: &Path, command: Command, version: &str) -> Request {
        let config = json!({"cniVersion": version, "name": "net1", "type": "bridge", "ipam": {"type": "fake"}});
        Request {
            command,
            container_id: "ctr1".into(),
            netns: "/run/netns/x".into(),
            ifname: "eth0".into(),
            args: "IgnoreUnknown=1;K8S_POD_NAME=p".into(),
            path: format!("/nonexistent/cni/bin:{}", dir.display()),
            stdin: config.to_string().into_bytes(),
            name: "net1".into(),
            cni_version: version.into(),
            config: config.into(),
            applets: None,
        }
    }

    /// [`add`] with `applets` as the request's applet table.
    fn add_with(ipam_type: &str, req: &Request, applets: AppletLookup) -> Result<CniResult, Error> {
        let mut req = req.clone();
        req.applets = Some(applets);
        add(ipam_type, &req)
    }

    /// [`run`] with `applets` as the request's applet table.
    fn run_with(
        ipam_type: &str,
        req: &Request,
        command: Command,
        applets: AppletLookup,
    ) -> Result<Option<CniResult>, Error> {
        let mut req = req.clone();
        req.applets = Some(applets);
        run(ipam_type, &req, command)
    }

    fn no_applets(_: &str) -> Option<&'static dyn Plugin> {
        None
    }

    #[test]
    fn find_errors_are_libcni_texts() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find_in_path("", "/a").unwrap_err().msg, "no plugin name provided");
        assert_eq!(find_in_path("../x", "/a").unwrap_err().msg, "invalid plugin name: ../x");
        assert_eq!(find_in_path("x", "").unwrap_err().msg, "no paths provided");
        let e = find_in_path("nonexist", "/opt/test/bin:/usr/lib/cni-none").unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (
                999,
                r#"failed to find plugin "nonexist" in path [/opt/test/bin /usr/lib/cni-none]"#
            )
        );
        // a directory of that name is not a plugin
        std::fs::create_dir(dir.path().join("fake")).unwrap();
        assert!(find_in_path("fake", dir.path().to_str().unwrap()).is_err());
    }

    #[test]
    fn find_takes_the_first_regular_file() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let in_b = script(b.path(), "fake", "exit 0");
        let path = format!("{}:{}", a.path().display(), b.path().display());
        assert_eq!(find_in_path("fake", &path).unwrap(), in_b);
        let in_a = script(a.path(), "fake", "exit 0");
        assert_eq!(find_in_path("fake", &path).unwrap(), in_a);
        // empty entries are skipped
        assert_eq!(
            find_in_path("fake", &format!("::{}", b.path().display())).unwrap(),
            in_b
        );
    }

    #[test]
    fn exec_add_same_env_and_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        script(
            dir.path(),
            "fake",
            &format!(
                "env | grep '^CNI_' | sort > {d}/env\ncat > {d}/stdin\n\
                 echo '{{\"ips\":[{{\"address\":\"10.1.2.3/24\",\"gateway\":\"10.1.2.1\"}}],\"dns\":{{\"nameservers\":[\"10.1.2.1\"]}}}}'"
            ),
        );
        let r = req(dir.path(), Command::Add, "1.0.0");
        let result = add_with("fake", &r, no_applets).unwrap();
        assert_eq!(result.cni_version, "1.0.0");
        assert_eq!(result.ips[0].address.to_string(), "10.1.2.3/24");
        assert_eq!(result.dns.nameservers, Some(vec!["10.1.2.1".to_string()]));
        assert_eq!(std::fs::read(dir.path().join("stdin")).unwrap(), r.stdin);
        let env = std::fs::read_to_string(dir.path().join("env")).unwrap();
        for line in [
            "CNI_COMMAND=ADD",
            "CNI_CONTAINERID=ctr1",
            "CNI_NETNS=/run/netns/x",
            "CNI_IFNAME=eth0",
            "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAME=p",
            &format!("CNI_PATH={}", r.path),
        ] {
            assert!(env.lines().any(|l| l == line), "{line} not in {env}");
        }
    }

    #[test]
    fn exec_verbs_set_their_command_and_ignore_stdout() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        script(
            dir.path(),
            "fake",
            &format!("echo $CNI_COMMAND >> {d}/cmds\necho 'not json'"),
        );
        let r = req(dir.path(), Command::Del, "1.1.0");
        del("fake", &r).unwrap();
        check("fake", &r).unwrap();
        status("fake", &r).unwrap();
        gc("fake", &r).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("cmds")).unwrap(),
            "DEL\nCHECK\nSTATUS\nGC\n"
        );
    }

    #[test]
    fn exec_result_in_its_own_version() {
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "fake",
            r#"echo '{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.1.2.3/24"}]}'"#,
        );
        let result = add_with("fake", &req(dir.path(), Command::Add, "1.0.0"), no_applets).unwrap();
        assert_eq!(result.cni_version, "0.4.0");
        assert_eq!(result.ips.len(), 1);
    }

    #[test]
    fn error_object_passes_through_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "fake",
            r#"echo '{"cniVersion":"1.0.0","code":11,"msg":"try later","details":"ipam busy"}'; echo log >&2; exit 1"#,
        );
        let e = add_with("fake", &req(dir.path(), Command::Add, "1.0.0"), no_applets).unwrap_err();
        assert_eq!(e, Error::new(11, "try later").with_details("ipam busy"));
        let e = del("fake", &req(dir.path(), Command::Del, "1.0.0")).unwrap_err();
        assert_eq!(e.code, 11);
    }

    #[test]
    fn failure_without_output() {
        let dir = tempfile::tempdir().unwrap();
        script(dir.path(), "silent", "exit 3");
        script(dir.path(), "noisy", "echo oops >&2; exit 3");
        script(dir.path(), "garbage", "echo garbage; exit 1");
        script(dir.path(), "killed", "kill -9 $$");
        let r = req(dir.path(), Command::Add, "1.0.0");
        let e = add_with("silent", &r, no_applets).unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (0, "netplugin failed with no error message: exit status 3")
        );
        let e = add_with("noisy", &r, no_applets).unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (0, r#"netplugin failed: "oops\n": exit status 3"#)
        );
        let e = add_with("garbage", &r, no_applets).unwrap_err();
        assert_eq!(e.code, 0);
        assert!(
            e.msg
                .starts_with(r#"netplugin failed but error parsing its diagnostic message "garbage\n": "#),
            "{}",
            e.msg
        );
        let e = add_with("killed", &r, no_applets).unwrap_err();
        assert_eq!(e.msg, "netplugin failed with no error message: signal: killed");
    }

    #[test]
    fn add_with_unparsable_result() {
        let dir = tempfile::tempdir().unwrap();
        script(dir.path(), "fake", "echo garbage");
        let e = add_with("fake", &req(dir.path(), Command::Add, "1.0.0"), no_applets).unwrap_err();
        assert_eq!(e.code, 999);
        assert!(e.msg.starts_with("failed to unmarshal raw result: "), "{}", e.msg);
        assert!(e.msg.ends_with(" result garbage\n"), "{}", e.msg);
        script(dir.path(), "old", r#"echo '{"cniVersion":"0.9.0"}'"#);
        let e = add_with("old", &req(dir.path(), Command::Add, "1.0.0"), no_applets).unwrap_err();
        assert_eq!(e.msg, r#"unsupported CNI result version "0.9.0""#);
    }

    #[test]
    fn not_executable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fake");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = del("fake", &req(dir.path(), Command::Del, "1.0.0")).unwrap_err();
        // root may execute files without x bits only when some x bit is set; none is here
        assert_eq!(
            (e.code, e.msg),
            (
                0,
                format!(
                    "netplugin failed with no error message: fork/exec {}: permission denied",
                    p.display()
                )
            )
        );
    }

    #[test]
    fn large_stdin_with_a_child_that_writes_first() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        // prints more than a pipe holds before reading stdin: must not deadlock
        script(
            dir.path(),
            "fake",
            &format!("head -c 300000 /dev/zero | tr '\\0' ' '\necho '{{\"cniVersion\":\"1.0.0\"}}'\ncat > {d}/stdin"),
        );
        let mut r = req(dir.path(), Command::Add, "1.0.0");
        let mut config = r.config.clone();
        config
            .as_object_mut()
            .unwrap()
            .insert("pad", crate::cni::json::Json::from("x".repeat(900_000)));
        r.stdin = config.to_string().into_bytes();
        let result = add_with("fake", &r, no_applets).unwrap();
        assert_eq!(result.cni_version, "1.0.0");
        assert_eq!(std::fs::read(dir.path().join("stdin")).unwrap().len(), r.stdin.len());
    }

    /// An in-process IPAM applet that records what it was asked.
    struct InProc;
    static IN_PROC_CALLS: Mutex<Vec<(Command, String)>> = Mutex::new(Vec::new());

    impl Plugin for InProc {
        fn about(&self) -> &'static str {
            "in-process test IPAM"
        }
        fn add(&self, req: &Request) -> Result<CniResult, Error> {
            IN_PROC_CALLS.lock().unwrap().push((req.command, req.name.clone()));
            Ok(CniResult {
                cni_version: "1.1.0".into(),
                ips: vec![
                    IpConfig {
                        interface: Some(0),
                        address: "10.1.2.3/24".parse().unwrap(),
                        gateway: None,
                    },
                    IpConfig {
                        interface: None,
                        address: "10.1.3.3/24".parse().unwrap(),
                        gateway: None,
                    },
                ],
                ..CniResult::default()
            })
        }
        fn del(&self, req: &Request) -> Result<(), Error> {
            IN_PROC_CALLS.lock().unwrap().push((req.command, req.name.clone()));
            Err(Error::new(11, "busy").with_details("in-process"))
        }
        fn check(&self, _req: &Request) -> Result<(), Error> {
            Ok(())
        }
    }

    static IN_PROC: InProc = InProc;

    /// A plugin whose IPAM type is itself: every call delegates again.
    struct Looping;

    impl Plugin for Looping {
        fn about(&self) -> &'static str {
            "delegates to itself"
        }
        fn add(&self, req: &Request) -> Result<CniResult, Error> {
            add_with("looping", req, looping_lookup)
        }
        fn del(&self, req: &Request) -> Result<(), Error> {
            run_with("looping", req, Command::Del, looping_lookup).map(drop)
        }
        fn check(&self, _req: &Request) -> Result<(), Error> {
            Ok(())
        }
    }

    static LOOPING: Looping = Looping;

    fn looping_lookup(name: &str) -> Option<&'static dyn Plugin> {
        (name == "looping").then_some(&LOOPING as &'static dyn Plugin)
    }

    #[test]
    fn a_delegation_loop_is_an_error_not_a_stack_overflow() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        std::os::unix::fs::symlink(&me, dir.path().join("looping")).unwrap();
        let r = req(dir.path(), Command::Add, "1.0.0");
        let e = add_with("looping", &r, looping_lookup).unwrap_err();
        assert_eq!(e.code, 999);
        assert!(e.msg.contains("delegations nested 3 deep"), "{}", e.msg);
        let e = run_with("looping", &r, Command::Del, looping_lookup).unwrap_err();
        assert!(e.msg.contains("a loop"), "{}", e.msg);
        assert_eq!(IN_PROCESS_DEPTH.with(|d| d.get()), 0, "the depth unwinds");
    }

    #[test]
    fn exec_passes_the_depth_on() {
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "depth",
            r#"printf '{"cniVersion":"1.0.0","ips":[{"address":"10.1.2.%s/24"}]}' "$CNIBOX_DELEGATION_DEPTH""#,
        );
        let r = req(dir.path(), Command::Add, "1.0.0");
        let result = add_with("depth", &r, no_applets).unwrap();
        assert_eq!(result.ips[0].address.to_string(), "10.1.2.1/24");
    }

    fn in_proc_lookup(name: &str) -> Option<&'static dyn Plugin> {
        (name == "fake-ipam").then_some(&IN_PROC as &'static dyn Plugin)
    }

    #[test]
    fn this_binary_runs_in_process() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        std::os::unix::fs::symlink(&me, dir.path().join("fake-ipam")).unwrap();
        std::os::unix::fs::symlink(&me, dir.path().join("no-such-applet")).unwrap();

        // 0.2.0: the result goes through the 0.2.0 shape, as if printed and read back
        let r = req(dir.path(), Command::Add, "0.2.0");
        let result = add_with("fake-ipam", &r, in_proc_lookup).unwrap();
        assert_eq!(result.cni_version, "0.2.0");
        assert_eq!(result.ips.len(), 1);
        assert_eq!(result.ips[0].interface, None);
        let r = req(dir.path(), Command::Add, "1.1.0");
        let result = add_with("fake-ipam", &r, in_proc_lookup).unwrap();
        assert_eq!(result.ips.len(), 2);
        assert_eq!(result.ips[0].interface, Some(0));

        let e = run_with(
            "fake-ipam",
            &req(dir.path(), Command::Add, "1.1.0"),
            Command::Del,
            in_proc_lookup,
        )
        .unwrap_err();
        assert_eq!(e, Error::new(11, "busy").with_details("in-process"));
        run_with("fake-ipam", &r, Command::Check, in_proc_lookup).unwrap();

        let calls = IN_PROC_CALLS.lock().unwrap().clone();
        assert_eq!(
            calls,
            vec![
                (Command::Add, "net1".to_string()),
                (Command::Add, "net1".to_string()),
                (Command::Del, "net1".to_string())
            ]
        );

        let e = add_with("no-such-applet", &r, in_proc_lookup).unwrap_err();
        assert!(
            e.msg
                .ends_with(r#"is this binary, which has no applet named "no-such-applet""#),
            "{}",
            e.msg
        );
    }
}
