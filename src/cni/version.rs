//! Spec versions: the supported list, comparison, the per-verb gates and the VERSION reply,
//! as the Go `pkg/version` package and `skel` define them.
use super::error::code;
use super::Error;
use std::cmp::Ordering;

/// Every spec version cnibox speaks, oldest first (the Go `version.All`).
pub const SUPPORTED: &[&str] = &["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// The version of the spec this implementation follows (reported by VERSION).
pub const CURRENT: &str = "1.1.0";

/// The first version with CHECK.
pub const CHECK_MIN: &str = "0.4.0";
/// The first version with STATUS and GC.
pub const STATUS_GC_MIN: &str = "1.1.0";

/// The three result shapes: 0.1/0.2 (`ip4`/`ip6`), 0.3/0.4 (`ips` with `version`), 1.x.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V02,
    V04,
    V1,
}

impl Family {
    /// The versions whose results this family's Go type accepts (`""` is 0.1/0.2's "no version").
    pub fn accepted_versions(self) -> &'static [&'static str] {
        match self {
            Family::V02 => &["", "0.1.0", "0.2.0"],
            Family::V04 => &["0.3.0", "0.3.1", "0.4.0"],
            Family::V1 => &["1.0.0", "1.1.0"],
        }
    }
}

/// The result family of a version; `None` for versions no result type handles.
pub fn family(version: &str) -> Option<Family> {
    match version {
        "" | "0.1.0" | "0.2.0" => Some(Family::V02),
        "0.3.0" | "0.3.1" | "0.4.0" => Some(Family::V04),
        "1.0.0" | "1.1.0" => Some(Family::V1),
        _ => None,
    }
}

/// A config without `cniVersion` (or with `""`) is 0.1.0.
pub fn normalize(version: &str) -> &str {
    if version.is_empty() {
        "0.1.0"
    } else {
        version
    }
}

pub fn is_supported(version: &str) -> bool {
    SUPPORTED.contains(&version)
}

/// Parse `MAJOR[.MINOR[.MICRO]]` like Go's `version.ParseVersion` ("" is 0.1.0);
/// the error text is Go's, with code 6 (decoding failure) as skel reports it.
pub fn parse(version: &str) -> Result<(u64, u64, u64), Error> {
    if version.is_empty() {
        return Ok((0, 1, 0));
    }
    let parts: Vec<&str> = version.split('.').collect();
    if parts.len() >= 4 {
        return Err(Error::new(
            code::DECODING_FAILURE,
            format!("invalid version {}: too many parts", go_quote(version)),
        ));
    }
    let names = ["major", "minor", "micro"];
    let mut out = [0u64; 3];
    for (i, part) in parts.iter().enumerate() {
        out[i] = parse_go_int(part).ok_or_else(|| {
            Error::new(
                code::DECODING_FAILURE,
                format!(
                    "failed to convert {} version part {}: strconv.Atoi: parsing {}: invalid syntax",
                    names[i],
                    go_quote(part),
                    go_quote(part)
                ),
            )
        })?;
    }
    Ok((out[0], out[1], out[2]))
}

