//! The `bandwidth` meta plugin: rate limits on a container's veth, chained after the plugin
//! that made the veth (it finds the host end through prevResult and the veth peer index).
//!
//! * Ingress (traffic into the container) is shaped where it leaves the host: a token
//!   bucket as the root qdisc of the host veth.
//! * Egress (traffic out of the container) arrives on the host veth, which can only police
//!   it; so it is redirected to an ifb device and shaped where it leaves that: the host
//!   veth gets the ingress qdisc and a match-all filter redirecting to the ifb, and the ifb
//!   gets the token bucket. The ifb is named `bwp` + the SHA-512 of network name and
//!   container ID (the reference's name, so DEL of either implementation finds it).
//!
//! Rates are in bits per second and bursts in bits, as in the reference; the token bucket
//! arithmetic (25 ms latency, psched ticks) is the reference's, so the kernel ends up with
//! the same qdiscs. DEL removes the ifb and the host veth's qdiscs; CHECK compares rate,
//! limit and buffer of both token buckets and looks for the redirect to the ifb.
use crate::cni::config as cniconf;
use crate::cni::json;
use crate::cni::json::Fields;
use crate::cni::result::Interface;
use crate::cni::{CniResult, Error, Plugin, Request};
use crate::netlink::tc::{self, PschedClock, Tbf};
use crate::netlink::{Handle, IfbSpec, Link, LinkKind};
use crate::netns::Netns;
use crate::plugin_kit::netns_open;
use crate::plugin_kit::rollback::Rollback;

pub struct Bandwidth;

/// The spec versions of the reference bandwidth (0.3.0 on), and 1.1.0.
const VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

const IFB_PREFIX: &str = "bwp";
const MAX_IFNAME: usize = 15;
/// How long a packet may wait in a token bucket (the reference's constant). An integer:
/// printing an `f64` in the error below would link 10 KB of float formatting.
const LATENCY_MS: u32 = 25;

/// The burst containerd's CRI sends with every rate a pod's bandwidth annotation sets
/// (`math.MaxUint32` bits: Kubernetes has no burst annotation). Below about 15.6 Mbit/s the
/// kernel's token bucket cannot hold it; refusing it would keep every such pod from
/// starting (the reference starts them, with a bucket its arithmetic wrapped around to), so
/// it means the largest bucket the kernel holds at the rate. Any other burst the kernel
/// cannot hold is refused.
const CRI_BURST: u64 = u32::MAX as u64;

/// One direction's limit, in bits per second and bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Limit {
    rate: u64,
    burst: u64,
}

impl Limit {
    fn is_set(&self) -> bool {
        self.rate > 0 && self.burst > 0
    }

    /// The token bucket in bytes and ticks, as the reference computes it; a burst the
    /// kernel cannot hold at the rate is an error naming the largest it can (the reference
    /// shapes with whatever its arithmetic wrapped around to). `direction`: `ingress` or
    /// `egress`, the keys' prefix.
    fn tbf(&self, clock: PschedClock, direction: &str) -> Result<Tbf, Error> {
        let (rate, latency) = (self.rate / 8, f64::from(LATENCY_MS) * 1000.0);
        if rate == 0 {
            // the kernel refuses a bucket without a rate ("invalid argument"): say why
            return Err(Error::internal(format!(
                "{direction}Rate {} is less than 8 bits per second: the kernel's token bucket counts whole bytes",
                self.rate
            )));
        }
        if let Some(t) = Tbf::shaping(rate, (self.burst / 8) as u32, latency, clock) {
            return Ok(t);
        }
        if self.burst == CRI_BURST {
            // not asked for but sent for every pod that sets a rate: the largest bucket
            if let Some(t) =
                Tbf::max_burst(rate, latency, clock).and_then(|max| Tbf::shaping(rate, max, latency, clock))
            {
                return Ok(t);
            }
        }
        Err(Error::internal(match Tbf::max_burst(rate, latency, clock) {
            Some(max) => format!(
                "{direction}Burst {} is more than the kernel's token bucket holds at {direction}Rate {}: \
                 at most {} bits at that rate",
                self.burst,
                self.rate,
                u64::from(max) * 8 + 7
            ),
            None => format!(
                "{direction}Rate {} is more than the kernel's token bucket takes: {LATENCY_MS} ms at that rate \
                 is past 4 GB",
                self.rate
            ),
        }))
    }
}

