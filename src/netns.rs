//! Network namespaces: open one by path, check that it really is a network namespace,
//! compare it with the calling thread's own, and run code inside it.
//!
//! A namespace switch (`setns`) only affects the calling thread. [`Netns::run`] and
//! [`Netns::enter`] always switch back, also when the closure returns an error or panics.
//!
//! Which kind of namespace a file holds is asked of the kernel with `NS_GET_NSTYPE`. Where
//! that ioctl is missing (Linux before 4.11, qemu-user, seccomp profiles that answer ENOSYS)
//! the answer comes from what the kernel still tells: the `/proc/self/fd` link of a
//! descriptor opened through `/proc/PID/ns/net` (`net:[…]`; a bind mount reads as its own
//! path instead), else `setns(CLONE_NEWNET)` itself, which refuses any other kind. A file
//! that may hold a network namespace but cannot be checked is [`ErrorKind::Unverified`],
//! never [`ErrorKind::NotNetns`]: a DEL must not take it for a namespace already gone.
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sched::{setns, CloneFlags};

/// The calling thread's own network namespace (not the process's: threads may differ).
pub const THREAD_SELF: &str = "/proc/thread-self/ns/net";

const NSFS_MAGIC: i64 = 0x6e73_6673;
// Before Linux 3.19 the files under /proc/PID/ns were procfs files.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// An open network namespace: the descriptor keeps it alive as long as this value lives.
#[derive(Debug)]
pub struct Netns {
    file: File,
    path: PathBuf,
}

/// Why a namespace operation failed.
#[derive(Debug)]
pub enum ErrorKind {
    /// The path does not exist (a DEL for an already removed container is not an error).
    NotFound,
    /// The path exists but is not a network namespace.
    NotNetns,
    /// The path holds a namespace (or a procfs file) and the kernel would not say whether
    /// it is a network namespace (e.g. `NS_GET_NSTYPE` refused with EPERM).
    Unverified(io::Error),
    Io(io::Error),
}

/// A namespace error naming the operation and the namespace path.
#[derive(Debug)]
pub struct Error {
    pub op: &'static str,
    pub path: PathBuf,
    pub kind: ErrorKind,
}

impl Error {
    fn new(op: &'static str, path: &Path, kind: ErrorKind) -> Error {
        Error {
            op,
            path: path.to_path_buf(),
            kind,
        }
    }

    fn io(op: &'static str, path: &Path, e: impl Into<io::Error>) -> Error {
        Error::new(op, path, ErrorKind::Io(e.into()))
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self.kind, ErrorKind::NotFound)
    }

    pub fn is_not_netns(&self) -> bool {
        matches!(self.kind, ErrorKind::NotNetns)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.kind {
            ErrorKind::NotFound => write!(f, "{} netns {path}: does not exist", self.op),
            ErrorKind::NotNetns => write!(f, "{} netns {path}: not a network namespace", self.op),
            ErrorKind::Unverified(e) => write!(
                f,
                "{} netns {path}: cannot tell whether it is a network namespace: {e}",
                self.op
            ),
            ErrorKind::Io(e) => write!(f, "{} netns {path}: {e}", self.op),
        }
    }
}

impl std::error::Error for Error {}

