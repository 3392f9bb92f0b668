//! Small self-contained helpers; each submodule has one concern.
pub mod sha512;
