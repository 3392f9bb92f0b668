//! Kernel parameters under /proc/sys, read and written in a chosen network namespace.
//!
//! Files under /proc/sys/net belong to the network namespace of the thread that *opens*
//! them, so [`get_in`]/[`set_in`] open the file while the thread is inside the namespace.
//! What has a netlink form is set and read over netlink instead (`netlink::devconf`): the
//! plugins come here only for IPv6 device settings and the forwarding switches.
//!
//! The files are opened in a procfs instance of the process's own where the kernel lets it
//! make one (Linux 5.8 and later, as root), not in /proc. Why: in a procfs instance, every
//! network namespace that ever looked up a sysctl has an entry named `net` under `sys`, all
//! in one hash chain, and each lookup of `net/...` walks that chain (`proc_sys_compare`),
//! so on a node with 1,000 pods every sysctl a plugin opens costs a walk over every pod's
//! entry (~1 ms on a 2-core VM), and each pod's first lookup adds one more. In a private
//! instance the chain holds the namespaces of this process alone. It is made on first use,
//! with `fsopen`/`fsmount` (a detached mount: attached nowhere, seen by no one), and
//! released by [`close_shared`] without waiting for the kernel (see
//! [`crate::util::release`]); where it cannot be made, /proc is used.
use std::cell::RefCell;
use std::ffi::CString;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use crate::netns::{self, Netns};

/// A sysctl error naming the operation and the key.
#[derive(Debug)]
pub struct Error {
    pub op: &'static str,
    pub key: String,
    pub kind: ErrorKind,
}

#[derive(Debug)]
pub enum ErrorKind {
    /// No such key (e.g. the interface is gone, or IPv6 is disabled in the kernel).
    NotFound,
    /// The key is empty or would escape /proc/sys.
    InvalidKey,
    Io(io::Error),
    Netns(netns::Error),
}

impl Error {
    pub fn is_not_found(&self) -> bool {
        matches!(self.kind, ErrorKind::NotFound)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::NotFound => write!(f, "{} sysctl {}: no such key", self.op, self.key),
            ErrorKind::InvalidKey => write!(f, "{} sysctl {}: invalid key", self.op, self.key),
            ErrorKind::Io(e) => write!(f, "{} sysctl {}: {e}", self.op, self.key),
            ErrorKind::Netns(e) => write!(f, "{} sysctl {}: {e}", self.op, self.key),
        }
    }
}

impl std::error::Error for Error {}

/// `net/ipv4/ip_forward`
pub const IPV4_FORWARD: &str = "net/ipv4/ip_forward";
/// `net/ipv6/conf/all/forwarding`
pub const IPV6_FORWARDING_ALL: &str = "net/ipv6/conf/all/forwarding";

/// `net/ipv4/conf/<ifname>/<leaf>`, e.g. `ipv4_conf("eth0", "arp_notify")`.
pub fn ipv4_conf(ifname: &str, leaf: &str) -> String {
    format!("net/ipv4/conf/{ifname}/{leaf}")
}

/// `net/ipv6/conf/<ifname>/<leaf>`, e.g. `ipv6_conf("eth0", "accept_dad")`; also for
/// `accept_ra`, `disable_ipv6`, `ndisc_notify`, `enhanced_dad`, `keep_addr_on_down`.
pub fn ipv6_conf(ifname: &str, leaf: &str) -> String {
    format!("net/ipv6/conf/{ifname}/{leaf}")
}

/// The file for a key. Keys use `/` separators (interface names may contain dots); a key
/// without any `/` is taken in dotted form (`net.ipv4.ip_forward`).
pub fn path(key: &str) -> Option<PathBuf> {
    let key = if key.contains('/') {
        key.to_string()
    } else {
        key.replace('.', "/")
    };
    let mut p = PathBuf::from("/proc/sys");
    for part in key.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return None;
        }
        p.push(part);
    }
    Some(p)
}

/// Reads a key in the calling thread's namespace, without the trailing newline.
pub fn get(key: &str) -> Result<String, Error> {
    let p = path(key).ok_or_else(|| err("read", key, ErrorKind::InvalidKey))?;
    let mut s = String::new();
    open(&p, libc::O_RDONLY)
        .and_then(|mut f| f.read_to_string(&mut s))
        .map_err(|e| io_err("read", key, e))?;
    Ok(s.trim_end_matches('\n').to_string())
}

/// Writes a key in the calling thread's namespace.
pub fn set(key: &str, value: &str) -> Result<(), Error> {
    let p = path(key).ok_or_else(|| err("write", key, ErrorKind::InvalidKey))?;
    // procfs takes the value in one write; no truncate, no create.
    let mut f = open(&p, libc::O_WRONLY).map_err(|e| io_err("write", key, e))?;
    f.write_all(value.as_bytes()).map_err(|e| io_err("write", key, e))
}

