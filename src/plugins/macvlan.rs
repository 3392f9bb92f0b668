//! The `macvlan` plugin: a macvlan link on a host interface (the "master"), moved into
//! the container, with or without IPAM addresses.
//!
//! The link is born in the container namespace under a temporary name and renamed there,
//! so a name that exists on the host never clashes and a name that exists in the
//! container is a clean error. With `linkInContainer` the master itself lives in the
//! container namespace and the link is created there.
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::result::{Dns, Interface};
use crate::cni::version::go_quote;
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::netlink::{self, Family, Handle, Link, MacAddr, MacvlanMode, MacvlanSpec, TABLE_MAIN};
use crate::netns::Netns;
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::teardown::Teardown;
use crate::plugin_kit::{check_preamble, container_link, iface, ipam_delegation, netns_open};
use crate::sysctl;

pub struct Macvlan;

/// The plugin's config keys, as written (the master is resolved against a namespace later).
struct Conf {
    master: Option<String>,
    mode: String,
    mtu: i64,
    link_in_container: bool,
    bcqueuelen: Option<u32>,
    /// None: L2 only (no `ipam` or an empty type).
    ipam_type: Option<String>,
    dns: Dns,
}

fn load(req: &Request) -> Result<Conf, Error> {
    let ctx = "failed to load netconf";
    let obj = json::as_object(&req.config, "NetConf").map_err(|e| e.context(ctx))?;
    let s = |key: &str| -> Result<Option<String>, Error> {
        Ok(json::opt_str(&obj, key, &format!("NetConf.{key}"))
            .map_err(|e| e.context(ctx))?
            .map(str::to_string))
    };
    Ok(Conf {
        master: s("master")?.filter(|m| !m.is_empty()),
        mode: s("mode")?.unwrap_or_default(),
        mtu: json::opt_int(&obj, "mtu", "NetConf.mtu")
            .map_err(|e| e.context(ctx))?
            .unwrap_or(0),
        link_in_container: json::opt_bool(&obj, "linkInContainer", "NetConf.linkInContainer")
            .map_err(|e| e.context(ctx))?
            .unwrap_or(false),
        bcqueuelen: json::opt_uint::<u32>(&obj, "bcqueuelen", "NetConf.bcqueuelen")
            .map_err(|e| e.context(ctx))?
            .filter(|n| *n > 0),
        ipam_type: cniconf::ipam_type(&req.config).map_err(|e| e.context(ctx))?,
        dns: cniconf::dns(&req.config).map_err(|e| e.context(ctx))?,
    })
}

/// The config's mode; `""` means bridge. `source` is a kernel mode the config does not offer.
fn parse_mode(s: &str) -> Result<MacvlanMode, Error> {
    match s {
        "" | "bridge" => Ok(MacvlanMode::Bridge),
        "private" => Ok(MacvlanMode::Private),
        "vepa" => Ok(MacvlanMode::Vepa),
        "passthru" => Ok(MacvlanMode::Passthru),
        other => Err(Error::internal(format!("unknown macvlan mode: {}", go_quote(other)))),
    }
}

/// The requested MAC (config < CNI_ARGS `MAC` < runtimeConfig.mac), parsed.
fn requested_mac(req: &Request) -> Result<Option<MacAddr>, Error> {
    match cniconf::macvlan_requested_mac(req)? {
        None => Ok(None),
        Some(s) => s.parse().map(Some).map_err(|_| {
            Error::internal(format!(
                "invalid args {s} for MAC addr: address {s}: invalid MAC address"
            ))
        }),
    }
}

