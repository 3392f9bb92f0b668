//! The dhcp IPAM applet and its daemon against real DHCP servers: Debian's dnsmasq and
//! busybox's udhcpd, each serving a "LAN" namespace, reached from the test's host namespace
//! through a macvlan master or through a bridge with a veth uplink. The servers and the
//! daemons run in their own network and mount namespaces with every path in the test's
//! temp dir, and are ended by PID. No packet leaves the test's namespaces.
//!
//! [`Lan`] is the world: `behaviour` has cnibox's own tests (leases in the server's file,
//! renewals, rebinding, a NAK, two containers, no server, the daemon restarted, every spec
//! version, the DEL matrix), `differential` the reference's plugin and daemon beside
//! cnibox's on the same server, and each with the other's.
mod behaviour;
mod differential;

use crate::common::{self, CallOutput, Netns, TestEnv};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The LAN: the server is `.1`, addresses come from `.10`–`.250` (udhcpd: `.100`–`.150`).
pub const NET: &str = "10.77.0";
pub const SERVER: &str = "10.77.0.1";
pub const NETWORK: &str = "lan";
/// The host end of the LAN's veth: a macvlan master, or enslaved to [`BRIDGE`].
pub const UPLINK: &str = "up0";
pub const BRIDGE: &str = "br0";
/// cnibox's daemon's flags: quick retransmissions; acquiring for ADD gives up after 10 s.
pub const DAEMON: &[&str] = &["-timeout", "1s", "-resendmax", "2s", "-resendtimeout", "10s"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uplink {
    Macvlan,
    Bridge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    Dnsmasq,
    Udhcpd,
}

/// How a server is configured.
#[derive(Debug, Clone)]
pub struct ServerOpts {
    pub lease: u32,
    /// Option 58 / 59 (dnsmasq only; udhcpd sends none and the client takes 50 % / 85 %).
    /// dnsmasq sends a T1 of 3 s or more as given, and its own for less.
    pub t1: Option<u32>,
    pub t2: Option<u32>,
    /// The range's first and last host number.
    pub range: (u8, u8),
    /// More dnsmasq arguments.
    pub extra: Vec<String>,
}

impl Default for ServerOpts {
    fn default() -> Self {
        ServerOpts {
            lease: 600,
            t1: None,
            t2: None,
            range: (10, 250),
            extra: vec![],
        }
    }
}

/// A lease as the server's lease file shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLease {
    pub mac: String,
    pub ip: String,
    /// `*` when none.
    pub hostname: String,
    /// dnsmasq's client identifier (hex bytes); udhcpd keeps none.
    pub client_id: String,
    /// Seconds since the epoch (dnsmasq), or left (udhcpd); 0 when expired.
    pub expires: u64,
}

struct Server {
    kind: ServerKind,
    child: Child,
}

/// Which daemon serves the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Cnibox,
    Reference,
}

struct Daemon {
    child: Child,
}

pub struct Lan {
    pub env: TestEnv,
    pub lan: Netns,
    pub uplink: Uplink,
    server: Option<Server>,
    daemon: Option<Daemon>,
    /// Daemon runs so far (each logs to its own file).
    runs: usize,
}

