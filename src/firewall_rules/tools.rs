//! The firewall tools that remain: finding `iptables-save`/`iptables-restore` (and their
//! variants) the way they will be run. nf_tables rules need no tool: they go through
//! [`crate::netlink::nftables`].
use super::error::{err, Error};
use std::path::{Path, PathBuf};

/// Where tools are looked for after PATH: a runtime's PATH (cron, `env -i`, a non-root
/// login) often lacks the sbin directories the tools live in.
const SBIN_DIRS: [&str; 3] = ["/usr/sbin", "/sbin", "/usr/local/sbin"];

/// The path `name` will be run from: the first executable file of that name in PATH or
/// the sbin directories. Callers run exactly this path, so finding and running agree.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(SBIN_DIRS)
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        });
    found
}

/// The Debian/Ubuntu package that installs tool `name` (every spelling of the iptables
/// family, and `nft`).
pub fn package_of(name: &str) -> Option<&'static str> {
    if name.starts_with("iptables") || name.starts_with("ip6tables") {
        Some("iptables")
    } else if name == "nft" {
        Some("nftables")
    } else {
        None
    }
}

/// The error for a tool that is needed and not installed: what is missing, where it was
/// looked for, and what to install.
pub fn missing_tool(op: &str, name: &str) -> Error {
    let install = package_of(name)
        .map(|p| format!(" (install the {p} package)"))
        .unwrap_or_default();
    err(
        op,
        format!(
            "{name} is needed and was not found in PATH or {}{install}",
            SBIN_DIRS.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_names_the_package_to_install() {
        assert_eq!(
            missing_tool("set up iptables masquerade", "iptables-restore").to_string(),
            "set up iptables masquerade: iptables-restore is needed and was not found in PATH or \
             /usr/sbin, /sbin, /usr/local/sbin (install the iptables package)"
        );
        assert_eq!(package_of("ip6tables-legacy-save"), Some("iptables"));
        assert_eq!(package_of("nft"), Some("nftables"));
        assert_eq!(package_of("runc"), None);
        assert!(missing_tool("x", "runc").to_string().ends_with("/usr/local/sbin"));
    }
}