/// The `bandwidth` entry (CONVENTIONS.md), from the config or `runtimeConfig.bandwidth`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Entry {
    ingress: Limit,
    egress: Limit,
}

impl Entry {
    fn is_zero(&self) -> bool {
        *self == Entry::default()
    }

    /// The ingress and egress token buckets of the directions that are set.
    fn buckets(&self, clock: PschedClock) -> Result<(Option<Tbf>, Option<Tbf>), Error> {
        let bucket = |l: Limit, direction| l.is_set().then(|| l.tbf(clock, direction)).transpose();
        Ok((bucket(self.ingress, "ingress")?, bucket(self.egress, "egress")?))
    }
}

const CTX: &str = "failed to parse network configuration";
const KEYS: [&str; 4] = ["ingressRate", "ingressBurst", "egressRate", "egressBurst"];

/// A Go `uint64` field, with Go's message for negative or fractional numbers.
fn uint64(obj: &Fields, key: &str, path: &str) -> Result<u64, Error> {
    json::opt_u64(obj, key, &format!("{path}.{key}"))
        .map(Option::unwrap_or_default)
        .map_err(|e| e.context(CTX))
}

fn entry(obj: &Fields, path: &str) -> Result<Entry, Error> {
    Ok(Entry {
        ingress: Limit {
            rate: uint64(obj, "ingressRate", path)?,
            burst: uint64(obj, "ingressBurst", path)?,
        },
        egress: Limit {
            rate: uint64(obj, "egressRate", path)?,
            burst: uint64(obj, "egressBurst", path)?,
        },
    })
}

/// The configured limits: the config's own keys when any is present, else
/// `runtimeConfig.bandwidth` (the capability); validated as the reference does.
fn load(req: &Request) -> Result<Option<Entry>, Error> {
    cniconf::check_net_conf(&req.config, "PluginConf").map_err(|e| e.context(CTX))?;
    let obj = json::as_object(&req.config, "PluginConf").map_err(|e| e.context(CTX))?;
    let runtime = match cniconf::runtime_config(
        &req.config,
        "PluginConf",
        r#"struct { Bandwidth *main.BandwidthEntry "json:\"bandwidth,omitempty\"" }"#,
    )
    .map_err(|e| e.context(CTX))?
    {
        Some(rc) => json::opt_ptr_object(&rc, "bandwidth", ".runtimeConfig.bandwidth", "main.BandwidthEntry")
            .map_err(|e| e.context(CTX))?,
        None => None,
    };
    let runtime = runtime
        .map(|b| entry(&b, "BandwidthEntry.runtimeConfig.bandwidth"))
        .transpose()?;
    // The embedded `*BandwidthEntry` is allocated as soon as any of its keys is written
    // (even as `null`), and then wins over `runtimeConfig.bandwidth`.
    let own = if KEYS.iter().any(|k| obj.written(k, "uint64").next().is_some()) {
        Some(entry(&obj, "PluginConf")?)
    } else {
        None
    };
    let chosen = own.or(runtime);
    if let Some(e) = &chosen {
        validate(e.ingress)?;
        validate(e.egress)?;
    }
    Ok(chosen)
}

fn validate(l: Limit) -> Result<(), Error> {
    if l.burst == 0 && l.rate != 0 {
        return Err(Error::internal("if rate is set, burst must also be set"));
    }
    if l.rate == 0 && l.burst != 0 {
        return Err(Error::internal("if burst is set, rate must also be set"));
    }
    if l.burst / 8 >= u64::from(u32::MAX) {
        return Err(Error::internal("burst cannot be more than 4GB"));
    }
    Ok(())
}

