//! Reservations of an earlier boot. Every network namespace of an earlier boot is gone, so
//! its reservations are leaks; the first call in a network after a reboot releases them,
//! without any runtime's help.
//!
//! * **Which boot**: `.cnibox-index/boot` records the boot ID (see [`crate::util::boot`]) of
//!   the calls the index describes. The reference never reads it as a reservation (it
//!   starts with `#`, like every index file).
//! * **Which reservations**: a reservation file carries no boot, so cnibox releases only
//!   what it knows to be older than the reboot: when the index still describes the
//!   directory exactly (its stamp matches), every reservation there; otherwise (another
//!   writer, such as the reference, changed the directory since cnibox's last call) the
//!   ones the index lists whose files still name the same owner. A reservation the
//!   reference wrote after cnibox's last call of the earlier boot cannot be told from one it
//!   wrote after the reboot, so it is kept: never releasing a live address matters more.
//! * **Atomically**: the network directory is replaced in one `renameat2(RENAME_EXCHANGE)`
//!   by a directory holding hard links to everything that stays (the lock file among them,
//!   so the lock and anyone waiting on it carry over; `last_reserved_ip.*` unchanged, as
//!   the reference's DELs would leave them; the reservations kept) and a fresh index whose
//!   record already names this boot. A kill before the exchange leaves the old
//!   reservations and the old record, and the next call starts over; a kill after it
//!   leaves none of them. The reservation files keep the reference's format: the reference
//!   reads and writes the new directory as before.
//! * **The old directory** is no longer the store once exchanged: it waits beside it as
//!   `.cnibox-reboot-<boot>-<network>` and is removed by a detached process, so the call
//!   does not wait for the file system to free every file (on ext4 mounted with `discard`
//!   each costs ~1 ms: 60,000 take a minute). The record's `pending` line says one may
//!   still be there; calls check on it until it is gone, and start a new remover when the
//!   last one was killed.
//! * A directory that cannot be exchanged (a mount point, a file system without
//!   `RENAME_EXCHANGE`, a subdirectory, which cannot be hard-linked, or any other failure
//!   to build the new one) keeps its reservations, as the reference does, with a warning;
//!   the record then names this boot: failing every call over a leak helps nobody.
use super::index::{self, list_dir, read_small, Index, BOOT_RECORD, INDEX_DIR};
use super::store::{go_errno, StoreError};
use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, Flock, FlockArg, OFlag};
use nix::sys::stat::{fchmod, fstat, fstatat, mkdirat, Mode, SFlag};
use nix::unistd::{fchown, linkat, unlinkat, Gid, Uid, UnlinkatFlags};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

const HEADER: &str = "# cnibox host-local boot record (not a reservation)";
/// Old directories (and the one being built) beside the network directory: a network name
/// cannot start with a dot, so this never names a network.
const OLD_PREFIX: &str = ".cnibox-reboot-";

/// The boot a call runs in, and what to do with an earlier boot's reservations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boot {
    /// The boot ID; `None` when it cannot be read (then nothing is released).
    pub id: Option<String>,
    /// `releaseAfterReboot` (default true). False keeps them, as the reference does, and
    /// counts them as this boot's from then on.
    pub release: bool,
    /// Remove an old directory in a detached process (it forks: only for a single-threaded
    /// process, as every cnibox applet is), else before returning.
    pub detach: bool,
}

impl Boot {
    /// The running boot, as the plugin sees it.
    pub fn current(release: bool) -> Boot {
        Boot {
            id: crate::util::boot::id(),
            release,
            detach: true,
        }
    }

    /// No boot known: the store is used as the reference uses it.
    pub fn unknown() -> Boot {
        Boot {
            id: None,
            release: false,
            detach: false,
        }
    }
}

/// What `.cnibox-index/boot` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub boot: String,
    /// An old directory of a release may still be beside the store.
    pub pending: bool,
}

