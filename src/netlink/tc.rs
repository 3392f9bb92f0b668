//! Traffic control over route netlink: the qdiscs and the filter the bandwidth plugin uses
//! (`tc` itself is never run).
//!
//! * a token bucket as the root qdisc of a link ([`Handle::add_tbf`]): `tc qdisc add dev X
//!   root handle 1: tbf …`;
//! * the ingress qdisc ([`Handle::add_ingress_qdisc`]): `tc qdisc add dev X handle ffff: ingress`;
//! * a match-all u32 filter on it whose mirred action redirects every frame to the egress of
//!   another link ([`Handle::add_redirect_filter`]);
//! * dumps of qdiscs and filters, and qdisc deletion, for CHECK and DEL.
//!
//! A kernel without the qdisc, classifier or action module answers ENOENT (or EOPNOTSUPP);
//! the error then names the missing feature (`tbf qdisc is not supported by this kernel`).
use super::bytes::{self, CStruct};
use super::handle::{Handle, Op, Result};
use super::netfilter::Attrs;
use super::transport::{Message, Transport, TransportError};
use super::wire::{self, NLM_F_CREATE, NLM_F_EXCL};

const RTM_NEWQDISC: u16 = 36;
const RTM_DELQDISC: u16 = 37;
const RTM_GETQDISC: u16 = 38;
const RTM_NEWTFILTER: u16 = 44;
const RTM_GETTFILTER: u16 = 46;

const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;

const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;

const TCA_U32_CLASSID: u16 = 1;
const TCA_U32_SEL: u16 = 5;
const TCA_U32_ACT: u16 = 7;
const TC_U32_TERMINAL: u8 = 1;

const TCA_ACT_KIND: u16 = 1;
const TCA_ACT_OPTIONS: u16 = 2;
const TCA_MIRRED_PARMS: u16 = 2;
const TCA_EGRESS_REDIR: i32 = 1;
const TC_ACT_OK: i32 = 0;
const TC_ACT_STOLEN: i32 = 4;

const ETH_P_ALL: u16 = 0x0003;

/// `struct tcmsg`: family, padding, ifindex, handle, parent, info.
const TCMSG_LEN: usize = 20;

/// The root of a link's egress (`TC_H_ROOT`).
pub const HANDLE_ROOT: u32 = 0xffff_ffff;
/// The parent of the ingress qdisc (`TC_H_INGRESS`).
pub const HANDLE_INGRESS: u32 = 0xffff_fff1;
/// `ffff:`, the ingress qdisc's own handle.
pub const INGRESS_QDISC: u32 = 0xffff_0000;
/// `1:`, the handle the token bucket gets.
pub const TBF_HANDLE: u32 = 0x0001_0000;

/// `major:minor` as the kernel packs it.
pub const fn make_handle(major: u16, minor: u16) -> u32 {
    ((major as u32) << 16) | minor as u32
}

/// Token bucket parameters as the kernel takes and reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// Bytes per second.
    pub rate: u64,
    /// The bucket, in psched ticks (the time `burst` bytes take at `rate`).
    pub buffer: u32,
    /// Bytes that may queue.
    pub limit: u32,
}

/// The psched clock of `/proc/net/psched`, which converts times to the ticks tbf counts in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PschedClock {
    /// Ticks per microsecond.
    pub tick_in_usec: f64,
}

/// Microseconds per second, the unit of tc's time computations.
pub const TIME_UNITS_PER_SEC: f64 = 1_000_000.0;

impl PschedClock {
    /// Reads the clock as iproute2 (and the Go netlink library) do; `None` when the file is
    /// missing or malformed.
    pub fn read() -> Option<PschedClock> {
        PschedClock::parse(&std::fs::read_to_string("/proc/net/psched").ok()?)
    }

    pub fn parse(text: &str) -> Option<PschedClock> {
        let vals: Vec<u64> = text
            .split_whitespace()
            .take(4)
            .map(|p| u64::from_str_radix(p, 16).ok())
            .collect::<Option<_>>()?;
        if vals.len() < 4 || vals[1] == 0 {
            return None;
        }
        let (mut t2us, us2t, clock_res) = (vals[0], vals[1], vals[2]);
        // compatibility with old kernels that report a nanosecond clock this way
        if clock_res == 1_000_000_000 {
            t2us = us2t;
        }
        let clock_factor = clock_res as f64 / TIME_UNITS_PER_SEC;
        Some(PschedClock {
            tick_in_usec: t2us as f64 / us2t as f64 * clock_factor,
        })
    }

