"""Rehearsal traces (``validator.trace`` JSON lines) -> per-rank call histories and endings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from validator import safejson
from validator.diagnose.flightrec import MAX_RANKS, group_ranks, plain, render, window
from validator.diagnose.inputs import open_binary
from validator.diagnose.sequences import Call, Divergence, first_divergence
from validator.errors import UserError
from validator.targets import fold_ranks

MAX_TRACE_LINE = 1 << 20
MAX_CALLS = 200_000  # per trace; a rehearsal of a few steps records hundreds

ROOTED = ("broadcast", "reduce", "gather", "scatter", "broadcast_object_list", "gather_object", "scatter_object_list")
P2P = ("send", "recv", "isend", "irecv")


@dataclass(slots=True)
class Trace:
    path: str
    rank: int
    world_size: int | None
    host: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    groups: dict[str, list[int]] = field(default_factory=dict)
    ending: dict[str, Any] | None = None  # exception | exit | signal | end; None: still running or killed


def _lines(f: BinaryIO, path: str) -> Iterator[tuple[int, bytes]]:
    """(line number, line), streamed; a line past MAX_TRACE_LINE is bad input."""
    carry, n = b"", 0
    while True:
        data = f.read(1 << 20)
        parts = (carry + data).split(b"\n")
        carry = parts.pop() if data else b""
        if len(carry) > MAX_TRACE_LINE:
            raise UserError("trace line longer than 1 MiB", f"{path}:{n + len(parts) + 1}")
        for part in parts:
            n += 1
            yield n, part
        if not data:
            return


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 63 else None


def load_trace(path: str) -> Trace:
    trace: Trace | None = None
    bad: int | None = None  # a line that is not JSON: fine only as the last one (a killed process)
    try:
        with open_binary(path) as f:
            for n, raw in _lines(f, path):
                if not raw.strip():
                    continue
                if bad is not None:
                    raise UserError("not a trace line (invalid JSON)", f"{path}:{bad}")
                try:
                    doc = safejson.loads(raw, path, line=n)
                except safejson.JsonError:
                    bad = n
                    continue
                trace = _take(trace, path, n, doc)
    except (OSError, EOFError) as e:
        raise UserError(f"cannot read: {e}", path) from None
    if trace is None:
        raise UserError("empty trace file", path)
    return trace


def _take(trace: Trace | None, path: str, n: int, doc: Any) -> Trace | None:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind == "header":
        rank = _int(doc.get("rank"))
        if rank is None or rank < 0:
            raise UserError("trace header has no rank", f"{path}:{n}")
        ws = _int(doc.get("world_size"))
        host = doc.get("host")
        return Trace(
            path, rank, ws if ws and 0 < ws <= MAX_RANKS else None, host[:255] if isinstance(host, str) else None
        )
    if trace is None:
        raise UserError("trace does not start with a header line", f"{path}:{n}")
    if kind == "call":
        if len(trace.calls) < MAX_CALLS:
            trace.calls.append(doc)
    elif kind == "group":
        trace.groups[plain(doc.get("pg"))] = group_ranks(doc.get("ranks") or [], f"{path}:{n}")
    elif kind in ("exception", "exit", "signal") or (kind == "end" and trace.ending is None):
        trace.ending = doc
    return trace


def _call(doc: dict[str, Any]) -> Call:
    op = plain(doc.get("op"))[:80]
    shapes, dtypes = render(doc.get("shapes")), render(doc.get("dtypes"))
    peer = _int(doc.get("peer")) if op in ROOTED else None
    raw = doc.get("dtypes")
    names = ",".join(d for d in raw[:64] if isinstance(d, str)) if isinstance(raw, list) else dtypes
    detail = f"{op} {shapes} {names}".strip()
    site = doc.get("site")
    return Call(
        op, (op, shapes, dtypes, peer), site[:500] if isinstance(site, str) else None, _int(doc.get("seq")) or 0, detail
    )


@dataclass(slots=True)
class TraceAnalysis:
    divergences: list[tuple[Divergence, list[int]]]
    p2p: list[str]  # unmatched point-to-point, one sentence each
    notes: list[str]
    ranks: list[int]


def analyze(traces: list[Trace]) -> TraceAnalysis:
    by_rank = {t.rank: t for t in traces}
    notes: list[str] = []
    world = max((t.world_size or 0 for t in traces), default=0)
    missing = [r for r in range(world) if r not in by_rank]
    if missing:
        notes.append(f"no trace from rank {fold_ranks(missing)} (world size {world})")
    hist: dict[str, dict[int, dict[int, Call]]] = {}
    for t in traces:
        for doc in t.calls:
            if doc.get("op") in P2P or doc.get("op") == "batch_isend_irecv":
                continue
            c = _call(doc)
            hist.setdefault(plain(doc.get("pg")), {}).setdefault(t.rank, {})[c.index] = c
    out: list[tuple[Divergence, list[int]]] = []
    for pg in sorted(hist, key=lambda g: (g != "0", g)):
        members = next((t.groups[pg] for t in traces if t.groups.get(pg)), None)
        if members is None:
            members = sorted(by_rank) if pg == "0" else sorted(hist[pg])
        h = window({r: hist[pg].get(r, {}) for r in members if r in by_rank})
        d = first_divergence(h, pg)
        if d is not None:
            out.append((d, members))
    return TraceAnalysis(out, _p2p(traces), notes, sorted(by_rank))


def _p2p(traces: list[Trace]) -> list[str]:
    sends: dict[tuple[int, int], list[Any]] = {}
    recvs: dict[tuple[int, int], list[Any]] = {}
    for t in traces:
        for doc in t.calls:
            op, peer = doc.get("op"), _int(doc.get("peer"))
            if op in ("send", "isend") and peer is not None:
                sends.setdefault((t.rank, peer), []).append((render(doc.get("shapes")), plain(doc.get("site"))))
            elif op in ("recv", "irecv") and peer is not None:
                recvs.setdefault((peer, t.rank), []).append((render(doc.get("shapes")), plain(doc.get("site"))))
    out = []
    for src, dst in sorted(set(sends) | set(recvs)):
        s, r = sends.get((src, dst), []), recvs.get((src, dst), [])
        for i, (a, b) in enumerate(zip(s, r, strict=False)):
            if a[0] != b[0]:
                out.append(
                    f"send #{i + 1} from rank {src} to rank {dst} has shape {a[0]} at {a[1]}, the recv at rank {dst} expects {b[0]} at {b[1]}"
                )
                break
        else:
            if len(s) != len(r):
                more, who = (s, f"rank {src} sent") if len(s) > len(r) else (r, f"rank {dst} posted")
                extra = more[min(len(s), len(r))]
                out.append(
                    f"rank {src} sent {len(s)} tensors to rank {dst} and rank {dst} posted {len(r)} receives from it; "
                    f"the first unmatched one: {who} it at {extra[1]}"
                )
    return out


def trace_name(path: str) -> str:
    return os.path.basename(path)
