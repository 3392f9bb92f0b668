//! The `macvlan` plugin: a macvlan link on a host interface (the "master"), born in the
//! container (see [`lower_link`](crate::plugin_kit::lower_link)), with or without IPAM addresses.
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::version::go_quote;
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::netlink::{Link, LinkKind, MacAddr, MacvlanData, MacvlanMode};
use crate::plugin_kit::lower_link::{check_mtu, own_str, MasterConf, Namespaces, Stacked};
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::{check_preamble, container_link, iface, ipam_delegation};

pub struct Macvlan;

/// The plugin's config keys, as written (the master is resolved against a namespace later).
struct Conf {
    keys: MasterConf,
    mode: String,
    bcqueuelen: Option<u32>,
}

fn load(req: &Request) -> Result<Conf, Error> {
    let keys = MasterConf::load(req)?;
    let obj = json::as_object(&req.config, "NetConf")?;
    Ok(Conf {
        keys,
        mode: own_str(req, "mode")?.unwrap_or_default(),
        bcqueuelen: json::opt_uint::<u32>(&obj, "bcqueuelen", "NetConf.bcqueuelen")
            .map_err(|e| e.context("failed to load netconf"))?
            .filter(|n| *n > 0),
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
    match cniconf::link_requested_mac(req)? {
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
        let spaces = Namespaces::open(req, conf.keys.link_in_container)?;
        let master = spaces.master(conf.keys.master.as_deref())?;
        check_mtu(conf.keys.mtu, &master)?;
        requested_mac(req)?;
        let mode = parse_mode(&conf.mode)?;
        let mut rollback = Rollback::new();

        let link = spaces.create_undone_on_failure(stacked(&conf, req, &master, mode)?, &req.ifname, &mut rollback)?;
        let cont = &spaces.cont;
        let index = link.index;

        let mut result = iface::container_result(req, &link);
        match &conf.keys.ipam_type {
            Some(ipam_type) => {
                let ipam = ipam_delegation::add(ipam_type, req, &mut rollback)?;
                result = iface::with_addresses(result, ipam);
                iface::announce(&spaces.ns, cont, index, &req.ifname, "macvlan");
                // A macvlan shares a real L2 segment: keep DAD (configure waits for it).
                iface::configure(&spaces.ns, cont, &req.ifname, &result)?;
            }
            None => cont
                .set_up(index)
                .map_err(|e| Error::internal(format!("failed to set {:?} UP: {e}", req.ifname)))?,
        }
        result.dns = conf.keys.dns;
        // An L2 result cannot be printed for 0.1.0/0.2.0: fail while the rollback can
        // still remove the link (the reference leaves it behind then).
        result.to_json(&req.cni_version)?;
        rollback.commit();
        Ok(result)
    }

    /// Needs neither the master nor the netns: everything already gone is success. By
    /// name: a macvlan has no peer to prove it by once a chained tuning's DEL has put back
    /// the MAC from before its ADD (prevResult reports tuning's).
    fn del(&self, req: &Request) -> Result<(), Error> {
        container_link::delete_with_addresses(req, "macvlan", "macvlan")
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let spaces = Namespaces::open(req, conf.keys.link_in_container)?;
        let master = spaces.master(conf.keys.master.as_deref())?;
        check_mtu(conf.keys.mtu, &master)?;
        requested_mac(req)?;
        if let Some(t) = &conf.keys.ipam_type {
            delegate::check(t, req)?;
        }
        let prev = check_preamble::prev_result(req, "Required prevResult missing")?;
        let intf = check_preamble::container_entry(req, &prev);
        check_preamble::check_sandbox(req, &intf)?;
        CONTAINER_LINK.check_configured(&spaces.cont, &intf, &req.ifname, &prev, |link| {
            check_mode(link, parse_mode(&conf.mode)?)
        })
    }

    fn status(&self, req: &Request) -> Result<(), Error> {
        ipam_delegation::status(req)
    }

    /// Nothing of its own outlives DEL; IPAM gets the GC (the spec asks to forward it).
    fn gc(&self, req: &Request) -> Result<(), Error> {
        ipam_delegation::gc_addresses(req)
    }
}

/// The macvlan to create on `master`: its mode and queue length, the configured MTU and MAC.
fn stacked<'a>(conf: &Conf, req: &Request, master: &'a Link, mode: MacvlanMode) -> Result<Stacked<'a>, Error> {
    let data = MacvlanData {
        mode: Some(mode),
        bcqueuelen: conf.bcqueuelen,
    };
    Ok(Stacked {
        kind: LinkKind::Macvlan(data),
        master,
        mtu: cniconf::link_mtu(Some(conf.keys.mtu))?,
        mac: requested_mac(req)?,
        tmp_prefix: "mvtmp",
    })
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
