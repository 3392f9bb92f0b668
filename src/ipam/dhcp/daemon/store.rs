//! The daemon's lease records: one file per held lease in the state directory, written
//! crash-safe (temp file, fsync, rename, fsync of the directory) every time the lease is
//! bound or renewed and removed when it is released. A daemon started again reads them
//! back, so DEL and CHECK of leases taken before a restart (or a crash) still work and
//! their renewals go on.
//!
//! A record holds what the lease needs to go on without its ADD: the attachment (namespace
//! path, interface, MAC), the options every message carries, the route priority, and the
//! server's ACK as it arrived with the time it arrived, from which the address, the
//! routes and the timers are read again as they were the first time.
use super::super::config::Options;
use crate::util::{atomic, base64, sha512};
use serde_json::{json, Value};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub client_id: String,
    /// As the plugin sent it (the host prefix is applied when it is opened).
    pub netns: String,
    pub ifname: String,
    pub mac: [u8; 6],
    pub options: Options,
    pub priority: i64,
    pub ack: Vec<u8>,
    pub server_mac: [u8; 6],
    pub bound_at: SystemTime,
}

pub struct Store {
    dir: PathBuf,
}

const SUFFIX: &str = ".lease";

impl Store {
    /// The directory, created (0700) when missing.
    pub fn open(dir: &Path) -> io::Result<Store> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("state directory {}: {e}", dir.display())))?;
        Ok(Store { dir: dir.to_path_buf() })
    }

    /// The file of a lease: client IDs hold `/` and can be 254 bytes long, so its name is a
    /// digest of the ID.
    fn path(&self, client_id: &str) -> PathBuf {
        let digest = sha512::hex(&sha512::digest(client_id.as_bytes()));
        self.dir.join(format!("{}{SUFFIX}", &digest[..32]))
    }

    pub fn save(&self, r: &Record) -> io::Result<()> {
        let since = r.bound_at.duration_since(UNIX_EPOCH).unwrap_or_default();
        let doc = json!({
            "clientID": r.client_id,
            "netns": r.netns,
            "ifname": r.ifname,
            "mac": sha512::hex(&r.mac),
            "provide": r.options.provided.iter().map(|(c, v)| json!([c, base64::encode(v)])).collect::<Vec<_>>(),
            "request": sha512::hex(&r.options.requested),
            "priority": r.priority,
            "ack": base64::encode(&r.ack),
            "serverMAC": sha512::hex(&r.server_mac),
            "boundAtMillis": since.as_millis() as u64,
        });
        atomic::write(&self.path(&r.client_id), doc.to_string().as_bytes())
    }

    pub fn remove(&self, client_id: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path(client_id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every record, and a line for each file that is not one (left alone). Temp files of
    /// a writer that died before its rename are removed.
    pub fn load(&self) -> (Vec<Record>, Vec<String>) {
        let (mut records, mut problems) = (vec![], vec![]);
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return (records, problems);
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if atomic::temp_file_of(&name).is_some() {
                let _ = std::fs::remove_file(e.path());
                continue;
            }
            if !name.ends_with(SUFFIX) {
                continue;
            }
            match std::fs::read(e.path()).ok().and_then(|b| parse(&b)) {
                Some(r) if self.path(&r.client_id) == e.path() => records.push(r),
                _ => problems.push(format!("{}: not a lease record, left alone", e.path().display())),
            }
        }
        (records, problems)
    }
}

fn parse(bytes: &[u8]) -> Option<Record> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let unhex = |k: &str| -> Option<Vec<u8>> {
        let t = s(k)?;
        (0..t.len())
            .step_by(2)
            .map(|i| t.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect()
    };
    let mac = |k: &str| -> Option<[u8; 6]> { unhex(k)?.try_into().ok() };
    let provided = v
        .get("provide")?
        .as_array()?
        .iter()
        .map(|p| {
            let code = u8::try_from(p.get(0)?.as_u64()?).ok()?;
            Some((code, base64::decode(p.get(1)?.as_str()?).ok()?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Record {
        client_id: s("clientID")?.to_string(),
        netns: s("netns")?.to_string(),
        ifname: s("ifname")?.to_string(),
        mac: mac("mac")?,
        options: Options {
            provided,
            requested: unhex("request")?,
        },
        priority: v.get("priority")?.as_i64()?,
        ack: base64::decode(s("ack")?).ok()?,
        server_mac: mac("serverMAC")?,
        bound_at: UNIX_EPOCH + Duration::from_millis(v.get("boundAtMillis")?.as_u64()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_goes_away() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("leases")).unwrap();
        let r = Record {
            client_id: "abc/net/eth0".into(),
            netns: "/run/netns/x".into(),
            ifname: "eth0".into(),
            mac: [2, 0, 0, 0, 0, 1],
            options: Options {
                provided: vec![(12, b"web".to_vec())],
                requested: vec![121, 3, 1],
            },
            priority: 5,
            ack: vec![2, 1, 6, 0, 255],
            server_mac: [2, 0, 0, 0, 0, 2],
            bound_at: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        };
        store.save(&r).unwrap();
        std::fs::write(dir.path().join("leases/junk.lease"), "{").unwrap();
        std::fs::write(dir.path().join("leases/.x.lease.tmp1-2"), "{").unwrap();
        let (records, problems) = store.load();
        assert_eq!(records, vec![r.clone()]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(!dir.path().join("leases/.x.lease.tmp1-2").exists());
        store.remove(&r.client_id).unwrap();
        store.remove(&r.client_id).unwrap();
        assert!(store.load().0.is_empty());
    }
}
