//! Random interface names for host-side veth ends.
use std::io;

/// Fills `buf` from the kernel's random pool.
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(())
}

/// `veth` + 8 lowercase hex digits from 4 random bytes, like the reference plugins' names.
pub fn random_veth_name() -> io::Result<String> {
    random_name("veth")
}

/// A random locally administered unicast MAC, for links whose MAC is pinned at creation
/// (a MAC given in the create request is never rewritten by udev's MAC policy).
pub fn random_mac() -> io::Result<super::MacAddr> {
    let mut b = [0u8; 6];
    random_bytes(&mut b)?;
    b[0] = (b[0] & 0xfe) | 0x02;
    Ok(super::MacAddr(b))
}

/// `prefix` + 8 lowercase hex digits from 4 random bytes.
pub fn random_name(prefix: &str) -> io::Result<String> {
    let mut b = [0u8; 4];
    random_bytes(&mut b)?;
    Ok(format!("{prefix}{:02x}{:02x}{:02x}{:02x}", b[0], b[1], b[2], b[3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_names_are_veth_and_eight_hex_digits() {
        let n = random_veth_name().unwrap();
        assert_eq!(n.len(), 12);
        assert!(n.starts_with("veth"));
        assert!(
            n[4..].chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "{n}"
        );
    }

    #[test]
    fn random_macs_are_local_unicast() {
        for _ in 0..32 {
            let m = random_mac().unwrap();
            assert_eq!(m.0[0] & 0x01, 0, "{m}");
            assert_eq!(m.0[0] & 0x02, 0x02, "{m}");
        }
    }

    #[test]
    fn names_differ() {
        // 2^-32 chance of a false failure
        assert_ne!(random_veth_name().unwrap(), random_veth_name().unwrap());
    }
}
