//! The OCI state a runtime writes on a hook's stdin, and the phase it implies.
//!
//! runc and crun differ: crun reports `created` (not `creating`) to createRuntime hooks,
//! writes `"ociVersion":"1.0"` and an extra `root`; both send `pid` 0 or nothing at
//! poststop. Unknown fields are ignored.
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// Upper bound on the state JSON (it is a few hundred bytes; annotations can add some).
pub const MAX_STATE_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    #[serde(default)]
    pub oci_version: String,
    pub id: String,
    #[serde(default)]
    pub status: String,
    /// 0 and absent both mean "no process" (poststop).
    #[serde(default)]
    pub pid: i64,
    #[serde(default)]
    pub bundle: PathBuf,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// What the hook does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Add,
    Del,
}

/// Why the OCI state or the phase is unusable.
#[derive(Debug)]
pub enum Error {
    /// stdin is not an OCI state document (the decoder's error is the source).
    Json(serde_json::Error),
    EmptyId,
    PidOutOfRange(i64),
    /// Neither an explicit phase nor a status.
    NoPhase,
    UnknownPhase(String),
    UnknownStatus(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Json(e) => write!(f, "invalid OCI state on stdin: {e}"),
            Error::EmptyId => f.write_str("invalid OCI state on stdin: empty container id"),
            Error::PidOutOfRange(pid) => write!(f, "invalid OCI state on stdin: pid {pid} out of range"),
            Error::NoPhase => f.write_str("no phase: give add or del, or a state with a status"),
            Error::UnknownPhase(word) => write!(f, "unknown hook phase {word:?} (want add or del)"),
            Error::UnknownStatus(word) => write!(f, "cannot tell the phase from OCI status {word:?}; give add or del"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Json(e) => Some(e),
            _ => None,
        }
    }
}

/// Equal when they say the same (the decoder's error has no equality of its own).
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.to_string() == other.to_string()
    }
}

impl State {
    pub fn parse(bytes: &[u8]) -> Result<State, Error> {
        let s: State = serde_json::from_slice(bytes).map_err(Error::Json)?;
        if s.id.is_empty() {
            return Err(Error::EmptyId);
        }
        if s.pid < 0 || s.pid > i64::from(i32::MAX) {
            return Err(Error::PidOutOfRange(s.pid));
        }
        Ok(s)
    }

    /// The container's init process, when the state has one.
    pub fn pid(&self) -> Option<i32> {
        (self.pid > 0).then_some(self.pid as i32)
    }

    /// The phase: the explicit argument when given, else from the status
    /// (`creating`/`created`/`running` → add, `stopped` → del).
    pub fn phase(&self, explicit: Option<&str>) -> Result<Phase, Error> {
        let word = explicit.unwrap_or(&self.status);
        match word {
            "add" | "creating" | "created" | "running" => Ok(Phase::Add),
            "del" | "delete" | "stopped" => Ok(Phase::Del),
            "" => Err(Error::NoPhase),
            other if explicit.is_some() => Err(Error::UnknownPhase(other.to_string())),
            other => Err(Error::UnknownStatus(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runc_create_runtime_state() {
        let s = State::parse(
            br#"{"ociVersion":"1.2.0","id":"c1","status":"creating","pid":4242,"bundle":"/b","annotations":{"a":"b"}}"#,
        )
        .unwrap();
        assert_eq!(s.pid(), Some(4242));
        assert_eq!(s.phase(None), Ok(Phase::Add));
        assert_eq!(s.annotations["a"], "b");
    }

    #[test]
    fn crun_states_with_extra_fields() {
        let s = State::parse(
            br#"{"ociVersion":"1.0","id":"t1","pid":11339,"root":"rootfs","bundle":"/tmp/x","status":"created"}"#,
        )
        .unwrap();
        assert_eq!(s.phase(None), Ok(Phase::Add));
        let s = State::parse(
            br#"{"ociVersion":"1.0","id":"t1","pid":0,"root":"rootfs","bundle":"/tmp/x","status":"stopped"}"#,
        )
        .unwrap();
        assert_eq!(s.pid(), None);
        assert_eq!(s.phase(None), Ok(Phase::Del));
    }

    #[test]
    fn explicit_phase_wins_and_bad_words_are_errors() {
        let s = State::parse(br#"{"id":"x","status":"running","pid":5}"#).unwrap();
        assert_eq!(s.phase(Some("del")), Ok(Phase::Del));
        assert!(s
            .phase(Some("start"))
            .unwrap_err()
            .to_string()
            .contains("unknown hook phase \"start\""));
        let s = State::parse(br#"{"id":"x","status":"paused"}"#).unwrap();
        assert!(s.phase(None).unwrap_err().to_string().contains("\"paused\""));
        assert_eq!(s.phase(None), Err(Error::UnknownStatus("paused".into())));
    }

    #[test]
    fn malformed_states_are_errors_not_panics() {
        for bad in [
            &b""[..],
            b"{",
            b"[]",
            b"{\"id\":\"\"}",
            b"{\"id\":\"x\",\"pid\":-1}",
            b"{\"id\":\"x\",\"pid\":99999999999}",
            b"{\"id\":7}",
        ] {
            assert!(State::parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        // the decoder's error is kept as the source
        let e = State::parse(b"{").unwrap_err();
        assert!(matches!(e, Error::Json(_)));
        assert!(std::error::Error::source(&e).is_some());
    }
}
