#!/bin/sh
# The sizes of the x86_64 and arm64 musl binaries (make test-arm64, make bench), and their
# limits: the x86_64 binary with every applet within 1.75 MiB (1,835,008 bytes), and the
# arm64 one within the x86_64 one's size. A new applet that breaks a limit fails make test.
# Usage: scripts/sizes.sh X86_64_BIN ARM64_BIN
set -eu
limit=1835008
x=$(stat -L -c %s "$1") a=$(stat -L -c %s "$2")
echo "binary size: x86_64 $x bytes ($((x / 1024)) KiB; limit $limit), arm64 $a bytes ($((a / 1024)) KiB; limit: the x86_64 size)"
[ "$x" -le "$limit" ] || { echo "error: the x86_64 binary is larger than $limit bytes" >&2; exit 1; }
[ "$a" -le "$x" ] || { echo "error: the arm64 binary is larger than the x86_64 one" >&2; exit 1; }
