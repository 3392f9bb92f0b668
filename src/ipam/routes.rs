//! The `routes` of an IPAM config (the reference's `[]*types.Route`), read as host-local and
//! static read them. A route decodes through `types.Route`'s own JSON method, so Go names
//! every wrong type inside one after the list (`IPAMConfig.ipam.routes of type net.IP`).
use crate::cni::json::{self, Fields, Json};
use crate::cni::netaddr::parse_cidr;
use crate::cni::result::Route;
use crate::cni::Error;
use ipnetwork::IpNetwork;

/// Where Go's errors place every member of a route.
const PATH: &str = "IPAMConfig.ipam.routes";

/// A number member of a route (`mtu`, `advmss`, `priority`, `table`, `scope`).
fn opt_u32(route: &Fields, key: &str) -> Result<Option<u32>, Error> {
    json::value_field(route, key, "int", |v| match v {
        Json::Number(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| json::type_error(v, PATH, "int")),
        _ => Err(json::type_error(v, PATH, "int")),
    })
}

/// The destination, host bits cleared; an IPv4-mapped one is the IPv4 network.
fn destination(dst: &str) -> Result<IpNetwork, Error> {
    let net = parse_cidr(dst)?;
    let ip = net.ip().to_canonical();
    let prefix = match ip != net.ip() {
        true => net.prefix().saturating_sub(96),
        false => net.prefix(),
    };
    IpNetwork::new(ip, prefix)
        .map(crate::cni::netaddr::network_of)
        .map_err(|e| Error::internal(format!("invalid CIDR address: {dst}: {e}")))
}

fn route(r: &Json) -> Result<Route, Error> {
    if r.as_object().is_none() {
        return Err(json::type_error(r, PATH, "types.route"));
    }
    let r = &json::as_object(r, PATH)?;
    // a `types.IPNet`: Go runs its `UnmarshalJSON` for each value written, a `null` too,
    // which reads as "" and fails
    let mut dst = None;
    for v in r.written("dst", "types.IPNet") {
        match v {
            Json::Null => dst = Some(destination("")?),
            Json::String(s) => dst = Some(destination(s)?),
            other => return Err(json::type_error(other, PATH, "string")),
        }
    }
    let dst = match dst {
        Some(dst) => dst,
        None => destination("")?,
    };
    // `gw` is a `net.IP`: its wrong type is named so, before the text is read
    json::value_field(r, "gw", "net.IP", |v| {
        v.as_str().ok_or_else(|| json::type_error(v, PATH, "net.IP"))
    })?;
    // `scope` is read before `gw`, as this reader always has: its type error comes first.
    let scope = opt_u32(r, "scope")?;
    let mut route = Route::from_members(r, dst, |key| opt_u32(r, key))?;
    route.scope = scope
        .map(|s| u8::try_from(s).map_err(|_| Error::internal(format!("invalid route scope {s}"))))
        .transpose()?;
    Ok(route)
}

/// The `routes` member of an IPAM section; `null` entries are skipped.
pub fn read(ipam: &Fields) -> Result<Vec<Route>, Error> {
    json::opt_list(ipam, "routes", PATH, "[]*types.Route")?
        .into_iter()
        .flatten()
        .filter(|r| !r.is_null())
        .map(route)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn routes(v: serde_json::Value) -> Result<Vec<Route>, String> {
        let doc = Json::from(&json!({ "routes": v }));
        read(&json::as_object(&doc, "IPAMConfig").unwrap()).map_err(|e| e.msg)
    }

    #[test]
    fn every_field_is_kept() {
        let r = routes(json!([{"dst":"192.168.0.0/16"},null,
            {"dst":"10.9.0.5/16","gw":"10.1.2.9","mtu":1400,"table":100,"scope":253}]))
        .unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].dst.to_string(), r[0].gw), ("192.168.0.0/16".to_string(), None));
        assert_eq!(r[1].dst.to_string(), "10.9.0.0/16", "host bits cleared");
        assert_eq!(r[1].gw, Some("10.1.2.9".parse().unwrap()));
        assert_eq!((r[1].mtu, r[1].table, r[1].scope), (Some(1400), Some(100), Some(253)));
        let mapped = routes(json!([{"dst":"::ffff:10.0.0.0/104"}])).unwrap();
        assert_eq!(mapped[0].dst.to_string(), "10.0.0.0/8");
    }

    /// Go's decoder names the list for every wrong type inside a route, with the type it
    /// wanted there (what Debian's host-local and static say).
    #[test]
    fn wrong_types_are_named_as_the_reference_names_them() {
        let want =
            |t: &str, kind: &str| format!("json: cannot unmarshal {kind} into Go struct field {PATH} of type {t}");
        assert_eq!(routes(json!(5)).unwrap_err(), want("[]*types.Route", "number"));
        assert_eq!(routes(json!([5])).unwrap_err(), want("types.route", "number"));
        assert_eq!(routes(json!([{"dst":5}])).unwrap_err(), want("string", "number"));
        assert_eq!(
            routes(json!([{"dst":"10.0.0.0/8","gw":5}])).unwrap_err(),
            want("net.IP", "number")
        );
        assert_eq!(
            routes(json!([{"dst":"10.0.0.0/8","mtu":"x"}])).unwrap_err(),
            want("int", "string")
        );
        assert_eq!(routes(json!([{"dst":"x"}])).unwrap_err(), "invalid CIDR address: x");
        assert_eq!(
            routes(json!([{"dst":"10.0.0.0/8","gw":"x"}])).unwrap_err(),
            "invalid IP address: x"
        );
    }
}
