//! Reading typed fields out of JSON objects the way Go's `encoding/json` fills a struct.
//!
//! A member fills a field when its key is the field's name or folds to it ([`super::fold`]),
//! in document order, so the last matching member wins. What a member does to the field
//! depends on the field's Go kind, and each reader below is named for one:
//! * a value field (`string`, `bool`, `int`, a struct): `null` leaves it as it was;
//! * a pointer, slice or map field: `null` sets it to nil;
//! * a struct (or a pointer to one, or a map) written twice is decoded twice into the same
//!   value, so the members of both are merged;
//! * a member of the wrong JSON type is an error naming the field, even when a later member
//!   is right (Go reports the earliest such error);
//! * keys that match no field are ignored.
//!
//! Go picks an exact match over a folded one when a struct has two fields whose names fold
//! together (static's `Address` has `address` and `Address`): [`Fields::written_exactly`]
//! reads the one such a key names exactly, [`Fields::shadowed_by`] the other.
use super::super::Error;
use super::tree::{Json, Object};
use std::collections::BTreeMap;

/// Go's name for the kind of a JSON value, as its decode errors print it.
pub fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// `json: cannot unmarshal <kind> into Go struct field <path> of type <ty>` (code 999).
pub fn type_error(v: &Json, path: &str, ty: &str) -> Error {
    Error::internal(format!(
        "json: cannot unmarshal {} into Go struct field {path} of type {ty}",
        kind(v)
    ))
}

/// The fields of a Go struct being decoded: the object(s) its JSON came from, in document
/// order (one, unless the struct's own key was written more than once).
#[derive(Debug, Clone, Default)]
pub struct Fields<'a> {
    parts: Vec<&'a Object>,
    /// A key spelled exactly as this belongs to another field, whatever it folds to.
    shadowed: Option<&'a str>,
}

