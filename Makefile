# cnibox: build, install, test, demo, bench, release archives.
#   make                 static release binary (musl when its Rust target is installed, else static glibc)
#   make build TARGET=aarch64-unknown-linux-musl
#                        the same for any installed Rust target (musl targets link with rust-lld)
#   sudo make install    install the binary and the applet symlinks into $(CNI_BIN_DIR)
#   sudo make test       install missing test dependencies (apt-get, rustup), then run every test:
#                        x86_64, then arm64 under qemu-user (test-arm64) and 32-bit i686 (test-i686)
#   make dist            dist/cnibox-linux-<arch>-v<version>.tgz (+ .sha256, .sha512) for every
#                        installed Rust target of Linux
#   sudo make demo       two containers on a bridge, inside private namespaces
#   sudo make bench      cnibox against the Go plugins, netavark, Docker and the kernel floor (~2.5 min;
#                        knobs as arguments, e.g. `sudo make bench N=15` for the long run: see below)
#   make fuzz            coverage-guided fuzzing of the parsers of network and socket input (cargo-fuzz,
#                        nightly Rust; FUZZ_TIME=60 seconds per target)

PREFIX      ?= /usr/local
CNI_BIN_DIR ?= /opt/cni/bin
CARGO       ?= cargo
MUSL        := x86_64-unknown-linux-musl
GNU         := x86_64-unknown-linux-gnu
ARM64       := aarch64-unknown-linux-musl
I686        := i686-unknown-linux-musl
RUSTLIB     := $(shell rustc --print sysroot)/lib/rustlib
TARGET      ?= $(shell if [ -d "$(RUSTLIB)/$(MUSL)" ]; then echo $(MUSL); else echo $(GNU); fi)
BIN          = target/$(TARGET)/release/cnibox
bin_of       = target/$(1)/release/cnibox
# Fails with the command that installs target $(1) when its standard library is missing.
need_target  = @[ -d "$(RUSTLIB)/$(1)" ] || { echo "error: the Rust target $(1) is not installed (rustup target add $(1))"; exit 1; }

.PHONY: all build install uninstall test test-deps test-arm64 test-i686 check demo bench dist clean fmt lint fuzz

all: build

# Every musl target links with rust-lld (.cargo/config.toml), so no C cross toolchain is
# needed; a glibc target other than the host's needs its own C toolchain and libc.
build:
	$(call need_target,$(TARGET))
	$(CARGO) build --release --locked --target $(TARGET)
	@file -L $(BIN) | grep -Eq 'statically linked|static-pie linked' || { echo "error: $(BIN) is not static"; exit 1; }
	@ls -l $(BIN)

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/cnibox
	$(DESTDIR)$(PREFIX)/bin/cnibox install $(DESTDIR)$(CNI_BIN_DIR)

uninstall:
	for a in $$($(PREFIX)/bin/cnibox --list); do \
	  [ -L $(CNI_BIN_DIR)/$$a ] && rm -f $(CNI_BIN_DIR)/$$a; done; true
	rm -f $(PREFIX)/bin/cnibox

test-deps:
	sh tests/deps.sh

# Every test: unit tests, integration tests in private network namespaces; then the applets'
# tests again against the static release binary that `make install` ships. The integration
# tests are one binary (tests/integration, one module per area). Each applet's tests are in
# the module named after it (`host-local` -> `host_local::`), so the release pass asks the
# binary for its applets (`cnibox --list`) and adds the applet table's, the chains', go-cni's
# and Docker's modules and host-local's release after a reboot (which forks its remover);
# the differential tests (the reference as oracle) ran in the first pass.
# libtest filters match substrings, so each names its module from the crate root.
RELEASE_MODULES := applets:: chains:: gocni:: docker:: reboot::
test: test-deps build
	$(CARGO) test --locked --no-fail-fast -- --test-threads=4
	CNIBOX_TEST_BIN=$(abspath $(BIN)) $(CARGO) test --locked --no-fail-fast --test integration -- --test-threads=4 \
	  $(RELEASE_MODULES) $$($(BIN) --list | sed 's/-/_/g; s/$$/::/') --skip differential::
	$(MAKE) --no-print-directory test-arm64 test-i686

