//! The dhcp IPAM config, read as the reference's `NetConf` with its `*IPAMConfig` (which
//! shadows `types.NetConf`'s `ipam`), and the DHCP options it asks for: what the client
//! provides (`provide`: a value or one taken from `CNI_ARGS`) and the parameters it
//! requests (`request`), prepared as the reference's `prepareOptions` does.
use super::message::opt;
use crate::cni::json::{self, Fields, Json};
use crate::cni::version::go_quote;
use crate::cni::{config as cniconf, Error};
use std::path::PathBuf;

/// The daemon's socket when the config names none (and the daemon's default).
pub const DEFAULT_SOCKET: &str = "/run/cni/dhcp.sock";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpamConfig {
    /// `daemonSocketPath`; empty is the default.
    pub socket_path: String,
    pub provide: Vec<Provide>,
    pub request: Vec<RequestOption>,
    /// `priority`: the metric of every route of the result (0: none).
    pub priority: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provide {
    pub option: String,
    pub value: String,
    pub from_arg: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestOption {
    pub skip_default: bool,
    pub option: String,
}

impl IpamConfig {
    /// The config as the reference decodes it; the error is Go's decoder's.
    pub fn read(config: &Json) -> Result<IpamConfig, Error> {
        cniconf::check_net_conf_but(config, "NetConf", &["ipam"])?;
        let top = cniconf::fields(config, "NetConf")?;
        let Some(ipam) = json::opt_ptr_object(&top, "ipam", "NetConf.ipam", "main.IPAMConfig")? else {
            // the reference dereferences the nil pointer and crashes; the defaults serve
            return Ok(IpamConfig::default());
        };
        let path = |k: &str| format!("IPAMConfig.ipam.{k}");
        json::opt_str(&ipam, "type", &path("type"))?;
        let mut provide = vec![];
        for item in list(&ipam, "provide", "[]main.ProvideOption")? {
            let o = json::as_struct(item, "IPAMConfig.ipam.provide", "main.ProvideOption")?;
            let p = |k: &str| format!("ProvideOption.ipam.provide.{k}");
            provide.push(Provide {
                option: str_of(json::value_field(&o, "option", "main.DHCPOption", |v| {
                    v.as_str()
                        .ok_or_else(|| json::type_error(v, &p("option"), "main.DHCPOption"))
                })?),
                value: str_of(json::opt_str(&o, "value", &p("value"))?),
                from_arg: str_of(json::opt_str(&o, "fromArg", &p("fromArg"))?),
            });
        }
        let mut request = vec![];
        for item in list(&ipam, "request", "[]main.RequestOption")? {
            let o = json::as_struct(item, "IPAMConfig.ipam.request", "main.RequestOption")?;
            let p = |k: &str| format!("RequestOption.ipam.request.{k}");
            request.push(RequestOption {
                skip_default: json::opt_bool(&o, "skipDefault", &p("skipDefault"))?.unwrap_or(false),
                option: str_of(json::value_field(&o, "option", "main.DHCPOption", |v| {
                    v.as_str()
                        .ok_or_else(|| json::type_error(v, &p("option"), "main.DHCPOption"))
                })?),
            });
        }
        Ok(IpamConfig {
            socket_path: str_of(json::opt_str(&ipam, "daemonSocketPath", &path("daemonSocketPath"))?),
            provide,
            request,
            priority: json::opt_int(&ipam, "priority", &path("priority"))?.unwrap_or(0),
        })
    }

    /// Where the daemon listens.
    pub fn socket(&self) -> PathBuf {
        match self.socket_path.as_str() {
            "" => PathBuf::from(DEFAULT_SOCKET),
            p => PathBuf::from(p),
        }
    }
}

fn str_of(s: Option<&str>) -> String {
    s.unwrap_or_default().to_string()
}

fn list<'a>(ipam: &Fields<'a>, key: &str, go_type: &str) -> Result<&'a [Json], Error> {
    Ok(json::opt_list(ipam, key, &format!("IPAMConfig.ipam.{key}"), go_type)?.unwrap_or(&[]))
}

/// The client identifier of an attachment (without its type byte): the reference's, so a
/// lease keeps its identity across the two daemons. Longer ones are cut to 254 bytes,
/// which with the type byte is the most option 61 holds.
pub fn client_id(container_id: &str, network: &str, ifname: &str) -> String {
    let id = format!("{container_id}/{network}/{ifname}");
    let mut cut = id.len().min(254);
    while !id.is_char_boundary(cut) {
        cut -= 1;
    }
    id[..cut].to_string()
}

/// The options every client message of a lease carries beyond the protocol's own: the
/// provided values by code (the last one given for a code wins, as the reference's
/// `Options.Update`), and the parameter request list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub provided: Vec<(u8, Vec<u8>)>,
    pub requested: Vec<u8>,
}