impl<'a> Fields<'a> {
    pub fn of(obj: &'a Object) -> Fields<'a> {
        Fields {
            parts: vec![obj],
            shadowed: None,
        }
    }

    /// The same fields, where a key spelled exactly `field` fills the struct's field of that
    /// name and no other, as Go matches it: for reading the field whose name folds together
    /// with `field`'s.
    pub fn shadowed_by(&self, field: &'a str) -> Fields<'a> {
        Fields {
            parts: self.parts.clone(),
            shadowed: Some(field),
        }
    }

    /// Every value written under exactly the key `name`, in document order: the field of a
    /// struct another of whose fields folds to the same name (see [`Fields::shadowed_by`]).
    pub fn written_exactly(&self, name: &str, go_type: &str) -> impl Iterator<Item = &'a Json> + '_ {
        self.record(name, go_type);
        let name = name.to_string();
        self.parts
            .iter()
            .flat_map(|o| o.members())
            .filter(move |(k, _)| *k == name)
            .map(|(_, v)| v)
    }

    /// Every value written under a key Go matches to the field `name`, in document order.
    /// `go_type` is the field's Go type, for the key registry of the tests.
    pub fn written(&self, name: &str, go_type: &str) -> impl Iterator<Item = &'a Json> + '_ {
        self.record(name, go_type);
        let name = name.to_string();
        let shadowed = self.shadowed.filter(|s| *s != name);
        self.parts
            .iter()
            .flat_map(|o| o.members())
            .filter(move |(k, _)| *k == name || (Some(*k) != shadowed && super::fold::matches(k, &name)))
            .map(|(_, v)| v)
    }

    /// Records a lookup with the key registry of test builds.
    fn record(&self, _name: &str, _go_type: &str) {
        #[cfg(any(test, feature = "test-support"))]
        for part in &self.parts {
            super::keys::record(part, _name, _go_type);
        }
    }

    /// True when the last value written for the field is `null`: a pointer, slice or map
    /// field is nil then, whatever came before.
    pub fn is_nil(&self, name: &str, go_type: &str) -> bool {
        self.written(name, go_type).last().is_some_and(Json::is_null)
    }
}

thread_local! {
    /// Set while [`leniently`] runs.
    static LENIENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with decoding that takes a member it cannot decode (a wrong type, a number out
/// of range) as not written, instead of failing. For DEL only: DEL must undo what ADD made
/// even when the config holds a value ADD refused, or a runtime retries it forever (the
/// reference fails such a DEL every time).
pub fn leniently<T>(f: impl FnOnce() -> T) -> T {
    let before = LENIENT.with(|l| l.replace(true));
    let out = f();
    LENIENT.with(|l| l.set(before));
    out
}

/// A member that does not decode: an error, or (under [`leniently`]) no member at all.
fn undecodable<T>(e: Error) -> Result<Option<T>, Error> {
    match LENIENT.with(|l| l.get()) {
        true => Ok(None),
        false => Err(e),
    }
}

/// A value field of Go type `go_type`: every non-null value written is converted (a wrong
/// one is an error), the last one wins; `None` when none was written.
pub fn value_field<'a, T>(
    obj: &Fields<'a>,
    key: &str,
    go_type: &str,
    mut convert: impl FnMut(&'a Json) -> Result<T, Error>,
) -> Result<Option<T>, Error> {
    let mut out = None;
    for v in obj.written(key, go_type).filter(|v| !v.is_null()) {
        match convert(v) {
            Ok(x) => out = Some(x),
            Err(e) => undecodable::<()>(e).map(|_| ())?,
        }
    }
    Ok(out)
}

/// A pointer, slice or `interface{}` field: the last value written, `None` when that is
/// `null`; every earlier one is still converted, so a wrong type is an error.
pub fn nullable_field<'a, T>(
    obj: &Fields<'a>,
    key: &str,
    go_type: &str,
    mut convert: impl FnMut(&'a Json) -> Result<T, Error>,
) -> Result<Option<T>, Error> {
    let mut out = None;
    for v in obj.written(key, go_type) {
        out = match v {
            Json::Null => None,
            v => match convert(v) {
                Ok(x) => Some(x),
                Err(e) => undecodable(e)?,
            },
        };
    }
    Ok(out)
}

/// A Go `string` field.
pub fn opt_str<'a>(obj: &Fields<'a>, key: &str, path: &str) -> Result<Option<&'a str>, Error> {
    value_field(obj, key, "string", |v| {
        v.as_str().ok_or_else(|| type_error(v, path, "string"))
    })
}

/// A Go `bool` field.
pub fn opt_bool(obj: &Fields, key: &str, path: &str) -> Result<Option<bool>, Error> {
    value_field(obj, key, "bool", |v| {
        v.as_bool().ok_or_else(|| type_error(v, path, "bool"))
    })
}

/// A Go `int` field; fractions and values beyond 64 bits are errors.
pub fn opt_int(obj: &Fields, key: &str, path: &str) -> Result<Option<i64>, Error> {
    value_field(obj, key, "int", |v| int_of(v, path, "int"))
}

/// A JSON number as a Go integer of type `ty` (checked against `i64` only).
pub fn int_of(v: &Json, path: &str, ty: &str) -> Result<i64, Error> {
    match v {
        Json::Number(n) => n.as_i64().ok_or_else(|| {
            Error::internal(format!(
                "json: cannot unmarshal number {n} into Go struct field {path} of type {ty}"
            ))
        }),
        other => Err(type_error(other, path, ty)),
    }
}

/// A `*string` field: as [`opt_str`], but a `null` written last makes it nil.
pub fn opt_ptr_str<'a>(obj: &Fields<'a>, key: &str, path: &str) -> Result<Option<&'a str>, Error> {
    nullable_field(obj, key, "*string", |v| {
        v.as_str().ok_or_else(|| type_error(v, path, "string"))
    })
}

/// A `*bool` field: as [`opt_bool`], but a `null` written last makes it nil.
pub fn opt_ptr_bool(obj: &Fields, key: &str, path: &str) -> Result<Option<bool>, Error> {
    nullable_field(obj, key, "*bool", |v| {
        v.as_bool().ok_or_else(|| type_error(v, path, "bool"))
    })
}

/// A `*int` field: as [`opt_int`], but a `null` written last makes it nil.
pub fn opt_ptr_int(obj: &Fields, key: &str, path: &str) -> Result<Option<i64>, Error> {
    nullable_field(obj, key, "*int", |v| int_of(v, path, "int"))
}

/// A `*uint32` field (tap's `owner` and `group`): a whole number that fits 32 bits
/// unsigned, else Go's error for that type; a `null` written last makes it nil.
pub fn opt_ptr_u32(obj: &Fields, key: &str, path: &str) -> Result<Option<u32>, Error> {
    nullable_field(obj, key, "*uint32", |v| unsigned_of(v, path, "uint32"))
}

