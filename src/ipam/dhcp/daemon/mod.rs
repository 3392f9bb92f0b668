//! `dhcp daemon`: holds the leases of the containers' interfaces and answers the plugin.
//!
//! One process, one thread: a poll(2) loop over the listening socket, the plugins'
//! connections, a signalfd, and the packet socket of each lease while it exchanges
//! messages, with the leases' timers as the poll timeout. A lease is a state machine
//! ([`lease`]) fed packets and time; the loop carries out what it asks. A slow server or
//! client never holds up another lease, and an error of one lease ends that lease only.
//! Held leases are recorded in the state directory ([`store`]), so a daemon started again
//! goes on renewing them and serves their DEL and CHECK.
pub mod lease;
pub mod link;
pub mod store;

use super::config::{self, IpamConfig};
use super::frame;
use super::message::Reply;
use super::rpc::{Call, CmdArgs, Incoming, ServerConn};
use crate::cni::json::{self, Json};
use crate::cni::result::IpConfig;
use crate::cni::{CniResult, Command, Request};
use lease::{Action, Binding, Lease, Params, Rng, Timing};
use link::{Attachment, PacketSocket, Unreachable};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use std::ffi::OsString;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, FromRawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};
use store::{Record, Store};

/// The daemon's command line, Go's `flag` syntax as the reference's (`-timeout 5s`,
/// `--broadcast`, `-socketpath=/x`).
#[derive(Debug, Clone, PartialEq)]
pub struct Flags {
    pub pidfile: String,
    pub hostprefix: String,
    pub socketpath: String,
    pub broadcast: bool,
    pub timeout: Duration,
    pub resendmax: Duration,
    pub resendtimeout: Duration,
    /// cnibox's: where lease records go (default: next to the socket).
    pub statedir: String,
}

const USAGE: &str = "Usage of daemon:
  -broadcast
    \tbroadcast DHCP leases
  -hostprefix string
    \toptional prefix to host root
  -pidfile string
    \toptional path to write daemon PID to
  -resendmax duration
    \toptional dhcp client max resend delay between requests (default 1m2s)
  -resendtimeout duration
    \toptional dhcp client resend timeout, no more retries after this timeout (default 3m28s)
  -socketpath string
    \toptional dhcp server socketpath
  -statedir string
    \twhere held leases are recorded (default: the socket path with .leases for .sock)
  -timeout duration
    \toptional dhcp client timeout duration for each request (default 10s)
";

impl Flags {
    pub fn parse(args: &[OsString]) -> Result<Flags, String> {
        let mut f = Flags {
            pidfile: String::new(),
            hostprefix: String::new(),
            socketpath: String::new(),
            broadcast: false,
            timeout: Duration::from_secs(10),
            resendmax: Duration::from_secs(62),
            resendtimeout: Duration::from_secs(208),
            statedir: String::new(),
        };
        let mut it = args.iter().map(|a| a.to_string_lossy().into_owned());
        while let Some(arg) = it.next() {
            if arg == "--" || !arg.starts_with('-') || arg == "-" {
                break;
            }
            let body = arg.trim_start_matches('-');
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            if name == "h" || name == "help" {
                return Err(String::new());
            }
            if name == "broadcast" {
                f.broadcast = match inline.as_deref() {
                    None | Some("1" | "t" | "T" | "true" | "TRUE" | "True") => true,
                    Some("0" | "f" | "F" | "false" | "FALSE" | "False") => false,
                    Some(v) => return Err(format!("invalid boolean value {v:?} for -broadcast: parse error")),
                };
                continue;
            }
            let known = [
                "pidfile",
                "hostprefix",
                "socketpath",
                "statedir",
                "timeout",
                "resendmax",
                "resendtimeout",
            ];
            if !known.contains(&name) {
                return Err(format!("flag provided but not defined: -{name}"));
            }
            let value = match inline.or_else(|| it.next()) {
                Some(v) => v,
                None => return Err(format!("flag needs an argument: -{name}")),
            };
            let duration = || {
                parse_duration(&value).ok_or_else(|| format!("invalid value {value:?} for flag -{name}: parse error"))
            };
            match name {
                "pidfile" => f.pidfile = value.clone(),
                "hostprefix" => f.hostprefix = value.clone(),
                "socketpath" => f.socketpath = value.clone(),
                "statedir" => f.statedir = value.clone(),
                "timeout" => f.timeout = duration()?,
                "resendmax" => f.resendmax = duration()?,
                _ => f.resendtimeout = duration()?,
            }
        }
        if f.socketpath.is_empty() {
            f.socketpath = config::DEFAULT_SOCKET.into();
        }
        Ok(f)
    }

