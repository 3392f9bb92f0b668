//! The `CNI_*` environment: which variables each verb requires, and the validation of
//! container IDs, interface names and network names (Go `skel` and `pkg/utils`).
use super::error::code;
use super::Error;

/// The environment of one call, as read (unset and empty are the same, as with Go's `Getenv`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    pub command: String,
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    pub args: String,
    pub path: String,
    pub netns_override: String,
}

/// Checks a variable's value (container ID, interface name).
type Validator = fn(&str) -> Result<(), Error>;

/// What skel checks for one variable: which verbs require it, and its validator.
struct Var {
    name: &'static str,
    required_for: &'static [&'static str],
    validate: Option<Validator>,
}

/// In skel's order: the "missing" list is reported in this order, and the first invalid
/// value in this order wins over missing ones that come later.
const VARS: &[Var] = &[
    Var {
        name: "CNI_COMMAND",
        required_for: &["ADD", "CHECK", "DEL", "GC", "STATUS"],
        validate: None,
    },
    Var {
        name: "CNI_CONTAINERID",
        required_for: &["ADD", "CHECK", "DEL"],
        validate: Some(validate_container_id),
    },
    Var {
        name: "CNI_NETNS",
        required_for: &["ADD", "CHECK"],
        validate: None,
    },
    Var {
        name: "CNI_IFNAME",
        required_for: &["ADD", "CHECK", "DEL"],
        validate: Some(validate_ifname),
    },
    Var {
        name: "CNI_ARGS",
        required_for: &[],
        validate: None,
    },
    Var {
        name: "CNI_PATH",
        required_for: &["ADD", "CHECK", "DEL", "GC", "STATUS"],
        validate: None,
    },
    Var {
        name: "CNI_NETNS_OVERRIDE",
        required_for: &[],
        validate: None,
    },
];

/// Read and check the environment for the command it names. `CNI_COMMAND` itself is always
/// required; an unknown command requires nothing else (it is rejected after stdin is checked).
pub fn read(getenv: &dyn Fn(&str) -> Option<String>) -> Result<Environment, Error> {
    let command = getenv("CNI_COMMAND").unwrap_or_default();
    let mut env = Environment::default();
    let mut missing = Vec::new();
    for var in VARS {
        let value = getenv(var.name).unwrap_or_default();
        let required = var.name == "CNI_COMMAND" || var.required_for.contains(&command.as_str());
        if value.is_empty() {
            if required {
                missing.push(var.name);
            }
        } else if required {
            if let Some(validate) = var.validate {
                validate(&value)?;
            }
        }
        match var.name {
            "CNI_COMMAND" => env.command = value,
            "CNI_CONTAINERID" => env.container_id = value,
            "CNI_NETNS" => env.netns = value,
            "CNI_IFNAME" => env.ifname = value,
            "CNI_ARGS" => env.args = value,
            "CNI_PATH" => env.path = value,
            _ => env.netns_override = value,
        }
    }
    if !missing.is_empty() {
        return Err(Error::new(
            code::INVALID_ENVIRONMENT,
            format!("required env variables [{}] missing", missing.join(",")),
        ));
    }
    Ok(env)
}

/// `CNI_NETNS_OVERRIDE` disables the "netns is the plugin's own" check (`1` or `true`, any case).
pub fn netns_override(value: &str) -> bool {
    value == "1" || value.eq_ignore_ascii_case("true")
}

/// `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`: container IDs and network names.
pub fn is_valid_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

pub fn validate_container_id(id: &str) -> Result<(), Error> {
    if id.is_empty() {
        return Err(Error::new(code::UNKNOWN_CONTAINER, "missing containerID"));
    }
    if !is_valid_name(id) {
        return Err(Error::new(code::INVALID_ENVIRONMENT, "invalid characters in containerID").with_details(id));
    }
    Ok(())
}

pub fn validate_network_name(name: &str) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::new(code::INVALID_NETWORK_CONFIG, "missing network name"));
    }
    if !is_valid_name(name) {
        return Err(
            Error::new(code::INVALID_NETWORK_CONFIG, "invalid characters found in network name").with_details(name),
        );
    }
    Ok(())
}

