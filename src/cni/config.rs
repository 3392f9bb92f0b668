//! Config pieces every plugin reads the same way: the `dns` override rule, `prevResult`,
//! the `runtimeConfig` capabilities and `args.cni` conventions, and where a requested MAC
//! comes from. The config is read as the reference's `types.NetConf` (embedded in every
//! plugin's struct), with Go's rules ([`json::Fields`]).
use super::json::{self, Fields, Json};
use super::result::Dns;
use super::{args, CniResult, Error, Request};

/// The config's fields, as a plugin's Go struct `name` sees them (a config that is not an
/// object fails as Go's decoder does).
pub fn fields<'a>(config: &'a Json, name: &str) -> Result<Fields<'a>, Error> {
    json::as_object(config, name)
}

/// Go's type of the `runtimeConfig` struct of the plugins whose only capability there is
/// `mac` (bridge, macvlan, tuning), as its decode errors name it.
pub const RUNTIME_CONFIG_MAC: &str = r#"struct { Mac string "json:\"mac,omitempty\"" }"#;

/// Decodes the members of the reference's `types.NetConf`. Every reference plugin embeds it
/// in its own config struct (`struct_name`) and so decodes all of it: a member of the wrong
/// type fails the plugin, even one the plugin never uses (`"dns": 5` fails tuning). The
/// plugin adds its context.
pub fn check_net_conf(config: &Json, struct_name: &str) -> Result<(), Error> {
    check_net_conf_but(config, struct_name, &[])
}

/// [`check_net_conf`] for a plugin struct that declares some of the embedded struct's keys
/// again (flannel's `IPAM map[string]interface{}`): Go decodes those into the outer field,
/// which the plugin reads itself, so they are `shadowed` here.
pub fn check_net_conf_but(config: &Json, struct_name: &str, shadowed: &[&str]) -> Result<(), Error> {
    let obj = fields(config, struct_name)?;
    let path = |key: &str| format!("{struct_name}.{key}");
    for key in ["cniVersion", "name", "type"] {
        json::opt_str(&obj, key, &path(key))?;
    }
    if let Some(caps) = json::opt_map(&obj, "capabilities", &path("capabilities"), "map[string]bool")? {
        for v in caps.values().filter(|v| !v.is_null()) {
            v.as_bool()
                .ok_or_else(|| json::type_error(v, &path("capabilities"), "bool"))?;
        }
    }
    if !shadowed.contains(&"ipam") {
        if let Some(ipam) = json::opt_object(&obj, "ipam", &path("ipam"), "types.IPAM")? {
            json::opt_str(&ipam, "type", "IPAM.ipam.type")?;
        }
    }
    if let Some(dns) = json::opt_object(&obj, "dns", &path("dns"), "types.DNS")? {
        Dns::from_fields(&dns, "DNS.dns")?;
    }
    json::opt_map(&obj, "prevResult", &path("prevResult"), "map[string]interface {}")?;
    Ok(())
}

/// The plugin config's own `dns` (absent: every field `None`). Lists keep absent (`None`)
/// apart from empty (`Some([])`), which [`dns_override`] depends on.
pub fn dns(config: &Json) -> Result<Dns, Error> {
    match json::opt_object(&fields(config, "NetConf")?, "dns", "NetConf.dns", "types.DNS")? {
        None => Ok(Dns::default()),
        Some(dns) => Dns::from_fields(&dns, "NetConf.dns"),
    }
}

/// True when the plugin config says anything about DNS: a list is present (even empty)
/// or the domain is non-empty.
pub fn dns_is_set(conf_dns: &Dns) -> bool {
    conf_dns.nameservers.is_some()
        || conf_dns.search.is_some()
        || conf_dns.options.is_some()
        || conf_dns.domain.as_deref().is_some_and(|d| !d.is_empty())
}

