//! The `NETLINK_NETFILTER` socket of one network namespace: single requests (GET, dump,
//! ctnetlink changes) and nfnetlink batches (all messages applied atomically, or none).
use crate::netlink::bytes::{host16, host32, net16, read_host16, read_host32, read_host_i32};
use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

use neli::consts::socket::{Msg, NlFamily};
use neli::socket::NlSocket;
use neli::utils::Groups;

use super::{NFGENMSG_LEN, NFNETLINK_V0, NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END};
use crate::netlink::handle::Op;
use crate::netlink::transport::TransportError;
use crate::netlink::wire::{NLMSG_DONE, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST};
use crate::netlink::{Error, ErrorKind, Result};
use crate::netns::Netns;

const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
/// The error message carries only the header of the failed request (not all of it).
const NLM_F_CAPPED: u16 = 0x100;
/// Extended-ack attributes follow the error.
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;
/// Receive buffer: the kernel fills dump datagrams up to 32 KiB.
const RECV_LEN: usize = 64 * 1024;
/// How often an nf_tables dump is repeated when a commit interrupted it. Every commit in
/// the namespace interrupts a dump that spans several datagrams (a chain of a few hundred
/// rules), and on a busy node other plugins commit all the time: ten parallel DELs on one
/// network ran out of rtnetlink's five quick attempts. From the fourth attempt on, the
/// dump waits a little longer each time (0.1 ms more per attempt: about 0.2 s in all)
/// for a quiet moment.
const DUMP_ATTEMPTS: usize = 64;
const QUIET_ATTEMPTS: usize = 3;
const BACKOFF_STEP: std::time::Duration = std::time::Duration::from_micros(100);

/// One nfnetlink message as received: type `(subsys << 8) | msg`, flags, the nfgenmsg
/// family, and the attribute bytes after the nfgenmsg header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NfMessage {
    pub kind: u16,
    pub flags: u16,
    pub family: u8,
    pub attrs: Vec<u8>,
}

/// A netfilter socket, bound to the network namespace it was opened in. Dropping it does
/// not wait for the kernel (see [`crate::util::release`]).
pub struct NfSocket {
    /// Taken out only by `drop`.
    sock: ManuallyDrop<NlSocket>,
    seq: Cell<u32>,
    buf: RefCell<Vec<u8>>,
}

impl Drop for NfSocket {
    fn drop(&mut self) {
        // SAFETY: `sock` is not used again: this is the socket's last moment.
        let sock = unsafe { ManuallyDrop::take(&mut self.sock) };
        // SAFETY: `into_raw_fd` hands over the descriptor neli owned.
        let fd = unsafe { OwnedFd::from_raw_fd(sock.into_raw_fd()) };
        crate::util::release::close_without_waiting(fd);
    }
}

impl NfSocket {
    /// A socket in the calling thread's current network namespace.
    pub fn current() -> Result<NfSocket> {
        NfSocket::connect().map_err(|e| Op::new("open", "netfilter netlink socket").transport(e))
    }

    /// A socket in `netns`: created inside it, then the thread comes back.
    pub fn open(netns: &Netns) -> Result<NfSocket> {
        let op = Op::new(
            "open",
            format!("netfilter netlink socket in {}", netns.path().display()),
        );
        let socket = netns
            .run(NfSocket::connect)
            .map_err(|e| op.error(ErrorKind::Netns).with_detail(e.to_string()))?;
        socket.map_err(|e| op.transport(e))
    }

    fn connect() -> std::result::Result<NfSocket, TransportError> {
        let io = |e: std::io::Error| TransportError::Io {
            errno: e.raw_os_error(),
            detail: e.to_string(),
        };
        let sock = NlSocket::connect(NlFamily::Netfilter, None, Groups::empty()).map_err(io)?;
        sock.block().map_err(io)?;
        sock.enable_ext_ack(true).map_err(io)?;
        Ok(NfSocket {
            sock: ManuallyDrop::new(sock),
            seq: Cell::new(1),
            buf: RefCell::new(vec![0; RECV_LEN]),
        })
    }

