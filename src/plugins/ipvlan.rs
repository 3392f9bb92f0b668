//! The `ipvlan` plugin: an ipvlan link on a host interface (the "master"), born in the
//! container (see [`lower_link`](crate::plugin_kit::lower_link)), with the addresses of its
//! IPAM or, chained without IPAM, those of the previous plugin's result.
//!
//! An ipvlan shares its master's MAC: the kernel tells its links apart by address, so a
//! chained ipvlan without IPAM takes the previous result's addresses and, without
//! `master`, the previous result's one interface as its master.
use crate::cni::config as cniconf;
use crate::cni::version::go_quote;
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::netlink::{IpvlanData, IpvlanMode, Link, LinkKind};
use crate::plugin_kit::lower_link::{own_str, MasterConf, Namespaces, Stacked};
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::{check_preamble, container_link, iface, ipam_delegation};

pub struct Ipvlan;

/// The plugin's config keys, as written (the master is resolved against a namespace later).
struct Conf {
    /// Without `ipam` (or with an empty type): chained, the previous result's addresses.
    keys: MasterConf,
    mode: String,
}

fn load(req: &Request) -> Result<Conf, Error> {
    Ok(Conf {
        keys: MasterConf::load(req)?,
        mode: own_str(req, "mode")?.unwrap_or_default(),
    })
}

/// The config's mode; `""` means l2.
fn parse_mode(s: &str) -> Result<IpvlanMode, Error> {
    match s {
        "" | "l2" => Ok(IpvlanMode::L2),
        "l3" => Ok(IpvlanMode::L3),
        "l3s" => Ok(IpvlanMode::L3s),
        other => Err(Error::internal(format!("unknown ipvlan mode: {}", go_quote(other)))),
    }
}

/// The master's name when the config has none and a previous plugin's result is chained
/// in: that result's one interface. None: the configured master, or (no prevResult) the
/// interface of the default route.
fn chained_master(conf: &Conf, prev: Option<&CniResult>) -> Result<Option<String>, Error> {
    match (&conf.keys.master, prev) {
        (None, Some(prev)) => match prev.interfaces.as_slice() {
            [only] if !only.name.is_empty() => Ok(Some(only.name.clone())),
            _ => Err(Error::internal(
                "chained master failure. PrevResult lacks a single named interface",
            )),
        },
        _ => Ok(None),
    }
}

/// Where the addresses come from: IPAM, or without IPAM the previous result's when it has
/// any. Decided before anything is created, so a config with neither fails with nothing
/// left behind (the reference creates the link first and leaves it).
enum Addresses {
    Ipam(String),
    Chained(CniResult),
}

fn addresses(conf: &Conf, prev: Option<CniResult>) -> Result<Addresses, Error> {
    match (&conf.keys.ipam_type, prev) {
        (Some(t), _) => Ok(Addresses::Ipam(t.clone())),
        (None, Some(prev)) if !prev.ips.is_empty() => Ok(Addresses::Chained(prev)),
        // what delegating to an empty IPAM type answers
        (None, _) => Err(Error::internal("no plugin name provided")),
    }
}

impl Plugin for Ipvlan {
    fn about(&self) -> &'static str {
        "CNI ipvlan plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let prev = cniconf::prev_result(req)?;
        let chained = chained_master(&conf, prev.as_ref())?;
        let spaces = Namespaces::open(req, conf.keys.link_in_container)?;
        let mode = parse_mode(&conf.mode)?;
        let master = spaces.master(chained.as_deref().or(conf.keys.master.as_deref()))?;
        let source = addresses(&conf, prev)?;
        let mut rollback = Rollback::new();

        let link = spaces.create_undone_on_failure(stacked(&conf, &master, mode)?, &req.ifname, &mut rollback)?;

