//! The bridge plugin's config: every key of the reference `NetConf`, read the way Go's
//! `encoding/json` fills the struct (absent and `null` leave the default, a wrong type is an
//! error naming the field), plus the reference's validation and messages.
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::json::{Fields, Json};
use crate::cni::result::Dns;
use crate::cni::{Error, Request};

/// `bridge` when the config names none.
pub const DEFAULT_BRIDGE: &str = "cni0";

/// The highest VLAN id a port may carry (4095 is reserved).
const VLAN_MAX: i64 = 4094;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetConf {
    pub network: String,
    pub bridge: String,
    /// `isGateway`, also set by `isDefaultGateway`.
    pub is_gateway: bool,
    pub is_default_gateway: bool,
    pub force_address: bool,
    pub ip_masq: bool,
    pub ip_masq_backend: Option<String>,
    /// `mtu`; 0 or absent leaves the kernel default.
    pub mtu: Option<u32>,
    pub hairpin: bool,
    pub promisc: bool,
    /// `vlan`: the port's access (native) VLAN; 0 for none.
    pub vlan: u16,
    /// `vlanTrunk`, flattened, sorted and de-duplicated; `Some` whenever the key is present
    /// (even `[]`), because presence alone turns VLAN filtering on.
    pub vlan_trunk: Option<Vec<u16>>,
    pub preserve_default_vlan: bool,
    pub enable_dad: bool,
    pub macspoofchk: bool,
    pub disable_container_interface: bool,
    pub port_isolation: bool,
    /// `ipam.type`; None means L2 only.
    pub ipam_type: Option<String>,
    /// The config's own `dns` (absent lists kept apart from empty ones).
    pub dns: Dns,
    /// The requested container MAC: `CNI_ARGS` `MAC` < `args.cni.mac` < `runtimeConfig.mac`.
    pub mac: Option<String>,
}

impl NetConf {
    /// Whether the bridge needs VLAN filtering (a VLAN or any `vlanTrunk` key).
    pub fn vlan_filtering(&self) -> bool {
        self.vlan != 0 || self.vlan_trunk.is_some()
    }

    /// The trunk VLANs (empty when none).
    pub fn trunk(&self) -> &[u16] {
        self.vlan_trunk.as_deref().unwrap_or(&[])
    }

    pub fn is_layer3(&self) -> bool {
        self.ipam_type.is_some()
    }
}

fn failed_to_load(e: Error) -> Error {
    e.context("failed to load netconf")
}

fn bool_key(obj: &Fields, key: &str) -> Result<bool, Error> {
    json::opt_bool(obj, key, &format!("NetConf.{key}"))
        .map(|b| b.unwrap_or(false))
        .map_err(failed_to_load)
}

fn int_key(obj: &Fields, key: &str) -> Result<i64, Error> {
    json::opt_int(obj, key, &format!("NetConf.{key}"))
        .map(|n| n.unwrap_or(0))
        .map_err(failed_to_load)
}

