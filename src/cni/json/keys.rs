//! The registry of keys the readers look up (test builds only). Every field lookup of a
//! registered document leaves one record: where the object sits in the document, the key,
//! and the field's Go type. The generated key tests run each applet with the file named by
//! `CNIBOX_JSON_KEYS` and build their cases from the records, so the list of keys an applet
//! reads comes from the code itself and cannot fall behind it.
use super::tree::{Json, Object};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io::Write;

/// The environment variable naming the file records are appended to (JSON lines).
pub const ENV: &str = "CNIBOX_JSON_KEYS";

thread_local! {
    /// Object identity → (document, location of the object in it).
    static PLACES: RefCell<HashMap<usize, (String, Vec<String>)>> = RefCell::new(HashMap::new());
    static SEEN: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

/// Registers `root` as the document `doc` ("config", …): lookups in its objects are
/// recorded from now on. Empty objects are left out (they have no identity of their own,
/// and no member to vary).
pub fn register(doc: &str, root: &Json) {
    if std::env::var_os(ENV).is_none() {
        return;
    }
    fn walk(doc: &str, v: &Json, at: &mut Vec<String>) {
        match v {
            Json::Object(o) if !o.is_empty() => {
                PLACES.with(|p| p.borrow_mut().insert(o.identity(), (doc.to_string(), at.clone())));
                for (k, child) in o.members() {
                    at.push(k.to_string());
                    walk(doc, child, at);
                    at.pop();
                }
            }
            Json::Array(items) => {
                at.push("[]".to_string());
                for item in items {
                    walk(doc, item, at);
                }
                at.pop();
            }
            _ => {}
        }
    }
    walk(doc, root, &mut Vec::new());
}

/// Records a lookup of the field `key` (Go type `go_type`) in `obj`, once per process.
pub(super) fn record(obj: &Object, key: &str, go_type: &str) {
    if obj.is_empty() {
        return;
    }
    let Some(file) = std::env::var_os(ENV) else {
        return;
    };
    let Some((doc, at)) = PLACES.with(|p| p.borrow().get(&obj.identity()).cloned()) else {
        return;
    };
    let line = serde_json::json!({"doc": doc, "at": at, "key": key, "type": go_type}).to_string();
    if !SEEN.with(|s| s.borrow_mut().insert(line.clone())) {
        return;
    }
    // A test's failure to write its records shows as missing keys in the test itself.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
        let _ = writeln!(f, "{line}");
    }
}
