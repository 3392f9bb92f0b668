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

/// Why a string is not valid base64: the offset Go's `CorruptInputError` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub usize);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "illegal base64 data at input byte {}", self.0)
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

/// Go's `base64.StdEncoding.Decode`, which `encoding/json` runs on a `[]byte`'s string:
/// padding required, `\r` and `\n` skipped anywhere, bits under the padding ignored (the
/// encoding is not `Strict`), and an error at the offset Go names, since users see it.
pub fn decode(text: &str) -> Result<Vec<u8>, DecodeError> {
    let src = text.as_bytes();
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    while si < src.len() {
        si = quantum(src, si, &mut out)?;
    }
    Ok(out)
}

fn is_newline(c: u8) -> bool {
    c == b'\n' || c == b'\r'
}

/// One group of four from `si` (Go's `decodeQuantum`, offsets and all): where the next
/// group starts.
fn quantum(src: &[u8], mut si: usize, out: &mut Vec<u8>) -> Result<usize, DecodeError> {
    let mut sextets = [0u32; 4];
    let mut len = 4;
    let mut j = 0;
    while j < 4 {
        let Some(&c) = src.get(si) else {
            if j == 0 {
                return Ok(si);
            }
            return Err(DecodeError(si - j));
        };
        si += 1;
        if let Some(v) = value(c) {
            sextets[j] = v;
            j += 1;
            continue;
        }
        if is_newline(c) {
            continue;
        }
        if c != b'=' || j < 2 {
            return Err(DecodeError(si - 1));
        }
        if j == 2 {
            // "==" is due: the first one is read
            while src.get(si).copied().is_some_and(is_newline) {
                si += 1;
            }
            match src.get(si) {
                None => return Err(DecodeError(src.len())),
                Some(b'=') => si += 1,
                Some(_) => return Err(DecodeError(si - 1)),
            }
        }
        while src.get(si).copied().is_some_and(is_newline) {
            si += 1;
        }
        if si < src.len() {
            return Err(DecodeError(si));
        }
        len = j;
        break;
    }
    let n = sextets[0] << 18 | sextets[1] << 12 | sextets[2] << 6 | sextets[3];
    out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..len - 1]);
    Ok(si)
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

    /// Go's answers (go1.19.8, `json.Unmarshal` into a `[]byte`, as Debian's reference is
    /// built): before, a length not a multiple of 4 had words of cnibox's own ("illegal
    /// base64 data: length 1 is not a multiple of 4" where Go says "at input byte 0", in
    /// static's `Mask`), trailing data after padding was named at another offset, and
    /// newlines and bits under the padding, which Go accepts, were refused.
    #[test]
    fn decodes_and_refuses_as_go_with_gos_offsets() {
        let err = |s: &str| decode(s).unwrap_err().to_string();
        for (text, at) in [
            ("x", 0),
            ("Zm9", 0),
            ("Zm9-", 3),
            ("Zg==Zm9v", 4),
            ("Z===", 1),
            ("Zm 9", 2),
            ("Zm9vYg=", 7),
            ("Zm9vYg", 4),
            ("Zm9vY", 4),
            ("Zg=x", 2),
        ] {
            assert_eq!(err(text), format!("illegal base64 data at input byte {at}"), "{text:?}");
        }
        for (text, plain) in [
            ("Zh==", "f"),
            ("Zm9v\nYg==", "foob"),
            ("Zg=\n=", "f"),
            ("Zg==\n", "f"),
            ("\n", ""),
        ] {
            assert_eq!(decode(text).unwrap(), plain.as_bytes(), "{text:?}");
        }
    }
}
