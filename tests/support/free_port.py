"""A TCP port on 127.0.0.1 for a test server, chosen below the kernel's ephemeral range.

A port the kernel hands out for bind(0) can be taken as the source port of another test's
client connection before the server binds it (EADDRINUSE); ports below
ip_local_port_range are never handed out that way. Same rule as free_port() in
tests/support/child_process.h.
"""
import random
import socket


def free_port():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    low = 10000
    span = max(ephemeral_low - low, 1000)
    start = random.SystemRandom().randrange(span)
    for i in range(span):
        port = low + (start + i) % span
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port on 127.0.0.1 below the ephemeral range")
