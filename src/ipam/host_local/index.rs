//! The owner index: which reservation files belong to which (container ID, ifname), so that
//! ADD's duplicate check, DEL and CHECK cost the same with 10 or 60,000 reservations.
//!
//! Layout, inside the network directory (the reference walks that directory recursively and
//! reads every file, so everything here must be harmless to it):
//! * `.cnibox-index/` — a subdirectory: its name does not parse as an IP, and changes inside
//!   it do not touch the network directory's mtime (which the stamp records).
//! * `.cnibox-index/bXXX` — a bucket: every reservation whose trimmed container ID hashes to
//!   XXX, one line `<ip> <hex(id)> <=hex(ifname) | ->` (`-`: a legacy ID-only file).
//! * `.cnibox-index/stamp` — `dev ino mtime` of the network directory when the index last
//!   described it exactly.
//! * `.cnibox-index/boot` — the boot the index's calls ran in (see [`super::reboot`]).
//!
//! Every file starts with a `#` line, so its trimmed content can never equal a container ID
//! (IDs match `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`) nor `id\r\nifname`: the reference never takes
//! an index file for a reservation.
//!
//! Trust: the index is used only while the stamp matches the directory (see [`Index::stamp`]
//! for why an mtime match cannot hide a foreign change); the stamp is emptied before the
//! first change of an operation and written again after the last one, so a process killed in
//! between leaves no valid stamp and the next caller rebuilds from the directory. (That is
//! also why index files may be rewritten in place.) Entries are
//! still verified against the reservation file before anything acts on them.
use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, futimens, mkdirat, Mode};
use nix::sys::time::TimeSpec;
use nix::unistd::{unlinkat, UnlinkatFlags};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};

pub const INDEX_DIR: &str = ".cnibox-index";
const STAMP: &str = "stamp";
/// Kept beside the index, not part of it: [`Index::replace_all`] leaves it alone.
pub const BOOT_RECORD: &str = "boot";
const HEADER: &str = "# cnibox host-local owner index (not a reservation)";
/// Few enough that bucket files are created once and then rewritten in place (creating a
/// file is the dearest step of an ADD on some file systems: ~0.5 ms on ext4 with discard),
/// many enough that a bucket stays a few KiB at 60,000 reservations.
const BUCKETS: u64 = 256;

/// The index could not be read or written: the operation, the file, and the OS error.
#[derive(Debug)]
pub struct IndexError {
    op: &'static str,
    name: String,
    cause: Cause,
}

/// Why an index operation failed.
#[derive(Debug)]
enum Cause {
    Os(Errno),
    Io(std::io::Error),
    /// The index directory was replaced under us every time we opened it.
    KeepsBeingReplaced,
}

impl From<Errno> for Cause {
    fn from(e: Errno) -> Cause {
        Cause::Os(e)
    }
}

impl From<std::io::Error> for Cause {
    fn from(e: std::io::Error) -> Cause {
        Cause::Io(e)
    }
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host-local index: {} {INDEX_DIR}/{}: ", self.op, self.name)?;
        match &self.cause {
            Cause::Os(e) => write!(f, "{e}"),
            Cause::Io(e) => write!(f, "{e}"),
            Cause::KeepsBeingReplaced => f.write_str("keeps being replaced"),
        }
    }
}

impl std::error::Error for IndexError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            Cause::Os(e) => Some(e),
            Cause::Io(e) => Some(e),
            Cause::KeepsBeingReplaced => None,
        }
    }
}

fn ierr(op: &'static str, name: &str, e: impl Into<Cause>) -> IndexError {
    IndexError {
        op,
        name: name.to_string(),
        cause: e.into(),
    }
}

/// Who holds a reservation: the file content `id\r\nifname`, or a legacy file with the ID only.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner {
    pub id: String,
    pub ifname: Option<String>,
}

