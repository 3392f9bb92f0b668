//! Network configuration lists (`.conflist`), and single-plugin `.conf`/`.json` files wrapped
//! into a list, loaded and parsed as libcni does (`libcni/conf.go`).
use super::names;
use crate::cni::json::{self, Json};
use crate::cni::version;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// One plugin object of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConf {
    /// The object as written; requests are built from it.
    pub raw: Map<String, Value>,
    pub plugin_type: String,
    /// The plugin object's own `name`, if any (only used to describe the plugin in errors).
    pub name: Option<String>,
    pub capabilities: BTreeMap<String, bool>,
}

impl PluginConf {
    /// A plugin object of a list. libcni holds the list as a `map[string]interface{}` and
    /// decodes each plugin after marshalling it again, which is what `v` (a serde_json map:
    /// one entry per key, sorted) already is.
    pub fn from_value(v: &Value) -> Result<PluginConf, ConfError> {
        let raw = v
            .as_object()
            .ok_or_else(|| ConfError::Parse(format!("error parsing configuration: expected an object, got {v}")))?
            .clone();
        let decoded = decode_plugin(&Json::from(v))?;
        Ok(PluginConf { raw, ..decoded })
    }

    /// `type="bridge" name="x"` as libcni's `pluginDescription`.
    pub fn describe(&self) -> String {
        match &self.name {
            Some(n) => format!("type={:?} name={:?}", self.plugin_type, n),
            None => format!("type={:?}", self.plugin_type),
        }
    }
}

/// A parsed network configuration list.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkList {
    pub name: String,
    /// The selected version (from `cniVersion`/`cniVersions`); "" means 0.1.0.
    pub cni_version: String,
    pub disable_check: bool,
    pub disable_gc: bool,
    /// `loadOnlyInlinedPlugins`: when false, `<dir>/<name>/*.conf` plugins are appended.
    pub load_only_inlined: bool,
    pub plugins: Vec<PluginConf>,
    /// The list as it is cached: the file's bytes (or the wrapped `.conf`).
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfError {
    /// The content is not a valid list or plugin object.
    Parse(String),
    /// A file could not be read or parsed; the message names it.
    File {
        path: PathBuf,
        msg: String,
    },
    NoConfigs {
        dir: PathBuf,
    },
    NotFound {
        dir: PathBuf,
        name: String,
    },
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfError::Parse(m) => f.write_str(m),
            ConfError::File { path, msg } => write!(f, "{}: {msg}", path.display()),
            ConfError::NoConfigs { dir } => write!(f, "no net configurations found in {}", dir.display()),
            ConfError::NotFound { dir, name } => {
                write!(f, "no net configuration with name \"{name}\" in {}", dir.display())
            }
        }
    }
}

impl std::error::Error for ConfError {}

/// libcni's `NetworkPluginConfFromBytes`: the object decoded into a `types.PluginConf` with
/// Go's rules (`"Type"` is the type), which must name a type. `raw` is left empty.
fn decode_plugin(doc: &Json) -> Result<PluginConf, ConfError> {
    let go = |e: crate::cni::Error| ConfError::Parse(format!("error parsing configuration: {}", e.msg));
    let obj = json::as_object(doc, "PluginConf").map_err(go)?;
    let plugin_type = json::opt_str(&obj, "type", "PluginConf.type")
        .map_err(go)?
        .unwrap_or_default();
    if plugin_type.is_empty() {
        return Err(ConfError::Parse("error parsing configuration: missing 'type'".into()));
    }
    let name = json::opt_str(&obj, "name", "PluginConf.name")
        .map_err(go)?
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let mut capabilities = BTreeMap::new();
    for (k, v) in json::opt_map(&obj, "capabilities", "PluginConf.capabilities", "map[string]bool")
        .map_err(go)?
        .unwrap_or_default()
    {
        let supported = match v {
            Json::Bool(b) => *b,
            Json::Null => false,
            other => return Err(go(json::type_error(other, "PluginConf.capabilities", "bool"))),
        };
        capabilities.insert(k.to_string(), supported);
    }
    Ok(PluginConf {
        raw: Map::new(),
        plugin_type: plugin_type.to_string(),
        name,
        capabilities,
    })
}