    fn socket(&self) -> PathBuf {
        PathBuf::from(format!("{}{}", self.hostprefix, self.socketpath))
    }

    /// The state directory: `-statedir`, or the socket's path with `.leases` for `.sock`
    /// (`/run/cni/dhcp.leases`), so daemons on different sockets never share records.
    fn state_dir(&self) -> PathBuf {
        if !self.statedir.is_empty() {
            return PathBuf::from(format!("{}{}", self.hostprefix, self.statedir));
        }
        let socket = self.socket().to_string_lossy().into_owned();
        PathBuf::from(format!("{}.leases", socket.strip_suffix(".sock").unwrap_or(&socket)))
    }

    fn timing(&self) -> Timing {
        let timeout = self.timeout.max(Duration::from_millis(100));
        Timing {
            timeout,
            resend_max: self.resendmax.max(timeout),
            resend_timeout: self.resendtimeout,
        }
    }
}

/// Go's `time.ParseDuration` (`10s`, `1m2s`, `1.5h`, `300ms`); negative is refused.
pub fn parse_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let number: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// One line of the daemon's log, on stderr, with Go's `log` timestamp (in UTC).
fn log(line: &str) {
    let t = crate::util::time::rfc3339_utc(SystemTime::now());
    let stamp = t.trim_end_matches('Z').replace('-', "/").replacen('T', " ", 1);
    eprintln!("{stamp} {line}");
}

/// The daemon's entry point: `args` after `daemon`. Returns the exit code.
pub fn main(args: &[OsString]) -> i32 {
    let flags = match Flags::parse(args) {
        Ok(f) => f,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            eprint!("{USAGE}");
            return if e.is_empty() { 0 } else { 2 };
        }
    };
    match Daemon::start(flags).and_then(|mut d| d.run()) {
        Ok(()) => 0,
        Err(e) => {
            log(&e);
            1
        }
    }
}

/// An answer awaited by a plugin's connection.
struct Waiter {
    conn: u64,
    method: String,
    seq: u64,
}

/// A lease and what the loop holds for it.
struct Entry {
    lease: Lease,
    att: Attachment,
    /// The namespace path as the plugin sent it (recorded without the host prefix).
    netns: String,
    priority: i64,
    socket: Option<PacketSocket>,
    /// ADD's calls waiting for the first lease.
    waiters: Vec<Waiter>,
}

struct Conn {
    id: u64,
    stream: UnixStream,
    rpc: ServerConn,
    out: Vec<u8>,
    /// Close once `out` is written (a refused client).
    closing: bool,
}

/// Connections beyond this are refused at once.
const MAX_CONNS: usize = 256;
/// A connection's unread input beyond this ends it.
const MAX_INPUT: usize = 2 * super::gob::MAX_MESSAGE;

struct Daemon {
    flags: Flags,
    timing: Timing,
    listener: UnixListener,
    /// The socket file this daemon bound (removed on exit); `None` when socket-activated.
    bound: Option<PathBuf>,
    signals: SignalFd,
    store: Store,
    entries: Vec<Entry>,
    conns: Vec<Conn>,
    next_conn: u64,
    rng: Rng,
}