impl Owner {
    /// The reference's comparison key: `TrimSpace(content)`.
    pub fn parse(content: &[u8]) -> Option<Owner> {
        let text = std::str::from_utf8(content).ok()?.trim();
        if text.is_empty() {
            return None;
        }
        Some(match text.split_once("\r\n") {
            Some((id, ifname)) => Owner {
                id: id.to_string(),
                ifname: Some(ifname.to_string()),
            },
            None => Owner {
                id: text.to_string(),
                ifname: None,
            },
        })
    }
}

/// One reservation known to the index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub ip: IpAddr,
    pub owner: Owner,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut String, s: &str) {
    for b in s.bytes() {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn is_hex(s: &str) -> bool {
    s.len() % 2 == 0 && s.bytes().all(|c| c.is_ascii_hexdigit())
}

/// Decode hex into `out` (cleared first); false when it is not hex of UTF-8 text.
fn unhex_into(s: &str, out: &mut Vec<u8>) -> bool {
    out.clear();
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return false;
    }
    for pair in b.chunks_exact(2) {
        match (hex_digit(pair[0]), hex_digit(pair[1])) {
            (Some(h), Some(l)) => out.push(h << 4 | l),
            _ => return false,
        }
    }
    std::str::from_utf8(out).is_ok()
}

fn unhex(s: &str) -> Option<String> {
    let mut out = vec![];
    unhex_into(s, &mut out).then(|| String::from_utf8(out).ok()).flatten()
}

/// FNV-1a: stable across versions and processes (std's hasher is not).
fn bucket_name(id: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in id.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("b{:03x}", h % BUCKETS)
}

fn is_bucket_name(name: &str) -> bool {
    name.len() == 4 && name.starts_with('b') && name[1..].bytes().all(|c| HEX.contains(&c))
}

/// One bucket line, `<ip> <hex(id)> <=hex(ifname) | ->`.
fn push_line(out: &mut String, e: &Entry) {
    use std::fmt::Write as _;
    let _ = write!(out, "{} ", e.ip);
    push_hex(out, &e.owner.id);
    match &e.owner.ifname {
        Some(i) => {
            out.push_str(" =");
            push_hex(out, i);
        }
        None => out.push_str(" -"),
    }
    out.push('\n');
}

/// A bucket line split into its columns and checked, without decoding the owner.
struct Line<'a> {
    ip: IpAddr,
    id_hex: &'a str,
    if_col: &'a str,
}

fn split_line<'a>(line: &'a str, scratch: &mut Vec<u8>) -> Option<Line<'a>> {
    let mut f = line.split(' ');
    let ip = f.next()?.parse().ok()?;
    let id_hex = f.next()?;
    let if_col = f.next()?;
    if f.next().is_some() || !unhex_into(id_hex, scratch) {
        return None;
    }
    if if_col != "-" && !unhex_into(if_col.strip_prefix('=')?, scratch) {
        return None;
    }
    Some(Line { ip, id_hex, if_col })
}

impl Line<'_> {
    fn entry(&self) -> Option<Entry> {
        let ifname = match self.if_col {
            "-" => None,
            s => Some(unhex(s.strip_prefix('=')?)?),
        };
        Some(Entry {
            ip: self.ip,
            owner: Owner {
                id: unhex(self.id_hex)?,
                ifname,
            },
        })
    }
}

/// One bucket as read for one container ID: that ID's entries decoded, the other IDs'
/// lines kept as they are, to be written back unchanged. (A bucket holds ~1/256 of the
/// store, ~240 entries at 60,000 reservations; decoding and re-encoding all of them on
/// every call was most of a call's time there.)
#[derive(Debug, Clone, Default)]
pub struct Bucket {
    /// The entries of the ID the bucket was read for.
    pub mine: Vec<Entry>,
    /// The other IDs' lines, each ending in a newline.
    others: String,
}