/// Go's `strconv.Atoi` for the non-negative values a version can hold (a leading `+` is accepted).
fn parse_go_int(s: &str) -> Option<u64> {
    let digits = s.strip_prefix('+').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Compare two versions numerically.
pub fn compare(a: &str, b: &str) -> Result<Ordering, Error> {
    Ok(parse(a)?.cmp(&parse(b)?))
}

/// `version >= min`; an unparsable version is not at least anything.
pub fn at_least(version: &str, min: &str) -> bool {
    matches!(compare(version, min), Ok(Ordering::Greater | Ordering::Equal))
}

/// The exact-match gate of skel (`incompatible CNI versions`, code 1).
pub fn check_supported(config_version: &str) -> Result<(), Error> {
    check_supported_in(config_version, SUPPORTED)
}

/// [`check_supported`] for a plugin that speaks only `supported` (bandwidth: 0.3.0 on).
pub fn check_supported_in(config_version: &str, supported: &[&str]) -> Result<(), Error> {
    if supported.contains(&config_version) {
        return Ok(());
    }
    Err(
        Error::new(code::INCOMPATIBLE_VERSION, "incompatible CNI versions").with_details(format!(
            "config is {}, plugin supports {}",
            go_quote(config_version),
            go_quote_list(supported)
        )),
    )
}

/// The gate of a verb that exists only from `min` on (CHECK, STATUS, GC), in skel's order:
/// unparsable version (6), older than the verb (1), newer than anything we support (1),
/// then the exact-match gate.
pub fn check_verb(config_version: &str, verb: &str, min: &str) -> Result<(), Error> {
    check_verb_in(config_version, verb, min, SUPPORTED)
}

/// [`check_verb`] for a plugin that speaks only `supported`.
pub fn check_verb_in(config_version: &str, verb: &str, min: &str, supported: &[&str]) -> Result<(), Error> {
    let conf = parse(config_version)?;
    if conf < parse(min)? {
        return Err(Error::new(
            code::INCOMPATIBLE_VERSION,
            format!("config version does not allow {verb}"),
        ));
    }
    let newest = parse(supported.last().copied().unwrap_or(CURRENT))?;
    if newest < conf {
        return Err(Error::new(
            code::INCOMPATIBLE_VERSION,
            format!("plugin version does not allow {verb}"),
        ));
    }
    check_supported_in(config_version, supported)
}

/// 0.1.0 and 0.2.0 results hold one address per family; host-local rejects configs that
/// would produce more (the Go message, checked where the addresses are known).
pub fn check_one_address_per_family(config_version: &str, v4: usize, v6: usize) -> Result<(), Error> {
    if (v4 > 1 || v6 > 1) && family(config_version) == Some(Family::V02) {
        return Err(Error::internal(format!(
            "CNI version {config_version} does not support more than 1 address per family"
        )));
    }
    Ok(())
}

/// The VERSION reply: compact JSON with a trailing newline (Go's `json.Encoder`).
pub fn version_reply() -> String {
    version_reply_for(SUPPORTED)
}

/// The VERSION reply of a plugin that speaks only `supported`.
pub fn version_reply_for(supported: &[&str]) -> String {
    let v = serde_json::json!({ "cniVersion": CURRENT, "supportedVersions": supported });
    format!("{v}\n")
}

/// Go's `%q` of a string: double-quoted with Go escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
pub fn go_quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s.as_ref())).collect();
    format!("[{}]", quoted.join(" "))
}