/// What the reference's client requests when nothing else is asked for.
const LIBRARY_REQUEST_LIST: [u8; 4] = [opt::SUBNET_MASK, opt::ROUTER, 15, 6];
/// What the reference adds to `request` unless `skipDefault`.
const DEFAULT_REQUESTS: [u8; 2] = [opt::ROUTER, opt::SUBNET_MASK];

/// The reference's `prepareOptions`: the option names, the values and `CNI_ARGS` looked
/// up; its errors.
pub fn prepare(cni_args: &str, conf: &IpamConfig) -> Result<Options, String> {
    let args: Vec<(&str, &str)> = cni_args.split(';').filter_map(|pair| pair.split_once('=')).collect();
    let arg = |key: &str| args.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let mut out = Options::default();
    let mut provide = |code: u8, value: &str| {
        out.provided.retain(|(c, _)| *c != code);
        out.provided.push((code, value.as_bytes().to_vec()));
    };
    for p in &conf.provide {
        let code = option_code(&p.option)?;
        if !p.value.is_empty() {
            if p.value.len() > 255 {
                return Err(format!(
                    "value too long for option {}: {}",
                    go_quote(&p.option),
                    go_quote(&p.value)
                ));
            }
            provide(code, &p.value);
        }
        if let Some(value) = arg(&p.from_arg) {
            if value.len() > 255 {
                // the reference quotes the option's own value here, not the argument's
                return Err(format!(
                    "value too long for option {} from CNI_ARGS {}: {}",
                    go_quote(&p.option),
                    go_quote(&p.from_arg),
                    go_quote(&p.value)
                ));
            }
            provide(code, value);
        }
    }
    crate::util::sort::sort_by_key(&mut out.provided, |(c, _)| *c);
    let mut skip_default = false;
    for r in &conf.request {
        skip_default |= r.skip_default;
        if r.option.is_empty() {
            continue;
        }
        let code = option_code(&r.option)?;
        if !out.requested.contains(&code) {
            out.requested.push(code);
        }
    }
    if !skip_default {
        for code in DEFAULT_REQUESTS {
            if !out.requested.contains(&code) {
                out.requested.push(code);
            }
        }
    }
    if out.requested.is_empty() {
        out.requested = LIBRARY_REQUEST_LIST.to_vec();
    }
    Ok(out)
}

