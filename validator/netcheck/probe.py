"""The net check's two ends, on the nodes. Standard library only and self-contained: scan sends
this source to ``python3 -c`` like the agent; a preflight participant imports it.

    probe.py listen ADDR      bind ADDR on a free port, print {"port", "token"} (or {"error"}),
                              serve until stdin closes
    probe.py probe TIMEOUT    stdin: [{"label", "addr", "port", "token", "measure", "repeat"}, ...];
                              probe each (in parallel), print {"results": [...]} on one line

ADDR may be a JSON object and stdin's list may be wrapped in one, keyed by node name: in a SLURM
step every task receives the same input and picks its own entry (SLURMD_NODENAME).

A connection to a listener first reads its token (a line): that proves the prober reached this
listener, not whatever else holds the port. Then, on a measured link, the prober asks for
``p`` (one-byte echo: a round trip, PINGS times), ``u`` (it sends up to BULK_BYTES for at most
BULK_S; the listener reports what it received, over how long, and its high-percentile rate) and,
on a second connection, ``d`` (the listener sends, the prober times what arrives).

Every figure is a robust value of repeated samples, so that one stall of a busy node (a thread
waiting for the CPU or the GIL) does not make a link look slow: the latency is a low percentile
of PINGS round trips (RTT_AT: the 3rd-fastest of 9), a rate the second-fastest of the SEGMENTS
quarters of the transfer (a receiver that stalled reads its buffer in one burst afterwards, so
the single fastest quarter can flatter a throttled link). A target with ``repeat`` (at most
REPEAT_MAX) is measured that many times in a row and each figure is the best of them: the rounds
after the rings confirm with it, since a fault is slow every time and a busy node's stall is not.
Every request is bounded in size and
time: whatever connects is a stranger until it has the token, and even then it cannot ask for
more than BULK_BYTES or BULK_S.
"""

from __future__ import annotations

import binascii
import contextlib
import errno
import itertools
import json
import os
import select
import socket
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PROBE_THREADS = 64
TIMEOUT_S = 3.0  # connect and answer timeout of one probe (scan: --net-timeout)
PINGS = 9  # small round trips per measured link
RTT_AT = PINGS // 4  # the link's latency: this many round trips were faster (a low percentile)
SEGMENTS = 4  # a transfer's rate: the second-fastest of this many equal parts
BULK_BYTES = 4 << 20  # per direction and link
BULK_S = 0.5  # per direction and link, whatever BULK_BYTES would take
CHUNK = 64 << 10
IDLE_S = 5.0  # a connection that says nothing this long is dropped
REPEAT_MAX = 3  # measurements of one target in a row, at most
PORT_TRIES = 16  # ports tried for a listener on several addresses
SERVING_MAX = 64  # connections served at once; more get the token only
REQ = struct.Struct(">cII")  # request: kind, bytes wanted, milliseconds allowed
REPORT = struct.Struct(">QIQ")  # upload report: bytes received, microseconds first to last, bytes/s (high)
NODE = os.environ.get("SLURMD_NODENAME", "")  # names the output in a SLURM step
ZEROS = memoryview(bytes(CHUNK))


def mine(value: Any) -> Any:
    """This node's entry of a per-node map (SLURM steps), or the value itself."""
    if isinstance(value, dict):
        return value.get(os.environ.get("SLURMD_NODENAME", ""), value.get("*"))
    return value


