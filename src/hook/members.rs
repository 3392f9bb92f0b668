//! Where the members of a JSON object sit in its text, so that `oci-wrap` can replace a
//! bundle's `hooks` and copy every other byte of `config.json` as it is, and the hook can
//! decode the two members it reads (`process.env`, `linux.namespaces`) and skip the rest.
//!
//! Decoding Docker's ~10 kB config into a `Value` took the static binary 0.4 ms, and
//! writing it back 0.2 ms more, in the wrapper and in both hooks of every container;
//! serde_json's `RawValue` (the same split) or typed structs cost 12 kB of binary each.
//! This scanner only finds where values begin and end: strings with their escapes, nested
//! objects and arrays, scalars. It checks the object's structure; the values it skips are
//! checked by the runtime when it reads the file, as they would be without the wrapper.
use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub at: usize,
    pub what: &'static str,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// The layout of a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Just after the opening `{`.
    pub body_start: usize,
    /// Each member's name and the range of its value, in order.
    pub members: Vec<(String, Range<usize>)>,
}

impl Object {
    /// The value of member `name`: the last one, if repeated, as serde_json keeps.
    pub fn get(&self, name: &str) -> Option<Range<usize>> {
        self.members
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r.clone())
    }

    /// The text of member `name` of `text` (the object this layout is of); `None` when it
    /// is absent or `null`.
    pub fn value<'a>(&self, text: &'a [u8], name: &str) -> Option<&'a [u8]> {
        self.get(name).map(|r| &text[r]).filter(|v| *v != b"null")
    }
}

/// The text of member `name` of the object `text`; `None` when it is absent or `null`.
pub fn member<'a>(text: &'a [u8], name: &str) -> Result<Option<&'a [u8]>, Error> {
    Ok(parse(text)?.value(text, name))
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn err(&self, what: &'static str) -> Error {
        Error { at: self.i, what }
    }

    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8, what: &'static str) -> Result<(), Error> {
        if self.peek() != Some(c) {
            return Err(self.err(what));
        }
        self.i += 1;
        Ok(())
    }

    /// A string, from its opening quote.
    fn string(&mut self) -> Result<(), Error> {
        self.i += 1;
        loop {
            match self.b.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(b'\\') => self.i += 2,
                Some(_) => self.i += 1,
            }
        }
    }

    /// Any value: its range.
    fn value(&mut self) -> Result<Range<usize>, Error> {
        let start = match self.peek() {
            Some(_) => self.i,
            None => return Err(self.err("missing value")),
        };
        match self.b[start] {
            b'"' => self.string()?,
            b'{' | b'[' => {
                let mut open = Vec::new();
                loop {
                    match self.b.get(self.i) {
                        None => return Err(self.err("unterminated object or array")),
                        Some(b'"') => self.string()?,
                        Some(&c @ (b'{' | b'[')) => {
                            open.push(if c == b'{' { b'}' } else { b']' });
                            self.i += 1;
                        }
                        Some(&c @ (b'}' | b']')) => {
                            if open.pop() != Some(c) {
                                return Err(self.err("mismatched bracket"));
                            }
                            self.i += 1;
                            if open.is_empty() {
                                break;
                            }
                        }
                        Some(_) => self.i += 1,
                    }
                }
            }
            _ => {
                while !matches!(
                    self.b.get(self.i),
                    None | Some(b',' | b'}' | b']' | b':' | b'"' | b'{' | b'[' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.i += 1;
                }
                if self.i == start {
                    return Err(self.err("missing value"));
                }
            }
        }
        Ok(start..self.i)
    }
}