/// A non-negative integer that must fit `T` (MTUs, table ids, indexes).
pub fn opt_uint<T: TryFrom<i64>>(obj: &Fields, key: &str, path: &str) -> Result<Option<T>, Error> {
    match opt_int(obj, key, path)? {
        None => Ok(None),
        Some(n) => T::try_from(n)
            .map(Some)
            .map_err(|_| Error::internal(format!("{path}: value {n} out of range"))),
    }
}

/// A Go `uint64` field: a negative number or a fraction is Go's error for that type.
pub fn opt_u64(obj: &Fields, key: &str, path: &str) -> Result<Option<u64>, Error> {
    opt_unsigned(obj, key, path, "uint64")
}

/// A Go `uint32` field (a routing table): a negative number, a fraction or one beyond 32
/// bits is Go's error for that type.
pub fn opt_u32(obj: &Fields, key: &str, path: &str) -> Result<Option<u32>, Error> {
    opt_unsigned(obj, key, path, "uint32")
}

/// A Go unsigned field of type `ty`, whose range is `T`'s.
fn opt_unsigned<T: TryFrom<u64>>(obj: &Fields, key: &str, path: &str, ty: &str) -> Result<Option<T>, Error> {
    value_field(obj, key, ty, |v| unsigned_of(v, path, ty))
}

/// A JSON number as a Go unsigned integer of type `ty`, whose range is `T`'s.
fn unsigned_of<T: TryFrom<u64>>(v: &Json, path: &str, ty: &str) -> Result<T, Error> {
    match v {
        Json::Number(n) => n.as_u64().and_then(|u| T::try_from(u).ok()).ok_or_else(|| {
            Error::internal(format!(
                "json: cannot unmarshal number {n} into Go struct field {path} of type {ty}"
            ))
        }),
        other => Err(type_error(other, path, ty)),
    }
}

/// A `[]string`: `null`/absent is `None`, `[]` is `Some(empty)` (the distinction DNS needs);
/// a `null` element is `""`.
pub fn opt_str_list(obj: &Fields, key: &str, path: &str) -> Result<Option<Vec<String>>, Error> {
    nullable_field(obj, key, "[]string", |v| str_list(v, path))
}

/// A JSON value as a Go `[]string`.
pub fn str_list(v: &Json, path: &str) -> Result<Vec<String>, Error> {
    let Json::Array(items) = v else {
        return Err(type_error(v, path, "[]string"));
    };
    items
        .iter()
        .map(|item| match item {
            Json::String(s) => Ok(s.clone()),
            Json::Null => Ok(String::new()),
            other => Err(type_error(other, path, "string")),
        })
        .collect()
}

/// A list of objects (or anything, left to the caller); `null`/absent is empty.
pub fn opt_array<'a>(obj: &Fields<'a>, key: &str, path: &str) -> Result<&'a [Json], Error> {
    Ok(opt_list(obj, key, path, "[]")?.unwrap_or(&[]))
}

/// A slice field whose Go type the error names (`[]allocator.RangeSet`); `null`/absent is
/// `None`.
pub fn opt_list<'a>(obj: &Fields<'a>, key: &str, path: &str, go_type: &str) -> Result<Option<&'a [Json]>, Error> {
    nullable_field(obj, key, go_type, |v| {
        v.as_array().ok_or_else(|| type_error(v, path, go_type))
    })
}

/// A struct field of Go type `go_type`: every object written for it, merged as Go decodes
/// them into one value; `None` when none was written (or only `null`).
pub fn opt_object<'a>(obj: &Fields<'a>, key: &str, path: &str, go_type: &str) -> Result<Option<Fields<'a>>, Error> {
    let mut parts = Vec::new();
    for v in obj.written(key, go_type).filter(|v| !v.is_null()) {
        match v.as_object() {
            Some(o) => parts.push(o),
            None => undecodable::<()>(type_error(v, path, go_type)).map(|_| ())?,
        }
    }
    Ok((!parts.is_empty()).then_some(Fields { parts, shadowed: None }))
}

