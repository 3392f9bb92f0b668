//! `flock(2)` that keeps waiting when a signal interrupts the wait (EINTR), for every lock
//! cnibox takes: host-local's store, the runtime's cache locks, the plugins' host locks.
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, Flockable};

/// Takes the lock `how` on `file`, waiting as long as it takes.
pub fn wait<T: Flockable>(mut file: T, how: FlockArg) -> Result<Flock<T>, Errno> {
    loop {
        match Flock::lock(file, how) {
            Ok(held) => return Ok(held),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, e)) => return Err(e),
        }
    }
}
