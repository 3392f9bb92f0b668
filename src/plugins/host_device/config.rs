//! host-device's config: which host link to move (`device`, `hwaddr`, `kernelpath`,
//! `pciBusID`, or the runtime's `runtimeConfig.deviceID`), the reference's `DPDKMode`, IPAM,
//! DNS, and where the link's original MTU and state are kept (`dataDir`, cnibox's).
use super::sysfs::Sysfs;
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::result::Dns;
use crate::cni::{Error, Request};
use std::path::PathBuf;

/// Where ADD keeps what DEL restores (a tmpfs: the links are back where they were after a
/// reboot anyway).
pub const DEFAULT_DATA_DIR: &str = "/run/cni/host-device";

/// Go's type of host-device's `runtimeConfig`, as its decode errors name it.
const RUNTIME_CONFIG: &str = r#"struct { DeviceID string "json:\"deviceID,omitempty\"" }"#;

/// The keys as written.
#[derive(Debug, Default, Clone)]
pub struct Keys {
    pub device: String,
    pub hwaddr: String,
    pub kernelpath: String,
    pub pci: String,
    /// `DPDKMode`: the Go field has no JSON tag, so its name is the key. Overridden by what
    /// sysfs says when a PCI address is known.
    pub dpdk_mode: bool,
    pub device_id: String,
    pub ipam_type: Option<String>,
    pub dns: Dns,
    pub data_dir: PathBuf,
}

/// How the host link is found, in the reference's order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Device(String),
    HwAddr(String),
    KernelPath(String),
    Pci(String),
    Auxiliary(String),
}

/// The config once `deviceID` and the PCI driver are resolved.
#[derive(Debug, Clone)]
pub struct Conf {
    pub keys: Keys,
    /// None only in DEL's fallback, when the config names no link at all.
    pub selector: Option<Selector>,
    /// The device is bound to a userspace driver: nothing to move, only IPAM.
    pub dpdk: bool,
}

/// The keys, decoded as the reference decodes its NetConf.
pub fn read(req: &Request) -> Result<Keys, Error> {
    let ctx = "failed to load netconf";
    cniconf::check_net_conf(&req.config, "NetConf").map_err(|e| e.context(ctx))?;
    let obj = json::as_object(&req.config, "NetConf").map_err(|e| e.context(ctx))?;
    let s = |key: &str| -> Result<String, Error> {
        Ok(json::opt_str(&obj, key, &format!("NetConf.{key}"))
            .map_err(|e| e.context(ctx))?
            .unwrap_or_default()
            .to_string())
    };
    let device_id = match cniconf::runtime_config(&req.config, "NetConf", RUNTIME_CONFIG).map_err(|e| e.context(ctx))? {
        // Go names a field of an anonymous struct without the struct: `.runtimeConfig.deviceID`
        Some(rc) => json::opt_str(&rc, "deviceID", ".runtimeConfig.deviceID")
            .map_err(|e| e.context(ctx))?
            .unwrap_or_default()
            .to_string(),
        None => String::new(),
    };
    Ok(Keys {
        device: s("device")?,
        hwaddr: s("hwaddr")?,
        kernelpath: s("kernelpath")?,
        pci: s("pciBusID")?,
        dpdk_mode: json::opt_bool(&obj, "DPDKMode", "NetConf.DPDKMode")
            .map_err(|e| e.context(ctx))?
            .unwrap_or(false),
        device_id,
        ipam_type: cniconf::ipam_type(&req.config).map_err(|e| e.context(ctx))?,
        dns: cniconf::dns(&req.config).map_err(|e| e.context(ctx))?,
        data_dir: json::opt_str(&obj, "dataDir", "NetConf.dataDir")
            .map_err(|e| e.context(ctx))?
            .filter(|d| !d.is_empty())
            .map_or_else(|| PathBuf::from(DEFAULT_DATA_DIR), PathBuf::from),
    })
}

/// `deviceID` resolved against sysfs (a PCI or an auxiliary device), a link named, and the
/// PCI device's driver checked for DPDK: the reference's `loadConf` after decoding.
pub fn resolve(mut keys: Keys, sysfs: &Sysfs) -> Result<Conf, Error> {
    let mut aux = String::new();
    if !keys.device_id.is_empty() {
        let id = keys.device_id.clone();
        if sysfs.is_pci_device(&id) {
            keys.pci = id;
        } else if sysfs.is_auxiliary_device(&id) {
            keys.pci.clear();
            aux = id;
        } else {
            return Err(Error::internal(format!(
                "runtime config DeviceID {id} not found or unsupported"
            )));
        }
    }
    let selector = selector(&keys, &aux);
    if selector.is_none() {
        return Err(Error::internal(
            r#"specify either "device", "hwaddr", "kernelpath" or "pciBusID""#,
        ));
    }
    let mut dpdk = keys.dpdk_mode;
    if !keys.pci.is_empty() {
        dpdk = sysfs
            .has_dpdk_driver(&keys.pci)
            .map_err(|e| Error::internal(format!("error with host device: {e}")))?;
    }
    Ok(Conf { keys, selector, dpdk })
}

/// ADD and CHECK's config.
pub fn load(req: &Request, sysfs: &Sysfs) -> Result<Conf, Error> {
    resolve(read(req)?, sysfs)
}

/// DEL's config: what ADD would refuse still names the link and the IPAM to release (see
/// `cni::config::del_config`); a `deviceID` or PCI device sysfs no longer knows counts as
/// not a DPDK device (DEL then moves back whatever ADD moved in under `CNI_IFNAME`).
pub fn load_for_del(req: &Request, sysfs: &Sysfs) -> Conf {
    let keys = cniconf::del_config(
        "host-device",
        || read(req),
        || Keys {
            ipam_type: cniconf::ipam_type(&req.config).ok().flatten(),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            ..Keys::default()
        },
    );
    match resolve(keys.clone(), sysfs) {
        Ok(conf) => conf,
        Err(e) => {
            eprintln!("cnibox host-device: DEL: {}; moving back what ADD moved anyway", e.msg);
            let selector = selector(&keys, "");
            Conf {
                dpdk: keys.dpdk_mode && keys.pci.is_empty(),
                keys,
                selector,
            }
        }
    }
}

fn selector(keys: &Keys, aux: &str) -> Option<Selector> {
    let pick = |s: &str, f: fn(String) -> Selector| (!s.is_empty()).then(|| f(s.to_string()));
    pick(&keys.device, Selector::Device)
        .or_else(|| pick(&keys.hwaddr, Selector::HwAddr))
        .or_else(|| pick(&keys.kernelpath, Selector::KernelPath))
        .or_else(|| pick(&keys.pci, Selector::Pci))
        .or_else(|| pick(aux, Selector::Auxiliary))
}
