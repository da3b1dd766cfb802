"""Hostile clients of the preflight coordinator (issue 10), shared by tests/preflight/test_hostile.py
and benchmarks/hostile_preflight.py. Each one speaks real TCP to a live coordinator on loopback,
is bounded in connections and time, and returns what the coordinator answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from typing import Any

from validator.model import Facts
from validator.preflight import coordinator as coord
from validator.preflight import protocol as wire

HOST = "127.0.0.1"
STOP = threading.Event()  # set: every attack ends at its next connection (ConnectionAbortedError)


def connect(port: int, limit: float = 30.0, timeout: float = 10.0) -> socket.socket:
    """A connection to the coordinator, retried until it listens (bounded)."""
    deadline = time.monotonic() + limit
    while True:
        if STOP.is_set():
            raise ConnectionAbortedError("attack stopped")
        try:
            s = socket.create_connection((HOST, port), timeout=timeout)
            s.settimeout(timeout)
            return s
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def reply(s: socket.socket) -> dict[str, Any]:
    """The next frame, or {"type": "closed"} if the coordinator closed or reset the connection."""
    try:
        return wire.recv_msg(s, wire.MAX_HEADER)
    except (OSError, wire.ProtocolError):
        return {"type": "closed"}


def header(job_id: str, size: int, **extra: Any) -> bytes:
    return wire.encode({"type": "facts", "proto": wire.PROTO, "job_id": job_id, "size": size, "mac": "", **extra})


def spam_job_ids(port: int, n: int, size: int) -> dict[str, int]:
    """n connections, each presenting a different job id of ``size`` characters: replies by type."""
    seen: dict[str, int] = {}
    for i in range(n):
        with connect(port) as s:
            reply(s)  # hello
            job = f"{i:08d}" + os.urandom(size // 2).hex()[: size - 8]
            with contextlib.suppress(OSError):
                s.sendall(header(job, 100))
            kind = reply(s)["type"]
            seen[kind] = seen.get(kind, 0) + 1
    return seen


def register(port: int, body: bytes, job_id: str, token: str | None, secret: bytes | None = None,
             **header_extra: Any) -> tuple[socket.socket, dict[str, Any], bytes]:  # fmt: skip
    """Send facts like a participant does (``header_extra``: more header fields, e.g. its clock);
    returns the open socket, the coordinator's reply and the bytes sent (what an eavesdropper
    could replay)."""
    s = connect(port)
    hello = reply(s)
    extra = {} if token is None else {"token": token}
    mac = wire.mac(secret, str(hello.get("nonce", "")), job_id, body, token or "")
    sent = wire.encode({"type": "facts", "proto": wire.PROTO, "job_id": job_id, "size": len(body), "mac": mac,
                        "listen": None, **extra, **header_extra}) + wire.frame(body)  # fmt: skip
    s.sendall(sent)
    return s, reply(s), sent


def replay(port: int, sent: bytes) -> dict[str, Any]:
    """Send captured bytes verbatim on a new connection; the coordinator's reply."""
    with connect(port) as s:
        reply(s)
        s.sendall(sent)
        return reply(s)


def idle_flood(port: int, n: int) -> list[socket.socket]:
    """n connections that never speak, held open (the caller closes them)."""
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection((HOST, port), timeout=5))
        except OSError:
            break
    return socks


def drain(socks: list[socket.socket], limit: float = 30.0) -> dict[str, int]:
    """Wait (bounded) until the coordinator has closed each socket; what the last frame before the
    close said, by type ("hello" alone: closed without a word)."""
    deadline = time.monotonic() + limit
    seen: dict[str, int] = {}
    for s in socks:
        last = "open"
        s.settimeout(max(0.1, deadline - time.monotonic()))
        while True:
            msg = reply(s)
            if msg["type"] == "closed":
                break
            last = str(msg["type"])
        seen[last] = seen.get(last, 0) + 1
        s.close()
    return seen


def big_bodies(port: int, n: int, size: int = wire.MAX_FACTS) -> list[socket.socket]:
    """n connections announcing ``size``-byte facts and sending all but the last byte, held open
    (the caller closes them). The coordinator's budget decides how many it keeps."""
    chunk = b"x" * (size - 1)
    held = []
    for _ in range(n):
        s = connect(port)
        reply(s)
        with contextlib.suppress(OSError):  # refused: the coordinator closed it mid-send
            s.sendall(header("", size) + wire.LEN.pack(size) + chunk)
        held.append(s)
    return held