impl Bucket {
    /// Parse `text` for `id`; `None` when a line of `id` is malformed or any line lacks the
    /// three columns of hex owner fields (the bucket is corrupt). Other IDs' lines are
    /// recognised by comparing their hex ID column, not decoded: this is the per-call cost
    /// of the index.
    fn parse(text: &str, id: &str) -> Option<Bucket> {
        let mut lines = text.lines();
        if lines.next()? != HEADER {
            return None;
        }
        let mut want = String::with_capacity(2 * id.len());
        push_hex(&mut want, id);
        let mut b = Bucket {
            mine: vec![],
            others: String::with_capacity(text.len()),
        };
        let mut scratch = vec![];
        for line in lines {
            let (_, rest) = line.split_once(' ')?;
            let (id_hex, if_col) = rest.split_once(' ')?;
            if id_hex.eq_ignore_ascii_case(&want) {
                b.mine.push(split_line(line, &mut scratch)?.entry()?);
            } else if is_hex(id_hex) && (if_col == "-" || if_col.strip_prefix('=').is_some_and(is_hex)) {
                b.others.push_str(line);
                b.others.push('\n');
            } else {
                return None;
            }
        }
        Some(b)
    }

    /// Forget any entry of `ip`, whoever it names (the address is being reserved anew).
    pub fn forget_ip(&mut self, ip: IpAddr) {
        self.mine.retain(|e| e.ip != ip);
        let text = format!("{ip} ");
        if self.others.lines().any(|l| l.starts_with(&text)) {
            let kept: String = self
                .others
                .lines()
                .filter(|l| !l.starts_with(&text))
                .flat_map(|l| [l, "\n"])
                .collect();
            self.others = kept;
        }
    }

    fn encode(&self) -> String {
        let mut s = String::with_capacity(HEADER.len() + 1 + self.others.len() + 64 * self.mine.len());
        s.push_str(HEADER);
        s.push('\n');
        s.push_str(&self.others);
        for e in &self.mine {
            push_line(&mut s, e);
        }
        s
    }
}

fn encode_bucket(entries: &[Entry]) -> String {
    Bucket {
        mine: entries.to_vec(),
        others: String::new(),
    }
    .encode()
}

/// Every entry of a bucket file, decoded (tests, diagnostics).
fn decode_bucket(text: &str) -> Option<Vec<Entry>> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let mut scratch = vec![];
    lines.map(|line| split_line(line, &mut scratch)?.entry()).collect()
}

/// The `(dev, ino, mtime)` of the network directory that the index describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DirStamp {
    dev: u64,
    ino: u64,
    sec: i64,
    nsec: i64,
}

impl DirStamp {
    fn of(dir: &OwnedFd) -> nix::Result<DirStamp> {
        let st = fstat(dir)?;
        Ok(DirStamp {
            dev: st.st_dev,
            ino: st.st_ino,
            // time_t and its nanoseconds are 32-bit on 32-bit musl targets (i686, armv7)
            sec: st.st_mtime as i64,
            nsec: st.st_mtime_nsec as i64,
        })
    }

    fn encode(&self) -> String {
        format!("{HEADER}\nv1 {} {} {} {}\n", self.dev, self.ino, self.sec, self.nsec)
    }

    fn decode(text: &str) -> Option<DirStamp> {
        let mut lines = text.lines();
        if lines.next()? != HEADER {
            return None;
        }
        let f: Vec<&str> = lines.next()?.split(' ').collect();
        if f.len() != 5 || f[0] != "v1" || lines.next().is_some() {
            return None;
        }
        Some(DirStamp {
            dev: f[1].parse().ok()?,
            ino: f[2].parse().ok()?,
            sec: f[3].parse().ok()?,
            nsec: f[4].parse().ok()?,
        })
    }
}

pub struct Index {
    dir: OwnedFd,
}

fn open_file(dir: &OwnedFd, name: &str, flags: OFlag, mode: u32) -> nix::Result<std::fs::File> {
    let fd = openat(
        dir,
        name,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(mode),
    )?;
    Ok(std::fs::File::from(fd))
}

