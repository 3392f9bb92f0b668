//! The integration-test harness: every test gets a private *host* network namespace and
//! fresh *container* namespaces, runs the real `cnibox` binary as a process inside the host
//! namespace, and removes everything on drop (also when the test panics).
//!
//! Nothing here touches the namespaces of the machine running the tests.
#![allow(dead_code)]

pub mod emulation;
pub mod link_kinds;
pub mod routes;
pub mod seccomp;
pub mod shared_answers;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

pub const ALL_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// The binary under test: the one cargo built for these tests, or the one named by
/// CNIBOX_TEST_BIN (`make test` also runs the plugin tests against the shipped release build).
pub fn cnibox() -> PathBuf {
    match std::env::var_os("CNIBOX_TEST_BIN") {
        Some(p) => std::fs::canonicalize(p).expect("CNIBOX_TEST_BIN names the binary to test"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_cnibox")),
    }
}

/// The Go reference plugins (Debian's containernetworking-plugins). `make test` installs
/// them, so their absence fails the differential tests instead of skipping them silently;
/// set CNIBOX_ALLOW_NO_REFERENCE=1 to skip those tests on a machine without them.
pub fn reference_dir() -> Option<PathBuf> {
    let d = PathBuf::from("/usr/lib/cni");
    if d.join("host-local").exists() {
        return Some(d);
    }
    assert!(
        std::env::var_os("CNIBOX_ALLOW_NO_REFERENCE").is_some(),
        "the Go reference plugins are missing from /usr/lib/cni: run sh tests/deps.sh \
         (or set CNIBOX_ALLOW_NO_REFERENCE=1 to skip the differential tests)"
    );
    eprintln!("skipping: the Go reference plugins are not installed");
    None
}

pub fn require_root() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "network tests must run as root (sudo make test)"
    );
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A unique short name: `cb<pid><seq>` plus a suffix (namespace names, etc.).
pub fn unique(prefix: &str) -> String {
    format!(
        "cb{}{}{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst),
        prefix
    )
}

/// User `NETLINK_NETFILTER` sockets in a `/proc/net/netlink` table (port id 0 is the
/// kernel's own socket).
pub fn user_netfilter_sockets(netlink_table: &str) -> usize {
    const NETLINK_NETFILTER: &str = "12";
    netlink_table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|cols| cols.get(1) == Some(&NETLINK_NETFILTER) && cols.get(2) != Some(&"0"))
        .count()
}

/// A named network namespace (bind-mounted under /run/netns by `ip netns add`), deleted on drop.
pub struct Netns {
    pub name: String,
    pub path: PathBuf,
}

impl Netns {
    pub fn new(suffix: &str) -> Netns {
        require_root();
        let name = unique(suffix);
        run_ok(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns {
            path: PathBuf::from(format!("/run/netns/{name}")),
            name,
        };
        // loopback up, as runtimes do
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn path_str(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// `ip -n <ns> ARGS`, panicking on failure; returns stdout.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut c = Command::new("ip");
        c.args(["-n", &self.name]).args(args);
        run_ok(&mut c)
    }

    /// `ip -n <ns> ARGS`, returning the whole output (for expected failures).
    pub fn ip_raw(&self, args: &[&str]) -> Output {
        Command::new("ip").args(["-n", &self.name]).args(args).output().unwrap()
    }

    /// `ip -j -n <ns> ARGS` parsed as JSON.
    pub fn ip_json(&self, args: &[&str]) -> serde_json::Value {
        let mut c = Command::new("ip");
        c.args(["-j", "-n", &self.name]).args(args);
        let out = run_ok(&mut c);
        if out.trim().is_empty() {
            return serde_json::Value::Array(vec![]);
        }
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("ip -j {args:?}: {e}: {out}"))
    }

    /// Names of the links in this namespace.
    pub fn links(&self) -> Vec<String> {
        self.ip_json(&["link", "show"])
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["ifname"].as_str().unwrap().to_string())
            .collect()
    }

