//! DHCPv4 messages (RFC 2131, options of RFC 2132, 3396 and 3442): the client's messages
//! built, the servers' replies parsed. Replies come from the network into a root process,
//! so [`Reply::parse`] takes any bytes and either refuses them or returns a message whose
//! every accessor is bounded; it is the target `dhcp_reply` of `make fuzz`.
use std::net::Ipv4Addr;

pub const BOOTREQUEST: u8 = 1;
pub const BOOTREPLY: u8 = 2;
const HTYPE_ETHERNET: u8 = 1;
const MAGIC_COOKIE: [u8; 4] = [99, 130, 83, 99];
/// op … chaddr, sname, file: the BOOTP part before the cookie.
const FIXED_LEN: usize = 236;
const SNAME: std::ops::Range<usize> = 44..108;
const FILE: std::ops::Range<usize> = 108..236;
/// RFC 951's message size: some servers and relays drop shorter requests.
const BOOTP_MIN_LEN: usize = 300;
/// The flags bit asking the server to broadcast its reply.
pub const FLAG_BROADCAST: u16 = 0x8000;
/// The largest reply read: an Ethernet frame's IP payload.
pub const MAX_SIZE: u16 = 1500;

/// Option codes used here.
pub mod opt {
    pub const PAD: u8 = 0;
    pub const SUBNET_MASK: u8 = 1;
    pub const ROUTER: u8 = 3;
    pub const HOST_NAME: u8 = 12;
    pub const STATIC_ROUTES: u8 = 33;
    pub const REQUESTED_IP: u8 = 50;
    pub const LEASE_TIME: u8 = 51;
    pub const OVERLOAD: u8 = 52;
    pub const MESSAGE_TYPE: u8 = 53;
    pub const SERVER_ID: u8 = 54;
    pub const PARAMETER_REQUEST_LIST: u8 = 55;
    pub const MESSAGE: u8 = 56;
    pub const MAX_MESSAGE_SIZE: u8 = 57;
    pub const RENEWAL_TIME: u8 = 58;
    pub const REBINDING_TIME: u8 = 59;
    pub const CLASS_ID: u8 = 60;
    pub const CLIENT_ID: u8 = 61;
    pub const USER_CLASS: u8 = 77;
    pub const CLASSLESS_ROUTES: u8 = 121;
    pub const END: u8 = 255;
}

/// Option 53.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    Discover = 1,
    Offer = 2,
    Request = 3,
    Decline = 4,
    Ack = 5,
    Nak = 6,
    Release = 7,
    Inform = 8,
}

impl MessageType {
    fn from_raw(n: u8) -> Option<MessageType> {
        use MessageType::*;
        Some(match n {
            1 => Discover,
            2 => Offer,
            3 => Request,
            4 => Decline,
            5 => Ack,
            6 => Nak,
            7 => Release,
            8 => Inform,
            _ => return None,
        })
    }
}

/// A client message to send: the BOOTP fields a client sets, and its options in order.
pub struct Request<'a> {
    pub kind: MessageType,
    pub xid: u32,
    pub secs: u16,
    pub flags: u16,
    pub ciaddr: Ipv4Addr,
    pub chaddr: [u8; 6],
    /// Options after the message type, each written once (split per RFC 3396 when longer
    /// than 255 bytes).
    pub options: &'a [(u8, &'a [u8])],
}

impl Request<'_> {
    /// The message as sent: padded to BOOTP's 300 bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut m = vec![0u8; FIXED_LEN];
        m[0] = BOOTREQUEST;
        m[1] = HTYPE_ETHERNET;
        m[2] = 6;
        m[4..8].copy_from_slice(&self.xid.to_be_bytes());
        m[8..10].copy_from_slice(&self.secs.to_be_bytes());
        m[10..12].copy_from_slice(&self.flags.to_be_bytes());
        m[12..16].copy_from_slice(&self.ciaddr.octets());
        m[28..34].copy_from_slice(&self.chaddr);
        m.extend_from_slice(&MAGIC_COOKIE);
        m.extend_from_slice(&[opt::MESSAGE_TYPE, 1, self.kind as u8]);
        for (code, value) in self.options {
            put_option(&mut m, *code, value);
        }
        m.push(opt::END);
        if m.len() < BOOTP_MIN_LEN {
            m.resize(BOOTP_MIN_LEN, opt::PAD);
        }
        m
    }
}

fn put_option(m: &mut Vec<u8>, code: u8, value: &[u8]) {
    if value.is_empty() {
        m.extend_from_slice(&[code, 0]);
    }
    for chunk in value.chunks(255) {
        m.extend_from_slice(&[code, chunk.len() as u8]);
        m.extend_from_slice(chunk);
    }
}

