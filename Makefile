# cnibox: build, install, test, demo, bench.
#   make                 static release binary (musl when its Rust target is installed, else static glibc)
#   sudo make install    install the binary and the applet symlinks into $(CNI_BIN_DIR)
#   sudo make test       install missing test dependencies (apt-get), then run every test
#   sudo make demo       two containers on a bridge, inside private namespaces
#   sudo make bench      cnibox against the Go plugins, netavark and the kernel floor (knobs: docs/benchmarks.md)

PREFIX      ?= /usr/local
CNI_BIN_DIR ?= /opt/cni/bin
CARGO       ?= cargo
MUSL        := x86_64-unknown-linux-musl
GNU         := x86_64-unknown-linux-gnu
TARGET      ?= $(shell if [ -d "$$(rustc --print sysroot)/lib/rustlib/$(MUSL)" ]; then echo $(MUSL); else echo $(GNU); fi)
BIN          = target/$(TARGET)/release/cnibox

.PHONY: all build install uninstall test test-deps check demo bench clean fmt lint

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

# Every test: unit tests, integration tests in private network namespaces; then the plugin
# and hook tests again against the static release binary that `make install` ships. The
# integration tests are one binary (tests/integration, one module per area); RELEASE_TESTS
# picks the plugin and hook modules by path (libtest filters match substrings, so each
# names its module from the crate root).
RELEASE_TESTS := applets:: bridge::behaviour:: veth:: macvlan:: host_local:: oci_hook:: loopback:: tuning:: bandwidth:: chains:: docker:: portmap::behaviour:: firewall::behaviour:: firewall::iptables_nft::
test: test-deps build
	$(CARGO) test --locked --no-fail-fast -- --test-threads=4
	CNIBOX_TEST_BIN=$(abspath $(BIN)) $(CARGO) test --locked --no-fail-fast --test integration -- --test-threads=4 $(RELEASE_TESTS)

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

bench: test-deps build
	bash benches/bench.sh $(BIN)
	bash benches/docker.sh $(BIN)