/// The layout of the object `text`.
pub fn parse(text: &[u8]) -> Result<Object, Error> {
    let mut s = Scan { b: text, i: 0 };
    s.eat(b'{', "not a JSON object")?;
    let body_start = s.i;
    let mut members = Vec::new();
    if s.peek() == Some(b'}') {
        s.i += 1;
    } else {
        loop {
            if s.peek() != Some(b'"') {
                return Err(s.err("expected a member name"));
            }
            let key_start = s.i;
            s.string()?;
            let key: String =
                serde_json::from_slice(&text[key_start..s.i]).map_err(|_| s.err("invalid member name"))?;
            s.eat(b':', "expected ':'")?;
            members.push((key, s.value()?));
            match s.peek() {
                Some(b',') => s.i += 1,
                Some(b'}') => {
                    s.i += 1;
                    break;
                }
                _ => return Err(s.err("expected ',' or '}'")),
            }
        }
    }
    if s.peek().is_some() {
        return Err(s.err("text after the object"));
    }
    Ok(Object { body_start, members })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn finds_the_member_among_nested_values_strings_and_escapes() {
        let text = br#" { "a" : {"hooks": [1, "}"]}, "s": "x\"}\\", "n": -1.5e3, "t": true,
            "hooks" : {"prestart": [{"path": "/p"}]} , "z": null } "#;
        let o = parse(text).unwrap();
        assert_eq!(&text[o.get("hooks").unwrap()], br#"{"prestart": [{"path": "/p"}]}"#);
        let names: Vec<&str> = o.members.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "s", "n", "t", "hooks", "z"]);
        assert_eq!(&text[o.get("s").unwrap()], br#""x\"}\\""#);
        assert_eq!(&text[o.get("n").unwrap()], b"-1.5e3");
        assert_eq!(text[o.body_start - 1], b'{');
        assert_eq!(o.get("missing"), None);
        assert_eq!(member(text, "z").unwrap(), None, "null is absent");
        assert_eq!(member(text, "t").unwrap(), Some(&b"true"[..]));
        let e = parse(b" {} ").unwrap();
        assert!(e.members.is_empty());
        // an escaped member name is still the member
        let text = br#"{"ho\u006fks": 7}"#;
        assert_eq!(&text[parse(text).unwrap().get("hooks").unwrap()], b"7");
        // the last of repeated members, as serde_json keeps
        let text = br#"{"hooks": 1, "hooks": 2}"#;
        assert_eq!(&text[parse(text).unwrap().get("hooks").unwrap()], b"2");
    }

    #[test]
    fn ranges_agree_with_serde_json_on_real_documents() {
        let docs = [
            json!({"ociVersion": "1.0.2-dev", "process": {"env": ["A=1", "B=x=y"], "args": ["sh", "-c", "echo \"}\""]},
                   "hooks": {"prestart": [{"path": "/proc/1/exe", "args": ["libnetwork-setkey", "-exec-root=/run/docker"]}]},
                   "linux": {"namespaces": [{"type": "network"}], "maskedPaths": ["/proc/kcore"], "resources": {"cpu": {"shares": 0}}}}),
            json!({"hooks": {}}),
            json!({"x": [[[]]], "hooks": [], "y": "\u{1F600}\\"}),
        ];
        for d in docs {
            for text in [d.to_string(), serde_json::to_string_pretty(&d).unwrap()] {
                let o = parse(text.as_bytes()).unwrap();
                assert_eq!(o.members.len(), d.as_object().unwrap().len());
                for (name, range) in &o.members {
                    let v: Value = serde_json::from_str(&text[range.clone()]).unwrap();
                    assert_eq!(v, d[name], "{name} in {text}");
                }
            }
        }
    }

    #[test]
    fn malformed_objects_are_errors() {
        for bad in [
            &b""[..],
            b"   ",
            b"[]",
            b"\"x\"",
            b"{",
            b"{\"a\"}",
            b"{\"a\":}",
            b"{\"a\": 1,}",
            b"{\"a\": [1}",
            b"{\"a\": \"x}",
            b"{\"a\": 1} x",
            b"{a: 1}",
            b"{\"a\" 1}",
            br#"{"hooks": }"#,
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
