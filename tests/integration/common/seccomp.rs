//! A seccomp filter for a plugin call that makes the kernel refuse one ioctl request with a
//! chosen errno, as qemu-user (ENOSYS), Linux before 4.11 (ENOTTY) or a container's
//! seccomp profile (EPERM) refuse `NS_GET_NSTYPE`. Every other system call is allowed.
use std::mem::offset_of;

use libc::{seccomp_data, sock_filter, sock_fprog};

// <linux/audit.h>: the `arch` word of seccomp_data for the architecture running the tests.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "x86")]
const AUDIT_ARCH: u32 = 0x4000_0003;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// Offset of the low 32 bits of the ioctl's request (the second argument): classic BPF
/// loads 32-bit words, and which half of the 64-bit argument is low depends on byte order.
fn request_low_word() -> u32 {
    let arg1 = offset_of!(seccomp_data, args) + 8;
    (if cfg!(target_endian = "little") { arg1 } else { arg1 + 4 }) as u32
}

fn stmt(code: u32, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_eq(k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// The filter: `ioctl(_, request, …)` fails with `errno`; everything else runs.
pub fn refuse_ioctl(request: u64, errno: i32) -> Vec<sock_filter> {
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    vec![
        stmt(load, offset_of!(seccomp_data, arch) as u32),
        jump_eq(AUDIT_ARCH, 0, 5),
        stmt(load, offset_of!(seccomp_data, nr) as u32),
        jump_eq(libc::SYS_ioctl as u32, 0, 3),
        stmt(load, request_low_word()),
        jump_eq(request as u32, 0, 1),
        stmt(ret, libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Installs `filter` on the calling thread (between fork and exec: only prctl(2), which is
/// async-signal-safe, on memory prepared before the fork).
pub fn install(filter: &[sock_filter]) -> std::io::Result<()> {
    let prog = sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut sock_filter,
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers; PR_SET_SECCOMP reads `prog`, which
    // points at `filter`, alive for the whole call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
