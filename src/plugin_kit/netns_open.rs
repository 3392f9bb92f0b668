//! Opening `CNI_NETNS`, the one place every plugin does it: [`open`] with the messages of
//! Go's `ns.GetNS`, which loopback, tuning and vrf report bare; [`container`], the same
//! wrapped in `failed to open netns "PATH"` as the link plugins and bandwidth report it;
//! [`open_for_del`] for DEL, where a namespace already gone is nothing to do.
use crate::cni::error::go_errno_text;
use crate::cni::Error;
use crate::netns::Netns;

/// The container namespace: `failed to open netns "PATH": <why>` when it cannot be opened,
/// the why in `ns.GetNS`'s words (see [`open`]), as the reference plugins wrap it.
pub fn container(path: &str) -> Result<Netns, Error> {
    open(path).map_err(|e| e.context(format!("failed to open netns {path:?}")))
}

/// Open the container namespace for DEL: `None` when there is nothing to clean up there
/// (no path given, the namespace is gone, or the path no longer holds a namespace, as when
/// a runtime removed the bind mount but left the file: the reference fails DEL then).
pub fn open_for_del(netns_path: &str) -> Result<Option<Netns>, Error> {
    if netns_path.is_empty() {
        return Ok(None);
    }
    match Netns::open(netns_path) {
        Ok(ns) => Ok(Some(ns)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) if e.is_not_netns() => {
            eprintln!("cnibox: DEL: {e}; nothing to remove inside it");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The container namespace, or the error `ns.GetNS` gives: `failed to Statfs "PATH": no
/// such file or directory` for a missing path, `unknown FS magic on "PATH": HEX` for a file
/// that is not a namespace.
pub fn open(path: &str) -> Result<Netns, Error> {
    Netns::open(path).map_err(|e| {
        if e.is_not_found() {
            return Error::internal(format!("failed to Statfs {path:?}: no such file or directory"));
        }
        if e.is_not_netns() {
            if let Ok(fs) = nix::sys::statfs::statfs(path) {
                return Error::internal(format!("unknown FS magic on {path:?}: {:x}", fs.filesystem_type().0));
            }
        }
        match &e.kind {
            crate::netns::ErrorKind::Io(io) => {
                Error::internal(format!("failed to open {path:?}: {}", go_errno_text(io)))
            }
            _ => Error::internal(format!("failed to open netns {path:?}: {e}")),
        }
    })
}