/// A pointer-to-struct field: as [`opt_object`], but a `null` drops what came before.
/// `go_type` is the struct's type: Go names the pointed-to type in its errors.
pub fn opt_ptr_object<'a>(obj: &Fields<'a>, key: &str, path: &str, go_type: &str) -> Result<Option<Fields<'a>>, Error> {
    let pointee = go_type.trim_start_matches('*');
    let mut parts: Option<Vec<&Object>> = None;
    for v in obj.written(key, &format!("*{pointee}")) {
        match v {
            Json::Null => parts = None,
            Json::Object(o) => parts.get_or_insert_with(Vec::new).push(o),
            other => undecodable::<()>(type_error(other, path, pointee)).map(|_| ())?,
        }
    }
    Ok(parts.map(|parts| Fields { parts, shadowed: None }))
}

/// A Go map decoded from JSON: one entry per exact key, the last written.
pub type Map<'a> = BTreeMap<&'a str, &'a Json>;

/// A `map[string]…` field: the entries of every object written for it (a `null` drops what
/// came before), keys kept exactly as written; `None` when nil. Values are the caller's.
pub fn opt_map<'a>(obj: &Fields<'a>, key: &str, path: &str, go_type: &str) -> Result<Option<Map<'a>>, Error> {
    let mut map: Option<Map<'a>> = None;
    for v in obj.written(key, go_type) {
        match v {
            Json::Null => map = None,
            Json::Object(o) => map.get_or_insert_with(Map::new).extend(o.members()),
            other => undecodable::<()>(type_error(other, path, go_type)).map(|_| ())?,
        }
    }
    Ok(map)
}

/// An `interface{}` (or `json.RawMessage`) field: the last value written, `None` when absent
/// or `null`.
pub fn opt_raw<'a>(obj: &Fields<'a>, key: &str) -> Option<&'a Json> {
    obj.written(key, "interface {}").last().filter(|v| !v.is_null())
}

/// The value as the fields of a struct; `null` decodes as an empty one (Go leaves the struct
/// zero).
pub fn as_object<'a>(v: &'a Json, path: &str) -> Result<Fields<'a>, Error> {
    as_struct(v, path, "struct")
}

