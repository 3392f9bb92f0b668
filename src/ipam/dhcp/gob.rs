//! Go's `encoding/gob`, as much as the reference's plugin and daemon put on their socket
//! (net/rpc's request and response headers, `skel.CmdArgs`, `current.Result`):
//!
//! * decoding: a stream of messages, each a type definition or a value; definitions of
//!   structs, slices, arrays, maps and the marshaler types are kept per connection, and a
//!   value is decoded by them into a [`Value`] tree, fields by name. Interface and complex
//!   values are refused (none of these types has one).
//! * encoding: the fixed types cnibox sends, defined by [`define`], and values written
//!   field by field ([`Struct`]).
//!
//! The decoder reads what arrives on the daemon's socket, in a root process: every count is
//! checked against the bytes left, nesting is bounded, and a malformed message is an error,
//! never a panic (`make fuzz` has a target for it).

/// A decoded value. `[]byte` and `string` are both [`Value::Bytes`]; a marshaler type's
/// encoding is its bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Uint(u64),
    /// A float64's bits.
    Float(u64),
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Map(Vec<(Value, Value)>),
    /// The fields the sender wrote (Go leaves zero values out), by name.
    Struct(Vec<(String, Value)>),
}

impl Value {
    /// The field `name` of a struct.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A string or `[]byte` field; absent is empty, as Go's zero value.
    pub fn bytes(&self, name: &str) -> &[u8] {
        match self.field(name) {
            Some(Value::Bytes(b)) => b,
            _ => &[],
        }
    }

    pub fn str(&self, name: &str) -> String {
        String::from_utf8_lossy(self.bytes(name)).into_owned()
    }

    /// An integer field; `None` when absent or not an integer an `i64` holds.
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.field(name) {
            Some(Value::Int(i)) => Some(*i),
            Some(Value::Uint(u)) => i64::try_from(*u).ok(),
            _ => None,
        }
    }

    /// A slice field (absent is empty).
    pub fn list(&self, name: &str) -> &[Value] {
        match self.field(name) {
            Some(Value::List(items)) => items,
            _ => &[],
        }
    }
}

pub type Error = String;

// The predefined type ids of gob.
pub const BOOL: i64 = 1;
pub const INT: i64 = 2;
pub const UINT: i64 = 3;
const FLOAT: i64 = 4;
pub const BYTES: i64 = 5;
pub const STRING: i64 = 6;
const COMPLEX: i64 = 7;
const INTERFACE: i64 = 8;
/// The first id a sender may define.
pub const FIRST_USER_ID: i64 = 64;
// gob's own types, which type definitions are encoded in; their ids never go on the wire
// in a value, so these only need to be consistent with each other.
const WIRE_TYPE: i64 = 16;
const ARRAY_TYPE: i64 = 17;
const COMMON_TYPE: i64 = 18;
const SLICE_TYPE: i64 = 19;
const STRUCT_TYPE: i64 = 20;
const FIELD_TYPE: i64 = 21;
const FIELD_LIST: i64 = 22;
const MAP_TYPE: i64 = 23;
const MARSHALER_TYPE: i64 = 24;
/// Deeper values are refused: the types here nest five levels at most.
const MAX_DEPTH: u32 = 32;
/// Types one connection may define.
const MAX_TYPES: usize = 1024;

#[derive(Debug, Clone)]
enum Type {
    Struct(Vec<(String, i64)>),
    Slice(i64),
    Array(i64, u64),
    Map(i64, i64),
    /// GobEncoder, BinaryMarshaler, TextMarshaler: a byte string.
    Marshaled,
}

/// The receiving side of one connection: the types the sender defined so far.
pub struct Decoder {
    types: Vec<(i64, Type)>,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    pub fn new() -> Decoder {
        let s = |fields: &[(&str, i64)]| Type::Struct(fields.iter().map(|(n, t)| (n.to_string(), *t)).collect());
        let common = ("CommonType", COMMON_TYPE);
        Decoder {
            types: vec![
                (
                    WIRE_TYPE,
                    s(&[
                        ("ArrayT", ARRAY_TYPE),
                        ("SliceT", SLICE_TYPE),
                        ("StructT", STRUCT_TYPE),
                        ("MapT", MAP_TYPE),
                        ("GobEncoderT", MARSHALER_TYPE),
                        ("BinaryMarshalerT", MARSHALER_TYPE),
                        ("TextMarshalerT", MARSHALER_TYPE),
                    ]),
                ),
                (ARRAY_TYPE, s(&[common, ("Elem", INT), ("Len", INT)])),
                (COMMON_TYPE, s(&[("Name", STRING), ("Id", INT)])),
                (SLICE_TYPE, s(&[common, ("Elem", INT)])),
                (STRUCT_TYPE, s(&[common, ("Field", FIELD_LIST)])),
                (FIELD_TYPE, s(&[("Name", STRING), ("Id", INT)])),
                (FIELD_LIST, Type::Slice(FIELD_TYPE)),
                (MAP_TYPE, s(&[common, ("Key", INT), ("Elem", INT)])),
                (MARSHALER_TYPE, s(&[common])),
            ],
        }
    }

