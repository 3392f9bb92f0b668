//! The `tuning` meta plugin: sysctls and link attributes of the container interface, set
//! after the interface plugin in a chain.
//!
//! ADD writes the configured `net.*` sysctls inside the container namespace, saves the
//! interface's MAC, promisc, MTU, allmulti and txqueuelen (only those it is about to change)
//! to `<dataDir>/<containerID>_<ifname>.json` in the reference's format, then changes them
//! and returns prevResult with the new MAC. DEL puts the saved values back and removes the
//! file; CHECK compares the live values with the config.
//!
//! Unlike the reference, a failed ADD undoes what it did before failing (sysctls, link
//! attributes, the saved file), and every input is validated before anything changes.
//!
//! As the reference since v1.2.0, ADD sets only sysctls that `/etc/cni/tuning/allowlist.conf`
//! allows, when that file exists (sysctls can come from pod annotations, which an
//! unprivileged user controls): see [`check_allowlist`].
use crate::cni::config::{self as cniconf, RUNTIME_CONFIG_MAC};
use crate::cni::error::go_errno_text;
use crate::cni::json;
use crate::cni::json::{Fields, Json};
use crate::cni::{CniResult, Error, Plugin, Request};
use crate::netlink::{self, Handle, Link, MacAddr};
use crate::netns::Netns;
use crate::plugin_kit::netns_open;
use crate::plugin_kit::rollback::Rollback;
use crate::util::regex::Regex;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct Tuning;

/// Where the reference (v1.1.1 and later) keeps the saved values.
pub const DEFAULT_DATA_DIR: &str = "/run/cni/tuning";

/// The sysctls ADD may set: one Go regular expression a line (the reference's path).
pub const ALLOWLIST: &str = "/etc/cni/tuning/allowlist.conf";

/// The config, after `CNI_ARGS MAC=`, `runtimeConfig.mac` and `args.cni` were applied.
#[derive(Debug, Default, Clone, PartialEq)]
struct Conf {
    data_dir: PathBuf,
    /// Keys as written, values as written; applied in key order.
    sysctl: Vec<(String, String)>,
    mac: Option<String>,
    promisc: bool,
    mtu: i64,
    allmulti: Option<bool>,
    txqlen: Option<i64>,
}

const CTX: &str = "failed to load netconf";

fn load(req: &Request) -> Result<Conf, Error> {
    let ctx = |e: Error| e.context(CTX);
    cniconf::check_net_conf(&req.config, "TuningConf").map_err(ctx)?;
    let obj = json::as_object(&req.config, "TuningConf").map_err(ctx)?;
    let field = |key: &str| format!("TuningConf.{key}");
    let mut conf = Conf {
        data_dir: json::opt_str(&obj, "dataDir", &field("dataDir"))
            .map_err(ctx)?
            .filter(|d| !d.is_empty())
            .unwrap_or(DEFAULT_DATA_DIR)
            .into(),
        sysctl: sysctl_map(&obj, "sysctl", "TuningConf.sysctl")?.unwrap_or_default(),
        mac: json::opt_str(&obj, "mac", &field("mac"))
            .map_err(ctx)?
            .filter(|m| !m.is_empty())
            .map(str::to_string),
        promisc: json::opt_bool(&obj, "promisc", &field("promisc"))
            .map_err(ctx)?
            .unwrap_or(false),
        mtu: json::opt_int(&obj, "mtu", &field("mtu")).map_err(ctx)?.unwrap_or(0),
        allmulti: ptr_bool(&obj, "allmulti", &field("allmulti"))?,
        txqlen: ptr_int(&obj, "txQLen", &field("txQLen"))?,
    };
    let runtime_mac = json::opt_object(&obj, "runtimeConfig", &field("runtimeConfig"), RUNTIME_CONFIG_MAC)
        .map_err(ctx)?
        .map(|rc| json::opt_str(&rc, "mac", ".runtimeConfig.mac").map(|m| m.map(str::to_string)))
        .transpose()
        .map_err(ctx)?
        .flatten()
        .filter(|m| !m.is_empty());
    let args = json::opt_ptr_object(
        &obj,
        "args",
        &field("args"),
        r#"struct { A *main.IPAMArgs "json:\"cni\"" }"#,
    )
    .map_err(ctx)?
    .map(|a| json::opt_ptr_object(&a, "cni", ".args.cni", "main.IPAMArgs"))
    .transpose()
    .map_err(ctx)?
    .flatten();

    // MAC: config < CNI_ARGS MAC= < runtimeConfig.mac < args.cni.mac (the reference's order)
    if let Some(m) = cniconf::cni_args_mac(req)? {
        conf.mac = Some(m);
    }
    if let Some(m) = runtime_mac {
        conf.mac = Some(m);
    }
    if let Some(a) = args {
        let path = |key: &str| format!("IPAMArgs.args.cni.{key}");
        if let Some(extra) = sysctl_map(&a, "sysctl", &path("sysctl"))? {
            for (k, v) in extra {
                match conf.sysctl.iter_mut().find(|(key, _)| *key == k) {
                    Some(slot) => slot.1 = v,
                    None => conf.sysctl.push((k, v)),
                }
            }
            crate::util::sort::sort(&mut conf.sysctl);
        }
        // pointer fields: present (even empty) replaces, `null` is nil
        if let Some(m) = json::opt_ptr_str(&a, "mac", &path("mac")).map_err(ctx)? {
            conf.mac = Some(m.to_string()).filter(|m| !m.is_empty());
        }
        if let Some(p) = ptr_bool(&a, "promisc", &path("promisc"))? {
            conf.promisc = p;
        }
        if let Some(m) = ptr_int(&a, "mtu", &path("mtu"))? {
            conf.mtu = m;
        }
        if let Some(m) = ptr_bool(&a, "allmulti", &path("allmulti"))? {
            conf.allmulti = Some(m);
        }
        if let Some(q) = ptr_int(&a, "txQLen", &path("txQLen"))? {
            conf.txqlen = Some(q);
        }
    }
    Ok(conf)
}

