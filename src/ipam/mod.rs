//! TODO(stage0): filled by the host-local work.