/// Read a small regular file without following a symlink or blocking on a FIFO.
pub fn read_small(dir: &OwnedFd, name: &str, limit: u64) -> nix::Result<Vec<u8>> {
    let f = open_file(dir, name, OFlag::O_RDONLY | OFlag::O_NONBLOCK, 0)?;
    let st = fstat(f.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Errno::EINVAL);
    }
    // sized from the start: a bucket is read in one call, without growing the buffer
    let mut buf = Vec::with_capacity((st.st_size.max(0) as u64).min(limit) as usize + 1);
    f.take(limit)
        .read_to_end(&mut buf)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    Ok(buf)
}

/// Overwrite `name` in place (created once, 0600): write from the start, then cut the file
/// to the new length. Never truncating to zero first matters on file systems mounted with
/// `discard`, where freeing a file's block costs as much as creating a file. Not atomic, and
/// it need not be: index files are only written while the stamp is withdrawn (a writer
/// killed half-way leaves an index the next caller rebuilds), and a torn
/// `last_reserved_ip` only restarts round-robin.
pub fn overwrite(dir: &OwnedFd, name: &str, content: &[u8]) -> nix::Result<()> {
    let mut f = open_file(dir, name, OFlag::O_WRONLY | OFlag::O_CREAT, 0o600)?;
    let io = |e: std::io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
    f.write_all(content).map_err(io)?;
    f.set_len(content.len() as u64).map_err(io)
}

/// Names in a directory (without `.` and `..`).
pub fn list_dir(dir: &OwnedFd) -> nix::Result<Vec<String>> {
    // a fresh open of "." has its own offset: reading it does not move `dir`'s
    let mut stream = nix::dir::Dir::openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    let mut names = vec![];
    for entry in stream.iter() {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy();
        if name != "." && name != ".." {
            names.push(name.into_owned());
        }
    }
    Ok(names)
}

