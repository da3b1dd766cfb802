"""Connections the coordinator refuses or drops, folded into a bounded tally, and the checks on
what a connection claims before it becomes a participant.

Everything here comes from strangers as well as from the job's participants: the tally keeps
a count per reason (a fixed phrase), at most PEERS_MAX peers and one short example each, so the
verdict frame stays small whatever arrives; the PRE004 findings made from it are information
only and never change the exit code (``model.NEVER_FAILS``). A flood still going on when the
verdict is due (``Refusals.flooding``) is PRE009, an error: the job would start into it.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from validator.preflight import protocol as wire

if TYPE_CHECKING:  # participants import this module (run.py): asyncio is the coordinator's alone
    import asyncio

REASONS_MAX = 16  # distinct reasons kept; the rest are counted as OTHER
PEERS_MAX = 16  # distinct peers named per reason
DETAIL_MAX = 160  # characters of one example
SPEAK_S = 5.0  # a connection must send its header within this many seconds of connecting
BODY_BUDGET = 256 << 20  # facts bytes in flight across all connections
SMALL_BODY = 256 << 10  # a body this small may evict a bigger one when the budget is spent
# A flood: FLOOD_N refused, dropped or silent connections within FLOOD_WINDOW_S. torch 2.13's
# TCPStore never started serving under ~125 garbage connections a second for 4 s, nor after ~4,000
# in 3 s, garbage or empty; under 80 a second for 8 s it did (docs/preflight.md, "A flood on the port"). The job's participants have all
# arrived when this is looked at: none of them is refused any more.
FLOOD_N = 50
FLOOD_WINDOW_S = 1.0
FLOOD_WAIT_S = 10.0  # how long the verdict waits for a flood to stop

# Each reason completes "N connection(s) ...".
OTHER_JOB = "refused: participant of another job"
TOO_MANY = "this node is one too many"  # a full job's door (door.turn_away): final, no retry seats it
AUTH = "refused: authentication failed (wrong or missing VALIDATOR_SECRET)"
INVALID = "refused: invalid facts"
IMPOSTOR = "refused: claims a registered participant's host and pid without its token"
CAPACITY = "refused: the coordinator is at its connection limit"
EVICTED = "dropped at the connection limit: the oldest connection that had not sent its facts"
BUDGET = "refused: the coordinator's memory budget for facts in flight is spent"
FULL = "refused: the coordinator holds as many participants or facts as it accepts"
IDLE = f"dropped: idle, no facts header within {SPEAK_S:.0f} s"
SLOW = "dropped: too slow, facts incomplete in time"
MALFORMED = "dropped: malformed frame"
SILENT = "closed without a word"
CUT = "closed in the middle of a frame"
OTHER = "refused or dropped for other reasons"
RETRY = frozenset({CAPACITY, EVICTED, BUDGET, IDLE, SLOW})  # the participant is told to retry


@dataclass
class Refused:
    count: int = 0
    peers: dict[str, int] = field(default_factory=dict)  # at most PEERS_MAX
    example: str = ""


class Refusals:
    """reason -> Refused, bounded in reasons, peers and characters."""

    def __init__(self) -> None:
        self.by_reason: dict[str, Refused] = {}
        self.recent: deque[float] = deque(maxlen=FLOOD_N)  # when the last FLOOD_N came

    def flooding(self) -> bool:
        """FLOOD_N or more within the last FLOOD_WINDOW_S."""
        return len(self.recent) == FLOOD_N and time.monotonic() - self.recent[0] <= FLOOD_WINDOW_S

    def sources(self, limit: int = 5) -> list[str]:
        """The peers that sent the most, across reasons; not this node's own ranks ("local",
        the node-local socket), which a flood only gets dropped."""
        counts: dict[str, int] = {}
        for r in self.by_reason.values():
            for peer, n in r.peers.items():
                if peer != "local":
                    counts[peer] = counts.get(peer, 0) + n
        return sorted(counts, key=lambda p: (-counts[p], p))[:limit]

    def flood_text(self) -> str:
        """A flood in words, for the coordinator's stderr line and PRE009."""
        return (
            f"{FLOOD_N}+ refused connections within {FLOOD_WINDOW_S:g} s, most from {', '.join(self.sources()) or '?'}"
        )

    def add(self, reason: str, peer: str, detail: str = "") -> None:
        self.recent.append(time.monotonic())
        reason = reason[:DETAIL_MAX]
        if reason not in self.by_reason and len(self.by_reason) >= REASONS_MAX:
            reason, detail = OTHER, ""
        r = self.by_reason.setdefault(reason, Refused())
        r.count += 1
        peer = peer[:64]
        if peer in r.peers or len(r.peers) < PEERS_MAX:
            r.peers[peer] = r.peers.get(peer, 0) + 1
        if detail and not r.example:
            r.example = clip(detail)