impl Daemon {
    fn start(flags: Flags) -> Result<Daemon, String> {
        if !flags.pidfile.is_empty() {
            if !Path::new(&flags.pidfile).is_absolute() {
                return Err(format!("Error writing pidfile {:?}: path not absolute", flags.pidfile));
            }
            std::fs::write(&flags.pidfile, std::process::id().to_string())
                .map_err(|e| format!("Error writing pidfile {:?}: {e}", flags.pidfile))?;
        }
        let mut mask = SigSet::empty();
        mask.add(Signal::SIGTERM);
        mask.add(Signal::SIGINT);
        mask.thread_block().map_err(|e| format!("blocking signals: {e}"))?;
        let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(|e| format!("signalfd: {e}"))?;
        let (listener, bound) = listener(&flags.socket()).map_err(|e| format!("Error getting listener: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("Error getting listener: {e}"))?;
        let store = Store::open(&flags.state_dir()).map_err(|e| e.to_string())?;
        let mut seed = [0u8; 8];
        // SAFETY: getrandom(2) writes at most the buffer's length into it.
        unsafe { libc::getrandom(seed.as_mut_ptr() as *mut libc::c_void, seed.len(), 0) };
        let mut d = Daemon {
            timing: flags.timing(),
            flags,
            listener,
            bound,
            signals,
            store,
            entries: vec![],
            conns: vec![],
            next_conn: 0,
            rng: Rng::new(u64::from_ne_bytes(seed) ^ u64::from(std::process::id())),
        };
        d.restore();
        let on = match &d.bound {
            Some(path) => path.display().to_string(),
            None => "the socket systemd passed".into(),
        };
        log(&format!(
            "dhcp daemon (cnibox) listening on {on}, {} lease(s) held, records in {}",
            d.entries.len(),
            d.flags.state_dir().display()
        ));
        Ok(d)
    }

    /// The leases recorded by an earlier daemon: those whose namespace still exists go on.
    fn restore(&mut self) {
        let (records, problems) = self.store.load();
        problems.iter().for_each(|p| log(p));
        let (wall, mono) = (SystemTime::now(), Instant::now());
        for r in records {
            let att = self.attachment(&r.netns, &r.ifname);
            if link::netns_gone(&att.netns) {
                log(&format!(
                    "{}: {} is gone, forgetting the lease",
                    r.client_id,
                    att.netns.display()
                ));
                let _ = self.store.remove(&r.client_id);
                continue;
            }
            let age = wall.duration_since(r.bound_at).unwrap_or_default();
            let bound_mono = mono.checked_sub(age).unwrap_or(mono);
            let binding = Reply::parse(&r.ack).map_err(|e| e.to_string()).and_then(|ack| {
                Binding::from_ack(ack, r.ack.clone(), r.server_mac, (r.bound_at, bound_mono))
                    .map_err(|e| format!("{e:?}"))
            });
            let binding = match binding {
                Ok(b) => b,
                Err(e) => {
                    log(&format!(
                        "{}: the recorded lease does not read ({e}), forgetting it",
                        r.client_id
                    ));
                    let _ = self.store.remove(&r.client_id);
                    continue;
                }
            };
            log(&format!(
                "{}: lease restored ({}/{} from {}), expiration is {}",
                r.client_id,
                binding.address,
                binding.prefix,
                binding.server,
                binding.expires().map_or("never".into(), crate::util::time::rfc3339_utc)
            ));
            let params = Params {
                client_id: r.client_id,
                mac: r.mac,
                options: r.options,
                broadcast: self.flags.broadcast,
            };
            self.entries.push(Entry {
                lease: Lease::restore(params, self.timing, binding),
                att,
                netns: r.netns,
                priority: r.priority,
                socket: None,
                waiters: vec![],
            });
        }
    }

    fn attachment(&self, netns: &str, ifname: &str) -> Attachment {
        Attachment {
            netns: PathBuf::from(format!("{}{netns}", self.flags.hostprefix)),
            ifname: ifname.to_string(),
        }
    }

    fn run(&mut self) -> Result<(), String> {
        loop {
            self.timers();
            let now = Instant::now();
            let timeout = self
                .entries
                .iter()
                .filter_map(|e| e.lease.next_event())
                .min()
                .map(|t| t.saturating_duration_since(now));
            let timeout = match timeout {
                // rounded up, so a timer is never found not yet due
                Some(d) => PollTimeout::try_from(d + Duration::from_micros(999)).unwrap_or(PollTimeout::MAX),
                None => PollTimeout::NONE,
            };
            let (ready_signal, ready_listener, ready_conns, ready_leases) = {
                let mut fds = vec![
                    PollFd::new(self.signals.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.listener.as_fd(), PollFlags::POLLIN),
                ];
                for c in &self.conns {
                    let mut ev = PollFlags::POLLIN;
                    if !c.out.is_empty() {
                        ev |= PollFlags::POLLOUT;
                    }
                    fds.push(PollFd::new(c.stream.as_fd(), ev));
                }
                let sockets: Vec<usize> = (0..self.entries.len())
                    .filter(|i| self.entries[*i].socket.is_some())
                    .collect();
                for i in &sockets {
                    let s = self.entries[*i].socket.as_ref().expect("filtered");
                    fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
                }
                match nix::poll::poll(&mut fds, timeout) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(format!("poll: {e}")),
                }
                let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
                let conns: Vec<u64> = self
                    .conns
                    .iter()
                    .zip(&fds[2..])
                    .filter(|(_, fd)| ready(fd))
                    .map(|(c, _)| c.id)
                    .collect();
                let leases: Vec<String> = sockets
                    .iter()
                    .zip(&fds[2 + self.conns.len()..])
                    .filter(|(_, fd)| ready(fd))
                    .map(|(i, _)| self.entries[*i].lease.params.client_id.clone())
                    .collect();
                (ready(&fds[0]), ready(&fds[1]), conns, leases)
            };
            if ready_signal && self.signalled() {
                return Ok(());
            }
            for id in ready_leases {
                self.receive(&id);
            }
            for id in ready_conns {
                self.serve(id);
            }
            if ready_listener {
                self.accept();
            }
        }
    }

    /// SIGTERM or SIGINT: stop, keep every lease (its record stays for the next daemon).
    fn signalled(&mut self) -> bool {
        let Ok(Some(info)) = self.signals.read_signal() else {
            return false;
        };
        log(&format!(
            "signal {}: exiting; {} lease(s) kept for the next daemon",
            info.ssi_signo,
            self.entries.len()
        ));
        if let Some(path) = &self.bound {
            let _ = std::fs::remove_file(path);
        }
        if !self.flags.pidfile.is_empty() {
            let _ = std::fs::remove_file(&self.flags.pidfile);
        }
        true
    }

    fn timers(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .entries
            .iter()
            .filter(|e| e.lease.next_event().is_some_and(|t| t <= now))
            .map(|e| e.lease.params.client_id.clone())
            .collect();
        for id in due {
            if let Some(i) = self.find(&id) {
                let actions = self.entries[i].lease.on_timer(now, &mut self.rng);
                self.apply(&id, actions);
            }
        }
    }

    fn find(&self, client_id: &str) -> Option<usize> {
        self.entries.iter().position(|e| e.lease.params.client_id == client_id)
    }

    /// Every packet queued on a lease's socket, to the lease.
    fn receive(&mut self, id: &str) {
        let mut buf = [0u8; 2048];
        loop {
            let Some(i) = self.find(id) else { return };
            let Some(socket) = &self.entries[i].socket else { return };
            let (n, mac) = match socket.recv(&mut buf) {
                Ok(Some(got)) => got,
                Ok(None) => return,
                Err(e) => {
                    log(&format!("{id}: receiving: {e}"));
                    return;
                }
            };
            let Some((_, payload)) = frame::udp_payload(&buf[..n]) else {
                continue;
            };
            let Ok(reply) = Reply::parse(payload) else { continue };
            let now = (SystemTime::now(), Instant::now());
            let actions = self.entries[i].lease.on_reply(reply, payload, mac, now, &mut self.rng);
            self.apply(id, actions);
        }
    }

    /// Carries out a lease's actions; the lease may end on the way.
    fn apply(&mut self, id: &str, actions: Vec<Action>) {
        for action in actions {
            let Some(i) = self.find(id) else { return };
            match action {
                Action::Log(line) => log(&line),
                Action::Send { payload, src, dst, mac } => {
                    if let Err(e) = self.send(i, &frame::udp_packet(src, dst, &payload), mac) {
                        self.unreachable(i, e);
                    }
                }
                Action::Bound => {
                    let e = &mut self.entries[i];
                    let b = e.lease.binding.as_ref().expect("bound");
                    let record = Record {
                        client_id: id.to_string(),
                        netns: e.netns.clone(),
                        ifname: e.att.ifname.clone(),
                        mac: e.lease.params.mac,
                        options: e.lease.params.options.clone(),
                        priority: e.priority,
                        ack: b.ack_bytes.clone(),
                        server_mac: b.server_mac,
                        bound_at: b.bound_at,
                    };
                    if let Err(err) = self.store.save(&record) {
                        log(&format!("{id}: recording the lease: {err}"));
                    }
                    let result = result_of(&self.entries[i]);
                    for w in std::mem::take(&mut self.entries[i].waiters) {
                        self.answer(w, Ok(Some(result.clone())));
                    }
                }
                Action::Failed(msg) => {
                    log(&format!("{id}: {msg}"));
                    self.forget(i, &msg);
                }
                Action::LinkDown => {
                    if let Err(e) = link::set_down(&self.entries[i].att) {
                        log(&format!(
                            "{id}: setting {} down: {}",
                            self.entries[i].att.ifname,
                            e.message()
                        ));
                    }
                }
            }
        }
        if let Some(i) = self.find(id) {
            if !self.entries[i].lease.exchanging() {
                self.entries[i].socket = None;
            }
        }
    }

    /// Sends on the lease's socket, opened in the container first when it is closed.
    fn send(&mut self, i: usize, packet: &[u8], mac: [u8; 6]) -> Result<(), Unreachable> {
        let e = &mut self.entries[i];
        if e.socket.is_none() {
            let id = &e.lease.params.client_id;
            let iface = link::open(&e.att, Some(e.lease.params.mac), &mut |l| log(&format!("{id}: {l}")))?;
            e.socket = Some(iface.socket);
        }
        let socket = e.socket.as_ref().expect("opened");
        socket
            .send(packet, mac)
            .map_err(|err| Unreachable::Failed(format!("sending on {}: {err}", e.att.ifname)))
    }

    /// The container side failed: a lease whose namespace or interface is gone ends (as
    /// the reference ends its maintenance), another failure waits for the next attempt.
    fn unreachable(&mut self, i: usize, e: Unreachable) {
        let id = self.entries[i].lease.params.client_id.clone();
        match e {
            Unreachable::Gone(why) => {
                log(&format!("{id}: {why}: the interface is gone, the lease is forgotten"));
                self.forget(i, &why);
            }
            Unreachable::Failed(why) => log(&format!("{id}: {why}")),
        }
    }

    /// Ends lease `i`: its entry and its record go, and ADD's calls waiting for it are
    /// answered with `why`.
    fn forget(&mut self, i: usize, why: &str) {
        let e = self.entries.remove(i);
        let id = &e.lease.params.client_id;
        if let Err(err) = self.store.remove(id) {
            log(&format!("{id}: removing the lease record: {err}"));
        }
        for w in e.waiters {
            self.answer(w, Err(why.to_string()));
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.conns.len() >= MAX_CONNS || stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    self.next_conn += 1;
                    self.conns.push(Conn {
                        id: self.next_conn,
                        stream,
                        rpc: ServerConn::default(),
                        out: vec![],
                        closing: false,
                    });
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    }

    /// A connection is readable or writable: read what came, handle complete calls, write
    /// what is pending.
    fn serve(&mut self, id: u64) {
        let Some(c) = self.conns.iter_mut().find(|c| c.id == id) else {
            return;
        };
        let mut open = true;
        let mut chunk = [0u8; 8192];
        loop {
            match c.stream.read(&mut chunk) {
                Ok(0) => {
                    open = false;
                    break;
                }
                Ok(n) => c.rpc.input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    open = false;
                    break;
                }
            }
            if c.rpc.input.len() > MAX_INPUT {
                open = false;
                break;
            }
        }
        let mut calls = vec![];
        loop {
            match c.rpc.next_incoming() {
                Ok(Some(Incoming::Connected(head))) => c.out.extend_from_slice(head),
                Ok(Some(Incoming::Refused(head))) => {
                    c.out.extend_from_slice(head);
                    c.closing = true;
                    break;
                }
                Ok(Some(Incoming::Call(call))) => calls.push(call),
                Ok(None) => break,
                Err(_) => {
                    open = false;
                    break;
                }
            }
        }
        for call in calls {
            self.call(id, call);
        }
        self.flush(id, open);
    }

    fn flush(&mut self, id: u64, open: bool) {
        let Some(at) = self.conns.iter().position(|c| c.id == id) else {
            return;
        };
        let c = &mut self.conns[at];
        while !c.out.is_empty() {
            match c.stream.write(&c.out) {
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.conns.remove(at);
                    return;
                }
            }
        }
        if !open || (c.closing && c.out.is_empty()) {
            self.conns.remove(at);
        }
    }

