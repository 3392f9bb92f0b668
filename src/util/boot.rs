//! Which boot this is: the kernel's random boot ID, new at every boot. State written beside
//! it tells what was made in an earlier boot, whose network namespaces are all gone.
use std::io::Read;

/// Where the kernel publishes the boot ID (tests bind-mount another file over it in a
/// private mount namespace to simulate a reboot).
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The current boot's ID, or `None` when it cannot be read (no /proc): then nothing can be
/// told to be from an earlier boot, and callers must assume nothing is.
pub fn id() -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(BOOT_ID_PATH)
        .and_then(|f| f.take(128).read_to_string(&mut text))
        .ok()?;
    parse(&text)
}

/// A boot ID as the kernel writes it: a UUID and a newline. Anything else is no ID (a
/// corrupt record must not compare equal to, or different from, a real one by accident).
pub fn parse(text: &str) -> Option<String> {
    let id = text.trim();
    let well_formed = id.len() == 36
        && id.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    well_formed.then(|| id.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_boot_has_a_well_formed_id() {
        let now = id().expect("/proc is mounted");
        assert_eq!(parse(&now), Some(now.clone()));
        assert_eq!(id(), Some(now), "stable within a boot");
    }

    #[test]
    fn only_uuids_are_ids() {
        assert_eq!(
            parse("0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0\n").as_deref(),
            Some("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
        );
        for bad in [
            "",
            "\n",
            "not-a-boot-id",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f00",
            "0f1e2d3c_4b5a-6978-8796-a5b4c3d2e1f0",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
