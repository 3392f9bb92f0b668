//! Host-wide advisory locks of cnibox's plugins: `flock(2)` on files in `/run/cnibox`
//! (tmpfs, gone at reboot with the rules they guard). A lock is released when dropped or
//! when its process dies, so a crashed plugin never leaves the host locked. The files are
//! never removed: removing one while another process waits on it would split the lock in
//! two.
use super::error::{err, Error};
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::path::Path;

const DIR: &str = "/run/cnibox";

/// A held lock; released on drop.
pub struct Held {
    _held: Flock<File>,
}

/// Waits for the exclusive lock `name` (a file name in /run/cnibox).
pub fn exclusive(name: &str) -> Result<Held, Error> {
    let path = Path::new(DIR).join(name);
    let fail = |e: &dyn std::fmt::Display| err(format!("lock {}", path.display()), e);
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .recursive(true)
        .create(DIR)
        .map_err(|e| fail(&e))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| fail(&e))?;
    let held = crate::util::flock::wait(file, FlockArg::LockExclusive).map_err(|e| fail(&e))?;
    Ok(Held { _held: held })
}
