//! The `host-device` plugin: moves an existing host link (chosen by name, MAC, kernel device
//! path, PCI address, or the runtime's `deviceID`) into the container under `CNI_IFNAME`,
//! optionally with IPAM addresses; DEL moves it back under its own name, with the MTU and
//! the up state it had.
//!
//! The link's host name travels with it as its alias (IFLA_IFALIAS), as in the reference, so
//! either implementation's DEL undoes the other's ADD; `saved` keeps the MTU and state too.
//! The move is one request (`ip link set … netns … name …`): the kernel moves the link and
//! renames it inside the target namespace, so the link is never renamed where anyone else
//! looks (udev, NetworkManager) and is always in the host or in the container, never in a
//! temporary namespace a crash would destroy it with (the reference moves it through one).
//!
//! When the container namespace dies first, the kernel destroys a virtual link moved into it
//! (a veth end, a tap) and gives a physical one back to the initial namespace under its
//! container name (or `dev<N>`), still carrying the alias. DEL succeeds in both cases and in
//! the second renames the link back and restores it, finding it by its alias.
mod config;
mod saved;
mod sysfs;

use crate::cni::netaddr::parse_mac;
use crate::cni::result::Interface;
use crate::cni::version::go_quote;
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::netlink::{Handle, Link};
use crate::netns::Netns;
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::teardown::Teardown;
use crate::plugin_kit::{check_preamble, iface, ipam_delegation, netns_open};
use config::{Conf, Selector};
use saved::Saved;
use std::path::Path;
use sysfs::Sysfs;

pub struct HostDevice;

impl Plugin for HostDevice {
    fn about(&self) -> &'static str {
        "CNI host-device plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let sysfs = Sysfs::system();
        let conf = config::load(req, &sysfs)?;
        let spaces = Spaces::open(req)?;
        let record = saved::file(&conf.keys.data_dir, &req.container_id, &req.ifname);
        let mut rollback = Rollback::new();
        let mut result = CniResult {
            cni_version: req.cni_version.clone(),
            interfaces: vec![Interface {
                name: req.ifname.clone(),
                sandbox: Some(req.netns.clone()),
                ..Default::default()
            }],
            ..Default::default()
        };
        if !conf.dpdk {
            let selector = conf.selector.as_ref().expect("load names a link");
            let dev =
                find_host_link(&spaces.host, &sysfs, selector).map_err(|e| e.context("failed to find host device"))?;
            let link = spaces
                .move_in(&dev, &req.ifname, &record, &mut rollback)
                .map_err(|e| Error::internal(format!("failed to move link {}", e.msg)))?;
            result.interfaces[0].name = link.name;
            result.interfaces[0].mac = link.mac.map(|m| m.to_string());
        }
        if let Some(ipam_type) = &conf.keys.ipam_type {
            result = iface::with_addresses(result, ipam_delegation::add(ipam_type, req, &mut rollback)?);
            if !conf.dpdk {
                iface::configure(&spaces.cont_ns, &spaces.cont, &req.ifname, &result)?;
            }
            // the config's DNS replaces IPAM's, even when empty, as in the reference
            result.dns = conf.keys.dns.clone();
        }
        // An L2 result cannot be printed for 0.1.0/0.2.0: fail while the rollback can still
        // move the link back (the reference leaves it in the container).
        result.to_json(&req.cni_version)?;
        rollback.commit();
        Ok(result)
    }

    /// Moves the link back (or, when its namespace died and the kernel gave it back,
    /// renames it), restores its MTU and state, releases IPAM. Success when the link is gone.
    fn del(&self, req: &Request) -> Result<(), Error> {
        let sysfs = Sysfs::system();
        let conf = config::load_for_del(req, &sysfs);
        let mut teardown = Teardown::new("host-device");
        // Released after the link left the container (its addresses went with the move);
        // a dhcp lease before, through the link
        ipam_delegation::del_with_interface(&mut teardown, conf.keys.ipam_type.as_deref(), req, |t| {
            if !conf.dpdk {
                t.step(move_out(req, &conf, &sysfs));
            }
        });
        teardown.finish()
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = config::load(req, &Sysfs::system())?;
        let ns = netns_open::container(&req.netns)?;
        if let Some(t) = &conf.keys.ipam_type {
            delegate::check(t, req)?;
        }
        let prev = check_preamble::prev_result(req, "Required prevResult missing")?;
        if conf.dpdk {
            return Ok(());
        }
        let intf = check_preamble::container_entry(req, &prev);
        check_preamble::check_sandbox(req, &intf)?;
        let cont = Handle::open(&ns)?;
        CONTAINER_LINK.check_configured(&cont, &intf, &req.ifname, &prev, |_| Ok(()))
    }

    fn status(&self, req: &Request) -> Result<(), Error> {
        ipam_delegation::status(req)
    }

    /// Nothing of its own outlives DEL; IPAM gets the GC (the spec asks to forward it).
    fn gc(&self, req: &Request) -> Result<(), Error> {
        ipam_delegation::gc_addresses(req)
    }
}

