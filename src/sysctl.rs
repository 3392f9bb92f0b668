//! Kernel parameters under /proc/sys, read and written in a chosen network namespace.
//!
//! Files under /proc/sys/net belong to the network namespace of the thread that *opens*
//! them, so [`get_in`]/[`set_in`] open the file while the thread is inside the namespace.
use std::fmt;
use std::io::{self, Write};
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
    let s = std::fs::read_to_string(p).map_err(|e| io_err("read", key, e))?;
    Ok(s.trim_end_matches('\n').to_string())
}

/// Writes a key in the calling thread's namespace.
pub fn set(key: &str, value: &str) -> Result<(), Error> {
    let p = path(key).ok_or_else(|| err("write", key, ErrorKind::InvalidKey))?;
    // procfs takes the value in one write; no truncate, no create.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(p)
        .map_err(|e| io_err("write", key, e))?;
    f.write_all(value.as_bytes()).map_err(|e| io_err("write", key, e))
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