/// A server's message, parsed. Options are concatenated per code as RFC 3396 says, from
/// the options field and, when option 52 says so, the `file` and `sname` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub xid: u32,
    pub ciaddr: Ipv4Addr,
    pub yiaddr: Ipv4Addr,
    pub chaddr: [u8; 16],
    /// `(code, value)` in order of first appearance, one entry per code.
    options: Vec<(u8, Vec<u8>)>,
}

/// Why a packet was not taken for a DHCP reply.
pub type Refusal = &'static str;

impl Reply {
    /// Parses a BOOTREPLY from a UDP payload; anything else is refused.
    pub fn parse(b: &[u8]) -> Result<Reply, Refusal> {
        if b.len() < FIXED_LEN + MAGIC_COOKIE.len() {
            return Err("shorter than a BOOTP message");
        }
        if b[0] != BOOTREPLY {
            return Err("not a BOOTREPLY");
        }
        if b[FIXED_LEN..FIXED_LEN + 4] != MAGIC_COOKIE {
            return Err("no DHCP magic cookie");
        }
        let ip = |at: usize| Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3]);
        let mut chaddr = [0u8; 16];
        chaddr.copy_from_slice(&b[28..44]);
        let mut reply = Reply {
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            ciaddr: ip(12),
            yiaddr: ip(16),
            chaddr,
            options: Vec::new(),
        };
        reply.read_options(&b[FIXED_LEN + 4..], true)?;
        // RFC 2131 4.1: file first, then sname, when option 52 moved options there
        let overload = reply
            .option(opt::OVERLOAD)
            .and_then(|v| v.first().copied())
            .unwrap_or(0);
        if overload & 1 != 0 {
            reply.read_options(&b[FILE], false)?;
        }
        if overload & 2 != 0 {
            reply.read_options(&b[SNAME], false)?;
        }
        if reply.message_type().is_none() {
            return Err("no valid message type option");
        }
        Ok(reply)
    }

    fn read_options(&mut self, mut b: &[u8], main: bool) -> Result<(), Refusal> {
        loop {
            match b {
                [] if main => return Err("options end without the END option"),
                [] | [opt::END, ..] => return Ok(()),
                [opt::PAD, rest @ ..] => b = rest,
                [code, len, rest @ ..] if rest.len() >= usize::from(*len) => {
                    let (value, rest) = rest.split_at(usize::from(*len));
                    match self.options.iter_mut().find(|(c, _)| c == code) {
                        Some((_, v)) => v.extend_from_slice(value),
                        None => self.options.push((*code, value.to_vec())),
                    }
                    b = rest;
                }
                _ => return Err("an option runs past the end of the message"),
            }
        }
    }

    /// The value of option `code` (all its instances concatenated).
    pub fn option(&self, code: u8) -> Option<&[u8]> {
        self.options.iter().find(|(c, _)| *c == code).map(|(_, v)| v.as_slice())
    }

    pub fn message_type(&self) -> Option<MessageType> {
        match self.option(opt::MESSAGE_TYPE)? {
            [t] => MessageType::from_raw(*t),
            _ => None,
        }
    }

    /// Option 54, when it is one address.
    pub fn server_id(&self) -> Option<Ipv4Addr> {
        self.option(opt::SERVER_ID).and_then(ipv4)
    }

    /// Option 1 as a prefix length, when it is a contiguous mask.
    pub fn prefix_len(&self) -> Option<u8> {
        let mask = u32::from(self.option(opt::SUBNET_MASK).and_then(ipv4)?);
        let ones = mask.leading_ones();
        (mask.checked_shl(ones).unwrap_or(0) == 0).then_some(ones as u8)
    }

    /// The first address of option 3.
    pub fn router(&self) -> Option<Ipv4Addr> {
        let v = self.option(opt::ROUTER)?;
        (v.len() >= 4 && v.len() % 4 == 0).then(|| ipv4(&v[..4])).flatten()
    }

    /// A 32-bit seconds option (51, 58, 59).
    pub fn seconds(&self, code: u8) -> Option<u32> {
        let v: [u8; 4] = self.option(code)?.try_into().ok()?;
        Some(u32::from_be_bytes(v))
    }

    /// Option 56, the server's reason (a NAK's), printable bytes only.
    pub fn text(&self) -> String {
        let v = self.option(opt::MESSAGE).unwrap_or_default();
        v.iter()
            .take(255)
            .map(|&c| if (0x20..0x7f).contains(&c) { c as char } else { '?' })
            .collect()
    }

    /// Option 121 (RFC 3442): (destination, prefix, router); `None` when absent or
    /// malformed (then, as the reference does, options 33 and 3 apply).
    pub fn classless_routes(&self) -> Option<Vec<(Ipv4Addr, u8, Ipv4Addr)>> {
        let mut b = self.option(opt::CLASSLESS_ROUTES)?;
        let mut routes = vec![];
        while let [width, rest @ ..] = b {
            if *width > 32 {
                return None;
            }
            let significant = usize::from(width.div_ceil(8));
            if rest.len() < significant + 4 {
                return None;
            }
            let mut dst = [0u8; 4];
            dst[..significant].copy_from_slice(&rest[..significant]);
            let mask = u32::MAX.checked_shl(32 - u32::from(*width)).unwrap_or(0);
            let dst = Ipv4Addr::from(u32::from_be_bytes(dst) & mask);
            let router = ipv4(&rest[significant..significant + 4])?;
            routes.push((dst, *width, router));
            b = &rest[significant + 4..];
        }
        (!routes.is_empty()).then_some(routes)
    }

    /// Option 33: (destination, classful prefix, router) pairs; destinations of class D
    /// and E, which have no classful mask, are left out.
    pub fn static_routes(&self) -> Vec<(Ipv4Addr, u8, Ipv4Addr)> {
        let v = self.option(opt::STATIC_ROUTES).unwrap_or_default();
        v.chunks_exact(8)
            .filter_map(|pair| {
                let dst = ipv4(&pair[..4])?;
                let prefix = match dst.octets()[0] {
                    0..=127 => 8,
                    128..=191 => 16,
                    192..=223 => 24,
                    _ => return None,
                };
                Some((dst, prefix, ipv4(&pair[4..])?))
            })
            .collect()
    }
}

