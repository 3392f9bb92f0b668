//! One lease's life as RFC 2131 describes it, without any I/O: the daemon feeds it the
//! replies that arrived and the time, and carries out the [`Action`]s it returns (send a
//! message, answer the plugin, take the link down, …). Acquiring is DISCOVER, OFFER,
//! REQUEST, ACK; a bound lease renews at T1 (unicast to its server), rebinds at T2
//! (broadcast), and acquires again after it expires or a server refuses it (NAK).
//! Every transmission is repeated with back-off until a reply or a deadline.
use super::super::config::Options;
use super::super::message::{self, opt, MessageType, Reply, Request, FLAG_BROADCAST};
use crate::cni::result::{IpConfig, Route};
use ipnetwork::IpNetwork;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant, SystemTime};

pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];
/// The reference's lease time when an ACK has none.
const DEFAULT_LEASE: Duration = Duration::from_secs(3600);
/// Renewals closer together are not made, whatever the server says.
const MIN_RENEWAL: Duration = Duration::from_secs(1);
/// Unanswered REQUESTs after an OFFER before starting over with a DISCOVER.
const REQUEST_SENDS: u32 = 3;
/// The wait after a NAK before the next DISCOVER.
const AFTER_NAK: Duration = Duration::from_secs(2);
/// What the reference answers when acquiring runs out of time.
pub const NO_MORE_TRIES: &str = "no more tries";

/// The daemon's retransmission settings (`-timeout`, `-resendmax`, `-resendtimeout`).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The first wait for a reply; each unanswered transmission doubles it.
    pub timeout: Duration,
    /// The longest wait between transmissions.
    pub resend_max: Duration,
    /// How long acquiring for ADD may take.
    pub resend_timeout: Duration,
}

/// A small PRNG for transaction ids and jitter, seeded by the daemon.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn draw(&mut self) -> u32 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    /// A duration in [-span, span].
    fn jitter(&mut self, span: Duration) -> (bool, Duration) {
        let n = self.draw();
        (n & 1 == 0, span.mul_f64(f64::from(n >> 1) / f64::from(u32::MAX >> 1)))
    }
}

/// What every message of the lease carries.
#[derive(Debug, Clone)]
pub struct Params {
    pub client_id: String,
    pub mac: [u8; 6],
    pub options: Options,
    /// `-broadcast`: ask servers to broadcast their replies.
    pub broadcast: bool,
}

/// The lease a server granted: its ACK and what follows from it.
#[derive(Debug, Clone)]
pub struct Binding {
    pub ack: Reply,
    /// The ACK as received, kept for the lease record.
    pub ack_bytes: Vec<u8>,
    pub address: Ipv4Addr,
    pub prefix: u8,
    pub server: Ipv4Addr,
    /// The MAC the server's reply came from: where unicasts to it go.
    pub server_mac: [u8; 6],
    /// `None`: an infinite lease (0xffffffff), never renewed.
    pub times: Option<Times>,
    pub bound_at: SystemTime,
    pub bound_mono: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    pub lease: Duration,
    pub renew: Duration,
    pub rebind: Duration,
}

