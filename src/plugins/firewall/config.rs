//! The firewall plugin's keys: `backend`, `iptablesAdminChainName`, `ingressPolicy`,
//! `dataDir` (cnibox's: where the iptables backend records each attachment's addresses),
//! and `firewalldZone` (read for compatibility; only the firewalld backend, which cnibox
//! does not have, would use it).
use crate::cni::error::code;
use crate::cni::json;
use crate::cni::{Error, Request};

/// Where the rules go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The reference layout in the filter table (the default, as in the reference when
    /// firewalld is not running).
    Iptables,
    /// Table `inet cni_plugins_firewall` over nf_tables netlink (no process).
    Nftables,
}

/// `backend` as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendSetting {
    Known(Backend),
    /// The reference's D-Bus backend: not supported, ADD and CHECK say so.
    Firewalld,
    /// Anything else: an error for ADD and CHECK; DEL cleans up what the reference, which
    /// silently uses iptables for it, would have set up.
    Unknown(String),
}

/// `ingressPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngressPolicy {
    /// Everything may reach the container (`""` or `"open"`).
    Open,
    /// Only the container's own bridge may reach it.
    SameBridge,
    /// Not even the own bridge (Docker's `enable_icc=false`).
    Isolated,
}

impl IngressPolicy {
    pub fn name(self) -> &'static str {
        match self {
            IngressPolicy::Open => "open",
            IngressPolicy::SameBridge => "same-bridge",
            IngressPolicy::Isolated => "isolated",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conf {
    pub backend: BackendSetting,
    pub admin_chain: String,
    pub data_dir: std::path::PathBuf,
    /// Err: the value of an unknown `ingressPolicy`.
    pub ingress: Result<IngressPolicy, String>,
}

/// The reference's defaults: what a config without the firewall's own keys means.
impl Default for Conf {
    fn default() -> Conf {
        Conf {
            backend: BackendSetting::Known(Backend::Iptables),
            admin_chain: DEFAULT_ADMIN_CHAIN.to_string(),
            data_dir: super::records::DEFAULT_DATA_DIR.into(),
            ingress: Ok(IngressPolicy::Open),
        }
    }
}

/// The reference's default admin chain.
pub const DEFAULT_ADMIN_CHAIN: &str = "CNI-ADMIN";
/// iptables chain names are at most 28 characters (XT_EXTENSION_MAXNAMELEN - 1).
pub const CHAIN_NAME_MAX: usize = 28;

pub fn load(req: &Request) -> Result<Conf, Error> {
    let ctx = "failed to load netconf";
    crate::cni::config::check_net_conf(&req.config, "FirewallNetConf").map_err(|e| e.context(ctx))?;
    let obj = json::as_object(&req.config, "FirewallNetConf").map_err(|e| e.context(ctx))?;
    let text = |key: &str| -> Result<String, Error> {
        Ok(json::opt_str(&obj, key, &format!("FirewallNetConf.{key}"))
            .map_err(|e| e.context(ctx))?
            .unwrap_or_default()
            .to_string())
    };
    let backend = match text("backend")?.as_str() {
        "" | "iptables" => BackendSetting::Known(Backend::Iptables),
        "nftables" => BackendSetting::Known(Backend::Nftables),
        "firewalld" => BackendSetting::Firewalld,
        other => BackendSetting::Unknown(other.to_string()),
    };
    let ingress = match text("ingressPolicy")?.as_str() {
        "" | "open" => Ok(IngressPolicy::Open),
        "same-bridge" => Ok(IngressPolicy::SameBridge),
        "isolated" => Ok(IngressPolicy::Isolated),
        other => Err(other.to_string()),
    };
    text("firewalldZone")?;
    let admin_chain = match text("iptablesAdminChainName")? {
        s if s.is_empty() => DEFAULT_ADMIN_CHAIN.to_string(),
        s => s,
    };
    let data_dir = match text("dataDir")? {
        s if s.is_empty() => super::records::DEFAULT_DATA_DIR.into(),
        s => s.into(),
    };
    Ok(Conf {
        backend,
        admin_chain,
        data_dir,
        ingress,
    })
}

impl Conf {
    /// The backend for ADD and CHECK: unknown and firewalld are errors naming the value.
    pub fn backend_for_setup(&self) -> Result<Backend, Error> {
        match &self.backend {
            BackendSetting::Known(b) => Ok(*b),
            BackendSetting::Firewalld => Err(Error::new(
                code::UNSUPPORTED_FIELD,
                "unsupported field in network configuration: backend \"firewalld\" \
                 (cnibox does not talk D-Bus to firewalld; use \"iptables\" or \"nftables\")",
            )),
            BackendSetting::Unknown(other) => Err(Error::new(
                code::INVALID_NETWORK_CONFIG,
                format!(
                    "unknown firewall backend {} (iptables, nftables)",
                    crate::cni::version::go_quote(other)
                ),
            )),
        }
    }

    /// The backend whose rules DEL removes; None for firewalld (ADD never made any).
    pub fn backend_for_del(&self) -> Option<Backend> {
        match &self.backend {
            BackendSetting::Known(b) => Some(*b),
            BackendSetting::Firewalld => None,
            BackendSetting::Unknown(_) => Some(Backend::Iptables),
        }
    }

    /// The ingress policy; an unknown one is the reference's error.
    pub fn ingress_policy(&self) -> Result<IngressPolicy, Error> {
        self.ingress.clone().map_err(|other| {
            Error::internal(format!(
                "unknown ingress policy: {}",
                crate::cni::version::go_quote(&other)
            ))
        })
    }

    /// The admin chain name, checked: it goes into restore input and nft names.
    pub fn checked_admin_chain(&self) -> Result<&str, Error> {
        let c = &self.admin_chain;
        let bad = c.len() > CHAIN_NAME_MAX
            || c.starts_with(['-', '!'])
            || c.chars()
                .any(|ch| ch.is_whitespace() || ch.is_control() || ch == '"' || ch == '\'');
        if bad {
            return Err(Error::new(
                code::INVALID_NETWORK_CONFIG,
                format!(
                    "invalid iptablesAdminChainName {}: at most {CHAIN_NAME_MAX} characters, \
                     no blanks or quotes, not starting with '-' or '!'",
                    crate::cni::version::go_quote(c)
                ),
            ));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::plugin::Command;
    use serde_json::json;

    fn conf(v: serde_json::Value) -> Result<Conf, Error> {
        load(&Request::from_config(Command::Add, v))
    }

    #[test]
    fn defaults_are_the_reference_defaults() {
        let c = conf(json!({"name": "n"})).unwrap();
        assert_eq!(c.backend, BackendSetting::Known(Backend::Iptables));
        assert_eq!(c.admin_chain, "CNI-ADMIN");
        assert_eq!(c.ingress, Ok(IngressPolicy::Open));
    }

    #[test]
    fn wrong_types_are_go_decode_errors() {
        let e = conf(json!({"backend": 3})).unwrap_err();
        assert_eq!(e.code, 999);
        assert_eq!(
            e.msg,
            "failed to load netconf: json: cannot unmarshal number into Go struct field FirewallNetConf.backend of type string"
        );
    }

    #[test]
    fn unknown_and_unsupported_values_name_themselves() {
        let c = conf(json!({"backend": "pf", "ingressPolicy": "closed"})).unwrap();
        assert_eq!(c.backend_for_del(), Some(Backend::Iptables));
        let e = c.backend_for_setup().unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (7, "unknown firewall backend \"pf\" (iptables, nftables)")
        );
        assert_eq!(
            c.ingress_policy().unwrap_err().msg,
            "unknown ingress policy: \"closed\""
        );
        let fw = conf(json!({"backend": "firewalld"}))
            .unwrap()
            .backend_for_setup()
            .unwrap_err();
        assert_eq!(fw.code, 2);
        assert!(fw.msg.contains("\"firewalld\""), "{}", fw.msg);
        assert_eq!(conf(json!({"backend": "firewalld"})).unwrap().backend_for_del(), None);
        let nft = conf(json!({"backend": "nftables"})).unwrap();
        assert_eq!(nft.backend_for_setup().unwrap(), Backend::Nftables);
    }

    #[test]
    fn admin_chain_names_are_checked() {
        let ok = conf(json!({"iptablesAdminChainName": "MY-ADMIN"})).unwrap();
        assert_eq!(ok.checked_admin_chain().unwrap(), "MY-ADMIN");
        for bad in ["x".repeat(29), "a b".into(), "-X".into(), "a\"b".into(), "a\nb".into()] {
            let c = conf(json!({ "iptablesAdminChainName": bad })).unwrap();
            assert_eq!(c.checked_admin_chain().unwrap_err().code, 7, "{bad:?}");
        }
    }
}
