//! Reading typed fields out of JSON objects the way Go's `encoding/json` fills a struct:
//! absent and `null` leave the zero value, a wrong type is an error naming the field.
use super::Error;
use serde_json::{Map, Value};

/// Go's name for the kind of a JSON value, as its decode errors print it.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `json: cannot unmarshal <kind> into Go struct field <path> of type <ty>` (code 999).
pub fn type_error(v: &Value, path: &str, ty: &str) -> Error {
    Error::internal(format!(
        "json: cannot unmarshal {} into Go struct field {path} of type {ty}",
        kind(v)
    ))
}

/// Something with named members: a JSON object, or any JSON value (a value that is not an
/// object has no members, as Go sees a struct field of a non-object).
pub trait Fields {
    fn field(&self, key: &str) -> Option<&Value>;
}

impl Fields for Map<String, Value> {
    fn field(&self, key: &str) -> Option<&Value> {
        self.get(key)
    }
}

impl Fields for Value {
    fn field(&self, key: &str) -> Option<&Value> {
        self.get(key)
    }
}

impl Fields for std::borrow::Cow<'_, Map<String, Value>> {
    fn field(&self, key: &str) -> Option<&Value> {
        self.get(key)
    }
}

fn present<'a, F: Fields + ?Sized>(obj: &'a F, key: &str) -> Option<&'a Value> {
    obj.field(key).filter(|v| !v.is_null())
}

pub fn opt_str<'a, F: Fields + ?Sized>(obj: &'a F, key: &str, path: &str) -> Result<Option<&'a str>, Error> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(type_error(v, path, "string")),
    }
}

/// A Go `bool` field.
pub fn opt_bool<F: Fields + ?Sized>(obj: &F, key: &str, path: &str) -> Result<Option<bool>, Error> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(type_error(v, path, "bool")),
    }
}

/// An integer field (Go `int`); fractions and out-of-range values are errors.
pub fn opt_int<F: Fields + ?Sized>(obj: &F, key: &str, path: &str) -> Result<Option<i64>, Error> {
    match present(obj, key) {
        None => Ok(None),
        Some(v @ Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| {
            Error::internal(format!(
                "json: cannot unmarshal number {v} into Go struct field {path} of type int"
            ))
        }),
        Some(v) => Err(type_error(v, path, "int")),
    }
}

/// A non-negative integer that must fit `T` (MTUs, table ids, indexes).
pub fn opt_uint<T: TryFrom<i64>>(obj: &(impl Fields + ?Sized), key: &str, path: &str) -> Result<Option<T>, Error> {
    match opt_int(obj, key, path)? {
        None => Ok(None),
        Some(n) => T::try_from(n)
            .map(Some)
            .map_err(|_| Error::internal(format!("{path}: value {n} out of range"))),
    }
}

/// A `[]string`: `null`/absent is `None`, `[]` is `Some(empty)` (the distinction DNS needs).
pub fn opt_str_list<F: Fields + ?Sized>(obj: &F, key: &str, path: &str) -> Result<Option<Vec<String>>, Error> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                Value::Null => Ok(String::new()),
                other => Err(type_error(other, path, "string")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(v) => Err(type_error(v, path, "[]string")),
    }
}

/// A list of objects (or anything, left to the caller); `null`/absent is empty.
pub fn opt_array<'a, F: Fields + ?Sized>(obj: &'a F, key: &str, path: &str) -> Result<&'a [Value], Error> {
    Ok(opt_list(obj, key, path, "[]")?.unwrap_or(&[]))
}

/// A list whose Go type the error names (`[]allocator.RangeSet`); `null`/absent is `None`.
pub fn opt_list<'a, F: Fields + ?Sized>(
    obj: &'a F,
    key: &str,
    path: &str,
    go_type: &str,
) -> Result<Option<&'a [Value]>, Error> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        Some(v) => Err(type_error(v, path, go_type)),
    }
}

pub fn opt_object<'a, F: Fields + ?Sized>(
    obj: &'a F,
    key: &str,
    path: &str,
) -> Result<Option<&'a Map<String, Value>>, Error> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(v) => Err(type_error(v, path, "struct")),
    }
}

/// The value as an object; `null` decodes as an empty one (Go leaves the struct zero).
pub fn as_object<'a>(v: &'a Value, path: &str) -> Result<std::borrow::Cow<'a, Map<String, Value>>, Error> {
    match v {
        Value::Object(m) => Ok(std::borrow::Cow::Borrowed(m)),
        Value::Null => Ok(std::borrow::Cow::Owned(Map::new())),
        other => Err(type_error(other, path, "struct")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn absent_and_null_are_zero() {
        let o = obj(json!({"n": null}));
        assert_eq!(opt_str(&o, "n", "x").unwrap(), None);
        assert_eq!(opt_str(&o, "missing", "x").unwrap(), None);
        assert_eq!(opt_int(&o, "n", "x").unwrap(), None);
        assert_eq!(opt_bool(&o, "n", "x").unwrap(), None);
        assert_eq!(opt_str_list(&o, "n", "x").unwrap(), None);
        assert!(opt_array(&o, "n", "x").unwrap().is_empty());
        assert!(opt_object(&o, "n", "x").unwrap().is_none());
    }

    #[test]
    fn empty_list_differs_from_absent() {
        let o = obj(json!({"l": [], "m": ["a", null]}));
        assert_eq!(opt_str_list(&o, "l", "x").unwrap(), Some(vec![]));
        assert_eq!(
            opt_str_list(&o, "m", "x").unwrap(),
            Some(vec!["a".to_string(), String::new()])
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let o = obj(json!({"s": 1, "i": "x", "f": 1.5, "l": "x", "e": [1], "neg": -1}));
        assert_eq!(
            opt_str(&o, "s", "route.dst").unwrap_err().msg,
            "json: cannot unmarshal number into Go struct field route.dst of type string"
        );
        assert_eq!(
            opt_int(&o, "i", "r.mtu").unwrap_err().msg,
            "json: cannot unmarshal string into Go struct field r.mtu of type int"
        );
        assert_eq!(
            opt_int(&o, "f", "r.mtu").unwrap_err().msg,
            "json: cannot unmarshal number 1.5 into Go struct field r.mtu of type int"
        );
        assert!(opt_str_list(&o, "l", "d.search").is_err());
        assert!(opt_str_list(&o, "e", "d.search").is_err());
        assert_eq!(
            opt_uint::<u32>(&o, "neg", "r.mtu").unwrap_err().msg,
            "r.mtu: value -1 out of range"
        );
        assert_eq!(opt_str(&o, "s", "x").unwrap_err().code, 999);
        assert_eq!(
            opt_bool(&o, "s", "NetConf.isGateway").unwrap_err().msg,
            "json: cannot unmarshal number into Go struct field NetConf.isGateway of type bool"
        );
    }

    #[test]
    fn null_object_is_empty() {
        assert!(as_object(&Value::Null, "x").unwrap().is_empty());
        assert!(as_object(&json!([1]), "x").is_err());
    }
}