/// Go's `%v` of a `[]string`: `[a b]`.
pub fn go_list<S: AsRef<str>>(items: &[S]) -> String {
    let plain: Vec<&str> = items.iter().map(|s| s.as_ref()).collect();
    format!("[{}]", plain.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_list_is_version_all_in_order() {
        assert_eq!(
            SUPPORTED,
            &["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]
        );
        for w in SUPPORTED.windows(2) {
            assert_eq!(compare(w[0], w[1]).unwrap(), Ordering::Less, "{w:?}");
        }
    }

    #[test]
    fn empty_version_is_0_1_0() {
        assert_eq!(normalize(""), "0.1.0");
        assert_eq!(normalize("0.4.0"), "0.4.0");
        assert_eq!(parse("").unwrap(), (0, 1, 0));
        assert!(at_least("", "0.1.0"));
        assert!(!at_least("", "0.2.0"));
    }

    #[test]
    fn parse_accepts_short_forms_like_go() {
        assert_eq!(parse("1").unwrap(), (1, 0, 0));
        assert_eq!(parse("0.4").unwrap(), (0, 4, 0));
        assert_eq!(parse("10.20.30").unwrap(), (10, 20, 30));
    }

    #[test]
    fn parse_errors_use_go_text_and_code_6() {
        let e = parse("1.2.3.4").unwrap_err();
        assert_eq!(e.code, 6);
        assert_eq!(e.msg, r#"invalid version "1.2.3.4": too many parts"#);
        let e = parse("x.1.0").unwrap_err();
        assert_eq!(
            e.msg,
            r#"failed to convert major version part "x": strconv.Atoi: parsing "x": invalid syntax"#
        );
        let e = parse("1.y").unwrap_err();
        assert!(
            e.msg.starts_with(r#"failed to convert minor version part "y""#),
            "{}",
            e.msg
        );
        let e = parse("1.0.").unwrap_err();
        assert!(
            e.msg.starts_with(r#"failed to convert micro version part """#),
            "{}",
            e.msg
        );
    }

    #[test]
    fn at_least_compares_numerically() {
        assert!(at_least("0.10.0", "0.4.0"));
        assert!(at_least("1.1.0", "1.1.0"));
        assert!(!at_least("1.0.0", "1.1.0"));
        assert!(!at_least("garbage", "0.1.0"));
    }

    #[test]
    fn exact_match_gate_prints_go_details() {
        for v in SUPPORTED {
            check_supported(v).unwrap();
        }
        let e = check_supported("9.9.9").unwrap_err();
        assert_eq!(e.code, 1);
        assert_eq!(e.msg, "incompatible CNI versions");
        assert_eq!(
            e.details,
            r#"config is "9.9.9", plugin supports ["0.1.0" "0.2.0" "0.3.0" "0.3.1" "0.4.0" "1.0.0" "1.1.0"]"#
        );
        // no rounding: 0.3.2 is not 0.3.1
        assert_eq!(check_supported("0.3.2").unwrap_err().code, 1);
    }

    #[test]
    fn verb_gates_per_version() {
        for v in SUPPORTED {
            let check = check_verb(v, "CHECK", CHECK_MIN);
            assert_eq!(check.is_ok(), at_least(v, "0.4.0"), "CHECK {v}");
            if let Err(e) = check {
                assert_eq!((e.code, e.msg.as_str()), (1, "config version does not allow CHECK"));
            }
            for verb in ["STATUS", "GC"] {
                let r = check_verb(v, verb, STATUS_GC_MIN);
                assert_eq!(r.is_ok(), *v == "1.1.0", "{verb} {v}");
                if let Err(e) = r {
                    assert_eq!(e.code, 1);
                    assert_eq!(e.msg, format!("config version does not allow {verb}"));
                }
            }
        }
    }

    #[test]
    fn verb_gate_beyond_and_between_supported_versions() {
        let e = check_verb("9.9.9", "CHECK", CHECK_MIN).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (1, "plugin version does not allow CHECK"));
        let e = check_verb("1.2.0", "GC", STATUS_GC_MIN).unwrap_err();
        assert_eq!(e.msg, "plugin version does not allow GC");
        // inside the range but not an exact version: the exact-match gate answers
        let e = check_verb("0.5.0", "CHECK", CHECK_MIN).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (1, "incompatible CNI versions"));
        let e = check_verb("a.b", "STATUS", STATUS_GC_MIN).unwrap_err();
        assert_eq!(e.code, 6);
    }

    #[test]
    fn version_reply_bytes() {
        assert_eq!(
            version_reply(),
            "{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"0.1.0\",\"0.2.0\",\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}\n"
        );
    }

    #[test]
    fn families() {
        assert_eq!(family(""), Some(Family::V02));
        assert_eq!(family("0.2.0"), Some(Family::V02));
        assert_eq!(family("0.3.0"), Some(Family::V04));
        assert_eq!(family("0.4.0"), Some(Family::V04));
        assert_eq!(family("1.0.0"), Some(Family::V1));
        assert_eq!(family("1.1.0"), Some(Family::V1));
        assert_eq!(family("0.5.0"), None);
    }

    #[test]
    fn one_address_per_family_rule() {
        for v in ["0.1.0", "0.2.0"] {
            check_one_address_per_family(v, 1, 1).unwrap();
            let e = check_one_address_per_family(v, 2, 0).unwrap_err();
            assert_eq!(
                e.msg,
                format!("CNI version {v} does not support more than 1 address per family")
            );
            assert_eq!(e.code, 999);
            assert!(check_one_address_per_family(v, 0, 2).is_err());
        }
        for v in ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
            check_one_address_per_family(v, 3, 3).unwrap();
        }
    }

    #[test]
    fn go_quoting() {
        assert_eq!(go_quote("a\"b\\c\n\t\u{1}"), r#""a\"b\\c\n\t\x01""#);
        assert_eq!(go_quote("é"), "\"é\"");
        assert_eq!(go_quote_list(&["FOO=bar", "X=y"]), r#"["FOO=bar" "X=y"]"#);
        assert_eq!(go_quote_list::<&str>(&[]), "[]");
        assert_eq!(go_list(&["/a", "/b"]), "[/a /b]");
    }
}
