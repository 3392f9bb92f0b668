//! The one table of applets and the busybox-style dispatch on argv[0].
//!
//! `bridge`, `veth`, … are symlinks to this binary: the name it is called under picks the
//! applet. `cnibox <applet> …` works too, and `cnibox install DIR` creates the symlinks.
use crate::cni::{AppletLookup, Plugin};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What an applet is: a CNI plugin (driven by the protocol entry point) or a tool with its
/// own command line.
pub enum Kind {
    Plugin(&'static dyn Plugin),
    /// Gets the arguments after the applet name; returns the exit code.
    Tool(fn(&[OsString]) -> i32),
    /// A tool that runs plugin chains (cnitool, the OCI hook): also gets the applet lookup,
    /// so the chain runs cnibox's own applets in-process.
    Runtime(fn(&[OsString], AppletLookup) -> i32),
    /// Another name of the applet named here (`ptp` for `veth`): the same applet.
    Alias(&'static str),
}

pub struct Applet {
    pub name: &'static str,
    pub summary: &'static str,
    pub kind: Kind,
}

/// Every applet cnibox answers to. This is the only list: `--list`, `install`, the
/// in-process IPAM delegation and the tests (which applets have which tests, the Makefile's
/// release pass) all read it.
pub static APPLETS: &[Applet] = &[
    // rows are added here as the applets land
    Applet {
        name: "bridge",
        summary: "attach containers to a Linux bridge through veth pairs",
        kind: Kind::Plugin(&crate::plugins::bridge::Bridge),
    },
    Applet {
        name: "veth",
        summary: "point-to-point veth pair with host routes (the reference ptp)",
        kind: Kind::Plugin(&crate::plugins::veth::Veth),
    },
    Applet {
        name: "ptp",
        summary: "alias of veth, for configs with \"type\": \"ptp\"",
        kind: Kind::Alias("veth"),
    },
    Applet {
        name: "macvlan",
        summary: "a macvlan link on a host interface",
        kind: Kind::Plugin(&crate::plugins::macvlan::Macvlan),
    },
    Applet {
        name: "ipvlan",
        summary: "an ipvlan link on a host interface (needs the kernel's ipvlan module)",
        kind: Kind::Plugin(&crate::plugins::ipvlan::Ipvlan),
    },
    Applet {
        name: "vlan",
        summary: "an 802.1Q VLAN link on a host interface (needs the kernel's 8021q module)",
        kind: Kind::Plugin(&crate::plugins::vlan::Vlan),
    },
    Applet {
        name: "dummy",
        summary: "a dummy link with IPAM addresses (needs the kernel's dummy module)",
        kind: Kind::Plugin(&crate::plugins::dummy::Dummy),
    },
    Applet {
        name: "vrf",
        summary: "chained: the container interface into a VRF, its routes into the VRF's table (needs the kernel's vrf module)",
        kind: Kind::Plugin(&crate::plugins::vrf::Vrf),
    },
    Applet {
        name: "host-device",
        summary: "move an existing host link into the container (back on DEL)",
        kind: Kind::Plugin(&crate::plugins::host_device::HostDevice),
    },
    Applet {
        name: "tap",
        summary: "a tap device in the container (for a VM), optionally on a bridge there",
        kind: Kind::Plugin(&crate::plugins::tap::TapPlugin),
    },
    Applet {
        name: "portmap",
        summary: "forward host ports to the container (chained; nftables or iptables)",
        kind: Kind::Plugin(&crate::plugins::portmap::Portmap),
    },
    Applet {
        name: "loopback",
        summary: "bring up lo in the container (containerd and CRI-O run it for every pod)",
        kind: Kind::Plugin(&crate::plugins::loopback::Loopback),
    },
    Applet {
        name: "tuning",
        summary: "sysctls, MAC, MTU, promisc, allmulti, txqueuelen of the container interface (chained)",
        kind: Kind::Plugin(&crate::plugins::tuning::Tuning),
    },
    Applet {
        name: "bandwidth",
        summary: "rate limits on the container's veth: tbf for ingress, ifb + tbf for egress (chained)",
        kind: Kind::Plugin(&crate::plugins::bandwidth::Bandwidth),
    },
    Applet {
        name: "firewall",
        summary: "chained: let container traffic through the host's forward filter",
        kind: Kind::Plugin(&crate::plugins::firewall::Firewall),
    },
    Applet {
        name: "flannel",
        summary: "flannel's meta plugin: the node's subnet from flanneld, delegated to bridge + host-local",
        kind: Kind::Plugin(&crate::plugins::flannel::Flannel),
    },
    Applet {
        name: "host-local",
        summary: "host-local IPAM: addresses from ranges, kept on disk",
        kind: Kind::Plugin(&crate::ipam::host_local::HostLocal),
    },
    Applet {
        name: "dhcp",
        summary: "dhcp IPAM: addresses from the LAN's DHCP server; `dhcp daemon` holds and renews the leases",
        kind: Kind::Plugin(&crate::ipam::dhcp::Dhcp),
    },
    Applet {
        name: "static",
        summary: "static IPAM: the addresses, routes and DNS the config states",
        kind: Kind::Plugin(&crate::ipam::r#static::Static),
    },
    Applet {
        name: "sbr",
        summary: "source-based routing: a routing table and rule per container address (chained)",
        kind: Kind::Plugin(&crate::plugins::sbr::Sbr),
    },
    Applet {
        name: "cnitool",
        summary: "run network configs (add, check, del, status, gc, sandbox-status)",
        kind: Kind::Runtime(crate::runtime::cnitool::main),
    },
    Applet {
        name: "oci-hook",
        summary: "OCI runtime hook: add at createRuntime, del at poststop (OCI state on stdin)",
        kind: Kind::Runtime(crate::hook::run::main),
    },
    Applet {
        name: "oci-wrap",
        summary: "wrap an OCI runtime (runc, crun) so created containers get the hooks",
        kind: Kind::Tool(crate::hook::wrap::main),
    },
];

/// The name the binary itself goes by.
pub const SELF_NAME: &str = "cnibox";

/// The applet called `name`; an alias is resolved to the applet it names.
pub fn find(name: &str) -> Option<&'static Applet> {
    let applet = APPLETS.iter().find(|a| a.name == name)?;
    match applet.kind {
        Kind::Alias(target) => APPLETS.iter().find(|a| a.name == target),
        _ => Some(applet),
    }
}

/// The plugin behind an applet name, for in-process delegation. This is the
/// [`AppletLookup`](crate::cni::AppletLookup) handed down to every plugin run (the layers
/// below never import this table).
pub fn plugin(name: &str) -> Option<&'static dyn Plugin> {
    match find(name)?.kind {
        Kind::Plugin(p) => Some(p),
        Kind::Tool(_) | Kind::Runtime(_) | Kind::Alias(_) => None,
    }
}

fn run_applet(applet: &Applet, args: &[OsString]) -> i32 {
    let code = match applet.kind {
        Kind::Plugin(p) => match p.command_line(args) {
            Some(code) => code,
            None => crate::cni::plugin::run(p, plugin),
        },
        Kind::Tool(f) => f(args),
        Kind::Runtime(f) => f(args, plugin),
        // `find` resolves aliases
        Kind::Alias(target) => unreachable!("alias of {target} not resolved"),
    };
    // Before `exit`: the process's own close of a netfilter socket, or of a private procfs
    // instance, would wait for the kernel.
    crate::netlink::nftables::close_shared();
    crate::sysctl::close_shared();
    code
}

/// Entry point: dispatch on the basename of argv[0], or on argv[1] when called as `cnibox`.
pub fn main(argv: Vec<OsString>) -> i32 {
    let called_as = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| SELF_NAME.to_string());
    if let Some(applet) = find(&called_as) {
        return run_applet(applet, &argv[1..]);
    }
    if called_as != SELF_NAME {
        eprintln!("cnibox: unknown applet {called_as:?} (the binary was called under a name it does not answer to; `cnibox --list` shows the applets)");
        return 2;
    }
    let Some(first) = argv.get(1) else {
        eprint!("{}", usage());
        return 2;
    };
    match first.to_str() {
        Some("--list") => {
            for a in APPLETS {
                println!("{}", a.name);
            }
            0
        }
        Some("--help") | Some("-h") | Some("help") => {
            print!("{}", usage());
            0
        }
        Some("--version") => {
            println!("cnibox {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("install") => install_main(&argv[2..]),
        Some(name) => match find(name) {
            Some(applet) => run_applet(applet, &argv[2..]),
            None => {
                eprintln!("cnibox: unknown applet {name:?} (`cnibox --list` shows the applets)");
                2
            }
        },
        None => {
            eprintln!("cnibox: unknown applet {first:?}");
            2
        }
    }
}

fn usage() -> String {
    let mut s = format!(
        "cnibox {}: the core CNI plugins and a CNI runtime in one binary\n\n\
         usage: cnibox APPLET [ARGS…]   (or call the binary under an applet's name)\n\
         \x20      cnibox --list\n\
         \x20      cnibox install [DIR] [--force]   (symlink every applet into DIR, default /opt/cni/bin)\n\napplets:\n",
        env!("CARGO_PKG_VERSION")
    );
    for a in APPLETS {
        s.push_str(&format!("  {:<12} {}\n", a.name, a.summary));
    }
    s
}

#[derive(argh::FromArgs)]
/// Create or refresh a symlink to this binary for every applet in DIR.
struct InstallArgs {
    /// the CNI bin dir (default /opt/cni/bin)
    #[argh(positional, default = "PathBuf::from(\"/opt/cni/bin\")")]
    dir: PathBuf,
    /// replace files that are not symlinks
    #[argh(switch)]
    force: bool,
}

fn install_main(args: &[OsString]) -> i32 {
    let parsed: InstallArgs = match crate::util::argv::parse_args("cnibox install", args) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let exe = match std::fs::read_link("/proc/self/exe") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cnibox install: cannot find this binary through /proc/self/exe: {e}");
            return 1;
        }
    };
    match install(&parsed.dir, &exe, parsed.force) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            0
        }
        Err(e) => {
            eprintln!("cnibox install: {e}");
            1
        }
    }
}