    fn answer(&mut self, w: Waiter, reply: Result<Option<CniResult>, String>) {
        let Some(c) = self.conns.iter_mut().find(|c| c.id == w.conn) else {
            return; // the plugin went away; the lease stays
        };
        let bytes = c.rpc.reply(&w.method, w.seq, reply);
        c.out.extend_from_slice(&bytes);
        self.flush(w.conn, true);
    }

    fn call(&mut self, conn: u64, call: Call) {
        let Call { method, seq, args } = call;
        let w = Waiter { conn, method, seq };
        let reply = match w.method.as_str() {
            "DHCP.Allocate" => match self.allocate(&args) {
                Ok((_, Some(result))) => Ok(Some(result)),
                Ok((id, None)) => {
                    // acquiring: answered when the lease is bound (or fails)
                    if let Some(i) = self.find(&id) {
                        self.entries[i].waiters.push(w);
                        return;
                    }
                    Err("the lease ended while acquiring".into())
                }
                Err(e) => Err(e),
            },
            "DHCP.Release" => self.release(&args).map(|_| None),
            "DHCP.Check" => self.check(&args).map(|_| None),
            m => Err(match m.split_once('.') {
                None => format!("rpc: service/method request ill-formed: {m}"),
                Some(("DHCP", _)) => format!("rpc: can't find method {m}"),
                Some(_) => format!("rpc: can't find service {m}"),
            }),
        };
        self.answer(w, reply);
    }

