//! The iptables backend's record of the addresses each attachment got. The reference keeps
//! none: its rules' only identity is the address, so it cannot find them on a DEL without
//! prevResult (a runtime whose cache is corrupt) and has no GC. cnibox writes
//! `<dataDir>/<network>/<containerID>-<ifname>`, holding the container ID, the interface
//! name and the addresses, one per line, before it adds the rules, and removes it after DEL
//! removed them (or after a failed ADD undid them; an earlier ADD's record is put back).
//! The default dataDir is under /run, like the rules themselves gone at reboot.
//!
//! Names have no length limit but a file name has (255 bytes): a network name or a
//! `<containerID>-<ifname>` longer than that is shortened to its first characters, `:` and
//! a hash ([`entry_name`]). The record's content names the attachment, so a hash is only
//! where to look.
use crate::firewall_rules::iptables::save_restore::Lock;
use crate::util::{atomic, sha512};
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub const DEFAULT_DATA_DIR: &str = "/run/cni/firewall";

/// One attachment's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub container_id: String,
    pub ifname: String,
    pub addresses: Vec<IpAddr>,
}

/// How much of a name too long for a file name its shortened form keeps readable.
const READABLE: usize = 100;

/// The directory entry for `name`: `name` itself when a file name can hold it (so every
/// record written before long names were shortened is found where it is), else its first
/// characters, `:` and the SHA-512 of the whole in hex. Container IDs, network and interface
/// names hold no `:` (nor `/`: the entry point validates them), so a shortened form never
/// equals a name kept whole.
fn entry_name(name: &str) -> String {
    if name.len() <= atomic::NAME_MAX {
        return name.to_string();
    }
    let mut end = READABLE;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let mut hash = sha512::hex(&sha512::digest(name.as_bytes()));
    hash.truncate(64);
    format!("{}:{hash}", &name[..end])
}

fn network_dir(data_dir: &Path, network: &str) -> PathBuf {
    data_dir.join(entry_name(network))
}

fn path(data_dir: &Path, network: &str, container_id: &str, ifname: &str) -> PathBuf {
    network_dir(data_dir, network).join(entry_name(&format!("{container_id}-{ifname}")))
}

/// Write a record, under the xtables lock (`_held`): a [`remove`] of the network's last
/// record cannot take the directory away between its creation and the write.
pub fn write(_held: &Lock, data_dir: &Path, network: &str, r: &Record) -> io::Result<()> {
    let dir = network_dir(data_dir, network);
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .recursive(true)
        .create(&dir)?;
    let mut text = format!("{}\n{}\n", r.container_id, r.ifname);
    for a in &r.addresses {
        text.push_str(&format!("{a}\n"));
    }
    // Not fsynced: the record only has to outlive this process (a DEL after a crash mid-ADD
    // reads it back from the page cache), never a power loss, which takes the rules it
    // describes with it. Two fsyncs were milliseconds of every ADD on a busy disk.
    atomic::write_volatile(&path(data_dir, network, &r.container_id, &r.ifname), text.as_bytes())
}

fn parse(text: &str) -> Option<Record> {
    let mut lines = text.lines();
    Some(Record {
        container_id: lines.next()?.to_string(),
        ifname: lines.next()?.to_string(),
        addresses: lines.filter_map(|l| l.parse().ok()).collect(),
    })
}

/// The record of one attachment; None when there is none (or it is unreadable).
pub fn read(data_dir: &Path, network: &str, container_id: &str, ifname: &str) -> Option<Record> {
    let text = std::fs::read_to_string(path(data_dir, network, container_id, ifname)).ok()?;
    parse(&text).filter(|r| r.container_id == container_id && r.ifname == ifname)
}

/// Every record of a network (for GC).
pub fn all(data_dir: &Path, network: &str) -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(network_dir(data_dir, network)) else {
        return vec![];
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| atomic::temp_file_of(&e.file_name().to_string_lossy()).is_none())
        .filter_map(|e| parse(&std::fs::read_to_string(e.path()).ok()?))
        .collect()
}