class Listener:
    """Listens on one port of each given address (the same port on all) until closed."""

    def __init__(self, addrs: list[str], lifetime: float = 3600.0) -> None:
        self.token = binascii.hexlify(os.urandom(8)).decode()
        self.socks: list[socket.socket] = []
        self.errors: dict[str, str] = {}
        self.port = 0
        wanted = list(dict.fromkeys(a.split("/", 1)[0] for a in addrs))
        spent: list[socket.socket] = []
        for tries_left in reversed(range(PORT_TRIES)):
            if not self._bind_all(wanted, retry=tries_left > 0):
                break
            # the first address's free port was in use on a later one (an ephemeral port that an
            # outgoing connection holds there): a busy node, not a fault of the address. Another
            # port, while this one stays held so that the kernel cannot hand it out again
            spent += self.socks
            self.socks, self.errors, self.port = [], {}, 0
        for s in spent:
            s.close()
        self.bound = [s.getsockname()[0] for s in self.socks]
        self.deadline = time.monotonic() + lifetime
        self.slots = threading.BoundedSemaphore(SERVING_MAX)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _bind_all(self, addrs: list[str], retry: bool) -> bool:
        """Bind each address on one port; True (with ``retry``) when a later one found it taken."""
        for addr in addrs:
            try:
                self.socks.append(self._bind(addr))
            except OSError as e:
                if retry and e.errno == errno.EADDRINUSE and self.socks:
                    return True
                self.errors[addr] = f"cannot listen on {addr}: {e.strerror or e}"
        return False

    def _bind(self, addr: str) -> socket.socket:
        family, where = endpoint(addr, self.port)
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.bind(where)
            s.listen(4096)
        except OSError:
            s.close()
            raise
        self.port = self.port or int(s.getsockname()[1])
        return s

    def _serve(self) -> None:
        while not self.stop.is_set() and time.monotonic() < self.deadline and self.socks:
            try:
                ready, _, _ = select.select(self.socks, [], [], 0.2)
            except (OSError, ValueError):
                return
            for s in ready:
                try:
                    conn, _ = s.accept()
                except OSError:
                    continue
                if self.slots.acquire(blocking=False):
                    threading.Thread(target=self._one, args=(conn, True), daemon=True).start()
                else:
                    self._one(conn, False)

    def _one(self, conn: socket.socket, serve: bool) -> None:
        try:
            conn.settimeout(IDLE_S)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.sendall(self.token.encode() + b"\n")
            while serve:
                req = _read(conn, REQ.size)
                if req is None:
                    break
                kind, want, ms = REQ.unpack(req)
                want, cap = min(want, BULK_BYTES), min(ms, int(BULK_S * 1000)) / 1000
                if kind == b"p":
                    conn.sendall(b"p")
                elif kind == b"u":
                    got, secs, high = _drain(conn, want, cap)
                    conn.sendall(REPORT.pack(got, int(secs * 1e6), int(high)))
                elif kind == b"d":
                    _pour(conn, want, cap)
                    break
                else:
                    break
        except OSError:
            pass
        finally:
            conn.close()
            if serve:
                self.slots.release()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(1.0)
        for s in self.socks:
            s.close()


