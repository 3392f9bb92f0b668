//! cnibox's integration tests: one test binary, one module per area, so the harness
//! (`common`) compiles once. Every test runs as root and builds its own private host and
//! container namespaces with `common` (see its header); nothing touches the real host.
//!
//! Where a new test goes:
//! * **An applet's behaviour** (ADD/CHECK/DEL/GC/STATUS in namespaces, error paths, every
//!   spec version): the module named after the applet (`-` as `_`: the Makefile's release
//!   pass finds it by the names `cnibox --list` prints). An applet with one file is
//!   `<applet>.rs` (e.g. `veth.rs`, `host_local.rs`); one with several is a directory
//!   `<applet>/` with `behaviour.rs` for this (e.g. `bridge/`). A new applet starts as
//!   `<applet>.rs` and becomes a directory when it gets a second file.
//! * **What every plugin applet owes**, in its module (checked against the applet table by
//!   `applets::every_plugin_applet_has_its_del_matrix_and_common_keys`): `del_matrix` (DEL in
//!   every situation and version; the interface and IPAM applets run the shared matrix,
//!   `reliability::del_matrix::run`, where a new situation goes) and `common_keys` (how it
//!   answers the keys every config shares, mistyped, as its reference does:
//!   `common_keys::same_as_the_reference`). A plugin's own DEL
//!   states sit beside them (e.g. `veth::del_is_idempotent_in_every_state`).
//! * **A differential test** (same input to cnibox and Debian's Go reference in
//!   /usr/lib/cni, results and kernel/disk state compared): `<applet>/differential.rs`
//!   where the applet has a directory; otherwise next to its other tests in `<applet>.rs`.
//!   When an applet's differential tests outgrow a few cases, split them out into
//!   `<applet>/differential.rs` (the release pass skips `differential::`).
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
//!   family gets a file there), `netns.rs`, `sysctl.rs`, `ipmasq.rs`, and the entry point's
//!   keys every config shares in `common_keys.rs`.
//! * **Go's key matching, generated**: `go_keys/` runs every key each plugin applet's code
//!   reads (the key registry of test builds) in four spellings, `null`, written twice and
//!   mistyped, through cnibox and the reference. A new config key needs a value in the
//!   applet's samples (`go_keys/samples.rs`; the coverage test fails without one), and a key
//!   Debian's 1.1.1 lacks a line in its `NEWER` table. A new applet with a Debian reference
//!   binary gets an `Applet` there and a name in `go_keys/mod.rs`'s `applets!` lists.
//! * **After a reboot** (another boot ID, bind-mounted over the kernel's for one call with
//!   `Call::in_boot`): host-local's release of an earlier boot's reservations in
//!   `reboot.rs`; the runtime's view of attachments cached in an earlier boot next to the
//!   runtime's other tests (`cnitool.rs`, `oci_hook.rs`).
//! * **The runtime side**: `cnitool.rs` (chains, cache, GC, STATUS), `chains.rs` (real
//!   runtimes' chains through libcni), `gocni.rs` (containerd's CRI through go-cni: its
//!   loopback network and a pod's capabilities in go-cni's own types, hostPorts reached,
//!   token buckets, a failed setup's teardown, compared with the reference),
//!   `in_process_chains.rs` (cnibox's own applets of a chain run in-process, answers
//!   compared with exec), `oci_hook.rs` (crun, runc), `docker.rs` (a real dockerd),
//!   `applets.rs` (the applet table, `install`).
//! * **Other architectures**: `make test-arm64` and `make test-i686` run the Makefile's
//!   `FOREIGN_TESTS` with another binary as every applet. A step qemu-user cannot emulate
//!   (tc, netfilter netlink) goes in `emulated.rs`, where `common::emulation` names it when
//!   skipped under qemu; a test of the set that needs none of those stays in its module.
//! * Logic that needs no kernel (parsers, the fake netlink transport) is a unit test in
//!   `src/`, not here.
//!
//! Shared modules: `common` (the harness: namespaces, calls, the reference plugins, the
//! link kinds a kernel may lack), `plugin_state` (links, addresses, routes, sysctls,
//! reservations as comparable values), `bridge_support` and `portmap_support` (those
//! plugins' test worlds, also used by `firewall`), `stacked_support` (the world of the
//! applets that make one link in the container: ipvlan, vlan, dummy), `fuzz` (the
//! property/fuzz toolkit). Data stays beside this directory: `tests/corpus/`,
//! `tests/interop/` (the Go clients: a libcni runtime and containerd's go-cni),
//! `tests/plugins/` (the recording plugin script).
//!
//! `make test` runs this binary, then the applets' modules, `applets`, `chains` and `docker`
//! again against the release binary (`CNIBOX_TEST_BIN`; the Makefile's `test` target).
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
mod stacked_support;

mod applets;
mod bandwidth;
mod bridge;
mod chains;
mod cnitool;
mod common_keys;
mod dhcp;
mod docker;
mod dummy;
mod emulated;
mod firewall;
mod flannel;
mod go_keys;
mod gocni;
mod host_device;
mod host_local;
mod in_process_chains;
mod ipmasq;
mod ipvlan;
mod loopback;
mod macvlan;
mod netlink;
mod netns;
mod oci_hook;
mod portmap;
mod reboot;
mod reliability;
mod sbr;
mod r#static;
mod sysctl;
mod tap;
mod tuning;
mod veth;
mod vlan;
mod vrf;