/// The `name` and `cniVersion` of a single-plugin file, as libcni decodes them from its
/// bytes (Go's rules, in the order written); the file must be a valid plugin object.
fn single_plugin_header(bytes: &[u8]) -> Result<(Value, String, String), ConfError> {
    let parse = |e: String| ConfError::Parse(format!("error parsing configuration: {e}"));
    let doc = json::parse(bytes).map_err(|e| parse(e.to_string()))?;
    decode_plugin(&doc)?;
    let obj = json::as_object(&doc, "PluginConf").map_err(|e| parse(e.msg))?;
    let text = |k: &str| -> Result<String, ConfError> {
        Ok(json::opt_str(&obj, k, &format!("PluginConf.{k}"))
            .map_err(|e| parse(e.msg))?
            .unwrap_or_default()
            .to_string())
    };
    Ok((doc.to_value(), text("name")?, text("cniVersion")?))
}

/// The Go type of a value of libcni's `map[string]interface{}`, as its `%T` prints it.
fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn parse_err(msg: impl fmt::Display) -> ConfError {
    ConfError::Parse(format!("error parsing configuration list: {msg}"))
}

/// `true`/`false`, or (as newer libcni accepts) the strings "true"/"false" in any case.
fn read_bool(obj: &Map<String, Value>, key: &str) -> Result<bool, ConfError> {
    match obj.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) => match s.to_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(parse_err(format!("invalid value {other:?} for {key}"))),
        },
        Some(other) => Err(parse_err(format!("invalid type {} for {key}", go_kind(other)))),
    }
}

/// The version a list runs with: the highest of `cniVersions` ∪ {`cniVersion`} that this
/// runtime implements, or `cniVersion` alone when there is no `cniVersions`.
fn select_version(obj: &Map<String, Value>) -> Result<String, ConfError> {
    let version = match obj.get("cniVersion") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(parse_err(format!("invalid cniVersion type {}", go_kind(other)))),
    };
    let Some(raw) = obj.get("cniVersions") else {
        return Ok(version);
    };
    let list = raw
        .as_array()
        .ok_or_else(|| parse_err(format!("invalid type for cniVersions: {}", go_kind(raw))))?;
    let mut candidates = Vec::new();
    for (i, v) in list.iter().enumerate() {
        let s = v
            .as_str()
            .ok_or_else(|| parse_err(format!("invalid type for cniVersions index {i}: {}", go_kind(v))))?;
        let parsed =
            version::parse(s).map_err(|e| parse_err(format!("invalid cniVersions entry {s} at index {i}: {e}")))?;
        if parsed <= version::parse(version::CURRENT).expect("CURRENT parses") {
            candidates.push((parsed, s.to_string()));
        }
    }
    if !version.is_empty() {
        let parsed = version::parse(&version).map_err(|e| parse_err(format!("invalid cniVersion {version}: {e}")))?;
        if parsed <= version::parse(version::CURRENT).expect("CURRENT parses") {
            candidates.push((parsed, version.clone()));
        }
    }
    Ok(candidates
        .into_iter()
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|c| c.1)
        .unwrap_or(version))
}

impl NetworkList {
    /// Whether a plugin's IPAM section sets host-local's `releaseAfterReboot` to false: the
    /// network keeps what an earlier boot made, as the reference does, and the runtime keeps
    /// that boot's cached attachments as well.
    pub fn keeps_earlier_boots(&self) -> bool {
        // read as host-local reads it (Go's key matching), or `ReleaseAfterReboot: false`
        // would keep the cache of attachments host-local released
        self.plugins.iter().any(|p| {
            let conf = Json::from(&Value::Object(p.raw.clone()));
            let ipam = json::as_object(&conf, "Net").ok().and_then(|c| {
                json::opt_ptr_object(&c, "ipam", "Net.ipam", "allocator.IPAMConfig")
                    .ok()
                    .flatten()
            });
            ipam.and_then(|ipam| json::opt_bool(&ipam, "releaseAfterReboot", "IPAMConfig.ipam.releaseAfterReboot").ok())
                .flatten()
                == Some(false)
        })
    }