/// CHECK of the container interface: any kind of link (it is whatever the host had).
const CONTAINER_LINK: check_preamble::ContainerLink = check_preamble::ContainerLink {
    prefix: "",
    kind: "",
    kind_word: "",
};

/// The host link the selector names, or the reference's error.
fn find_host_link(host: &Handle, sysfs: &Sysfs, selector: &Selector) -> Result<Link, Error> {
    let by_name = |name: &str| -> Result<Link, Error> {
        host.link_by_name(name)?
            .ok_or_else(|| Error::internal("Link not found"))
    };
    match selector {
        Selector::Device(name) => by_name(name),
        Selector::HwAddr(text) => {
            let mac = parse_mac(text)
                .map_err(|e| Error::internal(format!("failed to parse MAC address {}: {e}", go_quote(text))))?;
            let links = host
                .links()
                .map_err(|e| Error::internal(format!("failed to list node links: {e}")))?;
            links
                .into_iter()
                .find(|l| l.mac.is_some_and(|m| m.0[..] == mac[..]))
                .ok_or_else(|| Error::internal("failed to find physical interface"))
        }
        Selector::KernelPath(path) => by_name(&sysfs.kernelpath_device(path).map_err(Error::internal)?),
        Selector::Pci(pci) => by_name(&sysfs.pci_device(pci).map_err(Error::internal)?),
        Selector::Auxiliary(aux) => by_name(&sysfs.auxiliary_device(aux).map_err(Error::internal)?),
    }
}

/// The two namespaces of a call, with a handle in each.
struct Spaces {
    host_ns: Netns,
    host: Handle,
    cont_ns: Netns,
    cont: Handle,
}

impl Spaces {
    fn open(req: &Request) -> Result<Spaces, Error> {
        let cont_ns = netns_open::container(&req.netns)?;
        Ok(Spaces {
            host_ns: Netns::current()?,
            host: Handle::current()?,
            cont: Handle::open(&cont_ns)?,
            cont_ns,
        })
    }

    /// Records the link, names it as its own alias, moves it into the container as `ifname`
    /// and sets it up. The rollback moves it back wherever a failure left it.
    fn move_in<'a>(
        &'a self,
        dev: &Link,
        ifname: &'a str,
        record: &'a Path,
        rollback: &mut Rollback<'a>,
    ) -> Result<Link, Error> {
        let orig = dev.name.as_str();
        let to_container = |why: &dyn std::fmt::Display| {
            Error::internal(format!(
                "failed to move {} (host: {}) to container NS: {why}",
                go_quote(ifname),
                go_quote(orig)
            ))
        };
        // Checked first: the kernel would move the link and then fail the rename.
        if self.cont.link_by_name(ifname)?.is_some() {
            return Err(to_container(&"file exists"));
        }
        let saved = Saved::of(dev);
        saved::write(record, &saved)
            .map_err(|e| Error::internal(format!("failed to record {}: {e}", go_quote(orig))))?;
        rollback.push(format!("remove {}", record.display()), move || saved::remove(record));
        self.host
            .set_alias(dev.index, orig)
            .map_err(|e| Error::internal(format!("failed to set alias to {}: {e}", go_quote(orig))))?;
        rollback.push(format!("move {orig} back to the host"), move || {
            self.put_back(&saved).map_err(|e| e.msg)
        });
        self.host
            .move_and_rename(dev.index, &self.cont_ns, ifname)
            .map_err(|e| to_container(&e))?;
        let link = self
            .cont
            .link(ifname)
            .map_err(|e| Error::internal(format!("failed to find {} in container NS: {e}", go_quote(ifname))))?;
        self.cont
            .set_up(link.index)
            .map_err(|e| Error::internal(format!("failed to set {} up: {e}", go_quote(ifname))))?;
        Ok(link)
    }

    /// Undoes a `move_in` that stopped anywhere: the link (found in the container by its
    /// alias, under whichever name) goes back under its own name, then is restored.
    fn put_back(&self, saved: &Saved) -> Result<(), Error> {
        let in_container = self
            .cont
            .links()?
            .into_iter()
            .find(|l| l.alias.as_deref() == Some(saved.name.as_str()));
        if let Some(l) = in_container {
            self.cont.move_and_rename(l.index, &self.host_ns, &saved.name)?;
        }
        restore(&self.host, &saved.name, Some(saved))
    }
}