/// Why an ACK is not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Unfit {
    /// Ignored, as if it had not arrived.
    Ignored(&'static str),
    /// The reference fails ADD on it (and releases the lease).
    Fails(&'static str),
}

impl Binding {
    /// The lease an ACK grants, checked: a host address in a sane prefix, a lease time
    /// other than 0.
    pub fn from_ack(
        ack: Reply,
        ack_bytes: Vec<u8>,
        server_mac: [u8; 6],
        at: (SystemTime, Instant),
    ) -> Result<Binding, Unfit> {
        let address = ack.yiaddr;
        if !message::is_host_address(address) {
            return Err(Unfit::Ignored("the address is not a host address"));
        }
        let server = ack.server_id().ok_or(Unfit::Ignored("no server identifier"))?;
        let Some(prefix) = ack.prefix_len() else {
            return Err(match ack.option(opt::SUBNET_MASK) {
                None => Unfit::Fails("DHCP option Subnet Mask not found in DHCPACK"),
                Some(_) => Unfit::Ignored("the subnet mask is not a mask"),
            });
        };
        if prefix < 8 {
            return Err(Unfit::Ignored("the prefix is shorter than /8"));
        }
        let net = IpNetwork::new(address.into(), prefix).map_err(|_| Unfit::Ignored("bad prefix"))?;
        if prefix <= 30 && (net.network() == address || net.broadcast() == address) {
            return Err(Unfit::Ignored(
                "the address is its subnet's network or broadcast address",
            ));
        }
        let times = match ack.seconds(opt::LEASE_TIME) {
            Some(0) => return Err(Unfit::Ignored("a lease of 0 s")),
            Some(u32::MAX) => None,
            secs => Some(times(
                secs.map_or(DEFAULT_LEASE, |s| Duration::from_secs(s.into())),
                ack.seconds(opt::RENEWAL_TIME),
                ack.seconds(opt::REBINDING_TIME),
            )),
        };
        Ok(Binding {
            ack,
            ack_bytes,
            address,
            prefix,
            server,
            server_mac,
            times,
            bound_at: at.0,
            bound_mono: at.1,
        })
    }

    /// When it expires, as a wall-clock time (for the log); `None` never.
    pub fn expires(&self) -> Option<SystemTime> {
        self.times.map(|t| self.bound_at + t.lease)
    }

    fn at(&self, d: fn(&Times) -> Duration) -> Option<Instant> {
        self.times.map(|t| self.bound_mono + d(&t))
    }

    /// What ADD answers: the address with its prefix, the gateway (option 3), and the
    /// routes: option 121's when present, else option 33's and a default route via the
    /// gateway; every route with `priority` as its metric when it is not 0.
    pub fn result(&self, priority: i64) -> (IpConfig, Vec<Route>) {
        let gateway = self.ack.router();
        let ip = IpConfig {
            interface: None,
            address: IpNetwork::new(self.address.into(), self.prefix).expect("checked at bind"),
            gateway: gateway.map(Into::into),
        };
        let route = |dst: Ipv4Addr, prefix: u8, gw: Ipv4Addr| {
            let dst = IpNetwork::new(dst.into(), prefix).expect("a prefix of 32 or less");
            let mut r = Route::new(dst, Some(gw.into()));
            if gw.is_unspecified() {
                r.scope = Some(253); // link: the destination is on the interface
            }
            r
        };
        let mut routes: Vec<Route> = match self.ack.classless_routes() {
            Some(classless) => classless.into_iter().map(|(d, p, g)| route(d, p, g)).collect(),
            None => {
                let mut r: Vec<Route> = self
                    .ack
                    .static_routes()
                    .into_iter()
                    .map(|(d, p, g)| route(d, p, g))
                    .collect();
                r.extend(gateway.map(|gw| route(Ipv4Addr::UNSPECIFIED, 0, gw)));
                r
            }
        };
        if let Ok(metric) = u32::try_from(priority) {
            if metric != 0 {
                routes.iter_mut().for_each(|r| r.priority = Some(metric));
            }
        }
        (ip, routes)
    }
}

/// T1 and T2 as the server gave them, or RFC 2131's 50 % and 87.5 % (the reference's 85 %),
/// kept in order and no closer than [`MIN_RENEWAL`].
fn times(lease: Duration, t1: Option<u32>, t2: Option<u32>) -> Times {
    let secs = |s: Option<u32>| s.map(|s| Duration::from_secs(s.into()));
    let rebind = secs(t2).filter(|t| *t <= lease).unwrap_or(lease * 85 / 100);
    let renew = secs(t1).filter(|t| *t <= rebind).unwrap_or(lease / 2);
    let renew = renew.max(MIN_RENEWAL).min(lease);
    Times {
        lease,
        renew,
        rebind: rebind.max(renew),
    }
}

/// Where a lease stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// DISCOVER sent; waiting for an OFFER.
    Selecting,
    /// REQUEST sent for this OFFER; waiting for its server's ACK or NAK.
    Requesting(Box<Reply>),
    Bound,
    /// Past T1: REQUEST unicast to the lease's server.
    Renewing,
    /// Past T2: REQUEST broadcast to any server.
    Rebinding,
}

/// A transmission and its repetitions.
#[derive(Debug, Clone)]
struct Exchange {
    xid: u32,
    started: Instant,
    next_send: Instant,
    wait: Duration,
    sends: u32,
    /// When this exchange gives up; `None`: never (acquiring again after an expiry).
    deadline: Option<Instant>,
}

/// What the daemon does for a lease.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a DHCP message in an IP packet from `src` to `dst`, to the MAC `mac`.
    Send {
        payload: Vec<u8>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        mac: [u8; 6],
    },
    /// One line for the log.
    Log(String),
    /// The lease is held (first time, renewed, rebound or acquired again): record it,
    /// answer whoever waits for it.
    Bound,
    /// Acquiring for ADD failed: answer with this and forget the lease.
    Failed(String),
    /// The lease came back after a loss with another address than the one the container
    /// holds: the interface goes down, so the old address is not used any more.
    LinkDown,
}

/// A lease of one attachment.
pub struct Lease {
    pub params: Params,
    pub phase: Phase,
    pub binding: Option<Binding>,
    /// The address held before a loss: the link comes up again only for the same one.
    lost: Option<Ipv4Addr>,
    exchange: Option<Exchange>,
    timing: Timing,
}