    /// Parse a conflist (`NetworkConfFromBytes`). libcni decodes the list into a
    /// `map[string]interface{}` and looks its keys up exactly (`"Name"` is no name there),
    /// which is what serde_json's map does; only the plugin objects are decoded into a
    /// struct, with Go's rules ([`decode_plugin`]).
    pub fn from_bytes(bytes: &[u8]) -> Result<NetworkList, ConfError> {
        let v: Value = serde_json::from_slice(bytes).map_err(parse_err)?;
        let obj = v
            .as_object()
            .ok_or_else(|| parse_err(format!("expected an object, got {}", go_kind(&v))))?;
        let name = match obj.get("name") {
            None => return Err(parse_err("no name")),
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(parse_err(format!("invalid name type {}", go_kind(other)))),
        };
        let cni_version = select_version(obj)?;
        let disable_check = read_bool(obj, "disableCheck")?;
        let disable_gc = read_bool(obj, "disableGC")?;
        let load_only_inlined = read_bool(obj, "loadOnlyInlinedPlugins")?;
        let raw_plugins = match obj.get("plugins") {
            // Newer spec: the plugins may all come from `<dir>/<name>/*.conf` (see `load`).
            None if !load_only_inlined => Vec::new(),
            None => return Err(parse_err("`loadOnlyInlinedPlugins` is true, and no 'plugins' key")),
            Some(Value::Array(a)) if a.is_empty() => return Err(parse_err("no plugins in list")),
            Some(Value::Array(a)) => a.clone(),
            Some(other) => return Err(parse_err(format!("invalid 'plugins' type {}", go_kind(other)))),
        };
        let mut plugins = Vec::with_capacity(raw_plugins.len());
        for (i, p) in raw_plugins.iter().enumerate() {
            let conf = PluginConf::from_value(p)
                .map_err(|e| ConfError::Parse(format!("failed to parse plugin config {i}: {e}")))?;
            plugins.push(conf);
        }
        Ok(NetworkList {
            name,
            cni_version,
            disable_check,
            disable_gc,
            load_only_inlined,
            plugins,
            bytes: bytes.to_vec(),
        })
    }

    /// Wrap a single-plugin config into a list (`ConfListFromConf`): the list keeps the
    /// plugin's `name` and `cniVersion`, and its bytes are the wrapped list.
    pub fn from_plugin_bytes(bytes: &[u8]) -> Result<NetworkList, ConfError> {
        let (v, name, cni_version) = single_plugin_header(bytes)?;
        let wrapped = serde_json::json!({ "name": name, "cniVersion": cni_version, "plugins": [v] });
        NetworkList::from_bytes(&serde_json::to_vec(&wrapped).expect("a JSON value serialises"))
    }
}

fn files_with(dir: &Path, extensions: &[&str]) -> Result<Vec<PathBuf>, ConfError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => {
            return Err(ConfError::File {
                path: dir.to_path_buf(),
                msg: format!("cannot read directory: {e}"),
            })
        }
    };
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().map(|t| !t.is_dir()).unwrap_or(false))
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| extensions.contains(&x))
        })
        .collect();
    crate::util::sort::sort(&mut files);
    Ok(files)
}

fn read_file(path: &Path) -> Result<Vec<u8>, ConfError> {
    std::fs::read(path).map_err(|e| ConfError::File {
        path: path.to_path_buf(),
        msg: format!("error reading: {e}"),
    })
}

fn in_file(path: &Path, e: ConfError) -> ConfError {
    ConfError::File {
        path: path.to_path_buf(),
        msg: e.to_string(),
    }
}

/// A `.conflist` file plus, unless `loadOnlyInlinedPlugins`, the plugin objects in
/// `<dir>/<name>/*.conf` (`NetworkConfFromFile`). When such files add plugins, the list's
/// bytes become the merged list, so the cache holds everything the chain ran.
fn list_from_file(path: &Path) -> Result<NetworkList, ConfError> {
    let mut list = NetworkList::from_bytes(&read_file(path)?).map_err(|e| in_file(path, e))?;
    if !list.load_only_inlined && names::network_name(&list.name).is_ok() {
        let plugin_dir = path.parent().unwrap_or(Path::new(".")).join(&list.name);
        let extra = files_with(&plugin_dir, &["conf"])?;
        if !extra.is_empty() {
            let mut merged: Map<String, Value> = serde_json::from_slice(&list.bytes).map_err(parse_err)?;
            let mut all: Vec<Value> = list.plugins.iter().map(|p| Value::Object(p.raw.clone())).collect();
            for file in &extra {
                let (v, _, _) = single_plugin_header(&read_file(file)?).map_err(|e| in_file(file, e))?;
                list.plugins
                    .push(PluginConf::from_value(&v).map_err(|e| in_file(file, e))?);
                all.push(v);
            }
            merged.insert("plugins".into(), Value::Array(all));
            list.bytes = serde_json::to_vec(&merged).expect("a JSON value serialises");
        }
    }
    if list.plugins.is_empty() {
        return Err(in_file(path, ConfError::Parse("no plugin configs found".into())));
    }
    Ok(list)
}

