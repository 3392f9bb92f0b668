//! The `firewall` plugin (chained after bridge, ptp, macvlan…): lets forwarded traffic of
//! the container's addresses through a host firewall that would drop it (Docker leaves
//! `iptables -P FORWARD DROP`), and optionally isolates the container's bridge from other
//! interfaces (`ingressPolicy`).
//!
//! * ADD: the addresses of `prevResult` get accept rules (backend [`iptables`], the
//!   reference's layout, written over nf_tables netlink on an iptables-nft host and with
//!   iptables-save/-restore on an iptables-legacy one, see
//!   [`iptables::nft`](crate::firewall_rules::iptables::nft); or [`nftables`], cnibox's table); a
//!   non-open ingress policy adds the bridge's isolation rules; the result is
//!   `prevResult`, unchanged. Everything is checked before anything changes.
//! * DEL: the attachment's accept rules go (iptables: found from `prevResult`'s addresses
//!   and the attachment's [`records`]; nftables: by the attachment's comment), so neither
//!   a netns nor a prevResult is needed.
//!   Shared chains and the per-bridge isolation rules stay, as in the reference. A second
//!   DEL finds nothing.
//! * CHECK: every rule ADD makes is present.
//! * GC: accept rules of the network's attachments that are not valid go (iptables: by
//!   their records, sparing addresses a valid attachment also holds; nftables: by comment).
//!
//! `backend: firewalld` is not supported (the reference talks D-Bus to firewalld): ADD and
//! CHECK fail with code 2 naming it; DEL has nothing to remove.
pub mod config;
pub mod iptables;
pub mod nftables;
pub mod records;

use crate::cni::result::CniResult;
use crate::cni::version::go_quote;
use crate::cni::{config as cniconf, Error, Plugin, Request};
use crate::firewall_rules::ipmasq::Attachment;
use crate::firewall_rules::iptables::nft::{self as iptables_nft, HostTable};
use crate::firewall_rules::iptables::save_restore::{self, Family, Script};
use config::{Backend, Conf, IngressPolicy};
use std::net::IpAddr;

pub struct Firewall;

/// The reference speaks CNI 0.4.0 and later (`VersionsStartingFrom("0.4.0")`); older
/// configs are refused by the entry point with its "incompatible CNI versions".
const VERSIONS: &[&str] = &["0.4.0", "1.0.0", "1.1.0"];

/// What ADD and CHECK act on, read and checked before anything changes.
struct Wanted {
    conf: Conf,
    prev: CniResult,
    backend: Backend,
    policy: IngressPolicy,
    bridge: Option<String>,
    addresses: Vec<IpAddr>,
}

impl Wanted {
    fn read(req: &Request) -> Result<Wanted, Error> {
        let conf = config::load(req)?;
        let prev = required_prev_result(req)?;
        let backend = conf.backend_for_setup()?;
        let policy = conf.ingress_policy()?;
        let bridge = bridge_of(&prev, policy)?;
        if backend == Backend::Iptables {
            conf.checked_admin_chain()?;
        }
        let addresses = addresses(&prev);
        Ok(Wanted {
            conf,
            prev,
            backend,
            policy,
            bridge,
            addresses,
        })
    }

    fn isolation(&self) -> Option<(&str, IngressPolicy)> {
        self.bridge.as_deref().map(|b| (b, self.policy))
    }

    fn iptables(&self) -> iptables::Setup<'_> {
        iptables::Setup {
            admin_chain: &self.conf.admin_chain,
            addresses: &self.addresses,
            isolation: self.isolation(),
        }
    }

    fn nftables<'a>(&'a self, req: &'a Request) -> nftables::Setup<'a> {
        nftables::Setup {
            attachment: attachment(req),
            addresses: &self.addresses,
            isolation: self.isolation(),
        }
    }
}

fn attachment(req: &Request) -> Attachment<'_> {
    Attachment {
        network: &req.name,
        ifname: &req.ifname,
        container_id: &req.container_id,
    }
}

