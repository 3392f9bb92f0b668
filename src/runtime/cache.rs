//! The result cache, in libcni's `cniCacheV1` format, so cnibox and a libcni-based runtime
//! can each DEL what the other added: `<dir>/results/<net>-<cid>-<ifname>`, one line of
//! compact JSON with the fields in libcni's order and the config base64-encoded.
//!
//! Unlike libcni, writes are atomic, and an empty or corrupt file is reported as such
//! instead of an error, so DEL can go on without it.
use super::names;
use crate::cni::json::{self, Fields, Json};
use crate::util::{atomic, base64};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use std::fmt;
use std::path::{Path, PathBuf};

pub const KIND_V1: &str = "cniCacheV1";
/// The extended attribute naming the boot a cache file was written in (libcni neither
/// reads nor writes it: the file's bytes stay libcni's). A file without it, such as one
/// libcni wrote, is of an unknown boot.
const BOOT_XATTR: &std::ffi::CStr = c"user.cnibox.boot";

/// The attachment a cache file belongs to. Building one validates the names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub network: String,
    pub container_id: String,
    pub ifname: String,
}

impl Key {
    pub fn new(network: &str, container_id: &str, ifname: &str) -> Result<Key, CacheError> {
        let invalid = |e: names::NameError| CacheError::InvalidKey(e.msg);
        names::network_name(network).map_err(invalid)?;
        names::container_id(container_id).map_err(invalid)?;
        names::interface_name(ifname).map_err(invalid)?;
        Ok(Key {
            network: network.into(),
            container_id: container_id.into(),
            ifname: ifname.into(),
        })
    }

    /// `<net>-<cid>-<ifname>`: one path component, since none of the parts can hold `/`.
    pub fn file_name(&self) -> String {
        format!("{}-{}-{}", self.network, self.container_id, self.ifname)
    }
}

/// One cached attachment (the `cniCacheV1` object).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub kind: String,
    #[serde(rename = "containerId")]
    pub container_id: String,
    /// The exact list bytes ADD ran with.
    #[serde(serialize_with = "ser_base64")]
    pub config: Vec<u8>,
    #[serde(rename = "ifName")]
    pub ifname: String,
    #[serde(rename = "networkName")]
    pub network: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub netns: String,
    #[serde(rename = "cniArgs", skip_serializing_if = "Vec::is_empty")]
    pub cni_args: Vec<(String, String)>,
    #[serde(rename = "capabilityArgs", skip_serializing_if = "Map::is_empty")]
    pub capability_args: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

fn ser_base64<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::encode(bytes))
}

impl Entry {
    /// libcni's `cachedInfo` as Go decodes it (keys matched as Go matches them); the
    /// caller has checked `kind`.
    fn from_fields(obj: &Fields) -> Result<Entry, crate::cni::Error> {
        let text = |key: &str| -> Result<String, crate::cni::Error> {
            Ok(json::opt_str(obj, key, &format!("cachedInfo.{key}"))?
                .unwrap_or_default()
                .to_string())
        };
        // Go writes a nil []byte as null; a []byte is base64 text.
        let config = match json::opt_str(obj, "config", "cachedInfo.config")? {
            None => Vec::new(),
            Some(s) => base64::decode(s).map_err(|e| crate::cni::Error::internal(format!("config: {e}")))?,
        };
        let cni_args = json::nullable_field(obj, "cniArgs", "[][2]string", |v| {
            let pairs = v
                .as_array()
                .ok_or_else(|| json::type_error(v, "cachedInfo.cniArgs", "[][2]string"))?;
            pairs
                .iter()
                .map(|p| match json::str_list(p, "cachedInfo.cniArgs")?.as_slice() {
                    [k, v] => Ok((k.clone(), v.clone())),
                    _ => Err(json::type_error(p, "cachedInfo.cniArgs", "[2]string")),
                })
                .collect::<Result<Vec<_>, _>>()
        })?
        .unwrap_or_default();
        let map = |key: &str| json::opt_map(obj, key, &format!("cachedInfo.{key}"), "map[string]interface {}");
        // Inserted, not collected: a BTree collection's `FromIterator` sorts, a sort instance of
        // ~4 KB per element type (see `util::sort`).
        let mut capability_args = Map::new();
        capability_args.extend(
            map("capabilityArgs")?
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_value())),
        );
        let result = map("result")?.map(|m| Json::Object(json::Object::from_map(&m)).to_value());
        Ok(Entry {
            kind: text("kind")?,
            container_id: text("containerId")?,
            config,
            ifname: text("ifName")?,
            network: text("networkName")?,
            netns: text("netns")?,
            cni_args,
            capability_args,
            result,
        })
    }
}

