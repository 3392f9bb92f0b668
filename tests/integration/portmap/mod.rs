//! The portmap plugin: `behaviour` (real traffic with each backend, DEL matrix, CHECK, GC,
//! bad input) and `differential` (against the Go reference). Its test world is
//! `crate::portmap_support`.
mod behaviour;
mod differential;
