"""Flight Recorder dumps (pickle or JSON) -> per-rank collective histories, read safely.

A dump is plain dicts/lists/tuples/str/int/float/bool/None (reference §4.2). The pickle is read
by an unpickler that refuses every global and persistent id, so a crafted dump cannot run code:
it fails with a one-line error naming the file.
"""

from __future__ import annotations

import ast
import io
import os
import pickle
from dataclasses import dataclass, field
from typing import Any

from validator.diagnose.inputs import dump_rank, open_binary, read_json
from validator.diagnose.sequences import Call, Divergence, first_divergence, user_frame
from validator.errors import UserError
from validator.targets import fold_ranks

MAX_DUMP = 1 << 30


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a Flight Recorder dump holds plain data only")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refusing a persistent id: a Flight Recorder dump holds plain data only")


def load_plain_pickle(data: bytes) -> Any:
    """pickle.loads for plain data only (no classes, no functions, no reduce)."""
    return _PlainUnpickler(io.BytesIO(data)).load()


@dataclass(slots=True)
class Dump:
    path: str
    rank: int
    version: str
    entries: list[dict[str, Any]]
    pg_ranks: dict[str, list[int]]  # pg name -> member ranks (when the dump says)
    pg_status: dict[str, dict[str, int]] = field(default_factory=dict)  # pg name -> last_* counters


def load_dump(path: str, kind: str) -> Dump:
    rank = dump_rank(path)
    if rank is None:
        raise UserError(
            "cannot tell the rank of this Flight Recorder dump from its name (expected <prefix><rank>)", path
        )
    if kind == "fr-pickle":
        with open_binary(path) as f:
            data = f.read(MAX_DUMP + 1)
        if len(data) > MAX_DUMP:
            raise UserError("Flight Recorder dump larger than 1 GiB", path)
        try:
            doc = load_plain_pickle(data)
        except Exception as e:  # noqa: BLE001 - any malformed or hostile pickle: one line, no traceback
            raise UserError(f"not a readable Flight Recorder pickle: {e}", path) from None
    else:
        doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("entries", []), list):
        raise UserError("not a Flight Recorder dump (no 'entries' list)", path)
    return Dump(path, rank, str(doc.get("version", "")), _entries(doc), _pg_ranks(doc), _pg_status(doc))


def _entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc.get("entries", []) if isinstance(e, dict)]


def _pg_ranks(doc: dict[str, Any]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    cfg = doc.get("pg_config") or {}
    if not isinstance(cfg, dict):
        return out
    for key, val in cfg.items():
        if not isinstance(val, dict):
            continue
        try:
            ranks = ast.literal_eval(str(val.get("ranks", "[]")))
        except (ValueError, SyntaxError):
            continue
        if isinstance(ranks, (list, tuple)) and ranks:
            # gloo dumps in 2.13 key the default group by "" (reference §4.2)
            out[str(val.get("name") or key or "0")] = [int(r) for r in ranks]
    return out


def _pg_status(doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    """pg_status is keyed by the local pg_id; translate to the pg name via the entries."""
    names = {str(e.get("pg_id")): _pg_name(e) for e in _entries(doc)}
    out: dict[str, dict[str, int]] = {}
    status = doc.get("pg_status") or {}
    if isinstance(status, dict):
        for pg_id, st in status.items():
            if isinstance(st, dict) and str(pg_id) in names:
                out[names[str(pg_id)]] = {k: _int(v) for k, v in st.items()}
    return out


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _pg_name(e: dict[str, Any]) -> str:
    pg = e.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        return str(pg[0])
    return str(e.get("pg_id", "0"))


def _op(e: dict[str, Any]) -> str:
    name = str(e.get("profiling_name", "?"))
    op = name.split(":", 1)[-1]
    return op.split(" ", 1)[0]  # "send 1->2" -> "send"


def calls(dump: Dump) -> dict[str, dict[int, Call]]:
    """pg name -> collective_seq_id -> call (point-to-point entries left out)."""
    out: dict[str, dict[int, Call]] = {}
    for e in dump.entries:
        if e.get("is_p2p"):
            continue
        seq = e.get("collective_seq_id")
        if not isinstance(seq, int) or seq <= 0:
            continue
        frames = [f for f in e.get("frames") or [] if isinstance(f, dict)]
        stack = [f"{f.get('filename')}:{f.get('line')} in {f.get('name')}" for f in frames]
        op = _op(e)
        sizes = (str(e.get("input_sizes")), str(e.get("output_sizes")))
        dtypes = (str(e.get("input_dtypes")), str(e.get("output_dtypes")))
        out.setdefault(_pg_name(e), {})[seq] = Call(
            op=op,
            sig=(op, sizes, dtypes),
            site=user_frame(list(reversed(stack))),
            index=seq,
            detail=f"{op} in={e.get('input_sizes')} out={e.get('output_sizes')} {e.get('input_dtypes')}",
            stack=tuple(reversed(stack)),
            state=str(e.get("state")) if e.get("state") is not None else None,
        )
    return out


def dump_name(path: str) -> str:
    return os.path.basename(path)


@dataclass(slots=True)
class DumpAnalysis:
    divergences: list[tuple[Divergence, list[int]]]  # with the group's members
    notes: list[str]
    ranks: list[int]


def analyze(dumps: list[Dump]) -> DumpAnalysis:
    """Per process group, match histories by sequence id and majority; first mismatch per group."""
    notes: list[str] = []
    by_rank: dict[int, Dump] = {}
    for d in sorted(dumps, key=lambda d: (d.path.endswith(".json"), d.path)):  # pickles first: they carry stacks
        if d.rank in by_rank and len(by_rank[d.rank].entries) != len(d.entries):
            notes.append(
                f"two different dumps for rank {d.rank} ({dump_name(by_rank[d.rank].path)}, {dump_name(d.path)}); using the first"
            )
        by_rank.setdefault(d.rank, d)
    dumps = list(by_rank.values())
    versions = {d.version for d in dumps}
    if len(versions) > 1:
        notes.append(f"Flight Recorder dumps have different versions ({', '.join(sorted(versions))})")
    per_rank = {d.rank: calls(d) for d in dumps}
    groups = sorted({pg for c in per_rank.values() for pg in c}, key=lambda g: (len(g), g))
    out: list[tuple[Divergence, list[int]]] = []
    for pg in groups:
        members = _members(dumps, per_rank, pg)
        missing = [r for r in members if r not in by_rank]
        if missing:
            notes.append(f"no Flight Recorder dump from rank {fold_ranks(missing)} (group {pg})")
        hist = {r: per_rank[r].get(pg, {}) for r in members if r in by_rank}
        div = first_divergence(hist, pg)
        if div is not None:
            out.append((div, members))
    return DumpAnalysis(out, notes, sorted(by_rank))


def _members(dumps: list[Dump], per_rank: dict[int, dict[str, dict[int, Call]]], pg: str) -> list[int]:
    for d in dumps:
        if d.pg_ranks.get(pg):
            return d.pg_ranks[pg]
    if pg == "0":
        return sorted(per_rank)
    return sorted(r for r, c in per_rank.items() if pg in c)