/// An option by its dhcp-options(5) name or its number; the error is the reference's.
fn option_code(name: &str) -> Result<u8, String> {
    let code = match name {
        "dhcp-client-identifier" => Some(opt::CLIENT_ID),
        "subnet-mask" => Some(opt::SUBNET_MASK),
        "routers" => Some(opt::ROUTER),
        "host-name" => Some(opt::HOST_NAME),
        "user-class" => Some(opt::USER_CLASS),
        "vendor-class-identifier" => Some(opt::CLASS_ID),
        _ => None,
    };
    if let Some(code) = code {
        return Ok(code);
    }
    let why = if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        "invalid syntax"
    } else {
        match name.parse::<u8>() {
            Ok(code) => return Ok(code),
            Err(_) => "value out of range",
        }
    };
    Err(format!(
        "Can not parse option {q}: Can not parse option: strconv.ParseUint: parsing {q}: {why}",
        q = go_quote(name)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(ipam: serde_json::Value) -> Result<IpamConfig, Error> {
        let conf = json!({"cniVersion": "1.0.0", "name": "n", "type": "macvlan", "ipam": ipam});
        IpamConfig::read(&Json::from(&conf))
    }

    #[test]
    fn reads_the_keys_and_words_errors_as_go() {
        let c = read(json!({
            "type": "dhcp", "daemonSocketPath": "/x.sock", "priority": 7,
            "provide": [{"option": "host-name", "fromArg": "K8S_POD_NAME"}],
            "request": [{"skipDefault": true}, {"option": "121"}],
        }))
        .unwrap();
        assert_eq!(c.socket(), PathBuf::from("/x.sock"));
        assert_eq!(c.priority, 7);
        assert_eq!(c.provide[0].from_arg, "K8S_POD_NAME");
        assert!(c.request[0].skip_default);
        let err = |ipam| read(ipam).unwrap_err().msg;
        assert_eq!(
            err(json!({"type": 5})),
            "json: cannot unmarshal number into Go struct field IPAMConfig.ipam.type of type string"
        );
        assert_eq!(
            err(json!({"provide": [5]})),
            "json: cannot unmarshal number into Go struct field IPAMConfig.ipam.provide of type main.ProvideOption"
        );
        assert_eq!(
            err(json!({"request": [{"option": 5}]})),
            "json: cannot unmarshal number into Go struct field RequestOption.ipam.request.option of type main.DHCPOption"
        );
        assert_eq!(
            read(json!(5)).unwrap_err().msg,
            "json: cannot unmarshal number into Go struct field NetConf.ipam of type main.IPAMConfig"
        );
        assert_eq!(read(json!(null)).unwrap().socket(), PathBuf::from(DEFAULT_SOCKET));
    }

    #[test]
    fn a_bad_element_read_leniently_keeps_the_socket() {
        let ipam = json!({"daemonSocketPath": "/x.sock", "provide": [5]});
        let c = json::leniently(|| read(ipam.clone())).unwrap();
        assert_eq!(c.socket(), PathBuf::from("/x.sock"));
        assert_eq!(
            read(ipam).unwrap_err().msg,
            "json: cannot unmarshal number into Go struct field IPAMConfig.ipam.provide of type main.ProvideOption"
        );
        let ipam = json!({"daemonSocketPath": "/x.sock", "request": ["x"]});
        assert_eq!(
            json::leniently(|| read(ipam.clone())).unwrap().socket(),
            PathBuf::from("/x.sock")
        );
        assert_eq!(
            read(ipam).unwrap_err().msg,
            "json: cannot unmarshal string into Go struct field IPAMConfig.ipam.request of type main.RequestOption"
        );
    }

    #[test]
    fn keys_match_case_insensitively_as_go() {
        let c = read(json!({
            "DaemonSocketPath": "/y.sock", "Priority": 3,
            "PROVIDE": [{"Option": "host-name", "FromArg": "K"}],
            "Request": [{"SKIPDEFAULT": true}],
        }))
        .unwrap();
        assert_eq!(c.socket(), PathBuf::from("/y.sock"));
        assert_eq!(c.priority, 3);
        assert_eq!(c.provide[0].option, "host-name");
        assert_eq!(c.provide[0].from_arg, "K");
        assert!(c.request[0].skip_default);
    }

    #[test]
    fn options_as_the_reference_prepares_them() {
        let conf = IpamConfig {
            provide: vec![
                Provide {
                    option: "host-name".into(),
                    value: "fixed".into(),
                    from_arg: "K8S_POD_NAME".into(),
                },
                Provide {
                    option: "60".into(),
                    value: "cnibox".into(),
                    from_arg: String::new(),
                },
            ],
            request: vec![RequestOption {
                skip_default: false,
                option: "121".into(),
            }],
            ..IpamConfig::default()
        };
        let o = prepare("IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default", &conf).unwrap();
        assert_eq!(o.provided, vec![(12, b"web-0".to_vec()), (60, b"cnibox".to_vec())]);
        assert_eq!(o.requested, vec![121, 3, 1]);
        let o = prepare("", &conf).unwrap();
        assert_eq!(o.provided[0], (12, b"fixed".to_vec()));
        let skip = IpamConfig {
            request: vec![RequestOption {
                skip_default: true,
                option: String::new(),
            }],
            ..IpamConfig::default()
        };
        assert_eq!(prepare("", &skip).unwrap().requested, vec![1, 3, 15, 6]);
    }

    #[test]
    fn bad_options_fail_with_the_references_words() {
        let with = |option: &str| IpamConfig {
            request: vec![RequestOption {
                skip_default: false,
                option: option.into(),
            }],
            ..IpamConfig::default()
        };
        assert_eq!(
            prepare("", &with("routerz")).unwrap_err(),
            "Can not parse option \"routerz\": Can not parse option: strconv.ParseUint: parsing \"routerz\": invalid syntax"
        );
        assert_eq!(
            prepare("", &with("256")).unwrap_err(),
            "Can not parse option \"256\": Can not parse option: strconv.ParseUint: parsing \"256\": value out of range"
        );
        let long = IpamConfig {
            provide: vec![Provide {
                option: "host-name".into(),
                value: "x".repeat(256),
                from_arg: String::new(),
            }],
            ..IpamConfig::default()
        };
        assert!(prepare("", &long)
            .unwrap_err()
            .starts_with("value too long for option \"host-name\": \"xxx"));
        let long_arg = IpamConfig {
            provide: vec![Provide {
                option: "host-name".into(),
                value: "fixed".into(),
                from_arg: "K8S_POD_NAME".into(),
            }],
            ..IpamConfig::default()
        };
        let args = format!("K8S_POD_NAME={}", "y".repeat(256));
        // the reference quotes the option's own value, not the argument's
        assert_eq!(
            prepare(&args, &long_arg).unwrap_err(),
            "value too long for option \"host-name\" from CNI_ARGS \"K8S_POD_NAME\": \"fixed\""
        );
        assert_eq!(
            prepare(&format!("K8S_POD_NAME={}", "y".repeat(255)), &long_arg)
                .unwrap()
                .provided,
            vec![(12, "y".repeat(255).into_bytes())]
        );
    }

    #[test]
    fn client_ids_are_the_references_and_fit_option_61() {
        assert_eq!(client_id("abc", "net", "eth0"), "abc/net/eth0");
        assert_eq!(client_id(&"a".repeat(300), "net", "eth0").len(), 254);
    }
}
