//! tun/tap devices, which the kernel creates only through `/dev/net/tun` (an rtnetlink
//! request for one is refused): open the device file inside the namespace the device is to
//! live in, name and shape it with TUNSETIFF, give it an owner and a group, and make it
//! persistent so it outlives the file.
//!
//! Every ioctl goes through [`Ioctl`] (the request numbers, from `libc`, whose `_IOW`
//! encoding follows the target's ioctl layout) and [`ifreq`] (the `struct ifreq` TUNSETIFF
//! reads and writes back, of the target's size): nothing here assumes one architecture.
//!
//! A [`Tap`] that is dropped without [`Tap::persist`] takes its device with it: the kernel
//! destroys a non-persistent device when its last file closes, so a half-made device never
//! outlives the process that made it, whatever happens in between.
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

use crate::netns::Netns;

/// The clone device.
pub const DEVICE: &str = "/dev/net/tun";

/// The ioctls of linux/if_tun.h this module sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ioctl {
    /// `_IOW('T', 202, int)`, with a `struct ifreq`: create (or attach to) the device.
    SetIff,
    /// `_IOW('T', 203, int)`, with 0 or 1 by value.
    SetPersist,
    /// `_IOW('T', 204, int)`, with a uid by value.
    SetOwner,
    /// `_IOW('T', 206, int)`, with a gid by value.
    SetGroup,
}

impl Ioctl {
    /// The request number for this target.
    pub fn number(self) -> libc::Ioctl {
        match self {
            Ioctl::SetIff => libc::TUNSETIFF,
            Ioctl::SetPersist => libc::TUNSETPERSIST,
            Ioctl::SetOwner => libc::TUNSETOWNER,
            Ioctl::SetGroup => libc::TUNSETGROUP,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Ioctl::SetIff => "TUNSETIFF",
            Ioctl::SetPersist => "TUNSETPERSIST",
            Ioctl::SetOwner => "TUNSETOWNER",
            Ioctl::SetGroup => "TUNSETGROUP",
        }
    }
}

/// TUNSETIFF flags (linux/if_tun.h), as `ifr_flags` carries them.
pub mod flags {
    pub const TAP: u16 = libc::IFF_TAP as u16;
    pub const NO_PI: u16 = libc::IFF_NO_PI as u16;
    pub const MULTI_QUEUE: u16 = libc::IFF_MULTI_QUEUE as u16;
    pub const VNET_HDR: u16 = libc::IFF_VNET_HDR as u16;
}

/// The `struct ifreq` of TUNSETIFF: `name` NUL-padded in `ifr_name` (at most IFNAMSIZ-1
/// bytes; a `%d` in it is a template the kernel fills in), `flags` in `ifr_flags`, every
/// other byte zero. None when the name does not fit or holds a NUL.
pub fn ifreq(name: &str, flags: u16) -> Option<libc::ifreq> {
    if name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0) {
        return None;
    }
    // SAFETY: ifreq is plain old data (arrays of integers and a union of integers and
    // pointers); all-zero bytes are a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    Some(req)
}

/// The name the kernel wrote back into `ifr_name`.
pub fn ifreq_name(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req.ifr_name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A tap device to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapSpec<'a> {
    /// The name, or a template such as `tap%d`: a template never attaches to a device
    /// that exists (a plain name of an existing tap would).
    pub name: &'a str,
    /// TUNSETIFF flags besides [`flags::TAP`].
    pub flags: u16,
    pub owner: Option<u32>,
    pub group: Option<u32>,
}

/// A tap device this process created and holds open.
#[derive(Debug)]
pub struct Tap {
    file: File,
    /// The name the kernel gave it.
    pub name: String,
}

