//! The seam under [`Handle`](super::Handle): one request out, the replies that belong to it back.
//!
//! [`Socket`] talks to the kernel through neli's `NlSocketHandle` on the calling thread (no
//! router thread). `testing::FakeTransport` records requests and serves canned
//! replies, so code above this seam can be tested without root.
use std::cell::Cell;

use neli::consts::nl::{NlmF, NlmsgerrAttr};
use neli::consts::socket::NlFamily;
use neli::err::SocketError;
use neli::nl::{NlPayload, NlmsghdrBuilder};
use neli::socket::synchronous::NlSocketHandle;
use neli::types::Buffer;
use neli::utils::Groups;

use super::wire::{NLMSG_DONE, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR};

/// One netlink message: type, flags and the bytes after the 16-byte netlink header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: u16,
    pub flags: u16,
    pub payload: Vec<u8>,
}

/// What came back for one request: its data messages (none for a plain ACK), and whether
/// the kernel flagged a dump as interrupted (the data changed while it was being dumped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    pub messages: Vec<Message>,
    pub interrupted: bool,
}

/// A transport-level failure; the handle turns it into an [`Error`](super::Error) naming the
/// operation and object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// The kernel answered with an error: positive errno, and the extended-ack text if any.
    Kernel { errno: i32, detail: Option<String> },
    /// The socket failed; positive errno when there is one.
    Io { errno: Option<i32>, detail: String },
    /// A reply could not be parsed.
    Protocol(String),
}

/// Sends one request and returns everything the kernel answered to it.
///
/// Contract: for a request with `NLM_F_ACK`, read until its ACK or error; for a dump,
/// read until `NLMSG_DONE`. Replies to other sequence numbers are skipped.
pub trait Transport {
    fn exchange(&self, request: Message) -> Result<Reply, TransportError>;
}

/// A route-netlink socket, bound to the network namespace it was opened in.
pub struct Socket {
    sock: NlSocketHandle,
    seq: Cell<u32>,
}

impl Socket {
    /// Opens a socket in the calling thread's current network namespace.
    pub fn connect() -> Result<Socket, TransportError> {
        let sock = NlSocketHandle::connect(NlFamily::Route, None, Groups::empty()).map_err(socket_error)?;
        // Strict checking lets dumps be filtered by the kernel (per link, per family).
        sock.enable_strict_checking(true).map_err(socket_error)?;
        sock.enable_ext_ack(true).map_err(socket_error)?;
        Ok(Socket {
            sock,
            seq: Cell::new(1),
        })
    }

    fn next_seq(&self) -> u32 {
        let seq = self.seq.get();
        self.seq.set(seq.wrapping_add(1).max(1));
        seq
    }
}

impl Transport for Socket {
    fn exchange(&self, request: Message) -> Result<Reply, TransportError> {
        let seq = self.next_seq();
        let is_dump = request.flags & NLM_F_DUMP == NLM_F_DUMP;
        let msg = NlmsghdrBuilder::default()
            .nl_type(request.kind)
            .nl_flags(NlmF::from_bits_retain(request.flags))
            .nl_seq(seq)
            .nl_payload(NlPayload::Payload(Buffer::from(request.payload)))
            .build()
            .map_err(|e| TransportError::Protocol(e.to_string()))?;
        self.sock.send(&msg).map_err(socket_error)?;

        let mut reply = Reply::default();
        loop {
            let (iter, _) = self.sock.recv::<u16, Buffer>().map_err(socket_error)?;
            for m in iter {
                let m = m.map_err(socket_error)?;
                if *m.nl_seq() != seq {
                    continue; // a late answer to an earlier request
                }
                let flags = m.nl_flags().bits();
                if flags & NLM_F_DUMP_INTR != 0 {
                    reply.interrupted = true;
                }
                match m.nl_payload() {
                    NlPayload::Ack(_) => return Ok(reply),
                    NlPayload::Err(e) => {
                        let detail = e
                            .ext_ack()
                            .get_attr_handle()
                            .get_attr_payload_as_with_len::<String>(NlmsgerrAttr::Msg)
                            .ok()
                            .filter(|s| !s.is_empty());
                        return Err(TransportError::Kernel {
                            errno: -*e.error(),
                            detail,
                        });
                    }
                    _ if *m.nl_type() == NLMSG_DONE => return Ok(reply),
                    NlPayload::Payload(p) => {
                        reply.messages.push(Message {
                            kind: *m.nl_type(),
                            flags,
                            payload: p.as_ref().to_vec(),
                        });
                        if !is_dump && request.flags & NLM_F_ACK == 0 {
                            return Ok(reply); // a plain GET without ACK ends with its one answer
                        }
                    }
                    NlPayload::DumpExtAck(_) | NlPayload::Empty => {}
                }
            }
        }
    }
}

fn socket_error(e: SocketError) -> TransportError {
    match e {
        SocketError::Io(io) => TransportError::Io {
            errno: io.raw_os_error(),
            detail: io.to_string(),
        },
        other => TransportError::Protocol(other.to_string()),
    }
}

impl<T: Transport + ?Sized> Transport for &T {
    fn exchange(&self, request: Message) -> Result<Reply, TransportError> {
        (**self).exchange(request)
    }
}
