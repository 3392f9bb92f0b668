//! One address range (`{subnet, rangeStart, rangeEnd, gateway}`): canonical defaults,
//! validation with the reference messages, membership and overlap.
use crate::cni::netaddr;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A range failed validation; the message is the reference's, word for word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeError(pub String);

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `::ffff:a.b.c.d` is the IPv4 address `a.b.c.d`, as Go's `To4()` treats it: the
/// reservation file name and every comparison use the canonical form.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

pub fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4) as u128,
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(v: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from(v as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(v))
    }
}

/// The address after `ip` (wrapping at the top of the family, like Go's `ip.NextIP`).
pub fn next_ip(ip: IpAddr) -> IpAddr {
    let v4 = ip.is_ipv4();
    let max = if v4 { u32::MAX as u128 } else { u128::MAX };
    let v = to_u128(ip);
    from_u128(if v == max { 0 } else { v + 1 }, v4)
}

/// A subnet as written in the config (`types.IPNet`): the address keeps its host bits and
/// the mask keeps the family it was written in (`::ffff:10.0.0.0/104` has a v6 mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSubnet {
    pub ip: IpAddr,
    pub prefix: u8,
    pub mask_bits: u8,
}

impl RawSubnet {
    /// Go's `net.ParseCIDR`; the error text is Go's.
    pub fn parse(s: &str) -> Result<RawSubnet, RangeError> {
        let net = netaddr::parse_cidr(s).map_err(|e| RangeError(e.msg))?;
        let mask_bits = if net.is_ipv4() { 32 } else { 128 };
        Ok(RawSubnet {
            ip: net.ip(),
            prefix: net.prefix(),
            mask_bits,
        })
    }
}

/// A range as the config states it, before defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawRange {
    pub subnet: Option<RawSubnet>,
    pub range_start: Option<IpAddr>,
    pub range_end: Option<IpAddr>,
    pub gateway: Option<IpAddr>,
}

/// A validated range: every address canonical and of the subnet's family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// The network address.
    pub network: IpAddr,
    pub prefix: u8,
    /// First allocatable address, inclusive.
    pub start: IpAddr,
    /// Last allocatable address, inclusive.
    pub end: IpAddr,
    /// Never handed out; returned as the result's `gateway`.
    pub gateway: IpAddr,
}

fn family_bits(ip: IpAddr) -> u32 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

fn mask(prefix: u8, bits: u32) -> u128 {
    if prefix == 0 {
        0
    } else {
        let all = if bits == 32 { u32::MAX as u128 } else { u128::MAX };
        all & !((1u128 << (bits - prefix as u32)) - 1) & all
    }
}

/// Membership as the reference's `Range.Contains`: same family, inside the subnet, and not
/// before `start` / after `end` when those are known.
fn contains_raw(network: IpAddr, prefix: u8, start: Option<IpAddr>, end: Option<IpAddr>, ip: IpAddr) -> bool {
    let ip = canonical(ip);
    if ip.is_ipv4() != network.is_ipv4() {
        return false;
    }
    let m = mask(prefix, family_bits(ip));
    if to_u128(ip) & m != to_u128(network) & m {
        return false;
    }
    if start.is_some_and(|s| to_u128(ip) < to_u128(canonical(s))) {
        return false;
    }
    if end.is_some_and(|e| to_u128(ip) > to_u128(canonical(e))) {
        return false;
    }
    true
}

