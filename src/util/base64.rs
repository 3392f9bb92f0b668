//! Base64 with the standard alphabet and padding (RFC 4648 §4): the encoding Go's
//! `encoding/json` uses for `[]byte`, which is how libcni stores the config in its cache.
use std::fmt;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Why a string is not valid base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The length is not a multiple of 4.
    Length(usize),
    /// A byte outside the alphabet (or padding in the middle) at this offset.
    Byte(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Length(n) => write!(f, "illegal base64 data: length {n} is not a multiple of 4"),
            DecodeError::Byte(at) => write!(f, "illegal base64 data at input byte {at}"),
        }
    }
}

impl std::error::Error for DecodeError {}

fn value(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some(u32::from(c - b'A')),
        b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Strict decoding, as Go's `StdEncoding` (padding required, no whitespace, zero pad bits).
pub fn decode(text: &str) -> Result<Vec<u8>, DecodeError> {
    let bytes = text.as_bytes();
    if bytes.len() % 4 != 0 {
        return Err(DecodeError::Length(bytes.len()));
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let groups = bytes.len() / 4;
    for (g, quad) in bytes.chunks_exact(4).enumerate() {
        let last = g + 1 == groups;
        let pad = if last {
            quad.iter().rev().take_while(|&&c| c == b'=').count()
        } else {
            0
        };
        if pad > 2 {
            return Err(DecodeError::Byte(g * 4 + 4 - pad));
        }
        let mut n = 0u32;
        for (i, &c) in quad[..4 - pad].iter().enumerate() {
            n |= value(c).ok_or(DecodeError::Byte(g * 4 + i))? << (18 - 6 * i);
        }
        let full = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = 3 - pad;
        // Non-zero bits hidden under the padding mean the text was not produced by an encoder.
        if full[keep..].iter().any(|&b| b != 0) {
            return Err(DecodeError::Byte(g * 4 + 3 - pad));
        }
        out.extend_from_slice(&full[..keep]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 4648 §10 test vectors.
    const VECTORS: [(&str, &str); 7] = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ];

    #[test]
    fn rfc4648_vectors() {
        for (plain, encoded) in VECTORS {
            assert_eq!(encode(plain.as_bytes()), encoded);
            assert_eq!(decode(encoded).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn all_byte_values_round_trip() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for len in [0, 1, 2, 3, 254, 255, 256, 1000] {
            assert_eq!(decode(&encode(&data[..len])).unwrap(), &data[..len]);
        }
        assert_eq!(encode(&[0xfb, 0xff, 0xbf]), "+/+/");
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(decode("Zm9"), Err(DecodeError::Length(3)));
        assert_eq!(decode("Zm9-"), Err(DecodeError::Byte(3)));
        assert_eq!(decode("Zg==Zm9v"), Err(DecodeError::Byte(2)));
        assert_eq!(decode("Z==="), Err(DecodeError::Byte(1)));
        // "Zh==" decodes to 'f' with a stray bit under the padding.
        assert_eq!(decode("Zh=="), Err(DecodeError::Byte(1)));
        assert_eq!(
            decode("Zm 9").unwrap_err().to_string(),
            "illegal base64 data at input byte 2"
        );
    }
}