/// What reading a cache file found.
#[derive(Debug, Clone, PartialEq)]
pub enum Cached {
    Missing,
    Entry(Box<Entry>),
    /// An old-style cache file: the bare result.
    Legacy(Value),
    /// Empty or not JSON: the reason, for a warning.
    Corrupt(String),
}

#[derive(Debug)]
pub enum CacheError {
    InvalidKey(String),
    Io {
        op: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::InvalidKey(m) => write!(f, "invalid cache key: {m}"),
            CacheError::Io { op, path, err } => write!(f, "{op} {}: {err}", path.display()),
        }
    }
}

impl std::error::Error for CacheError {}

/// The cache directory (`/var/lib/cni` by default).
#[derive(Debug, Clone)]
pub struct Cache {
    pub dir: PathBuf,
}

impl Cache {
    pub fn new(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    pub fn results_dir(&self) -> PathBuf {
        self.dir.join("results")
    }

    pub fn path(&self, key: &Key) -> PathBuf {
        self.results_dir().join(key.file_name())
    }

    /// The file's bytes: libcni's field order, compact, no trailing newline.
    pub fn encode(entry: &Entry) -> Vec<u8> {
        serde_json::to_vec(entry).expect("a cache entry serialises")
    }

    pub fn write(&self, key: &Key, entry: &Entry) -> Result<(), CacheError> {
        let dir = self.results_dir();
        let path = self.path(key);
        // the file itself may be a planted link: the rename replaces it without following
        no_symlinks_below(&self.dir, &dir).map_err(|err| CacheError::Io {
            op: "write",
            path: path.clone(),
            err,
        })?;
        create_private_dir(&dir)?;
        // Replaced atomically but not fsynced, as libcni writes it (without even the
        // rename): what it describes (namespaces, veths, rules) does not outlive a boot,
        // and a DEL without its cache entry still works. Two fsyncs cost every ADD
        // milliseconds on a busy disk.
        atomic::write_volatile_with(&path, &Self::encode(entry), tag_with_boot).map_err(|err| CacheError::Io {
            op: "write",
            path,
            err,
        })
    }

    /// The boot the cache file of `key` was written in, when it says.
    pub fn written_in_boot(&self, key: &Key) -> Option<String> {
        use std::os::unix::ffi::OsStrExt;
        no_symlinks_below(&self.dir, &self.results_dir()).ok()?;
        let path = std::ffi::CString::new(self.path(key).as_os_str().as_bytes()).ok()?;
        let mut buf = [0u8; 64];
        // SAFETY: lgetxattr(2) with NUL-terminated strings and a buffer of the given size; it
        // does not follow a symlink in the file's place.
        let n = unsafe { libc::lgetxattr(path.as_ptr(), BOOT_XATTR.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        let n = usize::try_from(n).ok()?;
        crate::util::boot::parse(std::str::from_utf8(&buf[..n]).ok()?)
    }

    /// Whether the attachment cached for `key` was added in an earlier boot: its namespace,
    /// and everything that was in it, is gone.
    pub fn from_earlier_boot(&self, key: &Key) -> bool {
        match (crate::util::boot::id(), self.written_in_boot(key)) {
            (Some(now), Some(then)) => now != then,
            _ => false,
        }
    }

    pub fn read(&self, key: &Key) -> Cached {
        match read_regular(&self.dir, &self.path(key)) {
            Ok(bytes) => decode(&bytes),
            // Like libcni: an unreadable file counts as no cache (a planted symlink too).
            Err(_) => Cached::Missing,
        }
    }

    /// Remove the file; a missing file is fine.
    pub fn remove(&self, key: &Key) -> Result<(), CacheError> {
        let path = self.path(key);
        // through a symlinked results directory this would delete a file elsewhere (a link
        // in the file's place is removed itself, never its target)
        no_symlinks_below(&self.dir, &self.results_dir()).map_err(|err| CacheError::Io {
            op: "remove",
            path: path.clone(),
            err,
        })?;
        // a temp file of a killed ADD of this attachment (we hold its lock) goes too
        self.remove_stale_temps(|f| f == key.file_name());
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(CacheError::Io {
                op: "remove",
                path,
                err,
            }),
        }
    }

    /// Remove the temp files that writers killed between create and rename left for the
    /// cache files `owned` selects. Only call it holding the lock that excludes every writer
    /// of those files; the writer's pid must also be gone (a live pid, e.g. a writer of
    /// another network whose name merely shares the prefix, keeps its file). Returns how
    /// many were removed.
    pub fn remove_stale_temps(&self, owned: impl Fn(&str) -> bool) -> usize {
        let Ok(rd) = std::fs::read_dir(self.results_dir()) else {
            return 0;
        };
        if no_symlinks_below(&self.dir, &self.results_dir()).is_err() {
            return 0;
        }
        let mut removed = 0;
        for e in rd.flatten() {
            let name = e.file_name();
            let Some((target, pid)) = name.to_str().and_then(atomic::temp_file_of) else {
                continue;
            };
            let alive =
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None) != Err(nix::errno::Errno::ESRCH);
            if owned(target) && !alive && std::fs::remove_file(e.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// Every valid `cniCacheV1` entry with a network, container and interface name, in file
    /// name order (`GetCachedAttachments`); unreadable and foreign files are skipped.
    pub fn list(&self) -> Vec<Entry> {
        let Ok(rd) = std::fs::read_dir(self.results_dir()) else {
            return vec![];
        };
        let mut names: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
        crate::util::sort::sort(&mut names);
        let mut entries = Vec::new();
        for name in names {
            let Ok(bytes) = read_regular(&self.dir, &self.results_dir().join(&name)) else {
                continue;
            };
            let Cached::Entry(entry) = decode(&bytes) else { continue };
            // Only a file under its own key: this skips a temp file caught between write and
            // rename, and copies made by hand.
            let own_name = Key::new(&entry.network, &entry.container_id, &entry.ifname).map(|k| k.file_name());
            if own_name.is_ok_and(|n| *name == *n) {
                entries.push(*entry);
            }
        }
        entries
    }
}

/// Marks a cache file with this boot (see [`BOOT_XATTR`]); where the file system has no
/// user attributes the file stays unmarked, of an unknown boot, as libcni's are.
fn tag_with_boot(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    if let Some(id) = crate::util::boot::id() {
        // SAFETY: fsetxattr(2) on an open descriptor, with a NUL-terminated name and a
        // buffer of the given length.
        unsafe { libc::fsetxattr(f.as_raw_fd(), BOOT_XATTR.as_ptr(), id.as_ptr().cast(), id.len(), 0) };
    }
}

/// Interpret a cache file's bytes as libcni does: `cniCacheV1` if it says so, else the bare
/// result of the legacy format.
pub fn decode(bytes: &[u8]) -> Cached {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Cached::Corrupt("the file is empty".into());
    }
    let doc = match json::parse(bytes) {
        Ok(v) => v,
        Err(e) => return Cached::Corrupt(format!("not JSON: {e}")),
    };
    let Json::Object(_) = doc else {
        return Cached::Corrupt("not a JSON object".into());
    };
    let obj = Fields::of(doc.as_object().expect("an object"));
    match json::opt_str(&obj, "kind", "cachedInfo.kind") {
        Ok(Some(KIND_V1)) => match Entry::from_fields(&obj) {
            Ok(e) => Cached::Entry(Box::new(e)),
            Err(e) => Cached::Corrupt(format!("malformed {KIND_V1} entry: {}", e.msg)),
        },
        // libcni reads anything else as the bare result of the legacy format
        _ => Cached::Legacy(doc.to_value()),
    }
}

/// Fails when `path` or a directory between `root` (exclusive) and `path` is a symlink: files
/// of the cache dir are only ever reached through real directories.
/// (`root` itself is the runtime's choice and may be a link.)
pub fn no_symlinks_below(root: &Path, path: &Path) -> std::io::Result<()> {
    let Ok(rel) = path.strip_prefix(root) else {
        return Ok(());
    };
    let mut at = root.to_path_buf();
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{} is a symlink; refusing to follow it", at.display()),
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A cache file's bytes: a regular file, reached without following symlinks and without
/// blocking on a planted FIFO.
fn read_regular(root: &Path, path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    no_symlinks_below(root, path.parent().unwrap_or(root))?;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn create_private_dir(dir: &Path) -> Result<(), CacheError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|err| CacheError::Io {
            op: "create directory",
            path: dir.to_path_buf(),
            err,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry() -> Entry {
        Entry {
            kind: KIND_V1.into(),
            container_id: "ctr1".into(),
            config: br#"{"cniVersion":"1.0.0"}"#.to_vec(),
            ifname: "eth0".into(),
            network: "exnet".into(),
            netns: "/run/netns/x".into(),
            cni_args: vec![("IgnoreUnknown".into(), "1".into())],
            capability_args: json!({"portMappings":[1]}).as_object().unwrap().clone(),
            result: Some(json!({"cniVersion":"1.0.0","ips":[]})),
        }
    }

    #[test]
    fn encodes_in_libcni_field_order() {
        let text = String::from_utf8(Cache::encode(&entry())).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"cniCacheV1","containerId":"ctr1","config":"eyJjbmlWZXJzaW9uIjoiMS4wLjAifQ==","ifName":"eth0","networkName":"exnet","netns":"/run/netns/x","cniArgs":[["IgnoreUnknown","1"]],"capabilityArgs":{"portMappings":[1]},"result":{"cniVersion":"1.0.0","ips":[]}}"#
        );
        let mut bare = entry();
        bare.netns.clear();
        bare.cni_args.clear();
        bare.capability_args.clear();
        bare.result = None;
        assert_eq!(
            String::from_utf8(Cache::encode(&bare)).unwrap(),
            r#"{"kind":"cniCacheV1","containerId":"ctr1","config":"eyJjbmlWZXJzaW9uIjoiMS4wLjAifQ==","ifName":"eth0","networkName":"exnet"}"#
        );
    }

    #[test]
    fn decodes_libcni_files_and_oddities() {
        let observed = br#"{"kind":"cniCacheV1","containerId":"ctr1","config":"eyJ9","ifName":"eth0","networkName":"exnet","cniArgs":null,"result":{"cniVersion":"1.0.0"}}"#;
        let Cached::Entry(e) = decode(observed) else {
            panic!("not an entry")
        };
        assert_eq!(e.config, b"{\"}");
        assert!(e.cni_args.is_empty());
        assert_eq!(
            decode(br#"{"cniVersion":"0.4.0","ips":[]}"#),
            Cached::Legacy(json!({"cniVersion":"0.4.0","ips":[]}))
        );
        assert_eq!(decode(b""), Cached::Corrupt("the file is empty".into()));
        assert!(matches!(decode(b"{\"kind\":\"cniCa"), Cached::Corrupt(m) if m.starts_with("not JSON")));
        assert!(
            matches!(decode(br#"{"kind":"cniCacheV1","config":"!!"}"#), Cached::Corrupt(m) if m.contains("malformed"))
        );
    }

    #[test]
    fn write_read_remove_and_list() {
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::new(d.path());
        let key = Key::new("exnet", "ctr1", "eth0").unwrap();
        assert_eq!(cache.read(&key), Cached::Missing);
        cache.write(&key, &entry()).unwrap();
        assert_eq!(cache.path(&key), d.path().join("results/exnet-ctr1-eth0"));
        assert_eq!(cache.read(&key), Cached::Entry(Box::new(entry())));
        std::fs::write(cache.results_dir().join("junk"), b"").unwrap();
        // A complete copy under another name (a temp file before its rename) is not listed.
        std::fs::copy(cache.path(&key), cache.results_dir().join(".exnet-ctr1-eth0.tmp1-0")).unwrap();
        assert_eq!(cache.list(), vec![entry()]);
        cache.remove(&key).unwrap();
        cache.remove(&key).unwrap();
        assert_eq!(cache.read(&key), Cached::Missing);
    }

    #[test]
    fn a_write_records_its_boot_beside_libcnis_bytes() {
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::new(d.path());
        let key = Key::new("exnet", "ctr1", "eth0").unwrap();
        assert_eq!(cache.written_in_boot(&key), None);
        cache.write(&key, &entry()).unwrap();
        assert_eq!(std::fs::read(cache.path(&key)).unwrap(), Cache::encode(&entry()));
        assert_eq!(cache.written_in_boot(&key), crate::util::boot::id());
        assert!(!cache.from_earlier_boot(&key));
        // as a file of an earlier boot carries it
        let set = |value: &str| {
            use std::os::unix::ffi::OsStrExt;
            let path = std::ffi::CString::new(cache.path(&key).as_os_str().as_bytes()).unwrap();
            // SAFETY: setxattr(2) with NUL-terminated strings and a buffer of the given length.
            let r = unsafe {
                libc::setxattr(
                    path.as_ptr(),
                    BOOT_XATTR.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    0,
                )
            };
            assert_eq!(r, 0);
        };
        set("00000000-0000-4000-8000-000000000000");
        assert!(cache.from_earlier_boot(&key));
        // an unreadable mark is no boot: the attachment counts as this boot's
        set("garbage");
        assert_eq!(cache.written_in_boot(&key), None);
        assert!(!cache.from_earlier_boot(&key));
        // libcni's plain write keeps no mark
        std::fs::remove_file(cache.path(&key)).unwrap();
        std::fs::write(cache.path(&key), Cache::encode(&entry())).unwrap();
        assert!(!cache.from_earlier_boot(&key));
    }

    #[test]
    fn planted_symlinks_are_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::new(d.path().join("cache"));
        let key = Key::new("exnet", "ctr1", "eth0").unwrap();
        std::fs::create_dir_all(cache.results_dir()).unwrap();
        let outside = d.path().join("outside");
        std::fs::write(&outside, Cache::encode(&entry())).unwrap();
        std::os::unix::fs::symlink(&outside, cache.path(&key)).unwrap();
        assert_eq!(
            cache.read(&key),
            Cached::Missing,
            "the outside file is not read as the cache"
        );
        assert!(cache.list().is_empty());
        cache.write(&key, &entry()).unwrap();
        assert!(
            std::fs::symlink_metadata(cache.path(&key)).unwrap().is_file(),
            "the link is replaced"
        );
        assert_eq!(std::fs::read(&outside).unwrap(), Cache::encode(&entry()));
        // a symlinked results directory: neither written into nor deleted from
        std::fs::remove_dir_all(cache.results_dir()).unwrap();
        let out_dir = d.path().join("outdir");
        std::fs::create_dir(&out_dir).unwrap();
        std::fs::write(out_dir.join(key.file_name()), b"keep").unwrap();
        std::os::unix::fs::symlink(&out_dir, cache.results_dir()).unwrap();
        assert!(cache.write(&key, &entry()).is_err());
        assert!(cache.remove(&key).is_err());
        assert_eq!(cache.read(&key), Cached::Missing);
        assert_eq!(std::fs::read(out_dir.join(key.file_name())).unwrap(), b"keep");
    }

    #[test]
    fn remove_takes_the_temp_files_of_killed_writers_with_it() {
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::new(d.path());
        let key = Key::new("exnet", "ctr1", "eth0").unwrap();
        cache.write(&key, &entry()).unwrap();
        let dead = ".exnet-ctr1-eth0.tmp2147483646-0";
        let live = format!(".exnet-ctr1-eth0.tmp{}-5", std::process::id());
        let other = ".exnet-ctr2-eth0.tmp2147483646-0";
        for n in [dead, live.as_str(), other] {
            std::fs::write(cache.results_dir().join(n), b"{").unwrap();
        }
        cache.remove(&key).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(cache.results_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec![live, other.to_string()],
            "only the dead writer's file of this key goes"
        );
        assert_eq!(cache.remove_stale_temps(|f| f.starts_with("exnet-")), 1);
    }

    #[test]
    fn keys_cannot_escape_the_directory() {
        for (n, c, i) in [
            ("..", "c", "eth0"),
            ("n", "../c", "eth0"),
            ("n", "c", ".."),
            ("n/x", "c", "e"),
            ("n", "c\0", "e"),
        ] {
            assert!(
                matches!(Key::new(n, c, i), Err(CacheError::InvalidKey(_))),
                "{n:?} {c:?} {i:?}"
            );
        }
    }
}
