//! The kernel's binary formats, byte by byte, in one place: byte order, C structs and C
//! strings. Nothing here assumes x86_64: every rule holds on big-endian (s390x, ppc64) and
//! 32-bit (armv7, i686) targets, and the unit tests pin the exact bytes for both orders.
//!
//! * **Host order** (`host*`): netlink message headers and attribute headers, rtnetlink
//!   and tc attributes and structs, and the nf_tables register values the kernel compares
//!   as host integers (packet marks, conntrack state bits, route types).
//! * **Network order** (`net*`): nfnetlink attribute numbers (the kernel reads them with
//!   `ntohl`), the `nfgenmsg` resource id, nf_tables data compared against packet bytes
//!   (ports, protocols, addresses), and tc's filter protocol (`htons(ETH_P_ALL)`).
//! * **C structs** ([`CStruct`]): fields at the offsets of the kernel's UAPI headers in a
//!   zeroed buffer. The structs written this way (`tcmsg`, `tc_tbf_qopt`, `tc_mirred`,
//!   `tc_u32_sel`, `bridge_vlan_info`, `xt_conntrack_mtinfo`) have fixed-width fields only,
//!   so their offsets and padding are the same on every Linux architecture; none holds a
//!   `long` or a pointer, whose width differs.
//! * **C strings**: bytes and a NUL ([`c_string`], [`from_c_string`]), never `c_char`,
//!   whose signedness differs between architectures (signed on x86, unsigned on arm64).

macro_rules! orders {
    ($($ty:ty: $host:ident $net:ident $read_host:ident $read_net:ident;)*) => {$(
        #[doc = concat!("A `", stringify!($ty), "` in host order.")]
        pub fn $host(v: $ty) -> [u8; std::mem::size_of::<$ty>()] {
            v.to_ne_bytes()
        }

        #[doc = concat!("A `", stringify!($ty), "` in network order (big-endian).")]
        pub fn $net(v: $ty) -> [u8; std::mem::size_of::<$ty>()] {
            v.to_be_bytes()
        }

        #[doc = concat!("The host-order `", stringify!($ty), "` at the start of `p`.")]
        pub fn $read_host(p: &[u8]) -> Option<$ty> {
            Some(<$ty>::from_ne_bytes(p.get(..std::mem::size_of::<$ty>())?.try_into().ok()?))
        }

        #[doc = concat!("The network-order `", stringify!($ty), "` at the start of `p`.")]
        pub fn $read_net(p: &[u8]) -> Option<$ty> {
            Some(<$ty>::from_be_bytes(p.get(..std::mem::size_of::<$ty>())?.try_into().ok()?))
        }
    )*};
}

orders! {
    u16: host16 net16 read_host16 read_net16;
    u32: host32 net32 read_host32 read_net32;
    u64: host64 net64 read_host64 read_net64;
    i32: host_i32 net_i32 read_host_i32 read_net_i32;
}

/// `htons`: the u16 that holds `v` in network order when stored in host order (a field
/// such as tc's filter protocol, which the kernel keeps as a network-order `__be16`).
pub fn to_net_u16(v: u16) -> u16 {
    u16::from_ne_bytes(v.to_be_bytes())
}

/// `ntohs`: the inverse of [`to_net_u16`].
pub fn from_net_u16(v: u16) -> u16 {
    u16::from_be_bytes(v.to_ne_bytes())
}

/// A C string: the bytes and a terminating NUL.
pub fn c_string(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 1);
    v.extend_from_slice(s.as_bytes());
    v.push(0);
    v
}

/// The text of a C string: up to the first NUL (or the end), lossy UTF-8.
pub fn from_c_string(p: &[u8]) -> String {
    let end = p.iter().position(|b| *b == 0).unwrap_or(p.len());
    String::from_utf8_lossy(&p[..end]).into_owned()
}

/// A C struct of fixed-width fields, written at their UAPI offsets into zeroed bytes
/// (padding and unnamed fields stay zero), in host order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CStruct(Vec<u8>);

impl CStruct {
    /// `size` zero bytes: `sizeof(struct …)`.
    pub fn zeroed(size: usize) -> CStruct {
        CStruct(vec![0; size])
    }