/// [`as_object`] for a value whose Go type (`main.PortMapEntry`, an element of a slice)
/// the error names.
pub fn as_struct<'a>(v: &'a Json, path: &str, go_type: &str) -> Result<Fields<'a>, Error> {
    match v {
        Json::Object(m) => Ok(Fields::of(m)),
        Json::Null => Ok(Fields::default()),
        other => undecodable(type_error(other, path, go_type)).map(Option::unwrap_or_default),
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn doc(text: &str) -> Json {
        parse(text.as_bytes()).unwrap()
    }

    fn with<T>(text: &str, f: impl FnOnce(&Fields) -> T) -> T {
        let j = doc(text);
        let fields = as_object(&j, "T").unwrap();
        f(&fields)
    }

    #[test]
    fn absent_and_null_are_zero() {
        with(r#"{"n": null}"#, |o| {
            assert_eq!(opt_str(o, "n", "x").unwrap(), None);
            assert_eq!(opt_str(o, "missing", "x").unwrap(), None);
            assert_eq!(opt_int(o, "n", "x").unwrap(), None);
            assert_eq!(opt_bool(o, "n", "x").unwrap(), None);
            assert_eq!(opt_str_list(o, "n", "x").unwrap(), None);
            assert!(opt_array(o, "n", "x").unwrap().is_empty());
            assert!(opt_object(o, "n", "x", "T").unwrap().is_none());
            assert!(opt_map(o, "n", "x", "map[string]string").unwrap().is_none());
            assert!(opt_raw(o, "n").is_none());
        });
    }

    #[test]
    fn a_uint32_pointer_is_nil_zero_or_in_range() {
        with(r#"{"o": 0, "g": 4294967295, "n": 5, "n": null}"#, |o| {
            assert_eq!(opt_ptr_u32(o, "o", "T.o").unwrap(), Some(0));
            assert_eq!(opt_ptr_u32(o, "g", "T.g").unwrap(), Some(u32::MAX));
            assert_eq!(opt_ptr_u32(o, "n", "T.n").unwrap(), None);
            assert_eq!(opt_ptr_u32(o, "missing", "T.m").unwrap(), None);
        });
        with(r#"{"a": -1, "b": 4294967296, "c": 1.5, "d": "1"}"#, |o| {
            for (key, text) in [
                ("a", "number -1"),
                ("b", "number 4294967296"),
                ("c", "number 1.5"),
                ("d", "string"),
            ] {
                assert_eq!(
                    opt_ptr_u32(o, key, &format!("T.{key}")).unwrap_err().msg,
                    format!("json: cannot unmarshal {text} into Go struct field T.{key} of type uint32")
                );
            }
        });
    }

    #[test]
    fn empty_list_differs_from_absent() {
        with(r#"{"l": [], "m": ["a", null]}"#, |o| {
            assert_eq!(opt_str_list(o, "l", "x").unwrap(), Some(vec![]));
            assert_eq!(
                opt_str_list(o, "m", "x").unwrap(),
                Some(vec!["a".to_string(), String::new()])
            );
        });
    }

    #[test]
    fn wrong_types_name_the_field() {
        with(r#"{"s": 1, "i": "x", "f": 1.5, "l": "x", "e": [1], "neg": -1}"#, |o| {
            assert_eq!(
                opt_str(o, "s", "route.dst").unwrap_err().msg,
                "json: cannot unmarshal number into Go struct field route.dst of type string"
            );
            assert_eq!(
                opt_int(o, "i", "r.mtu").unwrap_err().msg,
                "json: cannot unmarshal string into Go struct field r.mtu of type int"
            );
            assert_eq!(
                opt_int(o, "f", "r.mtu").unwrap_err().msg,
                "json: cannot unmarshal number 1.5 into Go struct field r.mtu of type int"
            );
            assert!(opt_str_list(o, "l", "d.search").is_err());
            assert!(opt_str_list(o, "e", "d.search").is_err());
            assert_eq!(
                opt_uint::<u32>(o, "neg", "r.mtu").unwrap_err().msg,
                "r.mtu: value -1 out of range"
            );
            assert_eq!(
                opt_u64(o, "neg", "B.ingressRate").unwrap_err().msg,
                "json: cannot unmarshal number -1 into Go struct field B.ingressRate of type uint64"
            );
            // a VRF's table, as the reference's vrf answers for -1 and a string
            assert_eq!(
                opt_u32(o, "neg", "VRFNetConf.table").unwrap_err().msg,
                "json: cannot unmarshal number -1 into Go struct field VRFNetConf.table of type uint32"
            );
            assert_eq!(
                opt_u32(o, "i", "VRFNetConf.table").unwrap_err().msg,
                "json: cannot unmarshal string into Go struct field VRFNetConf.table of type uint32"
            );
            assert_eq!(opt_str(o, "s", "x").unwrap_err().code, 999);
            assert_eq!(
                opt_bool(o, "s", "NetConf.isGateway").unwrap_err().msg,
                "json: cannot unmarshal number into Go struct field NetConf.isGateway of type bool"
            );
        });
    }

    /// static's `Address` has `address` (a string) and the untagged `Address` (a
    /// net.IPNet): Go gives a key spelled exactly like either field to that field, and every
    /// other spelling to the first of them.
    #[test]
    fn an_exact_key_goes_to_its_own_field_when_two_fold_together() {
        with(r#"{"address": "a", "Address": {"IP": "x"}, "ADDRESS": "b"}"#, |o| {
            let text = o.shadowed_by("Address");
            assert_eq!(opt_str(&text, "address", "x").unwrap(), Some("b"));
            let exact: Vec<&Json> = o.written_exactly("Address", "net.IPNet").collect();
            assert_eq!(exact.len(), 1);
            assert!(exact[0].as_object().is_some());
            assert!(
                opt_str(o, "address", "x").is_err(),
                "unshadowed, the object folds into the string field"
            );
        });
    }

    #[test]
    fn keys_match_fields_case_insensitively() {
        with(
            r#"{"HostPort": 8080, "CONTAINERPORT": 80, "protocol": "tcp", "hostip": "", "Ingre\u017fsRate": 5}"#,
            |o| {
                assert_eq!(opt_int(o, "hostPort", "x").unwrap(), Some(8080));
                assert_eq!(opt_int(o, "containerPort", "x").unwrap(), Some(80));
                assert_eq!(opt_str(o, "Protocol", "x").unwrap(), Some("tcp"));
                assert_eq!(opt_str(o, "hostIP", "x").unwrap(), Some(""));
                assert_eq!(opt_u64(o, "ingressRate", "x").unwrap(), Some(5));
                assert_eq!(opt_str(o, "host_ip", "x").unwrap(), None);
            },
        );
    }

    #[test]
    fn the_last_member_written_wins_whatever_its_case() {
        with(r#"{"mtu": 1, "MTU": 2}"#, |o| {
            assert_eq!(opt_int(o, "mtu", "x").unwrap(), Some(2))
        });
        with(r#"{"MTU": 2, "mtu": 1}"#, |o| {
            assert_eq!(opt_int(o, "mtu", "x").unwrap(), Some(1))
        });
        with(r#"{"MTU": 1, "mtu": 2, "MTU": 3}"#, |o| {
            assert_eq!(opt_int(o, "mtu", "x").unwrap(), Some(3))
        });
    }

    #[test]
    fn null_leaves_a_value_field_but_clears_a_pointer_slice_or_map() {
        with(
            r#"{"mtu": 1400, "mtu": null, "l": ["a"], "l": null, "m": {"a": "1"}, "m": null, "p": {"a": 1}, "p": null}"#,
            |o| {
                assert_eq!(opt_int(o, "mtu", "x").unwrap(), Some(1400));
                assert_eq!(opt_str_list(o, "l", "x").unwrap(), None);
                assert!(opt_map(o, "m", "x", "map[string]string").unwrap().is_none());
                assert!(opt_ptr_object(o, "p", "x", "*T").unwrap().is_none());
                assert!(o.is_nil("l", "[]string"));
            },
        );
    }

    #[test]
    fn a_struct_written_twice_is_merged() {
        with(
            r#"{"ipam": {"type": "host-local", "subnet": "10.0.0.0/8"}, "IPAM": {"Subnet": "10.1.0.0/16"}}"#,
            |o| {
                let ipam = opt_object(o, "ipam", "x", "types.IPAM").unwrap().unwrap();
                assert_eq!(opt_str(&ipam, "type", "x").unwrap(), Some("host-local"));
                assert_eq!(opt_str(&ipam, "subnet", "x").unwrap(), Some("10.1.0.0/16"));
            },
        );
        with(r#"{"m": {"a": "1", "b": "2"}, "M": {"b": "3", "B": "4"}}"#, |o| {
            let m = opt_map(o, "m", "x", "map[string]string").unwrap().unwrap();
            let got: Vec<(&str, &str)> = m.iter().map(|(k, v)| (*k, v.as_str().unwrap())).collect();
            // map keys are kept exactly as written
            assert_eq!(got, [("B", "4"), ("a", "1"), ("b", "3")]);
        });
    }

    #[test]
    fn a_wrong_type_is_an_error_even_when_a_later_value_is_right() {
        with(r#"{"mtu": "1400", "mtu": 1400}"#, |o| {
            assert_eq!(
                opt_int(o, "mtu", "NetConf.mtu").unwrap_err().msg,
                "json: cannot unmarshal string into Go struct field NetConf.mtu of type int"
            );
        });
    }

    #[test]
    fn leniently_a_member_that_does_not_decode_is_not_written() {
        let text = r#"{"mtu": "x", "MTU": 1400, "port": "80", "l": 5, "o": 5, "m": [1], "big": 99999999999}"#;
        with(text, |o| {
            let all = || -> Result<_, Error> {
                Ok((
                    opt_int(o, "mtu", "x")?,
                    opt_int(o, "port", "x")?,
                    opt_str_list(o, "l", "x")?,
                    opt_object(o, "o", "x", "T")?.is_some(),
                    opt_map(o, "m", "x", "map[string]string")?.is_some(),
                    opt_uint::<u32>(o, "big", "x").ok().flatten(),
                ))
            };
            assert!(all().is_err());
            assert_eq!(leniently(all).unwrap(), (Some(1400), None, None, false, false, None));
            // the mode ends with the call
            assert!(all().is_err());
        });
        assert!(leniently(|| as_object(&doc("[1]"), "x").is_ok()));
    }

    #[test]
    fn null_object_is_empty() {
        assert_eq!(opt_str(&as_object(&Json::Null, "x").unwrap(), "a", "x").unwrap(), None);
        assert!(as_object(&doc("[1]"), "x").is_err());
    }
}
