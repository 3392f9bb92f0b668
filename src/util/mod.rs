//! Small self-contained helpers; each submodule has one concern (and `same_file`).
pub mod argv;
pub mod atomic;
pub mod base64;
pub mod flock;
pub mod release;
pub mod sha512;
pub mod time;

/// True when both paths name the same file (device and inode), through symlinks.
pub fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}
