//! cnibox's integration tests: one test binary, one module per area, so the harness
//! (`common`) compiles once. Every test runs as root and builds its own private host and
//! container namespaces with `common` (see its header); nothing touches the real host.
//!
//! Where a new test goes:
//! * **A plugin's behaviour** (ADD/CHECK/DEL/GC/STATUS in namespaces, error paths, every
//!   spec version): the plugin's module. A plugin with one file is `<plugin>.rs`
//!   (`veth.rs`, `macvlan.rs`, `loopback.rs`, `tuning.rs`, `bandwidth.rs`, `host_local.rs`);
//!   a plugin with several is a directory `<plugin>/` with `behaviour.rs` for this
//!   (`bridge/`, `portmap/`, `firewall/`). A new plugin starts as `<plugin>.rs` and becomes a
//!   directory when it gets a second file.
//! * **A differential test** (same input to cnibox and Debian's Go reference in
//!   /usr/lib/cni, results and kernel/disk state compared): `<plugin>/differential.rs`
//!   where the plugin has a directory (`bridge/`, `portmap/`); otherwise next to the
//!   plugin's other tests in `<plugin>.rs` (veth, macvlan, loopback, tuning, bandwidth,
//!   host_local, firewall/behaviour.rs hold theirs inline). When a plugin's differential
//!   tests outgrow a few cases, split them out into `<plugin>/differential.rs`.
//! * **DEL idempotency**: the cross-plugin matrix (every plugin × every spec version × every
//!   situation a runtime produces) is `reliability/del_matrix.rs`; add a new situation
//!   there. A plugin's own DEL matrix, for states only that plugin has, sits in its module:
//!   `bridge::behaviour::del_idempotency_matrix`, `veth::del_is_idempotent_in_every_state`,
//!   `macvlan::del_is_idempotent_in_every_state`, `loopback::del_matrix` and
//!   `portmap::behaviour::del_matrix`. A new plugin gets a row in
//!   `reliability/del_matrix.rs` first.
//! * **Fuzz and hostile input**: a new target in `reliability/fuzz.rs` (the generators and
//!   mutators are the shared `fuzz` module); a malformed input found once becomes a file in
//!   `tests/corpus/<target>/` plus its line in `tests/corpus/MANIFEST` (run by
//!   `reliability/corpus.rs`). Crash consistency, concurrency and path/permission safety are
//!   `reliability/{crash,concurrency,security}.rs`.
//! * **A regression test per bug**: in the module of the area the bug was in, named for
//!   the behaviour that is now right (not the issue number), with a comment saying what
//!   went wrong before.
//! * **The layers under the plugins**: netlink against the kernel in `netlink/`
//!   (`rtnetlink.rs` for links/addresses/routes/tc, `nftables.rs` for nf_tables; a new
//!   family gets a file there), `netns.rs`, `sysctl.rs`, `ipmasq.rs`, and the keys every
//!   config shares in `common_keys.rs`.
//! * **After a reboot** (another boot ID, bind-mounted over the kernel's for one call with
//!   `Call::in_boot`): host-local's release of an earlier boot's reservations in
//!   `reboot.rs`; the runtime's view of attachments cached in an earlier boot next to the
//!   runtime's other tests (`cnitool.rs`, `oci_hook.rs`).
//! * **The runtime side**: `cnitool.rs` (chains, cache, GC, STATUS), `chains.rs` (real
//!   runtimes' chains through libcni), `in_process_chains.rs` (cnibox's own applets of a
//!   chain run in-process, answers compared with exec), `oci_hook.rs` (crun, runc), `docker.rs` (a real
//!   dockerd), `applets.rs` (the applet table, `install`).
//! * Logic that needs no kernel (parsers, the fake netlink transport) is a unit test in
//!   `src/`, not here.
//!
//! Shared modules: `common` (the harness: namespaces, calls, the reference plugins),
//! `plugin_state` (links, addresses, routes, sysctls, reservations as comparable values),
//! `bridge_support` and `portmap_support` (those plugins' test worlds, also used by
//! `firewall`), `fuzz` (the property/fuzz toolkit). Data stays beside this directory:
//! `tests/corpus/`, `tests/interop/` (the libcni runtime in Go), `tests/plugins/` (the
//! recording plugin script).
//!
//! `make test` runs this binary, then the plugin and hook modules again against the release
//! binary (`CNIBOX_TEST_BIN`, a filter on module paths in the Makefile's `RELEASE_TESTS`).
//! Pick one area with `cargo test --test integration -- veth::`.
//!
//! The one test outside this binary is `tests/single_thread.rs`: it needs a process of its
//! own with no harness threads (it unshares the whole process's network namespace and
//! counts the process's threads), so it keeps `harness = false` and its own `main`.

mod common;

mod bridge_support;
mod fuzz;
mod plugin_state;
mod portmap_support;

mod applets;
mod bandwidth;
mod bridge;
mod chains;
mod cnitool;
mod common_keys;
mod docker;
mod firewall;
mod host_local;
mod in_process_chains;
mod ipmasq;
mod loopback;
mod macvlan;
mod netlink;
mod netns;
mod oci_hook;
mod portmap;
mod reboot;
mod reliability;
mod sysctl;
mod tuning;
mod veth;