/// prevResult, parsed (the reference wraps the parse error once more).
fn prev_result(req: &Request) -> Result<Option<CniResult>, Error> {
    cniconf::prev_result(req).map_err(|e| e.context("could not parse prevResult"))
}

/// `bwp` + the first 12 hex digits of SHA-512(network name + container ID).
pub fn ifb_name(network: &str, container_id: &str) -> String {
    let digest = crate::util::sha512::digest(format!("{network}{container_id}").as_bytes());
    let mut name = format!("{IFB_PREFIX}{}", crate::util::sha512::hex(&digest));
    name.truncate(MAX_IFNAME);
    name
}

fn clock() -> Result<PschedClock, Error> {
    PschedClock::read().ok_or_else(|| Error::internal("cannot read the psched clock from /proc/net/psched"))
}

/// The host end of the container's veth: the peer of `CNI_IFNAME` in the container, which
/// must be an interface of prevResult without a sandbox.
fn host_interface(host: &Handle, ns: &Netns, interfaces: &[Interface], ifname: &str) -> Result<Link, Error> {
    if interfaces.is_empty() {
        return Err(Error::internal("no interfaces provided"));
    }
    let cont = Handle::open(ns)?;
    let peer = match cont.link_by_name(ifname)? {
        None => Err(format!("could not look up {ifname:?}: Link not found")),
        Some(l) if l.kind != Some(LinkKind::Veth) => Err(format!("interface {ifname:?} was not a veth interface")),
        Some(l) => l
            .peer_index
            .ok_or_else(|| format!("interface {ifname:?} has no peer index")),
    }
    .map_err(|e| Error::internal(format!("container interface {ifname} has no veth peer: {e}")))?;
    let link = host
        .link_by_index(peer)?
        .ok_or_else(|| Error::internal(format!("veth peer with index {peer} is not in host ns")))?;
    if interfaces
        .iter()
        .any(|i| i.sandbox.as_deref().unwrap_or_default().is_empty() && i.name == link.name)
    {
        return Ok(link);
    }
    Err(Error::internal("no veth peer of container interface found in host ns"))
}

