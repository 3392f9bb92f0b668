//! Wall-clock timestamps for log lines, without a date library.
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `t` as RFC 3339 in UTC with whole seconds (`2006-01-02T15:04:05Z`), the layout of the
/// `time` field in runc's JSON log lines.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `d` in seconds as `f64`'s Display writes `d.as_secs_f64()` (`5`, `0.25`, `1.000000001`),
/// with integers only: formatting an `f64` links 10 KB of float printing into the binary.
pub fn seconds(d: Duration) -> String {
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        return d.as_secs().to_string();
    }
    let fraction = format!("{nanos:09}");
    format!("{}.{}", d.as_secs(), fraction.trim_end_matches('0'))
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_reads_as_the_f64_display_of_the_duration() {
        for d in [
            Duration::ZERO,
            Duration::from_secs(5),
            Duration::from_millis(250),
            Duration::from_millis(1500),
            Duration::from_nanos(1_000_000_001),
            Duration::from_micros(12_345_678),
        ] {
            assert_eq!(seconds(d), d.as_secs_f64().to_string(), "{d:?}");
        }
    }

    #[test]
    fn known_instants() {
        let at = |s| rfc3339_utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(at(4_102_444_799), "2099-12-31T23:59:59Z");
    }
}
