//! A seccomp filter for a plugin call that makes the kernel refuse one ioctl request with a
//! chosen errno, as qemu-user (ENOSYS), Linux before 4.11 (ENOTTY) or a container's
//! seccomp profile (EPERM) refuse `NS_GET_NSTYPE`. Every other system call is allowed.
use std::mem::offset_of;

use libc::{seccomp_data, sock_filter, sock_fprog};

// (`arch` word of seccomp_data from <linux/audit.h>, ioctl's syscall number on it) for each
// ABI a binary under test may use here: a 32-bit x86 binary (make test-i686) runs on an
// x86_64 kernel with the i386 ABI.
#[cfg(target_arch = "x86_64")]
const IOCTL_ABIS: &[(u32, u32)] = &[(0xc000_003e, 16), (0x4000_0003, 54)];
#[cfg(target_arch = "x86")]
const IOCTL_ABIS: &[(u32, u32)] = &[(0x4000_0003, 54)];
#[cfg(target_arch = "aarch64")]
const IOCTL_ABIS: &[(u32, u32)] = &[(0xc000_00b7, 29)];

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
pub fn refuse_ioctl(request: libc::Ioctl, errno: i32) -> Vec<sock_filter> {
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let n = IOCTL_ABIS.len();
    // [0] load arch; 3 per ABI: [arch?] [load nr] [ioctl? → check : allow];
    // then allow (an unknown ABI), and the check of the request.
    let (allow, check) = (1 + 3 * n, 2 + 3 * n);
    let mut prog = vec![stmt(load, offset_of!(seccomp_data, arch) as u32)];
    for (i, &(arch, ioctl)) in IOCTL_ABIS.iter().enumerate() {
        let at = 3 + 3 * i; // index of this ABI's ioctl comparison
        prog.push(jump_eq(arch, 0, 2));
        prog.push(stmt(load, offset_of!(seccomp_data, nr) as u32));
        prog.push(jump_eq(ioctl, (check - at - 1) as u8, (allow - at - 1) as u8));
    }
    prog.extend([
        stmt(ret, libc::SECCOMP_RET_ALLOW),
        stmt(load, request_low_word()),
        jump_eq(request as u32, 0, 1),
        stmt(ret, libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
    ]);
    prog
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
