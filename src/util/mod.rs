//! Small self-contained helpers; each submodule has one concern (and `same_file`).
pub mod argv;
pub mod atomic;
pub mod base64;
pub mod boot;
pub mod flock;
pub mod regex;
pub mod release;
pub mod sha512;
pub mod sort;
pub mod time;

/// True when both paths name the same file (device and inode), through symlinks.
///
/// Each file is opened and its descriptor asked (fstat), not the path (stat): for
/// `/proc/self/exe` under qemu-user only `open` is given the emulated program (stat would
/// see qemu's own binary), and natively both name the same inode.
pub fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let identity = |p: &std::path::Path| std::fs::File::open(p).and_then(|f| f.metadata());
    match (identity(a), identity(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}