class Guest(Protocol):
    size: int  # the facts body it announced
    timer: asyncio.TimerHandle | None

    def refuse(self, reason: str, tell: bool = True, detail: str = "") -> None: ...


class Gate:
    """Connections that are not participants yet, oldest first, and their facts bodies in flight,
    reserved in BODY_BUDGET: what a flood of silent or slow connections can hold is bounded."""

    def __init__(self) -> None:
        self.silent: dict[Guest, None] = {}
        self.bodies: set[Guest] = set()
        self.in_flight = 0  # bytes reserved by self.bodies

    def enter(self, conn: Guest) -> None:
        self.silent[conn] = None

    def evict(self) -> bool:
        """At the connection limit: drop the oldest connection that has not sent its facts."""
        for conn in self.silent:
            conn.refuse(EVICTED)
            return True
        return False

    def reserve(self, conn: Guest, size: int) -> bool:
        """Room for a facts body of ``size`` bytes. A small body (every real node's) makes room
        by dropping the biggest one in flight; a big one waits its turn (refused, retried)."""
        while self.in_flight + size > BODY_BUDGET:
            biggest = max(self.bodies, key=lambda b: b.size, default=None)
            if size > SMALL_BODY or biggest is None or biggest.size <= SMALL_BODY:
                return False
            biggest.refuse(BUDGET, detail=f"{biggest.size} bytes in flight, dropped for a smaller one; retry")
        conn.size = size
        self.bodies.add(conn)
        self.in_flight += size
        return True

    def release(self, conn: Guest) -> None:
        if conn in self.bodies:
            self.bodies.discard(conn)
            self.in_flight -= conn.size

    def leave(self, conn: Guest) -> None:
        """``conn`` is done sending its facts (accepted, or closing): stop its timer, free its budget."""
        self.silent.pop(conn, None)
        self.release(conn)
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None


def clip(text: str, limit: int = DETAIL_MAX) -> str:
    return wire.printable(text, limit)


def token(value: object) -> str:
    """The participant's per-process token ("" when absent: it can register but never replace)."""
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > wire.TOKEN_MAX:
        raise wire.ProtocolError(f"bad token {wire.short(value)}")
    return value


def listener(value: object) -> dict[str, Any] | None:
    """The participant's net-check listener: {"port", "token", "addrs": the addresses it bound}."""
    if value is None:
        return None
    if (
        isinstance(value, dict)
        and set(value) == {"port", "token", "addrs"}
        and type(value["port"]) is int
        and 0 < value["port"] < 65536
        and isinstance(value["token"], str)
        and len(value["token"]) <= wire.TOKEN_MAX
        and isinstance(value["addrs"], list)
        and len(value["addrs"]) <= 2
        and all(isinstance(a, str) and len(a) <= 64 for a in value["addrs"])
    ):
        return value
    raise wire.ProtocolError(f"bad listener {wire.short(value)}")


NUMBER = (int, float)
ROW: dict[str, type | tuple[type, ...]] = {"label": str, "ok": bool, "error": (str, type(None))}
FIGURES: dict[str, type | tuple[type, ...]] = {"rtt_ms": NUMBER, "up_mbps": NUMBER, "down_mbps": NUMBER,
                                               "up_bytes": int, "down_bytes": int, "lost": bool}  # fmt: skip


def _row(r: object) -> dict[str, Any] | None:
    if not isinstance(r, dict) or not all(isinstance(r.get(k), t) for k, t in ROW.items()):
        return None
    out = {k: clip(v, 256) if isinstance(v, str) else v for k, v in r.items() if k in ROW}
    for k, t in FIGURES.items():
        v = r.get(k)
        if (
            isinstance(v, bool)
            if t is bool
            else isinstance(v, (int, float)) and type(v) is not bool and math.isfinite(v)
        ):
            out[k] = v
    for key in ("retrans", "reorder"):  # (segments lost, segments): the net check's loss figures
        got = r.get(key)
        if isinstance(got, list) and len(got) == 2 and all(type(x) is int and 0 <= x < 1 << 32 for x in got):
            out[key] = got
    return out


def netcheck_rows(msg: dict[str, Any], limit: int = 8) -> list[dict[str, Any]]:
    """A participant's probe results, keeping only well-formed rows, short strings and figures."""
    rows = msg.get("results") if msg.get("type") == "netcheck" else None
    return [row for r in (rows[:limit] if isinstance(rows, list) else []) if (row := _row(r)) is not None]