/// The master link in the namespace of `h`: as configured, else the interface of the
/// first default route of the main table.
fn resolve_master(h: &Handle, conf: &Conf) -> Result<Link, Error> {
    let name = match &conf.master {
        Some(m) => m.clone(),
        None => default_route_interface(h)?,
    };
    h.link_by_name(&name)?
        .ok_or_else(|| Error::internal(format!("failed to lookup master {name:?}: Link not found")))
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

fn check_mtu(mtu: i64, master: &Link) -> Result<(), Error> {
    if mtu < 0 || mtu > i64::from(master.mtu) {
        return Err(Error::internal(format!(
            "invalid MTU {mtu}, must be [0, master MTU({})]",
            master.mtu
        )));
    }
    Ok(())
}

/// The two namespaces of a call and the master resolved in the right one.
struct Namespaces {
    ns: Netns,
    host: Handle,
    cont: Handle,
}

impl Namespaces {
    fn open(req: &Request) -> Result<Namespaces, Error> {
        let ns = netns_open::container(&req.netns)?;
        let host = Handle::current()?;
        let cont = Handle::open(&ns)?;
        Ok(Namespaces { ns, host, cont })
    }

    /// Where the master lives (and the macvlan is created).
    fn master_side(&self, conf: &Conf) -> &Handle {
        if conf.link_in_container {
            &self.cont
        } else {
            &self.host
        }
    }
}

impl Plugin for Macvlan {
    fn about(&self) -> &'static str {
        "CNI macvlan plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let spaces = Namespaces::open(req)?;
        let master = resolve_master(spaces.master_side(&conf), &conf)?;
        check_mtu(conf.mtu, &master)?;
        let mac = requested_mac(req)?;
        let mode = parse_mode(&conf.mode)?;
        let mut rollback = Rollback::new();

        let link = create(&spaces, &conf, req, &master, mode, mac)?;
        let cont = &spaces.cont;
        let index = link.index;
        rollback.push(format!("delete macvlan {}", req.ifname), move || {
            cont.remove_link(index).map(drop).map_err(|e| e.to_string())
        });

        let mut result = CniResult {
            cni_version: req.cni_version.clone(),
            interfaces: vec![Interface {
                name: req.ifname.clone(),
                mac: link.mac.map(|m| m.to_string()),
                sandbox: Some(req.netns.clone()),
                ..Default::default()
            }],
            ..Default::default()
        };
        match &conf.ipam_type {
            Some(ipam_type) => {
                let ipam = ipam_delegation::add(ipam_type, req, &mut rollback)?;
                result.ips = ipam.ips;
                result.routes = ipam.routes;
                for ip in &mut result.ips {
                    ip.interface = Some(0);
                }
                // Announce the (possibly reused) address at once; best effort as in the reference.
                for key in [
                    sysctl::ipv4_conf(&req.ifname, "arp_notify"),
                    sysctl::ipv6_conf(&req.ifname, "ndisc_notify"),
                ] {
                    if let Err(e) = sysctl::set_in(&spaces.ns, &key, "1") {
                        eprintln!("cnibox macvlan: {e}");
                    }
                }
                // A macvlan shares a real L2 segment: keep DAD (configure waits for it).
                iface::configure(&spaces.ns, cont, &req.ifname, &result)?;
            }
            None => cont
                .set_up(index)
                .map_err(|e| Error::internal(format!("failed to set {:?} UP: {e}", req.ifname)))?,
        }
        result.dns = conf.dns;
        // An L2 result cannot be printed for 0.1.0/0.2.0: fail while the rollback can
        // still remove the link (the reference leaves it behind then).
        result.to_json(&req.cni_version)?;
        rollback.commit();
        Ok(result)
    }

    /// Needs neither the master nor the netns: everything already gone is success.
    fn del(&self, req: &Request) -> Result<(), Error> {
        let ipam_type = cniconf::ipam_type(&req.config).map_err(|e| e.context("failed to load netConf"))?;
        let mut teardown = Teardown::new("macvlan");
        // By name: a macvlan has no peer to prove it by once a chained tuning's DEL has put
        // back the MAC from before its ADD (prevResult reports tuning's).
        teardown.step(container_link::delete(req, None, "macvlan"));
        // Released after the link is gone, so an address is never free while configured.
        if let Some(t) = &ipam_type {
            teardown.step(delegate::del(t, req));
        }
        teardown.finish()
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let spaces = Namespaces::open(req)?;
        let master = resolve_master(spaces.master_side(&conf), &conf)?;
        check_mtu(conf.mtu, &master)?;
        requested_mac(req)?;
        if let Some(t) = &conf.ipam_type {
            delegate::check(t, req)?;
        }
        let prev = check_preamble::prev_result(req, "Required prevResult missing")?;
        let intf = check_preamble::container_entry(req, &prev);
        check_preamble::check_sandbox(req, &intf)?;
        CONTAINER_LINK.check(&spaces.cont, &intf, |link| check_mode(link, parse_mode(&conf.mode)?))?;
        iface::check_addresses(&spaces.cont, &req.ifname, &prev.ips)?;
        iface::check_routes(&spaces.cont, &prev.routes)
    }

    fn status(&self, req: &Request) -> Result<(), Error> {
        match cniconf::ipam_type(&req.config)? {
            Some(t) => delegate::status(&t, req),
            None => Ok(()),
        }
    }

    /// Nothing of its own outlives DEL; IPAM gets the GC (the spec asks to forward it).
    fn gc(&self, req: &Request) -> Result<(), Error> {
        let ipam = cniconf::ipam_type(&req.config)?;
        ipam_delegation::gc(req, ipam.as_deref(), false)
    }
}

