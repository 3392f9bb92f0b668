//! Running the firewall tools (`nft`, `iptables`) for masquerade and spoof-check rules:
//! their error type, one nft transaction per change, nft's JSON listings, and finding the
//! tools on a runtime's (possibly minimal) PATH.
use std::fmt;
use std::io::Write;
use std::process::{Command, Stdio};

/// A firewall failure: what was being done and what the tool said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub op: String,
    pub detail: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.detail)
    }
}

impl std::error::Error for Error {}

impl From<Error> for crate::cni::Error {
    fn from(e: Error) -> Self {
        crate::cni::Error::internal(e)
    }
}

pub fn err(op: impl Into<String>, detail: impl fmt::Display) -> Error {
    Error {
        op: op.into(),
        detail: detail.to_string(),
    }
}

/// Apply `script` as one atomic nft transaction (`nft -f -`); Err is what nft printed.
pub fn nft_run(script: &str) -> Result<(), String> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("run nft: {e}"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(script.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// `nft -j ARGS`, parsed; None when the table or chain does not exist.
pub fn nft_json(args: &[&str]) -> Result<Option<serde_json::Value>, Error> {
    let out = Command::new("nft")
        .arg("-j")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| err("run nft", e))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("No such file or directory") {
            return Ok(None);
        }
        return Err(err(format!("nft {}", args.join(" ")), stderr.trim()));
    }
    serde_json::from_slice(&out.stdout)
        .map(Some)
        .map_err(|e| err("parse nft -j output", e))
}

/// (handle, comment) of every commented rule in a chain; none when the chain is missing.
pub fn nft_commented_rules(family: &str, table: &str, chain: &str) -> Result<Vec<(u64, String)>, Error> {
    let Some(v) = nft_json(&["list", "chain", family, table, chain])? else {
        return Ok(vec![]);
    };
    Ok(v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let r = &item["rule"];
            Some((r["handle"].as_u64()?, r["comment"].as_str()?.to_string()))
        })
        .collect())
}

/// An nft string literal. The values quoted (interface names, container IDs, network names,
/// MACs) never need escapes once double quotes are dropped.
pub fn nft_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', ""))
}

/// True when `name` is an executable file in a PATH directory or the usual sbin dirs, which
/// a runtime's PATH may lack.
pub fn tool_available(name: &str) -> bool {
    find_tool(name).is_some()
}

/// Where `name` is: the first executable file of that name in a PATH directory or the usual
/// sbin dirs. Callers run this path, so what was found is what runs.
pub fn find_tool(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .filter(|d| !d.is_empty())
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        });
    found
}