/// Parse and validate the config of a request (every verb: CNI_ARGS errors fail DEL too, as
/// in the reference, whose `loadNetConf` parses them).
pub fn load(req: &Request) -> Result<NetConf, Error> {
    cniconf::check_net_conf(&req.config, "NetConf").map_err(failed_to_load)?;
    let obj = json::as_object(&req.config, "NetConf").map_err(failed_to_load)?;
    let bridge = json::opt_str(&obj, "bridge", "NetConf.bridge")
        .map_err(failed_to_load)?
        .filter(|b| !b.is_empty())
        .unwrap_or(DEFAULT_BRIDGE)
        .to_string();
    let is_default_gateway = bool_key(&obj, "isDefaultGateway")?;
    let mtu = json::opt_int(&obj, "mtu", "NetConf.mtu")
        .and_then(cniconf::link_mtu)
        .map_err(failed_to_load)?;
    let vlan = int_key(&obj, "vlan")?;
    let ip_masq_backend = json::opt_str(&obj, "ipMasqBackend", "NetConf.ipMasqBackend")
        .map_err(failed_to_load)?
        .filter(|b| !b.is_empty())
        .map(str::to_string);
    // a pointer-free slice: `null` clears it, and presence alone (even `[]`) turns VLAN
    // filtering on
    let trunk_value = json::opt_raw(&obj, "vlanTrunk");
    let mut conf = NetConf {
        network: req.name.clone(),
        bridge,
        is_gateway: bool_key(&obj, "isGateway")? || is_default_gateway,
        is_default_gateway,
        force_address: bool_key(&obj, "forceAddress")?,
        ip_masq: bool_key(&obj, "ipMasq")?,
        ip_masq_backend,
        mtu,
        hairpin: bool_key(&obj, "hairpinMode")?,
        promisc: bool_key(&obj, "promiscMode")?,
        vlan: 0,
        vlan_trunk: None,
        preserve_default_vlan: bool_key(&obj, "preserveDefaultVlan")?,
        enable_dad: bool_key(&obj, "enabledad")?,
        macspoofchk: bool_key(&obj, "macspoofchk")?,
        disable_container_interface: bool_key(&obj, "disableContainerInterface")?,
        port_isolation: bool_key(&obj, "portIsolation")?,
        ipam_type: cniconf::ipam_type(&req.config).map_err(failed_to_load)?,
        dns: cniconf::dns(&req.config).map_err(failed_to_load)?,
        mac: None,
    };
    if !(0..=VLAN_MAX).contains(&vlan) {
        return Err(Error::internal(format!(
            "invalid VLAN ID {vlan} (must be between 0 and {VLAN_MAX})"
        )));
    }
    conf.vlan = vlan as u16;
    if let Some(v) = trunk_value {
        conf.vlan_trunk = Some(parse_trunk(v)?);
    }
    conf.mac = cniconf::bridge_requested_mac(req)?;
    Ok(conf)
}

/// What DEL needs of a config [`load`] refuses even when read leniently (a VLAN id out of
/// range, a bad `CNI_ARGS` MAC): the bridge, the masquerade and spoof-check settings and the
/// IPAM type, each read on its own so one bad member costs only itself.
pub fn for_del(req: &Request) -> NetConf {
    let obj = json::as_object(&req.config, "NetConf").unwrap_or_default();
    let flag = |key: &str| bool_key(&obj, key).unwrap_or(false);
    NetConf {
        network: req.name.clone(),
        bridge: json::opt_str(&obj, "bridge", "NetConf.bridge")
            .ok()
            .flatten()
            .filter(|b| !b.is_empty())
            .unwrap_or(DEFAULT_BRIDGE)
            .to_string(),
        is_gateway: false,
        is_default_gateway: false,
        force_address: false,
        ip_masq: flag("ipMasq"),
        ip_masq_backend: json::opt_str(&obj, "ipMasqBackend", "NetConf.ipMasqBackend")
            .ok()
            .flatten()
            .filter(|b| !b.is_empty())
            .map(str::to_string),
        mtu: None,
        hairpin: false,
        promisc: false,
        vlan: 0,
        vlan_trunk: None,
        preserve_default_vlan: false,
        enable_dad: false,
        macspoofchk: flag("macspoofchk"),
        disable_container_interface: flag("disableContainerInterface"),
        port_isolation: false,
        ipam_type: cniconf::ipam_type(&req.config).ok().flatten(),
        dns: Dns::default(),
        mac: None,
    }
}

