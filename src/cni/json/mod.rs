//! The one JSON reader, with Go's `encoding/json` rules: the reference plugins and libcni
//! decode every config, result and cache file with it, and real clients depend on its
//! leniency (containerd's go-cni sends `HostPort`, `IngressRate`, `Servers`).
//!
//! * [`tree`]: the document as written ([`Json`], [`Object`]: members in document order,
//!   repeats kept), and the view a Go `map[string]interface{}` has of it (exact keys, the
//!   last one written).
//! * [`read`]: struct fields ([`Fields`]): keys matched as Go matches them ([`fold`]), the
//!   last member written wins, `null` and repeats as Go's kinds treat them, Go's error texts.
//! * `keys` (tests only): the registry of keys the readers look up, for the generated tests.
mod fold;
mod read;
mod tree;

#[cfg(any(test, feature = "test-support"))]
pub mod keys;

pub use read::{
    as_object, as_struct, int_of, kind, leniently, nullable_field, opt_array, opt_bool, opt_int, opt_list, opt_map,
    opt_object, opt_ptr_bool, opt_ptr_int, opt_ptr_object, opt_ptr_str, opt_ptr_u32, opt_raw, opt_str, opt_str_list,
    opt_u32, opt_u64, opt_uint, str_list, type_error, value_field, Fields, Map,
};
pub use tree::{parse, Json, Object};

/// Registers a parsed document with the key registry of test builds (nothing otherwise).
pub fn register(_doc: &str, _root: &Json) {
    #[cfg(any(test, feature = "test-support"))]
    keys::register(_doc, _root);
}
