//! Go's `net` parsing, as the reference's JSON decoding uses it: one reader each for
//! `net.ParseIP`, `net.ParseCIDR` and a `net.IP` member, shared by results and IPAM configs
//! so that both accept the same text and word their errors the same; and `net.ParseMAC`.
use super::json::{self, Fields, Json};
use super::Error;
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// Go's `net.ParseIP` followed by canonicalisation (`::ffff:a.b.c.d` is `a.b.c.d`, as
/// `To4()` treats it); `None` where Go returns nil.
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    s.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

/// `net.IP`'s text decoding: `""` is no address, anything else must parse.
pub fn parse_ip_text(s: &str) -> Result<Option<IpAddr>, Error> {
    if s.is_empty() {
        return Ok(None);
    }
    parse_ip(s)
        .map(Some)
        .ok_or_else(|| Error::internal(format!("invalid IP address: {s}")))
}

/// A `net.IP` member (`gateway`, `gw`, `rangeStart`, …): absent and `""` are unset. A
/// `net.IP` is a slice, so a `null` written last makes it nil whatever came before; each
/// string written is parsed, as Go runs `UnmarshalText` for each.
pub fn opt_ip(obj: &Fields, key: &str, path: &str) -> Result<Option<IpAddr>, Error> {
    let mut ip = None;
    for v in obj.written(key, "net.IP") {
        ip = match v {
            Json::Null => None,
            Json::String(s) => parse_ip_text(s)?,
            other => return Err(json::type_error(other, path, "net.IP")),
        };
    }
    Ok(ip)
}

/// Go's `net.ParseCIDR` for an address that keeps its host bits (`10.1.2.2/24`) and the
/// family it was written in (`::ffff:10.0.0.0/104` stays v6); the error text is Go's.
pub fn parse_cidr(s: &str) -> Result<IpNetwork, Error> {
    let bad = || Error::internal(format!("invalid CIDR address: {s}"));
    let (ip, prefix) = s.split_once('/').ok_or_else(bad)?;
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let prefix: u8 = prefix.parse().map_err(|_| bad())?;
    IpNetwork::new(ip, prefix).map_err(|_| bad())
}

/// The network an address lies in (host bits cleared): routes, masquerade rules and CHECK
/// name networks.
pub fn network_of(net: IpNetwork) -> IpNetwork {
    IpNetwork::new(net.network(), net.prefix()).unwrap_or(net)
}

/// A Go `net.IPNet` (an address and a mask of bytes) as a network: the address
/// canonicalised (a v4-mapped one is v4), and a 16-byte mask over an IPv4 address counted
/// with its last 4 bytes, as Go's IPNet does. `None` when the mask is not a prefix mask
/// (ones, then zeros) as long as the address's family (4 or 16 bytes).
pub fn ipnet_of(ip: IpAddr, mask: &[u8]) -> Option<IpNetwork> {
    let ip = ip.to_canonical();
    let v4 = ip.is_ipv4();
    let bits = if v4 && mask.len() == 16 { &mask[12..] } else { mask };
    if bits.len() != if v4 { 4 } else { 16 } {
        return None;
    }
    IpNetwork::new(ip, prefix_of_mask(bits)?).ok()
}

