//! A small, stable-Rust property/fuzz toolkit for the reliability tests: a seeded xorshift
//! generator, a time budget, JSON generators that know the CNI vocabulary, and structural
//! and byte-level mutators. No nightly, no extra dependency.
//!
//! Every run prints its seed; `CNIBOX_FUZZ_SEED=<n>` replays it, `CNIBOX_FUZZ_SECS=<s>`
//! raises the per-target time bound (default [`DEFAULT_SECS`]).
#![allow(dead_code)]

use serde_json::{Map, Number, Value};
use std::time::{Duration, Instant};

/// Per-target bound for `make test`; raise it with `CNIBOX_FUZZ_SECS` for longer campaigns.
pub const DEFAULT_SECS: f64 = 3.0;

/// xorshift64*: tiny, fast, reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// From `CNIBOX_FUZZ_SEED`, else from the clock; the seed is printed for replay.
    pub fn from_env(target: &str) -> Rng {
        let seed = std::env::var("CNIBOX_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("fuzz {target}: seed {seed} (replay with CNIBOX_FUZZ_SEED={seed})");
        Rng::new(seed)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// True with probability `num/den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// How long a fuzz target may run.
pub fn budget() -> Duration {
    let secs = std::env::var("CNIBOX_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(DEFAULT_SECS);
    Duration::from_secs_f64(secs)
}

/// Runs `body` until the budget is spent (at least `min_iters` times); returns the count.
pub fn run_for(min_iters: u64, mut body: impl FnMut(u64)) -> u64 {
    let start = Instant::now();
    let limit = budget();
    let mut n = 0;
    while n < min_iters || start.elapsed() < limit {
        body(n);
        n += 1;
    }
    n
}

/// Keys of CNI configs, results, OCI states and cache files: mutations that use them reach
/// far deeper than random keys would.
pub const KEYS: &[&str] = &[
    "cniVersion",
    "cniVersions",
    "name",
    "type",
    "ipam",
    "ranges",
    "subnet",
    "rangeStart",
    "rangeEnd",
    "gateway",
    "routes",
    "dst",
    "gw",
    "mtu",
    "advmss",
    "priority",
    "table",
    "scope",
    "dataDir",
    "resolvConf",
    "prevResult",
    "ips",
    "ip4",
    "ip6",
    "ip",
    "interfaces",
    "interface",
    "address",
    "version",
    "dns",
    "nameservers",
    "domain",
    "search",
    "options",
    "runtimeConfig",
    "args",
    "cni",
    "bridge",
    "isGateway",
    "isDefaultGateway",
    "forceAddress",
    "ipMasq",
    "ipMasqBackend",
    "hairpinMode",
    "promiscMode",
    "vlan",
    "vlanTrunk",
    "preserveDefaultVlan",
    "macspoofchk",
    "enabledad",
    "disableContainerInterface",
    "master",
    "mode",
    "mac",
    "linkInContainer",
    "capabilities",
    "sandbox",
    "socketPath",
    "pciID",
    "ipRanges",
    "portMappings",
    "cni.dev/valid-attachments",
    "cni.dev/attachments",
    "containerID",
    "ifname",
    "ociVersion",
    "id",
    "status",
    "pid",
    "bundle",
    "annotations",
    "kind",
    "containerId",
    "config",
    "ifName",
    "networkName",
    "netns",
    "result",
    "plugins",
    "disableCheck",
    "disableGC",
    "code",
    "msg",
    "details",
];

/// String values worth trying in any slot: valid ones (so deeper code runs) and hostile ones.
pub const STRINGS: &[&str] = &[
    "",
    "10.1.2.0/24",
    "10.1.2.1",
    "10.1.2.7",
    "10.1.2.0/30",
    "10.1.2.0/31",
    "10.1.2.0/32",
    "10.1.2.300/24",
    "10.1.2.5/24",
    "192.168.0.0/16",
    "0.0.0.0/0",
    "2001:db8:1::/64",
    "2001:db8:1::1",
    "2001:db8:1::/127",
    "::/0",
    "::1",
    "fe80::1/64",
    "1.1.0",
    "1.0.0",
    "0.4.0",
    "0.3.1",
    "0.3.0",
    "0.2.0",
    "0.1.0",
    "9.9.9",
    "1.1",
    "v1.0.0",
    "host-local",
    "bridge",
    "veth",
    "ptp",
    "macvlan",
    "eth0",
    "eth1",
    "cni0",
    "lo",
    "..",
    "../../etc",
    "/",
    "a/b",
    "\u{0}",
    "\u{0}x",
    "net",
    "ctr",
    "4",
    "6",
    "vepa",
    "private",
    "passthru",
    "l2",
    "l3",
    "de:ad:be:ef:00:01",
    "zz:zz",
    "1",
    "true",
    "-1",
    "nameserver 1.1.1.1",
    "/dev/null",
    "/nonexistent/file",
    "é",
    "\u{202e}",
    "%s%n",
    "0x10",
    "1e3",
    "AAAA",
    "stopped",
    "created",
    "running",
    "cniCacheV1",
    "iptables",
    "nftables",
];

/// A random string: from [`STRINGS`], random bytes (as lossy UTF-8), or a long run.
pub fn gen_string(r: &mut Rng) -> String {
    match r.below(10) {
        0..=5 => r.pick(STRINGS).to_string(),
        6 | 7 => {
            let n = r.below(24);
            let bytes: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        8 => {
            let n = r.below(20);
            (0..n)
                .map(|_| *r.pick(&['a', '.', '/', '-', '_', '0', ':', ' ', '\n']))
                .collect()
        }
        _ => "x".repeat(1 + r.below(5000)),
    }
}

pub fn gen_number(r: &mut Rng) -> Value {
    match r.below(8) {
        0 => Value::from(0),
        1 => Value::from(-1),
        2 => Value::from(r.below(70000) as u64),
        3 => Value::from(u64::MAX),
        4 => Value::from(i64::MIN),
        5 => Number::from_f64(1.5).map(Value::Number).unwrap(),
        6 => Number::from_f64(1e300).map(Value::Number).unwrap(),
        _ => Value::from(r.below(10) as u64),
    }
}

/// A random JSON value, `depth` levels deep at most.
pub fn gen_value(r: &mut Rng, depth: usize) -> Value {
    let k = if depth == 0 { r.below(5) } else { r.below(8) };
    match k {
        0 => Value::Null,
        1 => Value::Bool(r.chance(1, 2)),
        2 => gen_number(r),
        3 | 4 => Value::String(gen_string(r)),
        5 => Value::Array((0..r.below(4)).map(|_| gen_value(r, depth - 1)).collect()),
        _ => {
            let mut m = Map::new();
            for _ in 0..r.below(5) {
                let key = if r.chance(9, 10) {
                    r.pick(KEYS).to_string()
                } else {
                    gen_string(r)
                };
                m.insert(key, gen_value(r, depth - 1));
            }
            Value::Object(m)
        }
    }
}

/// Every node of `v` as a JSON pointer (the root is "").
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        _ => {}
    }
}

/// One structural change: replace a node, delete a key or element, add a key, change a
/// node's type, duplicate an element, or nest the node one level deeper.
pub fn mutate_value(r: &mut Rng, v: &mut Value) {
    let mut ptrs = vec![String::new()];
    pointers(v, String::new(), &mut ptrs);
    let p = r.pick(&ptrs).clone();
    let Some(node) = v.pointer_mut(&p) else { return };
    match r.below(7) {
        0 | 1 => *node = gen_value(r, 2),
        2 => match node {
            Value::Object(m) if !m.is_empty() => {
                let key = m.keys().nth(r.below(m.len())).unwrap().clone();
                m.remove(&key);
            }
            Value::Array(a) if !a.is_empty() => {
                let i = r.below(a.len());
                a.remove(i);
            }
            _ => *node = Value::Null,
        },
        3 => match node {
            Value::Object(m) => {
                m.insert(r.pick(KEYS).to_string(), gen_value(r, 2));
            }
            Value::Array(a) => a.push(gen_value(r, 2)),
            _ => *node = Value::String(gen_string(r)),
        },
        4 => {
            // same content, another type: "1" ↔ 1, x ↔ [x]
            *node = match node.take() {
                Value::String(s) => s
                    .parse::<i64>()
                    .map(Value::from)
                    .unwrap_or(Value::Array(vec![Value::String(s)])),
                Value::Number(n) => Value::String(n.to_string()),
                Value::Array(mut a) if !a.is_empty() => a.swap_remove(0),
                other => Value::Array(vec![other]),
            }
        }
        5 => {
            if let Value::Array(a) = node {
                if let Some(first) = a.first().cloned() {
                    for _ in 0..1 + r.below(3) {
                        a.push(first.clone());
                    }
                }
            }
        }
        _ => *node = Value::Array(vec![node.take()]),
    }
}

/// Tokens a byte-level mutation may insert.
const TOKENS: &[&str] = &[
    "null",
    "[]",
    "{}",
    "\"\"",
    "-1",
    "1e999",
    "\\u0000",
    "\\ud800",
    "\"",
    ",",
    ":",
    "{",
    "[",
    "}",
    "]",
    "\u{feff}",
    "\u{0}",
    "true",
    "/..",
    "18446744073709551616",
    "0.0000001",
    "\\",
    "\n",
];

/// One byte-level change: flip, insert, delete, duplicate, truncate, insert a token.
pub fn mutate_bytes(r: &mut Rng, b: &mut Vec<u8>) {
    let len = b.len();
    match r.below(6) {
        0 if len > 0 => {
            let i = r.below(len);
            b[i] ^= 1 << r.below(8);
        }
        1 => {
            let i = r.below(len + 1);
            b.insert(i, r.next() as u8);
        }
        2 if len > 0 => {
            let i = r.below(len);
            let n = 1 + r.below((len - i).min(16));
            b.drain(i..i + n);
        }
        3 if len > 0 => {
            let i = r.below(len);
            let n = 1 + r.below((len - i).min(32));
            let chunk: Vec<u8> = b[i..i + n].to_vec();
            let at = r.below(len + 1);
            b.splice(at..at, chunk);
        }
        4 if len > 0 => b.truncate(r.below(len)),
        _ => {
            let i = r.below(len + 1);
            let t = r.pick(TOKENS).as_bytes().to_vec();
            b.splice(i..i, t);
        }
    }
}

/// An input derived from `seeds`: structural mutations, then sometimes byte mutations, or
/// a wholly random value, or raw bytes.
pub fn gen_input(r: &mut Rng, seeds: &[Value]) -> Vec<u8> {
    match r.below(10) {
        0..=3 => {
            let mut v = r.pick(seeds).clone();
            for _ in 0..1 + r.below(3) {
                mutate_value(r, &mut v);
            }
            serde_json::to_vec(&v).unwrap()
        }
        4..=6 => {
            let mut v = r.pick(seeds).clone();
            if r.chance(1, 2) {
                mutate_value(r, &mut v);
            }
            let mut b = serde_json::to_vec(&v).unwrap();
            for _ in 0..1 + r.below(3) {
                mutate_bytes(r, &mut b);
            }
            b
        }
        7 | 8 => serde_json::to_vec(&gen_value(r, 4)).unwrap(),
        _ => {
            let n = r.below(64);
            (0..n).map(|_| r.next() as u8).collect()
        }
    }
}

/// Nested arrays `depth` deep (the recursion a decoder must refuse without overflowing).
pub fn deep_nesting(depth: usize) -> Vec<u8> {
    let mut s = String::from("{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"x\":");
    s.push_str(&"[".repeat(depth));
    s.push_str(&"]".repeat(depth));
    s.push('}');
    s.into_bytes()
}

/// A `K=V;…` string for `CNI_ARGS`.
pub fn gen_cni_args(r: &mut Rng) -> String {
    const KEYS: &[&str] = &["IP", "MAC", "IgnoreUnknown", "K8S_POD_NAME", "ip", "", "IP=", "X"];
    const VALS: &[&str] = &[
        "10.1.2.7",
        "1",
        "true",
        "0",
        "false",
        "TRUE",
        "yes",
        "",
        "a=b",
        "2001:db8:1::7",
        "de:ad:be:ef:00:01",
    ];
    let n = r.below(5);
    let mut parts = vec![];
    for _ in 0..n {
        let p = match r.below(6) {
            0 => gen_string(r).chars().take(20).collect(),
            1 => r.pick(KEYS).to_string(),
            _ => format!("{}={}", r.pick(KEYS), r.pick(VALS)),
        };
        parts.push(p);
    }
    parts.join(if r.chance(9, 10) { ";" } else { ";;" })
}

/// Runs `f` on a thread of its own that first moves into a fresh, empty network namespace:
/// whatever a plugin called in process does to the network, it does it there.
pub fn in_private_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
        f()
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// One in-process call of a plugin's entry point; a panic becomes `Err("PANIC: …")`.
pub fn run_entry_point(
    plugin: &dyn cnibox::cni::Plugin,
    env: &std::collections::BTreeMap<String, String>,
    stdin: &[u8],
) -> Result<(i32, Vec<u8>), String> {
    let env = env.clone();
    let getenv = move |k: &str| env.get(k).cloned();
    let mut input: &[u8] = stdin;
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let exit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cnibox::cni::plugin::run_with(plugin, None, &getenv, &mut input, &mut stdout, &mut stderr)
    }))
    .map_err(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("PANIC: {msg}")
    })?;
    Ok((exit, stdout))
}

/// What a process run returned.
#[derive(Debug)]
pub struct ProcOut {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

/// Run `program` inside the network namespace at `netns` with exactly `env` (plus PATH),
/// `args` and `stdin`; killed after `limit` (reported as `timed_out`).
pub fn run_process(
    program: &std::path::Path,
    netns: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &[u8],
    limit: Duration,
) -> ProcOut {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let fd = std::fs::File::open(netns).unwrap();
    let mut c = Command::new(program);
    c.args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the closure only calls setns(2), which is async-signal-safe.
    unsafe {
        c.pre_exec(move || nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from));
    }
    let mut child = c.spawn().unwrap_or_else(|e| panic!("spawn {program:?}: {e}"));
    let mut sin = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = sin.write_all(&data);
    });
    let mut sout = child.stdout.take().unwrap();
    let mut serr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut b = vec![];
        let _ = sout.read_to_end(&mut b);
        b
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = vec![];
        let _ = serr.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let _ = writer.join();
    ProcOut {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned(),
        timed_out,
    }
}
