//! `CNI_ARGS` (`K=V;K2=V2`), parsed exactly like Go's `types.LoadArgs` into a struct whose
//! field names are `known`.
//!
//! Keys match field names case-sensitively; `IgnoreUnknown` is always known (every Go args
//! struct embeds `CommonArgs`) and is evaluated after the whole string was read.
use super::version::{go_quote, go_quote_list};
use super::Error;

pub const IGNORE_UNKNOWN: &str = "IgnoreUnknown";

/// Parse `cni_args`; returns the known pairs in order (later duplicates win in [`get`]).
/// Errors are plain plugin errors (code 999) with Go's text.
pub fn parse(cni_args: &str, known: &[&str]) -> Result<Vec<(String, String)>, Error> {
    let mut pairs = Vec::new();
    if cni_args.is_empty() {
        return Ok(pairs);
    }
    let mut unknown: Vec<&str> = Vec::new();
    let mut ignore_unknown = false;
    for pair in cni_args.split(';') {
        let kv: Vec<&str> = pair.split('=').collect();
        if kv.len() != 2 {
            return Err(Error::internal(format!("ARGS: invalid pair {}", go_quote(pair))));
        }
        let (key, value) = (kv[0], kv[1]);
        if key == IGNORE_UNKNOWN {
            ignore_unknown = parse_bool(value).map_err(|e| {
                // the stray ")" is in the Go format string
                Error::internal(format!("ARGS: error parsing value of pair {}: {e})", go_quote(pair)))
            })?;
        } else if !known.contains(&key) {
            unknown.push(pair);
            continue;
        }
        pairs.push((key.to_string(), value.to_string()));
    }
    if !unknown.is_empty() && !ignore_unknown {
        return Err(Error::internal(format!(
            "ARGS: unknown args {}",
            go_quote_list(&unknown)
        )));
    }
    Ok(pairs)
}

/// Go's `UnmarshallableBool`: `1`/`true`/`0`/`false`, any case.
fn parse_bool(value: &str) -> Result<bool, String> {
    let s = value.to_lowercase();
    match s.as_str() {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(format!("boolean unmarshal error: invalid input {s}")),
    }
}

/// The value of `key` (the last one when repeated, as Go's field assignment leaves it).
pub fn get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_string_is_nothing() {
        assert!(parse("", &["IP"]).unwrap().is_empty());
    }

    #[test]
    fn known_pairs_in_order() {
        let p = parse("IP=10.1.2.3;MAC=aa:bb:cc:dd:ee:ff", &["IP", "MAC"]).unwrap();
        assert_eq!(get(&p, "IP"), Some("10.1.2.3"));
        assert_eq!(get(&p, "MAC"), Some("aa:bb:cc:dd:ee:ff"));
        assert_eq!(get(&p, "OTHER"), None);
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn empty_value_is_allowed() {
        let p = parse("IP=", &["IP"]).unwrap();
        assert_eq!(get(&p, "IP"), Some(""));
    }

    #[test]
    fn last_duplicate_wins() {
        let p = parse("IP=1.1.1.1;IP=2.2.2.2", &["IP"]).unwrap();
        assert_eq!(get(&p, "IP"), Some("2.2.2.2"));
    }

    #[test]
    fn invalid_pairs() {
        for (input, pair) in [("a=b=c", "a=b=c"), ("IP", "IP"), ("IP=1.2.3.4;", ""), (";IP=1", "")] {
            let e = parse(input, &["IP"]).unwrap_err();
            assert_eq!(e.code, 999);
            assert_eq!(e.msg, format!("ARGS: invalid pair \"{pair}\""), "{input}");
        }
    }

    #[test]
    fn comma_is_not_a_separator() {
        // args_test.go: "IgnoreUnknown=0, Unk=nown" is one pair with two '='
        let e = parse("IgnoreUnknown=0, Unk=nown", &[]).unwrap_err();
        assert_eq!(e.msg, r#"ARGS: invalid pair "IgnoreUnknown=0, Unk=nown""#);
    }

    #[test]
    fn go_args_test_cases() {
        assert!(parse("IgnoreUnknown=True;Unk=nown", &[]).is_ok());
        assert!(parse("Unk=nown", &[]).is_err());
        assert!(parse("IgnoreUnknown=1", &[]).is_ok());
        for t in ["True", "true", "1", "False", "false", "0"] {
            assert!(parse(&format!("IgnoreUnknown={t}"), &[]).is_ok(), "{t}");
        }
        assert!(parse("IgnoreUnknown=invalid", &[]).is_err());
    }

    #[test]
    fn keys_are_case_sensitive_field_names() {
        let e = parse("ip=10.1.2.60", &["IP"]).unwrap_err();
        assert_eq!(e.msg, r#"ARGS: unknown args ["ip=10.1.2.60"]"#);
    }

    #[test]
    fn unknown_args_listed_in_order() {
        let e = parse("FOO=bar;IP=1.2.3.4;BAZ=qux", &["IP"]).unwrap_err();
        assert_eq!(e.msg, r#"ARGS: unknown args ["FOO=bar" "BAZ=qux"]"#);
    }

    #[test]
    fn ignore_unknown_anywhere_in_the_string() {
        for s in [
            "IgnoreUnknown=1;K8S_POD_NAME=p;IP=1.2.3.4",
            "K8S_POD_NAME=p;IP=1.2.3.4;IgnoreUnknown=true",
            "K8S_POD_NAME=p;IgnoreUnknown=TRUE;IP=1.2.3.4",
        ] {
            let p = parse(s, &["IP"]).unwrap();
            assert_eq!(get(&p, "IP"), Some("1.2.3.4"), "{s}");
            assert_eq!(get(&p, "K8S_POD_NAME"), None);
        }
    }

    #[test]
    fn ignore_unknown_false_still_rejects() {
        for v in ["0", "false", "False"] {
            let e = parse(&format!("IgnoreUnknown={v};FOO=bar"), &[]).unwrap_err();
            assert_eq!(e.msg, r#"ARGS: unknown args ["FOO=bar"]"#);
        }
        // the last IgnoreUnknown counts
        assert!(parse("IgnoreUnknown=1;FOO=bar;IgnoreUnknown=0", &[]).is_err());
        assert!(parse("IgnoreUnknown=0;FOO=bar;IgnoreUnknown=1", &[]).is_ok());
    }

    #[test]
    fn ignore_unknown_bad_value() {
        let e = parse("IgnoreUnknown=Yes", &[]).unwrap_err();
        assert_eq!(
            e.msg,
            r#"ARGS: error parsing value of pair "IgnoreUnknown=Yes": boolean unmarshal error: invalid input yes)"#
        );
        // reported in the loop, before unknown keys are judged
        let e = parse("FOO=1;IgnoreUnknown=maybe", &[]).unwrap_err();
        assert!(e.msg.starts_with("ARGS: error parsing value"), "{}", e.msg);
    }

    #[test]
    fn ignore_unknown_is_returned_as_a_pair() {
        let p = parse("IgnoreUnknown=1", &[]).unwrap();
        assert_eq!(get(&p, IGNORE_UNKNOWN), Some("1"));
    }
}
