//! Small value types shared by the link, address and route operations.
use std::fmt;
use std::str::FromStr;

/// A 48-bit Ethernet MAC address; prints as lowercase `aa:bb:cc:dd:ee:ff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// A MAC address that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacParseError(pub String);

impl fmt::Display for MacParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid MAC address {:?}", self.0)
    }
}

impl std::error::Error for MacParseError {}

impl FromStr for MacAddr {
    type Err = MacParseError;

    /// Accepts `aa:bb:cc:dd:ee:ff` and `aa-bb-cc-dd-ee-ff`, any case (like Go's ParseMAC for 48 bits).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || MacParseError(s.to_string());
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for b in out.iter_mut() {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 {
                return Err(bad());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

/// Which addresses or routes to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    All,
    V4,
    V6,
}

impl Family {
    pub(crate) fn af(self) -> u8 {
        match self {
            Family::All => super::wire::AF_UNSPEC,
            Family::V4 => super::wire::AF_INET,
            Family::V6 => super::wire::AF_INET6,
        }
    }
}

/// The scope of an address or route (`rtm_scope`/`ifa_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Universe,
    Site,
    Link,
    Host,
    Nowhere,
    Other(u8),
}

impl Scope {
    pub fn to_raw(self) -> u8 {
        match self {
            Scope::Universe => 0,
            Scope::Site => 200,
            Scope::Link => 253,
            Scope::Host => 254,
            Scope::Nowhere => 255,
            Scope::Other(n) => n,
        }
    }

    pub fn from_raw(n: u8) -> Scope {
        match n {
            0 => Scope::Universe,
            200 => Scope::Site,
            253 => Scope::Link,
            254 => Scope::Host,
            255 => Scope::Nowhere,
            n => Scope::Other(n),
        }
    }
}

/// macvlan modes (IFLA_MACVLAN_MODE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacvlanMode {
    Private,
    Vepa,
    Bridge,
    Passthru,
    Source,
}

impl MacvlanMode {
    pub fn to_raw(self) -> u32 {
        match self {
            MacvlanMode::Private => 1,
            MacvlanMode::Vepa => 2,
            MacvlanMode::Bridge => 4,
            MacvlanMode::Passthru => 8,
            MacvlanMode::Source => 16,
        }
    }

    pub fn from_raw(n: u32) -> Option<MacvlanMode> {
        Some(match n {
            1 => MacvlanMode::Private,
            2 => MacvlanMode::Vepa,
            4 => MacvlanMode::Bridge,
            8 => MacvlanMode::Passthru,
            16 => MacvlanMode::Source,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MacvlanMode::Private => "private",
            MacvlanMode::Vepa => "vepa",
            MacvlanMode::Bridge => "bridge",
            MacvlanMode::Passthru => "passthru",
            MacvlanMode::Source => "source",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trips_in_lowercase() {
        let m: MacAddr = "0A:58:0a:F4:00:01".parse().unwrap();
        assert_eq!(m.to_string(), "0a:58:0a:f4:00:01");
        assert_eq!("0a-58-0a-f4-00-01".parse::<MacAddr>().unwrap(), m);
    }

    #[test]
    fn bad_macs_are_rejected() {
        for s in [
            "",
            "0a:58:0a:f4:00",
            "0a:58:0a:f4:00:01:02",
            "0a:58:0a:f4:00:1",
            "zz:58:0a:f4:00:01",
        ] {
            assert!(s.parse::<MacAddr>().is_err(), "{s}");
        }
        assert_eq!(
            "x".parse::<MacAddr>().unwrap_err().to_string(),
            "invalid MAC address \"x\""
        );
    }

    #[test]
    fn scopes_convert_both_ways() {
        for s in [
            Scope::Universe,
            Scope::Site,
            Scope::Link,
            Scope::Host,
            Scope::Nowhere,
            Scope::Other(7),
        ] {
            assert_eq!(Scope::from_raw(s.to_raw()), s);
        }
    }
}
