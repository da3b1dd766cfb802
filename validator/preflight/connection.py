"""One participant's connection to the coordinator: a small state machine on an asyncio Protocol
(no task, no stream per connection), hello -> header -> facts -> ack -> [probe -> results] ->
verdict. Everything it receives is hostile until proven otherwise: frames are bounded, silent and
slow senders are dropped by the coordinator's gate, and refusals are counted, never quoted whole."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from validator.errors import UserError
from validator.facts.schema import validate_facts
from validator.model import Facts
from validator.preflight import local, peers, sections
from validator.preflight import protocol as wire
from validator.preflight import refusals as rf

if TYPE_CHECKING:
    from validator.preflight.coordinator import Coordinator

BODY_RATE = 1 << 20  # bytes/s a facts body must at least arrive at, after the header
READING = ("header", "body", "probing", "resolving", "proposed")  # states that expect a frame


def ident(facts: Facts, token: str) -> Any:
    """Who a participant is: its process's token (drawn once, sent in every header). Its host and pid are not
    enough: ranks in containers of their own (each pid 1) share them, as do two hosts of one name."""
    return token or (facts["host"], facts["pid"])  # no token: the coordinator's own facts, a door's late node


@dataclass(slots=True)
class Arrival:  # one per rank: 100,000 of them at scale
    facts: Facts
    conn: Connection | None  # None: the coordinator's own facts
    listen: dict[str, Any] | None = None  # the participant's net-check listener: {"port", "token", "addrs"}
    token: str = ""  # the participant's per-process token: only its holder may replace this arrival
    size: int = 0  # bytes of its facts on the wire, counted in the coordinator's FACTS_BUDGET
    clock: tuple[float, float] | None = None  # (offset from our clock, round trip) from its header: peers.py


class Connection(asyncio.Protocol):
    """hello -> header frame -> facts frame -> ack -> [probe -> results] -> verdict -> client closes.

    A connection that has not sent its header within SPEAK_S, or its facts at BODY_RATE after
    that, is dropped; at the connection limit the oldest such connection makes room."""

    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self.buf = bytearray()
        self.state = "header"  # header | body | registered | probing | resolving | proposed | ready | closed
        self.header: dict[str, Any] = {}
        self.size = 0  # the facts body's size, reserved in the coordinator's budget while it arrives
        self.token = ""
        self.job_id = coord.job_id
        self.parts: list[sections.Rank] = []
        self.spans: list[tuple[int, int]] = []  # where each of the facts' texts lies in the body
        self.unix = False
        self.brief = False
        self.peer = "?"
        self.nonce = wire.new_nonce()
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.results: asyncio.Future[Any] | None = None
        self.lost: frozenset[str] = frozenset()  # a node leader's ranks that did not confirm a proposed pass
        self.hello_at = 0.0  # monotonic time our hello left: the clock offset's round trip starts here
        self.clock: tuple[float, float] | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self.unix = sock is not None and sock.family == socket.AF_UNIX  # our node's ranks (local.py)
        self.peer = "local" if self.unix else str((transport.get_extra_info("peername") or ("?",))[0])
        if self.peer.startswith("::ffff:") and "." in self.peer:  # an IPv4 peer of the dual-stack listener
            self.peer = self.peer[7:]
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio sets TCP_NODELAY only where sock.proto is IPPROTO_TCP, and accepted sockets
            # say 0: without it a frame written right after the ack (the name round's question,
            # the verdict) waits for the participant's delayed ACK, 40 ms
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c = self.coord
        if c.closing:
            transport.abort()
            return
        if len(c.open) >= c.max_connections and not c.gate.evict():
            self.refuse(rf.CAPACITY, detail=f"{c.max_connections} connections open; retry")
            return
        c.open.add(self)
        c.gate.enter(self)
        self.timer = asyncio.get_running_loop().call_later(rf.SPEAK_S, self.expire)
        self.hello_at = time.monotonic()
        transport.write(wire.hello(c.job_id, self.nonce, c.remaining()))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.state in ("header", "body") and not self.coord.closing:  # a scan, or one of a flood
            self.coord.rejected.add(rf.SILENT if self.state == "header" and not self.buf else rf.CUT, self.peer)
        self.leave()
        self.state = "closed"
        self.coord.changed.set()  # a proposed pass waits for this participant's confirmation: it will not come
        if self.results is not None and not self.results.done():
            self.results.set_result([])
        if not self.closed.done():
            self.closed.set_result(None)

    def expire(self) -> None:
        if self.state == "header" and not self.buf:
            self.refuse(rf.IDLE)
        elif self.state in ("header", "body"):
            self.refuse(rf.SLOW, detail=f"{len(self.buf)} bytes of a {self.state} frame")

    def data_received(self, data: bytes) -> None:
        if self.state not in READING:
            return  # nothing is expected now: ignored, never buffered
        self.buf += data
        try:
            while self.state in READING and len(self.buf) >= 4:
                (size,) = wire.LEN.unpack_from(self.buf)
                limits = {"header": wire.MAX_FACTS_HEADER, "body": self.size, "resolving": wire.MAX_HEADER}
                limit = limits.get(self.state, wire.MAX_HEADER * 16)
                if size > limit:
                    raise wire.ProtocolError(f"{self.state} frame of {size} bytes over the {limit}-byte limit")
                if len(self.buf) < 4 + size:
                    return
                frame = bytes(self.buf[4 : 4 + size])
                del self.buf[: 4 + size]
                if not self.buf:  # a bytearray keeps what it grew to: thousands of idle 10 KB buffers
                    self.buf = bytearray()
                self.frame(frame)
        except wire.ProtocolError as e:
            self.refuse(rf.MALFORMED, tell=False, detail=str(e))

    def frame(self, body: bytes) -> None:
        if self.state == "header":
            self.got_header(wire.decode(body))
        elif self.state == "body":
            self.got_facts(body)
        elif self.state == "probing":  # a net-check or node probe's answer: its round reads it (bounded)
            msg = wire.decode(body)
            if self.results is not None and not self.results.done():
                self.results.set_result(msg)
            self.state = "registered"
        elif self.state == "proposed":  # coordinator.confirm: still here, and (a leader) which ranks are not
            msg = wire.decode(body)
            if msg["type"] != "ready":
                raise wire.ProtocolError(f"unexpected {wire.short(msg['type'])} message")
            lost = msg.get("lost")
            if lost is not None and not (isinstance(lost, list) and len(lost) <= sections.LOCAL_MAX):
                raise wire.ProtocolError("malformed list of lost ranks")
            self.lost = frozenset(t for t in lost or () if isinstance(t, str))
            self.state = "ready"
            self.coord.changed.set()
        elif self.state == "resolving":  # peers.round_: what this node resolves its peers' names to
            msg = wire.decode(body)
            if msg["type"] == "resolved" and self.results is not None and not self.results.done():
                self.results.set_result(msg)
                self.state = "registered"

    def got_header(self, header: dict[str, Any]) -> None:
        c = self.coord
        if header.get("type") != "facts" or header.get("proto") != wire.PROTO:
            raise wire.ProtocolError(f"unexpected {wire.short(header.get('type'))} message")
        job_id = header.get("job_id")
        if job_id != c.job_id and not c.same_launch(job_id, header.get("rdzv_job") is True):
            detail = f"job id {wire.short(job_id)}; this coordinator serves {wire.short(c.job_id)}"
            self.refuse(rf.OTHER_JOB, detail=detail)
            return
        self.job_id = str(job_id)  # what its MACs and seals are made with
        size = header.get("size")
        most = sections.MAX_GROUP if "ranks" in header else wire.MAX_FACTS
        if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= most:
            raise wire.ProtocolError(f"bad facts size {wire.short(size)}")
        self.token = rf.token(header.get("token"))
        self.brief = header.get("brief") is True  # the verdict's line is enough (unless it names us)
        self.parts, self.spans = sections.read(header, size, self.token)  # each rank's (token, mac, texts)
        self.clock = peers.offset(header.get("clock"), self.hello_at, time.monotonic(), time.time())
        rf.listener(header.get("listen"))
        if not c.gate.reserve(self, size):
            self.refuse(rf.BUDGET, detail=f"{size} bytes announced; retry")
            return
        self.header, self.state = header, "body"
        if self.timer is not None:
            self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_later(rf.SPEAK_S + size / BODY_RATE, self.expire)

    def got_facts(self, body: bytes) -> None:
        """One participant's facts, or a node leader's: each rank's body checked on its own (its
        MAC under our nonce and its token, the schema), and a leader's ranks all of its node."""
        c = self.coord
        c.gate.release(self)
        if len(body) != self.size:
            raise wire.ProtocolError("facts size does not match the header")
        chunks = [body[a:b] for a, b in self.spans]
        ranks = []
        for token, tag, refs in self.parts:
            texts = [(name, chunks[i]) for name, i in refs]
            signed = b"".join(t for _, t in texts) if c.secret else b""  # what its MAC covers
            if not wire.verify(c.secret, self.nonce, self.job_id, signed, tag, token):
                self.refuse(rf.AUTH)
                return
            ranks.append((texts, token, sum(len(t) for _, t in texts)))
        parts = []
        try:
            docs = c.sections.documents([texts for texts, _, _ in ranks])
            for (doc, ok), (_, token, size) in zip(docs, ranks, strict=True):
                if doc.get("kind") == "raw":
                    raise wire.ProtocolError("raw agent output: participants send parsed facts")
                parts.append((validate_facts(doc, self.peer, matched=ok), token, size))
        except (wire.ProtocolError, ValueError, UserError) as e:  # refused, never crashes the server
            self.refuse(rf.INVALID, detail=str(e))
            return
        why = local.same_node([f for f, _, _ in parts]) if "ranks" in self.header else None
        if why:
            self.refuse(rf.INVALID, detail=why)
            return
        if len({token for _, token, _ in parts}) != len(parts):
            self.refuse(rf.INVALID, detail="two ranks with one token in a node leader's frame")
            return
        olds = [c.arrivals.get(ident(f, token)) for f, token, _ in parts]
        for (facts, token, _), old in zip(parts, olds, strict=True):
            if (old is not None and not token) or c.impostor(facts, token):
                self.refuse(rf.IMPOSTOR, detail=f"host {wire.short(facts['host'])} pid {facts['pid']}")
                return
        grew = sum(size - (old.size if old else 0) for (_, _, size), old in zip(parts, olds, strict=True))
        if c.verdict is None and not c.admits(grew, olds[0] if len(parts) == 1 else None):
            self.refuse(rf.FULL, detail=f"{len(c.arrivals)} participants, {c.accepted} bytes of facts")
            return
        self.leave(closing=False)
        self.state = "registered"
        for (facts, token, size), old in zip(parts, olds, strict=True):
            facts = c.shared.add(facts)  # admitted: sections equal to its host's others are shared
            if c.verdict is not None:  # decided already: a late arrival gets the same verdict at once
                c.served.add(c.key(facts))
                c.served_n += 1
                continue
            if old is not None and old.conn not in (None, self) and old.conn.transport is not None:
                old.conn.transport.close()  # the same process reconnected: its earlier connection is stale
            c.register(Arrival(facts, self, self.header.get("listen"), token, size, self.clock))
        self.ack()
        self.header, self.parts, self.spans = {}, [], []  # read: not held for thousands of connections
        if c.verdict is not None:
            c.send_verdict(self, self.brief and any(c.named(facts) for facts, _, _ in parts))
            c.changed.set()

    def ack(self) -> None:
        """Registered: said unless the participant asked for quiet (a send less per participant)."""
        if self.header.get("quiet") is not True:
            self.send({"type": "ack", "arrived": len(self.coord.arrivals), "expected": self.coord.expect.maximum})

    def leave(self, closing: bool = True) -> None:
        """Done sending facts (accepted, or closing): out of the gate (timer, budget), and of the open set."""
        self.coord.gate.leave(self)
        if closing:
            self.coord.open.discard(self)

    def tell(self, frame: bytes, signed: bytes | None = None) -> None:
        """A frame the participant acts on (a verdict, a probe or resolve request): with a secret,
        followed by its seal under the participant's own token (protocol.py). ``signed``: the
        frame's ``protocol.sealed``, computed once when many get the same frame."""
        if self.transport is None or self.transport.is_closing():
            return
        c = self.coord
        if not c.secret:
            self.transport.write(frame)
            return
        signed = signed or wire.sealed(frame[wire.LEN.size :])
        mac = wire.mac(c.secret, self.nonce, self.job_id, signed, self.token)
        self.transport.writelines([frame, wire.encode({"type": "seal", "mac": mac})])

    def send(self, msg: dict[str, Any]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(wire.encode(msg))

    def refuse(self, reason: str, tell: bool = True, detail: str = "") -> None:
        """Close this connection and count it under ``reason`` (a fixed phrase); ``detail`` is an
        example, cut short. The peer is told why unless its frames could not be read."""
        self.coord.rejected.add(reason, self.peer, detail)
        if tell:
            why = f"{reason} ({rf.clip(detail)})" if detail else reason
            self.send({"type": "reject", "reason": why, "retry": reason in rf.RETRY})
        self.state = "closed"
        self.buf.clear()
        self.leave()
        if self.transport is not None:
            self.transport.close()