impl Plugin for Firewall {
    fn about(&self) -> &'static str {
        "CNI firewall plugin (cnibox)"
    }

    fn versions(&self) -> &'static [&'static str] {
        VERSIONS
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let w = Wanted::read(req)?;
        match w.backend {
            Backend::Iptables => iptables_add_recorded(req, &w)?,
            Backend::Nftables => {
                for drop in nftables::add(&w.nftables(req))? {
                    eprintln!(
                        "cnibox firewall: warning: {drop} drops forwarded packets by policy; an accept \
                         in inet {} cannot override a drop in another table (use backend \"iptables\" \
                         on this host, or accept the container's traffic in {drop})",
                        crate::netlink::nftables::shapes::firewall::TABLE
                    );
                }
            }
        }
        Ok(w.prev)
    }

    fn del(&self, req: &Request) -> Result<(), Error> {
        // the firewall's own load refuses nothing that decodes
        let (conf, prev) = cniconf::del_config(
            "firewall",
            || Ok((config::load(req)?, prev_result_for_del(req)?)),
            || (config::Conf::default(), None),
        );
        match conf.backend_for_del() {
            // ADD never made anything for firewalld
            None => {}
            Some(Backend::Iptables) => {
                let mut doomed = prev.as_ref().map(addresses).unwrap_or_default();
                let dir = &conf.data_dir;
                let held = save_restore::lock()?;
                if let Some(r) = records::read(dir, &req.name, &req.container_id, &req.ifname) {
                    for a in r.addresses {
                        if !doomed.contains(&a) {
                            doomed.push(a);
                        }
                    }
                }
                iptables_del(&held, &doomed)?;
                records::remove(&held, dir, &req.name, &req.container_id, &req.ifname)
                    .map_err(|e| Error::internal(format!("remove the record in {}: {e}", dir.display())))?;
            }
            Some(Backend::Nftables) => nftables::del(attachment(req))?,
        }
        // the reference's last step, where an unknown policy fails its DEL for ever; here
        // it is only reported
        if let Err(e) = conf.ingress_policy() {
            eprintln!("cnibox firewall: DEL: {}", e.msg);
        }
        Ok(())
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let w = Wanted::read(req)?;
        match w.backend {
            Backend::Iptables => iptables_check(&w.iptables()),
            Backend::Nftables => nftables::check(&w.nftables(req)),
        }
    }

    fn gc(&self, req: &Request) -> Result<(), Error> {
        let conf = config::load(req)?;
        match (conf.backend_for_del(), cniconf::valid_attachments(&req.config)?) {
            (Some(Backend::Nftables), Some(valid)) => nftables::gc(&req.name, &valid),
            (Some(Backend::Iptables), Some(valid)) => iptables_gc(&conf, &req.name, &valid),
            _ => Ok(()),
        }
    }
}

fn required_prev_result(req: &Request) -> Result<CniResult, Error> {
    prev_result(req)?.ok_or_else(|| Error::internal("missing prevResult from earlier plugin"))
}

/// prevResult, with the reference's message: its parseConf wraps `ParsePrevResult`'s own
/// "could not parse prevResult" once more.
fn prev_result(req: &Request) -> Result<Option<CniResult>, Error> {
    cniconf::prev_result(req).map_err(|e| e.context("could not parse prevResult"))
}

/// DEL's prevResult: a result of another version than the config's (a runtime upgraded
/// between ADD and DEL) still names the addresses, so it is read in its own version rather
/// than failing the DEL as the reference does.
fn prev_result_for_del(req: &Request) -> Result<Option<CniResult>, Error> {
    match prev_result(req) {
        Ok(p) => Ok(p),
        Err(strict) => cniconf::prev_result_in_its_own_version(req).map(Some).ok_or(strict),
    }
}

// No `BTreeSet`s of addresses or families here: their code cost ~3 KB of the binary, and a
// result's few addresses are searched as quickly in a `Vec`.

