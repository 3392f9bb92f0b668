//! A link stacked on a lower link, the "master" (macvlan, ipvlan, vlan): the call's two namespaces, the master resolved in the one it lives in, the MTU
//! bound it sets, and the stacked link created in the container namespace.
//!
//! The link is born in the container namespace under a temporary name and renamed there,
//! so a name that exists on the host never clashes and a name that exists in the
//! container is a clean error. With `linkInContainer` the master itself lives in the
//! container namespace and the link is created there.
use super::rollback::Rollback;
use super::{kernel_support, netns_open};
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::result::Dns;
use crate::cni::{Error, Request};
use crate::netlink::{self, Family, Handle, Link, LinkKind, LinkSpec, MacAddr, Transport, TABLE_MAIN};
use crate::netns::Netns;

/// How the reference's stacked-link plugins word a config they cannot decode.
const LOAD_CONTEXT: &str = "failed to load netconf";

/// The keys every plugin that stacks a link on a master reads alike (macvlan, ipvlan,
/// vlan), after the `types.NetConf` they all embed; a plugin reads its own keys with
/// [`own_str`] and [`own_int`].
pub struct MasterConf {
    /// `master`; empty counts as absent.
    pub master: Option<String>,
    pub mtu: i64,
    /// `linkInContainer`: the master lives in the container namespace.
    pub link_in_container: bool,
    /// None: no `ipam` or an empty type.
    pub ipam_type: Option<String>,
    pub dns: Dns,
}

impl MasterConf {
    pub fn load(req: &Request) -> Result<MasterConf, Error> {
        let ctx = |e: Error| e.context(LOAD_CONTEXT);
        cniconf::check_net_conf(&req.config, "NetConf").map_err(ctx)?;
        let obj = json::as_object(&req.config, "NetConf").map_err(ctx)?;
        Ok(MasterConf {
            master: own_str(req, "master")?.filter(|m| !m.is_empty()),
            mtu: own_int(req, "mtu")?,
            link_in_container: json::opt_bool(&obj, "linkInContainer", "NetConf.linkInContainer")
                .map_err(ctx)?
                .unwrap_or(false),
            ipam_type: cniconf::ipam_type(&req.config).map_err(ctx)?,
            dns: cniconf::dns(&req.config).map_err(ctx)?,
        })
    }
}

/// A string key of the plugin's `NetConf` (`mode`).
pub fn own_str(req: &Request, key: &str) -> Result<Option<String>, Error> {
    let obj = json::as_object(&req.config, "NetConf").map_err(|e| e.context(LOAD_CONTEXT))?;
    Ok(json::opt_str(&obj, key, &format!("NetConf.{key}"))
        .map_err(|e| e.context(LOAD_CONTEXT))?
        .map(str::to_string))
}

/// An `int` key of the plugin's `NetConf` (`vlanId`); 0 when absent.
pub fn own_int(req: &Request, key: &str) -> Result<i64, Error> {
    let obj = json::as_object(&req.config, "NetConf").map_err(|e| e.context(LOAD_CONTEXT))?;
    Ok(json::opt_int(&obj, key, &format!("NetConf.{key}"))
        .map_err(|e| e.context(LOAD_CONTEXT))?
        .unwrap_or(0))
}

/// The two namespaces of a call, and which of them holds the master.
pub struct Namespaces {
    pub ns: Netns,
    pub host: Handle,
    pub cont: Handle,
    /// `linkInContainer`: the master is in the container namespace.
    pub link_in_container: bool,
}

impl Namespaces {
    pub fn open(req: &Request, link_in_container: bool) -> Result<Namespaces, Error> {
        let ns = netns_open::container(&req.netns)?;
        let host = Handle::current()?;
        let cont = Handle::open(&ns)?;
        Ok(Namespaces {
            ns,
            host,
            cont,
            link_in_container,
        })
    }

    /// Where the master lives (and the stacked link is created).
    pub fn master_side(&self) -> &Handle {
        if self.link_in_container {
            &self.cont
        } else {
            &self.host
        }
    }

    /// The master in the namespace it lives in: `configured`, else the interface of the
    /// first default route of the main table.
    pub fn master(&self, configured: Option<&str>) -> Result<Link, Error> {
        let h = self.master_side();
        let name = match configured {
            Some(m) => m.to_string(),
            None => default_route_interface(h)?,
        };
        h.link_by_name(&name)?
            .ok_or_else(|| Error::internal(format!("failed to lookup master {name:?}: Link not found")))
    }

