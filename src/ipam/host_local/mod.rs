//! host-local IPAM: addresses from configured ranges, reservations kept on disk in the
//! reference's format (see [`store`]), with an owner index that makes ADD/DEL independent
//! of the number of reservations (see [`index`]).
pub mod allocator;
pub mod config;
pub mod index;
pub mod range;
pub mod range_set;
pub mod reboot;
pub mod store;

use crate::cni::error::code;
use crate::cni::result::{Dns, IpConfig};
use crate::cni::{CniResult, Error, Plugin, Request};
use crate::ipam::resolv;
use allocator::Reservations;
use config::Config;
use ipnetwork::IpNetwork;
use reboot::Boot;
use std::net::IpAddr;
use store::Store;

pub struct HostLocal;

/// The plugin config plus `CNI_ARGS`' `IP`.
fn load(req: &Request) -> Result<Config, Error> {
    let pairs = crate::cni::args::parse(&req.args, &["IP"])?;
    let env_ip = crate::cni::args::get(&pairs, "IP");
    Config::load(&req.config, env_ip).map_err(Error::internal)
}

/// The network's store, locked, with an earlier boot's reservations settled.
fn open_store(conf: &Config) -> Result<Store, Error> {
    Store::open_in_boot(&conf.data_dir, &conf.name, &Boot::current(conf.release_after_reboot)).map_err(Error::internal)
}

/// The store seen by the allocator for one owner.
struct Owned<'a> {
    store: &'a mut Store,
    id: &'a str,
    ifname: &'a str,
}

impl Reservations for Owned<'_> {
    fn reserve(&mut self, ip: IpAddr, set: usize) -> Result<bool, String> {
        self.store
            .reserve(self.id, self.ifname, ip, set)
            .map_err(|e| e.to_string())
    }
    fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        self.store.last_reserved(set)
    }
    fn held(&mut self) -> Result<Vec<IpAddr>, String> {
        self.store.held_by(self.id, self.ifname).map_err(|e| e.to_string())
    }
}

fn allocate_all(conf: &Config, req: &Request, store: &mut Store) -> Result<Vec<IpConfig>, Error> {
    let (id, ifname) = (req.container_id.as_str(), req.ifname.as_str());
    let mut requested = conf.requested.clone();
    let mut taken: Vec<IpAddr> = vec![];
    let mut ips = vec![];
    for (idx, set) in conf.ranges.iter().enumerate() {
        let wanted = requested
            .iter()
            .position(|ip| set.contains(*ip))
            .map(|i| requested.remove(i));
        let mut owned = Owned { store, id, ifname };
        match allocator::allocate(set, idx, id, wanted, &mut owned) {
            Ok(a) => {
                taken.push(a.ip);
                let address = IpNetwork::new(a.ip, a.prefix).map_err(Error::internal)?;
                ips.push(IpConfig {
                    interface: None,
                    address,
                    gateway: Some(a.gateway),
                });
            }
            Err(e) => {
                let _ = store.release_ips(id, ifname, &taken);
                return Err(Error::internal(format!("failed to allocate for range {idx}: {e}")));
            }
        }
    }
    if !requested.is_empty() {
        let _ = store.release_ips(id, ifname, &taken);
        let list: Vec<String> = requested.iter().map(|ip| ip.to_string()).collect();
        return Err(Error::internal(format!(
            "failed to allocate all requested IPs: {}",
            list.join(" ")
        )));
    }
    Ok(ips)
}

/// Any address of the set left? (existence checks from the round-robin start)
fn set_has_free(peek: &store::Peek, set: &range_set::RangeSet, idx: usize) -> bool {
    allocator::RangeIter::new(set, peek.last_reserved(idx)).any(|(ip, _)| !peek.is_taken(ip))
}

impl Plugin for HostLocal {
    fn about(&self) -> &'static str {
        concat!("host-local plugin cnibox ", env!("CARGO_PKG_VERSION"))
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let dns = match &conf.resolv_conf {
            Some(path) => resolv::read(path).map_err(Error::internal)?,
            None => Dns::default(),
        };
        let mut store = open_store(&conf)?;
        let ips = allocate_all(&conf, req, &mut store)?;
        store.finish().map_err(Error::internal)?;
        Ok(crate::ipam::result(req, ips, conf.routes, dns))
    }

    fn del(&self, req: &Request) -> Result<(), Error> {
        // releasing needs only the store: its directory, the network's name, and whether an
        // earlier boot's reservations go
        let (data_dir, name, release_after_reboot) = crate::cni::config::del_config(
            "host-local",
            || load(req).map(|c| (c.data_dir, c.name, c.release_after_reboot)),
            || config::Config::store_of(&req.config),
        );
        let boot = Boot::current(release_after_reboot);
        let mut store = Store::open_in_boot(&data_dir, &name, &boot).map_err(Error::internal)?;
        store.release(&req.container_id, &req.ifname).map_err(Error::internal)?;
        store.finish().map_err(Error::internal)
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let mut store = open_store(&conf)?;
        let found = store.find(&req.container_id, &req.ifname).map_err(Error::internal)?;
        store.finish().map_err(Error::internal)?;
        if !found {
            return Err(Error::internal(format!(
                "host-local: Failed to find address added by container {}",
                req.container_id
            )));
        }
        Ok(())
    }

    /// Ready when the network's data dir is writable and every range set has a free address
    /// (an ADD needs one address from each set).
    fn status(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        store::check_network_name(&conf.name).map_err(Error::internal)?;
        let dir = conf.data_dir.join(&conf.name);
        let unavailable = |why: String| Error::new(code::PLUGIN_NOT_AVAILABLE, why);
        std::fs::create_dir_all(&dir).map_err(|e| {
            unavailable(format!(
                "host-local: data dir {} is not writable: {}",
                dir.display(),
                crate::cni::error::go_errno_text(&e)
            ))
        })?;
        if let Err(errno) = nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK) {
            let e = std::io::Error::from(errno);
            return Err(unavailable(format!(
                "host-local: data dir {} is not writable: {}",
                dir.display(),
                crate::cni::error::go_errno_text(&e)
            )));
        }
        let mut peek = store::Peek::open(&conf.data_dir, &conf.name).map_err(|e| unavailable(e.to_string()))?;
        if !peek.settled(&Boot::current(conf.release_after_reboot)) {
            // the first call after a reboot: an earlier boot's reservations do not count
            open_store(&conf)?.finish().map_err(Error::internal)?;
            peek = store::Peek::open(&conf.data_dir, &conf.name).map_err(|e| unavailable(e.to_string()))?;
        }
        for (idx, set) in conf.ranges.iter().enumerate() {
            if !set_has_free(&peek, set, idx) {
                return Err(unavailable(format!(
                    "host-local: no IP addresses available in range set: {set}"
                )));
            }
        }
        Ok(())
    }

    /// Release every reservation whose attachment is not in `cni.dev/valid-attachments`.
    fn gc(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let Some(valid) = crate::cni::config::valid_attachments(&req.config)? else {
            // without the list nothing can be judged stale; releasing all would be a guess
            return Ok(());
        };
        let mut store = open_store(&conf)?;
        store.gc(&valid).map_err(Error::internal)?;
        store.finish().map_err(Error::internal)
    }
}