/// The kernel's limit (IFNAMSIZ - 1), in bytes.
pub const MAX_IFNAME_LEN: usize = 15;

/// The kernel's rules for interface names (`dev_valid_name`), with Go's messages.
pub fn validate_ifname(name: &str) -> Result<(), Error> {
    let invalid = |msg: &str| Error::new(code::INVALID_ENVIRONMENT, msg);
    if name.is_empty() {
        return Err(invalid("interface name is empty"));
    }
    if name.len() > MAX_IFNAME_LEN {
        return Err(invalid("interface name is too long").with_details(format!(
            "interface name should be less than {} characters",
            MAX_IFNAME_LEN + 1
        )));
    }
    if name == "." || name == ".." {
        return Err(invalid("interface name is . or .."));
    }
    if name
        .chars()
        .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace())
    {
        return Err(invalid("interface name contains / or : or whitespace characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    fn full(cmd: &str) -> Vec<(&'static str, String)> {
        vec![
            ("CNI_COMMAND", cmd.to_string()),
            ("CNI_CONTAINERID", "ctr1".into()),
            ("CNI_NETNS", "/run/netns/x".into()),
            ("CNI_IFNAME", "eth0".into()),
            ("CNI_PATH", "/opt/cni/bin".into()),
        ]
    }

    fn without(cmd: &str, drop: &[&str]) -> Result<Environment, Error> {
        let vars: Vec<(&str, String)> = full(cmd).into_iter().filter(|(k, _)| !drop.contains(k)).collect();
        let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        read(&env_of(&refs))
    }

    #[test]
    fn all_present_reads_everything() {
        let e = read(&env_of(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "ctr1"),
            ("CNI_NETNS", "/run/netns/x"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", "IP=1.2.3.4"),
            ("CNI_PATH", "/opt/cni/bin"),
            ("CNI_NETNS_OVERRIDE", "1"),
        ]))
        .unwrap();
        assert_eq!(e.command, "ADD");
        assert_eq!(e.container_id, "ctr1");
        assert_eq!(e.netns, "/run/netns/x");
        assert_eq!(e.ifname, "eth0");
        assert_eq!(e.args, "IP=1.2.3.4");
        assert_eq!(e.path, "/opt/cni/bin");
        assert_eq!(e.netns_override, "1");
    }

    #[test]
    fn missing_variables_in_skel_order() {
        let e = without("ADD", &["CNI_NETNS", "CNI_IFNAME"]).unwrap_err();
        assert_eq!(e.code, 4);
        assert_eq!(e.msg, "required env variables [CNI_NETNS,CNI_IFNAME] missing");
        let e = without("ADD", &["CNI_PATH", "CNI_CONTAINERID"]).unwrap_err();
        assert_eq!(e.msg, "required env variables [CNI_CONTAINERID,CNI_PATH] missing");
        let e = read(&env_of(&[])).unwrap_err();
        assert_eq!(e.msg, "required env variables [CNI_COMMAND] missing");
    }

    #[test]
    fn required_per_verb() {
        let vars = ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"];
        let table: &[(&str, &[&str])] = &[
            ("ADD", &["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"]),
            ("CHECK", &["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"]),
            ("DEL", &["CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"]),
            ("STATUS", &["CNI_PATH"]),
            ("GC", &["CNI_PATH"]),
            ("VERSION", &[]),
            ("BOGUS", &[]),
        ];
        for (cmd, required) in table {
            let e = read(&env_of(&[("CNI_COMMAND", cmd)]));
            if required.is_empty() {
                assert!(e.is_ok(), "{cmd}");
            } else {
                assert_eq!(
                    e.unwrap_err().msg,
                    format!("required env variables [{}] missing", required.join(",")),
                    "{cmd}"
                );
            }
            for v in vars {
                let r = without(cmd, &[v]);
                assert_eq!(r.is_err(), required.contains(&v), "{cmd} without {v}");
            }
        }
    }

    #[test]
    fn empty_counts_as_missing() {
        let e = read(&env_of(&[
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", ""),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", "/x"),
        ]))
        .unwrap_err();
        assert_eq!(e.msg, "required env variables [CNI_CONTAINERID] missing");
    }

    #[test]
    fn invalid_container_id_comes_before_later_missing_vars() {
        let e = read(&env_of(&[("CNI_COMMAND", "ADD"), ("CNI_CONTAINERID", " c8 ")])).unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str(), e.details.as_str()),
            (4, "invalid characters in containerID", " c8 ")
        );
    }

    #[test]
    fn values_not_required_are_not_validated() {
        // STATUS does not require CNI_IFNAME, so a bad one is ignored (as in skel)
        let e = read(&env_of(&[
            ("CNI_COMMAND", "STATUS"),
            ("CNI_PATH", "/x"),
            ("CNI_IFNAME", "a/b"),
        ]))
        .unwrap();
        assert_eq!(e.ifname, "a/b");
    }

    #[test]
    fn bad_ifname_reported_from_env() {
        let e = read(&env_of(&[
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", "c"),
            ("CNI_IFNAME", "eth:0"),
            ("CNI_PATH", "/x"),
        ]))
        .unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (4, "interface name contains / or : or whitespace characters")
        );
    }

    #[test]
    fn container_id_rules() {
        for ok in ["a", "0", "abc-DEF_1.2", "c8"] {
            validate_container_id(ok).unwrap();
        }
        let e = validate_container_id("").unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (3, "missing containerID"));
        for bad in ["-a", "_a", ".a", "a b", "a/b", "a\n", "ä", "a:b", " c8 "] {
            let e = validate_container_id(bad).unwrap_err();
            assert_eq!(
                (e.code, e.msg.as_str(), e.details.as_str()),
                (4, "invalid characters in containerID", bad)
            );
        }
    }

    #[test]
    fn network_name_rules() {
        validate_network_name("my-net_1.0").unwrap();
        let e = validate_network_name("").unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (7, "missing network name"));
        let e = validate_network_name("1234%%%").unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str(), e.details.as_str()),
            (7, "invalid characters found in network name", "1234%%%")
        );
    }

    #[test]
    fn ifname_rules() {
        for ok in ["eth0", "a", "123456789012345", "veth.1", "é"] {
            validate_ifname(ok).unwrap();
        }
        let cases: &[(&str, &str, &str)] = &[
            ("", "interface name is empty", ""),
            (
                "testnamemorethan16",
                "interface name is too long",
                "interface name should be less than 16 characters",
            ),
            (
                "1234567890123456",
                "interface name is too long",
                "interface name should be less than 16 characters",
            ),
            (".", "interface name is . or ..", ""),
            ("..", "interface name is . or ..", ""),
            (
                "/testname",
                "interface name contains / or : or whitespace characters",
                "",
            ),
            ("a:b", "interface name contains / or : or whitespace characters", ""),
            (
                "test name",
                "interface name contains / or : or whitespace characters",
                "",
            ),
            ("tab\t", "interface name contains / or : or whitespace characters", ""),
            (
                "nbsp\u{a0}",
                "interface name contains / or : or whitespace characters",
                "",
            ),
            (
                "ideo\u{3000}",
                "interface name contains / or : or whitespace characters",
                "",
            ),
        ];
        for (name, msg, details) in cases {
            let e = validate_ifname(name).unwrap_err();
            assert_eq!(
                (e.code, e.msg.as_str(), e.details.as_str()),
                (4, *msg, *details),
                "{name:?}"
            );
        }
        // the limit is bytes, not characters: 8 two-byte characters are 16 bytes
        assert!(validate_ifname("éééééééé").is_err());
    }

    #[test]
    fn override_values() {
        for yes in ["1", "true", "TRUE", "True"] {
            assert!(netns_override(yes), "{yes}");
        }
        for no in ["", "0", "false", "yes", "2"] {
            assert!(!netns_override(no), "{no}");
        }
    }
}