    fn next_seq(&self) -> u32 {
        let seq = self.seq.get();
        self.seq.set(seq.wrapping_add(1).max(1));
        seq
    }

    /// One request outside a batch: a GET (its answer, then the ACK), a dump (repeated
    /// while the kernel flags it as interrupted), or a change (ACK awaited).
    /// `op` and `object` name the request in errors ("list rules", "inet t c").
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &self,
        op: &str,
        object: &str,
        kind: u16,
        flags: u16,
        family: u8,
        res_id: u16,
        attrs: &[u8],
    ) -> Result<Vec<NfMessage>> {
        let op = &Op::new(op, object);
        let is_dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let flags = flags | NLM_F_REQUEST | if is_dump { 0 } else { NLM_F_ACK };
        for attempt in 0..DUMP_ATTEMPTS {
            if attempt >= QUIET_ATTEMPTS {
                std::thread::sleep(BACKOFF_STEP * attempt as u32);
            }
            let seq = self.next_seq();
            let mut out = Vec::new();
            put_message(&mut out, kind, flags, seq, family, res_id, attrs);
            self.send(&out).map_err(|e| op.transport(e))?;
            let mut messages = Vec::new();
            let mut interrupted = false;
            let mut error = None;
            self.receive(|m| {
                if m.seq != seq {
                    return Step::More; // a late answer to an earlier request
                }
                interrupted |= m.flags & NLM_F_DUMP_INTR != 0;
                match m.kind {
                    NLMSG_ERROR => {
                        error = m.error();
                        Step::Done
                    }
                    NLMSG_DONE => Step::Done,
                    _ => {
                        messages.push(m.into_nf());
                        Step::More
                    }
                }
            })
            .map_err(|e| op.transport(e))?;
            if let Some(e) = error {
                return Err(op.transport(e));
            }
            if !interrupted {
                return Ok(messages);
            }
        }
        Err(op
            .error(ErrorKind::Kernel)
            .with_errno(libc::EINTR)
            .with_detail(format!("dump interrupted {DUMP_ATTEMPTS} times in a row")))
    }

    /// Sends the batch in one datagram and waits for the ACK of every message. The kernel
    /// applies all of it or nothing; the first failure is returned, naming its message.
    /// Returns what the kernel echoed of the messages sent with `NLM_F_ECHO` (the objects
    /// as committed, with the handles it gave them).
    pub fn commit(&self, batch: Batch) -> Result<Vec<NfMessage>> {
        if batch.messages.is_empty() {
            return Ok(vec![]);
        }
        self.fit_acks(batch.messages.len());
        let res_id = u16::from(batch.subsys);
        let mut out = Vec::new();
        let begin = self.next_seq();
        let mut begin_attrs = super::Attrs::new();
        if let Some(g) = batch.genid {
            begin_attrs.be32(NFNL_BATCH_GENID, g);
        }
        put_message(
            &mut out,
            NFNL_MSG_BATCH_BEGIN,
            NLM_F_REQUEST,
            begin,
            0,
            res_id,
            begin_attrs.as_bytes(),
        );
        let mut pending = Vec::with_capacity(batch.messages.len());
        for m in &batch.messages {
            let seq = self.next_seq();
            put_message(
                &mut out,
                m.kind,
                m.flags | NLM_F_REQUEST | NLM_F_ACK,
                seq,
                m.family,
                0,
                &m.attrs,
            );
            pending.push(seq);
        }
        let end = self.next_seq();
        put_message(&mut out, NFNL_MSG_BATCH_END, NLM_F_REQUEST, end, 0, res_id, &[]);

        let whole = Op::new(
            "commit",
            format!("netfilter batch of {} messages", batch.messages.len()),
        );
        self.send(&out).map_err(|e| whole.transport(e))?;
        let mut failure: Option<(Option<usize>, TransportError)> = None;
        let mut answered = 0;
        let mut echoed = Vec::new();
        self.receive(|m| {
            if m.kind != NLMSG_ERROR {
                // the commit's echoes come before the ACKs
                if pending.contains(&m.seq) {
                    echoed.push(m.into_nf());
                }
                return Step::More;
            }
            if m.seq == begin {
                // The batch as a whole was refused (no such subsystem, commit failed).
                if let Some(e) = m.error() {
                    failure.get_or_insert((None, e));
                }
                return Step::Done;
            }
            let Some(i) = pending.iter().position(|s| *s == m.seq) else {
                return Step::More;
            };
            if let Some(e) = m.error() {
                failure.get_or_insert((Some(i), e));
            }
            answered += 1;
            if answered == pending.len() {
                Step::Done
            } else {
                Step::More
            }
        })
        .map_err(|e| whole.transport(e))?;
        match failure {
            None => Ok(echoed),
            Some((Some(i), e)) => Err(batch.messages[i].op.transport(e)),
            Some((None, e)) => Err(batch.ops_summary().transport(e)),
        }
    }

    /// Makes room for a batch's ACKs: the kernel queues all of them before the first is
    /// read, each counted at about 1 KiB, and the default receive buffer (~208 KiB)
    /// overflows at about 200 messages: the commit then fails with ENOBUFS (a GC deleting
    /// a few hundred rules). nft sizes its buffer to the batch the same way. Root may
    /// exceed `rmem_max` (SO_RCVBUFFORCE); otherwise the plain request is capped by it.
    fn fit_acks(&self, messages: usize) {
        const PER_ACK: usize = 1024;
        const DEFAULT_ROOM: usize = 128;
        if messages <= DEFAULT_ROOM {
            return;
        }
        let size = (messages * PER_ACK).min(64 << 20) as libc::c_int;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&*self.sock);
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: a valid socket, and a c_int option value of the size given.
            let r = unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, opt, (&size as *const libc::c_int).cast(), len) };
            if r == 0 {
                return;
            }
        }
    }

    fn send(&self, bytes: &[u8]) -> std::result::Result<(), TransportError> {
        self.sock
            .send(bytes, Msg::empty())
            .map(drop)
            .map_err(|e| TransportError::Io {
                errno: e.raw_os_error(),
                detail: e.to_string(),
            })
    }

    /// Reads datagrams and hands each message to `each` until it says done.
    fn receive(&self, mut each: impl FnMut(Raw) -> Step) -> std::result::Result<(), TransportError> {
        let mut buf = self.buf.borrow_mut();
        loop {
            let (n, _) = self
                .sock
                .recv(&mut buf[..], Msg::empty())
                .map_err(|e| TransportError::Io {
                    errno: e.raw_os_error(),
                    detail: e.to_string(),
                })?;
            let mut rest = &buf[..n];
            while rest.len() >= NLMSG_HDRLEN {
                let len = read_host32(rest).unwrap_or(0) as usize;
                if len < NLMSG_HDRLEN || len > rest.len() {
                    return Err(TransportError::Protocol(format!("netlink message of length {len}")));
                }
                let raw = Raw {
                    kind: read_host16(&rest[4..]).unwrap_or(0),
                    flags: read_host16(&rest[6..]).unwrap_or(0),
                    seq: read_host32(&rest[8..]).unwrap_or(0),
                    body: &rest[NLMSG_HDRLEN..len],
                };
                if let Step::Done = each(raw) {
                    return Ok(());
                }
                rest = &rest[((len + 3) & !3).min(rest.len())..];
            }
        }
    }
}

