//! The `vlan` plugin: an 802.1Q VLAN link on a host interface (the "master", required),
//! born in the container (see [`lower_link`](crate::plugin_kit::lower_link)), with the
//! addresses of its IPAM (required).
use crate::cni::config as cniconf;
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::netlink::{Link, LinkKind, VlanData};
use crate::plugin_kit::lower_link::{check_mtu, own_int, MasterConf, Namespaces, Stacked};
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::{check_preamble, container_link, iface, ipam_delegation};

pub struct Vlan;

/// The plugin's config keys, as written (CHECK reads no more than their types).
struct Conf {
    keys: MasterConf,
    vlan_id: i64,
}

fn load(req: &Request) -> Result<Conf, Error> {
    Ok(Conf {
        keys: MasterConf::load(req)?,
        vlan_id: own_int(req, "vlanId")?,
    })
}

/// What ADD requires beyond the types: a master, a VLAN ID the kernel accepts.
fn validate(conf: &Conf) -> Result<(&str, u16), Error> {
    let Some(master) = &conf.keys.master else {
        return Err(Error::internal(
            "\"master\" field is required. It specifies the host interface name to create the VLAN for",
        ));
    };
    match u16::try_from(conf.vlan_id) {
        Ok(id) if id <= 4094 => Ok((master, id)),
        _ => Err(Error::internal(format!(
            "invalid VLAN ID {} (must be between 0 and 4095 inclusive)",
            conf.vlan_id
        ))),
    }
}

/// The IPAM type, which a VLAN cannot do without: checked before anything is created (the
/// reference creates the link first and leaves it when the delegation fails).
fn ipam_type(conf: &Conf) -> Result<&str, Error> {
    conf.keys
        .ipam_type
        .as_deref()
        .ok_or_else(|| Error::internal(format!("{IPAM_CONTEXT}: no plugin name provided")))
}

/// How the reference words a failed IPAM ADD.
const IPAM_CONTEXT: &str = "failed to execute IPAM delegate";

impl Plugin for Vlan {
    fn about(&self) -> &'static str {
        "CNI vlan plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let (master, id) = validate(&conf)?;
        let spaces = Namespaces::open(req, conf.keys.link_in_container)?;
        let master = spaces
            .master_side()
            .link_by_name(master)?
            .ok_or_else(|| Error::internal("Link not found"))?;
        check_mtu(conf.keys.mtu, &master)?;
        let ipam_type = ipam_type(&conf)?;
        let mut rollback = Rollback::new();

        let link = spaces.create_undone_on_failure(stacked(&conf, &master, id)?, &req.ifname, &mut rollback)?;

        let ipam = ipam_delegation::add_in_context(ipam_type, req, &mut rollback, Some(IPAM_CONTEXT))?;
        let mut result = iface::with_addresses(iface::container_result(req, &link), ipam);
        iface::configure(&spaces.ns, &spaces.cont, &req.ifname, &result)?;
        result.dns = conf.keys.dns.clone();
        rollback.commit();
        Ok(result)
    }

    /// Needs neither the master nor the netns (the reference looks the master up again and
    /// fails once it is gone): everything already gone is success.
    fn del(&self, req: &Request) -> Result<(), Error> {
        container_link::delete_with_addresses(req, "vlan", "vlan")
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let spaces = Namespaces::open(req, conf.keys.link_in_container)?;
        delegate::check(conf.keys.ipam_type.as_deref().unwrap_or_default(), req)?;
        let prev = check_preamble::prev_result(req, "vlan: Required prevResult missing")?;
        let intf = check_preamble::container_entry(req, &prev);
        check_preamble::check_sandbox(req, &intf)?;
        spaces.master(Some(conf.keys.master.as_deref().unwrap_or_default()))?;
        let link = CONTAINER_LINK.check(&spaces.cont, &intf, |_| Ok(()))?;
        check_vlan(&link, &conf)?;
        iface::check_addresses(&spaces.cont, &req.ifname, &prev.ips)?;
        iface::check_routes(&spaces.cont, &prev.routes)
    }

    fn status(&self, req: &Request) -> Result<(), Error> {
        delegate::status(&cniconf::ipam_type(&req.config)?.unwrap_or_default(), req)
    }

    /// Nothing of its own outlives DEL; IPAM gets the GC (the spec asks to forward it).
    fn gc(&self, req: &Request) -> Result<(), Error> {
        ipam_delegation::gc_addresses(req)
    }
}

/// The VLAN to create on `master`: the configured ID (802.1Q, the kernel's default
/// protocol: the plugin has no key for another) and MTU.
fn stacked<'a>(conf: &Conf, master: &'a Link, id: u16) -> Result<Stacked<'a>, Error> {
    Ok(Stacked {
        kind: LinkKind::Vlan(VlanData { id, protocol: None }),
        master,
        mtu: cniconf::link_mtu(Some(conf.keys.mtu))?,
        mac: None,
        tmp_prefix: "vlantmp",
    })
}

/// CHECK of the container interface named in prevResult, in the reference vlan's words.
const CONTAINER_LINK: check_preamble::ContainerLink = check_preamble::ContainerLink {
    prefix: "vlan: ",
    kind: "vlan",
    kind_word: "vlan",
};