    /// The config a call carries (the plugin's stdin), as the reference's daemon reads it.
    fn config_of(args: &CmdArgs) -> Result<(Json, IpamConfig, String), String> {
        let bad = |m: String| format!("error parsing netconf: {m}");
        let conf = json::parse(&args.stdin).map_err(|e| bad(e.to_string()))?;
        let ipam = IpamConfig::read(&conf).map_err(|e| bad(e.msg))?;
        let name = crate::cni::config::fields(&conf, "NetConf")
            .and_then(|f| json::opt_str(&f, "name", "NetConf.name").map(|n| n.unwrap_or_default().to_string()))
            .map_err(|e| bad(e.msg))?;
        Ok((conf, ipam, name))
    }

    fn client_id_of(&self, args: &CmdArgs) -> Result<String, String> {
        let (_, _, name) = Self::config_of(args)?;
        Ok(config::client_id(&args.container_id, &name, &args.ifname))
    }

    /// ADD: the attachment's client ID, and the lease held for it, or a new one acquired
    /// (`None`: wait).
    fn allocate(&mut self, args: &CmdArgs) -> Result<(String, Option<CniResult>), String> {
        let (_, ipam, name) = Self::config_of(args)?;
        let options = config::prepare(&args.args, &ipam)?;
        let id = config::client_id(&args.container_id, &name, &args.ifname);
        if let Some(i) = self.find(&id) {
            let e = &self.entries[i];
            return Ok((id, e.lease.binding.is_some().then(|| result_of(e))));
        }
        log(&format!("{id}: acquiring lease"));
        let att = self.attachment(&args.netns, &args.ifname);
        let iface = link::open(&att, None, &mut |l| log(&l)).map_err(|e| e.message().to_string())?;
        let params = Params {
            client_id: id.clone(),
            mac: iface.mac,
            options,
            broadcast: self.flags.broadcast,
        };
        let (lease, actions) = Lease::acquire(params, self.timing, Instant::now(), &mut self.rng);
        self.entries.push(Entry {
            lease,
            att,
            netns: args.netns.clone(),
            priority: ipam.priority,
            socket: Some(iface.socket),
            waiters: vec![],
        });
        self.apply(&id, actions);
        Ok((id, None))
    }

