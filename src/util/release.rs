//! Closing a descriptor without waiting for the kernel's deferred work.
//!
//! Why: the last close of some descriptors waits in the kernel for work the process gains
//! nothing from. A `NETLINK_NETFILTER` socket's release runs nf_tables' netlink notifier
//! (`nft_rcv_nl_event`), which flushes the namespace's destroy work: whenever a commit in
//! the namespace (ours or anyone's) deleted or replaced an object, that work is waiting out
//! an RCU grace period (8-24 ms on a 2-core VM) before it frees them, and the close waits
//! with it. Every DEL deletes rules, so every DEL waited at its exit: without a netns,
//! where no link deletion hides it, an ipMasq DEL took three times as long as the same DEL
//! without masquerade. A private procfs instance's release (see [`crate::sysctl`]) waits for
//! an expedited RCU grace period (`namespace_unlock`), milliseconds on a busy VM.
//!
//! How: the descriptor's last reference goes to the kernel's garbage collector of unix
//! sockets. It is sent (`SCM_RIGHTS`) with one end of a unix socket pair into that same
//! end's receive queue; once both ends are closed, that end is reachable only from its own
//! queue, a cycle the collector frees, and the descriptor with it. Since Linux 6.10
//! the collector runs from a workqueue, so the release and its wait happen in a kernel
//! worker after the plugin has answered. Older kernels collect in the close of the pair's
//! other end, in this process: the wait is then where it always was. If the pair or the
//! send fails (a security module refusing `SCM_RIGHTS`), the descriptor is simply closed.
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;

/// Closes `socket`; the kernel finishes releasing it later, without this process.
pub fn close_without_waiting(socket: OwnedFd) {
    let Ok((sender, cycle)) = UnixDatagram::pair() else {
        return; // `socket` is closed here, the usual way
    };
    if send_fds(&sender, &[cycle.as_raw_fd(), socket.as_raw_fd()]).is_err() {
        return;
    }
    // The order matters. The collector frees only what nothing outside the cycle holds, and
    // the close of `sender` is what schedules it: the netfilter socket and `cycle` must
    // already be held by the queued message alone, or a collector running at once (on the
    // other CPU) finds them alive, and this process's own close of the descriptor then waits.
    drop(socket);
    drop(cycle);
    drop(sender);
}

/// Sends one byte carrying `fds` as `SCM_RIGHTS`.
fn send_fds(sock: &UnixDatagram, fds: &[RawFd]) -> io::Result<()> {
    let payload_len = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(payload_len as u32) } as usize;
    // u64 elements: the control buffer must be aligned for `cmsghdr`.
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    };
    // SAFETY: a zeroed msghdr is valid (no name, no iov, no control) until filled below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds CMSG_SPACE(payload_len) aligned bytes, so the first
    // header and its data fit; the header is written before its data pointer is taken.
    let sent = unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(payload_len as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(header), payload_len);
        libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The hand-over works for any descriptor and really lets go of it: the write end of a
    /// pipe, given to the collector, is freed (the reader sees end of file) although this
    /// process never closed it the usual way.
    #[test]
    fn a_handed_over_descriptor_is_freed_by_the_kernel() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        close_without_waiting(OwnedFd::from(writer));
        let fd = reader.as_raw_fd();
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; 10 s is the collector's generous deadline.
        let ready = unsafe { libc::poll(&mut poll, 1, 10_000) };
        assert_eq!(ready, 1, "the write end was never freed");
        let mut buf = [0u8; 1];
        assert_eq!(reader.read(&mut buf).unwrap(), 0, "end of file: no writer left");
    }
}