    /// Creates a link of `kind` on `master` in the container namespace under a temporary
    /// name (`tmp_prefix` and random digits) and renames it to `ifname` there; on a failed
    /// rename the link is deleted before returning.
    pub fn create_on_master(&self, stacked: Stacked<'_>, ifname: &str) -> Result<Link, Error> {
        // created inside the container when the master is there
        let born_in = (!self.link_in_container).then_some(&self.ns);
        create_stacked(self.master_side(), &self.cont, born_in, stacked, ifname)
    }

    /// [`create_on_master`](Self::create_on_master), the link deleted again by `rollback`
    /// if the ADD fails later.
    pub fn create_undone_on_failure<'a>(
        &'a self,
        stacked: Stacked<'_>,
        ifname: &str,
        rollback: &mut Rollback<'a>,
    ) -> Result<Link, Error> {
        let word = stacked.kind.name().to_string();
        let link = self.create_on_master(stacked, ifname)?;
        let index = link.index;
        rollback.push(format!("delete {word} {ifname}"), move || {
            self.cont.remove_link(index).map(drop).map_err(|e| e.to_string())
        });
        Ok(link)
    }
}

/// [`Namespaces::create_on_master`]'s steps on any transport: create on `master_side` (born
/// in `born_in` when that is another namespace), rename in `cont`. A kernel without the
/// kind fails with [`kernel_support::missing_kind`]'s message.
pub fn create_stacked<T: Transport>(
    master_side: &Handle<T>,
    cont: &Handle<T>,
    born_in: Option<&Netns>,
    stacked: Stacked<'_>,
    ifname: &str,
) -> Result<Link, Error> {
    let word = stacked.kind.name().to_string();
    let tmp = netlink::random_name(stacked.tmp_prefix)
        .map_err(|e| Error::internal(format!("failed to generate a temporary link name: {e}")))?;
    let spec = LinkSpec {
        lower: Some(stacked.master.index),
        netns: born_in,
        mtu: stacked.mtu,
        mac: stacked.mac,
        ..LinkSpec::new(&tmp, stacked.kind.clone())
    };
    master_side.create_link(&spec).map_err(|e| {
        kernel_support::create_error(&stacked.kind, e, |e| {
            Error::internal(format!("failed to create {word}: {e}"))
        })
    })?;
    let created = cont.link(tmp.as_str())?;
    if let Err(e) = cont.set_name(created.index, ifname) {
        if let Err(d) = cont.delete_link(created.index) {
            eprintln!("cnibox {word}: cleanup after failed rename: {d}");
        }
        return Err(Error::internal(format!("failed to rename {word} to {ifname:?}: {e}")));
    }
    cont.link(created.index)
        .map_err(|e| Error::internal(format!("failed to refetch {word} {ifname:?}: {e}")))
}

/// A link to stack on a master: its kind with the kind's data, and what the config sets.
pub struct Stacked<'a> {
    pub kind: LinkKind,
    pub master: &'a Link,
    /// Validated against the master's with [`check_mtu`].
    pub mtu: Option<u32>,
    pub mac: Option<MacAddr>,
    /// The temporary name's prefix (`mvtmp` for macvlan): with 8 hex digits at most 15 bytes.
    pub tmp_prefix: &'a str,
}

fn default_route_interface(h: &Handle) -> Result<String, Error> {
    let default = h
        .routes(Family::All)?
        .into_iter()
        .find(|r| r.table == TABLE_MAIN && r.dst.prefix() == 0 && r.oif.is_some());
    match default.and_then(|r| r.oif) {
        Some(oif) => Ok(h.link(oif)?.name),
        None => Err(Error::internal("no default route interface found")),
    }
}

/// The configured MTU is 0 (the master's) or at most the master's.
pub fn check_mtu(mtu: i64, master: &Link) -> Result<(), Error> {
    if mtu < 0 || mtu > i64::from(master.mtu) {
        return Err(Error::internal(format!(
            "invalid MTU {mtu}, must be [0, master MTU({})]",
            master.mtu
        )));
    }
    Ok(())
}
