//! TODO(stage0): cnitool runtime.