def _read(s: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _drain(s: socket.socket, want: int, cap: float) -> tuple[int, float, float]:
    """Receive up to ``want`` bytes for at most ``cap`` seconds after the first: (bytes, seconds,
    the second-fastest rate of the SEGMENTS equal parts in bytes/s, or 0 when fewer than two
    parts arrived)."""
    got, first, last = 0, 0.0, 0.0
    buf = bytearray(CHUNK)
    part = max(1, want // SEGMENTS)
    marks: list[tuple[float, int]] = []  # (time, bytes so far): the first byte, then each part's end
    while got < want:
        s.settimeout(max(0.01, first + cap - time.monotonic()) if first else IDLE_S)
        try:
            n = s.recv_into(buf, min(CHUNK, want - got))
        except TimeoutError:
            break
        if not n:
            break
        last = time.monotonic()
        first = first or last
        got += n
        if not marks or got >= part * len(marks):
            marks.append((last, got))
        if last - first >= cap:
            break
    s.settimeout(IDLE_S)
    return got, last - first, _high(marks)


def _high(marks: list[tuple[float, int]]) -> float:
    """The second-fastest rate between consecutive marks (bytes/s), 0 with fewer than two."""
    rates = sorted((b - a) / max(t - s, 1e-6) for (s, a), (t, b) in itertools.pairwise(marks))
    return rates[-2] if len(rates) >= 2 else 0.0


def _pour(s: socket.socket, want: int, cap: float) -> int:
    """Send up to ``want`` bytes for at most ``cap`` seconds; bytes sent."""
    sent, end = 0, time.monotonic() + cap
    while sent < want and time.monotonic() < end:
        s.settimeout(max(0.01, end - time.monotonic()))
        try:
            sent += s.send(ZEROS[: min(CHUNK, want - sent)])
        except TimeoutError:
            break
    return sent


def _retrans(s: socket.socket) -> tuple[int, int] | None:
    """(segments retransmitted, segments sent) of a connection, from Linux's TCP_INFO."""
    try:
        info = s.getsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_INFO", 11), 256)
    except OSError:
        return None
    if len(info) < 140:
        return None
    return struct.unpack_from("I", info, 100)[0], struct.unpack_from("I", info, 136)[0]


def _reordered(s: socket.socket) -> tuple[int, int] | None:
    """(data segments that arrived out of order, data segments received) of a receiving
    connection, from TCP_INFO (Linux 5.4+): a drop on the way in shows here, not at the sender's
    end, which is the listener's."""
    try:
        info = s.getsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_INFO", 11), 256)
    except OSError:
        return None
    if len(info) < 228:
        return None
    return struct.unpack_from("I", info, 224)[0], struct.unpack_from("I", info, 152)[0]


def _abort(s: socket.socket) -> None:
    """Close at once (RST), dropping what is still queued: a slow link must not hold us."""
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def endpoint(addr: str, port: int) -> tuple[socket.AddressFamily, tuple[Any, ...]]:
    """The socket family and address of ``addr``, which may name its interface as a link-local
    IPv6 address must (``fe80::1%eth0``: the scope NCCL takes from getifaddrs)."""
    if "%" in addr:
        ip, iface = addr.split("%", 1)
        return socket.AF_INET6, (ip, port, 0, socket.if_nametoindex(iface))
    return (socket.AF_INET6, (addr, port, 0, 0)) if ":" in addr else (socket.AF_INET, (addr, port))


def _connect(host: str, port: int, token: str, timeout: float) -> socket.socket:
    family, where = endpoint(host, port)
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(where)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        got = b""
        while not got.endswith(b"\n") and len(got) < 64:  # bounded read of one short line
            chunk = s.recv(64)
            if not chunk:
                break
            got += chunk
        if got.decode(errors="replace").strip() != token:
            raise LookupError("answered, but not with the listener's token (another service?)")
    except BaseException:
        s.close()
        raise
    return s


def measure(host: str, port: int, token: str, timeout: float) -> dict[str, Any]:
    """Latency and both directions' throughput of one link (the token is already proven)."""
    s = _connect(host, port, token, timeout)
    try:
        rtts = []
        for _ in range(PINGS):
            t0 = time.monotonic()
            s.sendall(REQ.pack(b"p", 0, 0))
            if _read(s, 1) != b"p":
                raise ConnectionError("the listener stopped answering")
            rtts.append(time.monotonic() - t0)
        s.sendall(REQ.pack(b"u", BULK_BYTES, int(BULK_S * 1000)))
        sent, report, end = 0, b"", time.monotonic() + BULK_S + timeout
        while len(report) < REPORT.size and time.monotonic() < end:
            readable, writable, _ = select.select([s], [s] if sent < BULK_BYTES else [], [], 0.1)
            if readable:
                chunk = s.recv(REPORT.size - len(report))
                if not chunk:
                    raise ConnectionError("the connection closed during the transfer")
                report += chunk
            elif writable:
                s.setblocking(False)
                try:
                    sent += s.send(ZEROS[: min(CHUNK, BULK_BYTES - sent)])
                except BlockingIOError:
                    pass
                finally:
                    s.settimeout(timeout)
        if len(report) < REPORT.size:
            raise TimeoutError(f"no transfer report within {BULK_S + timeout:g} s")
        got, usecs, up_high = REPORT.unpack(report)
        loss = _retrans(s)
    finally:
        _abort(s)
    s = _connect(host, port, token, timeout)
    try:
        s.sendall(REQ.pack(b"d", BULK_BYTES, int(BULK_S * 1000)))
        down, down_s, down_high = _drain(s, BULK_BYTES, BULK_S)
        reordered = _reordered(s)
    finally:
        _abort(s)
    return {
        "rtt_ms": round(sorted(rtts)[RTT_AT] * 1000, 3),
        "up_mbps": round((up_high or got / max(usecs / 1e6, 1e-4)) * 8 / 1e6, 1),
        "down_mbps": round((down_high or down / max(down_s, 1e-4)) * 8 / 1e6, 1),
        "up_bytes": got,
        "down_bytes": down,
        "retrans": list(loss) if loss else None,
        "reorder": list(reordered) if reordered else None,
    }


def probe_one(target: dict[str, Any], timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {"label": str(target.get("label"))[:64], "ok": False, "error": None}
    host, port = str(target.get("addr") or "").split("/", 1)[0], target.get("port")
    if not isinstance(port, int) or not 0 < port < 65536 or not host:
        out["error"] = f"no listener address for {out['label']}"
        return out
    repeat = target.get("repeat")
    times = max(1, min(REPEAT_MAX, repeat)) if isinstance(repeat, int) and not isinstance(repeat, bool) else 1
    try:
        _connect(host, port, str(target.get("token")), timeout).close()
        out["ok"] = True
        if target.get("measure"):
            got: list[dict[str, Any]] = []
            for i in range(times):
                try:
                    got.append(measure(host, port, str(target.get("token")), timeout))
                except OSError:
                    if i == times - 1 and not got:
                        raise
            out.update(best(got))
    except LookupError as e:
        out["error"] = f"{host}:{port} {e}"
    except TimeoutError:
        what = "a transfer stalled" if out["ok"] else "no answer"
        out["error"] = f"{what}: {host}:{port} within {timeout:g} s (filtered, no route or overloaded)"
    except OSError as e:
        out["error"] = f"{host}:{port}: {e.strerror or e}"
    if out["ok"] and out["error"]:
        out["lost"] = True  # reached, then the measurement broke off: the link drops data
    return out


def best(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's best of several measurements of one link."""
    if len(rows) == 1:
        return rows[0]

    def share(pair: Any) -> float:
        return pair[0] / pair[1] if isinstance(pair, list) and pair[1] else 0.0

    out = dict(max(rows, key=lambda r: r["up_mbps"]))
    out["rtt_ms"] = min(r["rtt_ms"] for r in rows)
    for key in ("down_mbps", "up_bytes", "down_bytes"):
        out[key] = max(r[key] for r in rows)
    for key in ("retrans", "reorder"):
        out[key] = min((r[key] for r in rows), key=share)
    return out


def probe(targets: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    """Probe every target at once (up to PROBE_THREADS), one result each, in order."""
    targets = [t for t in targets if isinstance(t, dict)]
    if not targets:
        return []
    with ThreadPoolExecutor(min(PROBE_THREADS, len(targets))) as pool:
        return list(pool.map(lambda t: probe_one(t, timeout), targets))


def main(args: list[str]) -> int:
    if args[:1] == ["listen"] and len(args) == 2:
        addr = args[1]
        if addr.startswith("{"):
            addr = str(mine(json.loads(addr)) or "")
        lst = Listener([addr])
        if not lst.socks:
            print(json.dumps({"error": next(iter(lst.errors.values()), "no address"), "node": NODE}), flush=True)
            return 0
        print(json.dumps({"port": lst.port, "token": lst.token, "node": NODE}), flush=True)
        sys.stdin.read()  # until stdin closes (or the bootstrap's watchdog fires)
        lst.close()
        return 0
    if args[:1] == ["probe"] and len(args) == 2:
        targets = mine(json.loads(sys.stdin.read())) or []
        print(json.dumps({"results": probe(targets, float(args[1])), "node": NODE}), flush=True)
        return 0
    print(json.dumps({"error": f"usage: probe.py listen ADDR | probe TIMEOUT, got {args}"}), flush=True)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
