//! The plugin-daemon protocol, the reference's: Go's net/rpc over HTTP on the daemon's
//! unix socket. The client sends `CONNECT /_goRPC_ HTTP/1.0`, the server answers `200
//! Connected to Go RPC`, then each call is a gob-encoded `rpc.Request` header and a
//! `skel.CmdArgs`, each reply an `rpc.Response` header and the method's reply value (a
//! `current.Result` for `DHCP.Allocate`, an empty struct otherwise). Speaking it lets
//! cnibox's plugin use a reference daemon (a DaemonSet image, an older install) and the
//! reference's plugin use cnibox's daemon.
//!
//! [`Client`] is the plugin's blocking side; [`ServerConn`] is one connection of the
//! daemon, fed whatever bytes arrived and asked for complete calls, so the daemon's one
//! thread never blocks on a slow client.
use super::gob::{self, Def, Struct, Value, BYTES, INT, STRING, UINT};
use crate::cni::error::go_errno_text;
use crate::cni::netaddr;
use crate::cni::result::{Dns, IpConfig, Route};
use crate::cni::CniResult;
use ipnetwork::IpNetwork;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// What the plugin sends with every call (the reference's `skel.CmdArgs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CmdArgs {
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    pub args: String,
    pub path: String,
    pub stdin: Vec<u8>,
}

const CONNECT: &[u8] = b"CONNECT /_goRPC_ HTTP/1.0\n\n";
const CONNECTED: &[u8] = b"HTTP/1.0 200 Connected to Go RPC\n\n";
const MUST_CONNECT: &[u8] =
    b"HTTP/1.0 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n405 must CONNECT\n";
/// Longer request or response heads are refused.
const MAX_HEAD: usize = 4096;

// The type ids each side defines on a connection, once.
const REQUEST: i64 = 65;
const CMD_ARGS: i64 = 66;
const RESPONSE: i64 = 65;
const RESULT: i64 = 66;
const IP_CONFIGS: i64 = 67;
const IP_CONFIG: i64 = 68;
const ROUTES: i64 = 69;
const ROUTE: i64 = 70;
const IP_NET: i64 = 71;
const EMPTY: i64 = 72;

/// The reply value of a call: a result (`DHCP.Allocate`) or nothing.
pub type Reply = Option<CniResult>;

