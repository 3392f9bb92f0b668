# cnibox: build, install, test, demo, bench.
#   make                 static release binary (musl when its Rust target is installed, else static glibc)
#   sudo make install    install the binary and the applet symlinks into $(CNI_BIN_DIR)
#   sudo make test       install missing test dependencies (apt-get), then run every test
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
TARGET      ?= $(shell if [ -d "$$(rustc --print sysroot)/lib/rustlib/$(MUSL)" ]; then echo $(MUSL); else echo $(GNU); fi)
BIN          = target/$(TARGET)/release/cnibox

.PHONY: all build install uninstall test test-deps check demo bench clean fmt lint fuzz

all: build

build:
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
# and Docker's modules; the differential tests (the reference as oracle) ran in the first pass.
# libtest filters match substrings, so each names its module from the crate root.
RELEASE_MODULES := applets:: chains:: gocni:: docker::
test: test-deps build
	$(CARGO) test --locked --no-fail-fast -- --test-threads=4
	CNIBOX_TEST_BIN=$(abspath $(BIN)) $(CARGO) test --locked --no-fail-fast --test integration -- --test-threads=4 \
	  $(RELEASE_MODULES) $$($(BIN) --list | sed 's/-/_/g; s/$$/::/') --skip differential::

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt

clean:
	$(CARGO) clean

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