enum Step {
    More,
    Done,
}

/// A received message, borrowed from the receive buffer.
struct Raw<'a> {
    kind: u16,
    flags: u16,
    seq: u32,
    body: &'a [u8],
}

impl Raw<'_> {
    /// For NLMSG_ERROR: None for an ACK, else the errno and the extended-ack text.
    fn error(&self) -> Option<TransportError> {
        let code = read_host_i32(self.body)?;
        if code == 0 {
            return None;
        }
        let mut detail = None;
        if self.flags & NLM_F_ACK_TLVS != 0 {
            // After the errno: the failed request's header (or the whole request).
            let echoed = if self.flags & NLM_F_CAPPED != 0 {
                NLMSG_HDRLEN
            } else {
                self.body
                    .get(4..8)
                    .and_then(read_host32)
                    .map(|l| l as usize)
                    .unwrap_or(NLMSG_HDRLEN)
            };
            let tlvs = self.body.get(4 + ((echoed + 3) & !3)..).unwrap_or(&[]);
            detail = crate::netlink::wire::find(tlvs, NLMSGERR_ATTR_MSG)
                .map(crate::netlink::wire::as_string)
                .filter(|s| !s.is_empty());
        }
        Some(TransportError::Kernel { errno: -code, detail })
    }

    fn into_nf(self) -> NfMessage {
        NfMessage {
            kind: self.kind,
            flags: self.flags,
            family: self.body.first().copied().unwrap_or(0),
            attrs: self.body.get(NFGENMSG_LEN..).unwrap_or(&[]).to_vec(),
        }
    }
}

