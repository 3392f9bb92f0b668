//! TODO(stage0): filled by the protocol-core work.
