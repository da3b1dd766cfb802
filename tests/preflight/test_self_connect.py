"""A participant retrying toward a port nobody listens on yet, where the port is an even one in the
kernel's ephemeral range (Linux picks even source ports for connect), now and then gets the port
itself as its source port: TCP's simultaneous open then connects the socket to itself. Such a
socket holds the job's port, so rank 0, starting just then, cannot bind it, takes the holder for
another coordinator and joins it: nobody coordinates. participant._connect refuses a socket that
is connected to itself. Loopback only; about 40,000 attempts (1 s) per self-connection here."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from validator.preflight.participant import _connect


def even_unused_port() -> int:
    """An even port in the ephemeral range that nobody holds (bind to 0 gives odd ones)."""
    low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for port in range(low + (low % 2), high, 2 * 101):  # spread out, bounded
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    pytest.skip("no even ephemeral port is free")


def test_a_socket_connected_to_itself_is_refused() -> None:
    port = even_unused_port()
    seen = 0
    for _ in range(400_000):  # bounded: ~10 s at most; a self-connection comes every ~40,000 here
        try:
            s = _connect("127.0.0.1", port, 1.0)
        except ConnectionRefusedError as e:
            if "connected to itself" in str(e):
                seen += 1
                break
            continue
        s.close()
        raise AssertionError(f"connected to port {port}, where nobody listens (to itself)")
    if not seen:
        pytest.skip("the kernel never picked the port itself as the source port in 400,000 attempts")
    with socket.socket() as rank0:  # the port is free again at once: rank 0 can bind it
        rank0.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rank0.bind(("0.0.0.0", port))