impl Plugin for Bandwidth {
    fn about(&self) -> &'static str {
        "CNI bandwidth plugin from cnibox"
    }

    fn versions(&self) -> &'static [&'static str] {
        VERSIONS
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let limits = load(req)?;
        let prev = prev_result(req)?;
        let Some(mut result) = prev else {
            return Err(Error::internal("must be called as chained plugin"));
        };
        let limits = match limits {
            Some(l) if !l.is_zero() => l,
            _ => return Ok(result), // nothing to shape
        };
        // both buckets first: one the kernel cannot hold fails before anything changes
        let (ingress, egress) = limits.buckets(clock()?)?;
        let ns = netns_open::container(&req.netns)?;
        let host = Handle::current()?;
        let veth = host_interface(&host, &ns, &result.interfaces, &req.ifname)?;
        let mut rollback = Rollback::new();

        // ingress of the container: shaped leaving the host veth
        if let Some(tbf) = ingress {
            host.add_tbf(veth.index, &tbf)
                .map_err(|e| Error::internal(format!("create qdisc: {e}")))?;
            let (h, index) = (&host, veth.index);
            rollback.push("remove the veth's tbf", move || {
                h.remove_qdisc(index, tc::HANDLE_ROOT, tc::TBF_HANDLE)
                    .map(drop)
                    .map_err(|e| e.to_string())
            });
        }
        // egress of the container: redirected from the host veth to an ifb, shaped leaving it
        if let Some(tbf) = egress {
            let name = ifb_name(&req.name, &req.container_id);
            let ifb = host
                .create_ifb(&IfbSpec {
                    name: &name,
                    mtu: Some(veth.mtu),
                    txqlen: Some(0),
                })
                .map_err(|e| Error::internal(format!("adding link: {e}")))?;
            let (h, ifb_index) = (&host, ifb.index);
            rollback.push(format!("delete {name}"), move || {
                h.remove_link(ifb_index).map(drop).map_err(|e| e.to_string())
            });
            result.interfaces.push(Interface {
                name: name.clone(),
                mac: ifb.mac.map(|m| m.to_string()),
                ..Default::default()
            });
            host.add_ingress_qdisc(veth.index)
                .map_err(|e| Error::internal(format!("create ingress qdisc: {e}")))?;
            let index = veth.index;
            rollback.push("remove the veth's ingress qdisc", move || {
                h.remove_qdisc(index, tc::HANDLE_INGRESS, tc::INGRESS_QDISC)
                    .map(drop)
                    .map_err(|e| e.to_string())
            });
            host.add_redirect_filter(veth.index, ifb.index)
                .map_err(|e| Error::internal(format!("add filter: {e}")))?;
            host.add_tbf(ifb.index, &tbf)
                .map_err(|e| Error::internal(format!("create ifb qdisc: create qdisc: {e}")))?;
        }
        rollback.commit();
        Ok(result)
    }

    /// Removes the ifb (all the reference does) and, when prevResult and the netns still
    /// lead to the host veth, its qdiscs; whatever is already gone is done.
    fn del(&self, req: &Request) -> Result<(), Error> {
        // the ifb is found by attachment; prevResult names the host veth, if it can
        let prev = cniconf::del_config("bandwidth", || load(req).and_then(|_| prev_result(req)), || None);
        let host = Handle::current()?;
        let name = ifb_name(&req.name, &req.container_id);
        if let Some(ifb) = host.link_by_name(&name)? {
            host.remove_link(ifb.index)
                .map_err(|e| Error::internal(format!("failed to delete {name:?}: {e}")))?;
        }
        if let Some(prev) = prev {
            if let Err(e) = remove_veth_qdiscs(&host, req, &prev) {
                eprintln!("cnibox bandwidth: DEL: qdiscs of the host veth left alone: {}", e.msg);
            }
        }
        Ok(())
    }

    fn check(&self, req: &Request) -> Result<(), Error> {
        let limits = load(req)?;
        let Some(prev) = prev_result(req)? else {
            return Err(Error::internal("must be called as a chained plugin"));
        };
        let ns = netns_open::container(&req.netns)?;
        let host = Handle::current()?;
        let veth = host_interface(&host, &ns, &prev.interfaces, &req.ifname)?;
        let Some(limits) = limits.filter(|l| !l.is_zero()) else {
            return Ok(());
        };
        let (ingress, egress) = limits.buckets(clock()?)?;
        if let Some(tbf) = ingress {
            check_tbf(&host, veth.index, &tbf)?;
        }
        if let Some(tbf) = egress {
            let name = ifb_name(&req.name, &req.container_id);
            let ifb = host
                .link_by_name(&name)?
                .ok_or_else(|| Error::internal("get ifb device: Link not found"))?;
            check_tbf(&host, ifb.index, &tbf)?;
            // without the redirect the ifb's bucket shapes nothing (the reference does not look)
            let redirected = host
                .filters(veth.index, tc::INGRESS_QDISC)
                .unwrap_or_default()
                .iter()
                .any(|f| f.redirects.contains(&ifb.index));
            if !redirected {
                return Err(Error::internal(format!(
                    "Failed to find the filter redirecting {} to {name}",
                    veth.name
                )));
            }
        }
        Ok(())
    }
}