/// Point `<dir>/<applet>` at `exe` for every applet. Idempotent: a correct link is left
/// alone, a link elsewhere is replaced, a non-link file is replaced only with `force`.
/// Returns one line per applet saying what was done.
pub fn install(dir: &Path, exe: &Path, force: bool) -> std::io::Result<Vec<String>> {
    use std::io::{Error, ErrorKind};
    std::fs::create_dir_all(dir)?;
    let mut done = Vec::new();
    for a in APPLETS {
        let link = dir.join(a.name);
        let what = match std::fs::symlink_metadata(&link) {
            Err(e) if e.kind() == ErrorKind::NotFound => "created",
            Err(e) => return Err(Error::new(e.kind(), format!("{}: {e}", link.display()))),
            Ok(m) if m.file_type().is_symlink() => {
                if std::fs::read_link(&link)?.as_os_str() == exe.as_os_str() {
                    done.push(format!("{}: up to date", link.display()));
                    continue;
                }
                std::fs::remove_file(&link)?;
                "replaced"
            }
            Ok(_) if crate::util::same_file(&link, exe) => {
                done.push(format!("{}: is this binary, left alone", link.display()));
                continue;
            }
            Ok(_) if force => {
                std::fs::remove_file(&link)?;
                "replaced (--force)"
            }
            Ok(_) => {
                return Err(Error::new(
                    ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a symlink; refusing to overwrite it (use --force)",
                        link.display()
                    ),
                ))
            }
        };
        std::os::unix::fs::symlink(exe, &link)
            .map_err(|e| Error::new(e.kind(), format!("symlink {}: {e}", link.display())))?;
        done.push(format!("{}: {what}", link.display()));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alias_names_an_applet_that_is_not_an_alias() {
        for a in APPLETS {
            if let Kind::Alias(target) = a.kind {
                let named = APPLETS.iter().find(|b| b.name == target);
                assert!(
                    matches!(named, Some(b) if !matches!(b.kind, Kind::Alias(_))),
                    "{} is an alias of {target}, which is no applet or another alias",
                    a.name
                );
            }
        }
    }

    #[test]
    fn an_alias_is_the_applet_it_names() {
        assert_eq!(find("ptp").map(|a| a.name), Some("veth"));
        assert!(plugin("ptp").is_some());
    }
}