    /// Netfilter netlink sockets open in this namespace (see [`user_netfilter_sockets`]).
    pub fn netfilter_sockets(&self) -> usize {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, "cat", "/proc/net/netlink"]);
        user_netfilter_sockets(&run_ok(&mut c))
    }

    pub fn has_link(&self, name: &str) -> bool {
        self.ip_raw(&["link", "show", "dev", name]).status.success()
    }

    /// `local/prefixlen` of every address of a link (global scope and others).
    pub fn addrs(&self, dev: &str) -> Vec<String> {
        let v = self.ip_json(&["addr", "show", "dev", dev]);
        let mut out = vec![];
        for l in v.as_array().unwrap() {
            for a in l["addr_info"].as_array().unwrap() {
                out.push(format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]));
            }
        }
        out
    }

    /// `addr_assign_type` of a link (1 random, 3 set by user space), read through
    /// `ip netns exec`, which mounts the namespace's own sysfs.
    pub fn addr_assign_type(&self, dev: &str) -> String {
        let file = format!("/sys/class/net/{dev}/addr_assign_type");
        run_ok(Command::new("ip").args(["netns", "exec", &self.name, "cat", &file]))
            .trim()
            .to_string()
    }

    /// A sysctl read inside the namespace, e.g. `net/ipv4/ip_forward`.
    pub fn sysctl(&self, key: &str) -> String {
        let out = self.exec(&["cat", &format!("/proc/sys/{key}")]);
        out.trim().to_string()
    }

    /// Run a command inside the namespace; panics on failure; returns stdout.
    pub fn exec(&self, argv: &[&str]) -> String {
        let mut c = self.command(argv[0]);
        c.args(&argv[1..]);
        run_ok(&mut c)
    }

    /// A `Command` that runs inside this namespace (setns in the child before exec).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let fd = File::open(&self.path).unwrap();
        let mut c = Command::new(program);
        // SAFETY: between fork and exec the closure only calls setns(2), which is async-signal-safe.
        unsafe {
            c.pre_exec(move || {
                nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
            });
        }
        c
    }

    /// True if a ping from this namespace to `addr` gets an answer (addresses of test namespaces only).
    pub fn ping(&self, addr: &str) -> bool {
        self.command("ping")
            .args(["-c", "1", "-W", "2", addr])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// Run, panic with the output on failure, return stdout.
pub fn run_ok(c: &mut Command) -> String {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{c:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One test's world: a private host namespace, a temp dir with a CNI bin dir (symlinks to
/// cnibox under every applet name), a data dir for host-local and a cache dir.
pub struct TestEnv {
    pub host: Netns,
    pub tmp: tempfile::TempDir,
    pub bin_dir: PathBuf,
    pub data_dir: PathBuf,
    pub cache_dir: PathBuf,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let host = Netns::new("h");
        let tmp = tempfile::Builder::new().prefix("cnibox-test").tempdir().unwrap();
        let bin_dir = tmp.path().join("bin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        let out = run_ok(Command::new(cnibox()).arg("--list"));
        for name in out.lines() {
            std::os::unix::fs::symlink(cnibox(), bin_dir.join(name)).unwrap();
        }
        let data_dir = tmp.path().join("data");
        let cache_dir = tmp.path().join("cache");
        TestEnv {
            host,
            tmp,
            bin_dir,
            data_dir,
            cache_dir,
        }
    }

    /// A fresh container namespace.
    pub fn container(&self) -> Netns {
        Netns::new("c")
    }

    /// A plugin call to cnibox's applet `name`, run inside the host namespace.
    pub fn call(&self, applet: &str) -> Call {
        Call::new(self.bin_dir.join(applet), &self.host, self.bin_dir.to_str().unwrap())
    }

    /// A run of cnibox's tool applet `name` (e.g. `cnitool`) inside the host namespace; add
    /// arguments with `.args(…)` and variables with `.env(…)`.
    pub fn tool(&self, name: &str) -> Call {
        self.call(name)
    }

    /// `cnitool VERB NETWORK NETNS` with the network configs of `conf_dir` and this test's
    /// bin dir and cache dir; add more with `.env(…)` (e.g. `CAP_ARGS`), then `.run()`.
    pub fn cnitool(&self, conf_dir: &Path, verb: &str, network: &str, netns: &str) -> Call {
        self.tool("cnitool")
            .args([verb, network, netns])
            .env("NETCONFPATH", conf_dir.to_str().unwrap())
            .env("CNI_PATH", self.bin_dir.to_str().unwrap())
            .env("CNI_CACHE_DIR", self.cache_dir.to_str().unwrap())
    }

    /// A plugin call to a Go reference plugin (run inside the host namespace, with the
    /// reference dir as CNI_PATH so it delegates to the reference host-local).
    pub fn reference(&self, plugin: &str) -> Option<Call> {
        let dir = reference_dir()?;
        Some(Call::new(dir.join(plugin), &self.host, dir.to_str().unwrap()))
    }

    /// Files in `<data_dir>/<network>`, name → content.
    pub fn store(&self, network: &str) -> BTreeMap<String, String> {
        read_dir_map(&self.data_dir.join(network))
    }
}

pub fn read_dir_map(dir: &Path) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let content = std::fs::read(e.path())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            m.insert(e.file_name().to_string_lossy().into_owned(), content);
        }
    }
    m
}