/// DEL's move: the link named `CNI_IFNAME` in the container goes back to the host under the
/// name its alias (or the record) gives; a link that is not in the container may have been
/// given back by the kernel (see the module doc) and is renamed back where it is.
fn move_out(req: &Request, conf: &Conf, sysfs: &Sysfs) -> Result<(), Error> {
    let record = saved::file(&conf.keys.data_dir, &req.container_id, &req.ifname);
    let saved = saved::read(&record);
    let host = Handle::current()?;
    let ns = netns_open::open_for_del(&req.netns)?;
    let in_container = match &ns {
        Some(ns) => {
            let cont = Handle::open(ns)?;
            cont.link_by_name(&req.ifname)?.map(|l| (cont, l))
        }
        None => None,
    };
    if let Some((cont, link)) = in_container {
        let Some(name) = link.alias.clone().or_else(|| saved.as_ref().map(|s| s.name.clone())) else {
            // Every host-device ADD (the reference's too) sets the alias: another plugin's.
            eprintln!(
                "cnibox host-device: DEL: {} in {} has no alias: not a link host-device moved in; left alone",
                req.ifname, req.netns
            );
            return saved::remove(&record).map_err(Error::internal);
        };
        let to_host = |why: &dyn std::fmt::Display| {
            Error::internal(format!("failed to move {} to hostNS: {why}", go_quote(&name)))
        };
        if host.link_by_name(&name)?.is_some() {
            return Err(to_host(&"file exists"));
        }
        cont.move_and_rename(link.index, &Netns::current()?, &name)
            .map_err(|e| to_host(&e))?;
        restore(&host, &name, saved.as_ref())?;
        return saved::remove(&record).map_err(Error::internal);
    }
    if let Some(link) = returned_link(&host, sysfs, conf, saved.as_ref())? {
        let name = link.alias.clone().unwrap_or_default();
        if link.name != name {
            host.set_name(link.index, &name).map_err(|e| {
                Error::internal(format!(
                    "failed to rename {} back to {}: {e}",
                    go_quote(&link.name),
                    go_quote(&name)
                ))
            })?;
        }
        restore(&host, &name, saved.as_ref())?;
    }
    // After DEL the runtime forgets the attachment: a record kept now would never be read.
    saved::remove(&record).map_err(Error::internal)
}

/// A link of the host namespace that carries the alias ADD gave it although it is not in
/// the container: found by the recorded or configured name, else through the selector.
fn returned_link(host: &Handle, sysfs: &Sysfs, conf: &Conf, saved: Option<&Saved>) -> Result<Option<Link>, Error> {
    let known_name = saved.map(|s| s.name.clone()).or(match &conf.selector {
        Some(Selector::Device(d)) => Some(d.clone()),
        _ => None,
    });
    if let Some(name) = known_name {
        return Ok(host
            .links()?
            .into_iter()
            .find(|l| l.alias.as_deref() == Some(name.as_str())));
    }
    let by_name = |name: Result<String, String>| -> Result<Option<Link>, Error> {
        match name {
            Ok(n) => Ok(host.link_by_name(&n)?),
            Err(_) => Ok(None),
        }
    };
    let found = match &conf.selector {
        Some(Selector::HwAddr(text)) => match parse_mac(text) {
            Ok(mac) => host
                .links()?
                .into_iter()
                .find(|l| l.mac.is_some_and(|m| m.0[..] == mac[..])),
            Err(_) => None,
        },
        Some(Selector::KernelPath(p)) => by_name(sysfs.kernelpath_device(p))?,
        Some(Selector::Pci(p)) => by_name(sysfs.pci_device(p))?,
        Some(Selector::Auxiliary(a)) => by_name(sysfs.auxiliary_device(a))?,
        Some(Selector::Device(_)) | None => None,
    };
    Ok(found.filter(|l| l.alias.is_some()))
}

/// The link back in the host as `name`: the recorded MTU and up state (when the record is
/// this link's), then the alias removed (last: until then a retried DEL finds it by it).
fn restore(host: &Handle, name: &str, saved: Option<&Saved>) -> Result<(), Error> {
    let link = host.link(name)?;
    if let Some(s) = saved.filter(|s| s.name == name) {
        if link.mtu != s.mtu {
            host.set_mtu(link.index, s.mtu)?;
        }
        if s.up && !link.up {
            host.set_up(link.index)?;
        }
    }
    if link.alias.is_some() {
        host.set_alias(link.index, "")?;
    }
    Ok(())
}