/// netlink header + nfgenmsg + attributes.
fn put_message(out: &mut Vec<u8>, kind: u16, flags: u16, seq: u32, family: u8, res_id: u16, attrs: &[u8]) {
    let len = NLMSG_HDRLEN + NFGENMSG_LEN + attrs.len();
    out.extend_from_slice(&host32(len as u32));
    out.extend_from_slice(&host16(kind));
    out.extend_from_slice(&host16(flags));
    out.extend_from_slice(&host32(seq));
    out.extend_from_slice(&host32(0)); // port id: the kernel fills it in
    out.push(family);
    out.push(NFNETLINK_V0);
    out.extend_from_slice(&net16(res_id));
    out.extend_from_slice(attrs);
    out.resize((out.len() + 3) & !3, 0);
}

/// One message of a batch, with the operation and object its errors name.
struct BatchMessage {
    kind: u16,
    flags: u16,
    family: u8,
    attrs: Vec<u8>,
    op: Op,
}

/// An nfnetlink batch for one subsystem: every message is applied, or none is.
pub struct Batch {
    subsys: u8,
    messages: Vec<BatchMessage>,
    /// NFNL_BATCH_GENID: the generation the batch was planned against.
    genid: Option<u32>,
}

/// NFNL_BATCH_GENID, the batch-begin attribute that makes a batch conditional.
const NFNL_BATCH_GENID: u16 = 1;

impl Batch {
    pub fn new(subsys: u8) -> Batch {
        Batch {
            subsys,
            messages: Vec::new(),
            genid: None,
        }
    }

    /// Refuse the whole batch, with ERESTART and nothing applied, if the subsystem's
    /// ruleset changed since generation `genid` was read: how iptables-nft makes its
    /// read-plan-commit atomic without a lock.
    pub fn only_if_generation(&mut self, genid: u32) {
        self.genid = Some(genid);
    }

    /// Adds a message; `op` and `object` name it in errors ("add rule", "inet t c").
    pub fn push(&mut self, op: &str, object: String, kind: u16, flags: u16, family: u8, attrs: Vec<u8>) {
        self.messages.push(BatchMessage {
            kind,
            flags,
            family,
            attrs,
            op: Op::new(op, object),
        });
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    fn ops_summary(&self) -> Op {
        Op::new("commit", format!("netfilter batch of {} messages", self.messages.len()))
    }
}

impl Error {
    /// Whether the failure says netfilter netlink (or the subsystem) is missing here.
    pub fn is_netfilter_missing(&self) -> bool {
        matches!(
            self.errno(),
            Some(libc::EPROTONOSUPPORT) | Some(libc::EOPNOTSUPP) | Some(libc::EAFNOSUPPORT)
        )
    }
}