    /// One message (the bytes after its length): `None` for a type definition, the value
    /// and its type id otherwise.
    pub fn message(&mut self, msg: &[u8]) -> Result<Option<(i64, Value)>, Error> {
        let mut r = Reader(msg);
        let id = r.int()?;
        if id < 0 {
            let id = id.checked_neg().ok_or("gob: bad type id")?;
            let def = self.value(&mut r, WIRE_TYPE, 0)?;
            r.end()?;
            if id < FIRST_USER_ID || self.lookup(id).is_ok() {
                return Err(format!("gob: type id {id} defined twice or reserved"));
            }
            if self.types.len() >= MAX_TYPES {
                return Err("gob: too many types".into());
            }
            self.types.push((id, type_of(&def)?));
            return Ok(None);
        }
        // a value that is not a struct is sent as the one field of an implicit struct
        if !matches!(self.lookup(id), Ok(Type::Struct(_))) && r.uint()? != 0 {
            return Err("gob: a single value without its field number 0".into());
        }
        let v = self.value(&mut r, id, 0)?;
        r.end()?;
        Ok(Some((id, v)))
    }

    fn lookup(&self, id: i64) -> Result<&Type, Error> {
        self.types
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, t)| t)
            .ok_or_else(|| format!("gob: unknown type id {id}"))
    }

    fn value(&self, r: &mut Reader, id: i64, depth: u32) -> Result<Value, Error> {
        if depth > MAX_DEPTH {
            return Err("gob: values nested too deep".into());
        }
        Ok(match id {
            BOOL => Value::Bool(r.uint()? != 0),
            INT => Value::Int(r.int()?),
            UINT => Value::Uint(r.uint()?),
            FLOAT => Value::Float(r.uint()?),
            BYTES | STRING => Value::Bytes(r.bytes()?.to_vec()),
            COMPLEX | INTERFACE => return Err(format!("gob: type id {id} is not supported")),
            _ => match self.lookup(id)? {
                Type::Struct(fields) => {
                    let mut out = Vec::new();
                    let mut at: u64 = u64::MAX; // field -1
                    loop {
                        let delta = r.uint()?;
                        if delta == 0 {
                            break;
                        }
                        at = at.wrapping_add(delta);
                        let (name, ty) = usize::try_from(at)
                            .ok()
                            .and_then(|i| fields.get(i))
                            .ok_or("gob: field number out of range")?;
                        out.push((name.clone(), self.value(r, *ty, depth + 1)?));
                    }
                    Value::Struct(out)
                }
                Type::Slice(elem) => Value::List(self.items(r, *elem, None, depth)?),
                Type::Array(elem, len) => Value::List(self.items(r, *elem, Some(*len), depth)?),
                Type::Map(key, elem) => {
                    let n = r.count()?;
                    let mut out = Vec::new();
                    for _ in 0..n {
                        let k = self.value(r, *key, depth + 1)?;
                        out.push((k, self.value(r, *elem, depth + 1)?));
                    }
                    Value::Map(out)
                }
                Type::Marshaled => Value::Bytes(r.bytes()?.to_vec()),
            },
        })
    }

    fn items(&self, r: &mut Reader, elem: i64, len: Option<u64>, depth: u32) -> Result<Vec<Value>, Error> {
        let n = r.count()?;
        if len.is_some_and(|l| l != n as u64) {
            return Err("gob: array of the wrong length".into());
        }
        (0..n).map(|_| self.value(r, elem, depth + 1)).collect()
    }
}