/// What failed: the operation, the device and the OS error.
#[derive(Debug)]
pub struct Error {
    pub op: String,
    pub error: io::Error,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.error)?;
        if self.op.starts_with("open") && self.error.kind() == io::ErrorKind::NotFound {
            write!(f, " (the kernel has no tun/tap support: modprobe tun)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl Tap {
    /// Creates the device in `netns` (the device lives where the clone device was opened)
    /// with TUNSETIFF, then TUNSETOWNER and TUNSETGROUP when asked. It is not persistent
    /// yet: dropped, it is gone.
    pub fn create(spec: &TapSpec<'_>, netns: &Netns) -> Result<Tap, Error> {
        let err = |op: String| move |error: io::Error| Error { op, error };
        let file = netns
            .run(|| OpenOptions::new().read(true).write(true).open(DEVICE))
            .map_err(|e| Error {
                op: format!("enter netns {}", netns.path().display()),
                error: io::Error::other(e.to_string()),
            })?
            .map_err(err(format!("open {DEVICE}")))?;
        let mut req = ifreq(spec.name, flags::TAP | spec.flags).ok_or_else(|| Error {
            op: format!("{} {:?}", Ioctl::SetIff.name(), spec.name),
            error: io::Error::from_raw_os_error(libc::EINVAL),
        })?;
        let tap = Tap {
            file,
            name: spec.name.to_string(),
        };
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`; `req` is one, of the
        // target's layout, alive across the call.
        let rc = unsafe {
            libc::ioctl(
                tap.file.as_raw_fd(),
                Ioctl::SetIff.number(),
                &mut req as *mut libc::ifreq,
            )
        };
        if rc < 0 {
            return Err(Error {
                op: format!("{} {}", Ioctl::SetIff.name(), spec.name),
                error: io::Error::last_os_error(),
            });
        }
        let tap = Tap {
            name: ifreq_name(&req),
            ..tap
        };
        if let Some(uid) = spec.owner {
            tap.by_value(Ioctl::SetOwner, uid.into())?;
        }
        if let Some(gid) = spec.group {
            tap.by_value(Ioctl::SetGroup, gid.into())?;
        }
        Ok(tap)
    }

    /// Makes the device persistent and lets go of it: it stays when the file closes.
    pub fn persist(self) -> Result<(), Error> {
        self.by_value(Ioctl::SetPersist, 1)
    }

    fn by_value(&self, ioctl: Ioctl, arg: libc::c_ulong) -> Result<(), Error> {
        // SAFETY: these tun ioctls take their argument by value (an integer), not a pointer.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), ioctl.number(), arg) };
        if rc < 0 {
            return Err(Error {
                op: format!("{} {arg} on {}", ioctl.name(), self.name),
                error: io::Error::last_os_error(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(req: &libc::ifreq) -> Vec<u8> {
        // SAFETY: reading the bytes of a plain-old-data value of its own size.
        unsafe {
            std::slice::from_raw_parts(
                req as *const libc::ifreq as *const u8,
                std::mem::size_of::<libc::ifreq>(),
            )
        }
        .to_vec()
    }

    #[test]
    fn ifreq_is_the_name_nul_padded_then_the_flags_then_zeros() {
        let req = ifreq("tap%d", flags::TAP | flags::NO_PI | flags::MULTI_QUEUE).unwrap();
        let b = bytes(&req);
        // IFNAMSIZ name bytes, then the union: pointer-sized members make it 24 bytes on
        // 64-bit targets (struct sockaddr, 16, on 32-bit ones)
        let expected_len = if cfg!(target_pointer_width = "64") { 40 } else { 32 };
        assert_eq!(b.len(), expected_len);
        assert_eq!(&b[..16], b"tap%d\0\0\0\0\0\0\0\0\0\0\0");
        assert_eq!(&b[16..18], &0x1102u16.to_ne_bytes());
        assert!(b[18..].iter().all(|x| *x == 0), "{b:?}");
    }

    #[test]
    fn ifreq_takes_a_fifteen_byte_name_and_refuses_longer() {
        let b = bytes(&ifreq("abcdefghijklmno", 0).unwrap());
        assert_eq!(&b[..16], b"abcdefghijklmno\0");
        assert!(ifreq("abcdefghijklmnop", 0).is_none());
        assert!(ifreq("a\0b", 0).is_none());
    }

    #[test]
    fn the_name_written_back_is_read_up_to_the_nul() {
        let mut req = ifreq("tap%d", 0).unwrap();
        for (i, c) in b"tap12\0".iter().enumerate() {
            req.ifr_name[i] = *c as libc::c_char;
        }
        assert_eq!(ifreq_name(&req), "tap12");
    }

    #[test]
    fn flags_are_the_uapi_values() {
        assert_eq!(
            (flags::TAP, flags::NO_PI, flags::MULTI_QUEUE, flags::VNET_HDR),
            (0x0002, 0x1000, 0x0100, 0x4000)
        );
    }

    /// `_IOW('T', nr, int)` on the targets with the generic ioctl layout (x86, x86_64,
    /// arm, aarch64, riscv): direction bit 30, size 4 in bits 16-29, type 'T', number.
    #[test]
    #[cfg(any(
        target_arch = "x86",
        target_arch = "x86_64",
        target_arch = "arm",
        target_arch = "aarch64",
        target_arch = "riscv64"
    ))]
    fn request_numbers_are_iow_t_with_an_int() {
        let iow = |nr: u32| (1u32 << 30) | (4 << 16) | ((b'T' as u32) << 8) | nr;
        for (ioctl, nr, hex) in [
            (Ioctl::SetIff, 202, 0x400454ca_u32),
            (Ioctl::SetPersist, 203, 0x400454cb),
            (Ioctl::SetOwner, 204, 0x400454cc),
            (Ioctl::SetGroup, 206, 0x400454ce),
        ] {
            assert_eq!(iow(nr), hex);
            assert_eq!(ioctl.number() as u32, hex, "{}", ioctl.name());
        }
    }
}