/// The container's addresses, each once, in prevResult order.
fn addresses(prev: &CniResult) -> Vec<IpAddr> {
    let mut unique = Vec::new();
    for ip in prev.ips.iter().map(|c| c.address.ip()) {
        if !unique.contains(&ip) {
            unique.push(ip);
        }
    }
    unique
}

/// The families that have addresses (the reference's `findProtos`), IPv4 first: no
/// address, no process.
fn families(addresses: &[IpAddr]) -> Vec<Family> {
    [Family::V4, Family::V6]
        .into_iter()
        .filter(|f| addresses.iter().any(|ip| Family::of(*ip) == *f))
        .collect()
}

fn of_family(addresses: &[IpAddr], family: Family) -> Vec<IpAddr> {
    addresses
        .iter()
        .copied()
        .filter(|ip| Family::of(*ip) == family)
        .collect()
}

/// The bridge a non-open policy isolates: the first interface of prevResult (the bridge
/// plugin reports its bridge first), checked before anything changes.
fn bridge_of(prev: &CniResult, policy: IngressPolicy) -> Result<Option<String>, Error> {
    if policy == IngressPolicy::Open {
        return Ok(None);
    }
    let Some(first) = prev.interfaces.first() else {
        return Err(Error::internal(format!(
            "interface needs to be set for ingress policy {}, make sure to chain \"firewall\" plugin with \"bridge\"",
            go_quote(policy.name())
        )));
    };
    let name = &first.name;
    if name.is_empty() {
        return Err(Error::internal("got empty bridge name"));
    }
    // the name goes into rules: it must be one the kernel could have given a link
    if name.len() > 15
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "/:\"'\\".contains(c))
    {
        return Err(Error::internal(format!(
            "invalid bridge name {} in prevResult",
            go_quote(name)
        )));
    }
    Ok(Some(name.clone()))
}

/// The iptables ADD with its record. Recorded first, with the addresses an earlier ADD of
/// the attachment recorded (its rules stay): a DEL after a crash mid-ADD still finds every
/// address. A failed ADD whose rules were all undone puts back what was recorded before; one
/// whose undo failed keeps the record, so DEL and GC can still find the rules. Records and
/// rules change under the xtables lock: a DEL removing a network's last record (and its
/// directory) never runs between this ADD making the directory and writing the record.
fn iptables_add_recorded(req: &Request, w: &Wanted) -> Result<(), Error> {
    let dir = &w.conf.data_dir;
    let held = save_restore::lock()?;
    let earlier = records::read(dir, &req.name, &req.container_id, &req.ifname);
    let mut addresses = earlier.as_ref().map(|r| r.addresses.clone()).unwrap_or_default();
    for a in &w.addresses {
        if !addresses.contains(a) {
            addresses.push(*a);
        }
    }
    let record = records::Record {
        container_id: req.container_id.clone(),
        ifname: req.ifname.clone(),
        addresses,
    };
    records::write(&held, dir, &req.name, &record)
        .map_err(|e| Error::internal(format!("record the addresses in {}: {e}", dir.display())))?;
    let Err(failed) = iptables_add(&held, &w.iptables()) else {
        return Ok(());
    };
    if failed.undone {
        let put_back = match &earlier {
            Some(r) => records::write(&held, dir, &req.name, r),
            None => records::remove(&held, dir, &req.name, &req.container_id, &req.ifname),
        };
        if let Err(e) = put_back {
            eprintln!("cnibox firewall: restoring the record in {}: {e}", dir.display());
        }
    } else {
        eprintln!("cnibox firewall: ADD failed and its rules stay; the record keeps them for DEL and GC");
    }
    Err(failed.error)
}

/// A failed [`iptables_add`]: its error, and whether every rule it made is gone again.
struct AddFailed {
    error: Error,
    undone: bool,
}

impl<E: Into<Error>> From<E> for AddFailed {
    /// A failure before any change: nothing to undo.
    fn from(e: E) -> Self {
        AddFailed {
            error: e.into(),
            undone: true,
        }
    }
}

