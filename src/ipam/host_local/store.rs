//! The on-disk store, byte-compatible with the reference's `backend/disk`:
//! `<dataDir>/<network>/<ip>` holds `<trimmed container ID>\r\n<ifname>` (mode 0600),
//! `last_reserved_ip.<set index>` holds the last address reserved in that set, and every
//! operation holds `flock(LOCK_EX)` on `<dataDir>/<network>/lock`, as the reference does.
//!
//! Crash safety — a process killed at any instruction must not leave a state in which an
//! address is handed out twice or an attachment cannot be freed by one DEL:
//! * A reservation file is never created empty. Its content is first written to
//!   `.cnibox-reserve.tmp` (a name that is not an IP), which is then hard-linked to the IP's
//!   name. `link(2)` fails with EEXIST exactly like the reference's O_EXCL create, so both
//!   implementations still exclude each other, and the IP name appears atomically with its
//!   full content. A killed writer leaves at most the temp file, which is no reservation
//!   (its name does not parse as an IP) and is removed by the next caller under the lock.
//! * The owner index ([`super::index`]) is trusted only while its stamp matches the
//!   directory; the stamp is withdrawn before the first change of an operation, so after a
//!   crash the next caller rebuilds the index from the reservation files themselves.
//! * `last_reserved_ip.*` is only a hint: a torn value fails to parse and round-robin
//!   restarts at the set's start, which cannot produce a duplicate.
//!
//! Nothing in the data dir is followed through a symlink: the network directory is opened
//! with O_NOFOLLOW and every file below it is reached with `*at()` calls and O_NOFOLLOW.
use super::index::{self, list_dir, read_small, Bucket, Entry, Index, IndexError, Owner};
use super::reboot::{self, Boot, Record};
use crate::cni::netaddr::parse_ip;
use nix::errno::Errno;
use nix::fcntl::{openat, Flock, FlockArg, OFlag};
use nix::sys::stat::{fchmod, Mode};
use nix::unistd::{linkat, unlinkat, UnlinkatFlags};
use std::fmt;
use std::io::Write;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = "lock";
pub const LAST_RESERVED_PREFIX: &str = "last_reserved_ip.";
pub const RESERVE_TMP: &str = ".cnibox-reserve.tmp";
/// Reservation contents are tiny; anything longer is not one.
pub const MAX_RESERVATION: u64 = 1 << 16;

/// A store operation failed: which operation on which file, with the OS error as source.
#[derive(Debug)]
pub enum StoreError {
    /// `op path: <errno text>`, the errno worded as Go does.
    Os {
        op: &'static str,
        path: String,
        errno: Errno,
    },
    /// The network name cannot be a directory name below the data dir.
    InvalidNetwork(String),
    /// The owner index failed.
    Index(IndexError),
}

impl StoreError {
    pub(super) fn os(op: &'static str, path: impl fmt::Display, errno: Errno) -> StoreError {
        StoreError::Os {
            op,
            path: path.to_string(),
            errno,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Os { op, path, errno } => write!(f, "{op} {path}: {}", go_errno(*errno)),
            StoreError::InvalidNetwork(network) => {
                write!(f, "host-local: invalid network name {network:?} for the data dir")
            }
            StoreError::Index(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Os { errno, .. } => Some(errno),
            StoreError::InvalidNetwork(_) => None,
            StoreError::Index(e) => Some(e),
        }
    }
}

impl From<IndexError> for StoreError {
    fn from(e: IndexError) -> Self {
        StoreError::Index(e)
    }
}

/// The errno of an I/O error (EIO when it carries none).
fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

pub(super) fn go_errno(e: Errno) -> String {
    crate::cni::error::go_errno_text(&std::io::Error::from_raw_os_error(e as i32))
}

/// The network name becomes a path component: it must not be able to leave the data dir.
/// (The entry point already checked it against the name regex; this is the store's own guard.)
pub fn check_network_name(network: &str) -> Result<(), StoreError> {
    if network.is_empty() || network == "." || network == ".." || network.contains('/') || network.contains('\0') {
        return Err(StoreError::InvalidNetwork(network.to_string()));
    }
    Ok(())
}

/// A file name that is a reservation: the canonical text of an IP, as the reference writes it.
pub fn reservation_ip(name: &str) -> Option<IpAddr> {
    parse_ip(name).filter(|ip| ip.to_string() == name)
}

/// `last_reserved_ip.<set>` as an IP (no trimming, like `net.ParseIP`).
fn read_last_reserved(dir: &OwnedFd, set: usize) -> Option<IpAddr> {
    let bytes = read_small(dir, &format!("{LAST_RESERVED_PREFIX}{set}"), 256).ok()?;
    parse_ip(std::str::from_utf8(&bytes).ok()?)
}

/// Whether `path` still names the directory `dir` (not exchanged while we waited).
fn still_named(dir: &OwnedFd, path: &Path) -> bool {
    match (nix::sys::stat::fstat(dir), nix::sys::stat::lstat(path)) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    }
}

