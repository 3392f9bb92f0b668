//! Address allocation within one range set: requested addresses, the duplicate check, and
//! round-robin from the last reserved address (the reference's `IPAllocator`).
use super::range::{canonical, next_ip, Range};
use super::range_set::RangeSet;
use std::fmt;
use std::net::IpAddr;

/// Allocation failed; the message is the reference's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocError(pub String);

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the allocator needs from a store, for one owner (container ID, ifname).
pub trait Reservations {
    /// Reserve `ip`; `Ok(false)` when it is taken. Records it as the set's last reserved.
    fn reserve(&mut self, ip: IpAddr, set: usize) -> Result<bool, String>;
    fn last_reserved(&self, set: usize) -> Option<IpAddr>;
    /// Addresses the owner already holds (new and legacy formats).
    fn held(&mut self) -> Result<Vec<IpAddr>, String>;
}

/// Walks a range set from just after the last reserved address (or from the first range's
/// start), wrapping across the ranges, skipping gateways, until it is back where it began.
pub struct RangeIter<'a> {
    set: &'a RangeSet,
    idx: usize,
    cur: Option<IpAddr>,
    start: Option<IpAddr>,
}

impl<'a> RangeIter<'a> {
    pub fn new(set: &'a RangeSet, last_reserved: Option<IpAddr>) -> RangeIter<'a> {
        let last = last_reserved.map(canonical);
        match last.and_then(|ip| set.0.iter().position(|r| r.contains(ip)).map(|i| (i, ip))) {
            // the first next() yields last + 1; `last` itself is tried last
            Some((idx, ip)) => RangeIter {
                set,
                idx,
                cur: Some(ip),
                start: None,
            },
            None => RangeIter {
                set,
                idx: 0,
                cur: None,
                start: Some(set.0[0].start),
            },
        }
    }
}

impl<'a> Iterator for RangeIter<'a> {
    type Item = (IpAddr, &'a Range);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let mut r = &self.set.0[self.idx];
            let Some(cur) = self.cur else {
                self.cur = Some(r.start);
                self.start = Some(r.start);
                if r.start == r.gateway {
                    continue;
                }
                return Some((r.start, r));
            };
            let next = if cur == r.end {
                self.idx = (self.idx + 1) % self.set.0.len();
                r = &self.set.0[self.idx];
                r.start
            } else {
                next_ip(cur)
            };
            self.cur = Some(next);
            match self.start {
                None => self.start = Some(next),
                Some(s) if s == next => return None,
                Some(_) => {}
            }
            if next == r.gateway {
                continue;
            }
            return Some((next, r));
        }
    }
}

/// One allocated address with the range it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub ip: IpAddr,
    pub prefix: u8,
    pub gateway: IpAddr,
}

/// Allocate one address of `set` (index `set_idx`) for `id`: `requested` if given, else the
/// next free one round-robin.
pub fn allocate(
    set: &RangeSet,
    set_idx: usize,
    id: &str,
    requested: Option<IpAddr>,
    store: &mut dyn Reservations,
) -> Result<Allocation, AllocError> {
    if let Some(ip) = requested.map(canonical) {
        let r = set
            .range_for(ip)
            .ok_or_else(|| AllocError(format!("{ip} not in range set {set}")))?;
        if ip == r.gateway {
            return Err(AllocError(format!("requested ip {ip} is subnet's gateway")));
        }
        if !store.reserve(ip, set_idx).map_err(AllocError)? {
            return Err(AllocError(format!(
                "requested IP address {ip} is not available in range set {set}"
            )));
        }
        return Ok(Allocation {
            ip,
            prefix: r.prefix,
            gateway: r.gateway,
        });
    }
    // SPEC: ADD is never called twice for one attachment, so a second dynamic allocation is
    // an error rather than a silent second address
    for held in store.held().map_err(AllocError)? {
        if set.contains(held) {
            return Err(AllocError(format!(
                "{held} has been allocated to {id}, duplicate allocation is not allowed"
            )));
        }
    }
    let last = store.last_reserved(set_idx);
    for (ip, r) in RangeIter::new(set, last) {
        if store.reserve(ip, set_idx).map_err(AllocError)? {
            return Ok(Allocation {
                ip,
                prefix: r.prefix,
                gateway: r.gateway,
            });
        }
    }
    Err(AllocError(format!("no IP addresses available in range set: {set}")))
}

#[cfg(test)]
pub mod tests {
    use super::super::range::{RawRange, RawSubnet};
    use super::*;
    use std::collections::BTreeSet;

    /// An in-memory store for allocator tests.
    #[derive(Default)]
    pub struct FakeStore {
        pub taken: BTreeSet<IpAddr>,
        pub last: Vec<Option<IpAddr>>,
        pub mine: Vec<IpAddr>,
    }