impl Lease {
    /// A new lease, acquiring for ADD: DISCOVER goes out at once.
    pub fn acquire(params: Params, timing: Timing, now: Instant, rng: &mut Rng) -> (Lease, Vec<Action>) {
        let mut l = Lease {
            params,
            phase: Phase::Selecting,
            binding: None,
            lost: None,
            exchange: None,
            timing,
        };
        let deadline = Some(now + timing.resend_timeout);
        let actions = l.discover(now, deadline, rng);
        (l, actions)
    }

    /// A lease held before a restart, from its record: Bound; `on_timer` walks it through
    /// renewing, rebinding and expiry as each is due.
    pub fn restore(params: Params, timing: Timing, binding: Binding) -> Lease {
        Lease {
            params,
            phase: Phase::Bound,
            binding: Some(binding),
            lost: None,
            exchange: None,
            timing,
        }
    }

    /// True while messages are exchanged (the daemon keeps the packet socket open).
    pub fn exchanging(&self) -> bool {
        self.exchange.is_some()
    }

    /// When [`Lease::on_timer`] has something to do next.
    pub fn next_event(&self) -> Option<Instant> {
        match &self.exchange {
            Some(x) => Some(x.deadline.map_or(x.next_send, |d| d.min(x.next_send))),
            None if self.phase == Phase::Bound => self.binding.as_ref().and_then(|b| b.at(|t| t.renew)),
            None => None,
        }
    }

    fn discover(&mut self, now: Instant, deadline: Option<Instant>, rng: &mut Rng) -> Vec<Action> {
        self.phase = Phase::Selecting;
        self.start(now, deadline, rng);
        vec![self.transmit(now, rng)]
    }

    fn start(&mut self, now: Instant, deadline: Option<Instant>, rng: &mut Rng) {
        self.exchange = Some(Exchange {
            xid: rng.draw(),
            started: now,
            next_send: now,
            wait: self.timing.timeout,
            sends: 0,
            deadline,
        });
    }

    /// The message of the current phase, sent now; the next repetition is scheduled.
    fn transmit(&mut self, now: Instant, rng: &mut Rng) -> Action {
        let x = self.exchange.as_mut().expect("an exchange");
        let secs = now.saturating_duration_since(x.started).as_secs().min(u16::MAX.into()) as u16;
        if x.sends > 0 {
            x.wait = (x.wait * 2).min(self.timing.resend_max.max(self.timing.timeout));
        }
        x.sends += 1;
        // randomised as RFC 2131 4.1 asks, so that clients started together spread out
        let (later, jitter) = rng.jitter(Duration::from_millis(500).min(x.wait / 4));
        x.next_send = if later {
            now + x.wait + jitter
        } else {
            now + x.wait - jitter
        };
        let xid = x.xid;
        let p = &self.params;
        let client_id = [&[0u8][..], p.client_id.as_bytes()].concat();
        let max_size = message::MAX_SIZE.to_be_bytes();
        let bound = self.binding.as_ref();
        let address = bound.map_or(Ipv4Addr::UNSPECIFIED, |b| b.address);
        let flags = if p.broadcast { FLAG_BROADCAST } else { 0 };
        // the options of each message, in code order as the reference sends them
        let mut options: Vec<(u8, &[u8])> = vec![(opt::CLIENT_ID, &client_id), (opt::MAX_MESSAGE_SIZE, &max_size)];
        let requested_ip;
        let server_id;
        let (kind, ciaddr, flags, src, dst, mac) = match &self.phase {
            Phase::Selecting => (
                MessageType::Discover,
                Ipv4Addr::UNSPECIFIED,
                flags,
                Ipv4Addr::UNSPECIFIED,
                Ipv4Addr::BROADCAST,
                BROADCAST_MAC,
            ),
            Phase::Requesting(offer) => {
                requested_ip = offer.yiaddr.octets();
                server_id = offer.server_id().unwrap_or(Ipv4Addr::UNSPECIFIED).octets();
                options.push((opt::REQUESTED_IP, &requested_ip));
                options.push((opt::SERVER_ID, &server_id));
                (
                    MessageType::Request,
                    Ipv4Addr::UNSPECIFIED,
                    flags,
                    Ipv4Addr::UNSPECIFIED,
                    Ipv4Addr::BROADCAST,
                    BROADCAST_MAC,
                )
            }
            Phase::Renewing => {
                let b = bound.expect("renewing a bound lease");
                (MessageType::Request, address, 0, address, b.server, b.server_mac)
            }
            Phase::Rebinding | Phase::Bound => (
                MessageType::Request,
                address,
                0,
                address,
                Ipv4Addr::BROADCAST,
                BROADCAST_MAC,
            ),
        };
        options.push((opt::PARAMETER_REQUEST_LIST, &p.options.requested));
        // provided options replace the client's own of the same code (a client id, say)
        for (code, value) in &p.options.provided {
            options.retain(|(c, _)| c != code);
            options.push((*code, value));
        }
        crate::util::sort::sort_by_key(&mut options, |(c, _)| *c);
        let payload = Request {
            kind,
            xid,
            secs,
            flags,
            ciaddr,
            chaddr: p.mac,
            options: &options,
        }
        .encode();
        Action::Send { payload, src, dst, mac }
    }

