//! The delegate config flannel's plugin builds (`cmdAdd`, `doCmdAdd`, `getDelegateIPAM`): the
//! config's `delegate` map with the node's subnet and flanneld's settings filled in where the
//! map does not say otherwise, and an IPAM section for the node's subnets.
use super::subnet_env::SubnetEnv;
use super::NetConf;
use crate::cni::json::{self, Json, Object};
use crate::cni::netaddr;
use crate::cni::result::Route;
use crate::cni::Error;

fn bad(msg: &str) -> Error {
    Error::internal(msg)
}

/// The delegate config for `conf` on a node whose flanneld wrote `env`. Keys given in
/// `delegate` win over every default; `name` and `ipam` are flannel's alone.
pub fn build(conf: &NetConf, env: &SubnetEnv) -> Result<Json, Error> {
    let mut d = conf.delegate.clone().unwrap_or_default();
    // flannel looks these up in the map as written (exact keys)
    if d.map_get("type").is_some_and(|t| t.as_str().is_none()) {
        return Err(bad(
            "'delegate' dictionary, if present, must have (string) 'type' field",
        ));
    }
    if d.map_get("name").is_some() {
        return Err(bad(
            "'delegate' dictionary must not have 'name' field, it'll be set by flannel",
        ));
    }
    if d.map_get("ipam").is_some() {
        return Err(bad(
            "'delegate' dictionary must not have 'ipam' field, it'll be set by flannel",
        ));
    }
    if let Some(rc) = &conf.runtime_config {
        d.insert("runtimeConfig", Json::Object(rc.clone()));
    }
    d.insert("name", Json::from(conf.name.as_str()));
    default(&mut d, "type", Json::from("bridge"));
    // when flanneld masquerades itself, the delegate must not
    default(&mut d, "ipMasq", Json::Bool(!env.ipmasq));
    default(&mut d, "mtu", Json::Number(env.mtu.into()));
    if d.map_get("type").and_then(Json::as_str) == Some("bridge") {
        default(&mut d, "isGateway", Json::Bool(true));
    }
    if !conf.cni_version.is_empty() {
        d.insert("cniVersion", Json::from(conf.cni_version.as_str()));
    }
    let ipam = ipam(conf, env).map_err(|e| e.context("failed to assemble Delegate IPAM"))?;
    d.insert("ipam", Json::Object(ipam));
    Ok(Json::Object(d))
}

/// Go's `if !hasKey(m, k) { m[k] = v }`.
fn default(map: &mut Object, key: &str, value: Json) {
    if map.map_get(key).is_none() {
        map.insert(key, value);
    }
}

/// `getDelegateIPAM`: the config's `ipam` map (type host-local unless it names one), its
/// `ranges` replaced by one range set per subnet of the node, its `routes` followed by one
/// route per cluster network.
fn ipam(conf: &NetConf, env: &SubnetEnv) -> Result<Object, Error> {
    let mut ipam = conf.ipam.clone().unwrap_or_default();
    default(&mut ipam, "type", Json::from("host-local"));
    let ranges: Vec<Json> = [env.subnet, env.ip6_subnet]
        .into_iter()
        .flatten()
        .map(|subnet| {
            let mut range = Object::new();
            range.insert("subnet", Json::from(subnet.to_string()));
            Json::Array(vec![Json::Object(range)])
        })
        .collect();
    ipam.insert("ranges", Json::Array(ranges));
    let mut routes = configured_routes(&ipam).map_err(|e| e.context("failed to read IPAM routes"))?;
    routes.extend(
        env.networks
            .iter()
            .chain(&env.ip6_networks)
            .map(|net| route_json(&Route::new(*net, None))),
    );
    ipam.insert("routes", Json::Array(routes));
    Ok(ipam)
}

/// The config's `ipam.routes`, decoded as `[]types.Route` and written again as Go writes a
/// `types.Route` (so a member it does not know is dropped and addresses are canonical).
fn configured_routes(ipam: &Object) -> Result<Vec<Json>, Error> {
    let Some(list) = ipam.map_get("routes") else {
        return Ok(vec![]);
    };
    let parse = |e: Error| e.context("failed to parse ipam.routes");
    let items = match list {
        Json::Null => return Ok(vec![]),
        Json::Array(items) => items,
        other => return Err(parse(json::type_error(other, "routes", "[]types.Route"))),
    };
    items
        .iter()
        .map(|item| {
            let o = json::as_object(item, "Route").map_err(parse)?;
            let dst = json::opt_str(&o, "dst", "route.dst")
                .map_err(parse)?
                .unwrap_or_default();
            let dst = netaddr::parse_cidr(dst).map_err(parse)?;
            let mut route = Route::from_members(&o, dst, |key| json::opt_uint::<u32>(&o, key, &format!("route.{key}")))
                .map_err(parse)?;
            route.scope = json::opt_uint::<u8>(&o, "scope", "route.scope").map_err(parse)?;
            Ok(route_json(&route))
        })
        .collect()
}

/// A `types.Route` as Go's `json.Marshal` writes it: `dst` as written (host bits kept),
/// then the members that are set.
fn route_json(r: &Route) -> Json {
    let mut o = Object::go_struct();
    o.push("dst", Json::from(r.dst.to_string()));
    if let Some(gw) = r.gw {
        o.push("gw", Json::from(gw.to_string()));
    }
    let number = |n: u32| Json::Number(n.into());
    for (key, value) in [
        ("mtu", r.mtu),
        ("advmss", r.advmss),
        ("priority", r.priority),
        ("table", r.table),
    ] {
        if let Some(n) = value {
            o.push(key, number(n));
        }
    }
    if let Some(s) = r.scope {
        o.push("scope", number(u32::from(s)));
    }
    Json::Object(o)
}
