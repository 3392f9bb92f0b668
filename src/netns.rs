//! Network namespaces: open one by path, check that it really is a network namespace,
//! compare it with the calling thread's own, and run code inside it.
//!
//! A namespace switch (`setns`) only affects the calling thread. [`Netns::run`] and
//! [`Netns::enter`] always switch back, also when the closure returns an error or panics.
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::sched::{setns, CloneFlags};

/// The calling thread's own network namespace (not the process's: threads may differ).
pub const THREAD_SELF: &str = "/proc/thread-self/ns/net";

const NSFS_MAGIC: i64 = 0x6e73_6673;
// Before Linux 3.19 the files under /proc/PID/ns were procfs files.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;
// _IO(0xb7, 0x3): asks nsfs which kind of namespace a descriptor refers to (Linux >= 4.11).
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

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
        if let Err(e) = setns(&self.origin.file, CloneFlags::CLONE_NEWNET) {
            // Carrying on would run every later operation in the wrong namespace.
            eprintln!("cannot return to netns {}: {e}", self.origin.path.display());
            std::process::abort();
        }
    }
}

fn check_is_netns(file: &File, path: &Path) -> Result<(), Error> {
    let fs = nix::sys::statfs::fstatfs(file).map_err(|e| Error::io("open", path, e))?;
    let magic = fs.filesystem_type().0 as i64;
    if magic != NSFS_MAGIC && magic != PROC_SUPER_MAGIC {
        return Err(Error::new("open", path, ErrorKind::NotNetns));
    }
    // SAFETY: NS_GET_NSTYPE takes no argument and only reads the descriptor.
    let ty = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE as _) };
    if ty == libc::CLONE_NEWNET {
        return Ok(());
    }
    let old_kernel = ty < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOTTY);
    if old_kernel && magic == NSFS_MAGIC {
        // nsfs without NS_GET_NSTYPE (3.19..4.10): setns will still reject a wrong kind.
        return Ok(());
    }
    Err(Error::new("open", path, ErrorKind::NotNetns))
}
