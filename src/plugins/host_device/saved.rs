//! What ADD records about the host link before moving it, for DEL to put back: its name,
//! MTU and whether it was up, in `<dataDir>/<containerID>_<ifname>.json`.
//!
//! The name also travels with the link itself, as its alias (IFLA_IFALIAS), which is what
//! the reference reads back; the file is the fallback when the alias was changed inside the
//! container, and the only record of the MTU and the up state (the reference leaves the link
//! down, with whatever MTU the container gave it).
use crate::cni::json;
use crate::netlink::Link;
use crate::util::atomic;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub name: String,
    pub mtu: u32,
    pub up: bool,
}

impl Saved {
    pub fn of(link: &Link) -> Saved {
        Saved {
            name: link.name.clone(),
            mtu: link.mtu,
            up: link.up,
        }
    }

    fn to_json(&self) -> String {
        serde_json::json!({"name": self.name, "mtu": self.mtu, "up": self.up}).to_string()
    }

    fn from_json(data: &[u8]) -> Option<Saved> {
        let doc = json::parse(data).ok()?;
        let obj = json::as_object(&doc, "saved").ok()?;
        Some(Saved {
            name: json::opt_str(&obj, "name", "name").ok()??.to_string(),
            mtu: json::opt_uint(&obj, "mtu", "mtu").ok()??,
            up: json::opt_bool(&obj, "up", "up").ok()??,
        })
    }
}

/// The file of one attachment.
pub fn file(data_dir: &Path, container_id: &str, ifname: &str) -> PathBuf {
    data_dir.join(format!("{container_id}_{ifname}.json"))
}

/// Writes the record (the directory is created, 0700); a tmpfs file, so without fsync.
pub fn write(path: &Path, saved: &Saved) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    atomic::write_volatile(path, saved.to_json().as_bytes()).map_err(|e| e.to_string())
}

/// The record, if there is a readable one (a damaged file is as good as none: the alias
/// still names the link).
pub fn read(path: &Path) -> Option<Saved> {
    let data = std::fs::read(path).ok()?;
    let saved = Saved::from_json(&data);
    if saved.is_none() {
        eprintln!("cnibox host-device: {} is not a saved state; ignored", path.display());
    }
    saved
}

/// Removes the record; one already gone is fine.
pub fn remove(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("remove {}: {e}", path.display())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_a_damaged_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(&dir.path().join("sub"), "ctr1", "net1");
        assert_eq!(path.file_name().unwrap(), "ctr1_net1.json");
        let saved = Saved {
            name: "ens5".into(),
            mtu: 9000,
            up: true,
        };
        write(&path, &saved).unwrap();
        assert_eq!(read(&path), Some(saved));
        std::fs::write(&path, b"{\"name\": \"ens5\", \"mtu\": ").unwrap();
        assert_eq!(read(&path), None);
        remove(&path).unwrap();
        remove(&path).unwrap();
        assert_eq!(read(&path), None);
    }
}
