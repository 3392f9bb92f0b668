#!/bin/sh
# The sizes of the x86_64 and arm64 binaries (make test-arm64, make bench), and the limit:
# the arm64 binary with every applet stays within the x86_64 one's size.
# Usage: scripts/sizes.sh X86_64_BIN ARM64_BIN
set -eu
x=$(stat -L -c %s "$1") a=$(stat -L -c %s "$2")
echo "binary size: x86_64 $x bytes ($((x / 1024)) KiB), arm64 $a bytes ($((a / 1024)) KiB; limit: the x86_64 size)"
[ "$a" -le "$x" ] || { echo "error: the arm64 binary is larger than the x86_64 one" >&2; exit 1; }