    /// Microseconds to ticks, truncated as the reference does; None past 32 bits.
    pub fn time_to_ticks(&self, usec: u32) -> Option<u32> {
        to_u32(f64::from(usec) * self.tick_in_usec)
    }
}

/// `v` truncated to a u32, as Go's `uint32(v)` for a `v` in range; None out of range (Go
/// leaves that conversion to the machine: on amd64 it wraps around).
fn to_u32(v: f64) -> Option<u32> {
    (0.0..4_294_967_296.0).contains(&v).then_some(v as u32)
}

impl Tbf {
    /// The token bucket that shapes to `rate` bytes/s with a `burst`-byte bucket and queues
    /// at most `latency_usec` worth of traffic beyond it, as the reference bandwidth plugin
    /// computes it (the same truncations; its limit adds the burst, not the buffer). None
    /// when the kernel cannot hold it: the bucket's time in psched ticks or the limit passes
    /// 32 bits (or there is no rate). The reference's conversions wrap around there and
    /// shape with another bucket than the one asked for (a saturating one would too).
    pub fn shaping(rate: u64, burst: u32, latency_usec: f64, clock: PschedClock) -> Option<Tbf> {
        let buffer_usec = to_u32(f64::from(burst) * TIME_UNITS_PER_SEC / rate as f64)?;
        let latency = to_u32(rate as f64 * latency_usec / TIME_UNITS_PER_SEC)?;
        Some(Tbf {
            rate,
            buffer: clock.time_to_ticks(buffer_usec)?,
            limit: latency.checked_add(burst)?,
        })
    }

    /// The largest burst in bytes [`Tbf::shaping`] takes at `rate`; None when it takes none.
    pub fn max_burst(rate: u64, latency_usec: f64, clock: PschedClock) -> Option<u32> {
        let fits = |b: u32| Tbf::shaping(rate, b, latency_usec, clock).is_some();
        if !fits(0) {
            return None;
        }
        // shaping's arithmetic itself, searched: it only grows with the burst
        let (mut lo, mut hi) = (0u32, u32::MAX);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match fits(mid) {
                true => lo = mid,
                false => hi = mid - 1,
            }
        }
        Some(lo)
    }
}

/// A qdisc as dumped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    pub index: u32,
    pub kind: String,
    pub handle: u32,
    pub parent: u32,
    /// For `tbf`: its parameters.
    pub tbf: Option<Tbf>,
}

/// A filter as dumped (the parts the bandwidth plugin made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub kind: String,
    pub priority: u16,
    /// Ethernet protocol, host byte order (`ETH_P_ALL` = 3).
    pub protocol: u16,
    /// u32: the class id (`flowid`).
    pub classid: Option<u32>,
    /// The ifindexes mirred actions redirect to (egress redirect).
    pub redirects: Vec<u32>,
}

/// `struct tcmsg`: family u8, 3 bytes of padding, ifindex i32, handle, parent, info.
fn tcmsg(ifindex: u32, handle: u32, parent: u32, info: u32) -> Vec<u8> {
    CStruct::zeroed(TCMSG_LEN)
        .u8(0, wire::AF_UNSPEC)
        .i32(4, ifindex as i32)
        .u32(8, handle)
        .u32(12, parent)
        .u32(16, info)
        .into_bytes()
}

fn u32_ne(v: u32) -> [u8; 4] {
    bytes::host32(v)
}

/// `struct tc_tbf_qopt`: rate spec (12 bytes), peak rate spec (12), limit, buffer, mtu.
/// `tc_ratespec`: cell_log u8, linklayer u8, overhead u16, cell_align i16, mpu u16, rate.
fn tbf_qopt(t: &Tbf) -> Vec<u8> {
    CStruct::zeroed(36)
        .u32(8, t.rate.min(u64::from(u32::MAX)) as u32)
        .u32(24, t.limit)
        .u32(28, t.buffer)
        .into_bytes()
}