fn ptr_bool(obj: &Fields, key: &str, path: &str) -> Result<Option<bool>, Error> {
    json::opt_ptr_bool(obj, key, path).map_err(|e| e.context(CTX))
}

fn ptr_int(obj: &Fields, key: &str, path: &str) -> Result<Option<i64>, Error> {
    json::opt_ptr_int(obj, key, path).map_err(|e| e.context(CTX))
}

/// A Go `map[string]string` (or a pointer to one), sorted by key.
fn sysctl_map(obj: &Fields, key: &str, path: &str) -> Result<Option<Vec<(String, String)>>, Error> {
    let Some(m) = json::opt_map(obj, key, path, "map[string]string").map_err(|e| e.context(CTX))? else {
        return Ok(None);
    };
    m.into_iter()
        .map(|(k, v)| match v {
            Json::String(s) => Ok((k.to_string(), s.clone())),
            Json::Null => Ok((k.to_string(), String::new())),
            other => Err(json::type_error(other, path, "string").context(CTX)),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The reference's `validateSysctlConflictingKeys` (ADD and CHECK, since v1.2.0): a key
/// written twice in the top-level `sysctl` map (in one object, or in two spellings of the
/// field) is refused instead of one value silently winning.
fn refuse_repeated_sysctl_keys(req: &Request) -> Result<(), Error> {
    let obj = json::as_object(&req.config, "sysctlCheck")?;
    // a Vec, not a HashSet: a config's few keys, without another hash table's code
    let mut seen = Vec::new();
    for v in obj.written("sysctl", "map[main.sysctlKey]string") {
        if let Json::Object(m) = v {
            for (k, _) in m.members() {
                if seen.contains(&k) {
                    return Err(Error::internal("duplicated sysctl keys are not allowed"));
                }
                seen.push(k);
            }
        }
    }
    Ok(())
}

impl Conf {
    /// Whether ADD changes (and so saves) any link attribute.
    fn changes_link(&self) -> bool {
        self.mac.is_some() || self.mtu != 0 || self.promisc || self.allmulti.is_some() || self.txqlen.is_some()
    }
}

/// A sysctl key resolved to its file: dots become slashes, then the first `IFNAME` becomes
/// the interface (in this order, so dotted interface names such as `eth0.100` work), and the
/// cleaned path must stay below /proc/sys/net/.
fn sysctl_file(key: &str, ifname: &str) -> Result<PathBuf, Error> {
    let slashed = key.replace('.', "/").replacen("IFNAME", ifname, 1);
    let file = clean_path(&format!("/proc/sys/{slashed}"));
    if !file.starts_with("/proc/sys/net/") {
        // the reference names the key with the interface substituted, dots kept
        return Err(Error::internal(format!(
            "invalid net sysctl key: {}",
            crate::cni::version::go_quote(&key.replacen("IFNAME", ifname, 1))
        )));
    }
    Ok(PathBuf::from(file))
}

/// Go's `path.Clean` for an absolute path: no empty, `.` or `..` components left.
fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

fn go_path_error(op: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::internal(format!("{op} {}: {}", path.display(), go_errno_text(e)))
}

/// One line of the allowlist, trimmed as Go's `strings.TrimSpace` trims it.
enum AllowLine {
    Pattern(String),
    /// Not UTF-8: Go's regexp refuses it when it gets to it (shown with U+FFFD, as Go's
    /// JSON shows it). The text from the first bad byte on, for the message.
    NotUtf8 {
        shown: String,
        from_bad: String,
    },
}

impl AllowLine {
    fn shown(&self) -> &str {
        match self {
            AllowLine::Pattern(p) => p,
            AllowLine::NotUtf8 { shown, .. } => shown,
        }
    }

    /// Whether `key` matches (Go's `regexp.MatchString`, unanchored).
    fn matches(&self, key: &str) -> Result<bool, Error> {
        match self {
            AllowLine::Pattern(p) => Regex::new(p)
                .map(|re| re.is_match(key))
                .map_err(|e| Error::internal(e.to_string())),
            AllowLine::NotUtf8 { from_bad, .. } => Err(Error::internal(format!(
                "error parsing regexp: invalid UTF-8: `{from_bad}`"
            ))),
        }
    }
}

/// The allowlist's non-empty lines, or `None` when there is no allowlist (then every
/// sysctl is allowed, as in the reference).
fn read_allowlist(path: &Path) -> Result<Option<Vec<AllowLine>>, Error> {
    use std::io::Read;
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(go_path_error("open", path, &e)),
    };
    let mut bytes = vec![];
    f.read_to_end(&mut bytes).map_err(|e| go_path_error("read", path, &e))?;
    let lines = bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| match std::str::from_utf8(line) {
            Ok(text) => Some(text.trim())
                .filter(|t| !t.is_empty())
                .map(|t| AllowLine::Pattern(t.to_string())),
            Err(e) => Some(AllowLine::NotUtf8 {
                shown: String::from_utf8_lossy(line.trim_ascii()).into_owned(),
                from_bad: String::from_utf8_lossy(&line[e.valid_up_to()..]).trim_end().to_string(),
            }),
        });
    Ok(Some(lines.collect()))
}

/// The reference's `validateSysctlConf`: each sysctl key, as written (`IFNAME` and all),
/// must match a line of the allowlist at [`ALLOWLIST`]. Lines are tried in order and each
/// compiled only when reached, as Go does: a malformed line is an error only for a key that
/// no line before it allows.
fn check_allowlist(path: &Path, sysctls: &[(String, String)]) -> Result<(), Error> {
    let Some(allowlist) = read_allowlist(path)? else {
        return Ok(());
    };
    for (key, _) in sysctls {
        let mut allowed = false;
        for line in &allowlist {
            if line.matches(key)? {
                allowed = true;
                break;
            }
        }
        if !allowed {
            let shown: Vec<&str> = allowlist.iter().map(AllowLine::shown).collect();
            return Err(Error::internal(format!(
                "Sysctl {key} is not allowed. Only the following sysctls are allowed: [{}]",
                shown.join(" ")
            )));
        }
    }
    Ok(())
}

/// Reads a sysctl file inside `ns`, without its trailing newline.
fn read_sysctl(ns: &Netns, file: &Path) -> Result<String, Error> {
    let s = ns
        .run(|| std::fs::read_to_string(file))
        .map_err(|e| Error::internal(e.to_string()))?
        .map_err(|e| go_path_error("open", file, &e))?;
    Ok(s.strip_suffix('\n').unwrap_or(&s).to_string())
}

/// Writes a sysctl file inside `ns` the way Go's `os.WriteFile` does.
fn write_sysctl(ns: &Netns, file: &Path, value: &str) -> Result<(), Error> {
    ns.run(|| -> Result<(), Error> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(file)
            .map_err(|e| go_path_error("open", file, &e))?;
        f.write_all(value.as_bytes())
            .map_err(|e| go_path_error("write", file, &e))
    })
    .map_err(|e| Error::internal(e.to_string()))?
}

