"""Rehearsal traces (``validator.trace`` JSON lines) -> per-rank call histories and endings."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from validator.diagnose.inputs import open_binary
from validator.diagnose.sequences import Call, Divergence, first_divergence
from validator.errors import UserError
from validator.targets import fold_ranks

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


def load_trace(path: str) -> Trace:
    trace: Trace | None = None
    with open_binary(path) as f:
        lines = f.read().decode("utf-8", "replace").split("\n")
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            if n >= len(lines) - 1:
                break  # the last line of a killed process may be cut short
            raise UserError("not a trace line (invalid JSON)", f"{path}:{n}") from None
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind == "header":
            rank = doc.get("rank")
            if not isinstance(rank, int):
                raise UserError("trace header has no rank", f"{path}:{n}")
            trace = Trace(path, rank, doc.get("world_size"), doc.get("host"))
        elif trace is None:
            raise UserError("trace does not start with a header line", f"{path}:{n}")
        elif kind == "call":
            trace.calls.append(doc)
        elif kind == "group":
            trace.groups[str(doc.get("pg"))] = [int(r) for r in doc.get("ranks") or []]
        elif kind in ("exception", "exit", "signal") or (kind == "end" and trace.ending is None):
            trace.ending = doc
    if trace is None:
        raise UserError("empty trace file", path)
    return trace


def _call(doc: dict[str, Any]) -> Call:
    op = str(doc.get("op"))
    shapes, dtypes = json.dumps(doc.get("shapes")), json.dumps(doc.get("dtypes"))
    peer = doc.get("peer") if op in ROOTED else None
    detail = f"{op} {doc.get('shapes')} {','.join(doc.get('dtypes') or [])}".strip()
    return Call(op, (op, shapes, dtypes, peer), doc.get("site"), int(doc.get("seq", 0)), detail)


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
            hist.setdefault(str(doc.get("pg")), {}).setdefault(t.rank, {})[c.index] = c
    out: list[tuple[Divergence, list[int]]] = []
    for pg in sorted(hist, key=lambda g: (g != "0", g)):
        members = next((t.groups[pg] for t in traces if t.groups.get(pg)), None)
        if members is None:
            members = sorted(by_rank) if pg == "0" else sorted(hist[pg])
        h = {r: hist[pg].get(r, {}) for r in members if r in by_rank}
        d = first_divergence(h, pg)
        if d is not None:
            out.append((d, members))
    return TraceAnalysis(out, _p2p(traces), notes, sorted(by_rank))


def _p2p(traces: list[Trace]) -> list[str]:
    sends: dict[tuple[int, int], list[Any]] = {}
    recvs: dict[tuple[int, int], list[Any]] = {}
    for t in traces:
        for doc in t.calls:
            op, peer = doc.get("op"), doc.get("peer")
            if op in ("send", "isend") and isinstance(peer, int):
                sends.setdefault((t.rank, peer), []).append((doc.get("shapes"), doc.get("site")))
            elif op in ("recv", "irecv") and isinstance(peer, int):
                recvs.setdefault((peer, t.rank), []).append((doc.get("shapes"), doc.get("site")))
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
