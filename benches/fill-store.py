#!/usr/bin/env python3
"""fill-store.py DIR COUNT PREFIX: COUNT host-local reservations in the reference's format.

Files PREFIX.<hi>.<lo> for the addresses PREFIX.0.2 upwards (PREFIX.0.1 is the gateway),
holding `pre<i>\\r\\neth0` with mode 0600 (as cnibox and the reference >= 1.4 write them),
plus last_reserved_ip.0 naming the last one: a store another writer left behind.
"""
import os
import sys

d, n, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if n > 65000:
    sys.exit("fill-store: COUNT must fit a /16")
os.makedirs(d, exist_ok=True)
last = None
for i in range(n):
    v = 2 + i
    name = "%s.%d.%d" % (prefix, v >> 8, v & 255)
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"pre%d\r\neth0" % i)
    os.close(fd)
    last = name
if last:
    with open(os.path.join(d, "last_reserved_ip.0"), "w") as f:
        f.write(last)
