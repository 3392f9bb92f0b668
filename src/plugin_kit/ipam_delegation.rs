//! The L3 side of a plugin: IPAM delegation (ADD with its release registered for rollback,
//! GC forwarding) and the masquerade attachment of a call.
use super::rollback::Rollback;
use super::teardown::Teardown;
use crate::cni::{config as cniconf, delegate, CniResult, Error, Request};
use crate::firewall_rules::ipmasq;
use crate::firewall_rules::shared_chain::Interface;

/// IPAM ADD; on any later failure of this ADD the rollback runs IPAM DEL.
pub fn add<'a>(ipam_type: &'a str, req: &'a Request, rollback: &mut Rollback<'a>) -> Result<CniResult, Error> {
    add_in_context(ipam_type, req, rollback, None)
}

/// [`add`], the IPAM plugin's own failure prefixed with `context` (its code kept), as a
/// plugin whose reference wraps it (`failed to execute IPAM delegate: …`).
pub fn add_in_context<'a>(
    ipam_type: &'a str,
    req: &'a Request,
    rollback: &mut Rollback<'a>,
    context: Option<&str>,
) -> Result<CniResult, Error> {
    let mut del_req = req.clone();
    del_req.command = crate::cni::Command::Del;
    let result = delegate::add(ipam_type, req).map_err(|e| match context {
        Some(c) => e.context(c),
        None => e,
    })?;
    rollback.push(format!("release addresses ({ipam_type} DEL)"), move || {
        delegate::del(ipam_type, &del_req).map_err(|e| e.to_string())
    });
    if result.ips.is_empty() {
        return Err(Error::internal("IPAM plugin returned missing IP config"));
    }
    Ok(result)
}

/// DEL of the container interface (`remove_interface`) and of its addresses (IPAM DEL), in
/// the order the IPAM plugin needs. Addresses are released after the interface is gone, so
/// an address is never free while still configured; but dhcp releases through the
/// interface (its DHCPRELEASE leaves from it), so its DEL goes first, as the reference's
/// macvlan calls every IPAM (the reference's bridge removes the link first, and its dhcp
/// leases stay on the server until they expire: containernetworking/plugins#791).
pub fn del_with_interface(
    teardown: &mut Teardown,
    ipam_type: Option<&str>,
    req: &Request,
    remove_interface: impl FnOnce(&mut Teardown),
) {
    match ipam_type {
        Some(t @ "dhcp") => {
            teardown.step(delegate::del(t, req));
            remove_interface(teardown);
        }
        Some(t) => {
            remove_interface(teardown);
            teardown.step(delegate::del(t, req));
        }
        None => remove_interface(teardown),
    }
}

/// The attachment this call's masquerade rules belong to (network, interface, container).
pub fn masq_attachment(req: &Request) -> ipmasq::Attachment<'_> {
    ipmasq::Attachment {
        network: &req.name,
        ifname: &req.ifname,
        container_id: &req.container_id,
    }
}

/// What DEL knows of this call's interface, to tell whether a shared iptables masquerade
/// chain is its: prevResult's addresses, else `CNI_NETNS`.
pub fn masq_interface<'a>(req: &'a Request, prev: Option<&CniResult>) -> Interface<'a> {
    let own = prev.map(|p| p.ips.iter().map(|ip| ip.address.ip()).collect());
    Interface::for_del(own, &req.netns, &req.ifname)
}

/// GC: with `masquerade`, this network's masquerade rules of attachments not in
/// `cni.dev/valid-attachments` go (without the list nothing can be judged stale); then the
/// GC is forwarded to IPAM (the spec asks for it), whatever the first step gave. Both
/// failures are reported, joined.
pub fn gc(req: &Request, ipam_type: Option<&str>, masquerade: bool) -> Result<(), Error> {
    let masq = match masquerade {
        true => match cniconf::valid_attachments(&req.config)? {
            Some(valid) => ipmasq::gc(&req.name, &valid).map_err(Error::from),
            None => Ok(()),
        },
        false => Ok(()),
    };
    let ipam = match ipam_type {
        Some(t) => delegate::gc(t, req),
        None => Ok(()),
    };
    match (masq, ipam) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(m), Err(i)) => Err(Error::internal(format!("{}; {}", m.msg, i.msg))),
    }
}

/// STATUS of a plugin whose IPAM is optional: its IPAM's answer; ready without one.
pub fn status(req: &Request) -> Result<(), Error> {
    match cniconf::ipam_type(&req.config)? {
        Some(t) => delegate::status(&t, req),
        None => Ok(()),
    }
}

/// GC of a plugin that leaves nothing of its own after DEL: forwarded to its IPAM, if it
/// has one (the spec asks for it).
pub fn gc_addresses(req: &Request) -> Result<(), Error> {
    let ipam = cniconf::ipam_type(&req.config)?;
    gc(req, ipam.as_deref(), false)
}
