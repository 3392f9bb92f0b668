//! The sysfs lookups of host-device: which network device a kernel device path, a PCI
//! address or an auxiliary device has, whether a PCI device is bound to a userspace (DPDK)
//! driver, and whether a `deviceID` names a PCI or an auxiliary device. Paths are joined and
//! cleaned as Go's `filepath.Join` does, symlinks walked as `filepath.EvalSymlinks` walks
//! them, and errors worded as the reference's.
//!
//! Everything goes through [`Sysfs`], whose root is `/sys` in the plugin and a directory
//! tree in the unit tests. Which network devices a device's `net` directory lists depends
//! on the network namespace the sysfs was mounted from (the kernel tags them): the plugin
//! sees the devices of its mount's namespace, normally the host's.
use crate::cni::error::go_errno_text;
use crate::cni::version::go_quote;
use std::io;
use std::path::PathBuf;

/// The userspace drivers a DPDK application binds a NIC to: such a device has no netdev.
const USERSPACE_DRIVERS: &[&str] = &["vfio-pci", "uio_pci_generic", "igb_uio"];

const BUS_PCI: &str = "/sys/bus/pci/devices";
const BUS_AUXILIARY: &str = "/sys/bus/auxiliary/devices";

pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    /// The real one.
    pub fn system() -> Sysfs {
        Sysfs { root: "/sys".into() }
    }

    /// A tree standing in for `/sys` (tests).
    #[cfg(test)]
    pub fn at(root: &std::path::Path) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// Where the sysfs path `path` (which starts with `/sys`) is under the root.
    fn real(&self, path: &str) -> PathBuf {
        let rel = path.strip_prefix("/sys").unwrap_or(path).trim_start_matches('/');
        self.root.join(rel)
    }

    fn exists(&self, path: &str) -> bool {
        std::fs::metadata(self.real(path)).is_ok()
    }

    /// `runtimeConfig.deviceID` names a PCI device.
    pub fn is_pci_device(&self, id: &str) -> bool {
        self.exists(&join(&[BUS_PCI, id]))
    }

    /// `runtimeConfig.deviceID` names an auxiliary-bus device (a subfunction).
    pub fn is_auxiliary_device(&self, id: &str) -> bool {
        self.exists(&join(&[BUS_AUXILIARY, id]))
    }

    /// The PCI device is bound to a userspace driver (its `driver` link, resolved, ends in
    /// one). The error is `filepath.EvalSymlinks`'s (`lstat <first missing path>: …`).
    pub fn has_dpdk_driver(&self, pci: &str) -> Result<bool, String> {
        let driver = self.eval_symlinks(&join(&[BUS_PCI, pci, "driver"]))?;
        let name = driver.rsplit('/').next().unwrap_or_default();
        Ok(USERSPACE_DRIVERS.contains(&name))
    }

    /// The network device of a kernel device path (`/sys/devices/…`): the first entry of
    /// its `net` directory.
    pub fn kernelpath_device(&self, kernelpath: &str) -> Result<String, String> {
        if !kernelpath.starts_with("/sys/devices/") {
            return Err(format!(
                "kernel device path {} must be absolute and begin with /sys/devices/",
                go_quote(kernelpath)
            ));
        }
        self.first_net_device(&join(&[kernelpath, "net"]))
    }

    /// The network device of a PCI device: its `net` directory, or a virtio child's.
    pub fn pci_device(&self, pci: &str) -> Result<String, String> {
        let dir = join(&[BUS_PCI, pci]);
        let net = join(&[&dir, "net"]);
        if std::fs::symlink_metadata(self.real(&net)).is_ok() {
            return self.first_net_device(&net);
        }
        // `filepath.Glob(<dir>/virtio*/net)`: the address itself is taken literally
        let mut virtio: Vec<String> = std::fs::read_dir(self.real(&dir))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.starts_with("virtio"))
                    .collect()
            })
            .unwrap_or_default();
        crate::util::sort::sort(&mut virtio);
        let found = virtio
            .iter()
            .map(|v| join(&[&dir, v, "net"]))
            .find(|n| std::fs::symlink_metadata(self.real(n)).is_ok());
        match found {
            Some(n) => self.first_net_device(&n),
            None => Err(format!("no net directory under pci device {pci}")),
        }
    }

    /// The network device of an auxiliary-bus device.
    pub fn auxiliary_device(&self, aux: &str) -> Result<String, String> {
        self.first_net_device(&join(&[BUS_AUXILIARY, aux, "net"]))
    }

    /// The first entry (by name, as `os.ReadDir` sorts) of a `net` directory.
    fn first_net_device(&self, dir: &str) -> Result<String, String> {
        let read = || -> io::Result<Vec<String>> {
            let mut names = std::fs::read_dir(self.real(dir))?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect::<io::Result<Vec<_>>>()?;
            crate::util::sort::sort(&mut names);
            Ok(names)
        };
        match read() {
            Ok(names) => names
                .into_iter()
                .next()
                .ok_or_else(|| format!("failed to find network device in path {dir}")),
            Err(e) => {
                // Go opens the directory first, then reads it: a file fails at the read
                let what = match e.raw_os_error() {
                    Some(libc::ENOTDIR) => format!("readdirent {dir}: {}", go_errno_text(&e)),
                    _ => format!("open {dir}: {}", go_errno_text(&e)),
                };
                Err(format!("failed to read directory {dir}: {}", go_quote(&what)))
            }
        }
    }

    /// Go's `filepath.EvalSymlinks` of a sysfs path: the path with every symlink resolved,
    /// component by component; the error names the first component that is missing.
    fn eval_symlinks(&self, path: &str) -> Result<String, String> {
        let mut todo: Vec<String> = components(path);
        todo.reverse();
        let mut dest = String::from("/");
        let mut links = 0;
        while let Some(c) = todo.pop() {
            match c.as_str() {
                "." => continue,
                ".." => {
                    dest = parent(&dest);
                    continue;
                }
                _ => {}
            }
            let next = join(&[&dest, &c]);
            let meta = std::fs::symlink_metadata(self.real(&next))
                .map_err(|e| format!("lstat {next}: {}", go_errno_text(&e)))?;
            if !meta.file_type().is_symlink() {
                if !meta.is_dir() && !todo.is_empty() {
                    return Err("not a directory".into());
                }
                dest = next;
                continue;
            }
            links += 1;
            if links > 255 {
                return Err("EvalSymlinks: too many links".into());
            }
            let target =
                std::fs::read_link(self.real(&next)).map_err(|e| format!("readlink {next}: {}", go_errno_text(&e)))?;
            let target = target.to_string_lossy();
            // a relative link replaces the last component; an absolute one starts over
            if !target.starts_with('/') {
                dest = parent(&next);
            } else {
                dest = "/".into();
            }
            todo.extend(components(&target).into_iter().rev());
        }
        Ok(dest)
    }
}