fn open_network_dir(path: &Path) -> Result<OwnedFd, StoreError> {
    openat(
        nix::fcntl::AT_FDCWD,
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| StoreError::os("open", path.display(), e))
}

/// A read-only look at a network's store for STATUS: no lock, no change, no symlink followed.
pub struct Peek {
    dir: OwnedFd,
}

impl Peek {
    pub fn open(data_dir: &Path, network: &str) -> Result<Peek, StoreError> {
        check_network_name(network)?;
        Ok(Peek {
            dir: open_network_dir(&data_dir.join(network))?,
        })
    }

    pub fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        read_last_reserved(&self.dir, set)
    }

    /// Whether a call in `boot` finds nothing of an earlier boot to release here.
    pub fn settled(&self, boot: &Boot) -> bool {
        Record::settles(Record::read(&self.dir).as_ref(), boot)
    }

    /// Anything by that name (even a planted symlink) makes the address unavailable.
    pub fn is_taken(&self, ip: IpAddr) -> bool {
        !matches!(
            nix::sys::stat::fstatat(
                &self.dir,
                ip.to_string().as_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW
            ),
            Err(Errno::ENOENT)
        )
    }
}

/// The store of one network, locked for as long as it lives.
pub struct Store {
    path: PathBuf,
    dir: OwnedFd,
    _lock: Flock<OwnedFd>,
    index: Index,
    /// The index stamp is withdrawn: write it again before unlocking.
    dirty: bool,
    /// The owner whose content `RESERVE_TMP` currently holds.
    tmp_owner: Option<Owner>,
    /// The last bucket read or written, for the ID it was parsed for: an ADD reads its
    /// bucket for the duplicate check and again to record the reservation.
    cached: Option<(String, Bucket)>,
}

impl Store {
    /// [`Store::open_in_boot`] without a boot: nothing of an earlier boot is released.
    pub fn open(data_dir: &Path, network: &str) -> Result<Store, StoreError> {
        Store::open_in_boot(data_dir, network, &Boot::unknown())
    }