/// A match-all `struct tc_u32_sel` (flags u8, offshift u8, nkeys u8, …: 16 bytes) with
/// one zero `tc_u32_key` (16 bytes): flags TERMINAL, nkeys 1.
fn u32_match_all() -> Vec<u8> {
    CStruct::zeroed(16 + 16).u8(0, TC_U32_TERMINAL).u8(2, 1).into_bytes()
}

/// `struct tc_mirred`: tc_gen (index u32, capab u32, action i32, refcnt i32, bindcnt
/// i32), eaction i32, ifindex u32.
fn mirred_parms(action: i32, eaction: i32, ifindex: u32) -> Vec<u8> {
    CStruct::zeroed(28)
        .i32(8, action)
        .i32(20, eaction)
        .u32(24, ifindex)
        .into_bytes()
}

/// ENOENT from a tc request means the kind is unknown to the kernel (no module).
fn missing_feature(op: &Op, e: TransportError, feature: &'static str) -> super::Error {
    match e {
        TransportError::Kernel { errno, detail } if matches!(errno, libc::ENOENT | libc::EOPNOTSUPP) => {
            op.unsupported(feature, errno, detail)
        }
        other => op.transport(other),
    }
}

impl<T: Transport> Handle<T> {
    fn tc_modify(&self, op: &Op, kind: u16, flags: u16, payload: Vec<u8>, feature: &'static str) -> Result<()> {
        let request = Message {
            kind,
            flags: flags | wire::NLM_F_REQUEST | wire::NLM_F_ACK,
            payload,
        };
        self.transport()
            .exchange(request)
            .map(drop)
            .map_err(|e| missing_feature(op, e, feature))
    }

    /// `tc qdisc add dev LINK root handle 1: tbf rate … buffer … limit …`
    pub fn add_tbf(&self, link: u32, tbf: &Tbf) -> Result<()> {
        let op = Op::new("add tbf qdisc to", format!("link index {link}"));
        let mut a = Attrs::new();
        a.string(TCA_KIND, "tbf");
        a.nest(TCA_OPTIONS, |o| {
            o.bytes(TCA_TBF_PARMS, &tbf_qopt(tbf));
            if tbf.rate >= 1 << 32 {
                o.bytes(TCA_TBF_RATE64, &bytes::host64(tbf.rate));
            }
        });
        let mut payload = tcmsg(link, TBF_HANDLE, HANDLE_ROOT, 0);
        payload.extend_from_slice(a.as_bytes());
        self.tc_modify(&op, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, payload, "tbf qdisc")
    }

    /// `tc qdisc add dev LINK handle ffff: ingress`
    pub fn add_ingress_qdisc(&self, link: u32) -> Result<()> {
        let op = Op::new("add ingress qdisc to", format!("link index {link}"));
        let mut a = Attrs::new();
        a.string(TCA_KIND, "ingress");
        a.nest(TCA_OPTIONS, |_| {});
        let mut payload = tcmsg(link, INGRESS_QDISC, HANDLE_INGRESS, 0);
        payload.extend_from_slice(a.as_bytes());
        self.tc_modify(&op, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, payload, "ingress qdisc")
    }

    /// Every frame arriving on `link` goes to the egress of `target`: a match-all u32
    /// filter (pref 1, protocol all, flowid 1:1) on the ingress qdisc with a mirred egress
    /// redirect. As the reference, two mirred actions: `stolen`, then `pass` (its netlink
    /// library adds the first from the filter's redirect index).
    pub fn add_redirect_filter(&self, link: u32, target: u32) -> Result<()> {
        let op = Op::new(
            format!("add redirect to link index {target} on"),
            format!("link index {link}"),
        );
        let mut a = Attrs::new();
        a.string(TCA_KIND, "u32");
        a.nest(TCA_OPTIONS, |o| {
            o.bytes(TCA_U32_SEL, &u32_match_all());
            o.bytes(TCA_U32_CLASSID, &u32_ne(make_handle(1, 1)));
            o.nest(TCA_U32_ACT, |acts| {
                for (prio, action) in [(1u16, TC_ACT_STOLEN), (2, TC_ACT_OK)] {
                    acts.nest(prio, |act| {
                        act.string(TCA_ACT_KIND, "mirred");
                        act.nest(TCA_ACT_OPTIONS, |m| {
                            m.bytes(TCA_MIRRED_PARMS, &mirred_parms(action, TCA_EGRESS_REDIR, target));
                        });
                    });
                }
            });
        });
        let info = make_handle(1, bytes::to_net_u16(ETH_P_ALL));
        let mut payload = tcmsg(link, 0, INGRESS_QDISC, info);
        payload.extend_from_slice(a.as_bytes());
        self.tc_modify(
            &op,
            RTM_NEWTFILTER,
            NLM_F_CREATE | NLM_F_EXCL,
            payload,
            "u32 filter with the mirred action",
        )
    }

