//! The cases generated for each key the registry recorded: how the key is written (four
//! spellings, its object split over two spellings, `null`, written twice, a wrong type),
//! what Go makes of that, and the edit that writes it into the key's sample.
use serde_json::{json, Value};
use std::collections::BTreeSet;

use super::doc::{dotted, Doc};
use super::registry::Records;
use super::samples::{newer, Applet};

/// A key to case: where it sits, its Go types (one per reader), the sample that holds it.
#[derive(Debug)]
pub struct Key {
    pub at: Vec<String>,
    pub key: String,
    pub types: BTreeSet<String>,
    pub sample: usize,
    /// Why Debian's v1.1.1 lacks the key ([`super::samples::NEWER`]).
    pub newer: Option<&'static str>,
}

impl Key {
    pub fn name(&self) -> String {
        dotted(&self.at, &self.key)
    }

    /// The other spelling `null`s and wrong types are written in, so that each of those cases
    /// also shows whether the key is matched as Go matches it.
    fn other(&self) -> String {
        let upper = self.key.to_uppercase();
        if upper != self.key {
            upper
        } else {
            self.key.to_lowercase()
        }
    }

    fn kind(&self) -> Kind {
        let kinds: BTreeSet<Kind> = self.types.iter().map(|t| kind_of(t)).collect();
        // readers of one key agree on its JSON kind (a struct and a pointer to it are one)
        *kinds.iter().next().unwrap()
    }

    /// Whether `null` written last leaves the field nil (pointers, slices, maps, interfaces)
    /// rather than as it was (values): `None` when the key's readers disagree.
    fn nil_by_null(&self) -> Option<bool> {
        let nullable: BTreeSet<bool> = self.types.iter().map(|t| is_nullable(t)).collect();
        (nullable.len() == 1).then(|| nullable.into_iter().next().unwrap())
    }
}

/// The JSON kind a Go type decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Str,
    Bool,
    Int { unsigned: bool },
    List,
    Object,
    Any,
}

fn kind_of(go_type: &str) -> Kind {
    let t = go_type.trim_start_matches('*');
    match t {
        // net.IP and types.IPNet are written as strings
        "string" | "net.IP" | "types.IPNet" => Kind::Str,
        "bool" => Kind::Bool,
        "int" | "int8" | "int16" | "int32" | "int64" => Kind::Int { unsigned: false },
        "uint" | "uint8" | "uint16" | "uint32" | "uint64" => Kind::Int { unsigned: true },
        "interface {}" => Kind::Any,
        t if t.starts_with("[]") || t == "array" => Kind::List,
        _ => Kind::Object,
    }
}

/// A `net.IP` is a byte slice.
fn is_nullable(go_type: &str) -> bool {
    ["*", "[]", "array", "map[", "interface {}", "net.IP"]
        .iter()
        .any(|p| go_type.starts_with(p))
}

/// Values of another JSON kind than the field's, each a decode error in Go (a fraction
/// into an integer and a negative number into an unsigned one too).
fn wrong_values(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::Str => vec![json!(5)],
        Kind::Bool => vec![json!("true")],
        Kind::Int { unsigned: false } => vec![json!("5"), json!(1.5)],
        Kind::Int { unsigned: true } => vec![json!("5"), json!(1.5), json!(-1)],
        Kind::List | Kind::Object => vec![json!("x")],
        Kind::Any => vec![],
    }
}

/// How a case writes its key.
#[derive(Debug, Clone)]
pub enum Form {
    /// The key under another name: `canonical`, `lower`, `UPPER`, `Capitalized`.
    Spelling(&'static str, String),
    /// The object value in two halves, the second under the other spelling (Go decodes
    /// both into the one struct or map).
    Split,
    /// `null` instead of the value.
    Null,
    /// The value, then `null` under the other spelling.
    NullLast,
    /// A wrong type under the other spelling, then the value (Go reports the first error).
    WrongFirst(Value),
    /// A wrong type instead of the value.
    Wrong(Value),
    /// The key left out: what a `null` means where cnibox answers for the reference.
    Removed,
}

/// What Go makes of a case: the sample's value, the key unset, or a decode error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Effect {
    Sample,
    Absent,
    Error,
    /// Readers of the key disagree (a value for one, a pointer for another): only the
    /// reference can say.
    Mixed,
}

pub struct Case<'k> {
    pub key: &'k Key,
    pub form: Form,
}

