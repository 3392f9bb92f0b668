//! Generated differential tests of Go's key matching (issue 24): for every key each plugin
//! applet's code reads, the key written the ways Go's `encoding/json` accepts or refuses
//! gives what Debian's reference 1.1.1 gives.
//!
//! * The keys come from the code: [`registry`] runs each applet's samples
//!   ([`samples`]) through cnibox with the key registry of test builds on, and the coverage
//!   test fails when a key the code reads has no sample value (a developer who adds a key
//!   adds a sample) or a sample key is never read (stale).
//! * [`cases`] generates, per key: the canonical spelling, lower case, UPPER case and
//!   Capitalized (and an object value split over two spellings), whose whole outcome is
//!   compared: exit codes, results, and the kernel and disk state after ADD and after DEL
//!   ([`world`]); and `null`, the key written twice (then `null`; a wrong type first) and a
//!   wrong type per kind of value, written in a second spelling, whose codes, ADD
//!   results and error messages (Go's wording) are compared.
//! * The oracle is the reference given the same config, except where it cannot be: a key
//!   Debian's 1.1.1 lacks ([`samples::NEWER`]) is compared with cnibox's own canonical run
//!   (a mistyped one must fail with Go's decode error, as the current reference does); the
//!   README's documented differences are applied where they show, each named in its
//!   applet's table ([`samples::Documented`]); and a DEL of a config ADD refuses must
//!   succeed in cnibox whatever the reference answers (README).
//!
//! * An applet whose link kind needs a kernel module this kernel lacks (vlan, ipvlan, vrf:
//!   [`samples::Applet::module`]) cannot ADD on either side: it has the coverage and code
//!   tests only, and a code case where both sides fail for want of the module is left out.
//!
//! Each side (cnibox, reference) has one host namespace per test and runs the cases in the
//! same order, in a thread of its own; a spelling case gets a fresh container, the code
//! cases share one (their DEL undoes them); a config written the same way twice is run
//! once. Every plugin call sees the side's own `/run` and `/var/lib`, as an unset path key
//! means a default path there. `-- --nocapture` prints the counts, each side's time and the
//! error messages that differ from the reference's (not asserted).
mod cases;
mod doc;
mod registry;
mod samples;
mod world;

use cases::{Case, Effect, Form, Key};
use doc::Doc;
use samples::{Applet, Documented, Oracle, Sample};
use serde_json::Value;
use std::collections::HashMap;
use world::Side;

macro_rules! per_applet {
    ($test:ident, $run:path; $($name:ident $applet:ident),*) => {
        mod $test {
            $(
                #[test]
                fn $name() {
                    $run(&super::samples::$applet)
                }
            )*
        }
    };
}

/// `per_applet!` for the applets whose ADD this kernel can run, and `$more`.
macro_rules! applets {
    ($test:ident, $run:path $(, $more_name:ident $more:ident)*) => {
        per_applet!($test, $run; bridge BRIDGE, veth VETH, macvlan MACVLAN, host_local HOST_LOCAL,
                    loopback LOOPBACK, tuning TUNING, bandwidth BANDWIDTH, portmap PORTMAP, firewall FIREWALL,
                    static_ipam STATIC, sbr SBR $(, $more_name $more)*);
    };
}

// The applet is the test's last name (`go_keys::<test>::veth`): the Makefile's release pass
// picks plugin modules by substrings such as `veth::`, and these tests need the test build.
// vlan, ipvlan and vrf (`Applet::module`) have no spelling test: on a kernel without their
// module every spelling ends at the missing module on both sides.
applets!(
    every_key_read_has_a_sample_and_every_sample_key_is_read,
    super::coverage,
    vlan VLAN,
    ipvlan IPVLAN,
    vrf VRF
);
applets!(each_spelling_gives_the_reference_outcome, super::spellings);
applets!(
    null_repeated_and_mistyped_keys_give_the_reference_codes,
    super::codes,
    vlan VLAN,
    ipvlan IPVLAN,
    vrf VRF
);

fn coverage(applet: &'static Applet) {
    if crate::common::reference_dir().is_none() {
        return;
    }
    let problems = registry::coverage(applet);
    let records = registry::records(applet);
    let keys = cases::keys(applet, records);
    eprintln!(
        "go_keys {}: {} keys read, {} cased here, {} delegated to host-local",
        applet.name,
        records.keys.len(),
        keys.len(),
        records
            .keys
            .keys()
            .filter(|(at, k)| cases::delegated(applet.delegated, &doc::dotted(at, k)))
            .count()
    );
    assert!(problems.is_empty(), "{}:\n  {}", applet.name, problems.join("\n  "));
}

