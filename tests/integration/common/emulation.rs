//! Whether the binary under test runs under qemu-user (`make test-arm64` on an x86_64
//! machine: CNIBOX_TEST_BIN names the arm64 binary, binfmt_misc hands it to qemu), and how
//! a test names a step that qemu-user cannot emulate.
//!
//! qemu-user 7.2 (Debian 12) translates system calls, and netlink only where it knows the
//! messages: it refuses `NETLINK_NETFILTER` sockets (EPROTONOSUPPORT) and answers
//! EOPNOTSUPP to rtnetlink messages other than links, addresses and routes (tc's qdiscs and
//! filters among them). The code behind those steps is the same on arm64 hardware; the
//! native x86_64 run exercises it.
use super::{cnibox, CallOutput};

// e_machine of <elf.h>
const EM_386: u16 = 3;
const EM_X86_64: u16 = 62;

fn elf_machine(path: &std::path::Path) -> u16 {
    let head = std::fs::read(path).unwrap_or_default();
    assert!(
        head.len() > 20 && head.starts_with(b"\x7fELF"),
        "{}: not an ELF file",
        path.display()
    );
    // EI_DATA: 1 little-endian, 2 big-endian; e_machine is the u16 at 18 in that order
    let bytes = [head[18], head[19]];
    if head[5] == 2 {
        u16::from_be_bytes(bytes)
    } else {
        u16::from_le_bytes(bytes)
    }
}

/// True when the binary under test is for another CPU than this machine's (a 32-bit x86
/// binary on x86_64 runs natively).
pub fn emulated() -> bool {
    let (bin, me) = (
        elf_machine(&cnibox()),
        elf_machine(std::path::Path::new("/proc/self/exe")),
    );
    bin != me && !(me == EM_X86_64 && bin == EM_386)
}

/// Under emulation, a call that failed with `refusal` (the emulator's own answer) did not
/// exercise `path`: says so with `covered_by`, the native tests of it, and returns true.
/// Otherwise (native, success, or any other failure) returns false, and the caller's full
/// checks go on.
pub fn not_exercised(out: &CallOutput, refusal: &str, path: &str, covered_by: &str) -> bool {
    if !emulated() || out.ok() || !out.stdout.contains(refusal) {
        return false;
    }
    eprintln!(
        "NOT EXERCISED under qemu-user: {path}: qemu-user refuses it ({refusal}); covered natively by {covered_by}"
    );
    true
}

/// qemu-user's answer to a `NETLINK_NETFILTER` socket.
pub const NETFILTER_REFUSED: &str = "open netfilter netlink socket: Protocol not supported";
/// qemu-user's answer to an rtnetlink message it does not translate (tc).
pub const RTNETLINK_REFUSED: &str = "Operation not supported";
