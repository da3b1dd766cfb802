"""The coordinator's listening socket on the job's port, bound like TCPStore binds it. Plain
sockets, apart from the asyncio coordinator: rank 0 binds its ports before it loads asyncio and
the checks, so the ranks that start beside it find it listening sooner."""

from __future__ import annotations

import errno
import socket


def bound(port: int) -> socket.socket | None:
    """Bound like ``bind`` but not listening (a connection is refused at once until it listens),
    or None when the port is taken: the door's socket (door.py), held through the gather."""
    try:
        return bind(port, listen=False)
    except OSError:
        return None


def bind(port: int, host: str = "", listen: bool = True) -> socket.socket:
    """Bind and listen like TCPStore does (all addresses, dual stack, SO_REUSEADDR)."""
    last: OSError | None = None
    for family, addr in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        if host:
            family, addr = (socket.AF_INET6 if ":" in host else socket.AF_INET), host
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError as e:
            last = e
            continue
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and not host:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.bind((addr, port))
            if listen:
                s.listen(65535)  # capped by net.core.somaxconn
            s.setblocking(False)
            return s
        except OSError as e:
            s.close()
            last = e
            if e.errno == errno.EADDRINUSE or host:
                break
    assert last is not None
    raise last


def bind_first(ports: list[int]) -> tuple[socket.socket, int]:
    """The first of ``ports`` that binds; the last error when none does."""
    for i, port in enumerate(ports):
        try:
            return bind(port), port
        except OSError as e:
            if e.errno != errno.EADDRINUSE or i == len(ports) - 1:
                raise
    raise OSError(errno.EINVAL, "no port to bind")
