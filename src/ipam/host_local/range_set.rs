//! A range set: the pool one address of a result is drawn from (ranges tried in order).
use super::range::{Range, RangeError, RawRange};
use std::fmt;
use std::net::IpAddr;

/// A range set failed validation; the message is the reference's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeSetError(pub String);

impl fmt::Display for RangeSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<RangeError> for RangeSetError {
    fn from(e: RangeError) -> Self {
        RangeSetError(e.0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeSet(pub Vec<Range>);

impl RangeSet {
    /// Canonicalise every range; one family per set; no overlap inside the set.
    pub fn canonicalize(raw: &[RawRange]) -> Result<RangeSet, RangeSetError> {
        if raw.is_empty() {
            return Err(RangeSetError("empty range set".into()));
        }
        let mut ranges: Vec<Range> = Vec::with_capacity(raw.len());
        for r in raw {
            let r = Range::canonicalize(r)?;
            if let Some(first) = ranges.first() {
                if first.is_ipv4() != r.is_ipv4() {
                    return Err(RangeSetError("mixed address families".into()));
                }
            }
            ranges.push(r);
        }
        for (i, a) in ranges.iter().enumerate() {
            for b in &ranges[i + 1..] {
                if a.overlaps(b) {
                    return Err(RangeSetError(format!("subnets {a} and {b} overlap")));
                }
            }
        }
        Ok(RangeSet(ranges))
    }

    pub fn is_ipv4(&self) -> bool {
        self.0[0].is_ipv4()
    }

    /// The range holding `ip`, if any.
    pub fn range_for(&self, ip: IpAddr) -> Option<&Range> {
        self.0.iter().find(|r| r.contains(ip))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.range_for(ip).is_some()
    }

    pub fn overlaps(&self, other: &RangeSet) -> bool {
        self.0.iter().any(|a| other.0.iter().any(|b| a.overlaps(b)))
    }
}

impl fmt::Display for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::range::RawSubnet;
    use super::*;

    fn raw(subnet: &str) -> RawRange {
        RawRange {
            subnet: Some(RawSubnet::parse(subnet).unwrap()),
            ..Default::default()
        }
    }

    fn set(subnets: &[&str]) -> Result<RangeSet, String> {
        RangeSet::canonicalize(&subnets.iter().map(|s| raw(s)).collect::<Vec<_>>()).map_err(|e| e.0)
    }

    #[test]
    fn membership() {
        let s = set(&["192.168.0.0/24", "172.16.1.0/24"]).unwrap();
        assert!(s.contains("192.168.0.55".parse().unwrap()));
        assert!(s.contains("172.16.1.2".parse().unwrap()));
        assert!(
            !s.contains("192.168.0.0".parse().unwrap()),
            "network address is outside the range"
        );
        assert!(
            !s.contains("192.168.0.255".parse().unwrap()),
            "broadcast is outside the range"
        );
        assert!(!s.contains("10.0.0.1".parse().unwrap()));
        assert!(!s.contains("2001:db8::1".parse().unwrap()));
        assert_eq!(s.to_string(), "192.168.0.1-192.168.0.254,172.16.1.1-172.16.1.254");
    }

    #[test]
    fn overlap_within_a_set() {
        assert_eq!(
            set(&["10.1.0.0/22", "10.1.2.0/24"]).unwrap_err(),
            "subnets 10.1.0.1-10.1.3.254 and 10.1.2.1-10.1.2.254 overlap"
        );
    }

    #[test]
    fn overlap_between_sets() {
        let a = set(&["10.1.0.0/24", "10.2.0.0/24"]).unwrap();
        assert!(a.overlaps(&set(&["10.2.0.0/16"]).unwrap()));
        assert!(!a.overlaps(&set(&["10.3.0.0/16"]).unwrap()));
    }

    #[test]
    fn empty_and_mixed() {
        assert_eq!(set(&[]).unwrap_err(), "empty range set");
        assert_eq!(
            set(&["10.1.0.0/16", "2001::/64"]).unwrap_err(),
            "mixed address families"
        );
    }

    #[test]
    fn range_errors_pass_through() {
        assert_eq!(
            set(&["10.1.2.0/31"]).unwrap_err(),
            "Network 10.1.2.0/31 too small to allocate from"
        );
    }
}
