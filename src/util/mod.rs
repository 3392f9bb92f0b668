//! Small self-contained helpers; each submodule has one concern.
pub mod atomic;
pub mod base64;
pub mod sha512;