/// The DNS of a result: the plugin's own `dns` replaces what IPAM returned only when it
/// says anything ([`dns_is_set`]); otherwise IPAM's stays.
pub fn dns_override(ipam_dns: &Dns, conf_dns: &Dns) -> Dns {
    if dns_is_set(conf_dns) {
        conf_dns.clone()
    } else {
        ipam_dns.clone()
    }
}

/// `prevResult` (a `map[string]interface{}` in `types.NetConf`), parsed as the reference's
/// `version.ParsePrevResult` does (`None` when absent or `null`).
pub fn prev_result(req: &Request) -> Result<Option<CniResult>, Error> {
    let context = "could not parse prevResult";
    let conf = fields(&req.config, "NetConf").map_err(|e| e.context(context))?;
    match json::opt_map(&conf, "prevResult", "NetConf.prevResult", "map[string]interface {}")
        .map_err(|e| e.context(context))?
    {
        None => Ok(None),
        Some(raw) => CniResult::from_prev_result(&Json::Object(json::Object::from_map(&raw)), &req.cni_version)
            .map(Some)
            .map_err(|e| e.context(context)),
    }
}

/// `prevResult` read in the version it declares itself (`None` when absent, `null` or
/// unreadable): for a DEL whose runtime changed versions since ADD.
pub fn prev_result_in_its_own_version(req: &Request) -> Option<CniResult> {
    let conf = fields(&req.config, "NetConf").ok()?;
    let raw = json::opt_map(&conf, "prevResult", "NetConf.prevResult", "map[string]interface {}").ok()??;
    CniResult::from_json(&Json::Object(json::Object::from_map(&raw))).ok()
}

/// The `ipam.type` of a plugin config; `None` when there is no IPAM section or no type
/// (macvlan's L2 mode uses `"ipam": {}`).
pub fn ipam_type(config: &Json) -> Result<Option<String>, Error> {
    let Json::Object(_) = config else {
        return Ok(None);
    };
    let Some(ipam) = json::opt_object(&fields(config, "NetConf")?, "ipam", "NetConf.ipam", "types.IPAM")? else {
        return Ok(None);
    };
    Ok(json::opt_str(&ipam, "type", "NetConf.ipam.type")?
        .filter(|t| !t.is_empty())
        .map(str::to_string))
}

/// The `mtu` a link is created with, from the config's integer: absent, zero or negative
/// leave the kernel's default (Go's netlink sends an MTU only when it is positive); one
/// that no link can have is an error. The plugin adds its context.
pub fn link_mtu(mtu: Option<i64>) -> Result<Option<u32>, Error> {
    match mtu {
        None => Ok(None),
        Some(m) if m <= 0 => Ok(None),
        Some(m) => u32::try_from(m)
            .map(Some)
            .map_err(|_| Error::internal(format!("mtu {m} is out of range"))),
    }
}

/// `runtimeConfig` as injected by the runtime for the capabilities the plugin declared (a
/// struct of Go type `go_type` in the plugin's config struct `struct_name`).
pub fn runtime_config<'a>(config: &'a Json, struct_name: &str, go_type: &str) -> Result<Option<Fields<'a>>, Error> {
    match config {
        Json::Object(_) => json::opt_object(
            &fields(config, struct_name)?,
            "runtimeConfig",
            &format!("{struct_name}.runtimeConfig"),
            go_type,
        ),
        _ => Ok(None),
    }
}

/// `runtimeConfig.mac` (the `mac` capability); empty counts as absent.
pub fn runtime_mac(config: &Json) -> Result<Option<String>, Error> {
    match runtime_config(config, "NetConf", RUNTIME_CONFIG_MAC)? {
        Some(rc) => non_empty(json::opt_str(&rc, "mac", ".runtimeConfig.mac")?),
        None => Ok(None),
    }
}