    /// The DHCPRELEASE of the held lease (DEL), unicast to its server; `None` when nothing
    /// is held. The lease is over afterwards.
    pub fn release(&mut self, rng: &mut Rng) -> Option<Action> {
        self.exchange = None;
        let b = self.binding.take()?;
        let client_id = [&[0u8][..], self.params.client_id.as_bytes()].concat();
        let server = b.server.octets();
        let payload = Request {
            kind: MessageType::Release,
            xid: rng.draw(),
            secs: 0,
            flags: 0,
            ciaddr: b.address,
            chaddr: self.params.mac,
            options: &[(opt::SERVER_ID, &server), (opt::CLIENT_ID, &client_id)],
        }
        .encode();
        Some(Action::Send {
            payload,
            src: b.address,
            dst: b.server,
            mac: b.server_mac,
        })
    }

    /// Time passed: repeat a transmission, give up, or move on to renewing, rebinding or
    /// acquiring again.
    pub fn on_timer(&mut self, now: Instant, rng: &mut Rng) -> Vec<Action> {
        let id = self.params.client_id.clone();
        let Some(x) = &self.exchange else {
            if self.phase == Phase::Bound && self.next_event().is_some_and(|t| t <= now) {
                let t2 = self.binding.as_ref().and_then(|b| b.at(|t| t.rebind));
                self.phase = Phase::Renewing;
                self.start(now, t2, rng);
                return vec![Action::Log(format!("{id}: renewing lease")), self.transmit(now, rng)];
            }
            return vec![];
        };
        if x.deadline.is_some_and(|d| d <= now) {
            return match self.phase {
                Phase::Renewing => {
                    let expiry = self.binding.as_ref().and_then(|b| b.at(|t| t.lease));
                    self.phase = Phase::Rebinding;
                    self.start(now, expiry, rng);
                    vec![
                        Action::Log(format!("{id}: renewal time expired, rebinding")),
                        self.transmit(now, rng),
                    ]
                }
                Phase::Rebinding => self.lose(now, "lease expired", rng),
                _ => {
                    self.exchange = None;
                    vec![Action::Failed(NO_MORE_TRIES.into())]
                }
            };
        }
        if x.next_send > now {
            return vec![];
        }
        let mut actions = vec![];
        if matches!(self.phase, Phase::Requesting(_)) && x.sends >= REQUEST_SENDS {
            // the server of the offer is silent: ask anew
            let deadline = x.deadline;
            actions.push(Action::Log(format!("{id}: no answer to REQUEST, discovering again")));
            self.phase = Phase::Selecting;
            self.start(now, deadline, rng);
        }
        // a retransmission keeps its transaction id
        actions.push(self.transmit(now, rng));
        actions
    }

    /// The lease is gone (expired, or a server refused it): acquire again at once, for as
    /// long as it takes. The interface stays up meanwhile: the acquisition goes through it,
    /// and servers give a client its address again when they can.
    fn lose(&mut self, now: Instant, why: &str, rng: &mut Rng) -> Vec<Action> {
        let id = self.params.client_id.clone();
        self.lost = self.binding.take().map(|b| b.address).or(self.lost);
        let mut out = vec![Action::Log(format!("{id}: {why}, acquiring again"))];
        out.extend(self.discover(now, None, rng));
        out
    }