/// The first network in `dir`: the first `.conflist` in name order, else the first
/// `.conf`/`.json` file (wrapped into a list), as runtimes pick their default network.
pub fn first(dir: &Path) -> Result<NetworkList, ConfError> {
    if let Some(path) = files_with(dir, &["conflist"])?.first() {
        return list_from_file(path);
    }
    if let Some(path) = files_with(dir, &["conf", "json"])?.first() {
        return NetworkList::from_plugin_bytes(&read_file(path)?).map_err(|e| in_file(path, e));
    }
    Err(ConfError::NoConfigs { dir: dir.to_path_buf() })
}

/// Find network `name` in `dir` (`LoadConfList`): the `.conflist` files in name order, then
/// the `.conf`/`.json` single-plugin files. As in libcni, a file that does not parse is an
/// error, not skipped.
pub fn load(dir: &Path, name: &str) -> Result<NetworkList, ConfError> {
    let lists = files_with(dir, &["conflist"])?;
    for path in &lists {
        let list = list_from_file(path)?;
        if list.name == name {
            return Ok(list);
        }
    }
    let singles = files_with(dir, &["conf", "json"])?;
    if singles.is_empty() {
        return Err(if lists.is_empty() {
            ConfError::NoConfigs { dir: dir.to_path_buf() }
        } else {
            ConfError::NotFound {
                dir: dir.to_path_buf(),
                name: name.to_string(),
            }
        });
    }
    for path in &singles {
        let bytes = read_file(path)?;
        let (_, file_name, _) = single_plugin_header(&bytes).map_err(|e| in_file(path, e))?;
        if file_name == name {
            return NetworkList::from_plugin_bytes(&bytes).map_err(|e| in_file(path, e));
        }
    }
    Err(ConfError::NotFound {
        dir: dir.to_path_buf(),
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> Result<NetworkList, ConfError> {
        NetworkList::from_bytes(s.as_bytes())
    }

    #[test]
    fn parses_a_list() {
        let l = list(
            r#"{"cniVersion":"1.0.0","name":"n","disableCheck":"TRUE","plugins":[{"type":"a","capabilities":{"ips":true}},{"type":"b","name":"x"}]}"#,
        )
        .unwrap();
        assert_eq!(
            (l.name.as_str(), l.cni_version.as_str(), l.disable_check, l.disable_gc),
            ("n", "1.0.0", true, false)
        );
        assert_eq!(l.plugins[0].capabilities.get("ips"), Some(&true));
        assert_eq!(l.plugins[0].describe(), "type=\"a\"");
        assert_eq!(l.plugins[1].describe(), "type=\"b\" name=\"x\"");
    }

    /// Regression: the runtime looked the key up exactly, so `IPAM.ReleaseAfterReboot: false`
    /// kept host-local's earlier-boot reservations but not the cached attachments.
    #[test]
    fn keeping_earlier_boots_is_read_with_gos_key_matching() {
        let keeps = |ipam: &str| {
            list(&format!(
                r#"{{"cniVersion":"1.0.0","name":"n","plugins":[{{"type":"bridge"}},{{"type":"x",{ipam}}}]}}"#
            ))
            .unwrap()
            .keeps_earlier_boots()
        };
        assert!(keeps(r#""ipam":{"releaseAfterReboot":false}"#));
        assert!(keeps(r#""IPAM":{"ReleaseAfterREBOOT":false}"#));
        assert!(keeps(
            r#""ipam":{"releaseAfterReboot":true,"releaseafterreboot":false}"#
        ));
        assert!(!keeps(
            r#""ipam":{"releaseAfterReboot":false,"releaseafterreboot":true}"#
        ));
        assert!(!keeps(r#""ipam":{"type":"host-local"}"#));
        assert!(!keeps(r#""ipam":{"releaseAfterReboot":"false"}"#));
    }

    #[test]
    fn cni_versions_picks_the_highest_supported() {
        let l = list(
            r#"{"cniVersion":"0.4.0","cniVersions":["1.0.0","9.0.0","0.3.1"],"name":"n","plugins":[{"type":"a"}]}"#,
        )
        .unwrap();
        assert_eq!(l.cni_version, "1.0.0");
        let l = list(r#"{"cniVersions":["1.1.0","1.0.0"],"name":"n","plugins":[{"type":"a"}]}"#).unwrap();
        assert_eq!(l.cni_version, "1.1.0");
        let e = list(r#"{"cniVersions":["x"],"name":"n","plugins":[{"type":"a"}]}"#).unwrap_err();
        assert!(e.to_string().contains("invalid cniVersions entry x at index 0"), "{e}");
    }

    #[test]
    fn rejects_bad_lists() {
        let cases = [
            (
                r#"{"plugins":[{"type":"a"}]}"#,
                "error parsing configuration list: no name",
            ),
            (
                r#"{"name":"n","plugins":[]}"#,
                "error parsing configuration list: no plugins in list",
            ),
            (
                r#"{"name":"n","plugins":[{"foo":1}]}"#,
                "failed to parse plugin config 0: error parsing configuration: missing 'type'",
            ),
            (
                r#"{"name":"n","disableGC":"maybe","plugins":[{"type":"a"}]}"#,
                "error parsing configuration list: invalid value \"maybe\" for disableGC",
            ),
            (
                r#"{"name":"n","cniVersion":1,"plugins":[{"type":"a"}]}"#,
                "error parsing configuration list: invalid cniVersion type float64",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(list(text).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn wraps_a_single_plugin_config() {
        let l = NetworkList::from_plugin_bytes(br#"{"name":"s","cniVersion":"0.3.1","type":"bridge","zz":1}"#).unwrap();
        assert_eq!(l.plugins.len(), 1);
        assert_eq!(l.cni_version, "0.3.1");
        assert_eq!(
            String::from_utf8(l.bytes).unwrap(),
            r#"{"cniVersion":"0.3.1","name":"s","plugins":[{"cniVersion":"0.3.1","name":"s","type":"bridge","zz":1}]}"#
        );
    }

    #[test]
    fn appends_plugins_from_the_network_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("a.conflist"),
            r#"{"name":"a","cniVersion":"1.1.0","plugins":[{"type":"x"}]}"#,
        )
        .unwrap();
        std::fs::write(d.path().join("b.conflist"), r#"{"name":"b","cniVersion":"1.1.0"}"#).unwrap();
        std::fs::write(
            d.path().join("c.conflist"),
            r#"{"name":"c","cniVersion":"1.1.0","loadOnlyInlinedPlugins":true,"plugins":[{"type":"x"}]}"#,
        )
        .unwrap();
        for net in ["a", "b", "c"] {
            std::fs::create_dir(d.path().join(net)).unwrap();
            std::fs::write(d.path().join(net).join("20-z.conf"), r#"{"type":"z"}"#).unwrap();
            std::fs::write(d.path().join(net).join("10-y.conf"), r#"{"type":"y"}"#).unwrap();
            std::fs::write(d.path().join(net).join("ignored.json"), r#"{"type":"w"}"#).unwrap();
        }
        let types = |l: &NetworkList| l.plugins.iter().map(|p| p.plugin_type.clone()).collect::<Vec<_>>();
        let a = load(d.path(), "a").unwrap();
        assert_eq!(types(&a), ["x", "y", "z"]);
        // The cached bytes hold the merged list.
        assert_eq!(types(&NetworkList::from_bytes(&a.bytes).unwrap()), ["x", "y", "z"]);
        assert_eq!(types(&load(d.path(), "b").unwrap()), ["y", "z"]);
        assert_eq!(types(&load(d.path(), "c").unwrap()), ["x"]);
        std::fs::remove_dir_all(d.path().join("b")).unwrap();
        let e = load(d.path(), "b").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: no plugin configs found", d.path().join("b.conflist").display())
        );
    }

    #[test]
    fn loads_by_name_lists_first() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("10-a.conflist"),
            r#"{"name":"a","cniVersion":"1.0.0","plugins":[{"type":"x"}]}"#,
        )
        .unwrap();
        std::fs::write(
            d.path().join("20-b.conf"),
            r#"{"name":"b","cniVersion":"1.0.0","type":"y"}"#,
        )
        .unwrap();
        std::fs::write(
            d.path().join("30-a.json"),
            r#"{"name":"a","cniVersion":"1.0.0","type":"z"}"#,
        )
        .unwrap();
        assert_eq!(load(d.path(), "a").unwrap().plugins[0].plugin_type, "x");
        assert_eq!(load(d.path(), "b").unwrap().plugins[0].plugin_type, "y");
        let e = load(d.path(), "c").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("no net configuration with name \"c\" in {}", d.path().display())
        );
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            load(empty.path(), "a").unwrap_err(),
            ConfError::NoConfigs {
                dir: empty.path().to_path_buf()
            }
        );
    }
}
