//! resolv.conf(5) parsing into result DNS settings, as the reference's `parseResolvConf`.
use crate::cni::result::Dns;
use std::fmt;

/// The file could not be read; the message is Go's `open <path>: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvError(pub String);

impl fmt::Display for ResolvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

use crate::cni::error::go_errno_text;

/// The most of a resolv.conf that is read. Real ones are a few hundred bytes; without a
/// bound a config naming `/dev/zero` (or a huge file) would exhaust memory instead of
/// failing, where the reference's line scanner fails on its first 64 KiB line.
pub const MAX_RESOLV_CONF: u64 = 1 << 20;

pub fn read(path: &str) -> Result<Dns, ResolvError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| ResolvError(format!("open {path}: {}", go_errno_text(&e))))?;
    let mut text = Vec::new();
    file.take(MAX_RESOLV_CONF + 1)
        .read_to_end(&mut text)
        .map_err(|e| ResolvError(format!("read {path}: {}", go_errno_text(&e))))?;
    if text.len() as u64 > MAX_RESOLV_CONF {
        return Err(ResolvError(format!(
            "read {path}: larger than {MAX_RESOLV_CONF} bytes, not a resolv.conf"
        )));
    }
    Ok(parse(&String::from_utf8_lossy(&text)))
}

/// `nameserver` appends one server, `domain` sets (last wins), `search` and `options`
/// append every word; comments (`#`, `;`), blank and one-word lines are skipped.
pub fn parse(text: &str) -> Dns {
    let mut dns = Dns::default();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 2 {
            continue;
        }
        let rest = fields[1..].iter().map(|s| s.to_string());
        match fields[0] {
            "nameserver" => dns.nameservers.get_or_insert_with(Vec::new).push(fields[1].to_string()),
            "domain" => dns.domain = Some(fields[1].to_string()),
            "search" => dns.search.get_or_insert_with(Vec::new).extend(rest),
            "options" => dns.options.get_or_insert_with(Vec::new).extend(rest),
            _ => {}
        }
    }
    dns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn simple_file() {
        let d = parse("nameserver 192.0.2.0\nnameserver 192.0.2.1\n");
        assert_eq!(d.nameservers, v(&["192.0.2.0", "192.0.2.1"]));
        assert_eq!((d.domain, d.search, d.options), (None, None, None));
    }

    #[test]
    fn ignores_comments() {
        let d = parse("# nameserver 1.1.1.1\n; nameserver 2.2.2.2\n   # indented\nnameserver 192.0.2.0 # trailing words ignored\n");
        assert_eq!(d.nameservers, v(&["192.0.2.0"]));
    }

    #[test]
    fn all_fields() {
        let d = parse(
            "nameserver 192.0.2.3\nsearch a.example b.example\nsearch c.example\noptions ndots:5 attempts:2\n\
             domain first.com\ndomain ex.com\nsortlist 1.2.3.4\nnameserver\n\n",
        );
        assert_eq!(d.nameservers, v(&["192.0.2.3"]));
        assert_eq!(d.domain.as_deref(), Some("ex.com"), "last domain wins");
        assert_eq!(d.search, v(&["a.example", "b.example", "c.example"]));
        assert_eq!(d.options, v(&["ndots:5", "attempts:2"]));
    }

    #[test]
    fn keywords_are_case_sensitive() {
        assert_eq!(parse("Nameserver 1.2.3.4\n"), Dns::default());
    }

    #[test]
    fn an_endless_file_is_refused_not_read_forever() {
        let e = read("/dev/zero").unwrap_err().0;
        assert_eq!(e, "read /dev/zero: larger than 1048576 bytes, not a resolv.conf");
    }

    #[test]
    fn missing_file_is_an_error_with_go_text() {
        assert_eq!(
            read("/nonexistent/resolv.conf").unwrap_err().0,
            "open /nonexistent/resolv.conf: no such file or directory"
        );
    }
}