    /// A reply arrived on the lease's socket from `src_mac`. Anything that is not the
    /// answer the current phase waits for is ignored.
    pub fn on_reply(
        &mut self,
        reply: Reply,
        bytes: &[u8],
        src_mac: [u8; 6],
        now: (SystemTime, Instant),
        rng: &mut Rng,
    ) -> Vec<Action> {
        let Some(x) = &self.exchange else { return vec![] };
        if reply.xid != x.xid || reply.chaddr[..6] != self.params.mac {
            return vec![];
        }
        let deadline = x.deadline;
        let server = reply.server_id();
        let held = self.binding.as_ref().map(|b| (b.server, b.address));
        let from_holder = held.is_some_and(|(s, _)| Some(s) == server);
        let same_address = held.is_some_and(|(_, a)| a == reply.yiaddr);
        enum Answer {
            Offer,
            Ack,
            Refused,
            Lost,
        }
        let answer = match (&self.phase, reply.message_type()) {
            (Phase::Selecting, Some(MessageType::Offer)) if acceptable_offer(&reply, now) => Answer::Offer,
            (Phase::Requesting(o), Some(MessageType::Ack)) if server == o.server_id() && reply.yiaddr == o.yiaddr => {
                Answer::Ack
            }
            (Phase::Requesting(o), Some(MessageType::Nak)) if server == o.server_id() => Answer::Refused,
            (Phase::Renewing, Some(MessageType::Ack)) if from_holder && same_address => Answer::Ack,
            (Phase::Rebinding, Some(MessageType::Ack)) if same_address => Answer::Ack,
            (Phase::Renewing, Some(MessageType::Nak)) if from_holder => Answer::Lost,
            (Phase::Rebinding, Some(MessageType::Nak)) => Answer::Lost,
            _ => return vec![],
        };
        let id = &self.params.client_id;
        match answer {
            Answer::Offer => {
                self.phase = Phase::Requesting(Box::new(reply));
                if let Some(x) = self.exchange.as_mut() {
                    x.sends = 0;
                    x.wait = self.timing.timeout;
                }
                vec![self.transmit(now.1, rng)]
            }
            Answer::Ack => self.bind(reply, bytes, src_mac, now),
            Answer::Refused => {
                let line = format!("{id}: server rejected request with Nak{}", nak_text(&reply));
                self.phase = Phase::Selecting;
                self.start(now.1, deadline, rng);
                if let Some(x) = self.exchange.as_mut() {
                    x.next_send = now.1 + AFTER_NAK.min(self.timing.timeout);
                }
                vec![Action::Log(line)]
            }
            Answer::Lost => {
                let why = format!("lease refused with Nak{}", nak_text(&reply));
                self.lose(now.1, &why, rng)
            }
        }
    }

    fn bind(&mut self, ack: Reply, bytes: &[u8], src_mac: [u8; 6], now: (SystemTime, Instant)) -> Vec<Action> {
        let id = self.params.client_id.clone();
        let binding = match Binding::from_ack(ack, bytes.to_vec(), src_mac, now) {
            Ok(b) => b,
            Err(Unfit::Ignored(_)) => return vec![],
            Err(Unfit::Fails(msg)) => {
                // the reference releases such a lease and fails ADD
                self.exchange = None;
                return vec![Action::Failed(msg.into())];
            }
        };
        let event = match (&self.phase, self.binding.is_some()) {
            (Phase::Renewing, _) => "lease renewed",
            (Phase::Rebinding, _) => "lease rebound",
            (_, _) if self.lost.is_some() => "lease acquired again",
            _ => "lease acquired",
        };
        let expiry = binding
            .expires()
            .map_or("never".to_string(), crate::util::time::rfc3339_utc);
        let mut out = vec![Action::Log(format!(
            "{id}: {event} ({}/{} from {}), expiration is {expiry}",
            binding.address, binding.prefix, binding.server
        ))];
        if let Some(a) = self.lost.take().filter(|a| *a != binding.address) {
            out.push(Action::Log(format!(
                "{id}: the new address is not {a}, which the container holds: bringing interface DOWN"
            )));
            out.push(Action::LinkDown);
        }
        self.binding = Some(binding);
        self.phase = Phase::Bound;
        self.exchange = None;
        out.push(Action::Bound);
        out
    }
}

/// An OFFER whose lease would be taken: a server to ask, an address and lease time the ACK
/// may bring (only a missing subnet mask is left for the ACK to fail on, as the reference).
fn acceptable_offer(offer: &Reply, now: (SystemTime, Instant)) -> bool {
    if !offer.server_id().is_some_and(message::is_host_address) {
        return false;
    }
    matches!(
        Binding::from_ack(offer.clone(), vec![], [0; 6], now),
        Ok(_) | Err(Unfit::Fails(_))
    )
}

