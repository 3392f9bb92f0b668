//! portmap's test world: a node (the test's private host namespace) with a bridge network
//! for containers (made by cnibox's bridge + host-local), a client namespace outside the
//! node connected to it by a veth (`ext0` 192.168.77.1 / fd77::1 on the node, the client at
//! .2 / ::2), and tiny TCP/UDP servers and clients run on threads that entered a test
//! namespace. No packet leaves the namespaces the test made.
#![allow(dead_code)]

use crate::common::{run_ok, CallOutput, Netns, TestEnv};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub const NET: &str = "pmnet";
pub const IFNAME: &str = "eth0";
pub const NODE_V4: &str = "192.168.77.1";
pub const NODE_V6: &str = "fd77::1";
pub const CLIENT_V4: &str = "192.168.77.2";
pub const BRIDGE: &str = "cni-pm0";

/// The backends every traffic test runs with.
pub const BACKENDS: &[&str] = &["iptables", "nftables"];

/// The node, a client outside it, and the reference dir when a test wants it.
pub struct Node {
    pub env: TestEnv,
    pub client: Netns,
}

impl Node {
    pub fn new() -> Node {
        let env = TestEnv::new();
        let client = Netns::new("x");
        env.host.ip(&[
            "link",
            "add",
            "ext0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &client.name,
        ]);
        env.host.ip(&["addr", "add", &format!("{NODE_V4}/24"), "dev", "ext0"]);
        env.host
            .ip(&["addr", "add", &format!("{NODE_V6}/64"), "dev", "ext0", "nodad"]);
        env.host.ip(&["link", "set", "ext0", "up"]);
        client.ip(&["addr", "add", &format!("{CLIENT_V4}/24"), "dev", "eth0"]);
        client.ip(&["addr", "add", "fd77::2/64", "dev", "eth0", "nodad"]);
        client.ip(&["link", "set", "eth0", "up"]);
        Node { env, client }
    }

    /// The bridge network config (IPv4, or dual-stack with `v6`).
    pub fn bridge_conf(&self, v6: bool) -> Value {
        let mut ranges = vec![json!([{"subnet": "10.88.0.0/24"}])];
        let mut routes = vec![json!({"dst": "0.0.0.0/0"})];
        if v6 {
            ranges.push(json!([{"subnet": "fd88::/64"}]));
            routes.push(json!({"dst": "::/0"}));
        }
        json!({
            "cniVersion": "1.0.0",
            "name": NET,
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "hairpinMode": true,
            // as podman's networks: also makes the node track connections from the start
            "ipMasq": true,
            "ipam": {"type": "host-local", "dataDir": self.env.data_dir, "ranges": ranges, "routes": routes},
        })
    }

    /// A container attached to the bridge; returns its namespace and the bridge's result.
    pub fn container(&self, id: &str, v6: bool) -> (Netns, Value) {
        let ns = self.env.container();
        let r = self.attach(id, &ns, IFNAME, v6);
        (ns, r)
    }

    /// Attach the container `id` in `ns` to the bridge as `ifname` (a second interface on
    /// the same network, when it has one); the bridge's result.
    pub fn attach(&self, id: &str, ns: &Netns, ifname: &str, v6: bool) -> Value {
        let r = self
            .env
            .call("bridge")
            .exec("ADD", id, ns.path_str(), ifname, &self.bridge_conf(v6))
            .success();
        if v6 {
            // DAD on the container's and the gateway's addresses
            wait_v6_ready(ns);
            wait_v6_ready(&self.env.host);
        }
        r
    }

    pub fn portmap(&self, side: Side) -> crate::common::Call {
        match side {
            Side::Cnibox => self.env.call("portmap"),
            Side::Reference => self.env.reference("portmap").expect("reference plugins installed"),
        }
    }

    /// One portmap call.
    pub fn pm(&self, side: Side, verb: &str, id: &str, netns: &str, conf: &Value) -> CallOutput {
        self.portmap(side).exec(verb, id, netns, IFNAME, conf)
    }

    pub fn ipt_nat(&self) -> String {
        iptables_state(&self.env.host)
    }

    pub fn nft_tables(&self) -> String {
        nft_portmap_tables(&self.env.host)
    }
}

/// Which implementation runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Side {
    Reference,
    Cnibox,
}