/// Cases written the same way share a run: (first case of each run, run of each case).
fn plan(cases: &[Case], samples: &[Sample]) -> (Vec<usize>, Vec<usize>) {
    let mut signatures: HashMap<String, usize> = HashMap::new();
    let mut first = vec![];
    let run_of = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let sig = format!("{}:{}", c.key.sample, c.signature(&samples[c.key.sample].config));
            *signatures.entry(sig).or_insert_with(|| {
                first.push(i);
                first.len() - 1
            })
        })
        .collect();
    (first, run_of)
}

/// Runs `run` for each planned run on both sides at once, each in its own thread and world;
/// the reference side only where `wanted` says so.
fn both_sides<T: Send>(
    applet: &'static Applet,
    wanted: &[bool],
    run: &(dyn Fn(&Side, usize) -> T + Sync),
) -> (Vec<T>, Vec<Option<T>>) {
    std::thread::scope(|s| {
        let ours = s.spawn(|| {
            let side = Side::new(applet, false);
            let t = std::time::Instant::now();
            let v = (0..wanted.len()).map(|r| run(&side, r)).collect::<Vec<_>>();
            eprintln!("go_keys {}: cnibox's side took {:.1?}", applet.name, t.elapsed());
            v
        });
        let theirs = s.spawn(|| {
            let side = Side::new(applet, true);
            let t = std::time::Instant::now();
            let v = (0..wanted.len())
                .map(|r| wanted[r].then(|| run(&side, r)))
                .collect::<Vec<_>>();
            eprintln!("go_keys {}: the reference's side took {:.1?}", applet.name, t.elapsed());
            v
        });
        let ours = ours.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        let theirs = theirs.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        (ours, theirs)
    })
}

/// The container ID of a run: one per sample, so that a case and the sample's canonical run
/// name their chains, records and reservations alike (each run ends with its DEL).
fn run_id(c: &Case) -> String {
    format!("keys-{}", c.key.sample)
}

/// Where two outcomes differ: the paths and both values.
fn diff(ours: &Value, want: &Value, path: &str, out: &mut Vec<String>) {
    match (ours, want) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                diff(
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                    &format!("{path}/{k}"),
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(x, y, &format!("{path}/{i}"), out);
            }
        }
        (a, b) if a != b => out.push(format!("    {path}: cnibox {a}\n    {path}: wanted {b}")),
        _ => {}
    }
}

/// The documented differences applied to an applet's outcomes, for the test's output.
fn documented(applet: &Applet) -> String {
    applet
        .documented
        .iter()
        .map(|d| format!("\n  documented: {}", d.why()))
        .collect()
}

/// An outcome as compared: the documented differences applied (the reference's outcome
/// turned into what cnibox does instead, where `reference`), the messages left out.
fn compared(applet: &Applet, outcome: &Value, reference: bool) -> Value {
    let mut v = outcome.clone();
    for d in applet.documented {
        match d {
            Documented::Instead(_, f) if reference => f(&mut v),
            Documented::Masked(_, f) => f(&mut v),
            Documented::Instead(..) => {}
        }
    }
    let o = v.as_object_mut().unwrap();
    o.remove("msgs");
    // asserted on cnibox's side alone (`refused_config_del`)
    o.remove("del_after_refused_add");
    v
}

/// README, "DEL succeeds on a config ADD refuses": the DEL after a refused ADD, and the DEL
/// of a config with a key of the wrong type (which CHECK and DEL get even where ADD's
/// config has no such key, as prevResult), succeed in cnibox whatever the reference answers
/// (v1.1.1's fails for ever).
fn refused_config_del(c: &Case, ours: &Value, mismatches: &mut Vec<String>) {
    // the entry point refuses a config without a valid cniVersion or name for every verb, as
    // the reference's skel does: no runtime could have added it
    if c.key.at.is_empty() && ["cniVersion", "name"].contains(&c.key.key.as_str()) {
        return;
    }
    let code = match ours.get("del_after_refused_add") {
        Some(code) => code,
        None if c.effect() == Effect::Error => &ours["del"],
        None => return,
    };
    if !code.is_null() && code != 0 {
        mismatches.push(format!(
            "{}: DEL of a config ADD refuses failed ({code}: {}); README: DEL succeeds on a config ADD refuses",
            c.label(),
            ours["msgs"]["del"]
        ));
    }
}

/// `mismatches` gets the case and where `ours` differs from `want` (both as compared).
fn differs(c: &Case, ours: &Value, want: &Value, against: &str, mismatches: &mut Vec<String>) {
    if ours != want {
        let mut d = vec![];
        diff(ours, want, "", &mut d);
        mismatches.push(format!("{}: differs from {against}\n{}", c.label(), d.join("\n")));
    }
}