/// Creates the macvlan in the container namespace under a temporary name and renames it to
/// `CNI_IFNAME` there; on a failed rename the link is deleted before returning.
fn create(
    spaces: &Namespaces,
    conf: &Conf,
    req: &Request,
    master: &Link,
    mode: MacvlanMode,
    mac: Option<MacAddr>,
) -> Result<Link, Error> {
    let tmp = netlink::random_name("mvtmp")
        .map_err(|e| Error::internal(format!("failed to generate a temporary link name: {e}")))?;
    let spec = MacvlanSpec {
        name: &tmp,
        parent: master.index,
        mode,
        // created inside the container when the master is there
        netns: (!conf.link_in_container).then_some(&spaces.ns),
        // validated against the master's by check_mtu
        mtu: cniconf::link_mtu(Some(conf.mtu))?,
        mac,
        bcqueuelen: conf.bcqueuelen,
    };
    spaces
        .master_side(conf)
        .create_macvlan(&spec)
        .map_err(|e| Error::internal(format!("failed to create macvlan: {e}")))?;
    let cont = &spaces.cont;
    let created = cont.link(tmp.as_str())?;
    if let Err(e) = cont.set_name(created.index, &req.ifname) {
        if let Err(d) = cont.delete_link(created.index) {
            eprintln!("cnibox macvlan: cleanup after failed rename: {d}");
        }
        return Err(Error::internal(format!(
            "failed to rename macvlan to {:?}: {e}",
            req.ifname
        )));
    }
    cont.link(created.index)
        .map_err(|e| Error::internal(format!("failed to refetch macvlan {:?}: {e}", req.ifname)))
}

/// CHECK of the container interface named in prevResult, in the reference macvlan's words.
const CONTAINER_LINK: check_preamble::ContainerLink = check_preamble::ContainerLink {
    prefix: "",
    kind: "macvlan",
    kind_word: "macvlan",
};

/// The container macvlan is in the configured mode.
fn check_mode(link: &Link, expected: MacvlanMode) -> Result<(), Error> {
    if link.macvlan_mode != Some(expected) {
        let actual = match link.macvlan_mode {
            Some(m @ (MacvlanMode::Bridge | MacvlanMode::Private | MacvlanMode::Vepa | MacvlanMode::Passthru)) => {
                m.as_str().to_string()
            }
            other => return Err(Error::internal(format!("unknown macvlan mode: {other:?}"))),
        };
        return Err(Error::internal(format!(
            "Container macvlan mode {actual} does not match expected value: {}",
            expected.as_str()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_as_the_reference_spells_them() {
        assert_eq!(parse_mode("").unwrap(), MacvlanMode::Bridge);
        assert_eq!(parse_mode("bridge").unwrap(), MacvlanMode::Bridge);
        assert_eq!(parse_mode("private").unwrap(), MacvlanMode::Private);
        assert_eq!(parse_mode("vepa").unwrap(), MacvlanMode::Vepa);
        assert_eq!(parse_mode("passthru").unwrap(), MacvlanMode::Passthru);
        for bad in ["source", "Bridge", "x"] {
            assert_eq!(
                parse_mode(bad).unwrap_err().msg,
                format!("unknown macvlan mode: \"{bad}\"")
            );
        }
    }
}
