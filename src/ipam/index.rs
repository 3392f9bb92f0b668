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
const HEADER: &str = "# cnibox host-local owner index (not a reservation)";
/// Few enough that bucket files are created once and then rewritten in place (creating a
/// file is the dearest step of an ADD on some file systems: ~0.5 ms on ext4 with discard),
/// many enough that a bucket stays a few KiB at 60,000 reservations.
const BUCKETS: u64 = 256;

/// The index could not be read or written; the operation and the file are named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexError(pub String);

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn ierr(op: &str, name: &str, e: impl fmt::Display) -> IndexError {
    IndexError(format!("host-local index: {op} {INDEX_DIR}/{name}: {e}"))
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

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
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

fn encode_bucket(entries: &[Entry]) -> String {
    let mut s = format!("{HEADER}\n");
    for e in entries {
        let ifcol = match &e.owner.ifname {
            Some(i) => format!("={}", hex(i)),
            None => "-".to_string(),
        };
        s.push_str(&format!("{} {} {ifcol}\n", e.ip, hex(&e.owner.id)));
    }
    s
}

fn decode_bucket(text: &str) -> Option<Vec<Entry>> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let mut out = vec![];
    for line in lines {
        let mut f = line.split(' ');
        let ip: IpAddr = f.next()?.parse().ok()?;
        let id = unhex(f.next()?)?;
        let ifname = match f.next()? {
            "-" => None,
            s => Some(unhex(s.strip_prefix('=')?)?),
        };
        if f.next().is_some() {
            return None;
        }
        out.push(Entry {
            ip,
            owner: Owner { id, ifname },
        });
    }
    Some(out)
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
            sec: st.st_mtime,
            nsec: st.st_mtime_nsec,
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
    let mut buf = vec![];
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
        Err(ierr("open", "", "keeps being replaced"))
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

    /// The entries sharing `id`'s bucket (callers filter by owner). `None`: the bucket is corrupt.
    pub fn bucket(&self, id: &str) -> Result<Option<Vec<Entry>>, IndexError> {
        let name = bucket_name(id);
        match read_small(&self.dir, &name, 64 << 20) {
            Ok(bytes) => Ok(std::str::from_utf8(&bytes).ok().and_then(decode_bucket)),
            Err(Errno::ENOENT) => Ok(Some(vec![])),
            Err(e) => Err(ierr("read", &name, e)),
        }
    }

    /// An empty bucket keeps its file (header only), ready for the next entry.
    pub fn write_bucket(&self, id: &str, entries: &[Entry]) -> Result<(), IndexError> {
        let name = bucket_name(id);
        overwrite(&self.dir, &name, encode_bucket(entries).as_bytes()).map_err(|e| ierr("write", &name, e))
    }

    /// Replace the whole index by `entries` (the stamp must already be withdrawn).
    pub fn replace_all(&self, entries: Vec<Entry>) -> Result<(), IndexError> {
        for name in list_dir(&self.dir).map_err(|e| ierr("list", "", e))? {
            match unlinkat(&self.dir, name.as_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(ierr("remove", &name, e)),
            }
        }
        let mut buckets: BTreeMap<String, (String, Vec<Entry>)> = BTreeMap::new();
        for e in entries {
            let name = bucket_name(&e.owner.id);
            buckets
                .entry(name)
                .or_insert_with(|| (e.owner.id.clone(), vec![]))
                .1
                .push(e);
        }
        for (_, (id, mut list)) in buckets {
            list.sort();
            self.write_bucket(&id, &list)?;
        }
        Ok(())
    }

    /// Every entry (tests and diagnostics).
    pub fn all(&self) -> Result<Vec<Entry>, IndexError> {
        let mut out = vec![];
        for name in list_dir(&self.dir).map_err(|e| ierr("list", "", e))? {
            if name.starts_with('b') {
                let bytes = read_small(&self.dir, &name, 64 << 20).map_err(|e| ierr("read", &name, e))?;
                out.extend(
                    std::str::from_utf8(&bytes)
                        .ok()
                        .and_then(decode_bucket)
                        .unwrap_or_default(),
                );
            }
        }
        out.sort();
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