/// The container VLAN has the configured ID, and the configured MTU when one is set. (The
/// reference words both as a tuning plugin's promisc and MTU checks; these say what they
/// check.)
fn check_vlan(link: &Link, conf: &Conf) -> Result<(), Error> {
    let id = match &link.kind {
        Some(LinkKind::Vlan(data)) => i64::from(data.id),
        _ => -1,
    };
    if id != conf.vlan_id {
        return Err(Error::internal(format!(
            "vlan: Container interface {} has VLAN ID {id}, configured {}",
            link.name, conf.vlan_id
        )));
    }
    if conf.keys.mtu != 0 && conf.keys.mtu != i64::from(link.mtu) {
        return Err(Error::internal(format!(
            "vlan: Container interface {} has MTU {}, configured {}",
            link.name, link.mtu, conf.keys.mtu
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use crate::netlink::testing::{self, attributes, FakeTransport, IFINFOMSG_LEN};
    use crate::netlink::Handle;
    use crate::plugin_kit::lower_link::create_stacked;
    use serde_json::json;

    fn conf(extra: serde_json::Value) -> Conf {
        let mut c = json!({"cniVersion": "1.0.0", "name": "n", "type": "vlan", "master": "m0", "vlanId": 5});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        load(&Request::from_config(Command::Add, c)).unwrap()
    }

    fn vlan_link(id: u16, mtu: u32) -> Link {
        Link {
            mtu,
            ..testing::link(9, "eth0", LinkKind::Vlan(VlanData { id, protocol: None }))
        }
    }

    #[test]
    fn the_master_and_a_vlan_id_in_range_are_required() {
        assert_eq!(validate(&conf(json!({}))).unwrap(), ("m0", 5));
        assert_eq!(validate(&conf(json!({"vlanId": 0}))).unwrap().1, 0);
        assert_eq!(validate(&conf(json!({"vlanId": 4094}))).unwrap().1, 4094);
        for bad in [-1, 4095, 65536, 1i64 << 40] {
            assert_eq!(
                validate(&conf(json!({ "vlanId": bad }))).unwrap_err().msg,
                format!("invalid VLAN ID {bad} (must be between 0 and 4095 inclusive)")
            );
        }
        assert_eq!(
            validate(&conf(json!({"master": ""}))).unwrap_err().msg,
            "\"master\" field is required. It specifies the host interface name to create the VLAN for"
        );
    }

    #[test]
    fn a_vlan_without_ipam_fails_before_it_is_created() {
        let e = ipam_type(&conf(json!({}))).unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (999, "failed to execute IPAM delegate: no plugin name provided")
        );
        assert_eq!(ipam_type(&conf(json!({"ipam": {"type": "static"}}))).unwrap(), "static");
    }

    /// ADD's link: the VLAN ID as a 16-bit IFLA_VLAN_ID, no protocol (the kernel's 802.1Q).
    #[test]
    fn add_creates_the_vlan_with_its_id_and_mtu() {
        let ns = crate::netns::Netns::current().unwrap();
        let master = Link {
            index: 3,
            ..vlan_link(0, 1500)
        };
        let host = Handle::with_transport(FakeTransport::new());
        let cont = Handle::with_transport(FakeTransport::new());
        cont.transport().push_links(&[vlan_link(4094, 1400)]);
        cont.transport().push_ack();
        cont.transport().push_links(&[vlan_link(4094, 1400)]);
        let c = conf(json!({"vlanId": 4094, "mtu": 1400}));
        let s = stacked(&c, &master, validate(&c).unwrap().1).unwrap();
        create_stacked(&host, &cont, Some(&ns), s, "eth0").unwrap();
        let attrs = attributes(&host.transport().requests()[0].payload, IFINFOMSG_LEN);
        let get = |ty: u16| attrs.iter().find(|(t, _)| *t == ty).map(|(_, p)| p.clone());
        assert_eq!(get(5), Some(3u32.to_ne_bytes().to_vec()), "IFLA_LINK");
        assert!(get(3).unwrap().starts_with(b"vlantmp"));
        assert_eq!(get(3).unwrap().len(), 7 + 8 + 1, "a temporary name fits IFNAMSIZ");
        assert_eq!(get(4), Some(1400u32.to_ne_bytes().to_vec()), "IFLA_MTU");
        let mut info = vec![8, 0, 1, 0];
        info.extend_from_slice(b"vlan");
        info.extend_from_slice(&[12, 0, 2, 0, 6, 0, 1, 0]);
        info.extend_from_slice(&4094u16.to_ne_bytes());
        info.extend_from_slice(&[0, 0]);
        assert_eq!(get(18).unwrap(), info);
    }

    #[test]
    fn a_kernel_without_vlan_names_8021q() {
        let ns = crate::netns::Netns::current().unwrap();
        let master = vlan_link(0, 1500);
        let host = Handle::with_transport(FakeTransport::new());
        host.transport()
            .push_kernel_error(libc::EOPNOTSUPP, "Unknown device type");
        let cont = Handle::with_transport(FakeTransport::new());
        let c = conf(json!({}));
        let e = create_stacked(&host, &cont, Some(&ns), stacked(&c, &master, 5).unwrap(), "eth0").unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (999, "vlan: the kernel has no vlan support (modprobe 8021q)")
        );
    }

    #[test]
    fn check_compares_the_id_and_a_configured_mtu() {
        check_vlan(&vlan_link(5, 1500), &conf(json!({}))).unwrap();
        check_vlan(&vlan_link(5, 1400), &conf(json!({"mtu": 1400}))).unwrap();
        assert_eq!(
            check_vlan(&vlan_link(7, 1500), &conf(json!({}))).unwrap_err().msg,
            "vlan: Container interface eth0 has VLAN ID 7, configured 5"
        );
        assert_eq!(
            check_vlan(&vlan_link(5, 1500), &conf(json!({"mtu": 1400})))
                .unwrap_err()
                .msg,
            "vlan: Container interface eth0 has MTU 1500, configured 1400"
        );
    }
}
