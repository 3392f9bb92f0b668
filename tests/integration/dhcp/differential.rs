//! The reference's dhcp plugin and daemon (Debian's, v1.1.1) beside cnibox's on the same
//! server; and each plugin with the other's daemon.
use super::*;