    /// The qdiscs of one link (the kernel's default `pfifo_fast`/`noqueue` included).
    pub fn qdiscs(&self, link: u32) -> Result<Vec<Qdisc>> {
        let op = Op::new("list qdiscs of", format!("link index {link}"));
        let msgs = self.dump(&op, RTM_GETQDISC, tcmsg(link, 0, 0, 0))?;
        Ok(msgs
            .iter()
            .filter_map(decode_qdisc)
            .filter(|q| q.index == link)
            .collect())
    }

    /// `tc qdisc del dev LINK parent P handle H`; a qdisc already gone is not an error
    /// (returns whether this call deleted it).
    pub fn remove_qdisc(&self, link: u32, parent: u32, handle: u32) -> Result<bool> {
        let op = Op::new(format!("delete qdisc {handle:x} of"), format!("link index {link}"));
        let request = Message {
            kind: RTM_DELQDISC,
            flags: wire::NLM_F_REQUEST | wire::NLM_F_ACK,
            payload: tcmsg(link, handle, parent, 0),
        };
        match self.transport().exchange(request) {
            Ok(_) => Ok(true),
            // ENOENT: no such qdisc; EINVAL: the root is the default qdisc already
            Err(TransportError::Kernel {
                errno: libc::ENOENT | libc::EINVAL | libc::ENODEV,
                ..
            }) => Ok(false),
            Err(e) => Err(op.transport(e)),
        }
    }

    /// The filters under `parent` of one link.
    pub fn filters(&self, link: u32, parent: u32) -> Result<Vec<Filter>> {
        let op = Op::new("list filters of", format!("link index {link}"));
        let msgs = self.dump(&op, RTM_GETTFILTER, tcmsg(link, 0, parent, 0))?;
        Ok(msgs.iter().filter_map(decode_filter).collect())
    }
}

/// The numbers of a tcmsg header.
struct TcHeader {
    ifindex: u32,
    handle: u32,
    parent: u32,
    info: u32,
}

/// The tcmsg header and the attributes after it.
fn split(m: &Message) -> Option<(TcHeader, &[u8])> {
    let p = &m.payload;
    if p.len() < TCMSG_LEN {
        return None;
    }
    let n = |at: usize| bytes::read_host32(&p[at..]).expect("4 bytes");
    let h = TcHeader {
        ifindex: n(4),
        handle: n(8),
        parent: n(12),
        info: n(16),
    };
    Some((h, &p[TCMSG_LEN..]))
}

fn decode_qdisc(m: &Message) -> Option<Qdisc> {
    if m.kind != RTM_NEWQDISC {
        return None;
    }
    let (
        TcHeader {
            ifindex: index,
            handle,
            parent,
            ..
        },
        attrs,
    ) = split(m)?;
    let kind = wire::find(attrs, TCA_KIND).map(wire::as_string).unwrap_or_default();
    let tbf = (kind == "tbf")
        .then(|| wire::find(attrs, TCA_OPTIONS))
        .flatten()
        .and_then(|o| {
            let q = wire::find(o, TCA_TBF_PARMS)?;
            if q.len() < 32 {
                return None;
            }
            let rate32 = wire::as_u32(&q[8..12])?;
            let rate = wire::find(o, TCA_TBF_RATE64)
                .and_then(bytes::read_host64)
                .unwrap_or(u64::from(rate32));
            Some(Tbf {
                rate,
                limit: wire::as_u32(&q[24..28])?,
                buffer: wire::as_u32(&q[28..32])?,
            })
        });
    Some(Qdisc {
        index,
        kind,
        handle,
        parent,
        tbf,
    })
}