fn nak_text(nak: &Reply) -> String {
    match nak.text() {
        t if t.is_empty() => String::new(),
        t => format!(" (msg: {t})"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::message::tests::reply_bytes;
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xfe];

    fn timing() -> Timing {
        Timing {
            timeout: Duration::from_secs(1),
            resend_max: Duration::from_secs(4),
            resend_timeout: Duration::from_secs(10),
        }
    }

    fn params() -> Params {
        Params {
            client_id: "c/net/eth0".into(),
            mac: MAC,
            options: Options {
                provided: vec![(opt::HOST_NAME, b"web".to_vec())],
                requested: vec![3, 1],
            },
            broadcast: false,
        }
    }

    fn sent(a: &[Action]) -> Vec<(Reply, Ipv4Addr, [u8; 6])> {
        a.iter()
            .filter_map(|a| match a {
                Action::Send { payload, dst, mac, .. } => {
                    let mut p = payload.clone();
                    p[0] = message::BOOTREPLY; // to read it with the reply parser
                    Some((Reply::parse(&p).unwrap(), *dst, *mac))
                }
                _ => None,
            })
            .collect()
    }

    /// A server reply of `kind` to `to`'s transaction, 10.0.0.5/24 from 10.0.0.1, a lease
    /// of `lease` seconds, plus `extra` options.
    fn reply(kind: u8, to: &Reply, lease: u32, extra: &[u8]) -> (Reply, Vec<u8>) {
        let mut o = vec![
            53, 1, kind, 54, 4, 10, 0, 0, 1, 1, 4, 255, 255, 255, 0, 3, 4, 10, 0, 0, 1, 51, 4,
        ];
        o.extend_from_slice(&lease.to_be_bytes());
        o.extend_from_slice(extra);
        o.push(255);
        let b = reply_bytes(to.xid, [10, 0, 0, 5], MAC, &o);
        (Reply::parse(&b).unwrap(), b)
    }

    fn at(t0: Instant, secs: f64) -> (SystemTime, Instant) {
        (
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
            t0 + Duration::from_secs_f64(secs),
        )
    }

    /// ADD's acquisition, to the bound lease.
    fn bound(rng: &mut Rng, t0: Instant, lease: u32, extra: &[u8]) -> Lease {
        let (mut l, a) = Lease::acquire(params(), timing(), t0, rng);
        let (discover, dst, mac) = sent(&a).remove(0);
        assert_eq!(discover.message_type(), Some(MessageType::Discover));
        assert_eq!((dst, mac), (Ipv4Addr::BROADCAST, BROADCAST_MAC));
        assert_eq!(discover.option(opt::CLIENT_ID), Some(&b"\0c/net/eth0"[..]));
        assert_eq!(discover.option(opt::HOST_NAME), Some(&b"web"[..]));
        assert_eq!(discover.option(opt::PARAMETER_REQUEST_LIST), Some(&[3, 1][..]));
        let (offer, bytes) = reply(2, &discover, lease, extra);
        let a = l.on_reply(offer, &bytes, SERVER_MAC, at(t0, 0.1), rng);
        let (request, _, _) = sent(&a).remove(0);
        assert_eq!(request.message_type(), Some(MessageType::Request));
        assert_eq!(request.xid, discover.xid);
        assert_eq!(request.option(opt::REQUESTED_IP), Some(&[10, 0, 0, 5][..]));
        assert_eq!(request.option(opt::SERVER_ID), Some(&[10, 0, 0, 1][..]));
        let (ack, bytes) = reply(5, &request, lease, extra);
        let a = l.on_reply(ack, &bytes, SERVER_MAC, at(t0, 0.2), rng);
        assert!(a.contains(&Action::Bound), "{a:?}");
        assert_eq!(l.phase, Phase::Bound);
        l
    }

    #[test]
    fn acquires_renews_at_t1_rebinds_at_t2_and_acquires_again_after_expiry() {
        let t0 = Instant::now();
        let mut rng = Rng::new(7);
        let mut l = bound(&mut rng, t0, 100, &[]);
        let b = l.binding.as_ref().unwrap();
        assert_eq!(
            (b.address, b.prefix, b.server_mac),
            (Ipv4Addr::new(10, 0, 0, 5), 24, SERVER_MAC)
        );
        // T1 at 50 s: a REQUEST unicast to the server, from the address
        assert_eq!(l.next_event(), Some(t0 + Duration::from_secs_f64(50.2)));
        assert!(l.on_timer(t0 + Duration::from_secs(49), &mut rng).is_empty());
        let a = l.on_timer(t0 + Duration::from_secs(51), &mut rng);
        let (renew, dst, mac) = sent(&a).remove(0);
        assert_eq!((dst, mac), (Ipv4Addr::new(10, 0, 0, 1), SERVER_MAC));
        assert_eq!(renew.ciaddr, Ipv4Addr::new(10, 0, 0, 5));
        assert_eq!(renew.option(opt::SERVER_ID), None);
        // unanswered: repeated with back-off until T2 (85 s), then broadcast
        let mut t = 51.0;
        let mut sends = 1;
        while l.phase == Phase::Renewing {
            t += 0.5;
            sends += sent(&l.on_timer(t0 + Duration::from_secs_f64(t), &mut rng)).len();
        }
        assert!((4..30).contains(&sends), "{sends} transmissions while renewing");
        assert_eq!(l.phase, Phase::Rebinding);
        // expiry at 100 s: DISCOVER again
        let a = l.on_timer(t0 + Duration::from_secs(101), &mut rng);
        assert!(
            a.iter()
                .any(|x| matches!(x, Action::Log(l) if l.contains("lease expired"))),
            "{a:?}"
        );
        assert_eq!(l.phase, Phase::Selecting);
        let (discover, _, _) = sent(&a).remove(0);
        // the same address again: the interface stays as it is
        let (offer, bytes) = reply(2, &discover, 100, &[]);
        let a = l.on_reply(offer, &bytes, SERVER_MAC, at(t0, 112.0), &mut rng);
        let (request, _, _) = sent(&a).remove(0);
        let (ack, bytes) = reply(5, &request, 100, &[]);
        let a = l.on_reply(ack, &bytes, SERVER_MAC, at(t0, 112.1), &mut rng);
        assert!(a.contains(&Action::Bound) && !a.contains(&Action::LinkDown), "{a:?}");
        assert!(
            a.iter()
                .any(|x| matches!(x, Action::Log(l) if l.contains("lease acquired again"))),
            "{a:?}"
        );
    }

    #[test]
    fn a_nak_of_a_renewal_loses_the_lease() {
        let t0 = Instant::now();
        let mut rng = Rng::new(3);
        let mut l = bound(&mut rng, t0, 100, &[]);
        let a = l.on_timer(t0 + Duration::from_secs(60), &mut rng);
        let (renew, _, _) = sent(&a).remove(0);
        let (nak, bytes) = reply(6, &renew, 100, &[56, 3, b'n', b'o', 0]);
        let a = l.on_reply(nak, &bytes, SERVER_MAC, at(t0, 60.1), &mut rng);
        assert!(
            a.iter()
                .any(|x| matches!(x, Action::Log(l) if l.contains("Nak (msg: no?)"))),
            "{a:?}"
        );
        assert_eq!(l.phase, Phase::Selecting);
        assert!(l.binding.is_none());
        // another address comes back: the container's is not its own any more
        let (discover, _, _) = sent(&a).remove(0);
        let (mut offer, mut bytes) = reply(2, &discover, 100, &[]);
        offer.yiaddr = Ipv4Addr::new(10, 0, 0, 6);
        bytes[16..20].copy_from_slice(&[10, 0, 0, 6]);
        let a = l.on_reply(offer, &bytes, SERVER_MAC, at(t0, 60.2), &mut rng);
        let (request, _, _) = sent(&a).remove(0);
        let (mut ack, mut bytes) = reply(5, &request, 100, &[]);
        ack.yiaddr = Ipv4Addr::new(10, 0, 0, 6);
        bytes[16..20].copy_from_slice(&[10, 0, 0, 6]);
        let a = l.on_reply(ack, &bytes, SERVER_MAC, at(t0, 60.3), &mut rng);
        assert!(a.contains(&Action::LinkDown) && a.contains(&Action::Bound), "{a:?}");
    }

    #[test]
    fn broadcast_asks_for_broadcast_replies_until_bound() {
        let t0 = Instant::now();
        let mut rng = Rng::new(19);
        let p = Params {
            broadcast: true,
            ..params()
        };
        let (mut l, a) = Lease::acquire(p, timing(), t0, &mut rng);
        let flags = |a: &[Action]| match &a[0] {
            Action::Send { payload, .. } => u16::from_be_bytes([payload[10], payload[11]]),
            other => panic!("{other:?}"),
        };
        assert_eq!(flags(&a), FLAG_BROADCAST);
        let (discover, _, _) = sent(&a).remove(0);
        let (offer, bytes) = reply(2, &discover, 100, &[]);
        let a = l.on_reply(offer, &bytes, SERVER_MAC, at(t0, 0.1), &mut rng);
        assert_eq!(flags(&a), FLAG_BROADCAST);
        let (request, _, _) = sent(&a).remove(0);
        let (ack, bytes) = reply(5, &request, 100, &[]);
        l.on_reply(ack, &bytes, SERVER_MAC, at(t0, 0.2), &mut rng);
        let a = l.on_timer(t0 + Duration::from_secs(60), &mut rng);
        assert_eq!(flags(&a[1..]), 0, "a renewal comes from the address");
    }

    #[test]
    fn acquiring_gives_up_after_the_resend_timeout() {
        let t0 = Instant::now();
        let mut rng = Rng::new(5);
        let (mut l, _) = Lease::acquire(params(), timing(), t0, &mut rng);
        let mut sends = 1;
        let mut t = 0.0;
        let failed = loop {
            t += 0.1;
            let a = l.on_timer(t0 + Duration::from_secs_f64(t), &mut rng);
            sends += sent(&a).len();
            if let Some(Action::Failed(e)) = a.last() {
                break e.clone();
            }
        };
        assert_eq!(failed, NO_MORE_TRIES);
        assert!((9.9..10.2).contains(&t), "gave up at {t}");
        // 1 s, 2 s, then 4 s (resendmax) apart
        assert!((3..=5).contains(&sends), "{sends}");
        assert!(!l.exchanging());
    }

    #[test]
    fn replies_that_do_not_fit_are_ignored() {
        let t0 = Instant::now();
        let mut rng = Rng::new(11);
        let (mut l, a) = Lease::acquire(params(), timing(), t0, &mut rng);
        let (discover, _, _) = sent(&a).remove(0);
        // another transaction, another client, an ACK before an OFFER
        let (mut other, b) = reply(2, &discover, 100, &[]);
        other.xid ^= 1;
        assert!(l.on_reply(other, &b, SERVER_MAC, at(t0, 0.1), &mut rng).is_empty());
        let (mut foreign, b) = reply(2, &discover, 100, &[]);
        foreign.chaddr[0] ^= 1;
        assert!(l.on_reply(foreign, &b, SERVER_MAC, at(t0, 0.1), &mut rng).is_empty());
        let (ack, b) = reply(5, &discover, 100, &[]);
        assert!(l.on_reply(ack, &b, SERVER_MAC, at(t0, 0.1), &mut rng).is_empty());
        // an OFFER, then an ACK with a lease of 0 s: ignored
        let (offer, b) = reply(2, &discover, 100, &[]);
        let a = l.on_reply(offer, &b, SERVER_MAC, at(t0, 0.2), &mut rng);
        let (request, _, _) = sent(&a).remove(0);
        let (zero, b) = reply(5, &request, 0, &[]);
        assert!(l.on_reply(zero, &b, SERVER_MAC, at(t0, 0.3), &mut rng).is_empty());
        assert!(matches!(l.phase, Phase::Requesting(_)));
        // an infinite lease is kept and never renewed
        let (forever, b) = reply(5, &request, u32::MAX, &[]);
        assert!(l
            .on_reply(forever, &b, SERVER_MAC, at(t0, 0.4), &mut rng)
            .contains(&Action::Bound));
        assert_eq!(l.next_event(), None);
    }

    #[test]
    fn an_ack_without_a_subnet_mask_fails_as_the_reference() {
        let t0 = Instant::now();
        let mut rng = Rng::new(13);
        let (mut l, a) = Lease::acquire(params(), timing(), t0, &mut rng);
        let (discover, _, _) = sent(&a).remove(0);
        let (offer, b) = reply(2, &discover, 100, &[]);
        let a = l.on_reply(offer, &b, SERVER_MAC, at(t0, 0.1), &mut rng);
        let (request, _, _) = sent(&a).remove(0);
        let o = [53, 1, 5, 54, 4, 10, 0, 0, 1, 51, 4, 0, 0, 0, 100, 255];
        let bytes = reply_bytes(request.xid, [10, 0, 0, 5], MAC, &o);
        let a = l.on_reply(Reply::parse(&bytes).unwrap(), &bytes, SERVER_MAC, at(t0, 0.2), &mut rng);
        assert_eq!(
            a,
            vec![Action::Failed("DHCP option Subnet Mask not found in DHCPACK".into())]
        );
    }

    #[test]
    fn results_as_the_reference_builds_them() {
        let t0 = Instant::now();
        let mut rng = Rng::new(17);
        // option 33 (10.9.0.0 classful via 10.0.0.9) and the router: both, default last
        let l = bound(&mut rng, t0, 100, &[33, 8, 10, 9, 0, 0, 10, 0, 0, 9]);
        let (ip, routes) = l.binding.as_ref().unwrap().result(0);
        assert_eq!(ip.address.to_string(), "10.0.0.5/24");
        assert_eq!(ip.gateway, Some("10.0.0.1".parse().unwrap()));
        let shown: Vec<String> = routes.iter().map(|r| format!("{} {:?}", r.dst, r.gw)).collect();
        assert_eq!(shown, ["10.0.0.0/8 Some(10.0.0.9)", "0.0.0.0/0 Some(10.0.0.1)"]);
        // option 121 replaces both; an on-link route gets scope link; priority on each
        let l = bound(
            &mut rng,
            t0,
            100,
            &[121, 13, 24, 192, 168, 5, 0, 0, 0, 0, 0, 10, 0, 0, 1],
        );
        let (_, routes) = l.binding.as_ref().unwrap().result(30);
        assert_eq!(routes.len(), 2);
        assert_eq!(
            (routes[0].dst.to_string(), routes[0].scope),
            ("192.168.5.0/24".into(), Some(253))
        );
        assert_eq!((routes[1].dst.to_string(), routes[1].scope), ("0.0.0.0/0".into(), None));
        assert!(routes.iter().all(|r| r.priority == Some(30)));
    }

    #[test]
    fn server_times_are_kept_in_order() {
        let s = Duration::from_secs;
        assert_eq!(
            times(s(100), None, None),
            Times {
                lease: s(100),
                renew: s(50),
                rebind: s(85)
            }
        );
        assert_eq!(
            times(s(100), Some(10), Some(20)),
            Times {
                lease: s(100),
                renew: s(10),
                rebind: s(20)
            }
        );
        // T2 past the lease, T1 past T2: the defaults
        assert_eq!(
            times(s(100), Some(90), Some(200)),
            Times {
                lease: s(100),
                renew: s(50),
                rebind: s(85)
            }
        );
        // a 1 s lease is not renewed every half second
        assert_eq!(times(s(1), None, None).renew, s(1));
    }
}
