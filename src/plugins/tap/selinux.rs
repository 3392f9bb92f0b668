//! `selinuxContext`: the device is made by `ip tuntap add` run under that SELinux label, as
//! the reference makes it. The kernel labels a tun device with the context of the process
//! that creates it, and the reference sets the label for the `ip` it runs with go-selinux's
//! `SetExecLabel` (a write to `/proc/thread-self/attr/exec`; not `attr/sockcreate`, which a
//! tun device's socket never consults). cnibox writes the label in the child between fork
//! and exec, so nothing else it runs (an IPAM plugin) inherits it, as the reference's does.
//!
//! Without SELinux the reference's label write fails with `invalid argument`; cnibox says
//! so before it runs anything.
use super::Conf;
use crate::cni::error::go_errno_text;
use crate::cni::Error;
use crate::netns::Netns;
use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;

const SELINUXFS: &str = "/sys/fs/selinux";
/// statfs's f_type is 32 bits of a wider signed field on some targets: compared as u32.
const SELINUX_MAGIC: u32 = 0xf97c_ff8c;
const EXEC_LABEL: &std::ffi::CStr = c"/proc/thread-self/attr/exec";

/// SELinux is on: its filesystem is mounted where the kernel exposes it.
pub fn enabled() -> bool {
    nix::sys::statfs::statfs(SELINUXFS).is_ok_and(|fs| fs.filesystem_type().0 as u32 == SELINUX_MAGIC)
}

/// The arguments of the reference's `ip` run.
fn ip_args(name: &str, conf: &Conf) -> Vec<String> {
    let mut args: Vec<String> = ["tuntap", "add", "mode", "tap", "name", name]
        .map(String::from)
        .to_vec();
    if conf.multi_queue {
        args.push("multi_queue".into());
    }
    if let Some(uid) = conf.owner {
        args.extend(["user".to_string(), uid.to_string()]);
    }
    if let Some(gid) = conf.group {
        args.extend(["group".to_string(), gid.to_string()]);
    }
    args
}

/// Creates the persistent tap `name` in `ns` by `ip tuntap add` labelled `label`.
pub fn create_labelled(ns: &Netns, label: &str, name: &str, conf: &Conf) -> Result<(), Error> {
    if !enabled() {
        return Err(Error::internal(format!(
            "failed set socket label: SELinux is not enabled on this host ({SELINUXFS} is not mounted), \
             and selinuxContext {label} needs it"
        )));
    }
    let ip = crate::firewall_rules::tools::find_tool("ip").ok_or_else(|| {
        Error::internal("selinuxContext: the tap is made by `ip tuntap add`, and ip was not found (install iproute2)")
    })?;
    let label_c =
        CString::new(label).map_err(|_| Error::internal(format!("failed set socket label: {label:?} holds a NUL")))?;
    let netns_fd = ns.as_raw_fd();
    let mut cmd = std::process::Command::new(&ip);
    cmd.args(ip_args(name, conf));
    // SAFETY: between fork and exec the closure only calls setns, open, write and close on
    // values prepared before the fork: async-signal-safe, no allocation.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(netns_fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let fd = libc::open(EXEC_LABEL.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let bytes = label_c.as_bytes();
            let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if n < 0 {
                return Err(err);
            }
            Ok(())
        });
    }
    let out = cmd.output().map_err(|e| {
        Error::internal(format!(
            "failed set socket label: write {}: {}",
            EXEC_LABEL.to_string_lossy(),
            go_errno_text(&e)
        ))
    })?;
    if !out.status.success() {
        let mut output = out.stdout;
        output.extend_from_slice(&out.stderr);
        let status = match out.status.code() {
            Some(c) => format!("exit status {c}"),
            None => format!("{}", out.status),
        };
        return Err(Error::internal(format!(
            "failed to run command {}: {status}",
            String::from_utf8_lossy(&output)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::tap::tests::conf;

    #[test]
    fn ip_gets_the_references_arguments() {
        assert_eq!(
            ip_args("tap1a2b", &conf(false, None, None, true)).join(" "),
            "tuntap add mode tap name tap1a2b"
        );
        assert_eq!(
            ip_args("tap1a2b", &conf(true, Some(1000), Some(0), true)).join(" "),
            "tuntap add mode tap name tap1a2b multi_queue user 1000 group 0"
        );
    }
}