/// A kernel failure as the reference prints it: the bare errno text (`invalid argument`).
fn kernel_error(e: netlink::Error) -> Error {
    match e.errno() {
        Some(_) => Error::internal(crate::plugin_kit::go_kernel_text(&e)),
        None => Error::from(e),
    }
}

/// Go's `net.ParseMAC` for the 48-bit forms, with its message.
fn parse_mac(s: &str) -> Result<MacAddr, Error> {
    let dotted = || -> Option<MacAddr> {
        // 0000.5e00.5301
        let groups: Vec<&str> = s.split('.').collect();
        if groups.len() != 3 || groups.iter().any(|g| g.len() != 4) {
            return None;
        }
        let mut out = [0u8; 6];
        for (i, g) in groups.iter().enumerate() {
            let n = u16::from_str_radix(g, 16).ok()?;
            out[2 * i] = (n >> 8) as u8;
            out[2 * i + 1] = n as u8;
        }
        Some(MacAddr(out))
    };
    s.parse::<MacAddr>().ok().or_else(dotted).ok_or_else(|| {
        Error::internal(format!(
            "invalid args {s} for MAC addr: address {s}: invalid MAC address"
        ))
    })
}

/// The saved values (the reference's `configToRestore`, same keys, same layout).
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
struct Saved {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    promisc: Option<bool>,
    #[serde(default, skip_serializing_if = "is_zero")]
    mtu: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allmulti: Option<bool>,
    #[serde(rename = "txQLen", default, skip_serializing_if = "Option::is_none")]
    txqlen: Option<i64>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Saved {
    /// What `conf` is about to change, as the link has it now.
    fn of(link: &Link, conf: &Conf) -> Saved {
        Saved {
            mac: if conf.mac.is_some() {
                link.mac.map(|m| m.to_string()).unwrap_or_default()
            } else {
                String::new()
            },
            promisc: conf.promisc.then_some(link.promisc),
            mtu: if conf.mtu != 0 { i64::from(link.mtu) } else { 0 },
            allmulti: conf.allmulti.map(|_| link.allmulti),
            txqlen: conf.txqlen.map(|_| i64::from(link.txqlen)),
        }
    }

    /// The saved file as the reference decodes it (Go's rules, so a file the reference wrote
    /// or one edited by hand reads the same); `None` when it is not a saved state.
    fn from_json(data: &[u8]) -> Option<Saved> {
        let doc = json::parse(data).ok()?;
        let obj = json::as_object(&doc, "configToRestore").ok()?;
        let path = |key: &str| format!("configToRestore.{key}");
        Some(Saved {
            mac: json::opt_str(&obj, "mac", &path("mac"))
                .ok()?
                .unwrap_or_default()
                .to_string(),
            promisc: ptr_bool(&obj, "promisc", &path("promisc")).ok()?,
            mtu: json::opt_int(&obj, "mtu", &path("mtu")).ok()?.unwrap_or(0),
            allmulti: ptr_bool(&obj, "allmulti", &path("allmulti")).ok()?,
            txqlen: ptr_int(&obj, "txQLen", &path("txQLen")).ok()?,
        })
    }

    /// Go's `json.MarshalIndent(v, "", " ")`.
    fn to_go_json(&self) -> String {
        let mut out = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        self.serialize(&mut ser).expect("plain values serialize");
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// Puts the values back (MTU, MAC, promisc, allmulti, txqueuelen: the reference's order);
    /// every one is attempted, the failures are joined with `; `.
    fn restore(&self, h: &Handle, ifname: &str) -> Result<(), Error> {
        let mut failed = vec![];
        let mut attempt = |what: &str, r: Result<(), Error>| {
            if let Err(e) = r {
                failed.push(format!("failed to restore {what}: {}", e.msg));
            }
        };
        if self.mtu != 0 {
            attempt("MTU", set_mtu(h, ifname, self.mtu));
        }
        if !self.mac.is_empty() {
            attempt("MAC address", parse_mac(&self.mac).and_then(|m| set_mac(h, ifname, m)));
        }
        if let Some(p) = self.promisc {
            attempt("promiscuous mode", with_link(h, ifname, |l| h.set_promisc(l.index, p)));
        }
        if let Some(a) = self.allmulti {
            attempt(
                "all-multicast mode",
                with_link(h, ifname, |l| h.set_allmulti(l.index, a)),
            );
        }
        if let Some(q) = self.txqlen {
            attempt("transmit queue length", set_txqlen(h, ifname, q));
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(Error::internal(failed.join("; ")))
        }
    }
}

fn saved_file(data_dir: &Path, container_id: &str, ifname: &str) -> PathBuf {
    data_dir.join(format!("{container_id}_{ifname}.json"))
}

fn lookup(h: &Handle, ifname: &str) -> Result<Link, Error> {
    h.link_by_name(ifname)?
        .ok_or_else(|| Error::internal(format!("failed to get {ifname:?}: Link not found")))
}

fn with_link(h: &Handle, ifname: &str, f: impl FnOnce(&Link) -> netlink::Result<()>) -> Result<(), Error> {
    let link = lookup(h, ifname)?;
    f(&link).map_err(kernel_error)
}

fn set_mtu(h: &Handle, ifname: &str, mtu: i64) -> Result<(), Error> {
    let mtu = u32::try_from(mtu).map_err(|_| Error::internal("invalid argument"))?;
    with_link(h, ifname, |l| h.set_mtu(l.index, mtu))
}

fn set_mac(h: &Handle, ifname: &str, mac: MacAddr) -> Result<(), Error> {
    with_link(h, ifname, |l| h.set_mac(l.index, mac))
}

fn set_txqlen(h: &Handle, ifname: &str, q: i64) -> Result<(), Error> {
    let q = u32::try_from(q).map_err(|_| Error::internal("invalid argument"))?;
    with_link(h, ifname, |l| h.set_txqlen(l.index, q))
}

/// prevResult is required (ADD and CHECK); parsed with the config's version.
fn required_prev_result(req: &Request) -> Result<CniResult, Error> {
    crate::plugin_kit::check_preamble::prev_result(req, "Required prevResult missing")
}

impl Plugin for Tuning {
    fn about(&self) -> &'static str {
        "CNI tuning plugin from cnibox"
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        refuse_repeated_sysctl_keys(req)?;
        let conf = load(req)?;
        check_allowlist(Path::new(ALLOWLIST), &conf.sysctl)?;
        let mut result = required_prev_result(req)?;
        // everything is validated before anything changes
        let files = conf
            .sysctl
            .iter()
            .map(|(k, v)| Ok((sysctl_file(k, &req.ifname)?, v.as_str())))
            .collect::<Result<Vec<_>, Error>>()?;
        let mac = conf.mac.as_deref().map(parse_mac).transpose()?;
        let ns = netns_open::open(&req.netns)?;
        let h = Handle::open(&ns)?;
        let mut rollback = Rollback::new();

        for (file, value) in &files {
            let before = read_sysctl(&ns, file).ok();
            write_sysctl(&ns, file, value)?;
            if let Some(before) = before {
                let (ns, file) = (&ns, file.clone());
                rollback.push(format!("restore sysctl {}", file.display()), move || {
                    write_sysctl(ns, &file, &before).map_err(|e| e.msg)
                });
            }
        }

        if conf.changes_link() {
            let link = lookup(&h, &req.ifname)?;
            let saved = Saved::of(&link, &conf);
            let path = saved_file(&conf.data_dir, &req.container_id, &req.ifname);
            save(&conf.data_dir, &path, &saved, &req.ifname)?;
            let (h, ifname) = (&h, req.ifname.clone());
            rollback.push(format!("restore {}", path.display()), move || {
                let r = saved.restore(h, &ifname).map_err(|e| e.msg);
                let _ = std::fs::remove_file(&path);
                r
            });
        }
        if let Some(mac) = mac {
            set_mac(&h, &req.ifname, mac)?;
            for i in result.interfaces.iter_mut().filter(|i| i.name == req.ifname) {
                i.mac = conf.mac.clone();
            }
        }
        if conf.promisc {
            with_link(&h, &req.ifname, |l| h.set_promisc(l.index, true))?;
        }
        if conf.mtu != 0 {
            set_mtu(&h, &req.ifname, conf.mtu)?;
        }
        if let Some(a) = conf.allmulti {
            with_link(&h, &req.ifname, |l| h.set_allmulti(l.index, a))?;
        }
        if let Some(q) = conf.txqlen {
            set_txqlen(&h, &req.ifname, q)?;
        }
        rollback.commit();
        result.cni_version = req.cni_version.clone();
        Ok(result)
    }

    /// Restores what ADD saved. Config errors fail as in the reference; anything else is
    /// logged and DEL succeeds (the reference ignores every restore failure).
    fn del(&self, req: &Request) -> Result<(), Error> {
        let data_dir = cniconf::del_config(
            "tuning",
            || load(req).map(|c| c.data_dir),
            || PathBuf::from(DEFAULT_DATA_DIR),
        );
        let path = saved_file(&data_dir, &req.container_id, &req.ifname);
        if let Err(e) = restore(req, &path) {
            eprintln!("cnibox tuning: DEL: {}", e.msg);
        }
        Ok(())
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        refuse_repeated_sysctl_keys(req)?;
        let conf = load(req)?;
        required_prev_result(req)?;
        let ns = netns_open::open(&req.netns)?;
        for (key, want) in &conf.sysctl {
            let file = sysctl_file(key, &req.ifname)?;
            let got = read_sysctl(&ns, &file)?;
            if *want != got {
                return Err(Error::internal(format!(
                    "Error: Tuning configured value of {} is {want}, current value is {got}",
                    file.display()
                )));
            }
        }
        let h = Handle::open(&ns)?;
        let ifname = &req.ifname;
        let link = h
            .link_by_name(ifname)?
            .ok_or_else(|| Error::internal(format!("Cannot find container link {ifname}")))?;
        let mac = link.mac.map(|m| m.to_string()).unwrap_or_default();
        if let Some(want) = &conf.mac {
            if parse_mac(want).ok() != link.mac {
                return Err(Error::internal(format!(
                    "Error: Tuning configured Ethernet of {ifname} is {want}, current value is {mac}"
                )));
            }
        }
        if conf.promisc != link.promisc {
            return Err(Error::internal(format!(
                "Error: Tuning link {ifname} configured promisc is {}, current value is {}",
                conf.promisc,
                u8::from(link.promisc)
            )));
        }
        if conf.mtu != 0 && conf.mtu != i64::from(link.mtu) {
            return Err(Error::internal(format!(
                "Error: Tuning configured MTU of {ifname} is {}, current value is {}",
                conf.mtu, link.mtu
            )));
        }
        if let Some(want) = conf.allmulti {
            if want != link.allmulti {
                return Err(Error::internal(format!(
                    "Error: Tuning configured all-multicast mode of {ifname} is {want}, current value is {}",
                    link.allmulti
                )));
            }
        }
        if let Some(want) = conf.txqlen {
            if want != i64::from(link.txqlen) {
                return Err(Error::internal(format!(
                    "Error: Tuning configured Transmit Queue Length of {ifname} is {want}, current value is {}",
                    link.txqlen
                )));
            }
        }
        Ok(())
    }
}

/// Writes the saved values (directory 0600 as the reference creates it; file 0600).
fn save(data_dir: &Path, path: &Path, saved: &Saved, ifname: &str) -> Result<(), Error> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if !data_dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o600)
            .create(data_dir)
            .map_err(|e| {
                Error::internal(format!(
                    "failed to create backup directory: {}",
                    go_path_mkdir(data_dir, &e)
                ))
            })?;
    }
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        f.write_all(saved.to_go_json().as_bytes())
    };
    write().map_err(|e| {
        Error::internal(format!(
            "failed to save file {ifname}.json: open {}: {}",
            path.display(),
            go_errno_text(&e)
        ))
    })
}