    /// DEL: the lease released (DHCPRELEASE to its server) and forgotten. A lease not held
    /// is not an error.
    fn release(&mut self, args: &CmdArgs) -> Result<(), String> {
        let id = crate::cni::json::leniently(|| self.client_id_of(args))?;
        let Some(i) = self.find(&id) else { return Ok(()) };
        log(&format!("{id}: releasing lease"));
        let message = self.entries[i].lease.release(&mut self.rng);
        if let Some(Action::Send { payload, src, dst, mac }) = message {
            if let Err(e) = self.send(i, &frame::udp_packet(src, dst, &payload), mac) {
                log(&format!("{id}: failed to release DHCP lease: {}", e.message()));
            }
        }
        self.forget(i, "the lease was released while acquiring");
        Ok(())
    }

    /// CHECK: the lease is held, and for the address the container has (prevResult).
    fn check(&mut self, args: &CmdArgs) -> Result<(), String> {
        let (conf, _, name) = Self::config_of(args)?;
        let id = config::client_id(&args.container_id, &name, &args.ifname);
        let i = self.find(&id).ok_or_else(|| format!("{id}: no DHCP lease is held"))?;
        let Some(b) = &self.entries[i].lease.binding else {
            return Err(format!("{id}: the lease was lost; acquiring again"));
        };
        let prev = crate::cni::config::prev_result(&Request::from_config(Command::Check, conf))
            .map_err(|e| e.msg)?
            .map(|r| r.ips)
            .unwrap_or_default();
        let held: std::net::IpAddr = b.address.into();
        let v4: Vec<&IpConfig> = prev.iter().filter(|ip| ip.is_v4()).collect();
        if !v4.is_empty()
            && !v4
                .iter()
                .any(|ip| ip.address.ip() == held && ip.address.prefix() == b.prefix)
        {
            let had: Vec<String> = v4.iter().map(|ip| ip.address.to_string()).collect();
            return Err(format!(
                "{id}: the lease is for {held}/{}, the container has {}",
                b.prefix,
                had.join(", ")
            ));
        }
        Ok(())
    }
}

