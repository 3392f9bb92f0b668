//! The IPv4 and UDP headers around a DHCP message on the client's packet socket (which
//! sees IP packets, below the kernel's IP and UDP layers, so that an interface without an
//! address can take part), and the socket filter that keeps every other packet out.
use std::net::Ipv4Addr;

pub const CLIENT_PORT: u16 = 68;
pub const SERVER_PORT: u16 = 67;
const IP_HEADER: usize = 20;
const UDP_HEADER: usize = 8;
const PROTO_UDP: u8 = 17;

/// `payload` in a UDP datagram from port 68 to port 67, in an IPv4 packet from `src` to
/// `dst`, both checksums set.
pub fn udp_packet(src: Ipv4Addr, dst: Ipv4Addr, payload: &[u8]) -> Vec<u8> {
    let udp_len = UDP_HEADER + payload.len();
    let total = IP_HEADER + udp_len;
    let mut p = Vec::with_capacity(total);
    p.extend_from_slice(&[0x45, 0x10]); // IPv4, 20-byte header; TOS low delay as dhclient
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0, 64, PROTO_UDP, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    let ip_sum = checksum(0, &p[..IP_HEADER]);
    p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    p.extend_from_slice(&CLIENT_PORT.to_be_bytes());
    p.extend_from_slice(&SERVER_PORT.to_be_bytes());
    p.extend_from_slice(&(udp_len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    // the pseudo header: addresses, protocol, UDP length
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&src.octets());
    pseudo[4..8].copy_from_slice(&dst.octets());
    pseudo[9] = PROTO_UDP;
    pseudo[10..].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let sum = match checksum(sum_words(0, &pseudo), &p[IP_HEADER..]) {
        0 => 0xffff,
        s => s,
    };
    p[IP_HEADER + 6..IP_HEADER + 8].copy_from_slice(&sum.to_be_bytes());
    p
}

fn sum_words(mut acc: u32, b: &[u8]) -> u32 {
    let mut words = b.chunks_exact(2);
    for w in &mut words {
        acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn checksum(acc: u32, b: &[u8]) -> u16 {
    let mut s = sum_words(acc, b);
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// A UDP datagram to the client port taken from an IPv4 packet: its source address and its
/// payload, bounded by the headers' lengths (link-layer padding is not payload). Fragments
/// and anything else are refused.
pub fn udp_payload(p: &[u8]) -> Option<(Ipv4Addr, &[u8])> {
    let (&first, _) = p.split_first()?;
    let header = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || header < IP_HEADER || p.len() < header + UDP_HEADER {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let fragment = u16::from_be_bytes([p[6], p[7]]) & 0x3fff;
    if total < header + UDP_HEADER || total > p.len() || fragment != 0 || p[9] != PROTO_UDP {
        return None;
    }
    let udp = &p[header..total];
    let dst_port = u16::from_be_bytes([udp[2], udp[3]]);
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if dst_port != CLIENT_PORT || udp_len < UDP_HEADER || udp_len > udp.len() {
        return None;
    }
    let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
    Some((src, &udp[UDP_HEADER..udp_len]))
}

/// The classic BPF program of the packet socket: UDP to port 68, not a fragment, else drop.
/// Offsets count from the IP header (an `ETH_P_IP` datagram socket).
pub fn client_port_filter() -> [libc::sock_filter; 9] {
    const LD_B_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
    const LD_H_ABS: u16 = 0x28; // BPF_LD | BPF_H | BPF_ABS
    const LDX_MSH: u16 = 0xb1; // BPF_LDX | BPF_B | BPF_MSH: x = 4 * (p[k] & 0xf)
    const LD_H_IND: u16 = 0x48; // BPF_LD | BPF_H | BPF_IND
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JSET: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    // jumps count instructions after the next one; 8 is the drop
    [
        op(LD_B_ABS, 0, 0, 9),                 // 0: protocol
        op(JEQ, 0, 6, u32::from(PROTO_UDP)),   // 1: not UDP: drop
        op(LD_H_ABS, 0, 0, 6),                 // 2: flags and fragment offset
        op(JSET, 4, 0, 0x3fff),                // 3: a fragment: drop
        op(LDX_MSH, 0, 0, 0),                  // 4: x = IP header length
        op(LD_H_IND, 0, 0, 2),                 // 5: UDP destination port
        op(JEQ, 0, 1, u32::from(CLIENT_PORT)), // 6: not 68: drop
        op(RET, 0, 0, 0xffff),                 // 7: take it
        op(RET, 0, 0, 0),                      // 8: drop
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_reads_back_and_its_checksums_verify() {
        let src = Ipv4Addr::new(10, 1, 2, 3);
        let dst = Ipv4Addr::BROADCAST;
        let mut p = udp_packet(src, dst, b"hello");
        assert_eq!(p.len(), 20 + 8 + 5);
        // a correct header sums to 0xffff (its complement 0)
        assert_eq!(checksum(0, &p[..20]), 0);
        let mut pseudo = [0u8; 12];
        pseudo[..4].copy_from_slice(&src.octets());
        pseudo[4..8].copy_from_slice(&dst.octets());
        pseudo[9] = 17;
        pseudo[10..].copy_from_slice(&13u16.to_be_bytes());
        assert_eq!(checksum(sum_words(0, &pseudo), &p[20..]), 0);
        // a reply to the client port, with Ethernet padding after it
        p[20..24].copy_from_slice(&[0, 67, 0, 68]);
        p.extend_from_slice(&[0; 10]);
        assert_eq!(udp_payload(&p), Some((src, &b"hello"[..])));
    }

    #[test]
    fn fragments_other_ports_and_short_packets_are_refused() {
        let mut p = udp_packet(Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST, b"x");
        p[20..24].copy_from_slice(&[0, 67, 0, 68]);
        assert!(udp_payload(&p).is_some());
        for cut in 0..p.len() {
            assert_eq!(udp_payload(&p[..cut]), None, "cut at {cut}");
        }
        let mut fragment = p.clone();
        fragment[6] = 0x20; // more fragments
        assert_eq!(udp_payload(&fragment), None);
        let mut other_port = p.clone();
        other_port[23] = 69;
        assert_eq!(udp_payload(&other_port), None);
        let mut long_udp = p.clone();
        long_udp[25] = 200;
        assert_eq!(udp_payload(&long_udp), None);
    }
}