/// A builder for one CNI plugin invocation.
pub struct Call {
    program: PathBuf,
    ns_path: PathBuf,
    env: BTreeMap<String, String>,
    args: Vec<String>,
    stdin: Vec<u8>,
    /// Mounts made in a private mount namespace of the call only.
    mounts: Vec<PrivateMount>,
    /// A seccomp filter the call runs under ([`Call::refusing_ioctl`]).
    seccomp: Vec<libc::sock_filter>,
}

/// A mount a test makes for one process, in a private mount namespace of its own, so the
/// machine's view (its /etc, its boot ID, its tools) never changes.
#[derive(Clone, Debug)]
pub enum PrivateMount {
    /// An empty tmpfs over a directory.
    Tmpfs(std::ffi::CString),
    /// `from` bind-mounted over `to` (a file over a file, a directory over a directory).
    Bind {
        from: std::ffi::CString,
        to: std::ffi::CString,
    },
    /// `from` bind-mounted over `to` with every mount below `from` (a namespace file under
    /// /run/netns is one).
    BindTree {
        from: std::ffi::CString,
        to: std::ffi::CString,
    },
    /// A read-only overlay of `upper` over the directory `on`: `on` shows its own
    /// content plus (in front of it) `upper`'s; nothing is written to either.
    Overlay {
        on: std::ffi::CString,
        options: std::ffi::CString,
    },
    /// A new sysfs on /sys (the old one detached): its /sys/class/net and every device's
    /// `net` directory list the links of the process's network namespace, as under
    /// `ip netns exec`.
    Sysfs,
}

impl PrivateMount {
    fn c(p: impl AsRef<std::ffi::OsStr>) -> std::ffi::CString {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::CString::new(p.as_ref().as_bytes()).unwrap()
    }

    pub fn tmpfs(dir: &str) -> PrivateMount {
        PrivateMount::Tmpfs(Self::c(dir))
    }

    pub fn bind(from: &Path, to: &str) -> PrivateMount {
        PrivateMount::Bind {
            from: Self::c(from),
            to: Self::c(to),
        }
    }

    pub fn bind_tree(from: &Path, to: &Path) -> PrivateMount {
        PrivateMount::BindTree {
            from: Self::c(from),
            to: Self::c(to),
        }
    }

    pub fn overlay(upper: &Path, on: &str) -> PrivateMount {
        PrivateMount::Overlay {
            on: Self::c(on),
            options: Self::c(format!("lowerdir={}:{on}", upper.display())),
        }
    }

    /// A simulated boot: the file `id_file` over the kernel's boot ID.
    pub fn boot_id(id_file: &Path) -> PrivateMount {
        Self::bind(id_file, BOOT_ID)
    }
}