# Other architectures, with the same integration tests driving another binary
# (CNIBOX_TEST_BIN) as every applet. FOREIGN_TESTS: one module per plugin and the runtime
# (the emulated end-to-end set); tests/integration/emulated.rs names what qemu-user cannot
# emulate. On arm64 the unit tests run under qemu-user (cargo's runner,
# .cargo/config.toml) and the binary execs by name through binfmt_misc (tests/binfmt.sh);
# its size must stay within the x86_64 binary's.
FOREIGN_TESTS := emulated:: in_process_chains:: \
  applets::every_name_dispatches_through_a_symlink_and_as_subcommand \
  applets::install_creates_links_idempotently_and_refuses_plain_files \
  bridge::behaviour::containers_reach_each_other_and_the_gateway bridge::behaviour::ipv4_every_version \
  bridge::behaviour::dual_stack_every_version bridge::behaviour::check_failures \
  bridge::behaviour::example_conflists_work_with_cnitool \
  veth::differential_two_networks_with_default_routes_match_the_reference veth::check_error_paths \
  veth::deconfigures_an_unconfigured_ptp_link_with_del \
  macvlan::configures_and_deconfigures_a_macvlan_link_with_add_check_del \
  macvlan::two_macvlan_containers_on_one_master_reach_each_other \
  host_device::moves_the_link_in_and_back_in_every_version host_device::del_after_the_namespace_died \
  tap::creates_a_persistent_tap_in_every_version tap::the_device_is_the_one_ip_tuntap_makes \
  tap::owner_and_group_together_take_the_references_netlink_flags \
  loopback::add_sets_lo_up_and_del_sets_it_down_every_version loopback::check_verifies_lo_is_up \
  tuning::every_case_in_1_1_0 tuning::check_reports_drift \
  host_local::add_and_del_in_every_version host_local::check_finds_the_reservation \
  dhcp::behaviour::dnsmasq_through_a_macvlan_master dhcp::behaviour::the_daemon_killed_and_restarted_between_add_and_del \
  oci_hook::containers_get_addresses_reach_each_other_and_leave_nothing_behind \
  oci_hook::a_failing_add_fails_create_and_leaves_nothing_behind
# Natively the 32-bit binary also runs what qemu-user cannot emulate (tc, netfilter netlink:
# 32-bit layouts of their messages) and the namespace checks under seccomp.
I686_TESTS := $(FOREIGN_TESTS) netns:: bandwidth:: portmap::behaviour:: firewall::behaviour::
test-arm64: test-deps
	$(call need_target,$(ARM64))
	$(MAKE) --no-print-directory build TARGET=$(ARM64)
	$(MAKE) --no-print-directory build TARGET=$(MUSL)
	sh scripts/sizes.sh $(call bin_of,$(MUSL)) $(call bin_of,$(ARM64))
	$(CARGO) test --locked --no-fail-fast --target $(ARM64) --lib
	sh tests/binfmt.sh
	CNIBOX_TEST_BIN=$(abspath $(call bin_of,$(ARM64))) $(CARGO) test --locked --no-fail-fast --test integration -- --test-threads=4 --show-output $(FOREIGN_TESTS)

# A 32-bit process on this 64-bit kernel: pointer width and layouts as on armv7.
test-i686: test-deps
	$(call need_target,$(I686))
	$(MAKE) --no-print-directory build TARGET=$(I686)
	$(CARGO) test --locked --no-fail-fast --target $(I686) --lib
	CNIBOX_TEST_BIN=$(abspath $(call bin_of,$(I686))) $(CARGO) test --locked --no-fail-fast --test integration -- --test-threads=4 $(I686_TESTS)

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt

clean:
	$(CARGO) clean
	rm -rf dist

# Release archives as the reference names its own (cni-plugins-linux-<arch>-v<version>.tgz):
# the binary, its applet symlinks, README.md and LICENSE, for every installed Rust target of
# Linux (musl preferred over glibc for an architecture), with the reference's arch names.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
dist: build
	sh scripts/dist.sh "$(VERSION)" "$(RUSTLIB)" "$(BIN)"

# Two containers on the bridge of plugins.d/10-bridge.conflist, inside private namespaces.
# The build checks with `file` that the binary is static, so that is installed first if it
# is missing; tests/demo.sh installs what it runs itself.
demo:
	sh tests/deps.sh file
	$(MAKE) install
	sh tests/demo.sh $(DESTDIR)$(PREFIX)/bin/cnibox $(DESTDIR)$(CNI_BIN_DIR)

# The bench's knobs, given as make arguments (`sudo make bench N=15 BENCH_DOCKER=0`) or in the
# environment; benches/bench.sh's header and docs/benchmarks.md say more. The defaults take
# ~2.5 minutes on a quiet 2-core VM:
#   N=9             rounds per figure of the comparison tables (N=15: the long run, ~4 min)
#   HOST_LOCAL_N=5  host-local steady-state rounds (N when N is given)
#   DOCKER_N=9      docker run rounds (N when N is given); BENCH_DOCKER=0 skips the Docker rows
#   GROWTH=250 GROWTH_EDGE=10 WORKERS=10 STORE_SIZE=60000 SETTLE=0.3 SECTIONS="headline ..." KEEP=1
bench: test-deps build
	$(MAKE) --no-print-directory build TARGET=$(MUSL) >/dev/null
	$(MAKE) --no-print-directory build TARGET=$(ARM64) >/dev/null
	sh scripts/sizes.sh $(call bin_of,$(MUSL)) $(call bin_of,$(ARM64))
	bash benches/bench.sh $(BIN)
	bash benches/docker.sh $(BIN)

# cargo-fuzz targets (fuzz/, its own crate and workspace): what a DHCP server sends the dhcp
# daemon's packet socket, and what a client writes to its unix socket. Each runs FUZZ_TIME
# seconds and prints libFuzzer's statistics (executions, coverage); a crash stops it with the
# input saved under fuzz/artifacts/. Needs `cargo install cargo-fuzz` and a nightly toolchain.
FUZZ_TIME ?= 60
FUZZ_TARGETS ?= dhcp_reply rpc_stream
fuzz:
	for t in $(FUZZ_TARGETS); do \
	  $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_TIME) -print_final_stats=1 || exit 1; done