thread_local! {
    /// The private procfs instance's root: None until first use, then Some(None) where the
    /// kernel would not make one.
    static PROC: RefCell<Option<Option<OwnedFd>>> = const { RefCell::new(None) };
}

/// Opens a /proc/sys path (from [`path`]) in the private procfs instance, or in /proc.
fn open(p: &std::path::Path, flags: i32) -> io::Result<File> {
    PROC.with(|cell| {
        let mut cell = cell.borrow_mut();
        let root = cell.get_or_insert_with(private_procfs);
        match root {
            Some(root) => {
                let rel = p.strip_prefix("/proc").expect("paths from `path` are under /proc");
                let rel = CString::new(rel.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
                // SAFETY: a valid directory descriptor and a NUL-terminated path.
                let fd = unsafe {
                    libc::openat(
                        root.as_raw_fd(),
                        rel.as_ptr(),
                        flags | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                    )
                };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: openat just returned this descriptor, owned by nobody else.
                Ok(unsafe { File::from_raw_fd(fd) })
            }
            None => std::fs::OpenOptions::new()
                .read(flags == libc::O_RDONLY)
                .write(flags == libc::O_WRONLY)
                .open(p),
        }
    })
}

/// A new procfs instance, mounted nowhere: its root, whose `sys` is /proc/sys. None where
/// the kernel refuses (before 5.2, without CAP_SYS_ADMIN, a seccomp or security policy).
fn private_procfs() -> Option<OwnedFd> {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    const MOUNT_ATTR_NOSUID_NODEV_NOEXEC: libc::c_uint = 0x2 | 0x4 | 0x8;
    // SAFETY: fsopen with a NUL-terminated file system name; the result is checked.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, c"proc".as_ptr(), FSOPEN_CLOEXEC) };
    if fs < 0 {
        return None;
    }
    // SAFETY: fsopen returned this descriptor and nothing else owns it.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as i32) };
    let null = std::ptr::null::<libc::c_char>();
    // SAFETY: FSCONFIG_CMD_CREATE takes no key, value or aux.
    if unsafe { libc::syscall(libc::SYS_fsconfig, fs.as_raw_fd(), FSCONFIG_CMD_CREATE, null, null, 0) } < 0 {
        return None;
    }
    // SAFETY: fsmount on a created context; the result is checked.
    let mnt = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_NOSUID_NODEV_NOEXEC,
        )
    };
    // SAFETY: fsmount returned this descriptor and nothing else owns it.
    (mnt >= 0).then(|| unsafe { OwnedFd::from_raw_fd(mnt as i32) })
}

/// Whether this thread's sysctls go through a private procfs instance (made now if it was
/// not yet).
pub fn through_private_procfs() -> bool {
    PROC.with(|cell| cell.borrow_mut().get_or_insert_with(private_procfs).is_some())
}

/// Releases the thread's private procfs instance, without waiting for the kernel (its
/// release waits out an expedited RCU grace period); the next sysctl makes a new one. The
/// applet table calls it when the applet is done.
pub fn close_shared() {
    if let Some(Some(root)) = PROC.with(|cell| cell.borrow_mut().take()) {
        crate::util::release::close_without_waiting(root);
    }
}

/// Reads a key as seen inside `ns`.
pub fn get_in(ns: &Netns, key: &str) -> Result<String, Error> {
    ns.run(|| get(key)).map_err(|e| err("read", key, ErrorKind::Netns(e)))?
}

/// Writes a key inside `ns`.
pub fn set_in(ns: &Netns, key: &str, value: &str) -> Result<(), Error> {
    ns.run(|| set(key, value))
        .map_err(|e| err("write", key, ErrorKind::Netns(e)))?
}

fn err(op: &'static str, key: &str, kind: ErrorKind) -> Error {
    Error {
        op,
        key: key.to_string(),
        kind,
    }
}

fn io_err(op: &'static str, key: &str, e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::NotFound => err(op, key, ErrorKind::NotFound),
        _ => err(op, key, ErrorKind::Io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_proc_sys_paths() {
        assert_eq!(
            path("net/ipv4/ip_forward").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/ip_forward")
        );
        assert_eq!(
            path("net.ipv4.ip_forward").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/ip_forward")
        );
        // a dotted interface name stays one component in slash form
        assert_eq!(
            path(&ipv6_conf("eth0.100", "accept_dad")).unwrap(),
            PathBuf::from("/proc/sys/net/ipv6/conf/eth0.100/accept_dad")
        );
    }

    #[test]
    fn keys_cannot_escape_proc_sys() {
        assert!(path("net/../../etc/passwd").is_none());
        assert!(path("").is_none());
        assert!(path("net//ipv4").is_none());
        let e = get("net/../x").unwrap_err();
        assert!(matches!(e.kind, ErrorKind::InvalidKey));
        assert_eq!(e.to_string(), "read sysctl net/../x: invalid key");
    }
}