/// `vlanTrunk`: `[{"id": N} | {"minID": A, "maxID": B} | both]`, as the reference reads it
/// (ranges first, then the single id of the same entry), sorted and de-duplicated.
pub fn parse_trunk(v: &Json) -> Result<Vec<u16>, Error> {
    let items = match v {
        Json::Array(items) => items,
        other => {
            return Err(failed_to_load(json::type_error(
                other,
                "NetConf.vlanTrunk",
                "[]*main.VlanTrunk",
            )))
        }
    };
    let in_range = |n: i64| (1..=VLAN_MAX).contains(&n);
    // A bitmap of the ids: sorted and de-duplicated by construction, without the code of a
    // `BTreeSet<u16>` (1.9 KB).
    let mut chosen = vec![false; VLAN_MAX as usize + 1];
    for item in items {
        let obj = json::as_object(item, "NetConf.vlanTrunk").map_err(failed_to_load)?;
        // `*int` members: `null` clears them
        let field = |k: &str| {
            let path = format!("VlanTrunk.{k}");
            json::nullable_field(&obj, k, "*int", |v| json::int_of(v, &path, "int")).map_err(failed_to_load)
        };
        let (min, max, id) = (field("minID")?, field("maxID")?, field("id")?);
        match (min, max) {
            (Some(min), Some(max)) => {
                if !in_range(min) {
                    return Err(Error::internal("incorrect trunk minID parameter"));
                }
                if !in_range(max) {
                    return Err(Error::internal("incorrect trunk maxID parameter"));
                }
                if max < min {
                    return Err(Error::internal("minID is greater than maxID in trunk parameter"));
                }
                chosen[min as usize..=max as usize].fill(true);
            }
            (None, Some(_)) => {
                return Err(Error::internal(
                    "minID and maxID should be configured simultaneously, minID is missing",
                ))
            }
            (Some(_), None) => {
                return Err(Error::internal(
                    "minID and maxID should be configured simultaneously, maxID is missing",
                ))
            }
            (None, None) => {}
        }
        if let Some(id) = id {
            if !in_range(id) {
                return Err(Error::internal("incorrect trunk id parameter"));
            }
            chosen[id as usize] = true;
        }
    }
    Ok((1..=VLAN_MAX as u16).filter(|v| chosen[usize::from(*v)]).collect())
}