/// A type definition (a `wireType` value) as the decoder keeps it.
fn type_of(def: &Value) -> Result<Type, Error> {
    let id = |v: Option<&Value>| match v {
        Some(Value::Int(i)) => Ok(*i),
        _ => Err(Error::from("gob: a type definition without an id")),
    };
    if let Some(t) = def.field("StructT") {
        let fields = t
            .list("Field")
            .iter()
            .map(|f| Ok((f.str("Name"), id(f.field("Id"))?)))
            .collect::<Result<_, Error>>()?;
        return Ok(Type::Struct(fields));
    }
    if let Some(t) = def.field("SliceT") {
        return Ok(Type::Slice(id(t.field("Elem"))?));
    }
    if let Some(t) = def.field("ArrayT") {
        let len = t.int("Len").unwrap_or(0);
        return Ok(Type::Array(
            id(t.field("Elem"))?,
            u64::try_from(len).map_err(|_| "gob: bad array length")?,
        ));
    }
    if let Some(t) = def.field("MapT") {
        return Ok(Type::Map(id(t.field("Key"))?, id(t.field("Elem"))?));
    }
    if ["GobEncoderT", "BinaryMarshalerT", "TextMarshalerT"]
        .iter()
        .any(|k| def.field(k).is_some())
    {
        return Ok(Type::Marshaled);
    }
    Err("gob: an empty type definition".into())
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Error> {
        if n > self.0.len() {
            return Err("gob: unexpected end of message".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn uint(&mut self) -> Result<u64, Error> {
        let first = self.take(1)?[0];
        if first < 0x80 {
            return Ok(u64::from(first));
        }
        let n = usize::from(first.wrapping_neg());
        if n > 8 {
            return Err("gob: an unsigned integer longer than 8 bytes".into());
        }
        Ok(self.take(n)?.iter().fold(0, |acc, b| (acc << 8) | u64::from(*b)))
    }

    fn int(&mut self) -> Result<i64, Error> {
        let u = self.uint()?;
        Ok(if u & 1 == 1 { !(u >> 1) as i64 } else { (u >> 1) as i64 })
    }

    /// An element count: every element takes a byte at least, so more than the bytes left
    /// is a lie.
    fn count(&mut self) -> Result<usize, Error> {
        let n = self.uint()?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.0.len())
            .ok_or_else(|| "gob: a count beyond the message".into())
    }

    fn bytes(&mut self) -> Result<&[u8], Error> {
        let n = self.count()?;
        self.take(n)
    }

    fn end(&self) -> Result<(), Error> {
        match self.0.is_empty() {
            true => Ok(()),
            false => Err("gob: extra data after a value".into()),
        }
    }
}

/// The largest message accepted: configs are limited to 1 MiB as stdin is.
pub const MAX_MESSAGE: usize = (1 << 20) + 4096;

/// A complete message at the start of `buf`: where its body starts and ends; `None` while
/// more bytes are needed.
pub fn frame(buf: &[u8]) -> Result<Option<std::ops::Range<usize>>, Error> {
    let mut r = Reader(buf);
    let len = match r.uint() {
        Ok(len) => len,
        Err(_) if buf.len() < 9 => return Ok(None),
        Err(e) => return Err(e),
    };
    let start = buf.len() - r.0.len();
    let len = usize::try_from(len)
        .ok()
        .filter(|l| (1..=MAX_MESSAGE).contains(l))
        .ok_or("gob: message length out of range")?;
    Ok((buf.len() - start >= len).then_some(start..start + len))
}

pub fn put_uint(out: &mut Vec<u8>, u: u64) {
    if u < 0x80 {
        out.push(u as u8);
        return;
    }
    let bytes = u.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    out.push((8 - skip as u8).wrapping_neg());
    out.extend_from_slice(&bytes[skip..]);
}

pub fn put_int(out: &mut Vec<u8>, i: i64) {
    put_uint(out, if i < 0 { (!(i as u64) << 1) | 1 } else { (i as u64) << 1 });
}

pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends `body` as one message.
pub fn put_message(out: &mut Vec<u8>, body: &[u8]) {
    put_uint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// A struct value being written: fields in increasing order, zero values left out as Go
/// does, [`Struct::end`] closes it.
pub struct Struct<'a> {
    out: &'a mut Vec<u8>,
    at: i64,
}

impl<'a> Struct<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Struct<'a> {
        Struct { out, at: -1 }
    }

    /// Field number `n` follows: returns the buffer to write its value into.
    pub fn field(&mut self, n: i64) -> &mut Vec<u8> {
        put_uint(self.out, (n - self.at) as u64);
        self.at = n;
        self.out
    }

    pub fn str(&mut self, n: i64, s: &[u8]) {
        if !s.is_empty() {
            put_bytes(self.field(n), s);
        }
    }

    pub fn int(&mut self, n: i64, i: i64) {
        if i != 0 {
            put_int(self.field(n), i);
        }
    }

    pub fn uint(&mut self, n: i64, u: u64) {
        if u != 0 {
            put_uint(self.field(n), u);
        }
    }

    pub fn end(self) {
        self.out.push(0);
    }
}

/// A type cnibox sends: a struct (its Go name, its fields' names and type ids in order) or
/// a slice (its element type).
pub enum Def<'a> {
    Struct(&'a str, &'a [(&'a str, i64)]),
    Slice(i64),
}

/// Appends the message defining type `id` as `def`.
pub fn define(out: &mut Vec<u8>, id: i64, def: &Def) {
    let mut body = Vec::new();
    put_int(&mut body, -id);
    let mut wire = Struct::new(&mut body);
    let (field, name) = match def {
        Def::Struct(name, _) => (2, *name), // wireType.StructT
        Def::Slice(_) => (1, ""),           // wireType.SliceT
    };
    let mut t = Struct::new(wire.field(field));
    let mut common = Struct::new(t.field(0));
    common.str(0, name.as_bytes());
    common.int(1, id);
    common.end();
    match def {
        Def::Struct(_, fields) => {
            if !fields.is_empty() {
                let list = t.field(1);
                put_uint(list, fields.len() as u64);
                for (name, ty) in fields.iter() {
                    let mut f = Struct::new(list);
                    f.str(0, name.as_bytes());
                    f.int(1, *ty);
                    f.end();
                }
            }
        }
        Def::Slice(elem) => put_int(t.field(1), *elem),
    }
    t.end();
    wire.end();
    put_message(out, &body);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A net/rpc call as Go 1.19's gob wrote it (tests/interop: rpc.Request then a
    /// skel.CmdArgs of libcni 1.1): the type definitions and the values.
    pub(crate) const GO_REQUEST: &str = "2fff81030101075265717565737401ff82000102010d536572766963654d6574686f64010c000103536571010600000012ff82010d444843502e416c6c6f63617465005aff8303010107436d644172677301ff84000106010b436f6e7461696e65724944010c0001054e65746e73010c00010649664e616d65010c00010441726773010c00010450617468010c000109537464696e44617461010a0000002dff8401026331010c2f72756e2f6e65746e732f78010465746830020c2f6f70742f636e692f62696e01027b7d00";
    /// The reply of Go's daemon to it: rpc.Response, then a current.Result with one IP
    /// (10.1.2.3/24, gateway 10.1.2.1) and a default route.
    pub(crate) const GO_RESPONSE: &str = "3aff8503010108526573706f6e736501ff86000103010d536572766963654d6574686f64010c00010353657101060001054572726f72010c00000012ff86010d444843502e416c6c6f636174650051ff8703010106526573756c7401ff88000105010a434e4956657273696f6e010c00010a496e746572666163657301ff8c00010349507301ff92000106526f7574657301ff96000103444e5301ff9800000024ff8b020101155b5d2a74797065733130302e496e7465726661636501ff8c0001ff8a000029ff89030102ff8a00010301044e616d65010c0001034d6163010c00010753616e64626f78010c00000023ff91020101145b5d2a74797065733130302e4950436f6e66696701ff920001ff8e000033ff8d030102ff8e0001030109496e7465726661636501040001074164647265737301ff9000010747617465776179010a00000023ff8f0301010549504e657401ff9000010201024950010a0001044d61736b010a0000001dff950201010e5b5d2a74797065732e526f75746501ff960001ff9400001cff93030102ff94000102010344737401ff900001024757010a00000046ff9703010103444e5301ff98000104010b4e616d657365727665727301ff9a000106446f6d61696e010c00010653656172636801ff9a0001074f7074696f6e7301ff9a00000016ff99020101085b5d737472696e6701ff9a00010c00005eff880105312e302e30020102011000000000000000000000ffff0a0102030104ffffff0000011000000000000000000000ffff0a0102010001010101040000000001040000000000011000000000000000000000ffff0a01020100010000";

    pub(crate) fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Every value of a stream, through [`frame`] and [`Decoder::message`].
    pub(crate) fn values(stream: &[u8]) -> Vec<Value> {
        let mut d = Decoder::new();
        let mut rest = stream;
        let mut out = vec![];
        while !rest.is_empty() {
            let body = frame(rest).unwrap().expect("a whole message");
            if let Some((_, v)) = d.message(&rest[body.clone()]).unwrap() {
                out.push(v);
            }
            rest = &rest[body.end..];
        }
        out
    }

    #[test]
    fn integers_as_gob_encodes_them() {
        for (u, bytes) in [
            (0u64, &[0u8][..]),
            (127, &[0x7f]),
            (128, &[0xff, 0x80]),
            (256, &[0xfe, 1, 0]),
        ] {
            let mut out = vec![];
            put_uint(&mut out, u);
            assert_eq!(out, bytes);
            assert_eq!(Reader(bytes).uint().unwrap(), u);
        }
        for i in [0i64, 1, -1, 63, -64, 67, -67, i64::MAX, i64::MIN] {
            let mut out = vec![];
            put_int(&mut out, i);
            assert_eq!(Reader(&out).int().unwrap(), i);
        }
        let mut out = vec![];
        put_int(&mut out, -67);
        assert_eq!(out, [0xff, 0x85]);
    }

    #[test]
    fn decodes_a_go_request() {
        let v = values(&unhex(GO_REQUEST));
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].str("ServiceMethod"), "DHCP.Allocate");
        assert_eq!(v[0].int("Seq"), None);
        assert_eq!(v[1].str("ContainerID"), "c1");
        assert_eq!(v[1].str("Netns"), "/run/netns/x");
        assert_eq!(v[1].str("Args"), "");
        assert_eq!(v[1].bytes("StdinData"), b"{}");
    }

    #[test]
    fn decodes_a_go_result() {
        let v = values(&unhex(GO_RESPONSE));
        assert_eq!(v[0].str("ServiceMethod"), "DHCP.Allocate");
        let result = &v[1];
        assert_eq!(result.str("CNIVersion"), "1.0.0");
        let ip = &result.list("IPs")[0];
        let address = ip.field("Address").unwrap();
        assert_eq!(address.bytes("IP")[12..], [10, 1, 2, 3]);
        assert_eq!(address.bytes("Mask"), [255, 255, 255, 0]);
        assert_eq!(ip.bytes("Gateway")[12..], [10, 1, 2, 1]);
        assert_eq!(result.list("Routes")[0].field("Dst").unwrap().bytes("IP"), [0, 0, 0, 0]);
    }

    #[test]
    fn our_definitions_are_what_go_sends() {
        // the first two messages of GO_REQUEST define rpc.Request as type 65
        let mut out = vec![];
        define(
            &mut out,
            65,
            &Def::Struct("Request", &[("ServiceMethod", STRING), ("Seq", UINT)]),
        );
        assert_eq!(out, unhex(&GO_REQUEST[..0x30 * 2]));
        // and a slice type, unnamed as ours are
        let mut d = Decoder::new();
        let mut out = vec![];
        define(&mut out, 70, &Def::Slice(69));
        let body = frame(&out).unwrap().unwrap();
        assert_eq!(d.message(&out[body]).unwrap(), None);
        assert!(matches!(d.lookup(70), Ok(Type::Slice(69))));
    }

    #[test]
    fn hostile_messages_are_errors() {
        let mut d = Decoder::new();
        // a count larger than the message: a string (id 6) claiming 127 bytes
        assert_eq!(
            d.message(&[0x0c, 0x00, 0x7f]).unwrap_err(),
            "gob: a count beyond the message"
        );
        // a value of a type never defined
        assert!(d.message(&[0xff, 0x82, 0x00]).is_err());
        // a type defined twice
        let mut out = vec![];
        define(&mut out, 65, &Def::Struct("T", &[("A", INT)]));
        let body = frame(&out).unwrap().unwrap();
        assert_eq!(d.message(&out[body.clone()]).unwrap(), None);
        assert!(d.message(&out[body]).is_err());
        // a field number past the struct's fields
        assert!(d.message(&[0xff, 0x82, 0x05, 0x02, 0x00]).is_err());
        // a self-referencing slice nested past the limit
        let mut out = vec![];
        define(&mut out, 66, &Def::Slice(66));
        let body = frame(&out).unwrap().unwrap();
        d.message(&out[body]).unwrap();
        let mut deep = vec![0xff, 0x84, 0x00];
        deep.extend([1u8; 40]);
        deep.push(0);
        assert!(d.message(&deep).unwrap_err().contains("too deep"));
        // lengths: zero, past the limit, and a partial message
        assert!(frame(&[0]).is_err());
        assert!(frame(&[0xfc, 0x40, 0, 0, 0]).is_err());
        assert_eq!(frame(&[5, 1, 2]).unwrap(), None);
        assert_eq!(frame(&[0xfe]).unwrap(), None);
    }
}