impl Index {
    /// Open (creating) the index directory of the network directory `net_dir`. A planted
    /// symlink or file in its place is removed: the index is only a cache.
    pub fn open(net_dir: &OwnedFd) -> Result<Index, IndexError> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        for _ in 0..3 {
            match openat(net_dir, INDEX_DIR, flags, Mode::empty()) {
                Ok(dir) => return Ok(Index { dir }),
                Err(Errno::ENOENT) => match mkdirat(net_dir, INDEX_DIR, Mode::from_bits_truncate(0o700)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(ierr("create", "", e)),
                },
                Err(Errno::ELOOP) | Err(Errno::ENOTDIR) => unlinkat(net_dir, INDEX_DIR, UnlinkatFlags::NoRemoveDir)
                    .map_err(|e| ierr("remove non-directory", "", e))?,
                Err(e) => return Err(ierr("open", "", e)),
            }
        }
        Err(ierr("open", "", Cause::KeepsBeingReplaced))
    }

    /// True when the stamp says the index describes `net_dir` as it is now.
    pub fn is_current(&self, net_dir: &OwnedFd) -> Result<bool, IndexError> {
        let now = DirStamp::of(net_dir).map_err(|e| ierr("stat network directory for", STAMP, e))?;
        Ok(match read_small(&self.dir, STAMP, 4096) {
            Ok(bytes) => std::str::from_utf8(&bytes).ok().and_then(DirStamp::decode) == Some(now),
            Err(_) => false,
        })
    }

    /// Withdraw trust before changing the directory or the index: a stamp whose header is
    /// spoiled matches nothing. (Spoiled in place rather than removed, so the steady state
    /// creates no files.)
    pub fn invalidate(&self) -> Result<(), IndexError> {
        let f = match open_file(&self.dir, STAMP, OFlag::O_WRONLY, 0) {
            Ok(f) => f,
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(ierr("withdraw", STAMP, e)),
        };
        use std::os::unix::fs::FileExt;
        f.write_all_at(b"!", 0).map_err(|e| ierr("withdraw", STAMP, e))
    }

    /// Record that the index describes `net_dir` now. Called with the store lock held,
    /// after the operation's last change of the directory.
    ///
    /// Why an mtime match proves that nobody else changed the directory: the kernel stamps a
    /// directory change with the (coarse) current time, so two changes in one clock tick can
    /// leave the same mtime, and a foreign change right after ours could go unseen. So the
    /// directory's mtime is moved back by 1 ns (and re-read, in case the file system rounds
    /// it): a value strictly before our own change. Every later change by anyone happens
    /// after this moment and gets a current time, which is ≥ the mtime of our change and so
    /// differs from the recorded value — whatever the timestamp granularity, with or without
    /// multigrain timestamps. (Only a wall-clock step backwards landing exactly on the
    /// recorded value could hide a change; entries are also verified against the files.)
    pub fn stamp(&self, net_dir: &OwnedFd) -> Result<(), IndexError> {
        let st = fstat(net_dir).map_err(|e| ierr("stat network directory for", STAMP, e))?;
        let (mut sec, mut nsec) = (st.st_mtime, st.st_mtime_nsec - 1);
        if nsec < 0 {
            sec -= 1;
            nsec += 1_000_000_000;
        }
        let omit = TimeSpec::new(0, libc::UTIME_OMIT);
        if futimens(net_dir, &omit, &TimeSpec::new(sec, nsec)).is_err() {
            // not the directory's owner (and no CAP_FOWNER): without the mtime move the
            // stamp could not be trusted, so leave it withdrawn — every call then rebuilds
            // (slower, never wrong)
            return Ok(());
        }
        let now = DirStamp::of(net_dir).map_err(|e| ierr("stat network directory for", STAMP, e))?;
        overwrite(&self.dir, STAMP, now.encode().as_bytes()).map_err(|e| ierr("write", STAMP, e))
    }

    /// The bucket of `id`: its entries decoded, the rest kept for writing back. `None`: the
    /// bucket is corrupt.
    pub fn bucket(&self, id: &str) -> Result<Option<Bucket>, IndexError> {
        let name = bucket_name(id);
        match read_small(&self.dir, &name, 64 << 20) {
            Ok(bytes) => Ok(std::str::from_utf8(&bytes).ok().and_then(|t| Bucket::parse(t, id))),
            Err(Errno::ENOENT) => Ok(Some(Bucket::default())),
            Err(e) => Err(ierr("read", &name, e)),
        }
    }

    /// Write back the bucket of `id`. An empty bucket keeps its file (header only), ready
    /// for the next entry.
    pub fn write_bucket(&self, id: &str, bucket: &Bucket) -> Result<(), IndexError> {
        let name = bucket_name(id);
        overwrite(&self.dir, &name, bucket.encode().as_bytes()).map_err(|e| ierr("write", &name, e))
    }

    /// Replace the whole index by `entries` (the stamp must already be withdrawn).
    pub fn replace_all(&self, entries: Vec<Entry>) -> Result<(), IndexError> {
        let mut buckets: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
        for e in entries {
            buckets.entry(bucket_name(&e.owner.id)).or_default().push(e);
        }
        // Existing bucket files are rewritten in place (emptied when no entry hashes there),
        // not removed and created again: creating files is the dear part on ext4.
        for name in list_dir(&self.dir).map_err(|e| ierr("list", "", e))? {
            if name == STAMP || name == BOOT_RECORD || buckets.contains_key(&name) {
                continue;
            }
            let emptied = is_bucket_name(&name) && overwrite(&self.dir, &name, encode_bucket(&[]).as_bytes()).is_ok();
            if !emptied {
                // not a bucket (or not a regular file): nothing of ours, remove it
                match unlinkat(&self.dir, name.as_str(), UnlinkatFlags::NoRemoveDir) {
                    Ok(()) | Err(Errno::ENOENT) => {}
                    Err(e) => return Err(ierr("remove", &name, e)),
                }
            }
        }
        for (name, mut list) in buckets {
            crate::util::sort::sort(&mut list);
            overwrite(&self.dir, &name, encode_bucket(&list).as_bytes()).map_err(|e| ierr("write", &name, e))?;
        }
        Ok(())
    }

    /// Replace a file of the index directory that is not the index (the boot record)
    /// atomically (temp file, then rename): it is written once per boot,
    /// and a torn one must not read as another record.
    pub fn write_extra(&self, name: &str, content: &[u8]) -> Result<(), IndexError> {
        let tmp = format!(".{name}.tmp");
        match unlinkat(&self.dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(ierr("remove", &tmp, e)),
        }
        let mut f = open_file(&self.dir, &tmp, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL, 0o600)
            .map_err(|e| ierr("create", &tmp, e))?;
        f.write_all(content).map_err(|e| ierr("write", &tmp, e))?;
        drop(f);
        nix::fcntl::renameat(&self.dir, tmp.as_str(), &self.dir, name).map_err(|e| ierr("rename", name, e))
    }

    /// Every entry (for the release after a reboot, tests and diagnostics).
    pub fn all(&self) -> Result<Vec<Entry>, IndexError> {
        let mut out = vec![];
        for name in list_dir(&self.dir).map_err(|e| ierr("list", "", e))? {
            if is_bucket_name(&name) {
                let bytes = read_small(&self.dir, &name, 64 << 20).map_err(|e| ierr("read", &name, e))?;
                out.extend(
                    std::str::from_utf8(&bytes)
                        .ok()
                        .and_then(decode_bucket)
                        .unwrap_or_default(),
                );
            }
        }
        crate::util::sort::sort(&mut out);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_parsing_follows_trimspace() {
        assert_eq!(
            Owner::parse(b"c1\r\neth0"),
            Some(Owner {
                id: "c1".into(),
                ifname: Some("eth0".into())
            })
        );
        assert_eq!(
            Owner::parse(b"  c1\n "),
            Some(Owner {
                id: "c1".into(),
                ifname: None
            })
        );
        assert_eq!(Owner::parse(b""), None);
        assert_eq!(Owner::parse(b" \r\n"), None);
    }

    #[test]
    fn bucket_round_trip() {
        let entries = vec![
            Entry {
                ip: "10.1.2.3".parse().unwrap(),
                owner: Owner {
                    id: "c1".into(),
                    ifname: Some("eth0".into()),
                },
            },
            Entry {
                ip: "2001:db8::2".parse().unwrap(),
                owner: Owner {
                    id: "c 2".into(),
                    ifname: None,
                },
            },
            Entry {
                ip: "10.1.2.4".parse().unwrap(),
                owner: Owner {
                    id: "c3".into(),
                    ifname: Some(String::new()),
                },
            },
        ];
        let text = encode_bucket(&entries);
        assert_eq!(decode_bucket(&text), Some(entries));
        assert_eq!(decode_bucket("garbage"), None);
        assert_eq!(decode_bucket(&format!("{HEADER}\n10.1.2.3 zz -\n")), None);
    }

    fn entry(ip: &str, id: &str, ifname: Option<&str>) -> Entry {
        Entry {
            ip: ip.parse().unwrap(),
            owner: Owner {
                id: id.into(),
                ifname: ifname.map(Into::into),
            },
        }
    }

    #[test]
    fn a_bucket_decodes_only_its_id_and_keeps_the_rest_verbatim() {
        let all = vec![
            entry("10.1.2.3", "c1", Some("eth0")),
            entry("10.1.2.4", "other", Some("eth0")),
            entry("10.1.2.5", "c1", None),
            entry("2001:db8::7", "c10", Some("net1")),
        ];
        let text = encode_bucket(&all);
        let mut b = Bucket::parse(&text, "c1").unwrap();
        assert_eq!(b.mine, vec![all[0].clone(), all[2].clone()]);
        // written back unchanged apart from order: the same entries
        let mut again = decode_bucket(&b.encode()).unwrap();
        again.sort();
        let mut want = all.clone();
        want.sort();
        assert_eq!(again, want);
        // an address reserved anew forgets whoever the index said held it
        b.forget_ip("10.1.2.4".parse().unwrap());
        b.forget_ip("10.1.2.5".parse().unwrap());
        let left = decode_bucket(&b.encode()).unwrap();
        assert_eq!(left, vec![all[3].clone(), all[0].clone()]);
        // "10.1.2.3" is a prefix of neither "10.1.2.30" nor the hex of another ID
        let mut b = Bucket::parse(&encode_bucket(&[entry("10.1.2.30", "x", None)]), "c1").unwrap();
        b.forget_ip("10.1.2.3".parse().unwrap());
        assert_eq!(decode_bucket(&b.encode()).unwrap().len(), 1);
    }

    #[test]
    fn any_malformed_line_makes_the_bucket_corrupt() {
        let good = encode_bucket(&[entry("10.1.2.3", "c1", Some("eth0"))]);
        // lines of the ID asked for are decoded in full
        for bad in [
            "10.1.2.300 6331 =65746830\n",
            "10.1.2.3 6331 =ff\n",
            "10.1.2.3 6331 - extra\n",
        ] {
            let text = format!("{good}{bad}");
            assert!(Bucket::parse(&text, "c1").is_none(), "{bad:?}");
            assert!(decode_bucket(&text).is_none(), "{bad:?}");
        }
        // other IDs' lines must still have the columns of hex owner fields
        for bad in [
            "10.1.2.3 633 =65746830\n",
            "10.1.2.3 6331 65746830\n",
            "10.1.2.3 6331 =6574683\n",
            "10.1.2.3 zz -\n",
            "10.1.2.3\n",
        ] {
            let text = format!("{good}{bad}");
            assert!(Bucket::parse(&text, "c1").is_none(), "{bad:?}");
            assert!(Bucket::parse(&text, "someone-else").is_none(), "{bad:?}");
            assert!(decode_bucket(&text).is_none(), "{bad:?}");
        }
        assert!(Bucket::parse("garbage", "c1").is_none());
    }

    #[test]
    fn index_files_never_look_like_reservations() {
        // the reference matches TrimSpace(content) against `id` and `id\r\nifname`
        let text = encode_bucket(&[Entry {
            ip: "10.1.2.3".parse().unwrap(),
            owner: Owner {
                id: "c1".into(),
                ifname: Some("eth0".into()),
            },
        }]);
        assert!(text.trim().starts_with('#'));
        let stamp = DirStamp {
            dev: 1,
            ino: 2,
            sec: 3,
            nsec: 4,
        }
        .encode();
        assert!(stamp.trim().starts_with('#'));
        assert_eq!(
            DirStamp::decode(&stamp),
            Some(DirStamp {
                dev: 1,
                ino: 2,
                sec: 3,
                nsec: 4
            })
        );
        assert!(INDEX_DIR.parse::<IpAddr>().is_err());
    }

    #[test]
    fn spoiled_or_torn_stamps_are_not_trusted() {
        let d = tempfile::tempdir().unwrap();
        let net: OwnedFd = std::fs::File::open(d.path()).unwrap().into();
        let idx = Index::open(&net).unwrap();
        assert!(!idx.is_current(&net).unwrap(), "no stamp yet");
        idx.stamp(&net).unwrap();
        assert!(idx.is_current(&net).unwrap());
        idx.invalidate().unwrap();
        assert!(!idx.is_current(&net).unwrap(), "withdrawn before a change");
        idx.stamp(&net).unwrap();
        // a writer killed after writing a shorter stamp but before cutting the file leaves
        // the old tail behind
        let path = d.path().join(INDEX_DIR).join(STAMP);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(b"61\n");
        std::fs::write(&path, bytes).unwrap();
        assert!(!idx.is_current(&net).unwrap());
        // rewriting in place cuts the tail again
        idx.stamp(&net).unwrap();
        assert!(idx.is_current(&net).unwrap());
    }

    #[test]
    fn buckets_are_stable() {
        assert_eq!(bucket_name("c1"), bucket_name("c1"));
        assert_eq!(bucket_name("").len(), 4);
    }
}