    impl Reservations for FakeStore {
        fn reserve(&mut self, ip: IpAddr, set: usize) -> Result<bool, String> {
            if !self.taken.insert(ip) {
                return Ok(false);
            }
            self.mine.push(ip);
            if self.last.len() <= set {
                self.last.resize(set + 1, None);
            }
            self.last[set] = Some(ip);
            Ok(true)
        }
        fn last_reserved(&self, set: usize) -> Option<IpAddr> {
            self.last.get(set).copied().flatten()
        }
        fn held(&mut self) -> Result<Vec<IpAddr>, String> {
            Ok(self.mine.clone())
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn set(ranges: &[(&str, Option<&str>, Option<&str>)]) -> RangeSet {
        let raw: Vec<RawRange> = ranges
            .iter()
            .map(|(s, a, b)| RawRange {
                subnet: Some(RawSubnet::parse(s).unwrap()),
                range_start: a.map(ip),
                range_end: b.map(ip),
                gateway: None,
            })
            .collect();
        RangeSet::canonicalize(&raw).unwrap()
    }

    fn walk(s: &RangeSet, last: Option<&str>) -> Vec<String> {
        RangeIter::new(s, last.map(ip)).map(|(a, _)| a.to_string()).collect()
    }

    #[test]
    fn iterates_from_the_beginning() {
        assert_eq!(
            walk(&set(&[("192.168.1.0/29", None, None)]), None),
            [
                "192.168.1.2",
                "192.168.1.3",
                "192.168.1.4",
                "192.168.1.5",
                "192.168.1.6"
            ]
        );
    }

    #[test]
    fn iterates_from_the_end() {
        assert_eq!(
            walk(&set(&[("192.168.1.0/29", None, None)]), Some("192.168.1.6")),
            [
                "192.168.1.2",
                "192.168.1.3",
                "192.168.1.4",
                "192.168.1.5",
                "192.168.1.6"
            ]
        );
    }

    #[test]
    fn iterates_from_the_middle() {
        assert_eq!(
            walk(&set(&[("192.168.1.0/29", None, None)]), Some("192.168.1.3")),
            [
                "192.168.1.4",
                "192.168.1.5",
                "192.168.1.6",
                "192.168.1.2",
                "192.168.1.3"
            ]
        );
    }

    /// The reference's round-robin table: (ranges, taken, last reserved, expected).
    #[test]
    fn round_robin_table() {
        type Case<'a> = (
            Vec<(&'a str, Option<&'a str>, Option<&'a str>)>,
            Vec<&'a str>,
            Option<&'a str>,
            &'a str,
        );
        let v4 = |s: &'static str| (s, None, None);
        let cases: Vec<Case> = vec![
            (vec![v4("10.0.0.0/29")], vec![], None, "10.0.0.2"),
            (vec![v4("2001:db8:1::/64")], vec![], None, "2001:db8:1::2"),
            (vec![v4("10.0.0.0/30")], vec![], None, "10.0.0.2"),
            (vec![v4("10.0.0.0/29")], vec!["10.0.0.2"], None, "10.0.0.3"),
            (vec![v4("10.0.0.0/29")], vec![], Some("10.0.0.5"), "10.0.0.6"),
            (
                vec![v4("10.0.0.0/29")],
                vec!["10.0.0.4", "10.0.0.5"],
                Some("10.0.0.3"),
                "10.0.0.6",
            ),
            (vec![v4("10.0.0.0/29")], vec!["10.0.0.6"], Some("10.0.0.5"), "10.0.0.2"),
            (vec![v4("10.0.0.0/29")], vec![], Some("10.0.0.128"), "10.0.0.2"),
            (
                vec![v4("10.0.0.0/29")],
                vec!["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"],
                Some("10.0.0.6"),
                "10.0.0.6",
            ),
            (vec![v4("10.0.0.0/30"), v4("10.0.1.0/30")], vec![], None, "10.0.0.2"),
            (
                vec![v4("10.0.0.0/30"), v4("10.0.1.0/30")],
                vec![],
                Some("10.0.0.2"),
                "10.0.1.2",
            ),
            (
                vec![v4("10.0.0.0/30"), v4("10.0.1.0/30"), v4("10.0.2.0/30")],
                vec![],
                Some("10.0.2.2"),
                "10.0.0.2",
            ),
        ];
        for (i, (ranges, taken, last, want)) in cases.into_iter().enumerate() {
            let s = set(&ranges);
            let mut st = FakeStore {
                taken: taken.iter().map(|t| ip(t)).collect(),
                last: vec![last.map(ip)],
                mine: vec![],
            };
            let a = allocate(&s, 0, "c", None, &mut st).unwrap_or_else(|e| panic!("case {i}: {e}"));
            assert_eq!(a.ip.to_string(), want, "case {i}");
        }
    }

    #[test]
    fn never_allocates_the_broadcast_and_fails_when_full() {
        let s = set(&[("192.168.1.0/29", None, None)]);
        hands_out_then_full(
            &s,
            &[
                "192.168.1.2",
                "192.168.1.3",
                "192.168.1.4",
                "192.168.1.5",
                "192.168.1.6",
            ],
            "no IP addresses available in range set: 192.168.1.1-192.168.1.6",
        );
    }

    /// Each allocation (by a fresh container each time) gets the next of `wants`; then the
    /// set is full with `full`.
    fn hands_out_then_full(s: &RangeSet, wants: &[&str], full: &str) {
        let mut st = FakeStore::default();
        for want in wants {
            st.mine.clear();
            assert_eq!(allocate(s, 0, "c", None, &mut st).unwrap().ip.to_string(), *want);
        }
        st.mine.clear();
        assert_eq!(allocate(s, 0, "c", None, &mut st).unwrap_err().0, full);
    }

    #[test]
    fn allocates_up_to_range_end_inclusive() {
        let s = set(&[("10.1.2.0/29", Some("10.1.2.5"), Some("10.1.2.6"))]);
        hands_out_then_full(
            &s,
            &["10.1.2.5", "10.1.2.6"],
            "no IP addresses available in range set: 10.1.2.5-10.1.2.6",
        );
    }

    #[test]
    fn round_robin_after_release() {
        let s = set(&[("192.168.1.0/29", None, None)]);
        let mut st = FakeStore::default();
        let a = allocate(&s, 0, "c", None, &mut st).unwrap().ip;
        assert_eq!(a, ip("192.168.1.2"));
        st.taken.remove(&a);
        st.mine.clear();
        assert_eq!(allocate(&s, 0, "c", None, &mut st).unwrap().ip, ip("192.168.1.3"));
    }

    #[test]
    fn requested_ip_cases() {
        let s = set(&[("192.168.1.0/29", None, None)]);
        let mut st = FakeStore::default();
        let a = allocate(&s, 0, "c", Some(ip("192.168.1.5")), &mut st).unwrap();
        assert_eq!((a.ip, a.prefix, a.gateway), (ip("192.168.1.5"), 29, ip("192.168.1.1")));
        assert_eq!(
            st.last[0],
            Some(ip("192.168.1.5")),
            "requested reservations move last_reserved too"
        );
        assert_eq!(
            allocate(&s, 0, "d", Some(ip("192.168.1.5")), &mut st).unwrap_err().0,
            "requested IP address 192.168.1.5 is not available in range set 192.168.1.1-192.168.1.6"
        );
        assert_eq!(
            allocate(&s, 0, "d", Some(ip("192.168.1.1")), &mut st).unwrap_err().0,
            "requested ip 192.168.1.1 is subnet's gateway"
        );
        let narrow = set(&[("192.168.1.0/24", Some("192.168.1.10"), Some("192.168.1.20"))]);
        assert_eq!(
            allocate(&narrow, 0, "d", Some(ip("192.168.1.21")), &mut st)
                .unwrap_err()
                .0,
            "192.168.1.21 not in range set 192.168.1.10-192.168.1.20"
        );
        assert_eq!(
            allocate(&narrow, 0, "d", Some(ip("192.168.1.9")), &mut st)
                .unwrap_err()
                .0,
            "192.168.1.9 not in range set 192.168.1.10-192.168.1.20"
        );
    }

    #[test]
    fn duplicate_dynamic_allocation_is_refused() {
        let s = set(&[("10.1.2.0/24", None, None)]);
        let mut st = FakeStore::default();
        allocate(&s, 0, "c1", None, &mut st).unwrap();
        assert_eq!(
            allocate(&s, 0, "c1", None, &mut st).unwrap_err().0,
            "10.1.2.2 has been allocated to c1, duplicate allocation is not allowed"
        );
        // a holding outside this set does not count
        let other = set(&[("10.1.3.0/24", None, None)]);
        assert!(allocate(&other, 1, "c1", None, &mut st).is_ok());
    }

    #[test]
    fn multi_range_next_starts_at_the_next_range() {
        let s = set(&[("192.168.1.0/30", None, None), ("192.168.2.0/30", None, None)]);
        let mut it = RangeIter::new(&s, Some(ip("192.168.1.2")));
        assert_eq!(
            it.next().unwrap().0,
            ip("192.168.2.2"),
            "gateway .1 skipped after the jump"
        );
        let mut it = RangeIter::new(&s, None);
        assert_eq!(it.next().unwrap().0, ip("192.168.1.2"));
    }

    #[test]
    fn gateway_is_skipped_even_mid_range() {
        let raw = vec![RawRange {
            subnet: Some(RawSubnet::parse("10.0.0.0/29").unwrap()),
            gateway: Some(ip("10.0.0.4")),
            ..Default::default()
        }];
        let s = RangeSet::canonicalize(&raw).unwrap();
        assert_eq!(
            walk(&s, None),
            ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.5", "10.0.0.6"]
        );
    }
}