/// ADD's answer for a held lease.
fn result_of(e: &Entry) -> CniResult {
    let b = e.lease.binding.as_ref().expect("a held lease");
    let (ip, routes) = b.result(e.priority);
    CniResult {
        cni_version: "1.0.0".into(),
        ips: vec![ip],
        routes,
        ..CniResult::default()
    }
}

/// The listening socket: systemd's (socket activation, one socket), or bound at `path`.
/// A socket file left by a daemon that died is replaced; one a live daemon answers on is
/// not.
fn listener(path: &Path) -> Result<(UnixListener, Option<PathBuf>), String> {
    let activated = std::env::var("LISTEN_PID").ok().and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id());
    if activated {
        match std::env::var("LISTEN_FDS").ok().and_then(|n| n.parse::<i32>().ok()) {
            Some(1) => {
                // a descriptor 3 closed at exec would be reused (by the signalfd) and
                // served as a socket that never accepts
                // SAFETY: a zeroed stat is a valid value of the plain C struct.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: fstat(2) writes only the struct it is given.
                let stat = unsafe { libc::fstat(3, &mut st) };
                if stat != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
                    return Err("LISTEN_FDS=1, but descriptor 3 is no socket".into());
                }
                // SAFETY: systemd passes the socket as descriptor 3 (SD_LISTEN_FDS_START);
                // nothing else owns it.
                let l = unsafe { UnixListener::from_raw_fd(3) };
                // SAFETY: fcntl on the descriptor just taken over.
                unsafe { libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC) };
                return Ok((l, None));
            }
            Some(n) if n > 1 => return Err(format!("Too many ({n}) FDs passed through socket activation")),
            _ => {}
        }
    }
    let shown = path.display();
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        let in_use = format!("listen unix {shown}: bind: address already in use");
        if !meta.file_type().is_socket() {
            return Err(format!("{in_use} (and it is not a socket)"));
        }
        match UnixStream::connect(path) {
            Ok(_) => return Err(format!("{in_use} (a daemon answers on it)")),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                log(&format!("{shown}: left by a daemon that is gone, replacing it"));
                std::fs::remove_file(path).map_err(|e| format!("remove {shown}: {e}"))?;
            }
            Err(e) => return Err(format!("{in_use} ({e})")),
        }
    }
    let l = UnixListener::bind(path).map_err(|e| format!("listen unix {shown}: bind: {e}"))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("chmod {shown}: {e}"))?;
    Ok((l, Some(path.to_path_buf())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Flags, String> {
        Flags::parse(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn flags_as_gos_flag_package_reads_them() {
        let f = parse(&[
            "-socketpath",
            "/t/d.sock",
            "--timeout=2s",
            "-broadcast",
            "-resendmax",
            "1m2.5s",
        ])
        .unwrap();
        assert_eq!(f.socketpath, "/t/d.sock");
        assert_eq!(f.timeout, Duration::from_secs(2));
        assert!(f.broadcast);
        assert_eq!(f.resendmax, Duration::from_millis(62_500));
        assert_eq!(f.state_dir(), PathBuf::from("/t/d.leases"));
        let d = parse(&[]).unwrap();
        assert_eq!(d.socket(), PathBuf::from("/run/cni/dhcp.sock"));
        assert_eq!(d.state_dir(), PathBuf::from("/run/cni/dhcp.leases"));
        assert_eq!(
            parse(&["-hostprefix", "/host"]).unwrap().socket(),
            PathBuf::from("/host/run/cni/dhcp.sock")
        );
        assert_eq!(parse(&["-bogus"]).unwrap_err(), "flag provided but not defined: -bogus");
        assert_eq!(parse(&["-timeout"]).unwrap_err(), "flag needs an argument: -timeout");
        assert_eq!(
            parse(&["-timeout", "soon"]).unwrap_err(),
            "invalid value \"soon\" for flag -timeout: parse error"
        );
        assert_eq!(parse(&["-h"]).unwrap_err(), "");
    }

    #[test]
    fn durations_as_go_parses_them() {
        let ms = |s| parse_duration(s).map(|d| d.as_millis());
        assert_eq!(ms("10s"), Some(10_000));
        assert_eq!(ms("1m2s"), Some(62_000));
        assert_eq!(ms("1.5h"), Some(5_400_000));
        assert_eq!(ms("300ms"), Some(300));
        assert_eq!(ms("0"), Some(0));
        for bad in ["", "10", "s", "1x", "-1s", "1s2"] {
            assert_eq!(ms(bad), None, "{bad}");
        }
    }
}