/// The length of a mask of ones followed by zeros; `None` for any other mask.
fn prefix_of_mask(mask: &[u8]) -> Option<u8> {
    let bits = mask.iter().flat_map(|b| (0..8).rev().map(move |i| b >> i & 1 == 1));
    let mut ones = 0u8;
    let mut ended = false;
    for set in bits {
        match (set, ended) {
            (true, true) => return None,
            (true, false) => ones += 1,
            (false, _) => ended = true,
        }
    }
    Some(ones)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 bytes written as `aa:bb:…`, `aa-bb-…` or `aabb.ccdd.…`,
/// any case. The error is Go's `address <s>: invalid MAC address`.
pub fn parse_mac(s: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("address {s}: invalid MAC address");
    let b = s.as_bytes();
    let hex2 = |at: usize| -> Option<u8> {
        let pair = b.get(at..at + 2)?;
        u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16)
            .ok()
            .filter(|_| pair.iter().all(u8::is_ascii_hexdigit))
    };
    if b.len() < 14 {
        return Err(bad());
    }
    let (group, sep) = match (b[2], b[4]) {
        (b':' | b'-', _) => (1, b[2]),
        (_, b'.') => (2, b'.'),
        _ => return Err(bad()),
    };
    // a group is `group` bytes as 2*group hex digits, then the separator (none at the end)
    let stride = 2 * group + 1;
    if (b.len() + 1) % stride != 0 {
        return Err(bad());
    }
    let n = group * (b.len() + 1) / stride;
    if ![6, 8, 20].contains(&n) {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(n);
    for g in 0..n / group {
        let at = g * stride;
        if at + 2 * group < b.len() && b[at + 2 * group] != sep {
            return Err(bad());
        }
        for i in 0..group {
            out.push(hex2(at + 2 * i).ok_or_else(bad)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mac_addresses_parse_as_go_parses_them() {
        let six = vec![0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee];
        assert_eq!(parse_mac("02:aa:bb:cc:dd:ee").unwrap(), six);
        assert_eq!(parse_mac("02-AA-bb-CC-dd-EE").unwrap(), six);
        assert_eq!(parse_mac("02aa.bbcc.ddee").unwrap(), six);
        assert_eq!(parse_mac("00:00:00:00:fe:80:00:00").unwrap().len(), 8);
        assert_eq!(
            parse_mac("00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01")
                .unwrap()
                .len(),
            20
        );
        for bad in [
            "zz",
            "02:aa:bb:cc:dd",
            "02:aa:bb:cc:dd:ee:",
            "02:aa-bb:cc:dd:ee",
            "02:aa:bb:cc:dd:eg",
            "0:aa:bb:cc:dd:eee",
            "02aa.bbcc.ddee.",
            "02:aa:bb:cc:dd:ee:ff",
            "+2:aa:bb:cc:dd:ee",
        ] {
            assert_eq!(
                parse_mac(bad),
                Err(format!("address {bad}: invalid MAC address")),
                "{bad}"
            );
        }
    }

    #[test]
    fn masks_are_prefixes_or_nothing() {
        assert_eq!(prefix_of_mask(&[255, 255, 255, 0]), Some(24));
        assert_eq!(prefix_of_mask(&[255, 255, 128, 0]), Some(17));
        assert_eq!(prefix_of_mask(&[0, 0, 0, 0]), Some(0));
        assert_eq!(prefix_of_mask(&[255, 0, 255, 0]), None);
        assert_eq!(prefix_of_mask(&[254, 255, 0, 0]), None);
    }

    #[test]
    fn an_ipnet_is_a_prefix_mask_of_its_family() {
        let v4: IpAddr = "10.1.2.3".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        let v6: IpAddr = "fd00::1".parse().unwrap();
        let net = |s: &str| Some(s.parse::<IpNetwork>().unwrap());
        assert_eq!(ipnet_of(v4, &[255, 255, 255, 0]), net("10.1.2.3/24"));
        let mut long = [255u8; 16];
        long[15] = 0;
        // a 16-byte mask over IPv4 counts with its last 4 bytes; a mapped address is v4
        assert_eq!(ipnet_of(v4, &long), net("10.1.2.3/24"));
        assert_eq!(ipnet_of(mapped, &[255, 255, 0, 0]), net("10.1.2.3/16"));
        assert_eq!(ipnet_of(v6, &long), net("fd00::1/120"));
        assert_eq!(ipnet_of(v6, &[255, 255, 255, 0]), None);
        assert_eq!(ipnet_of(v4, &[255, 255, 255]), None);
        assert_eq!(ipnet_of(v4, &[]), None);
        assert_eq!(ipnet_of(v4, &[255, 0, 255, 0]), None);
        assert_eq!(ipnet_of(v4, &[255; 40]), None);
    }

    #[test]
    fn cidr_keeps_host_bits_and_family() {
        let n = parse_cidr("10.1.2.2/24").unwrap();
        assert_eq!((n.ip().to_string(), n.prefix()), ("10.1.2.2".into(), 24));
        assert!(parse_cidr("::ffff:10.0.0.0/104").unwrap().is_ipv6());
        for bad in [
            "",
            "10.1.2.0",
            "10.1.2.0/33",
            "10.1.2.0/+1",
            "10.1.2.0/0024",
            "x/8",
            "::/129",
        ] {
            assert_eq!(parse_cidr(bad).unwrap_err().msg, format!("invalid CIDR address: {bad}"));
        }
    }

    #[test]
    fn ip_text_empty_is_unset_and_mapped_is_v4() {
        assert_eq!(parse_ip_text("").unwrap(), None);
        assert_eq!(
            parse_ip_text("::ffff:10.0.0.1").unwrap(),
            Some("10.0.0.1".parse().unwrap())
        );
        assert_eq!(parse_ip_text("bogus").unwrap_err().msg, "invalid IP address: bogus");
        assert_eq!(parse_ip(""), None);
        let doc = json::Json::from(json!({"a": null, "b": "", "c": "10.0.0.1", "d": 1}));
        let o = json::as_object(&doc, "X").unwrap();
        assert_eq!(opt_ip(&o, "a", "X.a").unwrap(), None);
        assert_eq!(opt_ip(&o, "b", "X.b").unwrap(), None);
        assert_eq!(opt_ip(&o, "missing", "X.m").unwrap(), None);
        assert!(opt_ip(&o, "c", "X.c").unwrap().is_some());
        assert!(opt_ip(&o, "d", "X.d").unwrap_err().msg.contains("X.d"));
    }

    /// Regression: a `null` written after an address left the address (a value field's
    /// rule), but a `net.IP` is a slice, which Go sets to nil: host-local allocated from
    /// `rangeStart` where the reference started at the subnet's first address.
    #[test]
    fn a_null_written_last_makes_a_net_ip_nil() {
        let ip = |text: &str| {
            let doc = json::parse(text.as_bytes()).unwrap();
            opt_ip(&json::as_object(&doc, "X").unwrap(), "gw", "X.gw").map_err(|e| e.msg)
        };
        assert_eq!(ip(r#"{"gw": "10.0.0.1", "GW": null}"#), Ok(None));
        assert_eq!(
            ip(r#"{"GW": null, "gw": "10.0.0.1"}"#),
            Ok(Some("10.0.0.1".parse().unwrap()))
        );
        // each address written is parsed, as Go unmarshals each
        assert_eq!(
            ip(r#"{"gw": "bogus", "GW": "10.0.0.1"}"#),
            Err("invalid IP address: bogus".into())
        );
    }
}