/// The reference's CHECK of a link's token bucket: the first qdiscs that are tbfs must have
/// the configured rate, limit and buffer.
fn check_tbf(h: &Handle, link: u32, want: &Tbf) -> Result<(), Error> {
    let qdiscs: Vec<_> = h.qdiscs(link)?.into_iter().filter(|q| q.kind != "pfifo_fast").collect();
    if qdiscs.is_empty() {
        return Err(Error::internal("Failed to find qdisc"));
    }
    for q in &qdiscs {
        let Some(got) = q.tbf else { break };
        if got.rate != want.rate {
            return Err(Error::internal("Rate doesn't match"));
        }
        if got.limit != want.limit {
            return Err(Error::internal("Limit doesn't match"));
        }
        if got.buffer != want.buffer {
            return Err(Error::internal("Buffer doesn't match"));
        }
    }
    Ok(())
}

/// The token bucket and the ingress qdisc (with its redirect) ADD put on the host veth.
fn remove_veth_qdiscs(host: &Handle, req: &Request, prev: &CniResult) -> Result<(), Error> {
    let Some(ns) = netns_open::open_for_del(&req.netns)? else {
        return Ok(()); // the veth went with the namespace
    };
    let veth = match host_interface(host, &ns, &prev.interfaces, &req.ifname) {
        Ok(v) => v,
        Err(_) => return Ok(()), // no veth left to clean
    };
    for q in host.qdiscs(veth.index)? {
        let ours = (q.kind == "tbf" && q.parent == tc::HANDLE_ROOT && q.handle == tc::TBF_HANDLE)
            || (q.kind == "ingress" && q.handle == tc::INGRESS_QDISC);
        if ours {
            host.remove_qdisc(veth.index, q.parent, q.handle)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Command;
    use serde_json::{json, Value};

    fn limits(config: Value) -> Result<Option<Entry>, Error> {
        load(&Request::from_config(Command::Add, config))
    }

    #[test]
    fn ifb_names_are_the_references() {
        // what the Go plugin named the ifb of network "bwnet", container "ctr1"
        assert_eq!(ifb_name("bwnet", "ctr1"), "bwpea62040b30ca");
        assert_eq!(ifb_name("bwnet", "ctr1").len(), 15);
    }

    #[test]
    fn rate_and_burst_go_together() {
        let e = |c: Value| limits(c).unwrap_err().msg;
        assert_eq!(e(json!({"ingressRate": 8})), "if rate is set, burst must also be set");
        assert_eq!(e(json!({"egressBurst": 8})), "if burst is set, rate must also be set");
        assert_eq!(
            e(json!({"ingressRate": 8, "ingressBurst": 34359738360u64})),
            "burst cannot be more than 4GB"
        );
        assert!(limits(json!({"ingressRate": 8, "ingressBurst": 34359738352u64})).is_ok());
        assert_eq!(
            e(json!({"ingressRate": -1})),
            "failed to parse network configuration: json: cannot unmarshal number -1 into Go struct field PluginConf.ingressRate of type uint64"
        );
        assert_eq!(
            e(json!({"runtimeConfig": {"bandwidth": {"egressRate": 8}}})),
            "if rate is set, burst must also be set"
        );
    }

    #[test]
    fn config_keys_win_over_the_capability() {
        let rc = json!({"bandwidth": {"ingressRate": 8, "ingressBurst": 16}});
        let got = limits(json!({"egressRate": 80, "egressBurst": 160, "runtimeConfig": rc.clone()}))
            .unwrap()
            .unwrap();
        assert_eq!(got.egress, Limit { rate: 80, burst: 160 });
        assert_eq!(got.ingress, Limit::default());
        let got = limits(json!({"runtimeConfig": rc})).unwrap().unwrap();
        assert_eq!(got.ingress, Limit { rate: 8, burst: 16 });
        // a zero config entry still hides the capability, as the reference's embedded pointer does
        let got =
            limits(json!({"ingressRate": 0, "runtimeConfig": {"bandwidth": {"ingressRate": 8, "ingressBurst": 16}}}));
        assert!(got.unwrap().unwrap().is_zero());
        assert_eq!(limits(json!({})).unwrap(), None);
    }
}