    /// Create the network directory if needed, open it, take the lock, release what an
    /// earlier boot reserved (see [`super::reboot`]), and make sure the owner index
    /// describes the directory (rebuilding it when anyone else changed it).
    pub fn open_in_boot(data_dir: &Path, network: &str, boot: &Boot) -> Result<Store, StoreError> {
        check_network_name(network)?;
        let path = data_dir.join(network);
        let (dir, lock) = loop {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(&path)
                .map_err(|e| StoreError::os("mkdir", path.display(), io_errno(&e)))?;
            let dir = open_network_dir(&path)?;
            // go-filemutex: O_CREAT|O_RDONLY, 0750
            let lock = openat(
                &dir,
                LOCK_FILE,
                OFlag::O_CREAT | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o750),
            )
            .map_err(|e| StoreError::os("open", format!("{}/{LOCK_FILE}", path.display()), e))?;
            let lock = crate::util::flock::wait(lock, FlockArg::LockExclusive)
                .map_err(|e| StoreError::os("lock", format!("{}/{LOCK_FILE}", path.display()), e))?;
            // a release after a reboot exchanges the directory (keeping the lock file): a
            // caller that waited on the lock works in the directory the path names now
            if still_named(&dir, &path) {
                break (dir, lock);
            }
        };
        let index = Index::open(&dir)?;
        let mut store = Store {
            path,
            dir,
            _lock: lock,
            index,
            dirty: false,
            tmp_owner: None,
            cached: None,
        };
        store.settle_boot(data_dir, network, boot)?;
        if !store.index.is_current(&store.dir)? {
            store.rebuild()?;
        }
        Ok(store)
    }

    /// The first call in a boot: release what an earlier boot reserved, or adopt it when
    /// that is turned off or cannot be known; then record this boot.
    fn settle_boot(&mut self, data_dir: &Path, network: &str, boot: &Boot) -> Result<(), StoreError> {
        let recorded = Record::read(&self.dir);
        if Record::settles(recorded.as_ref(), boot) {
            return Ok(());
        }
        let Some(id) = boot.id.as_deref() else { return Ok(()) };
        let earlier = recorded.as_ref().is_some_and(|r| r.boot != id);
        let parent = reboot::open_data_dir(data_dir).map_err(|e| StoreError::os("open", data_dir.display(), e))?;
        if earlier && boot.release {
            let stale = reboot::stale_names(&self.dir, &self.index)?;
            if !stale.is_empty() {
                match reboot::exchange(&parent, network, &self.dir, &stale, id) {
                    Ok(new) => {
                        self.index = Index::open(&new)?;
                        self.dir = new;
                        self.cached = None;
                        self.dirty = false;
                    }
                    Err(why) => eprintln!(
                        "cnibox host-local: {}: keeping {} reservations of an earlier boot: {why}",
                        self.path.display(),
                        stale.len()
                    ),
                }
            }
        }
        // the old directory of an exchange (this one's, or a killed call's): the record
        // stays pending while one is there
        let removal = reboot::remove_old_dirs(&parent, network, boot.detach).unwrap_or_else(|e| {
            eprintln!(
                "cnibox host-local: remove the old directories of {} in {}: {}",
                network,
                data_dir.display(),
                go_errno(e)
            );
            reboot::Removal::Running
        });
        let now = Record {
            boot: id.to_string(),
            pending: removal == reboot::Removal::Running,
        };
        if recorded.as_ref() != Some(&now) {
            now.write(&self.index)?;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, op: &'static str, name: &str, e: Errno) -> StoreError {
        StoreError::os(op, format!("{}/{name}", self.path.display()), e)
    }

    fn invalidate(&mut self) -> Result<(), StoreError> {
        if !self.dirty {
            self.index.invalidate()?;
            self.dirty = true;
        }
        Ok(())
    }

    /// The owner recorded in a reservation file, read without following symlinks.
    fn owner_of(&self, ip: IpAddr) -> Option<Owner> {
        read_small(&self.dir, &ip.to_string(), MAX_RESERVATION)
            .ok()
            .and_then(|b| Owner::parse(&b))
    }

    /// Every reservation file and its owner, straight from the directory; stale temp files of
    /// killed writers are removed on the way (we hold the lock, so none is live).
    fn scan(&mut self) -> Result<Vec<Entry>, StoreError> {
        let mut out = vec![];
        for name in list_dir(&self.dir).map_err(|e| self.err("list", "", e))? {
            if name == RESERVE_TMP {
                self.invalidate()?;
                match unlinkat(&self.dir, name.as_str(), UnlinkatFlags::NoRemoveDir) {
                    Ok(()) | Err(Errno::ENOENT) => {}
                    Err(e) => return Err(self.err("remove stale", &name, e)),
                }
                continue;
            }
            let Some(ip) = reservation_ip(&name) else { continue };
            if let Some(owner) = self.owner_of(ip) {
                out.push(Entry { ip, owner });
            }
        }
        Ok(out)
    }

    /// Rebuild the owner index from the reservation files (O(reservations); only after a
    /// foreign change, a crash, or on first use).
    pub fn rebuild(&mut self) -> Result<(), StoreError> {
        self.invalidate()?;
        self.cached = None;
        let entries = self.scan()?;
        self.index.replace_all(entries)?;
        Ok(())
    }

    /// The bucket of `id` (trimmed) with the entries of `id` verified against their files
    /// (stale ones dropped); other IDs' entries are kept as they are, for rewriting.
    ///
    /// Rewriting a file in place does not change the directory, so the stamp cannot see it.
    /// When an entry's file names a different owner (as when a file is turned into a legacy
    /// ID-only one by hand) the index is rebuilt before answering.
    fn verified_bucket(&mut self, id: &str) -> Result<Bucket, StoreError> {
        let mut rebuilt = false;
        loop {
            let mut bucket = match self.read_bucket(id)? {
                Some(b) => b,
                None if !rebuilt => {
                    self.rebuild()?;
                    rebuilt = true;
                    continue;
                }
                None => Bucket::default(),
            };
            let mut mismatch = false;
            let mine = std::mem::take(&mut bucket.mine);
            for e in mine {
                match self.owner_of(e.ip) {
                    Some(o) if o == e.owner => bucket.mine.push(e),
                    Some(_) => mismatch = true,
                    None => {}
                }
            }
            if mismatch && !rebuilt {
                self.rebuild()?;
                rebuilt = true;
                continue;
            }
            return Ok(bucket);
        }
    }

    fn read_bucket(&mut self, id: &str) -> Result<Option<Bucket>, StoreError> {
        if let Some((cached_id, b)) = &self.cached {
            if cached_id == id {
                return Ok(Some(b.clone()));
            }
        }
        let bucket = self.index.bucket(id)?;
        self.cached = bucket.clone().map(|b| (id.to_string(), b));
        Ok(bucket)
    }

    fn write_bucket(&mut self, id: &str, bucket: Bucket) -> Result<(), StoreError> {
        self.cached = None;
        self.index.write_bucket(id, &bucket)?;
        self.cached = Some((id.to_string(), bucket));
        Ok(())
    }

    /// Addresses held by (id, ifname), in the new format and the legacy ID-only one
    /// (the reference's `GetByID`).
    pub fn held_by(&mut self, id: &str, ifname: &str) -> Result<Vec<IpAddr>, StoreError> {
        let id = id.trim();
        Ok(self
            .verified_bucket(id)?
            .mine
            .into_iter()
            .filter(|e| e.owner.ifname.as_deref().map_or(true, |i| i == ifname))
            .map(|e| e.ip)
            .collect())
    }

    /// The reference's `FindByID` (CHECK).
    pub fn find(&mut self, id: &str, ifname: &str) -> Result<bool, StoreError> {
        Ok(!self.held_by(id, ifname)?.is_empty())
    }

    fn ensure_tmp(&mut self, owner: &Owner) -> Result<(), StoreError> {
        if self.tmp_owner.as_ref() == Some(owner) {
            return Ok(());
        }
        self.invalidate()?;
        match unlinkat(&self.dir, RESERVE_TMP, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(self.err("remove", RESERVE_TMP, e)),
        }
        let fd = openat(
            &self.dir,
            RESERVE_TMP,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| self.err("create", RESERVE_TMP, e))?;
        fchmod(&fd, Mode::from_bits_truncate(0o600)).map_err(|e| self.err("chmod", RESERVE_TMP, e))?;
        let mut f = std::fs::File::from(fd);
        let content = format!("{}\r\n{}", owner.id, owner.ifname.as_deref().unwrap_or(""));
        f.write_all(content.as_bytes()).map_err(|e| {
            self.err(
                "write",
                RESERVE_TMP,
                Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            )
        })?;
        self.tmp_owner = Some(owner.clone());
        Ok(())
    }

    /// Reserve `ip` for (id, ifname); `Ok(false)` when someone holds it already. On success
    /// `last_reserved_ip.<set>` is updated, as the reference does for every reservation.
    pub fn reserve(&mut self, id: &str, ifname: &str, ip: IpAddr, set: usize) -> Result<bool, StoreError> {
        let owner = Owner {
            id: id.trim().to_string(),
            ifname: Some(ifname.to_string()),
        };
        self.ensure_tmp(&owner)?;
        let name = ip.to_string();
        match linkat(
            &self.dir,
            RESERVE_TMP,
            &self.dir,
            name.as_str(),
            nix::fcntl::AtFlags::empty(),
        ) {
            Ok(()) => {}
            Err(Errno::EEXIST) => return Ok(false),
            Err(e) => return Err(self.err("link", &name, e)),
        }
        // The file is ours now: if recording it fails, take it back, or the failed ADD
        // would leave an address that no caller knows it holds.
        if let Err(e) = self.record_reservation(&owner, ip, set) {
            let _ = unlinkat(&self.dir, name.as_str(), UnlinkatFlags::NoRemoveDir);
            return Err(e);
        }
        Ok(true)
    }

    fn record_reservation(&mut self, owner: &Owner, ip: IpAddr, set: usize) -> Result<(), StoreError> {
        let mut bucket = self.verified_bucket(&owner.id)?;
        bucket.forget_ip(ip);
        bucket.mine.push(Entry {
            ip,
            owner: owner.clone(),
        });
        self.write_bucket(&owner.id, bucket)?;
        self.write_last_reserved(set, ip)
    }

    fn write_last_reserved(&mut self, set: usize, ip: IpAddr) -> Result<(), StoreError> {
        let name = format!("{LAST_RESERVED_PREFIX}{set}");
        index::overwrite(&self.dir, &name, ip.to_string().as_bytes()).map_err(|e| self.err("write", &name, e))
    }

    /// `last_reserved_ip.<set>`, if present and an IP.
    pub fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        read_last_reserved(&self.dir, set)
    }

    /// Remove the given verified entries (files first, then the index).
    fn remove(&mut self, id: &str, mut bucket: Bucket, gone: &[IpAddr]) -> Result<(), StoreError> {
        if gone.is_empty() {
            return Ok(());
        }
        self.invalidate()?;
        let mut first_err = None;
        for ip in gone {
            let name = ip.to_string();
            match unlinkat(&self.dir, name.as_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => first_err = first_err.or(Some(self.err("remove", &name, e))),
            }
        }
        bucket.mine.retain(|e| !gone.contains(&e.ip));
        self.write_bucket(id, bucket)?;
        first_err.map_or(Ok(()), Err)
    }

    /// The reference's `ReleaseByID`: every file of (id, ifname); if there is none, every
    /// legacy ID-only file of `id`. Returns what was released.
    pub fn release(&mut self, id: &str, ifname: &str) -> Result<Vec<IpAddr>, StoreError> {
        let id = id.trim();
        let bucket = self.verified_bucket(id)?;
        let mut gone: Vec<IpAddr> = bucket
            .mine
            .iter()
            .filter(|e| e.owner.ifname.as_deref() == Some(ifname))
            .map(|e| e.ip)
            .collect();
        if gone.is_empty() {
            gone = bucket
                .mine
                .iter()
                .filter(|e| e.owner.ifname.is_none())
                .map(|e| e.ip)
                .collect();
        }
        self.remove(id, bucket, &gone)?;
        Ok(gone)
    }

    /// Undo this call's own reservations (only files still holding exactly this owner).
    pub fn release_ips(&mut self, id: &str, ifname: &str, ips: &[IpAddr]) -> Result<(), StoreError> {
        let id = id.trim();
        let bucket = self.verified_bucket(id)?;
        let gone: Vec<IpAddr> = bucket
            .mine
            .iter()
            .filter(|e| ips.contains(&e.ip) && e.owner.ifname.as_deref() == Some(ifname))
            .map(|e| e.ip)
            .collect();
        self.remove(id, bucket, &gone)
    }

    /// GC: release every reservation whose owner is not a valid attachment. A legacy
    /// ID-only file is kept when any valid attachment has its container ID.
    pub fn gc(&mut self, valid: &[(String, String)]) -> Result<Vec<IpAddr>, StoreError> {
        self.invalidate()?;
        let mut released = vec![];
        let mut first_err = None;
        for e in self.scan()? {
            let keep = valid
                .iter()
                .any(|(id, ifname)| id.trim() == e.owner.id && e.owner.ifname.as_deref().map_or(true, |i| i == ifname));
            if keep {
                continue;
            }
            let name = e.ip.to_string();
            match unlinkat(&self.dir, name.as_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => released.push(e.ip),
                Err(err) => first_err = first_err.or(Some(self.err("remove", &name, err))),
            }
        }
        self.rebuild()?;
        first_err.map_or(Ok(released), Err)
    }

    /// Every index entry (tests and diagnostics).
    pub fn index_entries(&self) -> Result<Vec<Entry>, StoreError> {
        Ok(self.index.all()?)
    }

    /// Remove the temp file and stamp the index; the lock is released when the store drops.
    pub fn finish(&mut self) -> Result<(), StoreError> {
        if self.tmp_owner.take().is_some() {
            match unlinkat(&self.dir, RESERVE_TMP, UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(self.err("remove", RESERVE_TMP, e)),
            }
        }
        if self.dirty {
            self.index.stamp(&self.dir)?;
            self.dirty = false;
        }
        Ok(())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // error paths: leave a consistent store; if this fails the stamp stays withdrawn
        // and the next caller rebuilds
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::super::index::INDEX_DIR;
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn reserve(data: &Path, id: &str, ifname: &str, addr: &str) -> bool {
        let mut s = Store::open(data, "net").unwrap();
        let ok = s.reserve(id, ifname, ip(addr), 0).unwrap();
        s.finish().unwrap();
        ok
    }

    #[test]
    fn reservation_bytes_and_modes() {
        let d = tmp();
        assert!(reserve(d.path(), "  dummy\n ", "eth0", "10.1.2.2"));
        let dir = d.path().join("net");
        assert_eq!(std::fs::read(dir.join("10.1.2.2")).unwrap(), b"dummy\r\neth0");
        assert_eq!(std::fs::read(dir.join("last_reserved_ip.0")).unwrap(), b"10.1.2.2");
        let mode = |n: &str| std::fs::metadata(dir.join(n)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("10.1.2.2"), 0o600);
        assert_eq!(mode("last_reserved_ip.0"), 0o600);
        assert_eq!(mode("lock"), 0o750 & !current_umask());
        assert!(
            !dir.join(RESERVE_TMP).exists(),
            "the temp file is gone after the operation"
        );
        assert_eq!(std::fs::metadata(dir.join("10.1.2.2")).unwrap().len(), 11);
    }

    fn current_umask() -> u32 {
        use nix::sys::stat::{umask, Mode};
        let m = umask(Mode::from_bits_truncate(0o022));
        umask(m);
        m.bits()
    }

    #[test]
    fn taken_addresses_are_refused_like_o_excl() {
        let d = tmp();
        assert!(reserve(d.path(), "a", "eth0", "10.1.2.2"));
        assert!(!reserve(d.path(), "b", "eth0", "10.1.2.2"));
        // a file the reference wrote counts as taken too
        std::fs::write(d.path().join("net/10.1.2.3"), "ref\r\neth0").unwrap();
        assert!(!reserve(d.path(), "b", "eth0", "10.1.2.3"));
    }

    #[test]
    fn release_by_owner_and_legacy_fallback() {
        let d = tmp();
        reserve(d.path(), "c1", "eth0", "10.1.2.2");
        reserve(d.path(), "c1", "eth1", "10.1.2.3");
        let mut s = Store::open(d.path(), "net").unwrap();
        assert_eq!(s.release("c1", "eth0").unwrap(), vec![ip("10.1.2.2")]);
        assert_eq!(s.release("unknown", "eth0").unwrap(), Vec::<IpAddr>::new());
        s.finish().unwrap();
        drop(s);
        // a legacy file (ID only), written by an old reference
        std::fs::write(d.path().join("net/10.1.2.9"), "c9").unwrap();
        let mut s = Store::open(d.path(), "net").unwrap();
        assert!(s.find("c9", "eth0").unwrap());
        assert_eq!(s.held_by("c9", "eth0").unwrap(), vec![ip("10.1.2.9")]);
        assert_eq!(s.release("c9", "eth0").unwrap(), vec![ip("10.1.2.9")]);
        assert!(!s.find("c9", "eth0").unwrap());
        assert!(s.find("c1", "eth1").unwrap());
    }

    #[test]
    fn index_is_rebuilt_after_a_foreign_change() {
        let d = tmp();
        reserve(d.path(), "c1", "eth0", "10.1.2.2");
        // the reference (another writer) adds and removes files behind our back, within the
        // same clock tick as our last change
        std::fs::write(d.path().join("net/10.1.2.7"), "c7\r\neth0").unwrap();
        std::fs::remove_file(d.path().join("net/10.1.2.2")).unwrap();
        let mut s = Store::open(d.path(), "net").unwrap();
        let all: Vec<IpAddr> = s.index_entries().unwrap().into_iter().map(|e| e.ip).collect();
        assert_eq!(all, vec![ip("10.1.2.7")]);
        assert_eq!(s.release("c7", "eth0").unwrap(), vec![ip("10.1.2.7")]);
    }

    #[test]
    fn stamp_detects_a_change_in_the_same_tick() {
        let d = tmp();
        reserve(d.path(), "c1", "eth0", "10.1.2.2");
        // immediately (same coarse tick as our stamp): a foreign create
        std::fs::write(d.path().join("net/10.1.2.8"), "c8\r\neth0").unwrap();
        let mut s = Store::open(d.path(), "net").unwrap();
        assert_eq!(s.held_by("c8", "eth0").unwrap(), vec![ip("10.1.2.8")]);
    }

    #[test]
    fn a_valid_index_is_used_without_rescanning() {
        let d = tmp();
        reserve(d.path(), "c1", "eth0", "10.1.2.2");
        // a file that appears without a directory change cannot be seen: proof that the
        // stamp was trusted and the directory was not scanned
        let dir = d.path().join("net");
        let before = std::fs::metadata(&dir).unwrap().modified().unwrap();
        std::fs::write(dir.join("10.1.2.3"), "c3\r\neth0").unwrap();
        let f = std::fs::File::open(&dir).unwrap();
        f.set_modified(before).unwrap();
        let mut s = Store::open(d.path(), "net").unwrap();
        assert_eq!(s.index_entries().unwrap().len(), 1, "not rebuilt");
        assert!(s.find("c1", "eth0").unwrap());
    }

    #[test]
    fn in_place_edit_of_an_indexed_file_triggers_a_rebuild() {
        let d = tmp();
        reserve(d.path(), "c1", "eth0", "10.1.2.2");
        // the reference's own test rewrites a file to the legacy ID-only form in place
        std::fs::write(d.path().join("net/10.1.2.2"), "c1").unwrap();
        let mut s = Store::open(d.path(), "net").unwrap();
        assert!(s.find("c1", "eth0").unwrap());
        assert_eq!(s.release("c1", "eth0").unwrap(), vec![ip("10.1.2.2")]);
        s.finish().unwrap();
        // and an edit to another owner is never released for the old one
        drop(s);
        reserve(d.path(), "c5", "eth0", "10.1.2.5");
        std::fs::write(d.path().join("net/10.1.2.5"), "other\r\neth0").unwrap();
        let mut s = Store::open(d.path(), "net").unwrap();
        assert_eq!(s.release("c5", "eth0").unwrap(), Vec::<IpAddr>::new());
        assert!(d.path().join("net/10.1.2.5").exists());
        assert!(s.find("other", "eth0").unwrap());
    }

    #[test]
    fn leftover_temp_file_of_a_killed_writer_is_no_reservation() {
        let d = tmp();
        reserve(d.path(), "c1", "eth0", "10.1.2.2");
        let dir = d.path().join("net");
        // a writer killed after writing half of its content, before link(2), and before it
        // could stamp the index again
        std::fs::write(dir.join(RESERVE_TMP), "c2\r").unwrap();
        std::fs::remove_file(dir.join(INDEX_DIR).join("stamp")).unwrap();
        let mut s = Store::open(d.path(), "net").unwrap();
        assert!(!dir.join(RESERVE_TMP).exists(), "stale temp removed under the lock");
        assert_eq!(s.index_entries().unwrap().len(), 1);
        assert!(!s.find("c2", "eth0").unwrap());
        assert!(s.reserve("c3", "eth0", ip("10.1.2.3"), 0).unwrap());
        s.finish().unwrap();
        assert_eq!(std::fs::read(dir.join("10.1.2.3")).unwrap(), b"c3\r\neth0");
    }

    #[test]
    fn killed_between_link_and_stamp_still_frees_with_one_release() {
        let d = tmp();
        {
            let mut s = Store::open(d.path(), "net").unwrap();
            assert!(s.reserve("c1", "eth0", ip("10.1.2.2"), 0).unwrap());
            // simulate SIGKILL: no finish(), no Drop
            std::mem::forget(s);
        }
        let dir = d.path().join("net");
        assert!(!dir.join(INDEX_DIR).join("stamp").exists(), "the stamp was withdrawn");
        // the flock died with the forgotten fd only at process exit; release it by hand
        // the forgotten Store still holds its flock (locks belong to the open file
        // description, which a killed process would have lost): close the leaked fd
        for fd in 3..1024 {
            let p = format!("/proc/self/fd/{fd}");
            if std::fs::read_link(&p).map(|l| l == dir.join("lock")).unwrap_or(false) {
                nix::unistd::close(fd).unwrap();
            }
        }
        let mut s = Store::open(d.path(), "net").unwrap();
        assert_eq!(s.release("c1", "eth0").unwrap(), vec![ip("10.1.2.2")]);
        s.finish().unwrap();
        let mut names: Vec<String> = list_dir(&s.dir)
            .unwrap()
            .into_iter()
            .filter(|n| n != INDEX_DIR)
            .collect();
        names.sort();
        assert_eq!(names, ["last_reserved_ip.0", "lock"]);
    }

    #[test]
    fn gc_keeps_valid_attachments_and_honours_legacy_files() {
        let d = tmp();
        reserve(d.path(), "keep", "eth0", "10.1.2.2");
        reserve(d.path(), "keep", "eth1", "10.1.2.3");
        reserve(d.path(), "gone", "eth0", "10.1.2.4");
        std::fs::write(d.path().join("net/10.1.2.5"), "keep").unwrap();
        std::fs::write(d.path().join("net/10.1.2.6"), "old").unwrap();
        let mut s = Store::open(d.path(), "net").unwrap();
        let mut released = s.gc(&[("keep".into(), "eth0".into())]).unwrap();
        released.sort();
        assert_eq!(released, vec![ip("10.1.2.3"), ip("10.1.2.4"), ip("10.1.2.6")]);
        assert!(s.find("keep", "eth0").unwrap());
        assert_eq!(s.gc(&[]).unwrap().len(), 2, "an empty list releases everything");
        s.finish().unwrap();
        assert!(d.path().join("net/lock").exists());
        assert!(d.path().join("net/last_reserved_ip.0").exists());
    }

    #[test]
    fn network_name_cannot_escape() {
        let d = tmp();
        for bad in ["", ".", "..", "a/b", "../x", "a\0b"] {
            assert!(Store::open(d.path(), bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn planted_symlinks_are_not_followed() {
        let d = tmp();
        let victim = d.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::create_dir(d.path().join("data")).unwrap();
        std::os::unix::fs::symlink(&victim, d.path().join("data/net")).unwrap();
        let e = Store::open(&d.path().join("data"), "net").err().unwrap();
        assert!(e.to_string().contains("not a directory"), "{e}");
        // callers can branch on the typed cause, and the OS error is kept as the source
        assert!(
            matches!(
                e,
                StoreError::Os {
                    op: "open",
                    errno: Errno::ENOTDIR,
                    ..
                }
            ),
            "{e:?}"
        );
        let source = std::error::Error::source(&e).expect("the OS error");
        assert_eq!(source.to_string(), Errno::ENOTDIR.to_string());
        assert_eq!(
            std::fs::read_dir(&victim).unwrap().count(),
            0,
            "nothing created through the link"
        );
        // inside the network dir: a symlink named like last_reserved_ip.0
        let target = d.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        std::fs::create_dir(d.path().join("d2")).unwrap();
        std::fs::create_dir(d.path().join("d2/net")).unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("d2/net/last_reserved_ip.0")).unwrap();
        let mut s = Store::open(&d.path().join("d2"), "net").unwrap();
        assert!(s.reserve("c1", "eth0", ip("10.1.2.2"), 0).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(
            !d.path().join("d2/net/10.1.2.2").exists(),
            "a reservation that could not be recorded is taken back"
        );
        assert!(!s.find("c1", "eth0").unwrap());
        // a symlink named like an IP is taken, never written through
        std::os::unix::fs::symlink(&target, d.path().join("d2/net/10.1.2.9")).unwrap();
        assert!(!s.reserve("c1", "eth0", ip("10.1.2.9"), 1).unwrap());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn last_reserved_is_not_trimmed() {
        let d = tmp();
        std::fs::create_dir_all(d.path().join("net")).unwrap();
        std::fs::write(d.path().join("net/last_reserved_ip.0"), "10.1.2.5\n").unwrap();
        std::fs::write(d.path().join("net/last_reserved_ip.1"), "10.1.2.5").unwrap();
        let s = Store::open(d.path(), "net").unwrap();
        assert_eq!(s.last_reserved(0), None);
        assert_eq!(s.last_reserved(1), Some(ip("10.1.2.5")));
    }
}