impl Record {
    fn encode(&self) -> String {
        let pending = if self.pending { "pending\n" } else { "" };
        format!("{HEADER}\nboot {}\n{pending}", self.boot)
    }

    fn decode(text: &str) -> Option<Record> {
        let mut lines = text.lines();
        if lines.next()? != HEADER {
            return None;
        }
        let boot = crate::util::boot::parse(lines.next()?.strip_prefix("boot ")?)?;
        let pending = match lines.next() {
            None => false,
            Some("pending") => true,
            Some(_) => return None,
        };
        lines.next().is_none().then_some(Record { boot, pending })
    }

    /// The record of the network directory `net_dir`, read without a lock or a change;
    /// `None` when there is none or it does not parse, which counts as a first use: nothing
    /// is released.
    pub fn read(net_dir: &OwnedFd) -> Option<Record> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let index_dir = openat(net_dir, INDEX_DIR, flags, Mode::empty()).ok()?;
        let bytes = read_small(&index_dir, BOOT_RECORD, 4096).ok()?;
        Record::decode(std::str::from_utf8(&bytes).ok()?)
    }

    pub fn write(&self, index: &Index) -> Result<(), index::IndexError> {
        index.write_extra(BOOT_RECORD, self.encode().as_bytes())
    }

    /// Whether a call in `boot` has nothing to do here.
    pub fn settles(record: Option<&Record>, boot: &Boot) -> bool {
        match (&boot.id, record) {
            (None, _) => true,
            (Some(id), Some(r)) => r.boot == *id && !r.pending,
            (Some(_), None) => false,
        }
    }
}

/// The name of the directory a release in `boot` builds, and the old one after the exchange.
pub fn old_dir_name(boot: &str, network: &str) -> String {
    format!("{OLD_PREFIX}{boot}-{network}")
}

/// Whether `name` (an entry of the data dir) is an old directory of `network`.
fn is_old_dir_of(name: &str, network: &str) -> bool {
    name.strip_prefix(OLD_PREFIX)
        .and_then(|rest| Some((rest.get(..36)?, rest.get(36..)?)))
        .is_some_and(|(boot, rest)| crate::util::boot::parse(boot).is_some() && rest.strip_prefix('-') == Some(network))
}

