//! The container's side of a lease: its interface, found in its network namespace, and the
//! packet socket the lease's messages go through. The daemon enters the namespace only to
//! look the link up and to create the socket (which stays bound to the namespace), then
//! comes back; between exchanges it holds nothing of the container, so a namespace the
//! runtime deletes is really gone.
use super::super::frame;
use crate::netlink::Handle;
use crate::netns::Netns;
use std::io;
use std::mem::{size_of, size_of_val, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Where an attachment's interface is: the namespace path (the host prefix applied) and
/// the interface name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub netns: PathBuf,
    pub ifname: String,
}

/// Why the interface cannot be reached.
#[derive(Debug)]
pub enum Unreachable {
    /// The namespace or the interface is gone (or is another one now): the lease has
    /// nothing left to maintain.
    Gone(String),
    Failed(String),
}

impl Unreachable {
    pub fn message(&self) -> &str {
        match self {
            Unreachable::Gone(m) | Unreachable::Failed(m) => m,
        }
    }
}

/// The interface as found.
pub struct Iface {
    pub mac: [u8; 6],
    pub socket: PacketSocket,
}

/// Enters the attachment's namespace and runs `f` with a netlink handle there.
fn in_netns<T>(att: &Attachment, f: impl FnOnce(&Handle, &str) -> Result<T, Unreachable>) -> Result<T, Unreachable> {
    let ns = Netns::open(&att.netns).map_err(|e| match e.is_not_found() {
        // the reference's words for a namespace path that is not there
        true => Unreachable::Gone(format!(
            "failed to Statfs \"{}\": no such file or directory",
            att.netns.display()
        )),
        false => Unreachable::Failed(e.to_string()),
    })?;
    ns.run(|| {
        let h = Handle::current().map_err(|e| Unreachable::Failed(e.to_string()))?;
        f(&h, &att.ifname)
    })
    .map_err(|e| Unreachable::Failed(e.to_string()))?
}

/// The attachment's interface, up (the reference sets it up when it is down) and with a
/// packet socket bound to it. `expected_mac`: the interface a lease was taken on; another
/// one by the same name is not it.
pub fn open(
    att: &Attachment,
    expected_mac: Option<[u8; 6]>,
    log: &mut dyn FnMut(String),
) -> Result<Iface, Unreachable> {
    in_netns(att, |h, ifname| {
        let link = h
            .link_by_name(ifname)
            .map_err(|e| Unreachable::Failed(format!("error looking up {ifname:?}: {e}")))?
            .ok_or_else(|| Unreachable::Gone(format!("error looking up {ifname:?}: Link not found")))?;
        let mac = link
            .mac
            .map(|m| m.0)
            .ok_or_else(|| Unreachable::Failed(format!("{ifname} has no MAC address")))?;
        if expected_mac.is_some_and(|m| m != mac) {
            return Err(Unreachable::Gone(format!("{ifname} is another interface now")));
        }
        if !link.up {
            log(format!("Link {ifname:?} down. Attempting to set up"));
            h.set_up(link.index).map_err(|e| Unreachable::Failed(e.to_string()))?;
        }
        let socket = PacketSocket::open(link.index)
            .map_err(|e| Unreachable::Failed(format!("packet socket on {ifname}: {e}")))?;
        Ok(Iface { mac, socket })
    })
}

/// Sets the attachment's interface down (the address it holds is not its lease's).
pub fn set_down(att: &Attachment) -> Result<(), Unreachable> {
    in_netns(att, |h, ifname| {
        h.set_down(ifname).map_err(|e| Unreachable::Failed(e.to_string()))
    })
}

/// True when the namespace path is not there or holds no network namespace (any other
/// failure to open it, such as EACCES or EMFILE, says nothing of it being gone).
pub fn netns_gone(path: &Path) -> bool {
    Netns::open(path).is_err_and(|e| e.is_not_found() || e.is_not_netns())
}

/// An `AF_PACKET` datagram socket for IPv4 on one interface, filtered to UDP port 68.
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    match r {
        -1 => Err(io::Error::last_os_error()),
        n => Ok(n),
    }
}

const ETH_P_IP: u16 = 0x0800;

fn link_addr(ifindex: i32, protocol: u16, mac: [u8; 6]) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut a: libc::sockaddr_ll = unsafe { zeroed() };
    a.sll_family = libc::AF_PACKET as u16;
    a.sll_protocol = protocol.to_be();
    a.sll_ifindex = ifindex;
    a.sll_halen = 6;
    a.sll_addr[..6].copy_from_slice(&mac);
    a
}

impl PacketSocket {
    /// Created in the calling thread's namespace. It receives nothing until it is bound,
    /// and is bound after the filter is in place, so no foreign packet is ever queued.
    fn open(ifindex: u32) -> io::Result<PacketSocket> {
        let ifindex = i32::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: plain socket(2); the descriptor is owned right away.
        let fd = unsafe {
            OwnedFd::from_raw_fd(cvt(libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            ))?)
        };
        let filter = frame::client_port_filter();
        let prog = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: prog points at `filter`, alive for the call; the kernel copies it.
        cvt(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                &prog as *const _ as *const libc::c_void,
                size_of_val(&prog) as libc::socklen_t,
            )
        })?;
        let addr = link_addr(ifindex, ETH_P_IP, [0; 6]);
        // SAFETY: addr is a valid sockaddr_ll of the size given.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(PacketSocket { fd, ifindex })
    }

    /// Sends an IPv4 packet to the MAC `to`.
    pub fn send(&self, packet: &[u8], to: [u8; 6]) -> io::Result<()> {
        let addr = link_addr(self.ifindex, ETH_P_IP, to);
        // SAFETY: the buffer and the address are valid for the sizes given.
        cvt(unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                packet.as_ptr() as *const libc::c_void,
                packet.len(),
                0,
                &addr as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            ) as libc::c_int
        })
        .map(drop)
    }

    /// The next packet addressed to this host (not one it sent), with the MAC it came
    /// from; `None` when nothing is queued.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, [u8; 6])>> {
        loop {
            // SAFETY: as above; `from` is written by the kernel up to `len`.
            let mut from: libc::sockaddr_ll = unsafe { zeroed() };
            let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: the buffer and the address are valid for the sizes given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_TRUNC,
                    &mut from as *mut _ as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING || n as usize > buf.len() {
                // our own, or longer than any reply we take: the next one
                continue;
            }
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&from.sll_addr[..6]);
            return Ok(Some((n as usize, mac)));
        }
    }
}
