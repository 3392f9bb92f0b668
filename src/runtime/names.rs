//! The CNI naming rules for container IDs, network names and interface names. They are
//! checked before a name is used, so a cache or lock key can never leave its directory.
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

/// `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`, the rule for container IDs and network names.
fn id_like(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

pub fn container_id(id: &str) -> Result<(), NameError> {
    if id.is_empty() {
        return Err(NameError {
            msg: "missing containerID".into(),
        });
    }
    if !id_like(id) {
        return Err(NameError {
            msg: format!("invalid characters in containerID {id:?}"),
        });
    }
    Ok(())
}

pub fn network_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError {
            msg: "missing network name".into(),
        });
    }
    if !id_like(name) {
        return Err(NameError {
            msg: format!("invalid characters found in network name {name:?}"),
        });
    }
    Ok(())
}

/// libcni's `ValidateInterfaceName`.
pub fn interface_name(name: &str) -> Result<(), NameError> {
    let bad = |why: &str| {
        Err(NameError {
            msg: format!("interface name {name:?} {why}"),
        })
    };
    if name.is_empty() {
        return Err(NameError {
            msg: "interface name is empty".into(),
        });
    }
    if name.len() > 15 {
        return bad("is too long (interface name should be less than 16 characters)");
    }
    if name == "." || name == ".." {
        return bad("is not a valid interface name");
    }
    if name
        .chars()
        .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace())
    {
        return bad("contains a character that is not allowed ('/', ':', NUL or whitespace)");
    }
    Ok(())
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
