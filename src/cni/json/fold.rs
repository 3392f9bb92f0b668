//! Go's `encoding/json` key folding (`fold.go`): an object key that is not a field's exact
//! name still fills the field when the two are equal under Unicode simple case folding.
//!
//! Field names here are ASCII (every reference struct's are), so a key matches a field when
//! each of its characters folds to the field's character: ASCII letters in either case, and
//! the two non-ASCII characters whose fold orbit contains an ASCII letter, the Kelvin sign
//! `K` (U+212A, with `K` and `k`) and the long s `ſ` (U+017F, with `S` and `s`). Every other
//! non-ASCII character folds to a non-ASCII one and cannot match an ASCII name.

/// The representative Go's `foldRune` gives `c` when it is ASCII or folds to ASCII.
fn fold_to_ascii(c: char) -> Option<u8> {
    match c {
        '\u{212A}' => Some(b'K'),
        '\u{017F}' => Some(b'S'),
        c if c.is_ascii() => Some((c as u8).to_ascii_uppercase()),
        _ => None,
    }
}

/// Whether Go matches object key `key` to a struct field named `field` (ASCII) by folding.
pub fn matches(key: &str, field: &str) -> bool {
    debug_assert!(field.is_ascii(), "field names are ASCII: {field}");
    let mut want = field.bytes();
    for c in key.chars() {
        match (fold_to_ascii(c), want.next()) {
            (Some(k), Some(f)) if k == f.to_ascii_uppercase() => {}
            _ => return false,
        }
    }
    want.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn ascii_letters_fold_in_either_case() {
        for key in ["hostPort", "HostPort", "hostport", "HOSTPORT", "hOsTpOrT"] {
            assert!(matches(key, "hostPort"), "{key}");
        }
        assert!(matches("IPMasq", "ipMasq"));
        assert!(matches("bandWidth", "bandwidth"));
    }

    #[test]
    fn other_characters_must_be_equal() {
        assert!(!matches("host_port", "hostPort"));
        assert!(!matches("hostPort ", "hostPort"));
        assert!(!matches("hostPor", "hostPort"));
        assert!(!matches("", "mtu"));
        assert!(matches("cni.dev/valid-attachments", "cni.dev/valid-attachments"));
        assert!(!matches("cni.dev/valid_attachments", "cni.dev/valid-attachments"));
        // '@' and '`' sit next to 'A' and 'a' and '[' next to 'Z': ASCII folding touches letters only
        assert!(!matches("@", "`"));
        assert!(!matches("[", "{"));
    }

    #[test]
    fn kelvin_sign_and_long_s_fold_to_ascii() {
        // U+212A KELVIN SIGN folds with K/k, U+017F LATIN SMALL LETTER LONG S with S/s
        assert!(matches("\u{212A}ey", "key"));
        assert!(matches("\u{017F}ubnet", "subnet"));
        assert!(matches("ma\u{017F}qAll", "masqAll"));
        // other non-ASCII look-alikes do not (Turkish dotless i, Cyrillic a)
        assert!(!matches("\u{0131}pMasq", "ipMasq"));
        assert!(!matches("n\u{0430}me", "name"));
    }
}