fn components(path: &str) -> Vec<String> {
    path.split('/').filter(|c| !c.is_empty()).map(str::to_string).collect()
}

fn parent(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => path[..i].into(),
    }
}

/// Go's `filepath.Join`: the parts joined with `/`, then cleaned lexically (`.`, `..` and
/// repeated slashes resolved; `..` never climbs above the root).
pub fn join(parts: &[&str]) -> String {
    let joined = parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/");
    clean(&joined)
}

/// Go's `path.Clean`.
fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => match out.last() {
                Some(&last) if last != ".." => {
                    out.pop();
                }
                _ if rooted => {}
                _ => out.push(".."),
            },
            c => out.push(c),
        }
    }
    let body = out.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A stand-in for /sys: a PCI NIC with its own `net`, a virtio one whose netdev hangs
    /// below `virtio3`, one bound to vfio-pci, one with no driver, an auxiliary device.
    fn tree() -> (tempfile::TempDir, Sysfs) {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let mk = |p: &str| std::fs::create_dir_all(r.join(p)).unwrap();
        mk("devices/pci0000:00/0000:00:03.0/net/ens3");
        mk("devices/pci0000:00/0000:00:04.0/virtio3/net/eth7");
        mk("devices/pci0000:00/0000:00:04.0/virtio3/net/eth6");
        mk("devices/pci0000:00/0000:00:05.0");
        mk("devices/pci0000:00/0000:00:06.0");
        mk("devices/virtual/net/lo");
        mk("devices/virtual/net/hd0");
        mk("bus/pci/drivers/e1000");
        mk("bus/pci/drivers/virtio-pci");
        mk("bus/pci/drivers/vfio-pci");
        mk("bus/pci/devices");
        mk("devices/platform/mlx5_core.sf.2/net/enp1s0f0s2");
        mk("bus/auxiliary/devices");
        for (dev, driver) in [
            ("0000:00:03.0", Some("e1000")),
            ("0000:00:04.0", Some("virtio-pci")),
            ("0000:00:05.0", Some("vfio-pci")),
            ("0000:00:06.0", None),
        ] {
            symlink(
                format!("../../../devices/pci0000:00/{dev}"),
                r.join("bus/pci/devices").join(dev),
            )
            .unwrap();
            if let Some(d) = driver {
                symlink(
                    format!("../../../bus/pci/drivers/{d}"),
                    r.join("devices/pci0000:00").join(dev).join("driver"),
                )
                .unwrap();
            }
        }
        symlink(
            "../../../devices/platform/mlx5_core.sf.2",
            r.join("bus/auxiliary/devices/mlx5_core.sf.2"),
        )
        .unwrap();
        let s = Sysfs::at(r);
        (t, s)
    }

    #[test]
    fn join_cleans_as_go_does() {
        assert_eq!(join(&["/sys/devices/virtual/", "net"]), "/sys/devices/virtual/net");
        assert_eq!(join(&["/sys/bus/pci/devices", "../../../../etc"]), "/etc");
        assert_eq!(join(&["/sys/devices/./a//b/..", "net"]), "/sys/devices/a/net");
        assert_eq!(join(&["/", "..", "x"]), "/x");
        assert_eq!(clean("a/../.."), "..");
        assert_eq!(clean(""), ".");
    }

    #[test]
    fn kernelpath_is_the_first_entry_of_its_net_directory() {
        let (_t, s) = tree();
        assert_eq!(s.kernelpath_device("/sys/devices/virtual").unwrap(), "hd0");
        assert_eq!(
            s.kernelpath_device("/sys/devices/pci0000:00/0000:00:04.0/virtio3")
                .unwrap(),
            "eth6"
        );
        assert_eq!(
            s.kernelpath_device("/sys/class/net").unwrap_err(),
            "kernel device path \"/sys/class/net\" must be absolute and begin with /sys/devices/"
        );
        assert_eq!(
            s.kernelpath_device("sys/devices/x").unwrap_err(),
            "kernel device path \"sys/devices/x\" must be absolute and begin with /sys/devices/"
        );
        assert_eq!(
            s.kernelpath_device("/sys/devices/nope").unwrap_err(),
            "failed to read directory /sys/devices/nope/net: \"open /sys/devices/nope/net: no such file or directory\""
        );
        assert_eq!(
            s.kernelpath_device("/sys/devices/pci0000:00/0000:00:05.0").unwrap_err(),
            "failed to read directory /sys/devices/pci0000:00/0000:00:05.0/net: \"open /sys/devices/pci0000:00/0000:00:05.0/net: no such file or directory\""
        );
        std::fs::create_dir_all(s.root.join("devices/pci0000:00/0000:00:05.0/net")).unwrap();
        assert_eq!(
            s.kernelpath_device("/sys/devices/pci0000:00/0000:00:05.0").unwrap_err(),
            "failed to find network device in path /sys/devices/pci0000:00/0000:00:05.0/net"
        );
    }

    #[test]
    fn pci_devices_have_their_own_net_or_a_virtio_childs() {
        let (_t, s) = tree();
        assert_eq!(s.pci_device("0000:00:03.0").unwrap(), "ens3");
        assert_eq!(s.pci_device("0000:00:04.0").unwrap(), "eth6");
        assert_eq!(
            s.pci_device("0000:00:05.0").unwrap_err(),
            "no net directory under pci device 0000:00:05.0"
        );
        assert_eq!(
            s.pci_device("0000:00:99.0").unwrap_err(),
            "no net directory under pci device 0000:00:99.0"
        );
    }

    #[test]
    fn dpdk_is_a_userspace_driver_and_a_missing_link_is_lstats_error() {
        let (_t, s) = tree();
        assert!(!s.has_dpdk_driver("0000:00:03.0").unwrap());
        assert!(!s.has_dpdk_driver("0000:00:04.0").unwrap());
        assert!(s.has_dpdk_driver("0000:00:05.0").unwrap());
        // the path in the error is the one resolved so far, as EvalSymlinks reports it
        assert_eq!(
            s.has_dpdk_driver("0000:00:06.0").unwrap_err(),
            "lstat /sys/devices/pci0000:00/0000:00:06.0/driver: no such file or directory"
        );
        assert_eq!(
            s.has_dpdk_driver("0000:00:99.0").unwrap_err(),
            "lstat /sys/bus/pci/devices/0000:00:99.0: no such file or directory"
        );
    }

    #[test]
    fn device_ids_are_pci_or_auxiliary_devices() {
        let (_t, s) = tree();
        assert!(s.is_pci_device("0000:00:03.0"));
        assert!(!s.is_pci_device("mlx5_core.sf.2"));
        assert!(s.is_auxiliary_device("mlx5_core.sf.2"));
        assert!(!s.is_auxiliary_device("0000:00:03.0"));
        assert_eq!(s.auxiliary_device("mlx5_core.sf.2").unwrap(), "enp1s0f0s2");
    }
}