/// Polls `cond` every 50 ms until it holds or `within` passes; panics with `what` and the
/// last reason.
pub fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> Result<(), String>) {
    let end = Instant::now() + within;
    loop {
        match cond() {
            Ok(()) => return,
            Err(why) if Instant::now() > end => panic!("timed out waiting for {what}: {why}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn end_by_pid(child: &mut Child, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, signal);
    let end = Instant::now() + Duration::from_secs(10);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Lan {
    pub fn new(uplink: Uplink) -> Lan {
        common::require_root();
        let env = TestEnv::new();
        let lan = Netns::new("lan");
        env.host.ip(&[
            "link", "add", UPLINK, "type", "veth", "peer", "name", "srv0", "netns", &lan.name,
        ]);
        lan.ip(&["addr", "add", &format!("{SERVER}/24"), "dev", "srv0"]);
        lan.ip(&["link", "set", "srv0", "up"]);
        if uplink == Uplink::Bridge {
            env.host.ip(&["link", "add", BRIDGE, "type", "bridge"]);
            env.host.ip(&["link", "set", UPLINK, "master", BRIDGE]);
            env.host.ip(&["link", "set", BRIDGE, "up"]);
        }
        env.host.ip(&["link", "set", UPLINK, "up"]);
        Lan {
            env,
            lan,
            uplink,
            server: None,
            daemon: None,
            runs: 0,
        }
    }

    pub fn path(&self, leaf: &str) -> PathBuf {
        self.env.tmp.path().join(leaf)
    }

    pub fn start_server(&mut self, kind: ServerKind, opts: &ServerOpts) {
        self.stop_server();
        let (lo, hi) = opts.range;
        let log = std::fs::File::create(self.path(&format!("{kind:?}.out"))).unwrap();
        let mut c = self.lan.command("unshare");
        c.args(["-m", "--propagation", "private"]);
        match kind {
            ServerKind::Dnsmasq => {
                let p = |leaf: &str| self.path(leaf).display().to_string();
                c.args(["dnsmasq", "--keep-in-foreground", "--port=0", "--conf-file=/dev/null"])
                    .args(["--interface=srv0", "--bind-interfaces", "--user=root", "--no-ping"])
                    .args(["--dhcp-authoritative", "--log-dhcp"])
                    .arg(format!(
                        "--dhcp-range={NET}.{lo},{NET}.{hi},255.255.255.0,{}s",
                        opts.lease
                    ))
                    .arg(format!("--dhcp-leasefile={}", p("dnsmasq.leases")))
                    .arg(format!("--pid-file={}", p("dnsmasq.pid")))
                    .arg(format!("--log-facility={}", p("dnsmasq.log")));
                if let Some(t1) = opts.t1 {
                    c.arg(format!("--dhcp-option=option:T1,{t1}"));
                }
                if let Some(t2) = opts.t2 {
                    c.arg(format!("--dhcp-option=option:T2,{t2}"));
                }
                c.args(&opts.extra);
            }
            ServerKind::Udhcpd => {
                let conf = format!(
                    "start {NET}.{lo}\nend {NET}.{hi}\ninterface srv0\nlease_file {}\npidfile {}\n\
                     auto_time 1\nmin_lease 1\noption subnet 255.255.255.0\noption router {SERVER}\n\
                     option lease {}\n",
                    self.path("udhcpd.leases").display(),
                    self.path("udhcpd.pid").display(),
                    opts.lease
                );
                std::fs::write(self.path("udhcpd.conf"), conf).unwrap();
                let leases = self.path("udhcpd.leases");
                if !leases.exists() {
                    std::fs::write(&leases, "").unwrap();
                }
                c.args(["busybox", "udhcpd", "-f", "-a", "100"])
                    .arg(self.path("udhcpd.conf"));
            }
        }
        c.stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        let child = c.spawn().unwrap_or_else(|e| panic!("start {kind:?}: {e}"));
        self.server = Some(Server { kind, child });
        // listening once it has said so
        wait_until(Duration::from_secs(10), &format!("{kind:?} to start"), || {
            let read = |leaf: &str| std::fs::read_to_string(self.path(leaf)).unwrap_or_default();
            // dnsmasq says it in its log file, udhcpd on stderr
            let out = read(&format!("{kind:?}.out")) + &read("dnsmasq.log");
            match out.contains("started") {
                true => Ok(()),
                false => Err(out),
            }
        });
    }

    pub fn stop_server(&mut self) {
        if let Some(mut s) = self.server.take() {
            end_by_pid(&mut s.child, nix::sys::signal::Signal::SIGTERM);
        }
    }

    /// The server's leases, from its lease file (udhcpd writes it every second).
    pub fn leases(&self) -> Vec<ServerLease> {
        match self.server.as_ref().map(|s| s.kind) {
            Some(ServerKind::Dnsmasq) | None => std::fs::read_to_string(self.path("dnsmasq.leases"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.len() >= 5).then(|| ServerLease {
                        expires: f[0].parse().unwrap_or(0),
                        mac: f[1].into(),
                        ip: f[2].into(),
                        hostname: f[3].into(),
                        client_id: f[4].into(),
                    })
                })
                .collect(),
            Some(ServerKind::Udhcpd) => {
                // udhcpd rewrites the file every second: a read in the middle is short
                let mut out = String::new();
                for _ in 0..20 {
                    let o = Command::new("busybox")
                        .args(["dumpleases", "-f"])
                        .arg(self.path("udhcpd.leases"))
                        .output()
                        .unwrap();
                    if o.status.success() {
                        out = String::from_utf8_lossy(&o.stdout).into_owned();
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                out.lines()
                    .skip(1)
                    .filter_map(|l| {
                        let f: Vec<&str> = l.split_whitespace().collect();
                        let left = *f.last()?;
                        Some(ServerLease {
                            mac: f.first()?.to_string(),
                            ip: f.get(1)?.to_string(),
                            hostname: if f.len() > 3 { f[2].into() } else { "*".into() },
                            client_id: String::new(),
                            expires: match left {
                                "expired" => 0,
                                t => t.split(':').fold(0, |acc, n| acc * 60 + n.parse::<u64>().unwrap_or(0)),
                            },
                        })
                    })
                    .collect()
            }
        }
    }

    /// The unexpired lease of `ip`, if the server holds one.
    pub fn lease_of(&self, ip: &str) -> Option<ServerLease> {
        self.leases().into_iter().find(|l| l.ip == ip && l.expires > 0)
    }

    /// Waits until the server holds no unexpired lease of `ip` (panics after 5 s).
    pub fn wait_released(&self, ip: &str) {
        wait_until(
            Duration::from_secs(5),
            &format!("{ip} released on the server"),
            || match self.lease_of(ip) {
                None => Ok(()),
                Some(l) => Err(format!("{l:?}")),
            },
        );
    }

    /// The client identifier dnsmasq records for an attachment (type 0, then the ID).
    pub fn client_id_hex(id: &str) -> String {
        std::iter::once(0u8)
            .chain(id.bytes())
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    }

    pub fn socket(&self) -> PathBuf {
        self.path("dhcp.sock")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.path("dhcp.leases")
    }

    /// Starts a daemon on [`Lan::socket`] (cnibox's with its state in the temp dir), in a
    /// mount namespace of its own whose mounts follow the host's (the namespaces the tests
    /// create later must show in it). Waits until it answers.
    pub fn start_daemon(&mut self, which: Which, args: &[&str]) {
        assert!(self.daemon.is_none(), "a daemon runs already");
        self.runs += 1;
        let log = std::fs::File::create(self.path(&format!("daemon{}.log", self.runs))).unwrap();
        let mut c = self.env.host.command("unshare");
        c.args(["-m", "--propagation", "slave"]);
        match which {
            Which::Cnibox => {
                c.arg(common::cnibox())
                    .args(["dhcp", "daemon", "-statedir"])
                    .arg(self.state_dir());
            }
            Which::Reference => {
                c.arg("/usr/lib/cni/dhcp").arg("daemon");
            }
        }
        c.arg("-socketpath")
            .arg(self.socket())
            .arg("-pidfile")
            .arg(self.path("dhcp.pid"));
        c.args(args);
        c.env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = c.spawn().expect("start the dhcp daemon");
        let socket = self.socket();
        self.daemon = Some(Daemon { child });
        wait_until(Duration::from_secs(10), "the daemon's socket", || {
            std::os::unix::net::UnixStream::connect(&socket)
                .map(drop)
                .map_err(|e| format!("{e}; log: {}", self.daemon_log()))
        });
        // cnibox's daemon binds its socket before it restores its records, and says it
        // listens once they are restored (slow under qemu-user: the log lagged the socket)
        if which == Which::Cnibox {
            let this_run = self.path(&format!("daemon{}.log", self.runs));
            wait_until(Duration::from_secs(10), "the daemon's start line", || {
                let log = std::fs::read_to_string(&this_run).unwrap_or_default();
                match log.contains("dhcp daemon (cnibox) listening on") {
                    true => Ok(()),
                    false => Err(log),
                }
            });
        }
    }

    /// Ends the daemon with `signal` (SIGKILL: as a crash).
    pub fn stop_daemon(&mut self, signal: nix::sys::signal::Signal) {
        if let Some(mut d) = self.daemon.take() {
            end_by_pid(&mut d.child, signal);
        }
    }

    pub fn daemon_pid(&self) -> i32 {
        self.daemon.as_ref().expect("a daemon").child.id() as i32
    }

    /// The daemon has not exited (a crashed child not yet reaped still has its `/proc`
    /// entry, so this asks `try_wait`).
    pub fn daemon_running(&mut self) -> bool {
        let d = self.daemon.as_mut().expect("a daemon");
        d.child.try_wait().expect("the daemon's status").is_none()
    }

    /// Every daemon log of this test, in order.
    pub fn daemon_log(&self) -> String {
        (1..=self.runs)
            .map(|n| std::fs::read_to_string(self.path(&format!("daemon{n}.log"))).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("")
    }

    /// What the server logged (dnsmasq's log file, udhcpd's stderr), for failures.
    pub fn server_log(&self) -> String {
        let read = |leaf: &str| std::fs::read_to_string(self.path(leaf)).unwrap_or_default();
        read("dnsmasq.log") + &read("Udhcpd.out")
    }

    /// Lines of the daemon's log that mention `id`.
    pub fn log_of(&self, id: &str) -> Vec<String> {
        self.daemon_log()
            .lines()
            .filter(|l| l.contains(id))
            .map(str::to_string)
            .collect()
    }

    /// The lease records of cnibox's daemon.
    pub fn records(&self) -> Vec<String> {
        std::fs::read_dir(self.state_dir())
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The network config of the uplink's plugin with dhcp IPAM (`ipam` keys added).
    pub fn conf(&self, version: &str, ipam: Value) -> Value {
        let mut conf = match self.uplink {
            Uplink::Macvlan => json!({"type": "macvlan", "master": UPLINK, "mode": "bridge"}),
            Uplink::Bridge => json!({"type": "bridge", "bridge": BRIDGE}),
        };
        conf["cniVersion"] = json!(version);
        conf["name"] = json!(NETWORK);
        let mut i = json!({"type": "dhcp", "daemonSocketPath": self.socket()});
        for (k, v) in ipam.as_object().cloned().unwrap_or_default() {
            i[k] = v;
        }
        conf["ipam"] = i;
        conf
    }

    /// The uplink's plugin: cnibox's, or the reference's (which runs the reference's dhcp).
    pub fn plugin(&self, which: Which) -> common::Call {
        let name = match self.uplink {
            Uplink::Macvlan => "macvlan",
            Uplink::Bridge => "bridge",
        };
        match which {
            Which::Cnibox => self.env.call(name),
            Which::Reference => self.env.reference(name).expect("the reference plugins"),
        }
    }

    pub fn call(&self, verb: &str, id: &str, ns: &Netns, conf: &Value) -> CallOutput {
        self.plugin(Which::Cnibox).exec(verb, id, ns.path_str(), "eth0", conf)
    }

    /// `ip` of a result's first address (without its prefix).
    pub fn address_of(result: &Value) -> String {
        let ips = result["ips"].as_array().cloned().unwrap_or_default();
        let a = match ips.first() {
            Some(ip) => ip["address"].as_str().unwrap_or_default().to_string(),
            // 0.1.0 and 0.2.0: ip4.ip
            None => result["ip4"]["ip"].as_str().unwrap_or_default().to_string(),
        };
        a.split('/').next().unwrap().to_string()
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        self.stop_daemon(nix::sys::signal::Signal::SIGKILL);
        self.stop_server();
    }
}

/// A macvlan made by the test on the uplink, moved into `ns` as `eth0` with MAC `mac`: an
/// interface for the dhcp applet called directly, as a runtime's chain would leave it.
pub fn interface_in(lan: &Lan, ns: &Netns, mac: &str) {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let tmp = format!("dht{}", SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
    lan.env.host.ip(&[
        "link", "add", &tmp, "link", UPLINK, "address", mac, "type", "macvlan", "mode", "bridge",
    ]);
    lan.env.host.ip(&["link", "set", &tmp, "netns", &ns.name]);
    ns.ip(&["link", "set", &tmp, "name", "eth0"]);
}

/// A call of the dhcp applet itself (cnibox's or the reference's).
pub fn dhcp_call(lan: &Lan, which: Which) -> common::Call {
    match which {
        Which::Cnibox => lan.env.call("dhcp"),
        Which::Reference => lan.env.reference("dhcp").expect("the reference plugins"),
    }
}

/// The dhcp applet's own config (no main plugin), for direct calls.
pub fn ipam_conf(lan: &Lan, version: &str, ipam: Value) -> Value {
    let mut c = lan.conf(version, ipam);
    c["type"] = json!("dhcp");
    c
}

pub fn assert_path_gone(p: &Path) {
    assert!(!p.exists(), "{} is left", p.display());
}