/// `args.cni` (the CONVENTIONS.md namespace for config-borne arguments), as the bridge
/// plugin declares it (value structs).
fn args_cni(config: &Json) -> Result<Option<Fields<'_>>, Error> {
    let Json::Object(_) = config else {
        return Ok(None);
    };
    let args_type = r#"struct { Cni main.BridgeArgs "json:\"cni,omitempty\"" }"#;
    match json::opt_object(&fields(config, "NetConf")?, "args", "NetConf.args", args_type)? {
        Some(args) => json::opt_object(&args, "cni", ".args.cni", "main.BridgeArgs"),
        None => Ok(None),
    }
}

/// `args.cni.mac`; empty counts as absent.
pub fn args_cni_mac(config: &Json) -> Result<Option<String>, Error> {
    match args_cni(config)? {
        Some(a) => non_empty(json::opt_str(&a, "mac", "BridgeArgs.args.cni.mac")?),
        None => Ok(None),
    }
}

/// `MAC=` from `CNI_ARGS` (the Go plugins' `MacEnvArgs`: unknown keys are errors unless
/// `IgnoreUnknown`); empty counts as absent.
pub fn cni_args_mac(req: &Request) -> Result<Option<String>, Error> {
    let pairs = args::parse(&req.args, &["MAC"])?;
    Ok(args::get(&pairs, "MAC").filter(|m| !m.is_empty()).map(str::to_string))
}

/// The MAC the bridge plugin gives the container interface:
/// `CNI_ARGS` `MAC` < `args.cni.mac` < `runtimeConfig.mac` (later wins). The config's
/// members fail in the bridge's `loadNetConf` context, `CNI_ARGS` in none, as there.
pub fn bridge_requested_mac(req: &Request) -> Result<Option<String>, Error> {
    let decode = |e: Error| e.context("failed to load netconf");
    let from_args = args_cni_mac(&req.config).map_err(decode)?;
    let from_runtime = runtime_mac(&req.config).map_err(decode)?;
    let from_env = cni_args_mac(req)?;
    Ok(from_runtime.or(from_args).or(from_env))
}

/// The MAC the macvlan and tap plugins give the link they create:
/// config `mac` < `CNI_ARGS` `MAC` < `runtimeConfig.mac` (later wins).
pub fn link_requested_mac(req: &Request) -> Result<Option<String>, Error> {
    let decode = |e: Error| e.context("failed to load netconf");
    let from_config = match &req.config {
        Json::Object(_) => {
            non_empty(json::opt_str(&fields(&req.config, "NetConf")?, "mac", "NetConf.mac").map_err(decode)?)?
        }
        _ => None,
    };
    let from_runtime = runtime_mac(&req.config).map_err(decode)?;
    let from_env = cni_args_mac(req)?;
    Ok(from_runtime.or(from_env).or(from_config))
}