impl Netns {
    /// Opens a network namespace file: a bind mount such as `/var/run/netns/X`, or
    /// `/proc/PID/ns/net`. Distinguishes a missing path from one that is not a netns.
    pub fn open(path: impl AsRef<Path>) -> Result<Netns, Error> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::new("open", path, ErrorKind::NotFound),
            _ => Error::io("open", path, e),
        })?;
        check_is_netns(&file, path)?;
        Ok(Netns {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The calling thread's current network namespace.
    pub fn current() -> Result<Netns, Error> {
        Netns::open(THREAD_SELF)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True if this is the namespace the calling thread is in right now.
    pub fn is_current(&self) -> Result<bool, Error> {
        let mine = std::fs::metadata(THREAD_SELF).map_err(|e| Error::io("stat", Path::new(THREAD_SELF), e))?;
        let this = self.file.metadata().map_err(|e| Error::io("stat", &self.path, e))?;
        Ok(mine.dev() == this.dev() && mine.ino() == this.ino())
    }

    /// True if both values refer to the same namespace (whatever paths they were opened by).
    pub fn same_as(&self, other: &Netns) -> Result<bool, Error> {
        let a = self.file.metadata().map_err(|e| Error::io("stat", &self.path, e))?;
        let b = other.file.metadata().map_err(|e| Error::io("stat", &other.path, e))?;
        Ok(a.dev() == b.dev() && a.ino() == b.ino())
    }

    /// Moves the calling thread into this namespace until the returned guard is dropped.
    pub fn enter(&self) -> Result<Entered, Error> {
        let origin = Netns::current()?;
        setns(&self.file, CloneFlags::CLONE_NEWNET).map_err(|e| Error::io("enter", &self.path, e))?;
        Ok(Entered { origin })
    }

    /// Runs `f` with the calling thread inside this namespace and comes back afterwards,
    /// whatever `f` returns (and on panic).
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> Result<R, Error> {
        let _back = self.enter()?;
        Ok(f())
    }
}

impl AsFd for Netns {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl AsRawFd for Netns {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

/// While this lives, the thread is inside another namespace; dropping it switches back.
#[must_use = "dropping the guard switches back to the original namespace at once"]
pub struct Entered {
    origin: Netns,
}

impl Drop for Entered {
    fn drop(&mut self) {
        return_to(&self.origin.file, &self.origin.path);
    }
}

/// Moves the calling thread back into the namespace it came from.
fn return_to(origin: &File, path: &Path) {
    if let Err(e) = setns(origin, CloneFlags::CLONE_NEWNET) {
        // Carrying on would run every later operation in the wrong namespace.
        eprintln!("cannot return to netns {}: {e}", path.display());
        std::process::abort();
    }
}

fn check_is_netns(file: &File, path: &Path) -> Result<(), Error> {
    let fs = nix::sys::statfs::fstatfs(file).map_err(|e| Error::io("open", path, e))?;
    let magic = fs.filesystem_type().0 as i64;
    if magic != NSFS_MAGIC && magic != PROC_SUPER_MAGIC {
        return Err(Error::new("open", path, ErrorKind::NotNetns));
    }
    // NS_GET_NSTYPE (Linux >= 4.11) is libc's `_IO(0xb7, 0x3)`, whose encoding differs
    // between architectures (0xb703 on x86 and arm, 0x2000b703 on powerpc and mips).
    // SAFETY: NS_GET_NSTYPE takes no argument and only reads the descriptor.
    let ty = unsafe { libc::ioctl(file.as_raw_fd(), libc::NS_GET_NSTYPE) };
    let asked = if ty < 0 { Err(Errno::last()) } else { Ok(ty) };
    let kind = from_ns_get_nstype(asked).and_then(|kind| match kind {
        Kind::Unknown => from_fd_link(file).map_or_else(|| from_setns_probe(file), Ok),
        known => Ok(known),
    });
    match kind {
        Ok(Kind::Net) => Ok(()),
        Ok(_) => Err(Error::new("open", path, ErrorKind::NotNetns)),
        Err(e) => Err(Error::new("open", path, ErrorKind::Unverified(e.into()))),
    }
}

/// What the kernel said of a file's kind of namespace.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Net,
    Other,
    /// Not answered by this way of asking: try the next one.
    Unknown,
}

/// `NS_GET_NSTYPE`'s answer; ENOTTY (before 4.11, or a procfs file) and ENOSYS (qemu-user,
/// seccomp) mean the question cannot be asked this way. Any other error is an answer
/// withheld, which is not a "no".
fn from_ns_get_nstype(asked: Result<libc::c_int, Errno>) -> Result<Kind, Errno> {
    match asked {
        Ok(libc::CLONE_NEWNET) => Ok(Kind::Net),
        Ok(_) => Ok(Kind::Other),
        Err(Errno::ENOTTY | Errno::ENOSYS) => Ok(Kind::Unknown),
        Err(e) => Err(e),
    }
}

/// The descriptor's `/proc/self/fd` link: `net:[INODE]` when it was opened through a
/// `/proc/PID/ns/*` file; None when the link is a path (a bind mount) or cannot be read.
fn from_fd_link(file: &File) -> Option<Kind> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
    kind_of_ns_link(link.to_str()?)
}

/// `net:[4026531840]` → Net, `mnt:[…]` → Other, anything else (a path) → None.
fn kind_of_ns_link(link: &str) -> Option<Kind> {
    let (kind, rest) = link.split_once(":[")?;
    let inode = rest.strip_suffix(']')?;
    if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return None;
    }
    if inode.is_empty() || !inode.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(if kind == "net" { Kind::Net } else { Kind::Other })
}

/// Asks `setns` itself: it moves the thread only into a network namespace (EINVAL for any
/// other file), and the thread goes straight back.
fn from_setns_probe(file: &File) -> Result<Kind, Errno> {
    let origin = File::open(THREAD_SELF).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let entered = setns(file, CloneFlags::CLONE_NEWNET);
    if entered.is_ok() {
        return_to(&origin, Path::new(THREAD_SELF));
    }
    from_setns(entered)
}

fn from_setns(entered: Result<(), Errno>) -> Result<Kind, Errno> {
    match entered {
        Ok(()) => Ok(Kind::Net),
        Err(Errno::EINVAL) => Ok(Kind::Other),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ns_get_nstype_is_encoded_for_this_architecture() {
        let expected: libc::Ioctl = if cfg!(any(
            target_arch = "powerpc",
            target_arch = "powerpc64",
            target_arch = "mips",
            target_arch = "mips64",
            target_arch = "sparc64"
        )) {
            0x2000_b703
        } else {
            0xb703
        };
        assert_eq!(libc::NS_GET_NSTYPE, expected);
    }

    #[test]
    fn ns_get_nstype_answers_decide_or_defer() {
        assert_eq!(from_ns_get_nstype(Ok(libc::CLONE_NEWNET)), Ok(Kind::Net));
        assert_eq!(from_ns_get_nstype(Ok(libc::CLONE_NEWNS)), Ok(Kind::Other));
        assert_eq!(from_ns_get_nstype(Ok(libc::CLONE_NEWUTS)), Ok(Kind::Other));
        // the ioctl is missing: ask another way
        assert_eq!(from_ns_get_nstype(Err(Errno::ENOTTY)), Ok(Kind::Unknown));
        assert_eq!(from_ns_get_nstype(Err(Errno::ENOSYS)), Ok(Kind::Unknown));
        // an answer withheld is an error, not "not a netns"
        assert_eq!(from_ns_get_nstype(Err(Errno::EPERM)), Err(Errno::EPERM));
        assert_eq!(from_ns_get_nstype(Err(Errno::EACCES)), Err(Errno::EACCES));
    }

    #[test]
    fn ns_links_name_their_kind_and_paths_name_none() {
        assert_eq!(kind_of_ns_link("net:[4026531840]"), Some(Kind::Net));
        assert_eq!(kind_of_ns_link("mnt:[4026531841]"), Some(Kind::Other));
        assert_eq!(kind_of_ns_link("pid_for_children:[4026531836]"), Some(Kind::Other));
        // the link of a bind-mounted namespace is its path
        assert_eq!(kind_of_ns_link("/run/netns/net:[1]"), None);
        assert_eq!(kind_of_ns_link("/run/netns/c1"), None);
        assert_eq!(kind_of_ns_link("net:[]"), None);
        assert_eq!(kind_of_ns_link("net:[12x]"), None);
        assert_eq!(kind_of_ns_link("socket:[123]"), Some(Kind::Other));
    }

    #[test]
    fn setns_refusing_another_kind_is_a_no_and_refusing_us_is_an_error() {
        assert_eq!(from_setns(Ok(())), Ok(Kind::Net));
        assert_eq!(from_setns(Err(Errno::EINVAL)), Ok(Kind::Other));
        assert_eq!(from_setns(Err(Errno::EPERM)), Err(Errno::EPERM));
    }

    #[test]
    fn an_unverified_namespace_is_neither_gone_nor_another_kind() {
        let e = Error::new(
            "open",
            Path::new("/run/netns/c"),
            ErrorKind::Unverified(Errno::EPERM.into()),
        );
        assert!(!e.is_not_found());
        assert!(!e.is_not_netns());
        assert_eq!(
            e.to_string(),
            "open netns /run/netns/c: cannot tell whether it is a network namespace: Operation not permitted (os error 1)"
        );
    }
}
