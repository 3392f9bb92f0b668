//! Crash-safe file replacement: readers see either the old or the new content, never an
//! empty or half-written file (the failure mode of libcni's plain `os.WriteFile` cache).
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Write `data` to `path` via a temp file in the same directory (mode 0600), fsync it,
/// rename it over `path`, then fsync the directory so the rename itself is durable.
/// Errors name the file and the step.
pub fn write(path: &Path, data: &[u8]) -> io::Result<()> {
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
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    // pid + counter: concurrent writers (processes or threads) never share a temp file.
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tmp_name.push(format!(".tmp{}-{seq}", std::process::id()));
    let tmp = dir.join(tmp_name);
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
        f.sync_all().map_err(|e| step("fsync", e))?;
        drop(f);
        std::fs::rename(&tmp, path)
            .map_err(|e| io::Error::new(e.kind(), format!("rename {} to {}: {e}", tmp.display(), path.display())))?;
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