fn decode_filter(m: &Message) -> Option<Filter> {
    let (TcHeader { info, .. }, attrs) = split(m)?;
    let kind = wire::find(attrs, TCA_KIND).map(wire::as_string).unwrap_or_default();
    let opts = wire::find(attrs, TCA_OPTIONS).unwrap_or(&[]);
    let mut redirects = vec![];
    if let Some(acts) = wire::find(opts, TCA_U32_ACT) {
        for (_, act) in wire::attrs(acts) {
            let is_mirred = wire::find(act, TCA_ACT_KIND).map(wire::as_string).as_deref() == Some("mirred");
            let parms = wire::find(act, TCA_ACT_OPTIONS).and_then(|o| wire::find(o, TCA_MIRRED_PARMS));
            if let (true, Some(p)) = (is_mirred, parms) {
                if p.len() >= 28 && bytes::read_host_i32(&p[20..])? == TCA_EGRESS_REDIR {
                    redirects.push(wire::as_u32(&p[24..28])?);
                }
            }
        }
    }
    Some(Filter {
        kind,
        priority: (info >> 16) as u16,
        protocol: bytes::from_net_u16(info as u16),
        classid: wire::find(opts, TCA_U32_CLASSID).and_then(wire::as_u32),
        redirects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::testing::FakeTransport;
    use crate::netlink::Reply;

    #[test]
    fn psched_clock_of_this_kernel_family() {
        let c = PschedClock::parse("000003e8 00000040 000f4240 3b9aca00\n").unwrap();
        assert_eq!(c.tick_in_usec, 15.625);
        assert!(PschedClock::parse("x").is_none());
        // 8 Mbit/s, 16 Mbit burst: what the Go plugin computes
        let t = Tbf::shaping(1_000_000, 2_000_000, 25_000.0, c);
        assert_eq!(
            t,
            Some(Tbf {
                rate: 1_000_000,
                buffer: 31_250_000,
                limit: 2_025_000
            })
        );
    }

    /// Regression: a bucket whose time in ticks passed 32 bits was saturated (the reference
    /// wraps around): 125 bytes/s with a 125,000-byte burst became a 34,359-byte bucket.
    #[test]
    fn buckets_the_kernel_cannot_hold_are_refused() {
        let c = PschedClock::parse("000003e8 00000040 000f4240 3b9aca00\n").unwrap();
        assert_eq!(Tbf::shaping(125, 125_000, 25_000.0, c), None);
        // 34,359 bytes take 274,872,000 µs at 125 bytes/s, 4,294,875,000 ticks; one more
        // byte passes 2^32
        assert_eq!(Tbf::max_burst(125, 25_000.0, c), Some(34_359));
        assert_eq!(Tbf::shaping(125, 34_359, 25_000.0, c).unwrap().buffer, 4_294_875_000);
        assert_eq!(Tbf::shaping(125, 34_360, 25_000.0, c), None);
        // the limit (25 ms at the rate, plus the burst) passing 32 bits
        let fast = 1_000_000_000;
        let max = Tbf::max_burst(fast, 25_000.0, c).unwrap();
        assert_eq!(max, u32::MAX - 25_000_000);
        assert!(Tbf::shaping(fast, max, 25_000.0, c).is_some());
        assert_eq!(Tbf::shaping(fast, max + 1, 25_000.0, c), None);
        // no rate: no bucket
        assert_eq!(Tbf::shaping(0, 1, 25_000.0, c), None);
        assert_eq!(Tbf::max_burst(0, 25_000.0, c), None);
    }

    #[test]
    fn tbf_request_bytes() {
        let h = Handle::with_transport(FakeTransport::new());
        h.add_tbf(
            7,
            &Tbf {
                rate: 1000,
                buffer: 20,
                limit: 30,
            },
        )
        .unwrap();
        let r = &h.transport().requests()[0];
        assert_eq!(r.kind, RTM_NEWQDISC);
        assert_eq!(&r.payload[..TCMSG_LEN], &tcmsg(7, 0x10000, 0xffff_ffff, 0)[..]);
        let attrs: Vec<_> = wire::attrs(&r.payload[TCMSG_LEN..]).collect();
        assert_eq!(attrs[0], (TCA_KIND, &b"tbf\0"[..]));
        let parms = wire::find(attrs[1].1, TCA_TBF_PARMS).unwrap();
        assert_eq!(wire::as_u32(&parms[8..12]), Some(1000));
        assert_eq!(wire::as_u32(&parms[24..28]), Some(30));
        assert_eq!(wire::as_u32(&parms[28..32]), Some(20));
        assert!(wire::find(attrs[1].1, TCA_TBF_RATE64).is_none());
        h.add_tbf(
            7,
            &Tbf {
                rate: 1 << 33,
                buffer: 20,
                limit: 30,
            },
        )
        .unwrap();
        let r = &h.transport().requests()[1];
        let o = wire::find(&r.payload[TCMSG_LEN..], TCA_OPTIONS).unwrap();
        assert_eq!(wire::find(o, TCA_TBF_RATE64), Some(&(1u64 << 33).to_ne_bytes()[..]));
    }

    #[test]
    fn missing_modules_are_named() {
        let h = Handle::with_transport(FakeTransport::new());
        h.transport().push_errno(libc::ENOENT);
        let e = h
            .add_tbf(
                7,
                &Tbf {
                    rate: 1,
                    buffer: 1,
                    limit: 1,
                },
            )
            .unwrap_err();
        assert!(e.is_unsupported());
        assert_eq!(
            e.to_string(),
            "add tbf qdisc to link index 7: tbf qdisc is not supported by this kernel (No such file or directory)"
        );
        h.transport().push_errno(libc::ENOENT);
        let e = h.add_ingress_qdisc(7).unwrap_err();
        assert!(
            e.to_string().contains("ingress qdisc is not supported by this kernel"),
            "{e}"
        );
        h.transport().push_errno(libc::ENOENT);
        let e = h.add_redirect_filter(7, 9).unwrap_err();
        assert!(
            e.to_string()
                .contains("u32 filter with the mirred action is not supported"),
            "{e}"
        );
        h.transport().push_errno(libc::EEXIST);
        assert!(h.add_ingress_qdisc(7).unwrap_err().is_exists());
        // an unknown link kind is EOPNOTSUPP from rtnetlink
        h.transport().push_errno(libc::EOPNOTSUPP);
        let e = h
            .create_ifb(&crate::netlink::IfbSpec {
                name: "bwp0",
                mtu: Some(1500),
                txqlen: Some(0),
            })
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "create ifb bwp0: ifb is not supported by this kernel (Operation not supported)"
        );
    }

    #[test]
    fn redirect_filter_round_trips_through_the_decoder() {
        let h = Handle::with_transport(FakeTransport::new());
        h.add_redirect_filter(7, 9).unwrap();
        let mut m = h.transport().requests()[0].clone();
        m.kind = RTM_NEWTFILTER;
        let f = decode_filter(&m).unwrap();
        assert_eq!(
            f,
            Filter {
                kind: "u32".into(),
                priority: 1,
                protocol: ETH_P_ALL,
                classid: Some(0x0001_0001),
                redirects: vec![9, 9],
            }
        );
        h.transport().push_reply(Reply {
            messages: vec![m],
            interrupted: false,
        });
        assert_eq!(h.filters(7, INGRESS_QDISC).unwrap(), vec![f]);
    }

    #[test]
    fn qdisc_dumps_keep_only_the_link() {
        let h = Handle::with_transport(FakeTransport::new());
        h.add_tbf(
            7,
            &Tbf {
                rate: 5,
                buffer: 6,
                limit: 8,
            },
        )
        .unwrap();
        h.add_ingress_qdisc(8).unwrap();
        let reqs = h.transport().requests();
        h.transport().push_reply(Reply {
            messages: reqs,
            interrupted: false,
        });
        let q = h.qdiscs(7).unwrap();
        assert_eq!(
            q,
            vec![Qdisc {
                index: 7,
                kind: "tbf".into(),
                handle: TBF_HANDLE,
                parent: HANDLE_ROOT,
                tbf: Some(Tbf {
                    rate: 5,
                    buffer: 6,
                    limit: 8
                }),
            }]
        );
    }
}