fn report(applet: &Applet, what: &str, cases: usize, mismatches: &[String]) {
    assert!(
        mismatches.is_empty(),
        "{}: {} of {} {what} differ:\n{}",
        applet.name,
        mismatches.len(),
        cases,
        mismatches.join("\n")
    );
}

fn spellings(applet: &'static Applet) {
    if crate::common::reference_dir().is_none() {
        return;
    }
    let records = registry::records(applet);
    let samples = (applet.samples)();
    let configs: Vec<Value> = samples.iter().map(|s| s.config.clone()).collect();
    let keys = cases::keys(applet, records);
    let cases = cases::spelling_cases(&keys, &configs);
    let (first, run_of) = plan(&cases, &samples);
    let by_reference = |c: &Case| matches!(samples[c.key.sample].oracle, Oracle::Reference);
    let wanted: Vec<bool> = first.iter().map(|&i| by_reference(&cases[i])).collect();
    let (ours, theirs) = both_sides(applet, &wanted, &|side, r| {
        let c = &cases[first[r]];
        side.run(&run_id(c), &configs[c.key.sample], &|d| c.edit(d), true, None)
    });
    let baseline = |sample: usize| {
        let unedited = Doc::from(&configs[sample]).text();
        let i = cases
            .iter()
            .position(|c| c.key.sample == sample && c.signature(&configs[sample]) == unedited)
            .expect("the canonical spelling is the sample as written");
        run_of[i]
    };
    let mut mismatches = vec![];
    for (i, c) in cases.iter().enumerate() {
        let r = run_of[i];
        refused_config_del(c, &ours[r], &mut mismatches);
        let got = compared(applet, &ours[r], false);
        match samples[c.key.sample].oracle {
            Oracle::Reference => {
                let want = compared(applet, theirs[r].as_ref().unwrap(), true);
                differs(c, &got, &want, "the reference", &mut mismatches);
            }
            Oracle::Cnibox(why) => {
                let b = baseline(c.key.sample);
                let want = compared(applet, &ours[b], false);
                differs(
                    c,
                    &got,
                    &want,
                    &format!("cnibox's canonical run ({why})"),
                    &mut mismatches,
                );
            }
        }
    }
    eprintln!(
        "go_keys {}: {} keys, {} spelling cases, {} runs ({} of the reference){}",
        applet.name,
        keys.len(),
        cases.len(),
        first.len(),
        wanted.iter().filter(|w| **w).count(),
        documented(applet)
    );
    report(applet, "spelling cases", cases.len(), &mismatches);
}

/// The answer a case's codes (and ADD result) must equal.
enum Want {
    /// The reference's, for the same config.
    Reference,
    /// Go's decode error: the key is one v1.1.1 lacks, and the current reference fails.
    DecodeError,
    /// cnibox's for the sample as written.
    Canonical,
    /// cnibox's for the sample without the key.
    Removed,
    /// Either of those (the key's readers disagree on what `null` does).
    CanonicalOrRemoved,
}

fn want_of(c: &Case, samples: &[Sample]) -> Want {
    let newer = c.key.newer.is_some();
    match (&samples[c.key.sample].oracle, c.effect()) {
        (_, Effect::Error) if newer => Want::DecodeError,
        (Oracle::Reference, _) => Want::Reference,
        (Oracle::Cnibox(_), Effect::Sample) => Want::Canonical,
        (Oracle::Cnibox(_), Effect::Absent) => Want::Removed,
        (Oracle::Cnibox(_), Effect::Mixed) => Want::CanonicalOrRemoved,
        (Oracle::Cnibox(_), Effect::Error) => Want::Reference,
    }
}