/// The portmap config chained after `prev`.
pub fn pm_conf(backend: Option<&str>, mappings: Value, prev: &Value, extra: Value) -> Value {
    let mut c = json!({
        "cniVersion": "1.0.0",
        "name": NET,
        "type": "portmap",
        "runtimeConfig": {"portMappings": mappings},
        "prevResult": prev,
    });
    if let Some(b) = backend {
        c["backend"] = json!(b);
    }
    if let (Some(o), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    c
}

/// The container's first address of a family in a result.
pub fn result_ip(r: &Value, v6: bool) -> IpAddr {
    r["ips"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|ip| ip["address"].as_str())
        .map(|a| a.split('/').next().unwrap().parse::<IpAddr>().unwrap())
        .find(|a| a.is_ipv6() == v6)
        .expect("result has an address of the family")
}

/// Waits (up to 5 s) until no IPv6 address of `ns` is tentative (DAD done).
pub fn wait_v6_ready(ns: &Netns) {
    for _ in 0..100 {
        let out = ns.ip(&["-6", "addr", "show", "tentative"]);
        if out.trim().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `iptables-save -t nat` of both families without comments and counters, in order.
pub fn iptables_state(ns: &Netns) -> String {
    let mut out = String::new();
    for tool in ["iptables-save", "ip6tables-save"] {
        let o = ns.command(tool).args(["-t", "nat"]).output().unwrap();
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            if l.starts_with('#') {
                continue;
            }
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// `nft list table` of both portmap tables (empty when absent).
pub fn nft_portmap_tables(ns: &Netns) -> String {
    let mut out = String::new();
    for fam in ["ip", "ip6"] {
        let o = ns
            .command("nft")
            .args(["list", "table", fam, "cni_hostport"])
            .output()
            .unwrap();
        out.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    out
}

/// Run `f` on a thread that entered `ns` (sockets it makes live there).
pub fn in_ns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let fd = std::fs::File::open(&ns.path).unwrap();
    std::thread::spawn(move || {
        nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
}

/// A server in a container: answers every TCP connection on `port` and every UDP datagram
/// on `port` with `name`, on IPv4 and IPv6 (one dual-stack socket each, `[::]:port`),
/// until dropped.
pub struct Server {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    pub fn start(ns: &Netns, port: u16, name: &str) -> Server {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let sa = SocketAddr::new("::".parse().unwrap(), port);
        let mut threads = vec![];
        let (reply, stop2, tx2) = (name.to_string(), stop.clone(), tx.clone());
        threads.push(in_ns(ns, move || {
            let l = TcpListener::bind(sa).expect("bind tcp");
            l.set_nonblocking(true).unwrap();
            tx2.send(()).unwrap();
            while !stop2.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.write_all(reply.as_bytes());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }));
        let (reply, stop2) = (name.to_string(), stop.clone());
        threads.push(in_ns(ns, move || {
            let u = UdpSocket::bind(sa).expect("bind udp");
            u.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            tx.send(()).unwrap();
            let mut buf = [0u8; 256];
            while !stop2.load(Ordering::SeqCst) {
                if let Ok((_, from)) = u.recv_from(&mut buf) {
                    let _ = u.send_to(reply.as_bytes(), from);
                }
            }
        }));
        for _ in 0..2 {
            rx.recv_timeout(Duration::from_secs(5)).expect("server ready");
        }
        Server { stop, threads }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Connect from `ns` to `to` over TCP; what the server said, or None (no answer in 2 s).
pub fn tcp_get(ns: &Netns, to: SocketAddr) -> Option<String> {
    in_ns(ns, move || {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    })
    .join()
    .unwrap()
}

/// A UDP client bound in `ns` (a fixed source port, so it keeps its conntrack flow).
pub struct UdpClient {
    sock: Arc<UdpSocket>,
}

impl UdpClient {
    pub fn new(ns: &Netns, v6: bool) -> UdpClient {
        let bind: SocketAddr = if v6 { "[::]:0" } else { "0.0.0.0:0" }.parse().unwrap();
        let sock = in_ns(ns, move || UdpSocket::bind(bind).unwrap()).join().unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        UdpClient { sock: Arc::new(sock) }
    }

    /// Send a datagram to `to` and wait briefly for an answer.
    pub fn ask(&self, to: SocketAddr) -> Option<String> {
        for _ in 0..3 {
            let _ = self.sock.send_to(b"hello", to);
            let mut buf = [0u8; 256];
            if let Ok((n, _)) = self.sock.recv_from(&mut buf) {
                return Some(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
        None
    }
}

pub fn sa(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), port)
}

pub fn sa_ip(ip: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(ip, port)
}

/// Whether nf_tables works in this kernel (the nftables backend's tests need it).
pub fn have_nft(ns: &Netns) -> bool {
    Command::new("nft").arg("--version").output().is_ok() && {
        let o = ns.command("nft").args(["list", "tables"]).output().unwrap();
        o.status.success()
    }
}

pub fn sh(ns: &Netns, cmd: &str) -> String {
    let mut c = ns.command("sh");
    c.args(["-c", cmd]);
    run_ok(&mut c)
}