    fn put(mut self, offset: usize, bytes: &[u8]) -> CStruct {
        self.0[offset..offset + bytes.len()].copy_from_slice(bytes);
        self
    }

    pub fn u8(self, offset: usize, v: u8) -> CStruct {
        self.put(offset, &[v])
    }

    pub fn u16(self, offset: usize, v: u16) -> CStruct {
        self.put(offset, &host16(v))
    }

    pub fn u32(self, offset: usize, v: u32) -> CStruct {
        self.put(offset, &host32(v))
    }

    pub fn i32(self, offset: usize, v: i32) -> CStruct {
        self.put(offset, &host_i32(v))
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LITTLE: bool = cfg!(target_endian = "little");

    /// `little` on little-endian targets, `big` on big-endian ones.
    fn per_order<const N: usize>(little: [u8; N], big: [u8; N]) -> [u8; N] {
        if LITTLE {
            little
        } else {
            big
        }
    }

    #[test]
    fn host_order_is_the_targets_own() {
        assert_eq!(host16(0x0102), per_order([0x02, 0x01], [0x01, 0x02]));
        assert_eq!(host32(0x0102_0304), per_order([4, 3, 2, 1], [1, 2, 3, 4]));
        assert_eq!(
            host64(0x0102_0304_0506_0708),
            per_order([8, 7, 6, 5, 4, 3, 2, 1], [1, 2, 3, 4, 5, 6, 7, 8])
        );
        assert_eq!(
            host_i32(-2),
            per_order([0xfe, 0xff, 0xff, 0xff], [0xff, 0xff, 0xff, 0xfe])
        );
        assert_eq!(read_host16(&per_order([0x02, 0x01], [0x01, 0x02])), Some(0x0102));
        assert_eq!(read_host32(&per_order([4, 3, 2, 1], [1, 2, 3, 4])), Some(0x0102_0304));
        assert_eq!(read_host_i32(&[0xff; 4]), Some(-1));
        assert_eq!(read_host32(&[1, 2, 3]), None, "too short");
    }

    #[test]
    fn network_order_is_big_endian_everywhere() {
        assert_eq!(net16(8080), [0x1f, 0x90]);
        assert_eq!(net32(0x0a00_0001), [10, 0, 0, 1]);
        assert_eq!(net64(1 << 32), [0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(read_net16(&[0x1f, 0x90, 0xff]), Some(8080));
        assert_eq!(read_net32(&[10, 0, 0, 1]), Some(0x0a00_0001));
        assert_eq!(read_net64(&[0, 0, 0, 1, 0, 0, 0, 0]), Some(1 << 32));
        assert_eq!(read_net16(&[1]), None);
    }

    #[test]
    fn htons_stores_network_order_in_a_host_field() {
        // ETH_P_ALL (3) as tc keeps it: the bytes 00 03 in memory on every target
        assert_eq!(to_net_u16(3).to_ne_bytes(), [0x00, 0x03]);
        assert_eq!(from_net_u16(to_net_u16(0x86dd)), 0x86dd);
        assert_eq!(to_net_u16(3), if LITTLE { 0x0300 } else { 3 });
    }

    #[test]
    fn c_strings_are_bytes_and_a_nul() {
        assert_eq!(c_string("eth0"), b"eth0\0");
        assert_eq!(from_c_string(b"eth0\0\0\0\0"), "eth0");
        assert_eq!(from_c_string(b"no-nul"), "no-nul");
        // bytes above 0x7f stay bytes (a signed c_char would make them negative)
        assert_eq!(c_string("é"), [0xc3, 0xa9, 0]);
    }

    #[test]
    fn c_structs_put_fields_at_their_offsets_and_keep_padding_zero() {
        let s = CStruct::zeroed(12)
            .u8(0, 7)
            .u16(2, 0x0102)
            .u32(4, 0x0304_0506)
            .i32(8, -1);
        let [a, b] = host16(0x0102);
        let [c, d, e, f] = host32(0x0304_0506);
        assert_eq!(s.into_bytes(), [7, 0, a, b, c, d, e, f, 0xff, 0xff, 0xff, 0xff]);
    }
}