def malformed_frames(facts_body: bytes) -> dict[str, bytes]:
    """Frames that crashed the coordinator's parser on main (issue 10), each a full client send."""
    deep_header = b'{"type":"facts","x":' + b"[" * 8000 + b"]" * 8000 + b"}"
    bodies = {
        "deep body": b"[" * 100_000 + b"]" * 100_000,
        "pid Infinity": facts_body.replace(b'"pid":', b'"pid":Infinity,"was":', 1),
        "pid NaN": facts_body.replace(b'"pid":', b'"pid":NaN,"was":', 1),
        "pid 1e999": facts_body.replace(b'"pid":', b'"pid":1e999,"was":', 1),
        "5000-digit int": facts_body.replace(b'"pid":', b'"pid":' + b"9" * 5000 + b',"was":', 1),
        "not UTF-8": b"\xff\xfe" + facts_body[2:],
        "raw agent output": json.dumps({"kind": "raw", "schema": 1}).encode(),
    }
    out = {"deep header": wire.frame(deep_header), "header Infinity": wire.frame(b'{"type":"facts","size":Infinity}')}
    for name, body in bodies.items():
        out[name] = header("", len(body)) + wire.frame(body)
    return out


def send_all(port: int, frames: dict[str, bytes]) -> dict[str, str]:
    """Each frame on its own connection: what the coordinator did (reject reason, or closed)."""
    seen = {}
    for name, data in frames.items():
        with connect(port) as s:
            reply(s)
            with contextlib.suppress(OSError):
                s.sendall(data)
            msg = reply(s)
            seen[name] = str(msg.get("reason", msg["type"]))
    return seen


def flood(port: int, until: threading.Event, limit: float = 60.0) -> int:
    """Connections as fast as one thread opens them, every other one closed at once and the rest
    sent a garbage frame, until ``until`` is set (at most ``limit`` seconds): the flood that kept
    torch's TCPStore from ever serving (docs/preflight.md). Returns how many were made."""
    n, deadline = 0, time.monotonic() + limit
    garbage = wire.LEN.pack(40) + b"\xff" * 44
    while not until.is_set() and time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=2) as s:
                if n % 2:
                    s.sendall(garbage)
            n += 1
        except OSError:
            time.sleep(0.01)
    return n


def peak_rss(pid: int) -> int:
    """VmHWM of a live process, bytes (0 once it has exited)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Live:
    """A real Coordinator (rank mode, job id "") serving on loopback from a thread of this process,
    so a test can look at its state; records whatever reached the event loop's exception handler."""

    def __init__(
        self, own: Facts, expected: set[int], secret: bytes | None, max_connections: int | None = None
    ) -> None:
        self.errors: list[str] = []
        self.sock = coord.bind(0, HOST)
        self.port = int(self.sock.getsockname()[1])
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.c: coord.Coordinator | None = None
        self.stop: asyncio.Event | None = None
        by_rank = lambda f: f["launch"]["rank"]  # noqa: E731
        args = (own, coord.Expect(expected, len(expected), len(expected)), by_rank, "", secret, 600, max_connections)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.serve(*args)), daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    async def serve(self, *args: Any) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop.set_exception_handler(lambda _, ctx: self.errors.append(repr(ctx.get("exception") or ctx)))
        self.c = c = coord.Coordinator(*args)
        self.stop = asyncio.Event()
        server = await self.loop.create_server(lambda: coord.Connection(c), sock=self.sock)
        self.ready.set()
        await self.stop.wait()
        server.close()

    def close(self) -> None:
        assert self.loop is not None and self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)


def final_verdict(s: socket.socket) -> dict[str, Any]:
    """The verdict as a participant acts on it: a proposed pass ("pending", the two-phase verdict)
    is confirmed with "ready" and counts once the go comes; seals are skipped (this client checks
    none). Bounded: 8 frames."""
    pending: dict[str, Any] | None = None
    for _ in range(8):
        msg = wire.recv_msg(s, wire.MAX_VERDICT)
        if msg["type"] == "seal":
            continue
        if msg["type"] == "verdict" and msg.get("pending") is True and pending is None:
            pending = msg
            s.sendall(wire.encode({"type": "ready"}))
            continue
        if msg["type"] == "go" and pending is not None:
            return {k: v for k, v in pending.items() if k != "pending"}
        return msg
    raise AssertionError("no final verdict within 8 frames")