/// Remove a record (a missing one is fine), and the network's directory with its last
/// record. Under the xtables lock (`_held`), as [`write`].
pub fn remove(_held: &Lock, data_dir: &Path, network: &str, container_id: &str, ifname: &str) -> io::Result<()> {
    match std::fs::remove_file(path(data_dir, network, container_id, ifname)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    // another attachment's record (or a killed writer's temp file) keeps it
    match std::fs::remove_dir(network_dir(data_dir, network)) {
        Err(e) if !matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::DirectoryNotEmpty) => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_list_per_network() {
        let held = crate::firewall_rules::iptables::save_restore::lock().unwrap();
        let d = tempfile::tempdir().unwrap();
        let r = Record {
            container_id: "ctr_a-1".into(),
            ifname: "eth0".into(),
            addresses: vec!["10.0.0.2".parse().unwrap(), "fd00::2".parse().unwrap()],
        };
        write(&held, d.path(), "net", &r).unwrap();
        assert_eq!(read(d.path(), "net", "ctr_a-1", "eth0"), Some(r.clone()));
        assert_eq!(read(d.path(), "other", "ctr_a-1", "eth0"), None);
        assert_eq!(all(d.path(), "net"), vec![r]);
        remove(&held, d.path(), "net", "ctr_a-1", "eth0").unwrap();
        remove(&held, d.path(), "net", "ctr_a-1", "eth0").unwrap();
        assert!(all(d.path(), "net").is_empty());
    }

    /// Names a file name can hold stay as they were (records already on disk keep being
    /// found); longer ones are shortened to a bounded name that cannot equal a kept one.
    #[test]
    fn names_too_long_for_a_file_name_are_shortened() {
        let at_limit = "c".repeat(250) + "-eth0";
        assert_eq!(entry_name(&at_limit), at_limit);
        assert_eq!(entry_name("ctr_a-1-eth0"), "ctr_a-1-eth0");
        let long = "c".repeat(251) + "-eth0";
        let short = entry_name(&long);
        assert!(
            short.starts_with(&"c".repeat(READABLE)) && short.contains(':'),
            "{short}"
        );
        assert_eq!(short.len(), READABLE + 1 + 64);
        assert_ne!(entry_name(&("c".repeat(251) + "-eth1")), short);

        let held = crate::firewall_rules::iptables::save_restore::lock().unwrap();
        let d = tempfile::tempdir().unwrap();
        let (net, id) = ("n".repeat(300), "c".repeat(300));
        let r = Record {
            container_id: id.clone(),
            ifname: "eth0".into(),
            addresses: vec!["10.0.0.2".parse().unwrap()],
        };
        write(&held, d.path(), &net, &r).unwrap();
        assert_eq!(read(d.path(), &net, &id, "eth0"), Some(r.clone()));
        assert_eq!(all(d.path(), &net), vec![r]);
        remove(&held, d.path(), &net, &id, "eth0").unwrap();
        assert_eq!(read(d.path(), &net, &id, "eth0"), None);
    }

    /// Regression: the last DEL of a network left its empty directory behind.
    #[test]
    fn a_networks_directory_goes_with_its_last_record() {
        let held = crate::firewall_rules::iptables::save_restore::lock().unwrap();
        let d = tempfile::tempdir().unwrap();
        let record = |id: &str| Record {
            container_id: id.into(),
            ifname: "eth0".into(),
            addresses: vec![],
        };
        write(&held, d.path(), "net", &record("a")).unwrap();
        write(&held, d.path(), "net", &record("b")).unwrap();
        remove(&held, d.path(), "net", "a", "eth0").unwrap();
        assert!(d.path().join("net").is_dir(), "b's record is still there");
        remove(&held, d.path(), "net", "b", "eth0").unwrap();
        assert!(!d.path().join("net").exists());
        remove(&held, d.path(), "net", "b", "eth0").unwrap();
        // a killed writer's temp file keeps it: only an empty directory goes
        write(&held, d.path(), "net", &record("a")).unwrap();
        std::fs::write(d.path().join("net/.a-eth0.tmp1-0"), "").unwrap();
        remove(&held, d.path(), "net", "a", "eth0").unwrap();
        assert!(d.path().join("net").is_dir());
    }
}
