//! Answers the interface plugins share word for word (their CHECK preamble and IPAM
//! delegation come from the same `plugin_kit` pieces), asserted once here for each.
use super::Call;
use serde_json::{json, Value};

/// CHECK's failures before the plugin's own checks: no prevResult, another sandbox, another
/// MAC, an address that is not on the interface. `check` runs CHECK with a config and
/// returns its message (code 999); `conf` is the ADD's config, `result` its answer; the
/// interface in `netns` is `ifname` with MAC `mac`.
pub fn check_preamble_errors(
    check: impl Fn(&Value) -> String,
    conf: &Value,
    result: &Value,
    netns: &str,
    ifname: &str,
    mac: &str,
) {
    let with_prev = |prev: &Value| {
        let mut c = conf.clone();
        c["prevResult"] = prev.clone();
        c
    };
    assert_eq!(check(conf), "Required prevResult missing");
    let mut bad = result.clone();
    bad["interfaces"][0]["sandbox"] = json!("/run/netns/elsewhere");
    assert_eq!(
        check(&with_prev(&bad)),
        format!("Sandbox in prevResult  doesn't match configured netns: {netns}")
    );
    let mut bad = result.clone();
    bad["interfaces"][0]["mac"] = json!("02:00:00:00:00:99");
    assert_eq!(
        check(&with_prev(&bad)),
        format!("Interface {ifname} Mac 02:00:00:00:00:99 doesn't match container Mac: {mac}")
    );
    let mut bad = result.clone();
    let addr = bad["ips"][0]["address"].as_str().expect("an L3 result").to_string();
    let (ip, prefix) = addr.split_once('/').unwrap();
    let other = format!("{}.99/{prefix}", ip.rsplit_once('.').unwrap().0);
    bad["ips"][0]["address"] = json!(other);
    assert_eq!(
        check(&with_prev(&bad)),
        format!("Failed to match addr {other} on interface {ifname}")
    );
}

/// STATUS asks IPAM when there is an IPAM type, and nothing otherwise: `status` makes a
/// STATUS call of the applet.
pub fn status_delegates_to_ipam(status: impl Fn() -> Call, l3_conf: &Value, l2_conf: &Value) {
    status().config(l3_conf).run().success();
    let mut c = l3_conf.clone();
    c["ipam"]["type"] = json!("no-such-ipam");
    let msg = status().config(&c).run().failure(999);
    assert!(msg.starts_with("failed to find plugin \"no-such-ipam\""), "{msg}");
    status().config(l2_conf).run().success();
}