/// One change per family (an nf_tables transaction on an iptables-nft host, an
/// iptables-restore on an iptables-legacy one: each all or nothing); a family that fails
/// undoes the families already changed. Under the xtables lock (`_held`).
fn iptables_add(_held: &save_restore::Lock, setup: &iptables::Setup) -> Result<(), AddFailed> {
    let families = families(setup.addresses);
    if families.is_empty() {
        return Ok(());
    }
    let mut applied: Vec<(Family, Script)> = vec![];
    for family in families {
        let addresses = of_family(setup.addresses, family);
        let step = iptables_nft::change(family, iptables::TABLE, |table| {
            iptables::plan_add(
                table,
                &iptables::Setup {
                    addresses: &addresses,
                    ..*setup
                },
            )
        });
        match step {
            Ok(script) => applied.push((family, script)),
            Err(e) => {
                let mut undone = true;
                for (family, script) in applied.iter().rev() {
                    // on a new read: the undo deletes rules the first read did not see
                    if let Err(u) = iptables_nft::change(*family, iptables::TABLE, |_| script.undo()) {
                        eprintln!("cnibox firewall: undoing {} rules: {u}", family.tool());
                        undone = false;
                    }
                }
                return Err(AddFailed {
                    error: e.into(),
                    undone,
                });
            }
        }
    }
    Ok(())
}

/// Under the xtables lock (`_held`).
fn iptables_del(_held: &save_restore::Lock, addresses: &[IpAddr]) -> Result<(), Error> {
    let families = families(addresses);
    if families.is_empty() {
        return Ok(());
    }
    let mut first = None;
    for family in families {
        let doomed = of_family(addresses, family);
        // a family whose CNI-FORWARD provably does not exist has nothing to delete: no
        // process, and on the netlink path the one read that would plan the change tells
        let step = iptables_nft::change_where_chain(family, iptables::TABLE, iptables::PRIV_CHAIN, |table| {
            iptables::plan_del(table, &doomed)
        });
        if let Err(e) = step {
            eprintln!("cnibox firewall: DEL: {e}");
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), |e| Err(e.into()))
}

/// The recorded attachments of `network` that are not valid lose their rules (except for
/// addresses a valid attachment holds too) and their records.
fn iptables_gc(conf: &Conf, network: &str, valid: &[(String, String)]) -> Result<(), Error> {
    let lock = save_restore::lock()?;
    let (keep, gone): (Vec<_>, Vec<_>) = records::all(&conf.data_dir, network)
        .into_iter()
        .partition(|r| valid.iter().any(|(c, i)| *c == r.container_id && *i == r.ifname));
    // sorted `Vec`s (see `addresses`): a network's records can hold many addresses
    let mut held: Vec<IpAddr> = keep.iter().flat_map(|r| r.addresses.iter().copied()).collect();
    crate::util::sort::sort(&mut held);
    let mut doomed: Vec<IpAddr> = gone
        .iter()
        .flat_map(|r| r.addresses.iter().copied())
        .filter(|a| held.binary_search(a).is_err())
        .collect();
    crate::util::sort::sort(&mut doomed);
    doomed.dedup();
    iptables_del(&lock, &doomed)?;
    for r in gone {
        records::remove(&lock, &conf.data_dir, network, &r.container_id, &r.ifname)
            .map_err(|e| Error::internal(format!("remove the record in {}: {e}", conf.data_dir.display())))?;
    }
    Ok(())
}

fn iptables_check(setup: &iptables::Setup) -> Result<(), Error> {
    for family in families(setup.addresses) {
        let addresses = of_family(setup.addresses, family);
        let table = HostTable::read(family, iptables::TABLE)?;
        iptables::check(
            table.saved(),
            &iptables::Setup {
                addresses: &addresses,
                ..*setup
            },
        )
        .map_err(Error::internal)?;
    }
    Ok(())
}
