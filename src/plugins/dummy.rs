//! The `dummy` plugin: a dummy link in the container (an interface whose packets go
//! nowhere: an address that is not on `lo` for applications to bind), with the addresses of
//! its IPAM, which it requires.
use crate::cni::config as cniconf;
use crate::cni::{delegate, CniResult, Error, Plugin, Request};
use crate::netlink::{Handle, Link, LinkKind, LinkSpec, Transport};
use crate::plugin_kit::rollback::Rollback;
use crate::plugin_kit::{check_preamble, container_link, iface, ipam_delegation, kernel_support, netns_open};

pub struct Dummy;

/// The reference decodes its config as a plain `types.NetConf`, with its own context.
const CONTEXT: &str = "failed to parse network config";

/// The IPAM type, which a dummy cannot do without.
fn ipam_type(req: &Request) -> Result<String, Error> {
    cniconf::check_net_conf(&req.config, "NetConf").map_err(|e| e.context(CONTEXT))?;
    cniconf::ipam_type(&req.config)
        .map_err(|e| e.context(CONTEXT))?
        .ok_or_else(|| Error::internal("dummy interface requires an IPAM configuration"))
}

impl Plugin for Dummy {
    fn about(&self) -> &'static str {
        "CNI dummy plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let ipam_type = ipam_type(req)?;
        let ns = netns_open::container(&req.netns)?;
        let cont = Handle::open(&ns)?;
        let mut rollback = Rollback::new();

        let link = create(&cont, &req.ifname)?;
        let index = link.index;
        let cont = &cont;
        rollback.push(format!("delete dummy {}", req.ifname), move || {
            cont.remove_link(index).map(drop).map_err(|e| e.to_string())
        });

        let ipam = ipam_delegation::add(&ipam_type, req, &mut rollback)?;
        // the IPAM result's DNS stays: the reference has no `dns` of its own to put there
        let dns = ipam.dns.clone();
        let mut result = iface::with_addresses(iface::container_result(req, &link), ipam);
        result.dns = dns;
        iface::configure(&ns, cont, &req.ifname, &result)?;
        rollback.commit();
        Ok(result)
    }

    /// Everything already gone is success; a config without IPAM has nothing to release
    /// (the reference fails such a DEL every time).
    fn del(&self, req: &Request) -> Result<(), Error> {
        container_link::delete_with_addresses(req, "dummy", "dummy")
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let ipam_type = ipam_type(req)?;
        let ns = netns_open::container(&req.netns)?;
        delegate::check(&ipam_type, req)?;
        let prev = check_preamble::prev_result(req, "dummy: Required prevResult missing")?;
        let intf = check_preamble::container_entry(req, &prev);
        check_preamble::check_sandbox(req, &intf)?;
        let cont = Handle::open(&ns)?;
        let link = CONTAINER_LINK.check(&cont, &intf, |_| Ok(()))?;
        check_up(&link)?;
        iface::check_addresses(&cont, &req.ifname, &prev.ips)
    }

    fn status(&self, req: &Request) -> Result<(), Error> {
        delegate::status(&cniconf::ipam_type(&req.config)?.unwrap_or_default(), req)
    }

    /// Nothing of its own outlives DEL; IPAM gets the GC (the spec asks to forward it).
    fn gc(&self, req: &Request) -> Result<(), Error> {
        ipam_delegation::gc_addresses(req)
    }
}

/// The dummy link `ifname`, created in the container namespace `cont` under its own name
/// (a dummy has no lower link whose namespace a name could clash in), looked up again.
fn create<T: Transport>(cont: &Handle<T>, ifname: &str) -> Result<Link, Error> {
    let kind = LinkKind::Dummy;
    cont.create_link(&LinkSpec::new(ifname, kind.clone())).map_err(|e| {
        kernel_support::create_error(&kind, e, |e| Error::internal(format!("failed to create dummy: {e}")))
    })?;
    cont.link(ifname)
        .map_err(|e| Error::internal(format!("failed to fetch dummy {ifname:?}: {e}")))
}

/// CHECK of the container interface named in prevResult, in the reference dummy's words.
const CONTAINER_LINK: check_preamble::ContainerLink = check_preamble::ContainerLink {
    prefix: "",
    kind: "dummy",
    kind_word: "dummy",
};

/// The container dummy is up (ADD brought it up; its addresses need it).
fn check_up(link: &Link) -> Result<(), Error> {
    if !link.up {
        return Err(Error::internal(format!("Interface {} is down", link.name)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use crate::netlink::testing::{self, attributes, FakeTransport, IFINFOMSG_LEN};
    use serde_json::json;

    fn dummy_link(up: bool) -> Link {
        Link {
            up,
            ..testing::link(4, "eth0", LinkKind::Dummy)
        }
    }

    #[test]
    fn ipam_is_required() {
        let req = |c: serde_json::Value| Request::from_config(Command::Add, c);
        let e = ipam_type(&req(json!({"cniVersion": "1.0.0", "name": "n", "type": "dummy"}))).unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (999, "dummy interface requires an IPAM configuration")
        );
        let e = ipam_type(&req(
            json!({"cniVersion": "1.0.0", "name": "n", "type": "dummy", "ipam": {}}),
        ))
        .unwrap_err();
        assert_eq!(e.msg, "dummy interface requires an IPAM configuration");
        let e = ipam_type(&req(
            json!({"cniVersion": "1.0.0", "name": "n", "type": "dummy", "ipam": 5}),
        ))
        .unwrap_err();
        assert_eq!(
            e.msg,
            "failed to parse network config: json: cannot unmarshal number into Go struct field NetConf.ipam of type types.IPAM"
        );
        let ok = req(json!({"cniVersion": "1.0.0", "name": "n", "type": "dummy", "ipam": {"type": "host-local"}}));
        assert_eq!(ipam_type(&ok).unwrap(), "host-local");
    }

    /// The create request is iproute2's `ip link add eth0 type dummy` (see
    /// netlink::kind_requests), sent in the container namespace, then the link is fetched.
    #[test]
    fn add_creates_the_dummy_under_its_own_name() {
        let cont = Handle::with_transport(FakeTransport::new());
        cont.transport().push_ack();
        cont.transport().push_links(&[dummy_link(false)]);
        let l = create(&cont, "eth0").unwrap();
        assert_eq!(l.index, 4);
        let reqs = cont.transport().requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(
            attributes(&reqs[0].payload, IFINFOMSG_LEN),
            vec![
                (3, b"eth0\0".to_vec()),
                (18, [&[9, 0, 1, 0][..], b"dummy\0\0\0"].concat())
            ]
        );
    }

    #[test]
    fn a_kernel_without_dummy_is_named() {
        let cont = Handle::with_transport(FakeTransport::new());
        cont.transport()
            .push_kernel_error(libc::EOPNOTSUPP, "Unknown device type");
        let e = create(&cont, "eth0").unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (999, "dummy: the kernel has no dummy support (modprobe dummy)")
        );
        // a taken name is the kernel's word
        cont.transport().push_errno(libc::EEXIST);
        let e = create(&cont, "eth0").unwrap_err();
        assert_eq!(e.msg, "failed to create dummy: create dummy eth0: File exists");
    }

    #[test]
    fn check_wants_the_dummy_up() {
        check_up(&dummy_link(true)).unwrap();
        assert_eq!(check_up(&dummy_link(false)).unwrap_err().msg, "Interface eth0 is down");
    }
}