impl Range {
    /// Fill in the defaults and validate, in the reference's order and with its messages.
    pub fn canonicalize(raw: &RawRange) -> Result<Range, RangeError> {
        let subnet = raw.subnet.ok_or_else(|| RangeError("IP <nil> not v4 nor v6".into()))?;
        let ip = canonical(subnet.ip);
        if subnet.prefix > subnet.mask_bits.saturating_sub(2) {
            // Go prints a v4 address with a v6 mask as the v4 network with the mask's tail
            let shown = if ip.is_ipv4() && subnet.mask_bits == 128 {
                subnet.prefix.saturating_sub(96)
            } else {
                subnet.prefix
            };
            return Err(RangeError(format!("Network {ip}/{shown} too small to allocate from")));
        }
        if family_bits(ip) != subnet.mask_bits as u32 {
            return Err(RangeError("IPNet IP and Mask version mismatch".into()));
        }
        let bits = family_bits(ip);
        let network = from_u128(to_u128(ip) & mask(subnet.prefix, bits), ip.is_ipv4());
        if network != ip {
            return Err(RangeError(format!(
                "Network has host bits set. For a subnet mask of length {} the network address is {network}",
                subnet.prefix
            )));
        }
        let cidr = format!("{network}/{}", subnet.prefix);
        let gateway = raw.gateway.map(canonical).unwrap_or_else(|| next_ip(network));
        let start = match raw.range_start.map(canonical) {
            Some(s) => {
                if !contains_raw(network, subnet.prefix, None, raw.range_end, s) {
                    return Err(RangeError(format!("RangeStart {s} not in network {cidr}")));
                }
                s
            }
            None => next_ip(network),
        };
        let end = match raw.range_end.map(canonical) {
            Some(e) => {
                if !contains_raw(network, subnet.prefix, Some(start), None, e) {
                    return Err(RangeError(format!("RangeEnd {e} not in network {cidr}")));
                }
                e
            }
            None => last_ip(network, subnet.prefix),
        };
        Ok(Range {
            network,
            prefix: subnet.prefix,
            start,
            end,
            gateway,
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        contains_raw(self.network, self.prefix, Some(self.start), Some(self.end), ip)
    }

    pub fn is_ipv4(&self) -> bool {
        self.network.is_ipv4()
    }

    /// Either range's start or end lies inside the other (families must match).
    pub fn overlaps(&self, other: &Range) -> bool {
        if self.is_ipv4() != other.is_ipv4() {
            return false;
        }
        self.contains(other.start) || self.contains(other.end) || other.contains(self.start) || other.contains(self.end)
    }
}

/// The last address of a subnet; for IPv4 the one before the broadcast.
fn last_ip(network: IpAddr, prefix: u8) -> IpAddr {
    let bits = family_bits(network);
    let all = if bits == 32 { u32::MAX as u128 } else { u128::MAX };
    let last = to_u128(network) | (!mask(prefix, bits) & all);
    from_u128(if network.is_ipv4() { last - 1 } else { last }, network.is_ipv4())
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn raw(subnet: &str) -> RawRange {
        RawRange {
            subnet: Some(RawSubnet::parse(subnet).unwrap()),
            ..Default::default()
        }
    }

    fn canon(r: RawRange) -> Result<Range, String> {
        Range::canonicalize(&r).map_err(|e| e.0)
    }

    #[test]
    fn sane_defaults_v4_24_and_25() {
        let r = canon(raw("192.0.2.0/24")).unwrap();
        assert_eq!(
            (r.start, r.end, r.gateway),
            (ip("192.0.2.1"), ip("192.0.2.254"), ip("192.0.2.1"))
        );
        let r = canon(raw("192.0.2.0/25")).unwrap();
        assert_eq!((r.start, r.end), (ip("192.0.2.1"), ip("192.0.2.126")));
        assert_eq!(r.to_string(), "192.0.2.1-192.0.2.126");
    }

    #[test]
    fn sane_defaults_v6() {
        let r = canon(raw("2001:db8:1::/64")).unwrap();
        assert_eq!(r.start, ip("2001:db8:1::1"));
        assert_eq!(r.end, ip("2001:db8:1::ffff:ffff:ffff:ffff"));
        assert_eq!(r.gateway, ip("2001:db8:1::1"));
    }

    #[test]
    fn rejects_host_bits() {
        assert_eq!(
            canon(raw("192.0.2.12/24")).unwrap_err(),
            "Network has host bits set. For a subnet mask of length 24 the network address is 192.0.2.0"
        );
        assert_eq!(
            canon(raw("2001:db8:1::1/64")).unwrap_err(),
            "Network has host bits set. For a subnet mask of length 64 the network address is 2001:db8:1::"
        );
    }

    #[test]
    fn rejects_too_small_networks() {
        assert_eq!(
            canon(raw("10.1.2.0/31")).unwrap_err(),
            "Network 10.1.2.0/31 too small to allocate from"
        );
        assert_eq!(
            canon(raw("10.1.2.0/32")).unwrap_err(),
            "Network 10.1.2.0/32 too small to allocate from"
        );
        assert_eq!(
            canon(raw("2001:db8::/127")).unwrap_err(),
            "Network 2001:db8::/127 too small to allocate from"
        );
        assert!(canon(raw("10.1.2.0/30")).is_ok());
    }

    #[test]
    fn rejects_mapped_v4_with_v6_mask() {
        assert_eq!(
            canon(raw("::ffff:10.1.2.0/120")).unwrap_err(),
            "IPNet IP and Mask version mismatch"
        );
    }

    #[test]
    fn missing_subnet_is_the_nil_ip_error() {
        assert_eq!(canon(RawRange::default()).unwrap_err(), "IP <nil> not v4 nor v6");
    }

    #[test]
    fn cidr_parse_errors() {
        assert_eq!(
            RawSubnet::parse("10.1.2.0").unwrap_err().0,
            "invalid CIDR address: 10.1.2.0"
        );
        assert_eq!(
            RawSubnet::parse("10.1.2.0/33").unwrap_err().0,
            "invalid CIDR address: 10.1.2.0/33"
        );
        assert_eq!(RawSubnet::parse("").unwrap_err().0, "invalid CIDR address: ");
    }

    #[test]
    fn range_start_and_end_must_be_in_the_subnet() {
        let mut r = raw("10.1.2.0/24");
        r.range_start = Some(ip("10.1.3.9"));
        assert_eq!(canon(r).unwrap_err(), "RangeStart 10.1.3.9 not in network 10.1.2.0/24");
        let mut r = raw("10.1.2.0/24");
        r.range_end = Some(ip("10.1.3.9"));
        assert_eq!(canon(r).unwrap_err(), "RangeEnd 10.1.3.9 not in network 10.1.2.0/24");
        let mut r = raw("2001:db8::/64");
        r.range_start = Some(ip("10.1.2.3"));
        assert_eq!(
            canon(r).unwrap_err(),
            "RangeStart 10.1.2.3 not in network 2001:db8::/64"
        );
    }

    #[test]
    fn reversed_start_end_is_reported_on_start() {
        let mut r = raw("10.1.2.0/24");
        r.range_start = Some(ip("10.1.2.9"));
        r.range_end = Some(ip("10.1.2.5"));
        assert_eq!(canon(r).unwrap_err(), "RangeStart 10.1.2.9 not in network 10.1.2.0/24");
    }

    #[test]
    fn parses_all_fields() {
        let r = canon(RawRange {
            subnet: Some(RawSubnet::parse("10.1.2.0/24").unwrap()),
            range_start: Some(ip("10.1.2.40")),
            range_end: Some(ip("10.1.2.50")),
            gateway: Some(ip("10.1.2.254")),
        })
        .unwrap();
        assert_eq!(
            (r.start, r.end, r.gateway),
            (ip("10.1.2.40"), ip("10.1.2.50"), ip("10.1.2.254"))
        );
    }

    #[test]
    fn mapped_addresses_are_canonicalised() {
        let mut r = raw("10.1.2.0/24");
        r.range_start = Some(ip("::ffff:10.1.2.7"));
        assert_eq!(canon(r).unwrap().start, ip("10.1.2.7"));
    }

    #[test]
    fn contains_boundaries() {
        let mut r = raw("192.168.1.0/24");
        r.range_start = Some(ip("192.168.1.10"));
        r.range_end = Some(ip("192.168.1.20"));
        let r = canon(r).unwrap();
        assert!(!r.contains(ip("192.168.1.9")));
        assert!(r.contains(ip("192.168.1.10")));
        assert!(r.contains(ip("192.168.1.20")));
        assert!(!r.contains(ip("192.168.1.21")));
        assert!(!r.contains(ip("2001:db8::1")));
        let r = canon(raw("2001:db8:1::/64")).unwrap();
        assert!(!r.contains(ip("2001:db8:1::")));
        assert!(r.contains(ip("2001:db8:1::1")));
        assert!(r.contains(ip("2001:db8:1::ffff:ffff:ffff:ffff")));
        assert!(!r.contains(ip("2001:db8:2::")));
    }

    fn ranged(subnet: &str, start: Option<&str>, end: Option<&str>) -> Range {
        let mut r = raw(subnet);
        r.range_start = start.map(ip);
        r.range_end = end.map(ip);
        canon(r).unwrap()
    }

    #[test]
    fn overlap_table() {
        let a = ranged("10.0.0.0/24", None, None);
        assert!(!a.overlaps(&ranged("10.1.0.0/24", None, None)), "non-overlapping");
        assert!(!a.overlaps(&ranged("2001:db8::/64", None, None)), "different families");
        assert!(a.overlaps(&ranged("10.0.0.0/24", None, None)), "identical");
        assert!(ranged("10.0.0.0/20", None, None).overlaps(&a), "containing");
        assert!(a.overlaps(&ranged("10.0.0.0/20", None, None)), "contained");
        let lo = ranged("10.0.0.0/24", Some("10.0.0.1"), Some("10.0.0.127"));
        assert!(
            !lo.overlaps(&ranged("10.0.0.0/24", Some("10.0.0.128"), None)),
            "disjoint halves"
        );
        assert!(
            lo.overlaps(&ranged("10.0.0.0/24", Some("10.0.0.127"), None)),
            "touching at .127"
        );
    }
}
