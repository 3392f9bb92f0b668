//! Crash-safe file replacement: readers see either the old or the new content, never an
//! empty or half-written file (the failure mode of libcni's plain `os.WriteFile` cache).
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The longest file name Linux takes (NAME_MAX), in bytes.
pub const NAME_MAX: usize = 255;

/// The temp file name [`write`] uses for `name`: `.<name>.tmp<pid>-<seq>`, `name` cut short
/// when the whole would pass [`NAME_MAX`] (any name that fits must be writable).
fn temp_name(name: &std::ffi::OsStr, pid: u32, seq: u64) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    let suffix = format!(".tmp{pid}-{seq}");
    let bytes = name.as_bytes();
    let mut end = bytes.len().min(NAME_MAX - 1 - suffix.len());
    // on a character boundary, when the name is text
    if let Ok(text) = std::str::from_utf8(bytes) {
        while !text.is_char_boundary(end) {
            end -= 1;
        }
    }
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(std::ffi::OsStr::from_bytes(&bytes[..end]));
    tmp.push(suffix);
    tmp
}

/// For a directory entry that is a temp file of [`write`]: the name it was to replace and
/// the pid of its writer. A writer killed between create and rename leaves such a file.
pub fn temp_file_of(entry: &str) -> Option<(&str, u32)> {
    let rest = entry.strip_prefix('.')?;
    let at = rest.rfind(".tmp")?;
    let (target, suffix) = (&rest[..at], &rest[at + 4..]);
    let (pid, seq) = suffix.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if target.is_empty() || !digits(pid) || !digits(seq) {
        return None;
    }
    Some((target, pid.parse().ok()?))
}

/// Write `data` to `path` via a temp file in the same directory (mode 0600), fsync it,
/// rename it over `path`, then fsync the directory so the rename itself is durable.
/// Errors name the file and the step.
pub fn write(path: &Path, data: &[u8]) -> io::Result<()> {
    replace(path, data, true, |_| {})
}

/// [`write`] without the two fsyncs: readers still see the old or the new content, but a
/// power loss may lose the change. For files that do not outlive a boot anyway (an OCI
/// bundle's `config.json`, on tmpfs under /run, which runc and containerd never fsync; the
/// runtime's result cache, which libcni never fsyncs), where an fsync only costs time:
/// milliseconds each on a busy disk.
pub fn write_volatile(path: &Path, data: &[u8]) -> io::Result<()> {
    replace(path, data, false, |_| {})
}

/// [`write_volatile`], with `before_rename` given the written file first (to set what
/// must appear together with the content, such as an extended attribute).
pub fn write_volatile_with(path: &Path, data: &[u8], before_rename: impl FnOnce(&File)) -> io::Result<()> {
    replace(path, data, false, before_rename)
}

fn replace(path: &Path, data: &[u8], durable: bool, before_rename: impl FnOnce(&File)) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a file path", path.display()),
        )
    })?;
    // pid + counter: concurrent writers (processes or threads) never share a temp file.
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(temp_name(name, std::process::id(), seq));
    let step = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{what} {}: {e}", tmp.display()));
    let result = (|| {
        // O_EXCL|O_NOFOLLOW: never write through something planted under the temp name; a
        // leftover of a killed writer with a reused pid is removed and the create retried.
        let create = || {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)
        };
        let mut f = match create() {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&tmp).map_err(|e| step("remove stale", e))?;
                create()
            }
            other => other,
        }
        .map_err(|e| step("create", e))?;
        f.write_all(data).map_err(|e| step("write", e))?;
        before_rename(&f);
        if durable {
            f.sync_all().map_err(|e| step("fsync", e))?;
        }
        drop(f);
        std::fs::rename(&tmp, path)
            .map_err(|e| io::Error::new(e.kind(), format!("rename {} to {}: {e}", tmp.display(), path.display())))?;
        if !durable {
            return Ok(());
        }
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io::Error::new(e.kind(), format!("fsync directory {}: {e}", dir.display())))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Regression: the temp file of a name within a few bytes of NAME_MAX was too long to
    /// create, so such a file could not be written at all (`File name too long`).
    #[test]
    fn the_longest_file_name_is_writable() {
        let dir = tempfile::tempdir().unwrap();
        let name = "x".repeat(NAME_MAX);
        let p = dir.path().join(&name);
        write(&p, b"one").unwrap();
        write_volatile(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(name)]);
    }

    #[test]
    fn writes_replaces_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write(&p, b"one").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        write(&p, b"two, longer").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two, longer");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("f")]);
    }

    #[test]
    fn volatile_write_replaces_whole_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.json");
        std::fs::write(&p, b"old").unwrap();
        write_volatile(&p, b"new and longer").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new and longer");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(write_volatile(&dir.path().join("nope/f"), b"x").is_err());
    }

    #[test]
    fn temp_file_names_are_recognised() {
        let t = temp_name(std::ffi::OsStr::new("net-c1-eth0"), 42, 7);
        assert_eq!(t, ".net-c1-eth0.tmp42-7");
        assert_eq!(temp_file_of(t.to_str().unwrap()), Some(("net-c1-eth0", 42)));
        // an interface name with ".tmp" in it does not confuse the parser
        assert_eq!(temp_file_of(".n-c-eth0.tmp1.tmp9-0"), Some(("n-c-eth0.tmp1", 9)));
        // the longest name: its temp file's name is cut to fit, and still recognised
        let long = "c".repeat(NAME_MAX);
        let t = temp_name(std::ffi::OsStr::new(&long), 4_194_304, u64::MAX);
        assert_eq!(t.len(), NAME_MAX);
        let (target, pid) = temp_file_of(t.to_str().unwrap()).unwrap();
        assert!(long.starts_with(target) && pid == 4_194_304);
        for other in [
            "net-c1-eth0",
            ".net.tmp",
            ".net.tmpx-1",
            ".net.tmp1-",
            ".tmp1-2",
            ".net.tmp1-2x",
        ] {
            assert_eq!(temp_file_of(other), None, "{other}");
        }
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope").join("f");
        let e = write(&p, b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(
            e.to_string().contains("create ") && e.to_string().contains("nope"),
            "{e}"
        );
    }
}
