//! Configs as written on stdin: members in order, a key may be written twice. The cases need
//! both (a key written twice under two spellings, the last one null), and serde_json's map
//! sorts its keys and keeps one of each.
use serde_json::{Number, Value};

#[derive(Clone, Debug, PartialEq)]
pub enum Doc {
    Null,
    Bool(bool),
    Num(Number),
    Str(String),
    Arr(Vec<Doc>),
    Obj(Members),
}

/// An object's members, in order.
pub type Members = Vec<(String, Doc)>;

/// Where an object sits in a document: member keys, `[]` for every element of an array (the
/// registry's `at`).
pub type Path = [String];

impl From<&Value> for Doc {
    fn from(v: &Value) -> Doc {
        match v {
            Value::Null => Doc::Null,
            Value::Bool(b) => Doc::Bool(*b),
            Value::Number(n) => Doc::Num(n.clone()),
            Value::String(s) => Doc::Str(s.clone()),
            Value::Array(items) => Doc::Arr(items.iter().map(Doc::from).collect()),
            Value::Object(m) => Doc::Obj(m.iter().map(|(k, v)| (k.clone(), Doc::from(v))).collect()),
        }
    }
}

impl Doc {
    /// The JSON text, members in order, repeats kept.
    pub fn text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Doc::Null => out.push_str("null"),
            Doc::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Doc::Num(n) => out.push_str(&n.to_string()),
            Doc::Str(s) => out.push_str(&Value::String(s.clone()).to_string()),
            Doc::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Doc::Obj(members) => {
                out.push('{');
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }

    /// Applies `f` to the members of every object at `at`.
    pub fn edit_objects_at(&mut self, at: &Path, f: &mut dyn FnMut(&mut Members)) {
        match (at.split_first(), self) {
            (None, Doc::Obj(members)) => f(members),
            (Some((step, rest)), Doc::Arr(items)) if step == "[]" => {
                items.iter_mut().for_each(|i| i.edit_objects_at(rest, f));
            }
            (Some((step, rest)), Doc::Obj(members)) => {
                members
                    .iter_mut()
                    .filter(|(k, _)| k == step)
                    .for_each(|(_, v)| v.edit_objects_at(rest, f));
            }
            _ => {}
        }
    }

    /// The first value written for `key` in an object at `at`.
    pub fn value_at(&self, at: &Path, key: &str) -> Option<Doc> {
        let mut found = None;
        self.clone().edit_objects_at(at, &mut |members| {
            if found.is_none() {
                found = members.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
            }
        });
        found
    }

    /// Every member of every object in the document, as (where its object is, key), in
    /// document order, each once.
    pub fn members(&self) -> Vec<(Vec<String>, String)> {
        fn walk(d: &Doc, at: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
            match d {
                Doc::Obj(members) => {
                    for (k, v) in members {
                        let m = (at.clone(), k.clone());
                        if !out.contains(&m) {
                            out.push(m);
                        }
                        at.push(k.clone());
                        walk(v, at, out);
                        at.pop();
                    }
                }
                Doc::Arr(items) => {
                    at.push("[]".into());
                    items.iter().for_each(|i| walk(i, at, out));
                    at.pop();
                }
                _ => {}
            }
        }
        let mut out = vec![];
        walk(self, &mut vec![], &mut out);
        out
    }

    /// Every string in the document, through `f` (placeholders).
    pub fn map_strings(&mut self, f: &dyn Fn(&str) -> String) {
        match self {
            Doc::Str(s) => *s = f(s),
            Doc::Arr(items) => items.iter_mut().for_each(|i| i.map_strings(f)),
            Doc::Obj(members) => members.iter_mut().for_each(|(_, v)| v.map_strings(f)),
            _ => {}
        }
    }
}

/// `ipam.ranges[][].subnet`: a key and where it sits, as the tables and messages write it.
pub fn dotted(at: &Path, key: &str) -> String {
    let mut s = String::new();
    for step in at.iter().chain(std::iter::once(&key.to_string())) {
        if step == "[]" {
            s.push_str("[]");
        } else {
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(step);
        }
    }
    s
}
