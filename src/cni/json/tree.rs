//! A JSON document as written: objects keep every member in document order, repeats
//! included. Go's decoder needs both: a struct field takes the last member whose key matches
//! it (exactly or folded), and which one is last depends on the order the keys were written
//! in, which a sorted map loses.
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Number, Value};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Default)]
pub enum Json {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Json>),
    Object(Object),
}

/// An object's members in document order; a key written twice is here twice.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    members: Vec<(String, Json)>,
    /// Written in member order, as Go writes a struct's fields, instead of sorted as Go
    /// writes a map (see [`Object::go_struct`]).
    in_field_order: bool,
}

/// Parse JSON text. Syntax errors are serde_json's; callers word them as their references do.
pub fn parse(bytes: &[u8]) -> Result<Json, serde_json::Error> {
    serde_json::from_slice(bytes)
}

impl Json {
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The value as Go marshals it after decoding it into an `interface{}` (see
    /// [`Object::marshalled`]).
    pub fn marshalled(&self) -> Json {
        match self {
            Json::Object(o) => Json::Object(o.marshalled()),
            Json::Array(items) => Json::Array(items.iter().map(Json::marshalled).collect()),
            other => other.clone(),
        }
    }

    /// The value as Go's `interface{}` holds it once decoded (`map[string]interface{}` for
    /// objects: one entry per key, the last written), in serde_json's terms.
    pub fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.clone()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(o) => {
                // Inserted, not collected: a BTree collection's `FromIterator` sorts, a sort instance of
                // ~4 KB per element type (see `util::sort`). A key written twice: the last wins.
                let mut map = serde_json::Map::new();
                map.extend(o.members().map(|(k, v)| (k.to_string(), v.to_value())));
                Value::Object(map)
            }
        }
    }
}

impl Object {
    pub fn new() -> Object {
        Object::default()
    }