        let l3 = match &source {
            Addresses::Ipam(t) => ipam_delegation::add(t, req, &mut rollback)?,
            Addresses::Chained(prev) => prev.clone(),
        };
        let mut result = iface::with_addresses(iface::container_result(req, &link), l3);
        iface::announce(&spaces.ns, &spaces.cont, link.index, &req.ifname, "ipvlan");
        iface::configure(&spaces.ns, &spaces.cont, &req.ifname, &result)?;
        result.dns = conf.keys.dns;
        rollback.commit();
        Ok(result)
    }

    /// Needs neither the master nor the netns (the reference looks the default-route master
    /// up again and fails without one): everything already gone is success.
    fn del(&self, req: &Request) -> Result<(), Error> {
        container_link::delete_with_addresses(req, "ipvlan", "ipvlan")
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let spaces = Namespaces::open(req, conf.keys.link_in_container)?;
        if let Some(t) = &conf.keys.ipam_type {
            delegate::check(t, req)?;
        }
        let prev = check_preamble::prev_result(req, "Required prevResult missing")?;
        let intf = check_preamble::container_entry(req, &prev);
        check_preamble::check_sandbox(req, &intf)?;
        // Without `master` ADD took the default route's interface or a chained result's
        // (which CHECK's prevResult, ipvlan's own, no longer names): the ipvlan's existence
        // proves its master's, as the kernel deletes an ipvlan with its master.
        if let Some(m) = &conf.keys.master {
            spaces.master(Some(m))?;
        }
        CONTAINER_LINK.check_configured(&spaces.cont, &intf, &req.ifname, &prev, |link| {
            check_mode(link, &conf.mode)
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

/// The ipvlan to create on `master`: the mode, bridge flags (the plugin has no key for
/// them), the configured MTU.
fn stacked<'a>(conf: &Conf, master: &'a Link, mode: IpvlanMode) -> Result<Stacked<'a>, Error> {
    Ok(Stacked {
        kind: LinkKind::Ipvlan(IpvlanData {
            mode: Some(mode),
            flags: 0,
        }),
        master,
        mtu: cniconf::link_mtu(Some(conf.keys.mtu))?,
        mac: None,
        tmp_prefix: "ipvtmp",
    })
}

/// CHECK of the container interface named in prevResult, in the reference ipvlan's words.
const CONTAINER_LINK: check_preamble::ContainerLink = check_preamble::ContainerLink {
    prefix: "",
    kind: "ipvlan",
    kind_word: "ipvlan",
};

/// The container ipvlan is in the configured mode.
fn check_mode(link: &Link, configured: &str) -> Result<(), Error> {
    let expected = parse_mode(configured)?;
    let actual = match &link.kind {
        Some(LinkKind::Ipvlan(data)) => data.mode,
        _ => None,
    };
    match actual {
        Some(m) if m == expected => Ok(()),
        Some(m) => Err(Error::internal(format!(
            "Container IPVlan mode {} does not match expected value: {}",
            m.as_str(),
            expected.as_str()
        ))),
        None => Err(Error::internal(format!("unknown ipvlan mode: {actual:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use crate::netlink::testing::{self, attributes, FakeTransport, IFINFOMSG_LEN};
    use crate::netlink::Handle;
    use crate::plugin_kit::lower_link::create_stacked;
    use serde_json::json;

    fn link(index: u32, name: &str, kind: LinkKind) -> Link {
        Link {
            up: false,
            ..testing::link(index, name, kind)
        }
    }

    fn ipvlan(mode: IpvlanMode) -> LinkKind {
        LinkKind::Ipvlan(IpvlanData {
            mode: Some(mode),
            flags: 0,
        })
    }

    fn conf(config: serde_json::Value) -> Conf {
        load(&Request::from_config(Command::Add, config)).unwrap()
    }

    #[test]
    fn modes_as_the_reference_spells_them() {
        assert_eq!(parse_mode("").unwrap(), IpvlanMode::L2);
        assert_eq!(parse_mode("l2").unwrap(), IpvlanMode::L2);
        assert_eq!(parse_mode("l3").unwrap(), IpvlanMode::L3);
        assert_eq!(parse_mode("l3s").unwrap(), IpvlanMode::L3s);
        for bad in ["L2", "bridge", "l4"] {
            assert_eq!(
                parse_mode(bad).unwrap_err().msg,
                format!("unknown ipvlan mode: \"{bad}\"")
            );
        }
    }

    /// ADD's link for `config` on master `m0` (index 3): created on `host`, born in the
    /// (here: this) container namespace, renamed in `cont` to eth0.
    fn create(
        host: &Handle<FakeTransport>,
        cont: &Handle<FakeTransport>,
        config: serde_json::Value,
    ) -> Result<Link, Error> {
        let ns = crate::netns::Netns::current().unwrap();
        let master = link(3, "m0", LinkKind::Veth);
        let c = conf(config);
        let mode = parse_mode(&c.mode)?;
        create_stacked(host, cont, Some(&ns), stacked(&c, &master, mode)?, "eth0")
    }

    fn handles() -> (Handle<FakeTransport>, Handle<FakeTransport>) {
        (
            Handle::with_transport(FakeTransport::new()),
            Handle::with_transport(FakeTransport::new()),
        )
    }

    /// ADD's link: created on the master side, born in the container under a temporary
    /// name with the mode and MTU of the config, renamed there, looked up again.
    #[test]
    fn add_creates_the_ipvlan_in_the_container_and_renames_it() {
        let (host, cont) = handles();
        cont.transport()
            .push_links(&[link(9, "ipvtmp01234567", ipvlan(IpvlanMode::L3))]);
        cont.transport().push_ack();
        cont.transport().push_links(&[link(9, "eth0", ipvlan(IpvlanMode::L3))]);
        let config = json!({"cniVersion": "1.0.0", "name": "n", "type": "ipvlan", "mode": "l3", "mtu": 1400});
        let l = create(&host, &cont, config).unwrap();
        assert_eq!((l.index, l.name.as_str()), (9, "eth0"));

        let create = &host.transport().requests()[0];
        let attrs = attributes(&create.payload, IFINFOMSG_LEN);
        let get = |ty: u16| attrs.iter().find(|(t, _)| *t == ty).map(|(_, p)| p.clone());
        assert_eq!(get(5), Some(3u32.to_ne_bytes().to_vec()), "IFLA_LINK: the master");
        assert!(get(3).unwrap().starts_with(b"ipvtmp"), "IFLA_IFNAME: a temporary name");
        assert_eq!(get(4), Some(1400u32.to_ne_bytes().to_vec()), "IFLA_MTU");
        // IFLA_LINKINFO: kind ipvlan, mode l3 (u16 1), flags bridge (u16 0)
        assert_eq!(
            get(18).unwrap(),
            [
                &[10, 0, 1, 0][..],
                b"ipvlan\0\0",
                &[20, 0, 2, 0, 6, 0, 1, 0, 1, 0, 0, 0, 6, 0, 2, 0, 0, 0, 0, 0]
            ]
            .concat()
        );
        let rename = &cont.transport().requests()[1];
        let rename_attrs = attributes(&rename.payload, IFINFOMSG_LEN);
        assert_eq!(rename_attrs, vec![(3, b"eth0\0".to_vec())]);
    }

    /// This kernel's answer: the plugin names the kind and the module, with code 999.
    #[test]
    fn a_kernel_without_ipvlan_is_named() {
        let (host, cont) = handles();
        host.transport()
            .push_kernel_error(libc::EOPNOTSUPP, "Unknown device type");
        let e = create(
            &host,
            &cont,
            json!({"cniVersion": "1.0.0", "name": "n", "type": "ipvlan"}),
        )
        .unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (999, "ipvlan: the kernel has no ipvlan support (modprobe ipvlan)")
        );
        assert!(cont.transport().requests().is_empty(), "nothing to look up or undo");
    }

    /// A name taken in the container: the temporary link is deleted again.
    #[test]
    fn a_failed_rename_deletes_the_link() {
        let (host, cont) = handles();
        cont.transport()
            .push_links(&[link(9, "ipvtmp01234567", ipvlan(IpvlanMode::L2))]);
        cont.transport().push_errno(libc::EEXIST);
        cont.transport().push_ack();
        let e = create(
            &host,
            &cont,
            json!({"cniVersion": "1.0.0", "name": "n", "type": "ipvlan"}),
        )
        .unwrap_err();
        assert_eq!(
            e.msg,
            "failed to rename ipvlan to \"eth0\": rename to eth0 link index 9: File exists"
        );
        let reqs = cont.transport().requests();
        assert_eq!(reqs.len(), 3);
        assert_eq!(reqs[2].kind, 17, "RTM_DELLINK of the temporary link");
    }

    #[test]
    fn a_chained_ipvlan_takes_the_previous_results_one_interface_as_master() {
        let prev = |ifaces: serde_json::Value| {
            let c = json!({"cniVersion": "1.0.0", "name": "n", "type": "ipvlan",
                           "prevResult": {"cniVersion": "1.0.0", "interfaces": ifaces,
                                          "ips": [{"address": "10.1.2.3/24", "interface": 0}]}});
            let req = Request::from_config(Command::Add, c);
            (load(&req).unwrap(), cniconf::prev_result(&req).unwrap())
        };
        let (c, p) = prev(json!([{"name": "eth1"}]));
        assert_eq!(chained_master(&c, p.as_ref()).unwrap().as_deref(), Some("eth1"));
        assert!(matches!(addresses(&c, p).unwrap(), Addresses::Chained(r) if r.ips.len() == 1));
        for bad in [json!([]), json!([{"name": "a"}, {"name": "b"}]), json!([{"name": ""}])] {
            let (c, p) = prev(bad.clone());
            assert_eq!(
                chained_master(&c, p.as_ref()).unwrap_err().msg,
                "chained master failure. PrevResult lacks a single named interface",
                "{bad}"
            );
        }
        // a configured master wins; no prevResult: the default route's interface
        let mut c = conf(json!({"cniVersion": "1.0.0", "name": "n", "type": "ipvlan", "master": "m0"}));
        assert_eq!(chained_master(&c, None).unwrap(), None);
        c.keys.master = None;
        assert_eq!(chained_master(&c, None).unwrap(), None);
    }

    /// Without IPAM and without addresses to chain, ADD fails before it creates anything.
    #[test]
    fn no_ipam_and_nothing_chained_fails_first() {
        let c = conf(json!({"cniVersion": "1.0.0", "name": "n", "type": "ipvlan", "master": "m0"}));
        let e = addresses(&c, None).err().unwrap();
        assert_eq!((e.code, e.msg.as_str()), (999, "no plugin name provided"));
        let empty = CniResult::default();
        assert!(addresses(&c, Some(empty)).is_err());
        let c = conf(json!({"cniVersion": "1.0.0", "name": "n", "type": "ipvlan", "ipam": {"type": "host-local"}}));
        assert!(matches!(addresses(&c, None).unwrap(), Addresses::Ipam(t) if t == "host-local"));
    }

    #[test]
    fn check_compares_the_mode_in_the_references_words() {
        let l = link(9, "eth0", ipvlan(IpvlanMode::L3));
        check_mode(&l, "l3").unwrap();
        assert_eq!(
            check_mode(&l, "").unwrap_err().msg,
            "Container IPVlan mode l3 does not match expected value: l2"
        );
        assert_eq!(check_mode(&l, "x").unwrap_err().msg, "unknown ipvlan mode: \"x\"");
    }
}