fn go_path_mkdir(dir: &Path, e: &std::io::Error) -> String {
    format!("mkdir {}: {}", dir.display(), go_errno_text(e))
}

/// DEL's work: nothing saved is done; a gone namespace or interface leaves nothing to
/// restore, so the file goes (the reference keeps it forever then).
fn restore(req: &Request, path: &Path) -> Result<(), Error> {
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(go_path_error("failed to open file", path, &e)),
    };
    let remove = || {
        std::fs::remove_file(path).map_err(|e| {
            Error::internal(format!(
                "failed to remove file {}: {}",
                path.display(),
                go_errno_text(&e)
            ))
        })
    };
    let Some(saved) = Saved::from_json(&data) else {
        eprintln!("cnibox tuning: DEL: {} is not a saved state; removed", path.display());
        return remove();
    };
    if req.netns.is_empty() {
        return Ok(()); // the namespace may still exist somewhere: keep the values for a later DEL
    }
    let Some(ns) = netns_open::open_for_del(&req.netns)? else {
        return remove();
    };
    let h = Handle::open(&ns)?;
    if h.link_by_name(&req.ifname)?.is_none() {
        return remove();
    }
    saved.restore(&h, &req.ifname)?;
    remove()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use serde_json::{json, Value};

    fn req(config: Value, cni_args: &str) -> Request {
        let mut r = Request::from_config(Command::Add, config);
        r.args = cni_args.into();
        r.ifname = "eth0".into();
        r
    }

    fn sysctls(keys: &[&str]) -> Vec<(String, String)> {
        keys.iter().map(|k| (k.to_string(), "1".to_string())).collect()
    }

    /// `check_allowlist` with an allowlist file holding `content`.
    fn allowlist_verdict(content: &[u8], keys: &[&str]) -> Result<(), String> {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("allowlist.conf");
        std::fs::write(&path, content).unwrap();
        check_allowlist(&path, &sysctls(keys)).map_err(|e| {
            assert_eq!(e.code, 999);
            e.msg
        })
    }

    #[test]
    fn allowlist_rules_as_the_reference() {
        let list = b"^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]*$\n\n  ^net\\.core\\.somaxconn$ \r\n";
        assert_eq!(
            allowlist_verdict(list, &["net.ipv4.conf.IFNAME.arp_filter", "net.core.somaxconn"]),
            Ok(())
        );
        // the key as written: `IFNAME` is not replaced before the check
        assert_eq!(
            allowlist_verdict(list, &["net.core.somaxconn", "net.ipv4.conf.eth0.arp_filter"]),
            Err(
                "Sysctl net.ipv4.conf.eth0.arp_filter is not allowed. Only the following sysctls are allowed: \
                 [^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]*$ ^net\\.core\\.somaxconn$]"
                    .into()
            )
        );
        // an empty allowlist allows nothing; no sysctl asks for nothing
        assert_eq!(
            allowlist_verdict(b" \n\n", &["net.core.somaxconn"]),
            Err("Sysctl net.core.somaxconn is not allowed. Only the following sysctls are allowed: []".into())
        );
        assert_eq!(allowlist_verdict(b"", &[]), Ok(()));
        // unanchored, like regexp.MatchString
        assert_eq!(allowlist_verdict(b"somaxconn", &["net.core.somaxconn"]), Ok(()));
    }

    #[test]
    fn allowlist_lines_are_compiled_when_reached() {
        let list = b"^net\\.core\\.\n(unclosed\n";
        assert_eq!(allowlist_verdict(list, &["net.core.somaxconn"]), Ok(()));
        assert_eq!(
            allowlist_verdict(list, &["net.ipv4.ip_forward"]),
            Err("error parsing regexp: missing closing ): `(unclosed`".into())
        );
        assert_eq!(
            allowlist_verdict(b"(?i)NET\n", &["net.core.somaxconn"]),
            Err("unsupported regexp syntax: flags and named groups `(?` (cnibox matches a subset of Go's regexp syntax)"
                .into())
        );
        assert_eq!(
            allowlist_verdict(b"net\xff\xfe.x\n", &["net.core.somaxconn"]),
            Err("error parsing regexp: invalid UTF-8: `\u{fffd}\u{fffd}.x`".into())
        );
    }

    #[test]
    fn allowlist_absent_or_unreadable() {
        let d = tempfile::tempdir().unwrap();
        let keys = sysctls(&["net.core.somaxconn"]);
        assert!(
            check_allowlist(&d.path().join("nope"), &keys).is_ok(),
            "absent: no restriction"
        );
        let e = check_allowlist(d.path(), &keys).unwrap_err();
        assert_eq!(e.msg, format!("read {}: is a directory", d.path().display()));
        let e = check_allowlist(&d.path().join("nope/allowlist.conf"), &keys);
        assert!(e.is_ok(), "a missing directory is no allowlist either");
        std::fs::write(d.path().join("file"), "").unwrap();
        let e = check_allowlist(&d.path().join("file/allowlist.conf"), &keys).unwrap_err();
        assert_eq!(
            e.msg,
            format!("open {}/file/allowlist.conf: not a directory", d.path().display())
        );
    }

    #[test]
    fn sysctl_keys_resolve_below_proc_sys_net() {
        assert_eq!(
            sysctl_file("net.ipv4.conf.IFNAME.arp_notify", "eth0.100").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/conf/eth0.100/arp_notify")
        );
        assert_eq!(
            sysctl_file("net/ipv6/conf/all/forwarding", "eth0").unwrap(),
            PathBuf::from("/proc/sys/net/ipv6/conf/all/forwarding")
        );
        for (key, shown) in [
            ("kernel.hostname", "kernel.hostname"),
            ("net", "net"),
            ("netfilter.x", "netfilter.x"),
            ("IFNAME.x", "eth0.x"),
        ] {
            assert_eq!(
                sysctl_file(key, "eth0").unwrap_err().msg,
                format!("invalid net sysctl key: \"{shown}\"")
            );
        }
        // dots become slashes first, so no ".." survives (and CNI_IFNAME cannot be ".."):
        // nothing escapes /proc/sys/net
        assert_eq!(
            sysctl_file("net/../../etc/passwd", "eth0").unwrap(),
            PathBuf::from("/proc/sys/net/etc/passwd")
        );
        assert_eq!(clean_path("/proc/sys/net/../../etc"), "/proc/etc");
    }

    #[test]
    fn saved_state_has_the_reference_layout() {
        let s = Saved {
            mac: "56:da:5e:95:f8:44".into(),
            promisc: Some(false),
            mtu: 1500,
            allmulti: Some(false),
            txqlen: None,
        };
        assert_eq!(
            s.to_go_json(),
            "{\n \"mac\": \"56:da:5e:95:f8:44\",\n \"promisc\": false,\n \"mtu\": 1500,\n \"allmulti\": false\n}"
        );
        assert_eq!(Saved::default().to_go_json(), "{}");
        let back = Saved::from_json(s.to_go_json().as_bytes()).unwrap();
        assert_eq!(back, s);
        let q = Saved::from_json(br#"{"TXQLEN": 0}"#).unwrap();
        assert_eq!(q.txqlen, Some(0));
    }

    #[test]
    fn mac_precedence_config_env_runtime_args() {
        let m = |config: Value, a: &str| load(&req(config, a)).unwrap().mac;
        let mut c = json!({"mac": "aa:aa:aa:aa:aa:01"});
        assert_eq!(m(c.clone(), "").as_deref(), Some("aa:aa:aa:aa:aa:01"));
        assert_eq!(
            m(c.clone(), "IgnoreUnknown=1;MAC=aa:aa:aa:aa:aa:02").as_deref(),
            Some("aa:aa:aa:aa:aa:02")
        );
        c["runtimeConfig"] = json!({"mac": "aa:aa:aa:aa:aa:03"});
        assert_eq!(
            m(c.clone(), "MAC=aa:aa:aa:aa:aa:02").as_deref(),
            Some("aa:aa:aa:aa:aa:03")
        );
        c["args"] = json!({"cni": {"mac": "aa:aa:aa:aa:aa:04"}});
        assert_eq!(
            m(c.clone(), "MAC=aa:aa:aa:aa:aa:02").as_deref(),
            Some("aa:aa:aa:aa:aa:04")
        );
        let e = load(&req(json!({}), "K8S_POD_NAME=x")).unwrap_err();
        assert_eq!(e.msg, r#"ARGS: unknown args ["K8S_POD_NAME=x"]"#);
    }

    #[test]
    fn args_cni_overrides_and_merges_sysctls() {
        let c = load(&req(
            json!({"sysctl": {"net.b": "1", "net.a": "2"}, "mtu": 1400, "promisc": true,
                   "args": {"cni": {"sysctl": {"net.b": "9", "net.c": "3"}, "mtu": 1300, "promisc": false,
                                    "allmulti": true, "txQLen": 0}}}),
            "",
        ))
        .unwrap();
        assert_eq!(
            c.sysctl,
            vec![
                ("net.a".into(), "2".into()),
                ("net.b".into(), "9".into()),
                ("net.c".into(), "3".into())
            ]
        );
        assert_eq!(
            (c.mtu, c.promisc, c.allmulti, c.txqlen),
            (1300, false, Some(true), Some(0))
        );
        // no top-level sysctl map: args.cni's still applies (the reference panics here)
        let c = load(&req(json!({"args": {"cni": {"sysctl": {"net.x": "1"}}}}), "")).unwrap();
        assert_eq!(c.sysctl, vec![("net.x".into(), "1".into())]);
        assert_eq!(c.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
    }

    #[test]
    fn type_errors_name_the_field() {
        let e = |c: Value| load(&req(c, "")).unwrap_err().msg;
        assert_eq!(
            e(json!({"mtu": "x"})),
            "failed to load netconf: json: cannot unmarshal string into Go struct field TuningConf.mtu of type int"
        );
        assert_eq!(
            e(json!({"sysctl": {"net.x": 1}})),
            "failed to load netconf: json: cannot unmarshal number into Go struct field TuningConf.sysctl of type string"
        );
        assert_eq!(
            e(json!({"allmulti": 1})),
            "failed to load netconf: json: cannot unmarshal number into Go struct field TuningConf.allmulti of type bool"
        );
    }

    #[test]
    fn macs_parse_like_go() {
        assert_eq!(parse_mac("0000.5e00.5301").unwrap().to_string(), "00:00:5e:00:53:01");
        assert_eq!(parse_mac("C2-11-22-33-44-55").unwrap().to_string(), "c2:11:22:33:44:55");
        assert_eq!(
            parse_mac("zz").unwrap_err().msg,
            "invalid args zz for MAC addr: address zz: invalid MAC address"
        );
    }
}
