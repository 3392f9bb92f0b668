#!/usr/bin/env python3
"""lo-up.py NETNS-NAME...: bring `lo` up in each named network namespace (/run/netns/NAME).

What `ip -n NAME link set lo up` does, for hundreds of namespaces from one process instead of
one `ip` per namespace (make bench creates ~1,500 of them; the processes were seconds of its
wall time, none of it measured). setns() moves only this process.
"""
import ctypes
import fcntl
import os
import socket
import struct
import sys

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP = 0x1
IFREQ = "16sH22x"  # struct ifreq: the name, then ifr_flags in the union

libc = ctypes.CDLL(None, use_errno=True)
for name in sys.argv[1:]:
    fd = os.open("/run/netns/" + name, os.O_RDONLY | os.O_CLOEXEC)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        sys.exit("lo-up: setns %s: %s" % (name, os.strerror(err)))
    os.close(fd)
    # a socket belongs to the namespace it was created in, so one per namespace
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack(IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
