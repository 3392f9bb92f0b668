//! Opening `CNI_NETNS` with the reference's messages (Go's `ns.GetNS`), for the plugins
//! that report them as the reference does (loopback, tuning, bandwidth).
use crate::cni::error::go_errno_text;
use crate::cni::Error;
use crate::netns::Netns;

pub use super::container_link::open_for_del;

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
