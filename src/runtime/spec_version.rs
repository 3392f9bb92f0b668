//! Spec version strings as libcni compares them (`pkg/version.ParseVersion`): up to three
//! numeric parts, "" meaning 0.1.0.
use std::fmt;

/// The highest spec version this runtime implements; `cniVersions` entries above it are ignored.
pub const CURRENT: &str = "1.1.0";

/// Result versions a plugin may answer with (libcni rejects others when it parses a result).
pub const KNOWN_RESULT_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionError(String);

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VersionError {}

/// `(major, minor, micro)`.
pub fn parse(version: &str) -> Result<(u64, u64, u64), VersionError> {
    if version.is_empty() {
        return Ok((0, 1, 0));
    }
    let parts: Vec<&str> = version.split('.').collect();
    if parts.len() >= 4 {
        return Err(VersionError(format!("invalid version {version:?}: too many parts")));
    }
    let mut out = [0u64; 3];
    for (i, (part, what)) in parts.iter().zip(["major", "minor", "micro"]).enumerate() {
        out[i] = part
            .parse()
            .map_err(|e| VersionError(format!("failed to convert {what} version part {part:?}: {e}")))?;
    }
    Ok((out[0], out[1], out[2]))
}

/// `version >= other`.
pub fn at_least(version: &str, other: &str) -> Result<bool, VersionError> {
    Ok(parse(version)? >= parse(other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_like_libcni() {
        assert!(at_least("0.4.0", "0.4.0").unwrap());
        assert!(at_least("1.0.0", "0.4.0").unwrap());
        assert!(!at_least("0.3.1", "0.4.0").unwrap());
        assert!(!at_least("", "0.2.0").unwrap());
        assert!(at_least("1.1", "1.1.0").unwrap());
        assert!(at_least("0.10.0", "0.4.0").unwrap());
    }

    #[test]
    fn rejects_malformed_versions() {
        assert_eq!(
            parse("1.0.0.0").unwrap_err().to_string(),
            "invalid version \"1.0.0.0\": too many parts"
        );
        assert!(parse("1.x.0")
            .unwrap_err()
            .to_string()
            .starts_with("failed to convert minor version part \"x\""));
        assert!(parse("v1").is_err());
    }
}