fn ipv4(b: &[u8]) -> Option<Ipv4Addr> {
    let octets: [u8; 4] = b.try_into().ok()?;
    Some(Ipv4Addr::from(octets))
}

/// True for an address a host may hold: not 0/8, loopback, link-local broadcast,
/// multicast or class E.
pub fn is_host_address(a: Ipv4Addr) -> bool {
    let first = a.octets()[0];
    first != 0 && first != 127 && first < 224
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A reply as a server would send it: `options` raw after the cookie.
    pub(crate) fn reply_bytes(xid: u32, yiaddr: [u8; 4], mac: [u8; 6], options: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; FIXED_LEN];
        m[0] = BOOTREPLY;
        m[1] = 1;
        m[2] = 6;
        m[4..8].copy_from_slice(&xid.to_be_bytes());
        m[16..20].copy_from_slice(&yiaddr);
        m[28..34].copy_from_slice(&mac);
        m.extend_from_slice(&MAGIC_COOKIE);
        m.extend_from_slice(options);
        m
    }

    #[test]
    fn a_request_is_padded_and_carries_its_options_in_order() {
        let m = Request {
            kind: MessageType::Discover,
            xid: 0x01020304,
            secs: 3,
            flags: FLAG_BROADCAST,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            chaddr: [2, 0, 0, 0, 0, 1],
            options: &[(opt::CLIENT_ID, b"\0id"), (opt::PARAMETER_REQUEST_LIST, &[3, 1])],
        }
        .encode();
        assert_eq!(m.len(), 300);
        assert_eq!(&m[..4], &[1, 1, 6, 0]);
        assert_eq!(&m[4..12], &[1, 2, 3, 4, 0, 3, 0x80, 0]);
        assert_eq!(&m[28..34], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(
            &m[240..256],
            &[53, 1, 1, 61, 3, 0, b'i', b'd', 55, 2, 3, 1, 255, 0, 0, 0]
        );
    }

    #[test]
    fn a_long_option_is_split_and_read_back_whole() {
        let long = vec![7u8; 300];
        let mut m = Request {
            kind: MessageType::Request,
            xid: 9,
            secs: 0,
            flags: 0,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            chaddr: [0; 6],
            options: &[(opt::USER_CLASS, &long)],
        }
        .encode();
        m[0] = BOOTREPLY;
        let r = Reply::parse(&m).unwrap();
        assert_eq!(r.option(opt::USER_CLASS), Some(&long[..]));
        assert_eq!(r.message_type(), Some(MessageType::Request));
    }

    #[test]
    fn options_overloaded_into_file_and_sname_are_read() {
        let mut m = reply_bytes(1, [10, 0, 0, 5], [0; 6], &[53, 1, 5, 52, 1, 3, 255]);
        m[FILE.start..FILE.start + 7].copy_from_slice(&[1, 4, 255, 255, 255, 0, 255]);
        m[SNAME.start..SNAME.start + 7].copy_from_slice(&[3, 4, 10, 0, 0, 1, 255]);
        let r = Reply::parse(&m).unwrap();
        assert_eq!(r.prefix_len(), Some(24));
        assert_eq!(r.router(), Some(Ipv4Addr::new(10, 0, 0, 1)));
        // without option 52 the same fields are a file name and a server name
        let mut plain = m.clone();
        plain[FIXED_LEN + 4 + 3..FIXED_LEN + 4 + 6].copy_from_slice(&[0, 0, 0]);
        assert_eq!(Reply::parse(&plain).unwrap().prefix_len(), None);
    }

    #[test]
    fn truncated_and_foreign_messages_are_refused() {
        let good = reply_bytes(1, [10, 0, 0, 5], [0; 6], &[53, 1, 2, 255]);
        assert!(Reply::parse(&good).is_ok());
        for cut in 0..good.len() - 1 {
            assert!(Reply::parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut request = good.clone();
        request[0] = BOOTREQUEST;
        assert_eq!(Reply::parse(&request), Err("not a BOOTREPLY"));
        let runs_past = reply_bytes(1, [0; 4], [0; 6], &[53, 1, 2, 3, 200, 1, 255]);
        assert!(Reply::parse(&runs_past).is_err());
        let no_type = reply_bytes(1, [0; 4], [0; 6], &[1, 4, 255, 255, 255, 0, 255]);
        assert_eq!(Reply::parse(&no_type), Err("no valid message type option"));
    }

    #[test]
    fn masks_must_be_contiguous() {
        let with_mask = |mask: [u8; 4]| {
            let mut o = vec![53, 1, 5, 1, 4];
            o.extend_from_slice(&mask);
            o.push(255);
            Reply::parse(&reply_bytes(1, [0; 4], [0; 6], &o)).unwrap().prefix_len()
        };
        assert_eq!(with_mask([255, 255, 255, 0]), Some(24));
        assert_eq!(with_mask([255, 255, 255, 255]), Some(32));
        assert_eq!(with_mask([0, 0, 0, 0]), Some(0));
        assert_eq!(with_mask([255, 0, 255, 0]), None);
    }

    #[test]
    fn classless_routes_as_rfc_3442_encodes_them() {
        // 10.16.0.0/12 via 10.0.0.1, default via 10.0.0.2, 192.168.5.0/24 on-link
        let o = [
            53, 1, 5, 121, 20, 12, 10, 16, 10, 0, 0, 1, 0, 10, 0, 0, 2, 24, 192, 168, 5, 0, 0, 0, 0, 255,
        ];
        let r = Reply::parse(&reply_bytes(1, [0; 4], [0; 6], &o)).unwrap();
        assert_eq!(
            r.classless_routes().unwrap(),
            vec![
                (Ipv4Addr::new(10, 16, 0, 0), 12, Ipv4Addr::new(10, 0, 0, 1)),
                (Ipv4Addr::UNSPECIFIED, 0, Ipv4Addr::new(10, 0, 0, 2)),
                (Ipv4Addr::new(192, 168, 5, 0), 24, Ipv4Addr::UNSPECIFIED),
            ]
        );
        let truncated = [53, 1, 5, 121, 4, 24, 192, 168, 5, 255];
        let r = Reply::parse(&reply_bytes(1, [0; 4], [0; 6], &truncated)).unwrap();
        assert_eq!(r.classless_routes(), None);
        let too_wide = [53, 1, 5, 121, 5, 33, 1, 2, 3, 4, 255];
        let r = Reply::parse(&reply_bytes(1, [0; 4], [0; 6], &too_wide)).unwrap();
        assert_eq!(r.classless_routes(), None);
    }

    #[test]
    fn static_routes_take_classful_masks() {
        let o = [
            53, 1, 5, 33, 24, 10, 1, 0, 0, 10, 0, 0, 1, 172, 16, 0, 0, 10, 0, 0, 1, 224, 0, 0, 1, 10, 0, 0, 1, 255,
        ];
        let r = Reply::parse(&reply_bytes(1, [0; 4], [0; 6], &o)).unwrap();
        assert_eq!(
            r.static_routes(),
            vec![
                (Ipv4Addr::new(10, 1, 0, 0), 8, Ipv4Addr::new(10, 0, 0, 1)),
                (Ipv4Addr::new(172, 16, 0, 0), 16, Ipv4Addr::new(10, 0, 0, 1)),
            ]
        );
    }
}