    /// An object Go writes from a struct: serialised with its members in the order pushed
    /// (the struct's field order), not sorted as a map's.
    pub fn go_struct() -> Object {
        Object {
            in_field_order: true,
            ..Object::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Every member as written, repeats included, in document order.
    pub fn members(&self) -> impl Iterator<Item = (&str, &Json)> {
        self.members.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The object as Go's `map[string]interface{}` sees it: one entry per exact key, the
    /// last one written; sorted, as Go marshals a map. Never the way to read a struct field
    /// (that is [`super::Fields`], which matches keys as Go does).
    pub fn as_map(&self) -> BTreeMap<&str, &Json> {
        // Inserted, not collected: a BTree collection's `FromIterator` sorts, a sort instance of
        // ~4 KB per element type (see `util::sort`).
        let mut map = BTreeMap::new();
        map.extend(self.members());
        map
    }

    /// The value a Go map gives for exactly `key` (the last one written).
    pub fn map_get(&self, key: &str) -> Option<&Json> {
        self.members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Go's `m[key] = value` on a decoded map: `key` holds `value` alone afterwards.
    pub fn insert(&mut self, key: impl Into<String>, value: Json) {
        let key = key.into();
        self.members.retain(|(k, _)| *k != key);
        self.members.push((key, value));
    }

    /// Go's `delete(m, key)`: the last value written under exactly `key`, if any.
    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let last = self.map_get(key).cloned();
        self.members.retain(|(k, _)| k != key);
        last
    }

    /// A decoded Go map as an object, as [`Object::marshalled`] writes it.
    pub fn from_map(map: &BTreeMap<&str, &Json>) -> Object {
        Object {
            members: map.iter().map(|(k, v)| (k.to_string(), v.marshalled())).collect(),
            in_field_order: false,
        }
    }

    /// The object as Go writes it after decoding it into a `map[string]interface{}`: one
    /// member per key (the last written), sorted by key, the same for every object inside.
    /// Decoding that again is what the reference does after it edits a decoded map, and
    /// the sort decides which of two spellings of one field comes last.
    pub fn marshalled(&self) -> Object {
        Object::from_map(&self.as_map())
    }

    /// Appends a member as a parser does (a repeated key stays repeated).
    pub fn push(&mut self, key: impl Into<String>, value: Json) {
        self.members.push((key.into(), value));
    }

    /// A stable identity for this object's members while the tree is not changed (the
    /// address of their storage, which moving the tree does not change).
    #[cfg(any(test, feature = "test-support"))]
    pub(super) fn identity(&self) -> usize {
        self.members.as_ptr() as usize
    }
}

impl Json {
    /// The bytes Go's `json.Marshal` writes for the decoded value: compact, objects sorted
    /// with one member per key (as a `map[string]interface{}`), and `<`, `>`, `&`, U+2028
    /// and U+2029 escaped as `\u003c`, … (Go escapes them for HTML; serde_json does not).
    /// Those characters only ever occur inside strings, so escaping them in the output is
    /// escaping them in the strings.
    pub fn to_go_bytes(&self) -> Vec<u8> {
        let text = serde_json::to_string(self).expect("a JSON tree serialises");
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                '<' => out.push_str("\\u003c"),
                '>' => out.push_str("\\u003e"),
                '&' => out.push_str("\\u0026"),
                '\u{2028}' => out.push_str("\\u2028"),
                '\u{2029}' => out.push_str("\\u2029"),
                c => out.push(c),
            }
        }
        out.into_bytes()
    }
}

impl fmt::Display for Json {
    /// Compact JSON as Go marshals the decoded value (objects sorted, one entry per key).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| fmt::Error)?)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(items) => items.serialize(s),
            Json::Object(o) => o.serialize(s),
        }
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.in_field_order {
            let mut out = s.serialize_map(Some(self.members.len()))?;
            for (k, v) in &self.members {
                out.serialize_entry(k, v)?;
            }
            return out.end();
        }
        let map = self.as_map();
        let mut out = s.serialize_map(Some(map.len()))?;
        for (k, v) in map {
            out.serialize_entry(k, v)?;
        }
        out.end()
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Json, E> {
        Number::from_f64(n)
            .map(Json::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Json, E> {
        Ok(Json::String(s.to_string()))
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<Json, E> {
        Ok(Json::String(s))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        Json::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut obj = Object::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            obj.push(k, v);
        }
        Ok(Json::Object(obj))
    }
}

impl From<&Value> for Json {
    fn from(v: &Value) -> Json {
        match v {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(n.clone()),
            Value::String(s) => Json::String(s.clone()),
            Value::Array(items) => Json::Array(items.iter().map(Json::from).collect()),
            Value::Object(m) => Json::Object(Object {
                members: m.iter().map(|(k, v)| (k.clone(), Json::from(v))).collect(),
                in_field_order: false,
            }),
        }
    }
}

impl From<Value> for Json {
    fn from(v: Value) -> Json {
        Json::from(&v)
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::String(s.to_string())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::String(s)
    }
}

impl From<Object> for Json {
    fn from(o: Object) -> Json {
        Json::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Json {
        parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn members_keep_document_order_and_repeats() {
        let j = doc(r#"{"b": 1, "a": 2, "B": 3, "b": 4}"#);
        let o = j.as_object().unwrap();
        let keys: Vec<&str> = o.members().map(|(k, _)| k).collect();
        assert_eq!(keys, ["b", "a", "B", "b"]);
        // as a Go map: exact keys, the last one written
        assert_eq!(o.map_get("b"), Some(&Json::Number(4.into())));
        assert_eq!(o.map_get("B"), Some(&Json::Number(3.into())));
        assert_eq!(o.map_get("A"), None);
        assert_eq!(j.to_string(), r#"{"B":3,"a":2,"b":4}"#);
        assert_eq!(j.to_value(), serde_json::json!({"B": 3, "a": 2, "b": 4}));
    }

    #[test]
    fn insert_and_remove_act_on_exact_keys() {
        let mut j = doc(r#"{"k": 1, "K": 2, "k": 3}"#);
        let o = j.as_object_mut().unwrap();
        o.insert("k", Json::from("x"));
        assert_eq!(o.members().map(|(k, _)| k).collect::<Vec<_>>(), ["K", "k"]);
        assert_eq!(o.remove("K"), Some(Json::Number(2.into())));
        assert_eq!(o.remove("K"), None);
        assert_eq!(j.to_string(), r#"{"k":"x"}"#);
    }

    #[test]
    fn go_bytes_are_sorted_compact_and_html_escaped() {
        let j = doc(r#"{"b": "<a&b>", "a": [1, 2.5, "\u2028"], "b": "x<y"}"#);
        assert_eq!(
            String::from_utf8(j.to_go_bytes()).unwrap(),
            r#"{"a":[1,2.5,"\u2028"],"b":"x\u003cy"}"#
        );
    }

    #[test]
    fn values_round_trip_through_serde_json() {
        let text = r#"{"a":[1,-2,2.5,"s",true,null,{"n":{}}],"big":18446744073709551615}"#;
        let j = doc(text);
        assert_eq!(j.to_string(), text);
        assert_eq!(Json::from(&j.to_value()), j);
    }
}
