//! The seam under [`Handle`](super::Handle): one request out, the replies that belong to it back.
//!
//! [`Socket`] talks to the kernel through neli's `NlSocket` on the calling thread (no
//! router thread), messages built and parsed by neli. `testing::FakeTransport` records
//! requests and serves canned replies, so code above this seam can be tested without root.
use std::cell::{Cell, RefCell};
use std::io::Cursor;

use neli::consts::nl::{NlmF, NlmsgerrAttr};
use neli::consts::socket::{Msg, NlFamily};
use neli::err::SocketError;
use neli::nl::{NlPayload, Nlmsghdr, NlmsghdrBuilder};
use neli::socket::NlSocket;
use neli::types::Buffer;
use neli::utils::Groups;
use neli::{FromBytes, Size, ToBytes};

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

/// The receive buffer: what neli's socket handle reads into (the kernel sizes a dump's
/// messages to the reader's buffer, up to this).
const RECV_LEN: usize = 32768;

/// A route-netlink socket, bound to the network namespace it was opened in.
///
/// It reads into its own buffer rather than through neli's `NlSocketHandle`, whose buffer
/// pool zero-fills 32 KiB after every read (a byte loop at the release profile's opt-level,
/// ~20 µs a read, a few dozen reads per ADD) and allocates three such buffers per socket.
pub struct Socket {
    sock: NlSocket,
    seq: Cell<u32>,
    buf: RefCell<Vec<u8>>,
}

impl Socket {
    /// Opens a socket in the calling thread's current network namespace.
    pub fn connect() -> Result<Socket, TransportError> {
        let io = |e: std::io::Error| socket_error(e.into());
        let sock = NlSocket::connect(NlFamily::Route, None, Groups::empty()).map_err(io)?;
        // Strict checking lets dumps be filtered by the kernel (per link, per family).
        sock.enable_strict_checking(true).map_err(io)?;
        sock.enable_ext_ack(true).map_err(io)?;
        Ok(Socket {
            sock,
            seq: Cell::new(1),
            buf: RefCell::new(vec![0; RECV_LEN]),
        })
    }

    fn send(&self, msg: &Nlmsghdr<u16, Buffer>) -> Result<(), TransportError> {
        let mut out = Cursor::new(vec![0; msg.padded_size()]);
        msg.to_bytes(&mut out).map_err(|e| socket_error(e.into()))?;
        self.sock
            .send(out.get_ref(), Msg::empty())
            .map_err(|e| socket_error(e.into()))?;
        Ok(())
    }

    /// One read: the messages it holds, parsed.
    fn recv(&self) -> Result<Vec<Nlmsghdr<u16, Buffer>>, TransportError> {
        let mut buf = self.buf.borrow_mut();
        let (n, _) = self
            .sock
            .recv(&mut buf[..], Msg::empty())
            .map_err(|e| socket_error(e.into()))?;
        if n == 0 {
            return Err(TransportError::Io {
                errno: None,
                detail: "netlink socket read returned nothing".into(),
            });
        }
        parse(&buf[..n])
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
        self.send(&msg)?;

        let mut reply = Reply::default();
        loop {
            for m in self.recv()? {
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

/// The netlink messages of one read.
pub(crate) fn parse(read: &[u8]) -> Result<Vec<Nlmsghdr<u16, Buffer>>, TransportError> {
    let mut cursor = Cursor::new(read);
    let mut out = Vec::new();
    while (cursor.position() as usize) < read.len() {
        out.push(Nlmsghdr::from_bytes(&mut cursor).map_err(|e| socket_error(e.into()))?);
    }
    Ok(out)
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
