//! What every CHECK verifies first: prevResult is there, names the container interface in
//! `CNI_NETNS`, and that interface is a link of the plugin's kind with the MAC it says.
use crate::cni::result::Interface;
use crate::cni::{config as cniconf, CniResult, Error, Request};
use crate::netlink::{Handle, Link};

/// CHECK's prevResult, which is required; `missing` is the plugin's message without one.
pub fn prev_result(req: &Request, missing: &str) -> Result<CniResult, Error> {
    cniconf::prev_result(req)?.ok_or_else(|| Error::internal(missing))
}

/// The prevResult entry of `CNI_IFNAME` in `CNI_NETNS`; an empty entry when there is none
/// (which [`check_sandbox`] then rejects).
pub fn container_entry(req: &Request, prev: &CniResult) -> Interface {
    prev.interfaces
        .iter()
        .find(|i| i.name == req.ifname && i.sandbox.as_deref() == Some(req.netns.as_str()))
        .cloned()
        .unwrap_or_default()
}

/// The entry's sandbox must be the configured netns.
pub fn check_sandbox(req: &Request, intf: &Interface) -> Result<(), Error> {
    let sandbox = intf.sandbox.as_deref().unwrap_or_default();
    if sandbox != req.netns {
        return Err(Error::internal(format!(
            "Sandbox in prevResult {sandbox} doesn't match configured netns: {}",
            req.netns
        )));
    }
    Ok(())
}

/// How a plugin words the container-interface check (the reference plugins differ).
pub struct ContainerLink<'a> {
    /// Put in front of most messages (`"ptp: "` for veth).
    pub prefix: &'a str,
    /// The link kind the plugin creates (`veth`, `macvlan`); `""` for any kind (host-device
    /// moves whatever link it is given).
    pub kind: &'a str,
    /// How the kind is named in the wrong-kind message (`veth/p2p`, `macvlan`).
    pub kind_word: &'a str,
}

impl ContainerLink<'_> {
    /// The whole CHECK of a container interface a plugin made and configured from IPAM:
    /// the link ([`ContainerLink::check`]), then prevResult's addresses on `ifname` and its
    /// routes, in the order the references check them.
    pub fn check_configured(
        &self,
        cont: &Handle,
        intf: &Interface,
        ifname: &str,
        prev: &CniResult,
        more: impl FnOnce(&Link) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.check(cont, intf, more)?;
        super::iface::check_addresses(cont, ifname, &prev.ips)?;
        super::iface::check_routes(cont, &prev.routes)
    }

    /// The container interface named in prevResult: present in `cont`, in a sandbox, of
    /// the plugin's kind (if it names one), passing `more` (e.g. macvlan's mode), with the MAC
    /// the result says.
    pub fn check(
        &self,
        cont: &Handle,
        intf: &Interface,
        more: impl FnOnce(&Link) -> Result<(), Error>,
    ) -> Result<Link, Error> {
        let p = self.prefix;
        if intf.name.is_empty() {
            return Err(Error::internal("Container interface name missing in prevResult: "));
        }
        let Some(link) = cont.link_by_name(&intf.name)? else {
            return Err(Error::internal(format!(
                "{p}Container Interface name in prevResult: {} not found",
                intf.name
            )));
        };
        if intf.sandbox.as_deref().unwrap_or_default().is_empty() {
            return Err(Error::internal(format!(
                "{p}Error: Container interface {} should not be in host namespace",
                link.name
            )));
        }
        if !self.kind.is_empty() && link.kind_name() != Some(self.kind) {
            return Err(Error::internal(format!(
                "Error: Container interface {} not of type {}",
                link.name, self.kind_word
            )));
        }
        more(&link)?;
        if let Some(mac) = intf.mac.as_deref().filter(|m| !m.is_empty()) {
            let actual = link.mac.map(|m| m.to_string()).unwrap_or_default();
            if mac != actual {
                return Err(Error::internal(format!(
                    "{p}Interface {} Mac {mac} doesn't match container Mac: {actual}",
                    intf.name
                )));
            }
        }
        Ok(link)
    }
}