fn codes(applet: &'static Applet) {
    if crate::common::reference_dir().is_none() {
        return;
    }
    let records = registry::records(applet);
    let samples = (applet.samples)();
    let keys = cases::keys(applet, records);
    let mut cases = cases::code_cases(&keys);
    let compared_cases = cases.len();
    // the runs cnibox answers for the reference with: each key of a cnibox sample as
    // written and left out
    for key in keys
        .iter()
        .filter(|k| matches!(samples[k.sample].oracle, Oracle::Cnibox(_)))
    {
        cases.push(Case {
            key,
            form: Form::Spelling("canonical", key.key.clone()),
        });
        cases.push(Case {
            key,
            form: Form::Removed,
        });
    }
    let (first, run_of) = plan(&cases, &samples);
    let wanted: Vec<bool> = first
        .iter()
        .map(|&i| matches!(want_of(&cases[i], &samples), Want::Reference))
        .collect();
    let (ours, theirs) = both_sides(applet, &wanted, &|side, r| {
        let c = &cases[first[r]];
        side.run(&run_id(c), &samples[c.key.sample].config, &|d| c.edit(d), false, None)
    });
    let raw_run_with = |key: &Key, removed: bool| {
        let i = cases
            .iter()
            .position(|c| {
                std::ptr::eq(c.key, key)
                    && matches!((removed, &c.form), (false, Form::Spelling(..)) | (true, Form::Removed))
            })
            .unwrap();
        &ours[run_of[i]]
    };
    let run_with = |key: &Key, removed: bool| compared(applet, raw_run_with(key, removed), false);
    let mut mismatches = vec![];
    let mut messages = vec![];
    let mut left_out = 0;
    for (i, c) in cases[..compared_cases].iter().enumerate() {
        let r = run_of[i];
        refused_config_del(c, &ours[r], &mut mismatches);
        // decoding went through on both sides (or the key is not in ADD's config, as
        // `prevResult`), then the kernel had no module: nothing to compare
        let wanted_run = match want_of(c, &samples) {
            Want::Reference => theirs[r].as_ref(),
            Want::Canonical | Want::CanonicalOrRemoved => Some(raw_run_with(c.key, false)),
            Want::Removed => Some(raw_run_with(c.key, true)),
            Want::DecodeError => None,
        };
        if wanted_run.is_some_and(|w| lacks_module(applet, w)) && lacks_module(applet, &ours[r]) {
            left_out += 1;
            continue;
        }
        let got = compared(applet, &ours[r], false);
        // the reference cannot answer a DEL of a mistyped config (`refused_config_del`)
        let got = if c.effect() == Effect::Error {
            without_del(got)
        } else {
            got
        };
        match want_of(c, &samples) {
            Want::DecodeError => {
                let msg = ours[r]["msgs"]["add"].as_str().unwrap_or_default();
                if added(&ours[r]) || !msg.contains("json: cannot unmarshal") {
                    mismatches.push(format!(
                        "{}: wanted Go's decode error (the key is newer than v1.1.1: {}), got {}",
                        c.label(),
                        c.key.newer.unwrap(),
                        ours[r]
                    ));
                }
            }
            Want::Reference => {
                let theirs = theirs[r].as_ref().unwrap();
                let (a, b) = (&ours[r]["msgs"]["add"], &theirs["msgs"]["add"]);
                if c.effect() == Effect::Error && a != b {
                    messages.push(format!("{}:\n    cnibox    {a}\n    reference {b}", c.label()));
                }
                let mut want = compared(applet, theirs, true);
                if c.effect() == Effect::Error {
                    want = without_del(want);
                }
                differs(c, &got, &want, "the reference", &mut mismatches);
            }
            Want::Canonical => differs(
                c,
                &got,
                &run_with(c.key, false),
                "the sample as written",
                &mut mismatches,
            ),
            Want::Removed => differs(
                c,
                &got,
                &run_with(c.key, true),
                "the sample without the key",
                &mut mismatches,
            ),
            Want::CanonicalOrRemoved => {
                if got != run_with(c.key, true) {
                    differs(
                        c,
                        &got,
                        &run_with(c.key, false),
                        "the sample with and without the key",
                        &mut mismatches,
                    );
                }
            }
        }
    }
    eprintln!(
        "go_keys {}: {} keys, {} code cases{}, {} runs ({} of the reference){}; {} error messages differ{}{}",
        applet.name,
        keys.len(),
        compared_cases,
        applet.module.map_or(String::new(), |m| format!(
            " ({left_out} left out: both sides failed for want of the kernel's {m} module)"
        )),
        first.len(),
        wanted.iter().filter(|w| **w).count(),
        documented(applet),
        messages.len(),
        if messages.is_empty() { "" } else { ":\n" },
        messages.join("\n")
    );
    // Go's wording is the spec too: runtimes log it and users search for it
    mismatches.extend(
        messages
            .iter()
            .map(|m| format!("the error is worded otherwise than the reference's: {m}")),
    );
    report(applet, "code cases", compared_cases, &mismatches);
}

/// Whether ADD failed because the kernel lacks the applet's module: cnibox names it
/// (`vlan: the kernel has no vlan support (modprobe 8021q)`), the reference passes the
/// kernel's answer on (`failed to create vlan: operation not supported`).
fn lacks_module(applet: &Applet, outcome: &Value) -> bool {
    let Some(module) = applet.module else {
        return false;
    };
    let msg = outcome["msgs"]["add"].as_str().unwrap_or_default();
    msg.ends_with(&format!("(modprobe {module})")) || msg.ends_with(": operation not supported")
}

fn without_del(mut outcome: Value) -> Value {
    outcome.as_object_mut().unwrap().remove("del");
    outcome
}

/// Whether ADD succeeded in an outcome.
fn added(outcome: &Value) -> bool {
    outcome["add"].get("result").is_some()
}
