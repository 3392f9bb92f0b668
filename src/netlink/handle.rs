//! The handle: one route-netlink socket bound to one network namespace, and the request
//! discipline every operation shares (ACK on every request, typed errors, dump retries).
use super::error::{Error, ErrorKind};
use super::transport::{Message, Socket, Transport, TransportError};
use super::wire::{NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST};
use crate::netns::Netns;

/// Result of the netlink layer.
pub type Result<T> = std::result::Result<T, Error>;

/// How often a dump is repeated when the kernel says it was interrupted by a change.
pub(crate) const DUMP_ATTEMPTS: usize = 5;

/// A synchronous route-netlink handle for one network namespace.
///
/// The socket is opened while the thread sits in the target namespace and stays bound to
/// it, so a plugin holds one handle for the host and one for the container and never
/// switches namespaces per request.
pub struct Handle<T: Transport = Socket> {
    transport: T,
}

impl Handle<Socket> {
    /// A handle for the calling thread's current namespace.
    pub fn current() -> Result<Handle<Socket>> {
        let transport = Socket::connect().map_err(|e| Op::new("open", "netlink socket").transport(e))?;
        Ok(Handle { transport })
    }

    /// A handle for `netns`: the socket is created inside it, then the thread comes back.
    pub fn open(netns: &Netns) -> Result<Handle<Socket>> {
        let op = Op::new("open", format!("netlink socket in {}", netns.path().display()));
        let socket = netns
            .run(Socket::connect)
            .map_err(|e| op.error(ErrorKind::Netns).with_detail(e.to_string()))?;
        Ok(Handle {
            transport: socket.map_err(|e| op.transport(e))?,
        })
    }
}

impl<T: Transport> Handle<T> {
    /// A handle over any transport (the fake one of `testing` in unit tests).
    pub fn with_transport(transport: T) -> Handle<T> {
        Handle { transport }
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// A request that changes something: ACK requested and awaited, so errors are never lost.
    pub(crate) fn modify(&self, op: &Op, kind: u16, flags: u16, payload: Vec<u8>) -> Result<()> {
        let request = Message {
            kind,
            flags: flags | NLM_F_REQUEST | NLM_F_ACK,
            payload,
        };
        self.transport.exchange(request).map(drop).map_err(|e| op.transport(e))
    }

    /// A GET for one object; its answer, then the ACK.
    pub(crate) fn get(&self, op: &Op, kind: u16, payload: Vec<u8>) -> Result<Vec<Message>> {
        let request = Message {
            kind,
            flags: NLM_F_REQUEST | NLM_F_ACK,
            payload,
        };
        self.transport
            .exchange(request)
            .map(|r| r.messages)
            .map_err(|e| op.transport(e))
    }

    /// A dump, repeated while the kernel flags it as interrupted (NLM_F_DUMP_INTR): the
    /// objects changed during the dump, so the list may be inconsistent.
    pub(crate) fn dump(&self, op: &Op, kind: u16, payload: Vec<u8>) -> Result<Vec<Message>> {
        for _ in 0..DUMP_ATTEMPTS {
            let request = Message {
                kind,
                flags: NLM_F_REQUEST | NLM_F_DUMP,
                payload: payload.clone(),
            };
            let reply = self.transport.exchange(request).map_err(|e| op.transport(e))?;
            if !reply.interrupted {
                return Ok(reply.messages);
            }
        }
        Err(op
            .error(ErrorKind::Kernel)
            .with_errno(libc::EINTR)
            .with_detail(format!("dump interrupted {DUMP_ATTEMPTS} times in a row")))
    }
}

/// What is being done to what: the context every error carries.
pub(crate) struct Op {
    op: String,
    object: String,
    /// The kernel feature this request depends on; EOPNOTSUPP then names it.
    feature: Option<&'static str>,
    /// The link kind a create request makes: the kernel's "Unknown device type" names it.
    link_kind: Option<String>,
}

/// The kernel's extended-ack text when it has no driver for a link kind (rtnl_newlink).
const UNKNOWN_DEVICE_TYPE: &str = "Unknown device type";

impl Op {
    pub(crate) fn new(op: impl Into<String>, object: impl Into<String>) -> Op {
        Op {
            op: op.into(),
            object: object.into(),
            feature: None,
            link_kind: None,
        }
    }

    pub(crate) fn feature(mut self, feature: &'static str) -> Op {
        self.feature = Some(feature);
        self
    }

    /// A request creating a link of `kind`: a kernel without that kind answers EOPNOTSUPP
    /// with "Unknown device type", which becomes Unsupported naming the kind. EOPNOTSUPP with
    /// another text, or none, stays a kernel error: a kernel that has the kind refuses this
    /// link (a VLAN on a VLAN-challenged master says so), and a bare errno proves nothing.
    pub(crate) fn link_kind(mut self, kind: &str) -> Op {
        self.link_kind = Some(kind.to_string());
        self
    }

    pub(crate) fn error(&self, kind: ErrorKind) -> Error {
        Error::new(self.op.clone(), self.object.clone(), kind)
    }

    /// An encoding failure (never expected: our payloads are plain bytes and integers).
    pub(crate) fn encode(&self, detail: String) -> Error {
        self.error(ErrorKind::Protocol).with_detail(format!("encode: {detail}"))
    }

    pub(crate) fn decode(&self, detail: impl Into<String>) -> Error {
        self.error(ErrorKind::Protocol).with_detail(detail)
    }

    /// The kernel lacks `feature` (a link kind, a qdisc, a netfilter family): the error names it.
    pub(crate) fn unsupported(&self, feature: &'static str, errno: i32, detail: Option<String>) -> Error {
        let e = self
            .error(ErrorKind::Unsupported {
                feature: feature.to_string(),
            })
            .with_errno(errno);
        match detail {
            Some(d) => e.with_detail(d),
            None => e,
        }
    }

    pub(crate) fn transport(&self, e: TransportError) -> Error {
        match e {
            TransportError::Kernel { errno, detail } => {
                let unsupported = matches!(errno, libc::EOPNOTSUPP | libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT);
                // the kernel's own word for a missing kind beats a feature of the kind's data
                let unknown_kind = errno == libc::EOPNOTSUPP && detail.as_deref() == Some(UNKNOWN_DEVICE_TYPE);
                match (self.feature, &self.link_kind) {
                    (_, Some(kind)) if unknown_kind => self
                        .error(ErrorKind::Unsupported { feature: kind.clone() })
                        .with_errno(errno),
                    (Some(feature), _) if unsupported => self.unsupported(feature, errno, detail),
                    _ => Error::from_errno(&self.op, &self.object, errno, detail),
                }
            }
            TransportError::Io { errno, detail } => match errno {
                Some(n) => self.error(ErrorKind::Io).with_errno(n),
                None => self.error(ErrorKind::Io).with_detail(detail),
            },
            TransportError::Protocol(detail) => self.decode(detail),
        }
    }
}
