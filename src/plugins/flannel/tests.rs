use super::subnet_env::{self, SubnetEnv};
use super::*;
use serde_json::json;

fn env(text: &str) -> Result<SubnetEnv, String> {
    subnet_env::parse(text, "/run/flannel/subnet.env").map_err(|e| e.msg)
}

const K3S_ENV: &str =
    "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n";

#[test]
fn subnet_env_as_flanneld_writes_it() {
    let e = env(K3S_ENV).unwrap();
    assert_eq!(e.networks, vec!["10.42.0.0/16".parse().unwrap()]);
    // net.ParseCIDR returns the network: the subnet's host bits go
    assert_eq!(e.subnet, Some("10.42.1.0/24".parse().unwrap()));
    assert_eq!((e.mtu, e.ipmasq, e.ip6_subnet), (1450, true, None));
    let dual = env("FLANNEL_NETWORK=10.42.0.0/16,10.42.0.0/16\r\nFLANNEL_IPV6_NETWORK=fd42::/56\nFLANNEL_SUBNET=10.42.2.1/24\nFLANNEL_IPV6_SUBNET=fd42:0:0:2::1/64\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=false\nOTHER=x\n").unwrap();
    assert_eq!(dual.networks.len(), 1, "a network written twice is one");
    assert_eq!(dual.ip6_subnet, Some("fd42:0:0:2::/64".parse().unwrap()));
    assert!(!dual.ipmasq);
}

#[test]
fn subnet_env_errors_are_flannels() {
    assert_eq!(
        env("FLANNEL_MTU=1450\n").unwrap_err(),
        "/run/flannel/subnet.env is missing FLANNEL_NETWORK, FLANNEL_IPV6_NETWORK, FLANNEL_SUBNET, FLANNEL_IPV6_SUBNET, FLANNEL_IPMASQ"
    );
    assert_eq!(
        env("FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\n").unwrap_err(),
        "/run/flannel/subnet.env is missing FLANNEL_MTU, FLANNEL_IPMASQ"
    );
    assert_eq!(
        env("FLANNEL_NETWORK=10.42.0.0\n").unwrap_err(),
        "invalid CIDR address: 10.42.0.0"
    );
    assert_eq!(
        env("FLANNEL_MTU=big\n").unwrap_err(),
        "strconv.ParseUint: parsing \"big\": invalid syntax"
    );
    assert_eq!(
        env("FLANNEL_MTU=4294967296\n").unwrap_err(),
        "strconv.ParseUint: parsing \"4294967296\": value out of range"
    );
    // flannel panics here; cnibox names the line
    assert_eq!(
        env("FLANNEL_MTU\n").unwrap_err(),
        "/run/flannel/subnet.env: FLANNEL_MTU has no value"
    );
}

fn conf(v: serde_json::Value) -> NetConf {
    let req = Request::from_config(Command::Add, v);
    load(&req).unwrap()
}

fn stored_bytes(config: serde_json::Value, env_text: &str) -> Result<String, String> {
    let e = env(env_text)?;
    delegate::build(&conf(config), &e)
        .map(|d| String::from_utf8(d.to_go_bytes()).unwrap())
        .map_err(|e| e.msg)
}

/// The bytes flannel's plugin stores (and hands its delegate) for k3s's default config: Go's
/// `json.Marshal` of the delegate map (keys sorted), the routes as `types.Route` writes them.
#[test]
fn k3s_default_config_gives_the_bytes_flannel_stores() {
    let k3s = json!({"cniVersion": "1.0.0", "name": "cbr0", "type": "flannel",
                     "delegate": {"hairpinMode": true, "forceAddress": true, "isDefaultGateway": true}});
    assert_eq!(
        stored_bytes(k3s, K3S_ENV).unwrap(),
        r#"{"cniVersion":"1.0.0","forceAddress":true,"hairpinMode":true,"ipMasq":false,"ipam":{"ranges":[[{"subnet":"10.42.1.0/24"}]],"routes":[{"dst":"10.42.0.0/16"}],"type":"host-local"},"isDefaultGateway":true,"isGateway":true,"mtu":1450,"name":"cbr0","type":"bridge"}"#
    );
}

#[test]
fn keys_given_in_the_delegate_win_and_ipam_is_completed() {
    let c = json!({"cniVersion": "0.4.0", "name": "n", "type": "flannel",
                   "delegate": {"type": "ptp", "ipMasq": true, "mtu": 1300, "isGateway": false},
                   "ipam": {"type": "static", "routes": [{"dst": "192.0.2.7/24", "gw": "10.42.1.1", "Priority": 5, "other": 1}],
                            "dataDir": "/x"},
                   "runtimeConfig": {"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}});
    let dual = "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_IPV6_NETWORK=fd42::/56\nFLANNEL_IPV6_SUBNET=fd42:0:0:1::1/64\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n";
    assert_eq!(
        stored_bytes(c, dual).unwrap(),
        concat!(
            r#"{"cniVersion":"0.4.0","ipMasq":true,"ipam":{"dataDir":"/x","ranges":[[{"subnet":"10.42.1.0/24"}],[{"subnet":"fd42:0:0:1::/64"}]],"#,
            r#""routes":[{"dst":"192.0.2.7/24","gw":"10.42.1.1","priority":5},{"dst":"10.42.0.0/16"},{"dst":"fd42::/56"}],"type":"static"},"#,
            r#""isGateway":false,"mtu":1300,"name":"n","#,
            r#""runtimeConfig":{"portMappings":[{"containerPort":80,"hostPort":8080,"protocol":"tcp"}]},"type":"ptp"}"#
        )
    );
}

#[test]
fn delegate_errors_are_flannels() {
    for (delegate, msg) in [
        (
            json!({"type": 5}),
            "'delegate' dictionary, if present, must have (string) 'type' field",
        ),
        (
            json!({"name": "x"}),
            "'delegate' dictionary must not have 'name' field, it'll be set by flannel",
        ),
        (
            json!({"ipam": {}}),
            "'delegate' dictionary must not have 'ipam' field, it'll be set by flannel",
        ),
    ] {
        let c = json!({"cniVersion": "1.0.0", "name": "n", "delegate": delegate});
        assert_eq!(stored_bytes(c, K3S_ENV).unwrap_err(), msg);
    }
    let c = json!({"cniVersion": "1.0.0", "name": "n", "ipam": {"routes": [{"dst": "nope"}]}});
    assert_eq!(
        stored_bytes(c, K3S_ENV).unwrap_err(),
        "failed to assemble Delegate IPAM: failed to read IPAM routes: failed to parse ipam.routes: invalid CIDR address: nope"
    );
}

#[test]
fn config_keys_are_read_with_gos_rules() {
    let c = conf(json!({"name": "n", "SubnetFile": "/tmp/s.env", "DATADIR": "/tmp/d", "Delegate": {"type": "bridge"}}));
    assert_eq!(c.subnet_file, PathBuf::from("/tmp/s.env"));
    assert_eq!(c.data_dir, PathBuf::from("/tmp/d"));
    assert!(c.delegate.is_some());
    let defaults = conf(json!({"name": "n"}));
    assert_eq!(defaults.subnet_file, PathBuf::from(DEFAULT_SUBNET_FILE));
    assert_eq!(defaults.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
    let e = load(&Request::from_config(Command::Add, json!({"name": "n", "delegate": 5})))
        .err()
        .unwrap();
    assert_eq!(
        e.msg,
        "failed to load netconf: json: cannot unmarshal number into Go struct field NetConf.delegate of type map[string]interface {}"
    );
}
