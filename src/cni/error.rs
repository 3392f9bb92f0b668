//! The CNI error object and its codes.
use serde::{Deserialize, Serialize};
use std::fmt;

/// Error codes, as the spec and the Go library number them.
pub mod code {
    /// Go's `ErrUnknown`: what libcni reports for a plugin that failed without an error object.
    pub const UNKNOWN: u32 = 0;
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const UNSUPPORTED_FIELD: u32 = 2;
    pub const UNKNOWN_CONTAINER: u32 = 3;
    pub const INVALID_ENVIRONMENT: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODING_FAILURE: u32 = 6;
    pub const INVALID_NETWORK_CONFIG: u32 = 7;
    pub const INVALID_NETNS: u32 = 8;
    pub const TRY_AGAIN_LATER: u32 = 11;
    pub const PLUGIN_NOT_AVAILABLE: u32 = 50;
    pub const LIMITED_CONNECTIVITY: u32 = 51;
    /// The Go library's `ErrInternal`: any plugin-level failure that has no code of its own.
    pub const INTERNAL: u32 = 999;
}

/// A CNI error: `{"code","msg","details"}`. Errors of delegated plugins pass through unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    pub code: u32,
    pub msg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl Error {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        Error {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// A plugin-level failure (code 999), as the reference returns for any plain Go error.
    pub fn internal(msg: impl fmt::Display) -> Self {
        Error::new(code::INTERNAL, msg.to_string())
    }

    /// Prefix the message with context, keeping code and details (like Go's `fmt.Errorf("...: %v")`
    /// on a plain error; use it only where the reference wraps).
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.msg = format!("{what}: {}", self.msg);
        self
    }

    /// The JSON object printed on stdout, with `cniVersion` as the spec asks.
    pub fn to_json(&self, cni_version: &str) -> serde_json::Value {
        let mut v = serde_json::json!({ "cniVersion": cni_version, "code": self.code, "msg": self.msg });
        if !self.details.is_empty() {
            v["details"] = self.details.clone().into();
        }
        v
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.details.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "{}; {}", self.msg, self.details)
        }
    }
}

impl std::error::Error for Error {}

/// An OS error as Go prints it (`no such file or directory`), without Rust's
/// ` (os error 2)`; the text comes from nix's table, so it does not depend on the C library.
pub fn go_errno_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let desc = nix::errno::Errno::from_raw(n).desc();
            let mut chars = desc.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => e.to_string(),
            }
        }
        None => e.to_string(),
    }
}
