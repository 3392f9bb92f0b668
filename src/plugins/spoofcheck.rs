//! MAC spoof checking (`macspoofchk`): frames entering the bridge from a container's host
//! veth must carry the container's MAC as source, everything else is dropped.
//!
//! The nftables layout is the reference's (`pkg/link/spoofcheck.go`), so either
//! implementation can tear down the other's rules: table `bridge nat`, base chain
//! `PREROUTING` (filter, hook prerouting, priority -300, policy accept) with one rule per
//! attachment `iifname <host veth> jump cni-br-iface-<id>`, where `<id>` is
//! `<container id>-<ifname>`; that chain jumps to `cni-br-iface-<id>-mac`, which returns for
//! the container MAC and drops the rest. Every rule carries the comment `macspoofchk-<id>`.
//!
//! Setup and teardown are one nft transaction each.
use std::fmt;
use std::io::Write;
use std::process::{Command, Stdio};

const FAMILY: &str = "bridge";
const TABLE: &str = "nat";
const BASE_CHAIN: &str = "PREROUTING";

/// A spoof-check failure: what was being done and what nft said.
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

fn err(op: impl Into<String>, detail: impl fmt::Display) -> Error {
    Error {
        op: op.into(),
        detail: detail.to_string(),
    }
}

/// One attachment's rule set.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    pub container_id: &'a str,
    pub ifname: &'a str,
}

impl Attachment<'_> {
    /// `<container id>-<ifname>`, the reference's refID.
    pub fn id(&self) -> String {
        format!("{}-{}", self.container_id, self.ifname)
    }

    pub fn iface_chain(&self) -> String {
        format!("cni-br-iface-{}", self.id())
    }

    pub fn mac_chain(&self) -> String {
        format!("{}-mac", self.iface_chain())
    }

    pub fn comment(&self) -> String {
        format!("macspoofchk-{}", self.id())
    }
}

/// Allow only `mac` as source address on frames from `host_iface`. Re-running it for the
/// same attachment replaces the previous rules.
pub fn setup(att: Attachment, host_iface: &str, mac: &str) -> Result<(), Error> {
    let (iface, macc, comment) = (att.iface_chain(), att.mac_chain(), quote(&att.comment()));
    let mut tx = format!(
        "add table {FAMILY} {TABLE}\n\
         add chain {FAMILY} {TABLE} {BASE_CHAIN} {{ type filter hook prerouting priority -300 ; policy accept ; }}\n\
         add chain {FAMILY} {TABLE} {iface}\n\
         add chain {FAMILY} {TABLE} {macc}\n\
         flush chain {FAMILY} {TABLE} {iface}\n\
         flush chain {FAMILY} {TABLE} {macc}\n"
    );
    for handle in base_rules(&att.comment())? {
        tx.push_str(&format!("delete rule {FAMILY} {TABLE} {BASE_CHAIN} handle {handle}\n"));
    }
    tx.push_str(&format!(
        "add rule {FAMILY} {TABLE} {BASE_CHAIN} iifname {} jump {iface} comment {comment}\n\
         add rule {FAMILY} {TABLE} {iface} jump {macc} comment {comment}\n\
         add rule {FAMILY} {TABLE} {macc} ether saddr {mac} return comment {comment}\n\
         add rule {FAMILY} {TABLE} {macc} drop comment {comment}\n",
        quote(host_iface)
    ));
    nft_run(&tx).map_err(|d| err("failed to setup spoof-check", d))
}

/// Remove the attachment's base-chain rule and both of its chains. Whatever is already gone
/// (table, chains, rules, or nft itself) is not an error.
pub fn teardown(att: Attachment) -> Result<(), Error> {
    if !nft_available() {
        return Ok(());
    }
    let Some(chains) = chains()? else {
        return Ok(());
    };
    let mut tx = String::new();
    for handle in base_rules(&att.comment())? {
        tx.push_str(&format!("delete rule {FAMILY} {TABLE} {BASE_CHAIN} handle {handle}\n"));
    }
    // The iface chain jumps to the mac chain: empty both, then delete in that order.
    let doomed: Vec<String> = [att.iface_chain(), att.mac_chain()]
        .into_iter()
        .filter(|c| chains.contains(c))
        .collect();
    for c in &doomed {
        tx.push_str(&format!("flush chain {FAMILY} {TABLE} {c}\n"));
    }
    for c in &doomed {
        tx.push_str(&format!("delete chain {FAMILY} {TABLE} {c}\n"));
    }
    if tx.is_empty() {
        return Ok(());
    }
    nft_run(&tx).map_err(|d| err("failed to teardown spoof-check", d))
}

/// Names of the chains in `bridge nat`; None when the table does not exist.
fn chains() -> Result<Option<Vec<String>>, Error> {
    let Some(v) = nft_json(&["list", "table", FAMILY, TABLE])? else {
        return Ok(None);
    };
    let names = v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["chain"]["name"].as_str().map(str::to_string))
        .collect();
    Ok(Some(names))
}

/// Handles of the base-chain rules carrying `comment`.
fn base_rules(comment: &str) -> Result<Vec<u64>, Error> {
    let Some(v) = nft_json(&["list", "chain", FAMILY, TABLE, BASE_CHAIN])? else {
        return Ok(vec![]);
    };
    Ok(v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["rule"]["comment"].as_str() == Some(comment))
        .filter_map(|item| item["rule"]["handle"].as_u64())
        .collect())
}

/// `nft -j ARGS` parsed; None when the object does not exist.
fn nft_json(args: &[&str]) -> Result<Option<serde_json::Value>, Error> {
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

/// nft strings: the values quoted are interface names, container ids and MACs, which
/// never contain double quotes (skel validates container ids).
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', ""))
}

fn nft_available() -> bool {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .filter(|d| !d.is_empty())
        .any(|d| std::path::Path::new(d).join("nft").is_file());
    found
}

fn nft_run(script: &str) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_reference() {
        let a = Attachment {
            container_id: "dummy-0",
            ifname: "eth0",
        };
        assert_eq!(a.iface_chain(), "cni-br-iface-dummy-0-eth0");
        assert_eq!(a.mac_chain(), "cni-br-iface-dummy-0-eth0-mac");
        assert_eq!(a.comment(), "macspoofchk-dummy-0-eth0");
    }
}