/// `cni.dev/valid-attachments` of a GC request as (container ID, ifname) pairs; `None`
/// when the key is absent (nothing can be judged stale then).
pub fn valid_attachments(config: &Json) -> Result<Option<Vec<(String, String)>>, Error> {
    let bad = |what: String| Error::new(super::error::code::DECODING_FAILURE, what);
    let conf = fields(config, "NetConf")?;
    let Some(items) = json::nullable_field(&conf, "cni.dev/valid-attachments", "[]types.GCAttachment", |v| {
        v.as_array()
            .ok_or_else(|| bad("cni.dev/valid-attachments must be a list".into()))
    })?
    else {
        return Ok(None);
    };
    items
        .iter()
        .map(|a| {
            let entry = json::as_object(a, "GCAttachment").ok();
            let get = |key: &str| {
                entry
                    .as_ref()
                    .and_then(|e| json::opt_str(e, key, &format!("GCAttachment.{key}")).ok().flatten())
            };
            match (get("containerID"), get("ifname")) {
                (Some(id), Some(ifname)) => Ok((id.to_string(), ifname.to_string())),
                _ => Err(bad(format!(
                    "cni.dev/valid-attachments: entry {a} needs string containerID and ifname"
                ))),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The config a DEL works with. DEL must undo what ADD made even when the config holds a
/// value ADD refuses (a bad port, an unknown protocol, a rate of the wrong type): a runtime
/// retries a failed DEL until it succeeds (containerd's and kubelet's "failed to destroy
/// network for sandbox"), and the reference fails such a DEL every time. So a config `load`
/// refuses is read again with decoding that skips what does not decode
/// ([`json::leniently`]); when the plugin's own checks still refuse it, `fallback` reads just
/// what DEL needs, leniently too. The refusal goes to stderr.
pub fn del_config<T>(plugin: &str, load: impl Fn() -> Result<T, Error>, fallback: impl FnOnce() -> T) -> T {
    match load() {
        Ok(conf) => conf,
        Err(refused) => {
            eprintln!(
                "cnibox {plugin}: DEL: the config would fail ADD ({}); undoing the attachment anyway",
                refused.msg
            );
            json::leniently(|| load().unwrap_or_else(|_| fallback()))
        }
    }
}

fn non_empty(s: Option<&str>) -> Result<Option<String>, Error> {
    Ok(s.filter(|s| !s.is_empty()).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use serde_json::{json, Value};

    fn req(config: Value, cni_args: &str) -> Request {
        let cni_version = config
            .get("cniVersion")
            .and_then(Value::as_str)
            .unwrap_or("0.1.0")
            .to_string();
        Request {
            command: Command::Add,
            container_id: "c".into(),
            netns: "/x".into(),
            ifname: "eth0".into(),
            args: cni_args.into(),
            path: "/opt/cni/bin".into(),
            stdin: config.to_string().into_bytes(),
            name: "n".into(),
            cni_version,
            config: config.into(),
            applets: None,
        }
    }

    macro_rules! doc {
        ($($t:tt)+) => {
            Json::from(json!($($t)+))
        };
    }

    fn ipam_dns() -> Dns {
        Dns {
            nameservers: Some(vec!["192.0.2.53".into()]),
            domain: Some("ipam.example".into()),
            search: Some(vec!["ipam.example".into()]),
            options: Some(vec!["ndots:5".into()]),
        }
    }

    #[test]
    fn dns_absent_keeps_ipam() {
        let d = dns(&doc!({"name": "n"})).unwrap();
        assert!(!dns_is_set(&d));
        assert_eq!(dns_override(&ipam_dns(), &d), ipam_dns());
        // an empty object or an empty domain says nothing either
        let d = dns(&doc!({"dns": {}})).unwrap();
        assert_eq!(dns_override(&ipam_dns(), &d), ipam_dns());
        let d = dns(&doc!({"dns": {"domain": ""}})).unwrap();
        assert_eq!(dns_override(&ipam_dns(), &d), ipam_dns());
        let d = dns(&doc!({"dns": {"nameservers": null}})).unwrap();
        assert_eq!(dns_override(&ipam_dns(), &d), ipam_dns());
    }

    #[test]
    fn any_single_field_overrides() {
        for conf in [
            json!({"nameservers": ["1.1.1.1"]}),
            json!({"domain": "conf.example"}),
            json!({"search": ["conf.example"]}),
            json!({"options": ["rotate"]}),
        ] {
            let d = dns(&doc!({ "dns": conf })).unwrap();
            assert!(dns_is_set(&d), "{conf}");
            let out = dns_override(&ipam_dns(), &d);
            assert_eq!(out, d, "{conf}");
        }
    }

    #[test]
    fn empty_lists_override_with_nothing() {
        for key in ["nameservers", "search", "options"] {
            let d = dns(&doc!({"dns": { key: [] }})).unwrap();
            let out = dns_override(&ipam_dns(), &d);
            assert!(out.is_empty(), "{key}");
        }
    }

    #[test]
    fn dns_type_errors() {
        let e = dns(&doc!({"dns": {"search": "x"}})).unwrap_err();
        assert_eq!(
            e.msg,
            "json: cannot unmarshal string into Go struct field NetConf.dns.search of type []string"
        );
        assert!(dns(&doc!({"dns": []})).is_err());
    }

    #[test]
    fn prev_result_absent_or_null() {
        assert_eq!(prev_result(&req(json!({"cniVersion": "1.0.0"}), "")).unwrap(), None);
        assert_eq!(
            prev_result(&req(json!({"cniVersion": "1.0.0", "prevResult": null}), "")).unwrap(),
            None
        );
    }

    #[test]
    fn prev_result_same_family_accepted() {
        let r = req(
            json!({"cniVersion": "0.4.0", "prevResult": {"cniVersion": "0.3.1", "ips": [{"version": "4", "address": "10.0.0.5/8"}]}}),
            "",
        );
        let p = prev_result(&r).unwrap().unwrap();
        assert_eq!(p.ips[0].address.to_string(), "10.0.0.5/8");
        let r = req(
            json!({"cniVersion": "1.1.0", "prevResult": {"cniVersion": "1.0.0", "dns": {}}}),
            "",
        );
        assert!(prev_result(&r).unwrap().is_some());
    }

    #[test]
    fn prev_result_other_family_rejected_with_reference_message() {
        let r = req(
            json!({"cniVersion": "1.0.0", "prevResult": {"cniVersion": "0.4.0", "ips": []}}),
            "",
        );
        let e = prev_result(&r).unwrap_err();
        assert_eq!(e.code, 999);
        assert_eq!(
            e.msg,
            r#"could not parse prevResult: result type supports [1.0.0 1.1.0] but unmarshalled CNIVersion is "0.4.0""#
        );
    }

    #[test]
    fn prev_result_without_version_takes_the_configs() {
        let r = req(
            json!({"cniVersion": "1.0.0", "prevResult": {"ips": [{"address": "10.0.0.5/8"}]}}),
            "",
        );
        let p = prev_result(&r).unwrap().unwrap();
        assert_eq!(p.cni_version, "1.0.0");
        assert_eq!(p.ips.len(), 1);
    }

    #[test]
    fn prev_result_not_an_object() {
        let e = prev_result(&req(json!({"cniVersion": "1.0.0", "prevResult": "x"}), "")).unwrap_err();
        assert_eq!(
            e.msg,
            "could not parse prevResult: json: cannot unmarshal string into Go struct field NetConf.prevResult of type map[string]interface {}"
        );
    }

    #[test]
    fn ipam_type_reader() {
        assert_eq!(
            ipam_type(&doc!({"ipam": {"type": "host-local"}})).unwrap().as_deref(),
            Some("host-local")
        );
        assert_eq!(ipam_type(&doc!({"ipam": {}})).unwrap(), None);
        assert_eq!(ipam_type(&doc!({"ipam": {"type": ""}})).unwrap(), None);
        assert_eq!(ipam_type(&doc!({})).unwrap(), None);
        assert!(ipam_type(&doc!({"ipam": {"type": 1}})).is_err());
        assert!(ipam_type(&doc!({"ipam": "host-local"})).is_err());
    }

    #[test]
    fn runtime_config_readers() {
        let c = doc!({"runtimeConfig": {"mac": "c2:11:22:33:44:55", "portMappings": [1]}});
        assert_eq!(runtime_mac(&c).unwrap().as_deref(), Some("c2:11:22:33:44:55"));
        // go-cni's spelling, as containerd sends it
        let c = doc!({"RuntimeConfig": {"Mac": "c2:11:22:33:44:56"}});
        assert_eq!(runtime_mac(&c).unwrap().as_deref(), Some("c2:11:22:33:44:56"));
        assert_eq!(runtime_mac(&doc!({"name": "n"})).unwrap(), None);
        assert_eq!(runtime_mac(&doc!({"runtimeConfig": {"mac": ""}})).unwrap(), None);
        let e = runtime_mac(&doc!({"runtimeConfig": {"mac": 5}})).unwrap_err();
        assert_eq!(
            e.msg,
            "json: cannot unmarshal number into Go struct field .runtimeConfig.mac of type string"
        );
        let e = runtime_config(&doc!({"runtimeConfig": 5}), "NetConf", RUNTIME_CONFIG_MAC).unwrap_err();
        assert_eq!(
            e.msg,
            r#"json: cannot unmarshal number into Go struct field NetConf.runtimeConfig of type struct { Mac string "json:\"mac,omitempty\"" }"#
        );
    }

    #[test]
    fn args_cni_readers() {
        let c = doc!({"args": {"cni": {"ips": ["10.1.2.88"], "mac": "aa:bb:cc:dd:ee:01"}, "other": 1}});
        assert_eq!(args_cni_mac(&c).unwrap().as_deref(), Some("aa:bb:cc:dd:ee:01"));
        assert_eq!(
            args_cni_mac(&doc!({"Args": {"CNI": {"MAC": "aa:bb:cc:dd:ee:02"}}}))
                .unwrap()
                .as_deref(),
            Some("aa:bb:cc:dd:ee:02")
        );
        assert_eq!(args_cni_mac(&doc!({})).unwrap(), None);
        assert!(args_cni_mac(&doc!({"args": {"cni": {"mac": 1}}})).is_err());
    }

    #[test]
    fn every_plugin_decodes_the_whole_net_conf() {
        // the reference's texts (1.1.1 built with Go 1.19 names the innermost struct)
        for (config, msg) in [
            (doc!({"ipam": 5}), "json: cannot unmarshal number into Go struct field TuningConf.ipam of type types.IPAM"),
            (doc!({"dns": 5}), "json: cannot unmarshal number into Go struct field TuningConf.dns of type types.DNS"),
            (doc!({"IPAM": {"Type": 5}}), "json: cannot unmarshal number into Go struct field IPAM.ipam.type of type string"),
            (doc!({"dns": {"nameservers": "x"}}), "json: cannot unmarshal string into Go struct field DNS.dns.nameservers of type []string"),
            (doc!({"capabilities": {"a": "x"}}), "json: cannot unmarshal string into Go struct field TuningConf.capabilities of type bool"),
            (doc!({"prevResult": 5}), "json: cannot unmarshal number into Go struct field TuningConf.prevResult of type map[string]interface {}"),
        ] {
            assert_eq!(check_net_conf(&config, "TuningConf").unwrap_err().msg, msg, "{config}");
        }
        assert!(check_net_conf(
            &doc!({"ipam": {"type": "host-local", "subnet": 5}, "capabilities": {"a": null}}),
            "X"
        )
        .is_ok());
    }

    #[test]
    fn bridge_mac_precedence() {
        let env_mac = "IgnoreUnknown=1;MAC=aa:aa:aa:aa:aa:01;K8S_POD_NAME=p";
        let args = json!({"cni": {"mac": "aa:aa:aa:aa:aa:02"}});
        let rc = json!({"mac": "aa:aa:aa:aa:aa:03"});
        let m = |config: Value, a: &str| bridge_requested_mac(&req(config, a)).unwrap();
        assert_eq!(m(json!({}), ""), None);
        assert_eq!(m(json!({}), env_mac).as_deref(), Some("aa:aa:aa:aa:aa:01"));
        assert_eq!(m(json!({"args": args}), env_mac).as_deref(), Some("aa:aa:aa:aa:aa:02"));
        assert_eq!(
            m(json!({"args": args, "runtimeConfig": rc}), env_mac).as_deref(),
            Some("aa:aa:aa:aa:aa:03")
        );
        assert_eq!(
            m(json!({"runtimeConfig": rc}), "").as_deref(),
            Some("aa:aa:aa:aa:aa:03")
        );
        // empty values do not override
        assert_eq!(
            m(
                json!({"args": {"cni": {"mac": ""}}, "runtimeConfig": {"mac": ""}}),
                env_mac
            )
            .as_deref(),
            Some("aa:aa:aa:aa:aa:01")
        );
        // the bridge's config `mac` key is not a source
        assert_eq!(m(json!({"mac": "aa:aa:aa:aa:aa:04"}), ""), None);
    }

    #[test]
    fn valid_attachments_reader() {
        assert_eq!(valid_attachments(&doc!({})).unwrap(), None);
        assert_eq!(
            valid_attachments(&doc!({"cni.dev/valid-attachments": []})).unwrap(),
            Some(vec![])
        );
        assert_eq!(
            valid_attachments(&doc!({"cni.dev/valid-attachments": [{"containerID": "a", "ifname": "eth0"}]})).unwrap(),
            Some(vec![("a".to_string(), "eth0".to_string())])
        );
        let e = valid_attachments(&doc!({"cni.dev/valid-attachments": [{"containerID": "a"}]})).unwrap_err();
        assert_eq!(e.code, 6);
        assert!(valid_attachments(&doc!({"cni.dev/valid-attachments": "x"})).is_err());
    }

    #[test]
    fn macvlan_mac_precedence() {
        let m = |config: Value, a: &str| link_requested_mac(&req(config, a)).unwrap();
        let conf_mac = json!({"mac": "aa:aa:aa:aa:aa:01"});
        assert_eq!(m(json!({}), ""), None);
        assert_eq!(m(conf_mac.clone(), "").as_deref(), Some("aa:aa:aa:aa:aa:01"));
        assert_eq!(
            m(conf_mac.clone(), "IgnoreUnknown=true;MAC=aa:aa:aa:aa:aa:02").as_deref(),
            Some("aa:aa:aa:aa:aa:02")
        );
        let mut both = conf_mac.clone();
        both["runtimeConfig"] = json!({"mac": "aa:aa:aa:aa:aa:03"});
        assert_eq!(m(both, "MAC=aa:aa:aa:aa:aa:02").as_deref(), Some("aa:aa:aa:aa:aa:03"));
        // args.cni.mac is not a macvlan source
        assert_eq!(m(json!({"args": {"cni": {"mac": "aa:aa:aa:aa:aa:05"}}}), ""), None);
    }

    #[test]
    fn cni_args_errors_surface() {
        let e = bridge_requested_mac(&req(json!({}), "K8S_POD_NAME=p")).unwrap_err();
        assert_eq!(e.msg, r#"ARGS: unknown args ["K8S_POD_NAME=p"]"#);
        let e = link_requested_mac(&req(json!({}), "MAC")).unwrap_err();
        assert_eq!(e.msg, r#"ARGS: invalid pair "MAC""#);
    }

    #[test]
    fn del_config_reads_what_add_refuses() {
        let doc = Json::from(json!({"mtu": "x", "port": 0}));
        let load = || -> Result<(Option<i64>, i64), Error> {
            let o = json::as_object(&doc, "C")?;
            let port = json::opt_int(&o, "port", "C.port")?.unwrap_or(0);
            if port == 0 {
                return Err(Error::internal("Invalid container port number: 0"));
            }
            Ok((json::opt_int(&o, "mtu", "C.mtu")?, port))
        };
        assert!(load().is_err());
        assert_eq!(del_config("test", load, || (None, -1)), (None, -1));
        let mtu_only = || json::opt_int(&json::as_object(&doc, "C")?, "mtu", "C.mtu");
        assert_eq!(del_config("test", mtu_only, || Some(7)), None, "lenient decoding");
    }

    #[test]
    fn link_mtu_means_the_same_in_every_plugin() {
        assert_eq!(link_mtu(None).unwrap(), None);
        assert_eq!(link_mtu(Some(0)).unwrap(), None, "zero: the kernel's default");
        assert_eq!(link_mtu(Some(-1)).unwrap(), None, "negative: not sent, as Go's netlink");
        assert_eq!(link_mtu(Some(1400)).unwrap(), Some(1400));
        let e = link_mtu(Some(1 << 33)).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (999, "mtu 8589934592 is out of range"));
    }
}
