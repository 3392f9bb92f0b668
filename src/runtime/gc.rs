//! GC as libcni 1.3 (`GCNetworkList`): DEL every cached attachment of the network that is
//! not in the valid set, from what the cache recorded at ADD, then send GC with the valid
//! set to every plugin (spec 1.1.0 on). Errors are collected, not short-circuited.
//!
//! Unlike libcni, an attachment cached in an earlier boot is stale even when the valid set
//! lists it (unless its network keeps an earlier boot's), and is DELeted without its
//! namespace and result ([`Runtime::del_network_list`]): the cached path may name another
//! namespace now (`/proc/<pid>/ns/net` of whatever process has that pid in this boot).
use super::cache::Key;
use super::chain::{Attachment, ChainError, Runtime, RuntimeConf};
use super::conflist::NetworkList;
use super::lock;
use super::request;
use serde_json::{json, Value};

impl Runtime {
    /// Collect everything of network `list` that does not belong to `valid`.
    pub fn gc_network_list(&self, list: &NetworkList, valid: &[Attachment]) -> Result<(), ChainError> {
        if list.disable_gc {
            return Ok(());
        }
        super::names::network_name(&list.name).map_err(|e| ChainError::Invalid(e.msg))?;
        // Exclusive: the spec forbids ADD or DEL of this network while GC runs.
        let _network = lock::network(&self.cache_dir, &list.name)?;
        let mut errors = Vec::new();
        for entry in self.cached_attachments(None) {
            if entry.network != list.name {
                continue;
            }
            let stale = |error: ChainError| ChainError::Stale {
                container_id: entry.container_id.clone(),
                ifname: entry.ifname.clone(),
                error: Box::new(error),
            };
            let key = match Key::new(&entry.network, &entry.container_id, &entry.ifname) {
                Ok(key) => key,
                Err(e) => {
                    errors.push(stale(e.into()));
                    continue;
                }
            };
            // an attachment of an earlier boot has no namespace any more: gone even when
            // listed as valid, unless the network keeps an earlier boot's
            let valid = valid
                .iter()
                .any(|a| a.container_id == entry.container_id && a.ifname == entry.ifname);
            if valid && (list.keeps_earlier_boots() || !self.cache().from_earlier_boot(&key)) {
                continue;
            }
            let rt = RuntimeConf {
                container_id: entry.container_id.clone(),
                netns: entry.netns.clone(),
                ifname: entry.ifname.clone(),
                args: entry.cni_args.clone(),
                capability_args: entry.capability_args.clone(),
            };
            let outcome = lock::attachment_only(&self.cache_dir, &key)
                .map_err(ChainError::from)
                .and_then(|_attachment| self.del_locked(list, &rt, &key));
            if let Err(e) = outcome {
                errors.push(stale(e));
            }
        }
        // temp files of cache writes killed mid-way (we hold the network lock: no live writer)
        let prefix = format!("{}-", list.name);
        self.cache().remove_stale_temps(|f| f.starts_with(&prefix));
        let gc_supported = crate::cni::version::at_least(&list.cni_version, crate::cni::version::STATUS_GC_MIN);
        if gc_supported {
            let valid_json: Value = valid
                .iter()
                .map(|a| json!({"containerID": a.container_id, "ifname": a.ifname}))
                .collect();
            // Both keys: libcni sends the spec's misspelt `cni.dev/attachments` too (cni#1101).
            let extra = [
                ("cni.dev/valid-attachments", valid_json.clone()),
                ("cni.dev/attachments", valid_json),
            ];
            let inv = crate::cni::invoke::Invocation {
                command: "GC",
                path: self.cni_path(),
                ..Default::default()
            };
            for plugin in &list.plugins {
                let stdin = request::build_bare(plugin, &list.name, &list.cni_version, &extra);
                if let Err(e) = self.call(plugin, "gc", &stdin, &inv) {
                    errors.push(e);
                }
            }
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.pop().expect("one error")),
            _ => Err(ChainError::Many(errors)),
        }
    }
}