impl Case<'_> {
    pub fn label(&self) -> String {
        let how = match &self.form {
            Form::Spelling(label, s) => format!("{label} {s:?}"),
            Form::Split => format!("split over {:?} and {:?}", self.key.key, self.key.other()),
            Form::Null => format!("{:?}: null", self.key.other()),
            Form::NullLast => format!("then {:?}: null", self.key.other()),
            Form::WrongFirst(v) => format!("{:?}: {v} first", self.key.other()),
            Form::Wrong(v) => format!("{:?}: {v}", self.key.other()),
            Form::Removed => "left out".to_string(),
        };
        format!("{} ({how})", self.key.name())
    }

    pub fn effect(&self) -> Effect {
        match self.form {
            Form::Spelling(..) | Form::Split => Effect::Sample,
            Form::Null | Form::Removed => Effect::Absent,
            Form::WrongFirst(_) | Form::Wrong(_) => Effect::Error,
            Form::NullLast => match self.key.nil_by_null() {
                Some(true) => Effect::Absent,
                Some(false) => Effect::Sample,
                None => Effect::Mixed,
            },
        }
    }

    /// Writes the case into a config: every object at the key's place that holds the key.
    pub fn edit(&self, doc: &mut Doc) {
        let key = &self.key.key;
        let other = self.key.other();
        doc.edit_objects_at(&self.key.at, &mut |members| {
            let Some(i) = members.iter().position(|(k, _)| k == key) else {
                return;
            };
            match &self.form {
                Form::Spelling(_, s) => members[i].0 = s.clone(),
                Form::Split => {
                    if let Doc::Obj(inner) = &mut members[i].1 {
                        let second = inner.split_off(inner.len() / 2);
                        members.insert(i + 1, (other.clone(), Doc::Obj(second)));
                    }
                }
                Form::Null => members[i] = (other.clone(), Doc::Null),
                Form::NullLast => members.insert(i + 1, (other.clone(), Doc::Null)),
                Form::WrongFirst(v) => members.insert(i, (other.clone(), Doc::from(v))),
                Form::Wrong(v) => members[i] = (other.clone(), Doc::from(v)),
                Form::Removed => {
                    members.remove(i);
                }
            }
        });
    }

    /// The case written into its sample as the sample is written (placeholders unfilled):
    /// two cases with one signature are one run.
    pub fn signature(&self, sample: &Value) -> String {
        let mut doc = Doc::from(sample);
        self.edit(&mut doc);
        doc.text()
    }
}

/// The four spellings of `key`, each once (the canonical one first).
fn spellings(key: &str) -> Vec<(&'static str, String)> {
    let mut capitalized = key.to_string();
    if let Some(first) = capitalized.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    let mut out: Vec<(&'static str, String)> = vec![("canonical", key.to_string())];
    for (label, s) in [
        ("lower", key.to_lowercase()),
        ("UPPER", key.to_uppercase()),
        ("Capitalized", capitalized),
    ] {
        if !out.iter().any(|(_, o)| *o == s) {
            out.push((label, s));
        }
    }
    out
}

/// Whether a delegated pattern (`x.*`: below `x`; `x`: `x` and below) covers `name`.
pub fn delegated(patterns: &[&str], name: &str) -> bool {
    if name == "ipam.type" {
        return false;
    }
    patterns.iter().any(|p| match p.strip_suffix(".*") {
        Some(base) => name.starts_with(&format!("{base}.")) || name.starts_with(&format!("{base}[")),
        None => name == *p || name.starts_with(&format!("{p}.")) || name.starts_with(&format!("{p}[")),
    })
}

/// The keys the applet's cases are for: every key its code read, except those delegated to
/// host-local, each with the first sample that holds it (keys without one are left out
/// here; the coverage test names them), in sample order.
pub fn keys(applet: &Applet, records: &Records) -> Vec<Key> {
    let samples = (applet.samples)();
    let docs: Vec<Doc> = samples.iter().map(|s| Doc::from(&s.config)).collect();
    let mut out = vec![];
    for (i, doc) in docs.iter().enumerate() {
        for (at, key) in doc.members() {
            let Some(types) = records.keys.get(&(at.clone(), key.clone())) else {
                continue;
            };
            let name = dotted(&at, &key);
            if delegated(applet.delegated, &name) || out.iter().any(|k: &Key| k.at == at && k.key == key) {
                continue;
            }
            out.push(Key {
                newer: newer(applet.name, &name),
                at,
                key,
                types: types.clone(),
                sample: i,
            });
        }
    }
    out
}

/// The cases whose whole outcome is compared: every spelling, and the split object.
pub fn spelling_cases<'k>(keys: &'k [Key], samples: &[Value]) -> Vec<Case<'k>> {
    let mut out = vec![];
    for key in keys {
        for (label, s) in spellings(&key.key) {
            out.push(Case {
                key,
                form: Form::Spelling(label, s),
            });
        }
        let value = Doc::from(&samples[key.sample]).value_at(&key.at, &key.key);
        if matches!(&value, Some(Doc::Obj(m)) if m.len() >= 2) && key.kind() != Kind::Any {
            out.push(Case { key, form: Form::Split });
        }
    }
    out
}

/// The cases whose codes are compared: `null`, written twice, wrong types.
pub fn code_cases(keys: &[Key]) -> Vec<Case<'_>> {
    let mut out = vec![];
    for key in keys {
        let wrong = wrong_values(key.kind());
        out.push(Case { key, form: Form::Null });
        out.push(Case {
            key,
            form: Form::NullLast,
        });
        if let Some(first) = wrong.first() {
            out.push(Case {
                key,
                form: Form::WrongFirst(first.clone()),
            });
        }
        for v in wrong {
            out.push(Case {
                key,
                form: Form::Wrong(v),
            });
        }
    }
    out
}
