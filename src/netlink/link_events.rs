//! Link events: a route-netlink socket subscribed to the kernel's link notifications
//! (`RTNLGRP_LINK`) in the namespace it was opened in, to learn that a link reached a state
//! without asking for the link.
//!
//! Why not ask: every `RTM_GETLINK` takes the kernel's global RTNL lock. Right after a
//! container interface comes up, that lock is held by the kernel's own work for the new
//! interface (IPv6 finishing address setup and sending its MLD reports and router
//! solicitation, which a bridge floods to every port: the longer, the fuller the bridge).
//! A question asked then waits for all of it; the notification the link watcher sends when
//! the link's state changes does not.
//!
//! Notifications can be lost (the socket's queue overflows on a busy node, `ENOBUFS`), so
//! a caller treats "nothing heard" as "ask the kernel" ([`Heard::Nothing`]), never as an
//! answer.
use std::cell::RefCell;
use std::io::Cursor;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use neli::consts::socket::{Msg, NlFamily};
use neli::nl::{NlPayload, Nlmsghdr};
use neli::socket::NlSocket;
use neli::types::Buffer;
use neli::utils::Groups;
use neli::FromBytes;

use super::handle::{Op, Result};
use super::link::{decode_link, Link};
use super::transport::{Message, TransportError};
use super::wire::{AF_UNSPEC, RTM_DELLINK, RTM_NEWLINK};

/// The rtnetlink multicast group of link notifications (uapi `RTNLGRP_LINK`).
const RTNLGRP_LINK: u32 = 1;
/// One read's buffer: a link notification is about 1.5 KiB.
const RECV_LEN: usize = 32768;

/// What the notifications said about a link within the time given.
#[derive(Debug)]
pub enum Heard {
    /// The link as the kernel announced it, in the wanted state.
    Link(Box<Link>),
    /// Nothing that answers the question: no notification, the link's were of other
    /// states, the link was deleted, or notifications were lost. Ask the kernel.
    Nothing,
}

/// A socket subscribed to link notifications in one network namespace.
pub struct LinkEvents {
    sock: NlSocket,
    buf: RefCell<Vec<u8>>,
}

impl LinkEvents {
    /// Subscribes in the calling thread's current namespace. Only notifications sent after
    /// this call are heard: subscribe before the change that is to be waited for.
    pub fn subscribe() -> Result<LinkEvents> {
        let op = Op::new("subscribe to", "link notifications");
        let io = |e: std::io::Error| {
            op.transport(TransportError::Io {
                errno: e.raw_os_error(),
                detail: e.to_string(),
            })
        };
        let sock = NlSocket::connect(NlFamily::Route, None, Groups::new_groups(&[RTNLGRP_LINK])).map_err(io)?;
        sock.nonblock().map_err(io)?;
        Ok(LinkEvents {
            sock,
            buf: RefCell::new(vec![0; RECV_LEN]),
        })
    }

    /// Waits up to `timeout` for a notification of link `index` (family `AF_UNSPEC`: the
    /// one sent after every handler of the change has run, as `RTM_GETLINK` would see the
    /// link) for which `wanted` holds.
    pub fn wait_for(&self, index: u32, timeout: Duration, wanted: impl Fn(&Link) -> bool) -> Heard {
        let deadline = Instant::now() + timeout;
        loop {
            match self.read() {
                Read::Messages(messages) => {
                    for m in messages {
                        match about(&m, index) {
                            Some(Notice::Changed(link)) if wanted(&link) => return Heard::Link(link),
                            Some(Notice::Deleted) => return Heard::Nothing,
                            _ => {}
                        }
                    }
                    continue;
                }
                Read::Empty => {}
                Read::Lost => return Heard::Nothing,
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.readable_within(left) {
                return Heard::Nothing;
            }
        }
    }

    /// One non-blocking read.
    fn read(&self) -> Read {
        let mut buf = self.buf.borrow_mut();
        let n = match self.sock.recv(&mut buf[..], Msg::empty()) {
            Ok((n, _)) => n,
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Read::Empty,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => return Read::Messages(vec![]),
            // ENOBUFS: notifications were dropped; anything else: the socket is unusable
            Err(_) => return Read::Lost,
        };
        let mut cursor = Cursor::new(&buf[..n]);
        let mut out = Vec::new();
        while (cursor.position() as usize) < n {
            let Ok(m) = Nlmsghdr::<u16, Buffer>::from_bytes(&mut cursor) else {
                return Read::Lost;
            };
            if let NlPayload::Payload(p) = m.nl_payload() {
                out.push(Message {
                    kind: *m.nl_type(),
                    flags: m.nl_flags().bits(),
                    payload: p.as_ref().to_vec(),
                });
            }
        }
        Read::Messages(out)
    }

    fn readable_within(&self, timeout: Duration) -> bool {
        // SAFETY: the descriptor is owned by `self.sock`, open for the whole call.
        let fd = unsafe { BorrowedFd::borrow_raw(self.sock.as_raw_fd()) };
        let mut fds = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
        // rounded up: poll's milliseconds must not end the wait before the deadline
        let ms = timeout.as_micros().div_ceil(1000).clamp(1, u16::MAX as u128) as u16;
        matches!(nix::poll::poll(&mut fds, ms), Ok(n) if n > 0)
    }
}

enum Read {
    Messages(Vec<Message>),
    Empty,
    Lost,
}

enum Notice {
    Changed(Box<Link>),
    Deleted,
}

/// What notification `m` says about link `index`, if it is about it.
fn about(m: &Message, index: u32) -> Option<Notice> {
    // ifinfomsg: family (1 byte), pad, type (2), index (4)
    let family = *m.payload.first()?;
    let of = u32::from_ne_bytes(m.payload.get(4..8)?.try_into().ok()?);
    if family != AF_UNSPEC || of != index {
        return None;
    }
    match m.kind {
        RTM_DELLINK => Some(Notice::Deleted),
        RTM_NEWLINK => decode_link(&Op::new("read", "link notification"), m)
            .ok()
            .map(|l| Notice::Changed(Box::new(l))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifinfo(kind: u16, family: u8, index: u32) -> Message {
        let mut payload = vec![family, 0, 0, 0];
        payload.extend_from_slice(&index.to_ne_bytes());
        payload.extend_from_slice(&[0; 8]); // flags, change
        Message {
            kind,
            flags: 0,
            payload,
        }
    }

    #[test]
    fn only_the_links_own_unspec_family_notifications_count() {
        assert!(matches!(about(&ifinfo(RTM_NEWLINK, AF_UNSPEC, 7), 7), Some(Notice::Changed(l)) if l.index == 7));
        assert!(matches!(
            about(&ifinfo(RTM_DELLINK, AF_UNSPEC, 7), 7),
            Some(Notice::Deleted)
        ));
        // the bridge's per-port notification comes from inside the change's handlers
        assert!(about(&ifinfo(RTM_NEWLINK, super::super::wire::AF_BRIDGE, 7), 7).is_none());
        assert!(about(&ifinfo(RTM_NEWLINK, AF_UNSPEC, 8), 7).is_none());
        assert!(about(
            &Message {
                kind: RTM_NEWLINK,
                flags: 0,
                payload: vec![0, 0]
            },
            7
        )
        .is_none());
    }
}
