//! Advisory locks in the cache dir, so two operations on one attachment never overlap and
//! GC never runs beside an ADD or DEL of the same network.
//!
//! An attachment's lock file goes with the attachment (a DEL removes it while holding it),
//! or a node's churn would leave one file per container it ever ran. Removing a lock file
//! that another process has opened and waits on would split the lock in two; so a lock is
//! held only once the path still names the file that was locked, else it is taken again.
use super::cache::Key;
use nix::fcntl::{Flock, FlockArg};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A held lock; released when dropped (or when the process dies).
pub struct Held {
    _lock: Flock<File>,
}

#[derive(Debug)]
pub struct LockError {
    pub path: PathBuf,
    pub msg: String,
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lock {}: {}", self.path.display(), self.msg)
    }
}

impl std::error::Error for LockError {}

fn take(cache_dir: &Path, path: &Path, how: FlockArg) -> Result<Held, LockError> {
    let err = |msg: String| LockError {
        path: path.to_path_buf(),
        msg,
    };
    // a lock directory planted as a symlink would make us create files elsewhere (checked
    // before creating missing directories, so none is created through one)
    super::cache::no_symlinks_below(cache_dir, path).map_err(|e| err(e.to_string()))?;
    if let Some(dir) = path.parent() {
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .recursive(true)
            .create(dir)
            .map_err(|e| err(format!("create directory: {e}")))?;
    }
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| err(e.to_string()))?;
        let held = Held {
            _lock: crate::util::flock::wait(file, how).map_err(|e| err(e.to_string()))?,
        };
        if still_named(&held, path) {
            return Ok(held);
        }
        // removed (or replaced) by the DEL that held it while this process waited
    }
}

/// Whether `path` still names the file `held` locked.
fn still_named(held: &Held, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (held._lock.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(locked), Ok(named)) => locked.dev() == named.dev() && locked.ino() == named.ino(),
        _ => false,
    }
}

/// Removes the attachment's lock file; call it while holding the lock, once the attachment
/// is gone. A process waiting on the removed file takes the lock again on a new one.
pub fn remove_attachment(cache_dir: &Path, key: &Key) {
    let _ = std::fs::remove_file(attachment_path(cache_dir, key));
}

pub fn network_path(cache_dir: &Path, network: &str) -> PathBuf {
    cache_dir.join("locks").join("networks").join(network)
}

pub fn attachment_path(cache_dir: &Path, key: &Key) -> PathBuf {
    cache_dir.join("locks").join(key.file_name())
}

/// For the OCI hook: one hook at a time on a host (plugins of several networks and the
/// re-ADD of a re-created container must not interleave).
pub fn hook(cache_dir: &Path) -> Result<Held, LockError> {
    take(
        cache_dir,
        &cache_dir.join("locks").join("oci-hook"),
        FlockArg::LockExclusive,
    )
}

/// For ADD, CHECK and DEL: the network shared (GC excluded), the attachment exclusive.
pub fn attachment(cache_dir: &Path, key: &Key) -> Result<(Held, Held), LockError> {
    let net = take(cache_dir, &network_path(cache_dir, &key.network), FlockArg::LockShared)?;
    let one = take(cache_dir, &attachment_path(cache_dir, key), FlockArg::LockExclusive)?;
    Ok((net, one))
}

/// For GC: the whole network, exclusive.
pub fn network(cache_dir: &Path, network: &str) -> Result<Held, LockError> {
    take(cache_dir, &network_path(cache_dir, network), FlockArg::LockExclusive)
}

/// For GC's own DELs, under the network lock it already holds.
pub fn attachment_only(cache_dir: &Path, key: &Key) -> Result<Held, LockError> {
    take(cache_dir, &attachment_path(cache_dir, key), FlockArg::LockExclusive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_excludes_and_release_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let key = Key::new("n", "c", "eth0").unwrap();
        let held = attachment(d.path(), &key).unwrap();
        // flock conflicts between open file descriptions, also within one process.
        let f = File::open(attachment_path(d.path(), &key)).unwrap();
        let f = match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(_) => panic!("second exclusive lock granted"),
            Err((f, e)) => {
                assert_eq!(e, nix::errno::Errno::EWOULDBLOCK);
                f
            }
        };
        let g = File::open(network_path(d.path(), "n")).unwrap();
        assert!(
            Flock::lock(g, FlockArg::LockExclusiveNonblock).is_err(),
            "GC lock granted during ADD"
        );
        drop(held);
        assert!(Flock::lock(f, FlockArg::LockExclusiveNonblock).is_ok());
    }

    /// Regression: lock files were never removed, one per attachment a node ever had.
    #[test]
    fn a_removed_lock_file_is_not_a_lock_for_its_waiters() {
        let d = tempfile::tempdir().unwrap();
        let key = Key::new("n", "c", "eth0").unwrap();
        let path = attachment_path(d.path(), &key);
        let held = attachment(d.path(), &key).unwrap();
        // another process's ADD of the same attachment, waiting on the file DEL holds
        let waiter = std::thread::spawn({
            let dir = d.path().to_path_buf();
            let key = key.clone();
            move || {
                let (_net, one) = attachment(&dir, &key).unwrap();
                one
            }
        });
        // until the waiter is blocked on the file (a sleep would let a slow waiter open the
        // new file instead, and the test pass without the case it is for)
        use std::os::unix::fs::MetadataExt;
        let blocked = format!(":{} ", std::fs::metadata(&path).unwrap().ino());
        let waits = || {
            let locks = std::fs::read_to_string("/proc/locks").unwrap();
            locks.lines().any(|l| l.contains(" -> FLOCK ") && l.contains(&blocked))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !waits() {
            assert!(
                std::time::Instant::now() < deadline,
                "the waiter never blocked on the lock"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        remove_attachment(d.path(), &key);
        assert!(!path.exists());
        drop(held);
        let theirs = waiter.join().unwrap();
        // the waiter holds the lock on the file the path names now, so a third one is excluded
        assert!(still_named(&theirs, &path), "the waiter locked the removed file");
        let f = File::open(&path).unwrap();
        assert!(Flock::lock(f, FlockArg::LockExclusiveNonblock).is_err());
    }

    #[test]
    fn planted_symlinks_are_refused_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cache");
        let key = Key::new("n", "c", "eth0").unwrap();
        std::fs::create_dir_all(cache.join("locks/networks")).unwrap();
        std::os::unix::fs::symlink(d.path().join("outside-a"), attachment_path(&cache, &key)).unwrap();
        assert!(attachment(&cache, &key).is_err());
        assert!(!d.path().join("outside-a").exists(), "created through the link");
        std::fs::remove_file(attachment_path(&cache, &key)).unwrap();
        // a symlinked lock directory
        std::fs::create_dir(d.path().join("outside-dir")).unwrap();
        std::fs::remove_dir_all(cache.join("locks")).unwrap();
        std::os::unix::fs::symlink(d.path().join("outside-dir"), cache.join("locks")).unwrap();
        let e = network(&cache, "n").err().expect("refused");
        assert!(e.msg.contains("symlink"), "{e}");
        assert_eq!(std::fs::read_dir(d.path().join("outside-dir")).unwrap().count(), 0);
    }
}
