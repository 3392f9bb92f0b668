//! TODO(stage0): filled by the netlink-layer work.
