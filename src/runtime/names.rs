//! The CNI naming rules for container IDs, network names and interface names. They are
//! checked before a name is used, so a cache or lock key can never leave its directory.
use crate::cni::env;
use std::fmt;

/// Which rule a name broke; the message names the kind of name and the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    pub msg: String,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for NameError {}

// The rules and messages are the protocol core's (cni::env); here they only gain the
// offending value, since a runtime reports names from many attachments at once.
fn named(value: &str, r: Result<(), crate::cni::Error>) -> Result<(), NameError> {
    r.map_err(|e| NameError {
        msg: if value.is_empty() {
            e.msg
        } else {
            format!("{} {value:?}", e.msg)
        },
    })
}

pub fn container_id(id: &str) -> Result<(), NameError> {
    named(id, env::validate_container_id(id))
}

pub fn network_name(name: &str) -> Result<(), NameError> {
    named(name, env::validate_network_name(name))
}

/// libcni's `ValidateInterfaceName`.
pub fn interface_name(name: &str) -> Result<(), NameError> {
    env::validate_ifname(name).map_err(|e| NameError {
        msg: if name.is_empty() {
            e.msg
        } else {
            format!("interface name {name:?}: {}", e.msg)
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids() {
        assert!(container_id("cnitool-0123abcd").is_ok());
        assert!(container_id("a_b.c-d").is_ok());
        assert_eq!(container_id("").unwrap_err().msg, "missing containerID");
        for bad in ["../x", "a/b", ".hidden", "-a", "a b", "a\0b", "..", "ü"] {
            assert!(container_id(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn network_names() {
        assert!(network_name("my-net.1").is_ok());
        assert_eq!(
            network_name("a/b").unwrap_err().msg,
            "invalid characters found in network name \"a/b\""
        );
        assert!(network_name("..").is_err());
        assert!(network_name("").is_err());
    }

    #[test]
    fn interface_names() {
        assert!(interface_name("eth0").is_ok());
        assert!(interface_name("a.b").is_ok());
        assert_eq!(interface_name("").unwrap_err().msg, "interface name is empty");
        for bad in [".", "..", "a/b", "a:b", "a b", "a\0", "0123456789abcdef"] {
            assert!(interface_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
