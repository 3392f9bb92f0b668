//! Attribute bytes for netfilter messages. netfilter attributes carry numbers in network
//! byte order and expect `NLA_F_NESTED` on nests, which is easier to write by hand than
//! through neli's generic builders.
use crate::netlink::bytes::{c_string, host16, net16, net32, net64, read_net32, read_net64};
use crate::netlink::wire::NLA_F_NESTED;

/// A growing list of netlink attributes (4-byte aligned TLVs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs(Vec<u8>);

impl Attrs {
    pub fn new() -> Attrs {
        Attrs::default()
    }

    /// An attribute with raw payload bytes.
    pub fn bytes(&mut self, ty: u16, payload: &[u8]) -> &mut Attrs {
        let len = 4 + payload.len();
        self.0.extend_from_slice(&host16(len as u16));
        self.0.extend_from_slice(&host16(ty));
        self.0.extend_from_slice(payload);
        self.0.resize((self.0.len() + 3) & !3, 0);
        self
    }

    /// A NUL-terminated string.
    pub fn string(&mut self, ty: u16, s: &str) -> &mut Attrs {
        self.bytes(ty, &c_string(s))
    }

    /// A 32-bit number in network byte order.
    pub fn be32(&mut self, ty: u16, v: u32) -> &mut Attrs {
        self.bytes(ty, &net32(v))
    }

    /// A 16-bit number in network byte order.
    pub fn be16(&mut self, ty: u16, v: u16) -> &mut Attrs {
        self.bytes(ty, &net16(v))
    }

    /// A 64-bit number in network byte order.
    pub fn be64(&mut self, ty: u16, v: u64) -> &mut Attrs {
        self.bytes(ty, &net64(v))
    }

    pub fn u8(&mut self, ty: u16, v: u8) -> &mut Attrs {
        self.bytes(ty, &[v])
    }

    /// A nest (flagged `NLA_F_NESTED`) filled by `fill`.
    pub fn nest(&mut self, ty: u16, fill: impl FnOnce(&mut Attrs)) -> &mut Attrs {
        let mut inner = Attrs::new();
        fill(&mut inner);
        self.bytes(ty | NLA_F_NESTED, &inner.0)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A big-endian u32 attribute payload.
pub(crate) fn be32(p: &[u8]) -> Option<u32> {
    read_net32(p)
}

/// A big-endian u64 attribute payload.
pub(crate) fn be64(p: &[u8]) -> Option<u64> {
    read_net64(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_padded_big_endian_and_nests_are_flagged() {
        let mut a = Attrs::new();
        a.string(1, "ab").be32(2, 0x0102_0304).nest(4, |n| {
            n.u8(1, 7);
        });
        assert_eq!(
            a.as_bytes(),
            &[7, 0, 1, 0, b'a', b'b', 0, 0, 8, 0, 2, 0, 1, 2, 3, 4, 12, 0, 4, 0x80, 5, 0, 1, 0, 7, 0, 0, 0]
        );
    }
}
