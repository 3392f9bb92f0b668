//! TODO(stage0): bridge, veth, macvlan.
