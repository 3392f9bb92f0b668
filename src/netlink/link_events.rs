//! Link events: a route-netlink socket subscribed to the kernel's link notifications
//! (`RTNLGRP_LINK`) in the namespace it was opened in, to learn that a link reached a state
//! without asking for the link.
//!
//! Why not ask: every `RTM_GETLINK` takes the kernel's global RTNL lock. Right after a
//! container interface comes up, that lock is held by the kernel's own work for the new
//! interface (IPv6 finishing address setup and sending its MLD reports and router
//! solicitation, which a bridge floods to every port: the longer, the fuller the bridge).
//! A question asked then queues behind all of it. The link watcher, which sets the link's
//! new state and announces it, was queued for the lock when the carrier came on, before that
//! work, so its notification usually comes first.
//!
//! Notifications can be lost (the socket's queue overflows on a busy node, `ENOBUFS`), so
//! a caller treats "nothing heard" as "ask the kernel" ([`Heard::Nothing`]), never as an
//! answer.
use std::cell::RefCell;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use neli::consts::socket::{Msg, NlFamily};
use neli::nl::NlPayload;
use neli::socket::NlSocket;
use neli::utils::Groups;

use super::handle::{Op, Result};
use super::link::{decode_link, Link};
use super::transport::{self, Message, TransportError};
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
        let Ok(messages) = transport::parse(&buf[..n]) else {
            return Read::Lost;
        };
        let notices = messages.iter().filter_map(|m| match m.nl_payload() {
            NlPayload::Payload(p) => Some(Message {
                kind: *m.nl_type(),
                flags: m.nl_flags().bits(),
                payload: p.as_ref().to_vec(),
            }),
            _ => None,
        });
        Read::Messages(notices.collect())
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
    // the ifinfomsg starts with its family
    if m.payload.first() != Some(&AF_UNSPEC) {
        return None;
    }
    let link = decode_link(&Op::new("read", "link notification"), m).ok()?;
    match m.kind {
        _ if link.index != index => None,
        RTM_DELLINK => Some(Notice::Deleted),
        RTM_NEWLINK => Some(Notice::Changed(Box::new(link))),
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
