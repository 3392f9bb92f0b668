//! TODO(stage0): OCI hook.
