//! The bridge plugin: `behaviour` (the reference inventory and cnibox's own guarantees, in
//! namespaces) and `differential` (against the Go reference). Shared helpers are
//! `crate::bridge_support`.
mod behaviour;
mod differential;