/// The end of the HTTP head in `buf`, once it is all there.
fn head_end(buf: &[u8]) -> Option<usize> {
    let at = |pat: &[u8]| buf.windows(pat.len()).position(|w| w == pat).map(|i| i + pat.len());
    match (at(b"\n\n"), at(b"\r\n\r\n")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The plugin's connection to the daemon.
pub struct Client {
    stream: UnixStream,
    decoder: gob::Decoder,
    pending: Vec<u8>,
    defined: bool,
    seq: u64,
}

/// Why a call failed: the daemon answered with an error, or the connection broke.
#[derive(Debug)]
pub enum CallError {
    Server(String),
    Broken(String),
}

impl Client {
    /// Connects and does the HTTP handshake; the error is Go's `rpc.DialHTTP` text.
    pub fn dial(path: &Path) -> Result<Client, String> {
        let p = path.display();
        let mut stream =
            UnixStream::connect(path).map_err(|e| format!("dial unix {p}: connect: {}", go_errno_text(&e)))?;
        let broken = |e: std::io::Error| format!("dial-http unix {p}: {}", go_errno_text(&e));
        stream.write_all(CONNECT).map_err(broken)?;
        let mut buf = Vec::new();
        let end = loop {
            if let Some(end) = head_end(&buf) {
                break end;
            }
            let mut chunk = [0u8; 512];
            let n = stream.read(&mut chunk).map_err(broken)?;
            if n == 0 || buf.len() > MAX_HEAD {
                return Err(format!("dial-http unix {p}: unexpected EOF"));
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..end]);
        let status = head
            .lines()
            .next()
            .and_then(|l| l.split_once(' '))
            .map_or("", |(_, s)| s);
        if status != "200 Connected to Go RPC" {
            return Err(format!("dial-http unix {p}: unexpected HTTP response: {status}"));
        }
        Ok(Client {
            stream,
            decoder: gob::Decoder::new(),
            pending: buf[end..].to_vec(),
            defined: false,
            seq: 0,
        })
    }

    /// Calls `method` with `args` and waits for the reply.
    pub fn call(&mut self, method: &str, args: &CmdArgs) -> Result<Value, CallError> {
        let broken = |e: std::io::Error| CallError::Broken(go_errno_text(&e));
        let mut out = Vec::new();
        if !self.defined {
            gob::define(
                &mut out,
                REQUEST,
                &Def::Struct("Request", &[("ServiceMethod", STRING), ("Seq", UINT)]),
            );
            gob::define(
                &mut out,
                CMD_ARGS,
                &Def::Struct(
                    "CmdArgs",
                    &[
                        ("ContainerID", STRING),
                        ("Netns", STRING),
                        ("IfName", STRING),
                        ("Args", STRING),
                        ("Path", STRING),
                        ("StdinData", BYTES),
                    ],
                ),
            );
            self.defined = true;
        }
        let seq = self.seq;
        self.seq += 1;
        let mut body = Vec::new();
        gob::put_int(&mut body, REQUEST);
        let mut header = Struct::new(&mut body);
        header.str(0, method.as_bytes());
        header.uint(1, seq);
        header.end();
        gob::put_message(&mut out, &body);
        body.clear();
        gob::put_int(&mut body, CMD_ARGS);
        let mut a = Struct::new(&mut body);
        for (n, s) in [&args.container_id, &args.netns, &args.ifname, &args.args, &args.path]
            .iter()
            .enumerate()
        {
            a.str(n as i64, s.as_bytes());
        }
        a.str(5, &args.stdin);
        a.end();
        gob::put_message(&mut out, &body);
        self.stream.write_all(&out).map_err(broken)?;

        let header = self.value()?;
        let reply = self.value()?;
        if header.int("Seq").unwrap_or(0) as u64 != seq {
            return Err(CallError::Broken("a reply to another call".into()));
        }
        match header.str("Error") {
            e if e.is_empty() => Ok(reply),
            e => Err(CallError::Server(e)),
        }
    }

    /// The next value on the connection (type definitions are taken in on the way).
    fn value(&mut self) -> Result<Value, CallError> {
        loop {
            if let Some(body) = gob::frame(&self.pending).map_err(CallError::Broken)? {
                let msg = self.decoder.message(&self.pending[body.clone()]);
                self.pending.drain(..body.end);
                match msg.map_err(CallError::Broken)? {
                    Some((_, v)) => return Ok(v),
                    None => continue,
                }
            }
            let mut chunk = [0u8; 4096];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| CallError::Broken(go_errno_text(&e)))?;
            if n == 0 {
                return Err(CallError::Broken("unexpected EOF".into()));
            }
            self.pending.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A call read by the daemon.
#[derive(Debug, PartialEq, Eq)]
pub struct Call {
    pub method: String,
    pub seq: u64,
    pub args: CmdArgs,
}

/// One connection of the daemon: bytes in, calls out, replies encoded.
#[derive(Default)]
pub struct ServerConn {
    connected: bool,
    pub input: Vec<u8>,
    decoder: gob::Decoder,
    header: Option<(String, u64)>,
    defined: bool,
}

/// What a connection's input holds next.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// The handshake is done: send this.
    Connected(&'static [u8]),
    Call(Call),
    /// Not a net/rpc client: send this and close.
    Refused(&'static [u8]),
}

impl ServerConn {
    /// The next complete unit of the input, `None` while more bytes are needed; an error
    /// ends the connection.
    pub fn next_incoming(&mut self) -> Result<Option<Incoming>, String> {
        if !self.connected {
            let Some(end) = head_end(&self.input) else {
                return match self.input.len() > MAX_HEAD {
                    true => Err("an HTTP head too long".into()),
                    false => Ok(None),
                };
            };
            let connect = self.input.starts_with(b"CONNECT ");
            self.input.drain(..end);
            self.connected = connect;
            return Ok(Some(match connect {
                true => Incoming::Connected(CONNECTED),
                false => Incoming::Refused(MUST_CONNECT),
            }));
        }
        loop {
            let Some(body) = gob::frame(&self.input)? else {
                return Ok(None);
            };
            let msg = self.decoder.message(&self.input[body.clone()]);
            self.input.drain(..body.end);
            let Some((_, v)) = msg? else { continue };
            match self.header.take() {
                None => {
                    let seq = v.int("Seq").unwrap_or(0) as u64;
                    self.header = Some((v.str("ServiceMethod"), seq));
                }
                Some((method, seq)) => {
                    let args = CmdArgs {
                        container_id: v.str("ContainerID"),
                        netns: v.str("Netns"),
                        ifname: v.str("IfName"),
                        args: v.str("Args"),
                        path: v.str("Path"),
                        stdin: v.bytes("StdinData").to_vec(),
                    };
                    return Ok(Some(Incoming::Call(Call { method, seq, args })));
                }
            }
        }
    }

    /// The bytes answering `call`: its reply value, or the error (with an empty value, as
    /// Go's server sends).
    pub fn reply(&mut self, method: &str, seq: u64, reply: Result<Reply, String>) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.defined {
            define_reply_types(&mut out);
            self.defined = true;
        }
        let mut body = Vec::new();
        gob::put_int(&mut body, RESPONSE);
        let mut h = Struct::new(&mut body);
        h.str(0, method.as_bytes());
        h.uint(1, seq);
        if let Err(e) = &reply {
            h.str(2, e.as_bytes());
        }
        h.end();
        gob::put_message(&mut out, &body);
        body.clear();
        match reply {
            Ok(Some(result)) => {
                gob::put_int(&mut body, RESULT);
                put_result(&mut body, &result);
            }
            _ => {
                gob::put_int(&mut body, EMPTY);
                body.push(0);
            }
        }
        gob::put_message(&mut out, &body);
        out
    }
}

fn define_reply_types(out: &mut Vec<u8>) {
    let defs: [(i64, Def); 8] = [
        (
            RESPONSE,
            Def::Struct(
                "Response",
                &[("ServiceMethod", STRING), ("Seq", UINT), ("Error", STRING)],
            ),
        ),
        (
            RESULT,
            Def::Struct(
                "Result",
                &[("CNIVersion", STRING), ("IPs", IP_CONFIGS), ("Routes", ROUTES)],
            ),
        ),
        (IP_CONFIGS, Def::Slice(IP_CONFIG)),
        (
            IP_CONFIG,
            Def::Struct("IPConfig", &[("Address", IP_NET), ("Gateway", BYTES)]),
        ),
        (ROUTES, Def::Slice(ROUTE)),
        (
            ROUTE,
            Def::Struct(
                "Route",
                &[("Dst", IP_NET), ("GW", BYTES), ("Priority", INT), ("Scope", INT)],
            ),
        ),
        (IP_NET, Def::Struct("IPNet", &[("IP", BYTES), ("Mask", BYTES)])),
        (EMPTY, Def::Struct("", &[])),
    ];
    for (id, def) in &defs {
        gob::define(out, *id, def);
    }
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

fn put_net(out: &mut Vec<u8>, net: &IpNetwork) {
    let mut n = Struct::new(out);
    n.str(0, &ip_bytes(net.ip()));
    n.str(1, &ip_bytes(net.mask()));
    n.end();
}

/// A result as the reference's daemon sends it: `CNIVersion` 1.0.0, which every plugin
/// version converts from (the plugin prints it in the config's version).
fn put_result(out: &mut Vec<u8>, r: &CniResult) {
    let mut s = Struct::new(out);
    s.str(0, b"1.0.0");
    if !r.ips.is_empty() {
        let list = s.field(1);
        gob::put_uint(list, r.ips.len() as u64);
        for ip in &r.ips {
            let mut c = Struct::new(list);
            put_net(c.field(0), &ip.address);
            c.str(1, &ip.gateway.map(ip_bytes).unwrap_or_default());
            c.end();
        }
    }
    if !r.routes.is_empty() {
        let list = s.field(2);
        gob::put_uint(list, r.routes.len() as u64);
        for route in &r.routes {
            let mut c = Struct::new(list);
            put_net(c.field(0), &route.dst);
            c.str(1, &route.gw.map(ip_bytes).unwrap_or_default());
            c.int(2, route.priority.map_or(0, i64::from));
            if let Some(scope) = route.scope {
                put_int_always(c.field(3), i64::from(scope));
            }
            c.end();
        }
    }
    s.end();
}

/// A pointer field (`*int`) is sent whenever it is set, zero included.
fn put_int_always(out: &mut Vec<u8>, i: i64) {
    gob::put_int(out, i);
}

/// A `net.IP` (4 or 16 bytes; a v4-mapped v6 address is v4, as Go's `To4` takes it).
fn ip_of(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        16 => {
            let octets: [u8; 16] = b.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(octets)).to_canonical())
        }
        _ => None,
    }
}

/// A `net.IPNet`: the address and the prefix its mask makes.
fn net_of(v: Option<&Value>) -> Result<IpNetwork, String> {
    let v = v.ok_or("an address without its network")?;
    let ip = ip_of(v.bytes("IP")).ok_or("an address of a bad length")?;
    netaddr::ipnet_of(ip, v.bytes("Mask")).ok_or_else(|| "a non-canonical mask".into())
}

/// The result a daemon sent (`current.Result`), as cnibox holds results.
pub fn result_of(v: &Value) -> Result<CniResult, String> {
    let mut r = CniResult {
        cni_version: v.str("CNIVersion"),
        ..CniResult::default()
    };
    for ip in v.list("IPs") {
        r.ips.push(IpConfig {
            interface: ip.int("Interface").and_then(|i| usize::try_from(i).ok()),
            address: net_of(ip.field("Address"))?,
            gateway: ip_of(ip.bytes("Gateway")),
        });
    }
    for route in v.list("Routes") {
        let num = |name| route.int(name).and_then(|i| u32::try_from(i).ok());
        let mut out = Route::new(net_of(route.field("Dst"))?, ip_of(route.bytes("GW")));
        out.mtu = num("MTU").filter(|n| *n != 0);
        out.advmss = num("AdvMSS").filter(|n| *n != 0);
        out.priority = num("Priority").filter(|n| *n != 0);
        out.table = num("Table");
        out.scope = route.int("Scope").and_then(|s| u8::try_from(s).ok());
        r.routes.push(out);
    }
    if let Some(dns) = v.field("DNS") {
        let list = |name| {
            let items: Vec<String> = dns
                .list(name)
                .iter()
                .map(|s| match s {
                    Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                    _ => String::new(),
                })
                .collect();
            (!items.is_empty()).then_some(items)
        };
        r.dns = Dns {
            nameservers: list("Nameservers"),
            domain: Some(dns.str("Domain")).filter(|d| !d.is_empty()),
            search: list("Search"),
            options: list("Options"),
        };
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::super::gob::tests::{unhex, values};
    use super::*;

    fn a_result() -> CniResult {
        let mut default = Route::new("0.0.0.0/0".parse().unwrap(), Some("10.1.2.1".parse().unwrap()));
        default.priority = Some(5);
        let mut onlink = Route::new("192.168.5.0/24".parse().unwrap(), Some(Ipv4Addr::UNSPECIFIED.into()));
        onlink.scope = Some(253);
        CniResult {
            cni_version: "1.0.0".into(),
            interfaces: vec![],
            ips: vec![IpConfig {
                interface: None,
                address: "10.1.2.3/24".parse().unwrap(),
                gateway: Some("10.1.2.1".parse().unwrap()),
            }],
            routes: vec![default, onlink],
            dns: Dns::default(),
        }
    }

    /// What `call` sends, as the daemon's side reads it, and the reply back.
    #[test]
    fn a_call_and_its_reply_round_trip() {
        let args = CmdArgs {
            container_id: "c1".into(),
            netns: "/run/netns/x".into(),
            ifname: "eth0".into(),
            args: "K8S_POD_NAME=p".into(),
            path: "/opt/cni/bin".into(),
            stdin: b"{}".to_vec(),
        };
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let mut client = Client {
            stream: theirs,
            decoder: gob::Decoder::new(),
            pending: vec![],
            defined: false,
            seq: 7,
        };
        let mut server = ServerConn {
            connected: true,
            ..ServerConn::default()
        };
        let reply = server.reply("DHCP.Allocate", 7, Ok(Some(a_result())));
        ours.write_all(&reply).unwrap();
        let got = client.call("DHCP.Allocate", &args).unwrap();
        assert_eq!(result_of(&got).unwrap(), a_result());
        drop(client);
        ours.read_to_end(&mut server.input).unwrap();
        let expected = Call {
            method: "DHCP.Allocate".into(),
            seq: 7,
            args,
        };
        assert_eq!(server.next_incoming().unwrap(), Some(Incoming::Call(expected)));
        assert_eq!(server.next_incoming().unwrap(), None);
    }

    #[test]
    fn the_daemon_reads_a_go_clients_call_and_refuses_plain_http() {
        let mut s = ServerConn::default();
        s.input.extend_from_slice(b"CONNECT /_goRPC_ HTTP/1.0\n\n");
        s.input.extend_from_slice(&unhex(super::super::gob::tests::GO_REQUEST));
        assert_eq!(s.next_incoming().unwrap(), Some(Incoming::Connected(CONNECTED)));
        let Some(Incoming::Call(call)) = s.next_incoming().unwrap() else {
            panic!("no call")
        };
        assert_eq!(
            (call.method.as_str(), call.args.ifname.as_str()),
            ("DHCP.Allocate", "eth0")
        );
        let mut plain = ServerConn::default();
        plain.input.extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(plain.next_incoming().unwrap(), Some(Incoming::Refused(MUST_CONNECT)));
    }

    #[test]
    fn an_error_reply_carries_the_message_and_an_empty_value() {
        let mut s = ServerConn::default();
        let bytes = s.reply("DHCP.Release", 3, Err("no more tries".into()));
        let v = values(&bytes);
        assert_eq!(v[0].str("Error"), "no more tries");
        assert_eq!(v[0].int("Seq"), Some(3));
        assert_eq!(v[1], Value::Struct(vec![]));
        // the types go once per connection
        let again = s.reply("DHCP.Release", 4, Ok(None));
        assert!(again.len() < bytes.len() / 4);
    }

    #[test]
    fn a_go_daemons_result_reads_as_the_reference_prints_it() {
        let v = values(&unhex(super::super::gob::tests::GO_RESPONSE));
        let r = result_of(&v[1]).unwrap();
        assert_eq!(r.ips[0].address.to_string(), "10.1.2.3/24");
        assert_eq!(r.ips[0].gateway, Some("10.1.2.1".parse().unwrap()));
        assert_eq!(r.routes[0].dst.to_string(), "0.0.0.0/0");
    }

    #[test]
    fn a_net_reads_only_with_a_prefix_mask_of_its_family() {
        let net = |ip: &[u8], mask: &[u8]| {
            let v = Value::Struct(vec![
                ("IP".into(), Value::Bytes(ip.to_vec())),
                ("Mask".into(), Value::Bytes(mask.to_vec())),
            ]);
            net_of(Some(&v)).map(|n| n.to_string())
        };
        assert_eq!(net(&[10, 1, 2, 3], &[255, 255, 255, 0]), Ok("10.1.2.3/24".into()));
        let mut mapped = [0u8; 16];
        mapped[10..].copy_from_slice(&[0xff, 0xff, 10, 1, 2, 3]);
        let mut long = [255u8; 16];
        long[15] = 0;
        assert_eq!(net(&mapped, &long), Ok("10.1.2.3/24".into()));
        for mask in [&[255, 0, 255, 0][..], &[255, 255, 255], &[]] {
            assert_eq!(
                net(&[10, 1, 2, 3], mask),
                Err("a non-canonical mask".into()),
                "{mask:?}"
            );
        }
        assert_eq!(
            net(&[10, 1, 2], &[255, 255, 255, 0]),
            Err("an address of a bad length".into())
        );
        assert_eq!(net_of(None), Err("an address without its network".into()));
    }
}
