//! The `macvlan` plugin: a macvlan link on a host interface (the "master"), born in the
//! container (see [`lower_link`](crate::plugin_kit::lower_link)), with or without IPAM addresses.
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::result::{Dns, Interface};
use crate::cni::version::go_quote;
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::netlink::{Link, LinkKind, MacAddr, MacvlanData, MacvlanMode};
use crate::plugin_kit::lower_link::{check_mtu, Namespaces, Stacked};
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::teardown::Teardown;
use crate::plugin_kit::{check_preamble, container_link, iface, ipam_delegation};
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
    cniconf::check_net_conf(&req.config, "NetConf").map_err(|e| e.context(ctx))?;
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

impl Plugin for Macvlan {
    fn about(&self) -> &'static str {
        "CNI macvlan plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let spaces = Namespaces::open(req, conf.link_in_container)?;
        let master = spaces.master(conf.master.as_deref())?;
        check_mtu(conf.mtu, &master)?;
        requested_mac(req)?;
        let mode = parse_mode(&conf.mode)?;
        let mut rollback = Rollback::new();

        let link = create(&spaces, &conf, req, &master, mode)?;
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
        let ipam_type = cniconf::del_config(
            "macvlan",
            || cniconf::ipam_type(&req.config).map_err(|e| e.context("failed to load netConf")),
            || None,
        );
        let mut teardown = Teardown::new("macvlan");
        ipam_delegation::del_with_interface(&mut teardown, ipam_type.as_deref(), req, |t| {
            // By name: a macvlan has no peer to prove it by once a chained tuning's DEL has
            // put back the MAC from before its ADD (prevResult reports tuning's).
            t.step(container_link::delete(req, None, "macvlan"))
        });
        teardown.finish()
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let spaces = Namespaces::open(req, conf.link_in_container)?;
        let master = spaces.master(conf.master.as_deref())?;
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

/// The macvlan on `master`, in the container namespace as `CNI_IFNAME`.
fn create(spaces: &Namespaces, conf: &Conf, req: &Request, master: &Link, mode: MacvlanMode) -> Result<Link, Error> {
    let data = MacvlanData {
        mode: Some(mode),
        bcqueuelen: conf.bcqueuelen,
    };
    let stacked = Stacked {
        kind: LinkKind::Macvlan(data),
        master,
        mtu: cniconf::link_mtu(Some(conf.mtu))?,
        mac: requested_mac(req)?,
        tmp_prefix: "mvtmp",
    };
    spaces.create_on_master(stacked, &req.ifname)
}

/// CHECK of the container interface named in prevResult, in the reference macvlan's words.
const CONTAINER_LINK: check_preamble::ContainerLink = check_preamble::ContainerLink {
    prefix: "",
    kind: "macvlan",
    kind_word: "macvlan",
};

/// The container macvlan is in the configured mode.
fn check_mode(link: &Link, expected: MacvlanMode) -> Result<(), Error> {
    let mode = match &link.kind {
        Some(LinkKind::Macvlan(data)) => data.mode,
        _ => None,
    };
    if mode != Some(expected) {
        let actual = match mode {
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