fn open_dir_at(parent: &OwnedFd, name: &str) -> nix::Result<OwnedFd> {
    openat(
        parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Removes `name` below `parent`, a directory with everything in it, without following a
/// symlink; a missing name is fine.
pub fn remove_tree(parent: &OwnedFd, name: &str) -> nix::Result<()> {
    remove_tree_at(parent, name, 0)
}

fn remove_tree_at(parent: &OwnedFd, name: &str, depth: usize) -> nix::Result<()> {
    match unlinkat(parent, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => return Ok(()),
        Err(Errno::EISDIR) if depth < 16 => {}
        Err(e) => return Err(e),
    }
    let dir = open_dir_at(parent, name)?;
    remove_contents(&dir, depth)?;
    match unlinkat(parent, name, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

fn remove_contents(dir: &OwnedFd, depth: usize) -> nix::Result<()> {
    for entry in list_dir(dir)? {
        remove_tree_at(dir, &entry, depth + 1)?;
    }
    Ok(())
}

pub fn open_data_dir(data_dir: &Path) -> nix::Result<OwnedFd> {
    // the data dir itself may be a symlink, as the reference allows
    openat(
        nix::fcntl::AT_FDCWD,
        data_dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Whether an old directory is gone or still being removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    Gone,
    Running,
}

/// Removes every old directory of `network` in `parent` (see the module comment); a
/// remover holds an exclusive `flock` on the directory it removes.
pub fn remove_old_dirs(parent: &OwnedFd, network: &str, detach: bool) -> nix::Result<Removal> {
    let mut removal = Removal::Gone;
    for name in list_dir(parent)? {
        if is_old_dir_of(&name, network) && remove_old_dir(parent, &name, detach)? == Removal::Running {
            removal = Removal::Running;
        }
    }
    Ok(removal)
}

fn remove_old_dir(parent: &OwnedFd, name: &str, detach: bool) -> nix::Result<Removal> {
    let dir = match open_dir_at(parent, name) {
        Ok(d) => d,
        Err(Errno::ENOENT) => return Ok(Removal::Gone),
        Err(Errno::ENOTDIR | Errno::ELOOP) => return remove_tree(parent, name).map(|()| Removal::Gone),
        Err(e) => return Err(e),
    };
    let dir = match Flock::lock(dir, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => locked,
        Err((_, Errno::EWOULDBLOCK)) => return Ok(Removal::Running),
        Err((_, e)) => return Err(e),
    };
    if !detach {
        remove_tree(parent, name)?;
        return Ok(Removal::Gone);
    }
    // the remover takes the lock again itself: a lock shared through fork would be released
    // for both by this process's unlock
    let dir = dir.unlock().map_err(|(_, e)| e)?;
    spawn_remover(parent, &dir, name)?;
    Ok(Removal::Running)
}

/// Forks a process, detached from this one's session and stdio, that removes `dir` (named
/// `name` in `parent`) and exits.
fn spawn_remover(parent: &OwnedFd, dir: &OwnedFd, name: &str) -> nix::Result<()> {
    use nix::unistd::{fork, ForkResult};
    // SAFETY: cnibox is single-threaded (Boot::detach is set only there), so the child may
    // run any code, as the parent would.
    match unsafe { fork() }? {
        ForkResult::Parent { child } => {
            // the middle process exits at once; the remover is then nobody's child to wait for
            let _ = nix::sys::wait::waitpid(child, None);
            Ok(())
        }
        ForkResult::Child => {
            // SAFETY: as above.
            if let Ok(ForkResult::Child) = unsafe { fork() } {
                let code = remover(parent, dir, name).map_or(1, |()| 0);
                // SAFETY: ends this process without running the parent's destructors or
                // flushing its buffered output a second time.
                unsafe { libc::_exit(code) }
            }
            // SAFETY: as above.
            unsafe { libc::_exit(0) }
        }
    }
}

fn remover(parent: &OwnedFd, dir: &OwnedFd, name: &str) -> nix::Result<()> {
    let _ = nix::unistd::setsid();
    // no stdout of the runtime's held open, no lock of the store's kept
    let null = nix::fcntl::open("/dev/null", OFlag::O_RDWR, Mode::empty()).ok();
    for std_fd in 0..3 {
        // SAFETY: dup2 and close on descriptors this process owns.
        unsafe {
            match &null {
                Some(null) => libc::dup2(null.as_raw_fd(), std_fd),
                None => libc::close(std_fd),
            }
        };
    }
    let keep = [parent.as_raw_fd(), dir.as_raw_fd()];
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_else(|_| (3..1024).collect());
    for fd in open.into_iter().filter(|fd| *fd > 2 && !keep.contains(fd)) {
        // SAFETY: closes a descriptor this process will never use again.
        unsafe { libc::close(fd) };
    }
    // SAFETY: flock(2) on a descriptor this process owns; held until the process exits.
    if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok(()); // another remover is at it
    }
    remove_contents(dir, 0)?;
    match unlinkat(parent, name, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Why the store could not be exchanged (nothing was changed): a message for the warning.
type Unswappable = String;

fn failed(op: &str, name: &str) -> impl Fn(Errno) -> Unswappable {
    let what = format!("{op} {name}");
    move |e| format!("{what}: {}", go_errno(e))
}

/// Exchanges the network directory `live` (named `network` in `parent`) for one without
/// the `stale` names (sorted, as [`stale_names`] returns them: they are binary-searched),
/// whose record says `boot`. Returns the new directory; the old one is left at
/// [`old_dir_name`] for [`remove_old_dirs`].
pub fn exchange(
    parent: &OwnedFd,
    network: &str,
    live: &OwnedFd,
    stale: &[String],
    boot: &str,
) -> Result<OwnedFd, Unswappable> {
    debug_assert!(stale.windows(2).all(|w| w[0] <= w[1]), "stale names must be sorted");
    let staging = old_dir_name(boot, network);
    // a leftover of a release of this boot killed before its exchange: links and our index
    // only (waiting for a remover that may be at it)
    if let Ok(d) = open_dir_at(parent, &staging) {
        let _held = crate::util::flock::wait(d, FlockArg::LockExclusive).map_err(failed("lock", &staging))?;
        remove_tree(parent, &staging).map_err(failed("remove", &staging))?;
    }
    let built = build(parent, &staging, live, stale, boot);
    let result = built.and_then(|new| {
        exchange_names(parent, network, &staging)
            .map(|()| new)
            .map_err(failed("exchange it with", &staging))
    });
    if result.is_err() {
        // before the exchange: the staging directory is only links, the store is untouched
        let _ = remove_tree(parent, &staging);
    }
    result
}

/// `renameat2(RENAME_EXCHANGE)` of two names in `parent` (as a raw system call: neither the
/// C library of the static build nor nix offers it there).
fn exchange_names(parent: &OwnedFd, a: &str, b: &str) -> nix::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).map_err(|_| Errno::EINVAL);
    let (a, b) = (c(a)?, c(b)?);
    let fd = parent.as_raw_fd();
    // SAFETY: renameat2(2) with an open directory descriptor and NUL-terminated names that
    // outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            fd,
            a.as_ptr(),
            fd,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    Errno::result(r).map(drop)
}

/// The new directory, at `staging` in `parent`: a hard link to every entry of `live` that
/// stays, a fresh index holding only the record, and `live`'s owner and mode.
fn build(
    parent: &OwnedFd,
    staging: &str,
    live: &OwnedFd,
    stale: &[String],
    boot: &str,
) -> Result<OwnedFd, Unswappable> {
    mkdirat(parent, staging, Mode::from_bits_truncate(0o700)).map_err(failed("create", staging))?;
    let new = open_dir_at(parent, staging).map_err(failed("open", staging))?;
    for name in list_dir(live).map_err(failed("list", "it"))? {
        if name == INDEX_DIR || name == super::store::RESERVE_TMP || stale.binary_search(&name).is_ok() {
            continue;
        }
        let st = fstatat(live, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW).map_err(failed("stat", &name))?;
        if SFlag::from_bits_truncate(st.st_mode & libc::S_IFMT) == SFlag::S_IFDIR {
            return Err(format!(
                "it holds the directory {name:?}, which cannot be carried over in one step"
            ));
        }
        match linkat(live, name.as_str(), &new, name.as_str(), AtFlags::empty()) {
            // gone meanwhile: only a lock-less writer could do that, and then it is gone
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(failed("link", &name)(e)),
        }
    }
    let index = Index::open(&new).map_err(|e| e.to_string())?;
    Record {
        boot: boot.to_string(),
        pending: true,
    }
    .write(&index)
    .map_err(|e| e.to_string())?;
    let st = fstat(live).map_err(failed("stat", "it"))?;
    fchown(&new, Some(Uid::from_raw(st.st_uid)), Some(Gid::from_raw(st.st_gid))).map_err(failed("chown", staging))?;
    fchmod(&new, Mode::from_bits_truncate(st.st_mode & 0o7777)).map_err(failed("chmod", staging))?;
    Ok(new)
}

/// The names of the reservations made in an earlier boot (see the module comment), sorted
/// and each once. A sorted `Vec`, not a `BTreeSet<String>`: the set's code cost 2 KB of the
/// binary, for `contains` and `len` only.
pub fn stale_names(live: &OwnedFd, index: &Index) -> Result<Vec<String>, StoreError> {
    let mut stale = Vec::new();
    if index.is_current(live)? {
        let names = list_dir(live).map_err(|e| StoreError::os("list", "network directory", e))?;
        stale.extend(names.into_iter().filter(|n| super::store::reservation_ip(n).is_some()));
    } else {
        stale.extend(
            index
                .all()?
                .into_iter()
                .filter(|e| {
                    let name = e.ip.to_string();
                    read_small(live, &name, super::store::MAX_RESERVATION)
                        .ok()
                        .and_then(|b| index::Owner::parse(&b))
                        == Some(e.owner.clone())
                })
                .map(|e| e.ip.to_string()),
        );
    }
    crate::util::sort::sort(&mut stale);
    stale.dedup();
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use super::super::store::{Store, LOCK_FILE};
    use super::*;
    use std::net::IpAddr;
    use std::os::unix::fs::MetadataExt;

    const A: &str = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";
    const B: &str = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb";
    const C: &str = "cccccccc-cccc-cccc-cccc-cccccccccccc";

    fn boot(id: &str) -> Boot {
        Boot {
            id: Some(id.into()),
            release: true,
            detach: false,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// One call in `boot`: reserve each (id, ip) for eth0.
    fn call(data: &Path, boot: &Boot, reserve: &[(&str, &str)]) {
        let mut s = Store::open_in_boot(data, "net", boot).unwrap();
        for (id, addr) in reserve {
            assert!(s.reserve(id, "eth0", ip(addr), 0).unwrap(), "{addr}");
        }
        s.finish().unwrap();
    }

    /// The reservation files of the network, sorted.
    fn reservations(data: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(data.join("net"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.parse::<IpAddr>().is_ok())
            .collect();
        v.sort();
        v
    }

    fn record(data: &Path) -> Option<Record> {
        let dir: OwnedFd = std::fs::File::open(data.join("net")).unwrap().into();
        Record::read(&dir)
    }

    fn entries_of_data_dir(data: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(data)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn an_earlier_boots_reservations_go_at_the_first_call_and_what_stays_is_kept_as_it_was() {
        let d = tempfile::tempdir().unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.2"), ("c2", "10.1.2.3")]);
        let net = d.path().join("net");
        let lock_ino = std::fs::metadata(net.join(LOCK_FILE)).unwrap().ino();
        let last_ino = std::fs::metadata(net.join("last_reserved_ip.0")).unwrap().ino();
        std::fs::write(net.join("someones-notes"), "kept").unwrap();
        std::fs::set_permissions(&net, std::os::unix::fs::PermissionsExt::from_mode(0o751)).unwrap();
        assert_eq!(record(d.path()).unwrap().boot, A);

        call(d.path(), &boot(B), &[("c3", "10.1.2.4")]);
        assert_eq!(reservations(d.path()), ["10.1.2.4"]);
        // the lock and the round-robin hint are the same files (a waiter on the lock stays
        // excluded; the next address follows the last one, as after the reference's DELs)
        assert_eq!(std::fs::metadata(net.join(LOCK_FILE)).unwrap().ino(), lock_ino);
        assert_eq!(
            std::fs::read_to_string(net.join("last_reserved_ip.0")).unwrap(),
            "10.1.2.4"
        );
        assert_eq!(
            std::fs::metadata(net.join("last_reserved_ip.0")).unwrap().ino(),
            last_ino
        );
        assert_eq!(std::fs::read_to_string(net.join("someones-notes")).unwrap(), "kept");
        assert_eq!(std::fs::metadata(&net).unwrap().mode() & 0o7777, 0o751);
        assert_eq!(
            record(d.path()),
            Some(Record {
                boot: B.into(),
                pending: false
            })
        );
        assert_eq!(entries_of_data_dir(d.path()), ["net"], "the old directory is gone");
        // the index knows only what stays: DEL of a released owner frees nothing, c3 is found
        let mut s = Store::open_in_boot(d.path(), "net", &boot(B)).unwrap();
        assert_eq!(s.release("c1", "eth0").unwrap(), Vec::<IpAddr>::new());
        assert!(s.find("c3", "eth0").unwrap());
        let all: Vec<IpAddr> = s.index_entries().unwrap().into_iter().map(|e| e.ip).collect();
        assert_eq!(all, [ip("10.1.2.4")]);
        s.finish().unwrap();
        drop(s);
        // later calls of the same boot keep what this boot reserved
        call(d.path(), &boot(B), &[]);
        assert_eq!(reservations(d.path()), ["10.1.2.4"]);
    }

    #[test]
    fn the_round_robin_hint_survives_the_release() {
        let d = tempfile::tempdir().unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.7")]);
        call(d.path(), &boot(B), &[]);
        assert_eq!(reservations(d.path()), Vec::<String>::new());
        let s = Store::open_in_boot(d.path(), "net", &boot(B)).unwrap();
        assert_eq!(s.last_reserved(0), Some(ip("10.1.2.7")));
    }

    #[test]
    fn a_first_use_or_releasing_turned_off_adopts_what_is_there() {
        let d = tempfile::tempdir().unwrap();
        // a store the reference (or a cnibox that did not record boots) filled
        std::fs::create_dir_all(d.path().join("net")).unwrap();
        std::fs::write(d.path().join("net/10.1.2.9"), "old\r\neth0").unwrap();
        call(d.path(), &boot(A), &[]);
        assert_eq!(reservations(d.path()), ["10.1.2.9"], "its boot is unknown: kept");
        assert_eq!(record(d.path()).unwrap().boot, A);
        // releasing turned off: kept, and from now on counted as this boot's
        let keep = Boot {
            release: false,
            ..boot(B)
        };
        call(d.path(), &keep, &[("c1", "10.1.2.2")]);
        assert_eq!(reservations(d.path()), ["10.1.2.2", "10.1.2.9"]);
        assert_eq!(record(d.path()).unwrap().boot, B);
        call(d.path(), &boot(B), &[]);
        assert_eq!(
            reservations(d.path()),
            ["10.1.2.2", "10.1.2.9"],
            "turning it on again later"
        );
        // the next reboot releases them
        call(d.path(), &boot(C), &[]);
        assert_eq!(reservations(d.path()), Vec::<String>::new());
        // without a boot ID nothing is ever released
        call(d.path(), &Boot::unknown(), &[("c2", "10.1.2.2")]);
        call(d.path(), &Boot::unknown(), &[]);
        assert_eq!(reservations(d.path()), ["10.1.2.2"]);
        assert_eq!(record(d.path()).unwrap().boot, C, "and no boot is recorded");
    }

    #[test]
    fn after_a_foreign_change_only_what_the_index_knew_goes() {
        let d = tempfile::tempdir().unwrap();
        call(
            d.path(),
            &boot(A),
            &[("c1", "10.1.2.2"), ("c2", "10.1.2.3"), ("c3", "10.1.2.4")],
        );
        let net = d.path().join("net");
        // after cnibox's last call: another writer adds a reservation (its boot cannot be
        // known), rewrites one to a new owner, and removes one
        std::fs::write(net.join("10.1.2.8"), "ref\r\neth0").unwrap();
        std::fs::write(net.join("10.1.2.3"), "ref2\r\neth0").unwrap();
        std::fs::remove_file(net.join("10.1.2.4")).unwrap();
        call(d.path(), &boot(B), &[]);
        assert_eq!(reservations(d.path()), ["10.1.2.3", "10.1.2.8"]);
        let mut s = Store::open_in_boot(d.path(), "net", &boot(B)).unwrap();
        assert!(s.find("ref", "eth0").unwrap() && s.find("ref2", "eth0").unwrap());
        assert!(!s.find("c1", "eth0").unwrap());
    }

    #[test]
    fn with_the_index_current_every_reservation_goes_even_unparseable_ones() {
        let d = tempfile::tempdir().unwrap();
        let net = d.path().join("net");
        std::fs::create_dir_all(&net).unwrap();
        // a half-written reservation of the reference (created, never filled), adopted by a
        // cnibox call of boot A: it can never be released by a DEL
        std::fs::write(net.join("10.1.2.5"), "").unwrap();
        std::os::unix::fs::symlink("/nonexistent", net.join("10.1.2.6")).unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.2")]);
        call(d.path(), &boot(B), &[]);
        assert_eq!(reservations(d.path()), Vec::<String>::new());
    }

    #[test]
    fn a_release_killed_before_its_exchange_is_done_by_the_next_call() {
        let d = tempfile::tempdir().unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.2")]);
        // the new directory half built: a link of the lock and of a stale reservation
        let staging = d.path().join(old_dir_name(B, "net"));
        std::fs::create_dir(&staging).unwrap();
        std::fs::hard_link(d.path().join("net/lock"), staging.join("lock")).unwrap();
        std::fs::hard_link(d.path().join("net/10.1.2.2"), staging.join("10.1.2.2")).unwrap();
        assert_eq!(
            reservations(d.path()),
            ["10.1.2.2"],
            "the old reservations, all of them"
        );
        call(d.path(), &boot(B), &[]);
        assert_eq!(reservations(d.path()), Vec::<String>::new());
        assert_eq!(entries_of_data_dir(d.path()), ["net"]);
    }

    #[test]
    fn a_release_killed_after_its_exchange_leaves_none_and_the_next_call_removes_the_old_directory() {
        let d = tempfile::tempdir().unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.2"), ("c2", "10.1.2.3")]);
        let parent = open_data_dir(d.path()).unwrap();
        let live: OwnedFd = std::fs::File::open(d.path().join("net")).unwrap().into();
        let stale = ["10.1.2.2".to_string(), "10.1.2.3".into()];
        // the exchange alone, as a process killed right after it leaves things
        exchange(&parent, "net", &live, &stale, B).unwrap();
        assert_eq!(reservations(d.path()), Vec::<String>::new(), "none of them");
        assert_eq!(
            record(d.path()),
            Some(Record {
                boot: B.into(),
                pending: true
            })
        );
        assert!(d.path().join(old_dir_name(B, "net")).join("10.1.2.2").exists());
        call(d.path(), &boot(B), &[]);
        assert_eq!(entries_of_data_dir(d.path()), ["net"]);
        assert!(!record(d.path()).unwrap().pending);
    }

    #[test]
    fn an_old_directory_being_removed_keeps_the_record_pending_until_it_is_gone() {
        let d = tempfile::tempdir().unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.2")]);
        let parent = open_data_dir(d.path()).unwrap();
        let live: OwnedFd = std::fs::File::open(d.path().join("net")).unwrap().into();
        exchange(&parent, "net", &live, &["10.1.2.2".to_string()], B).unwrap();
        // a remover at work holds the old directory's lock
        let old = d.path().join(old_dir_name(B, "net"));
        let remover = Flock::lock(std::fs::File::open(&old).unwrap(), FlockArg::LockExclusive).unwrap();
        call(d.path(), &boot(B), &[]);
        assert!(old.exists(), "not removed under a remover's feet");
        assert!(record(d.path()).unwrap().pending);
        drop(remover);
        call(d.path(), &boot(B), &[]);
        assert!(!old.exists());
        assert!(!record(d.path()).unwrap().pending);
    }

    #[test]
    fn old_directories_are_told_apart_by_network() {
        assert!(is_old_dir_of(&old_dir_name(A, "net"), "net"));
        assert!(!is_old_dir_of(&old_dir_name(A, "net.b"), "net"));
        assert!(!is_old_dir_of(&old_dir_name(A, "net"), "net.b"));
        assert!(!is_old_dir_of(&old_dir_name(A, "a-net"), "net"));
        assert!(!is_old_dir_of(".cnibox-reboot-xyz-net", "net"));
        assert!(!is_old_dir_of("net", "net"));
    }

    #[test]
    fn a_caller_waiting_on_the_lock_during_an_exchange_works_in_the_new_directory() {
        let d = tempfile::tempdir().unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.2")]);
        let holder = Store::open_in_boot(d.path(), "net", &boot(A)).unwrap();
        let waiter = std::thread::spawn({
            let data = d.path().to_path_buf();
            move || call(&data, &boot(A), &[("c9", "10.1.2.9")])
        });
        let lock_ino = std::fs::metadata(d.path().join("net/lock")).unwrap().ino();
        let blocked = format!(":{lock_ino} ");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|l| l.contains(" -> FLOCK ") && l.contains(&blocked))
        {
            assert!(std::time::Instant::now() < deadline, "the waiter never blocked");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        // another process's release exchanges the directory while this one holds the lock
        let parent = open_data_dir(d.path()).unwrap();
        let live: OwnedFd = std::fs::File::open(d.path().join("net")).unwrap().into();
        exchange(&parent, "net", &live, &["10.1.2.2".to_string()], A).unwrap();
        remove_tree(&parent, &old_dir_name(A, "net")).unwrap();
        drop(holder);
        waiter.join().unwrap();
        assert_eq!(
            reservations(d.path()),
            ["10.1.2.9"],
            "reserved in the directory the path names"
        );
    }

    #[test]
    fn a_directory_that_cannot_be_exchanged_keeps_its_reservations() {
        let d = tempfile::tempdir().unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.2")]);
        std::fs::create_dir(d.path().join("net/a-subdir")).unwrap();
        call(d.path(), &boot(B), &[]);
        assert_eq!(reservations(d.path()), ["10.1.2.2"]);
        assert_eq!(record(d.path()).unwrap().boot, B, "adopted as this boot's");
        assert_eq!(entries_of_data_dir(d.path()), ["net"], "no half-built directory left");
    }

    #[test]
    fn two_networks_in_one_data_dir_are_released_each_at_its_own_first_call() {
        let d = tempfile::tempdir().unwrap();
        call(d.path(), &boot(A), &[("c1", "10.1.2.2")]);
        let mut other = Store::open_in_boot(d.path(), "other", &boot(A)).unwrap();
        other.reserve("o1", "eth0", ip("10.9.0.2"), 0).unwrap();
        other.finish().unwrap();
        drop(other);
        call(d.path(), &boot(B), &[]);
        assert_eq!(reservations(d.path()), Vec::<String>::new());
        assert!(d.path().join("other/10.9.0.2").exists(), "not this network's");
        let other = Store::open_in_boot(d.path(), "other", &boot(B)).unwrap();
        drop(other);
        assert!(!d.path().join("other/10.9.0.2").exists());
        assert_eq!(entries_of_data_dir(d.path()), ["net", "other"]);
    }

    #[test]
    fn record_round_trip_and_what_is_no_record() {
        for pending in [false, true] {
            let r = Record {
                boot: A.into(),
                pending,
            };
            assert_eq!(Record::decode(&r.encode()), Some(r.clone()));
            assert!(r.encode().starts_with('#'), "never a reservation to the reference");
        }
        assert_eq!(Record::decode(&format!("{HEADER}\nboot {A}\nother\n")), None);
        assert_eq!(Record::decode(&format!("{HEADER}\nboot not-an-id\n")), None);
        assert_eq!(Record::decode(&format!("{HEADER}\nboot {}", &A[..20])), None);
        assert_eq!(Record::decode(&HEADER[..10]), None);
    }

    #[test]
    fn settled_only_by_the_same_boot_without_pending_work() {
        let rec = |boot: &str, pending| Record {
            boot: boot.into(),
            pending,
        };
        let boot = |id: Option<&str>| Boot {
            id: id.map(Into::into),
            ..boot(A)
        };
        let b = B;
        assert!(Record::settles(Some(&rec(A, false)), &boot(Some(A))));
        assert!(!Record::settles(Some(&rec(A, true)), &boot(Some(A))));
        assert!(!Record::settles(Some(&rec(A, false)), &boot(Some(b))));
        assert!(!Record::settles(None, &boot(Some(A))));
        assert!(Record::settles(None, &boot(None)), "no boot ID: nothing to settle");
    }
}