/// The checks the reference makes at the start of ADD, before touching anything.
pub fn validate_for_add(conf: &NetConf) -> Result<(), Error> {
    if conf.is_layer3() && conf.disable_container_interface {
        return Err(Error::internal(
            "cannot use IPAM when DisableContainerInterface flag is set",
        ));
    }
    if conf.hairpin && conf.promisc {
        return Err(Error::internal(
            "cannot set hairpin mode and promiscuous mode at the same time",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use serde_json::{json, Value};

    fn req(config: Value, cni_args: &str) -> Request {
        Request {
            command: Command::Add,
            container_id: "c".into(),
            netns: "/x".into(),
            ifname: "eth0".into(),
            args: cni_args.into(),
            path: "/opt/cni/bin".into(),
            stdin: config.to_string().into_bytes(),
            name: "n".into(),
            cni_version: "1.0.0".into(),
            config: config.into(),
            applets: None,
        }
    }

    fn load_json(v: Value) -> Result<NetConf, Error> {
        load(&req(v, ""))
    }

    #[test]
    fn defaults() {
        let c = load_json(json!({"name": "n"})).unwrap();
        assert_eq!(c.bridge, "cni0");
        assert!(!c.is_gateway && !c.ip_masq && !c.preserve_default_vlan);
        assert_eq!(c.mtu, None);
        assert_eq!(c.vlan_trunk, None);
        assert!(!c.vlan_filtering());
        assert!(!c.is_layer3());
    }

    #[test]
    fn default_gateway_implies_gateway() {
        let c = load_json(json!({"isDefaultGateway": true})).unwrap();
        assert!(c.is_gateway);
    }

    #[test]
    fn vlan_ids_are_checked() {
        assert_eq!(load_json(json!({"vlan": 0})).unwrap().vlan, 0);
        assert_eq!(load_json(json!({"vlan": 4094})).unwrap().vlan, 4094);
        for bad in [-100, 5000, 4095] {
            let e = load_json(json!({ "vlan": bad })).unwrap_err();
            assert_eq!(e.msg, format!("invalid VLAN ID {bad} (must be between 0 and 4094)"));
            assert_eq!(e.code, 999);
        }
    }

    #[test]
    fn trunk_table() {
        let t = |v: Value| parse_trunk(&v.into());
        assert_eq!(t(json!([])).unwrap(), Vec::<u16>::new());
        assert_eq!(
            t(json!([{"minID": 100, "maxID": 103}])).unwrap(),
            vec![100, 101, 102, 103]
        );
        assert_eq!(t(json!([{"id": 100}])).unwrap(), vec![100]);
        assert_eq!(
            t(json!([{"id": 105}, {"minID": 100, "maxID": 103}, {"id": 101}])).unwrap(),
            vec![100, 101, 102, 103, 105]
        );
        let cases = [
            (
                json!([{"minID": 100}]),
                "minID and maxID should be configured simultaneously, maxID is missing",
            ),
            (
                json!([{"maxID": 100}]),
                "minID and maxID should be configured simultaneously, minID is missing",
            ),
            (json!([{"minID": 0, "maxID": 100}]), "incorrect trunk minID parameter"),
            (
                json!([{"minID": 5000, "maxID": 100}]),
                "incorrect trunk minID parameter",
            ),
            (json!([{"minID": 1, "maxID": 0}]), "incorrect trunk maxID parameter"),
            (json!([{"minID": 1, "maxID": 5000}]), "incorrect trunk maxID parameter"),
            (json!([{"id": 0}]), "incorrect trunk id parameter"),
            (json!([{"id": 5000}]), "incorrect trunk id parameter"),
            (
                json!([{"minID": 200, "maxID": 100}]),
                "minID is greater than maxID in trunk parameter",
            ),
        ];
        for (v, msg) in cases {
            assert_eq!(t(v.clone()).unwrap_err().msg, msg, "{v}");
        }
    }

    #[test]
    fn trunk_presence_turns_filtering_on() {
        let c = load_json(json!({"vlanTrunk": []})).unwrap();
        assert_eq!(c.vlan_trunk, Some(vec![]));
        assert!(c.vlan_filtering());
        let c = load_json(json!({"vlanTrunk": null})).unwrap();
        assert!(!c.vlan_filtering());
    }

    #[test]
    fn type_errors_name_the_field() {
        let e = load_json(json!({"mtu": "1500"})).unwrap_err();
        assert_eq!(
            e.msg,
            "failed to load netconf: json: cannot unmarshal string into Go struct field NetConf.mtu of type int"
        );
        let e = load_json(json!({"isGateway": "yes"})).unwrap_err();
        assert!(e.msg.contains("NetConf.isGateway of type bool"), "{}", e.msg);
    }

    #[test]
    fn add_checks() {
        let c = load_json(json!({"ipam": {"type": "host-local"}, "disableContainerInterface": true})).unwrap();
        assert_eq!(
            validate_for_add(&c).unwrap_err().msg,
            "cannot use IPAM when DisableContainerInterface flag is set"
        );
        let c = load_json(json!({"hairpinMode": true, "promiscMode": true})).unwrap();
        assert_eq!(
            validate_for_add(&c).unwrap_err().msg,
            "cannot set hairpin mode and promiscuous mode at the same time"
        );
        let c = load_json(json!({"ipam": {}, "disableContainerInterface": true})).unwrap();
        assert!(validate_for_add(&c).is_ok());
    }

    #[test]
    fn cni_args_are_parsed_on_every_verb() {
        let e = load(&req(json!({}), "FOO=bar")).unwrap_err();
        assert_eq!(e.msg, r#"ARGS: unknown args ["FOO=bar"]"#);
        let c = load(&req(
            json!({"runtimeConfig": {"mac": "c2:11:22:33:44:55"}}),
            "MAC=c2:11:22:33:44:66",
        ))
        .unwrap();
        assert_eq!(c.mac.as_deref(), Some("c2:11:22:33:44:55"));
    }
}
