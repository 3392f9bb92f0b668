//! The error of every firewall-rules operation: what was being done and why. A plugin
//! reports it as a plain CNI error (code 999).
use std::fmt;

/// A firewall failure: what was being done and why.
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
