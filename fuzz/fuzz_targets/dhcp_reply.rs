//! Packets as the daemon's packet socket delivers them (IPv4 datagrams), each given to the
//! framing, the parser and a lease in the middle of an acquisition, with time passing
//! between them. The input is a sequence of packets, each preceded by its length (two
//! bytes). The lease's transaction id and MAC are fixed, so the fuzzer can find the
//! replies that pass its checks (OFFER, then ACK or NAK, then renewals).
#![no_main]
use cnibox::ipam::dhcp::config::Options;
use cnibox::ipam::dhcp::daemon::lease::{Lease, Params, Rng, Timing};
use cnibox::ipam::dhcp::frame;
use cnibox::ipam::dhcp::message::Reply;
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant, SystemTime};

fuzz_target!(|data: &[u8]| {
    let params = Params {
        client_id: "fuzz/net/eth0".into(),
        mac: [2, 0, 0, 0, 0, 1],
        options: Options {
            provided: vec![(12, b"host".to_vec())],
            requested: vec![121, 3, 1],
        },
        broadcast: false,
    };
    let timing = Timing {
        timeout: Duration::from_secs(1),
        resend_max: Duration::from_secs(4),
        resend_timeout: Duration::from_secs(30),
    };
    let t0 = Instant::now();
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut rng = Rng::new(1);
    let (mut lease, _) = Lease::acquire(params, timing, t0, &mut rng);
    let mut rest = data;
    let mut step = 0u64;
    while let [hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (packet, next) = tail.split_at(len);
        rest = next;
        step += 1;
        let now = t0 + Duration::from_millis(step * 700);
        // a packet as it arrives, and its payload taken as a DHCP message directly
        for payload in [frame::udp_payload(packet).map(|(_, p)| p), Some(packet)].into_iter().flatten() {
            if let Ok(reply) = Reply::parse(payload) {
                let _ = (reply.classless_routes(), reply.static_routes(), reply.text(), reply.router());
                let _ = lease.on_reply(reply, payload, [2, 0, 0, 0, 0, 2], (wall, now), &mut rng);
                if let Some(b) = &lease.binding {
                    let _ = b.result(i64::from(*hi) - 128);
                }
            }
        }
        let _ = lease.on_timer(now, &mut rng);
        let _ = lease.next_event();
    }
    let _ = lease.release(&mut rng);
});
