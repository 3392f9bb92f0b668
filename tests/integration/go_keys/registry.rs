//! The keys an applet's code reads, from the registry of test builds: each sample runs
//! through cnibox's ADD, CHECK and DEL with `CNIBOX_JSON_KEYS` set, and every field lookup
//! in the config leaves a record (`src/cni/json/keys.rs`). [`coverage`] holds the samples to
//! the records: a key read without a sample value, or a sample key nothing reads, fails.
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

use super::cases::delegated;
use super::doc::{dotted, Doc};
use super::samples::{Applet, Oracle, HOST_LOCAL, NEWER};
use super::world::Side;

/// (where the object sits, key)
pub type Place = (Vec<String>, String);

#[derive(Debug, Default)]
pub struct Records {
    /// Every key read in any sample's run, with its Go types (one per reader).
    pub keys: BTreeMap<Place, BTreeSet<String>>,
    /// The keys each sample's run read.
    pub per_sample: Vec<BTreeSet<Place>>,
}

/// The applet's records, collected once per test process.
pub fn records(applet: &'static Applet) -> &'static Records {
    applet.records.get_or_init(|| collect(applet))
}

fn collect(applet: &'static Applet) -> Records {
    let side = Side::new(applet, false);
    let mut records = Records::default();
    for (i, sample) in (applet.samples)().iter().enumerate() {
        let file = side.env.tmp.path().join(format!("keys-{i}.jsonl"));
        side.run(&format!("keys-{i}"), &sample.config, &|_| {}, false, Some(&file));
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let mut read = BTreeSet::new();
        for line in text.lines() {
            let r: Value = serde_json::from_str(line).unwrap();
            if r["doc"] != "config" {
                continue;
            }
            let at: Vec<String> = r["at"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect();
            let place = (at, r["key"].as_str().unwrap().to_string());
            records
                .keys
                .entry(place.clone())
                .or_default()
                .insert(r["type"].as_str().unwrap().to_string());
            read.insert(place);
        }
        records.per_sample.push(read);
    }
    assert!(
        !records.keys.is_empty(),
        "{}: no key was recorded: the binary under test must be the test build (feature test-support), not {:?}",
        applet.name,
        crate::common::cnibox()
    );
    records
}

/// Whether the members of the object at `at` are a Go map's entries (or an `interface{}`'s),
/// not struct fields: no key was read in it and the key holding it has a map type.
fn is_map(records: &Records, at: &[String]) -> bool {
    if records.keys.keys().any(|(a, _)| a == at) {
        return false;
    }
    let mut parent = at.to_vec();
    while parent.last().is_some_and(|s| s == "[]") {
        parent.pop();
    }
    let Some(key) = parent.pop() else {
        return false;
    };
    records
        .keys
        .get(&(parent, key))
        .is_some_and(|types| types.iter().any(|t| t.starts_with("map[") || t == "interface {}"))
}

/// Every way the samples and the records disagree, in words; empty when they agree.
pub fn coverage(applet: &'static Applet) -> Vec<String> {
    let records = records(applet);
    let samples = (applet.samples)();
    let docs: Vec<Doc> = samples.iter().map(|s| Doc::from(&s.config)).collect();
    let mut problems = vec![];
    let held = |place: &Place| docs.iter().position(|d| d.value_at(&place.0, &place.1).is_some());
    let host_local = (!applet.delegated.is_empty()).then(records_of_host_local);
    for place in records.keys.keys() {
        let name = dotted(&place.0, &place.1);
        if delegated(applet.delegated, &name) {
            if !host_local.is_some_and(|h| h.keys.contains_key(place)) {
                problems.push(format!(
                    "{name} is listed as host-local's but host-local does not read it"
                ));
            }
            continue;
        }
        match held(place) {
            None => problems.push(format!("{name} is read but no sample has a value for it: add one")),
            Some(i) => {
                if let Oracle::Cnibox(why) = samples[i].oracle {
                    if super::samples::newer(applet.name, &name).is_none() {
                        problems.push(format!(
                            "{name} is first given in sample {:?}, which the reference cannot answer ({why}): \
                             give it a value in an earlier reference sample, or list it in NEWER",
                            samples[i].name
                        ));
                    }
                }
            }
        }
    }
    for (i, doc) in docs.iter().enumerate() {
        for place in doc.members() {
            if is_map(records, &place.0) || records.per_sample[i].contains(&place) {
                continue;
            }
            problems.push(format!(
                "sample {:?} holds {} but its run never reads it (stale)",
                samples[i].name,
                dotted(&place.0, &place.1)
            ));
        }
    }
    let first_cnibox = samples.iter().position(|s| matches!(s.oracle, Oracle::Cnibox(_)));
    if let Some(first) = first_cnibox {
        if let Some(late) = samples[first..].iter().find(|s| matches!(s.oracle, Oracle::Reference)) {
            problems.push(format!(
                "reference sample {:?} comes after a cnibox sample: the reference side's runs must be a prefix \
                 of cnibox's so that the two worlds evolve alike",
                late.name
            ));
        }
    }
    problems.extend(newer_table_problems(applet, records));
    problems
}

fn records_of_host_local() -> &'static Records {
    records(&HOST_LOCAL)
}

/// Entries of NEWER that name no key the applet reads, or a key the reference binary has.
fn newer_table_problems(applet: &Applet, records: &Records) -> Vec<String> {
    let mut problems = vec![];
    let tags = crate::common::reference_dir().map(|d| json_tags(&std::fs::read(d.join(applet.reference)).unwrap()));
    for (_, name, _) in NEWER.iter().filter(|(a, _, _)| *a == applet.name) {
        if !records.keys.keys().any(|(at, key)| dotted(at, key) == *name) {
            problems.push(format!("NEWER lists {name}, which {} does not read", applet.name));
        }
        let field = name.rsplit(['.', ']']).next().unwrap();
        if tags.as_ref().is_some_and(|t| t.contains(field)) {
            problems.push(format!(
                "NEWER lists {name}, but the reference {} decodes a field tagged {field:?}",
                applet.reference
            ));
        }
    }
    problems
}

/// The names of the `json:"…"` struct tags in a Go binary (its type data keeps them).
fn json_tags(binary: &[u8]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = binary;
    while let Some(i) = rest.windows(5).position(|w| w == b"json:") {
        rest = &rest[i + 5..];
        let quoted = rest
            .strip_prefix(b"\\\"")
            .or_else(|| rest.strip_prefix(b"\""))
            .unwrap_or(&[]);
        let end = quoted
            .iter()
            .position(|b| matches!(b, b'"' | b',' | b'\\'))
            .unwrap_or(0);
        out.insert(String::from_utf8_lossy(&quoted[..end]).into_owned());
    }
    out
}