/// Where the kernel publishes the boot ID, which a reboot changes.
pub const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// Makes `c` run in a private mount namespace with `mounts` made in it (after `setns` into
/// `netns`, when given).
pub fn with_private_mounts(c: &mut Command, netns: Option<File>, mounts: Vec<PrivateMount>) {
    // SAFETY: between fork and exec the closure only calls setns(2), unshare(2), mount(2)
    // and umount2(2) on strings prepared before the fork: async-signal-safe, no allocation.
    unsafe {
        c.pre_exec(move || {
            use nix::mount::{mount, MsFlags};
            if let Some(fd) = &netns {
                nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
            }
            if mounts.is_empty() {
                return Ok(());
            }
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
            mount(
                None::<&str>,
                c"/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )?;
            for m in &mounts {
                match m {
                    PrivateMount::Tmpfs(dir) => mount(
                        Some(c"tmpfs"),
                        dir.as_c_str(),
                        Some(c"tmpfs"),
                        MsFlags::empty(),
                        None::<&str>,
                    )?,
                    PrivateMount::Bind { from, to } => mount(
                        Some(from.as_c_str()),
                        to.as_c_str(),
                        None::<&str>,
                        MsFlags::MS_BIND,
                        None::<&str>,
                    )?,
                    PrivateMount::BindTree { from, to } => mount(
                        Some(from.as_c_str()),
                        to.as_c_str(),
                        None::<&str>,
                        MsFlags::MS_BIND | MsFlags::MS_REC,
                        None::<&str>,
                    )?,
                    PrivateMount::Overlay { on, options } => mount(
                        Some(c"overlay"),
                        on.as_c_str(),
                        Some(c"overlay"),
                        MsFlags::MS_RDONLY,
                        Some(options.as_c_str()),
                    )?,
                    PrivateMount::Sysfs => {
                        nix::mount::umount2(c"/sys", nix::mount::MntFlags::MNT_DETACH)?;
                        mount(Some(c"sysfs"), c"/sys", Some(c"sysfs"), MsFlags::empty(), None::<&str>)?
                    }
                }
            }
            Ok(())
        });
    }
}

/// A file holding a boot ID for [`PrivateMount::boot_id`]: `n` picks one of a few fixed
/// IDs (boot 0, boot 1, …), written once into the test's temp dir.
pub fn boot_id_file(dir: &Path, n: u8) -> PathBuf {
    let path = dir.join(format!("boot-id-{n}"));
    std::fs::write(&path, format!("{n:08x}-0000-4000-8000-{n:012x}\n")).unwrap();
    path
}

/// Where nft, iptables and the other firewall tools live; hidden by
/// [`Call::without_sbin_tools`]. (`/sbin` is a symlink to `/usr/sbin` here.)
pub const SBIN_DIRS: &[&str] = &["/usr/sbin", "/usr/local/sbin"];

/// The error of a plugin that needs iptables tool `tool` (e.g. `ip6tables-restore`) for
/// `ipMasq` on a machine without it.
pub fn missing_iptables_message(tool: &str) -> String {
    format!(
        "set up {} masquerade: {tool} is needed and was not found in PATH or /usr/sbin, /sbin, \
         /usr/local/sbin (install the iptables package)",
        tool.trim_end_matches("-restore")
    )
}

/// What a plugin call returned.
#[derive(Debug)]
pub struct CallOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CallOutput {
    pub fn ok(&self) -> bool {
        self.code == 0
    }

    /// stdout as JSON (panics with the whole output if it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// Assert success and return the result JSON (or Null for empty stdout).
    pub fn success(&self) -> serde_json::Value {
        assert_eq!(self.code, 0, "plugin failed: {self:?}");
        if self.stdout.trim().is_empty() {
            serde_json::Value::Null
        } else {
            self.json()
        }
    }

    /// (code, msg) of a failure, (0, "") of a success: to compare two plugins' answers.
    pub fn answer(&self) -> (u64, String) {
        if self.ok() {
            return (0, String::new());
        }
        let j = self.json();
        (
            j["code"].as_u64().unwrap_or(0),
            j["msg"].as_str().unwrap_or_default().to_string(),
        )
    }

    /// Assert failure with `code` and return the error message.
    pub fn failure(&self, code: u64) -> String {
        assert_ne!(self.code, 0, "plugin unexpectedly succeeded: {self:?}");
        let j = self.json();
        assert_eq!(j["code"].as_u64(), Some(code), "wrong error code: {self:?}");
        j["msg"].as_str().unwrap_or_default().to_string()
    }
}

impl Call {
    fn new(program: PathBuf, host: &Netns, cni_path: &str) -> Call {
        let mut env = BTreeMap::new();
        env.insert("CNI_PATH".into(), cni_path.to_string());
        Call {
            program,
            ns_path: host.path.clone(),
            env,
            args: vec![],
            stdin: vec![],
            mounts: vec![],
            seccomp: vec![],
        }
    }

    /// Run with a sysfs of the call's network namespace on /sys (in a private mount
    /// namespace of this call, as `ip netns exec` does): /sys/class/net and every device's
    /// `net` directory then list that namespace's links, not the machine's.
    pub fn with_own_sysfs(self) -> Self {
        self.mount(PrivateMount::Sysfs)
    }

    /// Run with the kernel refusing ioctl `request` with `errno` (a seccomp filter on the
    /// call's process only).
    pub fn refusing_ioctl(mut self, request: libc::Ioctl, errno: i32) -> Self {
        self.seccomp = seccomp::refuse_ioctl(request, errno);
        self
    }

    /// Run as on a machine without nft, iptables and every other tool of the sbin
    /// directories: they are covered by empty tmpfs mounts in a private mount namespace of
    /// this call only (nothing is removed from the machine).
    pub fn without_sbin_tools(mut self) -> Self {
        self.mounts.extend(SBIN_DIRS.iter().map(|d| PrivateMount::tmpfs(d)));
        self
    }

    /// Run with `m` made in a private mount namespace of this call only.
    pub fn mount(mut self, m: PrivateMount) -> Self {
        self.mounts.push(m);
        self
    }

    /// Run as in another boot: the boot ID file `id_file` (see [`boot_id_file`]) over the
    /// kernel's, in a private mount namespace of this call.
    pub fn in_boot(self, id_file: &Path) -> Self {
        self.mount(PrivateMount::boot_id(id_file))
    }

    /// Command-line arguments (for tools such as `cnitool`).
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<str>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_string()));
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.insert(k.into(), v.into());
        self
    }

    pub fn command(self, c: &str) -> Self {
        self.env("CNI_COMMAND", c)
    }

    /// ADD/DEL/CHECK with the usual variables.
    pub fn verb(self, verb: &str, container_id: &str, netns: &str, ifname: &str) -> Self {
        self.command(verb)
            .env("CNI_CONTAINERID", container_id)
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", ifname)
    }

    /// ADD/DEL/CHECK with the usual variables and `conf` on stdin, run.
    pub fn exec(
        self,
        verb: &str,
        container_id: &str,
        netns: &str,
        ifname: &str,
        conf: &serde_json::Value,
    ) -> CallOutput {
        self.verb(verb, container_id, netns, ifname).config(conf).run()
    }

    pub fn stdin(mut self, s: impl Into<Vec<u8>>) -> Self {
        self.stdin = s.into();
        self
    }

    pub fn config(self, v: &serde_json::Value) -> Self {
        self.stdin(serde_json::to_vec(v).unwrap())
    }

    pub fn run(self) -> CallOutput {
        self.run_under(&[])
    }

    /// Run under a wrapper program (`strace -f …`): `wrapper… PROGRAM ARGS…`, same
    /// environment and namespace.
    pub fn run_under(self, wrapper: &[&str]) -> CallOutput {
        use std::io::Write;
        let fd = File::open(&self.ns_path).unwrap();
        let mut c = match wrapper.split_first() {
            None => Command::new(&self.program),
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&self.program);
                c
            }
        };
        c.args(&self.args);
        c.env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .envs(&self.env);
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        with_private_mounts(&mut c, Some(fd), self.mounts.clone());
        let filter = self.seccomp.clone();
        if !filter.is_empty() {
            // SAFETY: after the namespaces and mounts (pre_exec closures run in order), the
            // closure only calls prctl(2) on a filter prepared before the fork.
            unsafe {
                c.pre_exec(move || seccomp::install(&filter));
            }
        }
        let mut child = c.spawn().unwrap_or_else(|e| panic!("spawn {:?}: {e}", self.program));
        let mut stdin = child.stdin.take().unwrap();
        let data = self.stdin.clone();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&data);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        CallOutput {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// The libcni test runtime built from tests/interop/libcni_tool.go against Debian's
/// golang-github-appc-cni-dev (libcni 1.1.2), or None (with the reason printed) without Go.
pub fn libcni_tool(dir: &Path) -> Option<PathBuf> {
    go_tool(
        dir,
        "libcni_tool",
        Some((
            "github.com/containernetworking/cni/libcni",
            "golang-github-appc-cni-dev",
        )),
    )
}

/// containerd's CRI as a CNI client, built from tests/interop/gocni_tool.go against
/// Debian's golang-github-containerd-go-cni-dev (go-cni 1.1.7 on libcni 1.1.2), or None
/// (with the reason printed) without Go.
pub fn gocni_tool(dir: &Path) -> Option<PathBuf> {
    go_tool(
        dir,
        "gocni_tool",
        Some(("github.com/containerd/go-cni", "golang-github-containerd-go-cni-dev")),
    )
}

/// Go's regexp as the reference tuning plugin uses it, built from
/// tests/interop/regexp_oracle.go (the standard library only), or None (with the reason
/// printed) without Go.
pub fn regexp_oracle(dir: &Path) -> Option<PathBuf> {
    go_tool(dir, "regexp_oracle", None)
}

/// `tests/interop/<name>.go` built into `dir` offline, from the Go sources Debian installs
/// under /usr/share/gocode (`library`: the import path it needs, from package `package`).
fn go_tool(dir: &Path, name: &str, library: Option<(&str, &str)>) -> Option<PathBuf> {
    let go_ok = Command::new("go")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !go_ok {
        let package = library.map_or("", |(_, package)| package);
        eprintln!("SKIP: Go is not installed (apt-get install golang-go {package})");
        return None;
    }
    let gopath = Path::new("/usr/share/gocode");
    if let Some((library, package)) = library {
        assert!(
            gopath.join("src").join(library).is_dir(),
            "Go is installed but {library} is not: apt-get install {package}"
        );
    }
    let out = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/interop/{name}.go"));
    let build = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(&src)
        .env("GO111MODULE", "off")
        .env("GOPATH", gopath)
        .env("GOFLAGS", "")
        .env("GOCACHE", Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-cache"))
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "go build of {name} failed: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    Some(out)
}
