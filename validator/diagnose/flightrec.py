"""Flight Recorder dumps (pickle or JSON) -> per-rank collective histories, read safely.

A dump is plain dicts/lists/tuples/str/int/float/bool/None (reference §4.2). The pickle is read
by an unpickler that refuses every global and persistent id, so a crafted dump cannot run code:
it fails with a one-line error naming the file. Everything read from a dump is bounded: the
file (64 MiB inflated), the entries kept (the last 100,000), the text rendered from a value
(shared references in a 2 KB pickle can describe 10**40 nodes: ``render`` visits at most 256),
the ranks of a group, and the span of sequence numbers compared.
"""

from __future__ import annotations

import io
import itertools
import os
import pickle
from dataclasses import dataclass, field
from typing import Any

from validator import safejson
from validator.diagnose.inputs import MAX_JSON, dump_rank, read_json, read_limited
from validator.diagnose.sequences import Call, Divergence, first_divergence, user_frame
from validator.errors import UserError
from validator.targets import fold_ranks

MAX_DUMP = MAX_JSON
MAX_ENTRIES = 100_000  # Flight Recorder keeps 2,000 by default (TORCH_FR_BUFFER_SIZE)
MAX_RANKS = 1 << 20  # members of one process group
MAX_RANK = (1 << 31) - 1
SPAN = 1 << 18  # sequence numbers compared past the first one every rank has
RENDER_NODES = 256
RENDER_CHARS = 1000


def render(obj: Any, budget: int = RENDER_NODES) -> str:
    """``str()`` of plain data for small values; bounded in nodes visited, depth and length."""
    left = [budget]
    text = _render(obj, left, 0)
    return text if len(text) <= RENDER_CHARS else text[: RENDER_CHARS - 1] + "…"


def _render(obj: Any, left: list[int], depth: int) -> str:
    left[0] -= 1
    if left[0] < 0:
        return "…"
    if isinstance(obj, str):
        return repr(obj[:200]) + ("…" if len(obj) > 200 else "")
    if isinstance(obj, bool) or obj is None or isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, int):
        return repr(obj) if obj.bit_length() <= 128 else "<int too large>"
    if isinstance(obj, (list, tuple, dict)):
        if depth >= 16:
            return "…"
        items = obj.items() if isinstance(obj, dict) else obj
        head = list(itertools.islice(items, 64))
        if isinstance(obj, dict):
            parts = [f"{_render(k, left, depth + 1)}: {_render(v, left, depth + 1)}" for k, v in head]
        else:
            parts = [_render(x, left, depth + 1) for x in head]
        inner = ", ".join(parts) + (", …" if len(obj) > 64 else "")
        if isinstance(obj, tuple) and len(obj) == 1:
            inner += ","
        if isinstance(obj, dict):
            return "{" + inner + "}"
        return f"({inner})" if isinstance(obj, tuple) else f"[{inner}]"
    if isinstance(obj, (bytes, bytearray)):
        return repr(bytes(obj[:64]))
    return f"<{type(obj).__name__}>"


def plain(obj: Any) -> str:
    """A string as it is (cut to 200 characters), anything else rendered."""
    return obj[:200] if isinstance(obj, str) else render(obj)


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
        data = read_limited(path, MAX_DUMP, "Flight Recorder dump")
        try:
            doc = load_plain_pickle(data)
        except Exception as e:  # noqa: BLE001 - any malformed or hostile pickle: one line, no traceback
            raise UserError(f"not a readable Flight Recorder pickle: {str(e)[:200]}", path) from None
    else:
        doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("entries", []), list):
        raise UserError("not a Flight Recorder dump (no 'entries' list)", path)
    entries = _entries(doc)
    return Dump(path, rank, plain(doc.get("version", "")), entries, _pg_ranks(doc, path), _pg_status(doc, entries))


def _entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    entries = doc.get("entries", [])
    return [e for e in entries[-MAX_ENTRIES:] if isinstance(e, dict)]


def group_ranks(value: Any, where: str) -> list[int]:
    """A group's ranks: a list, or the string of one (``"[0, 1, 2]"``); anything else is bad input."""
    ranks = value
    if isinstance(value, str):
        try:
            ranks = safejson.loads(value[: 16 * MAX_RANKS], where) if value.strip() else []
        except safejson.JsonError:
            ranks = None
    ok = isinstance(ranks, (list, tuple)) and len(ranks) <= MAX_RANKS
    if ok and all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= MAX_RANK for r in ranks):
        return list(ranks)
    raise UserError(f"pg_config ranks is not a list of ranks: {render(value)[:60]}", where)


def _pg_ranks(doc: dict[str, Any], path: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    cfg = doc.get("pg_config") or {}
    if not isinstance(cfg, dict):
        return out
    for key, val in itertools.islice(cfg.items(), 100_000):
        if not isinstance(val, dict):
            continue
        ranks = group_ranks(val.get("ranks", "[]"), f"{path}: pg_config[{plain(key)[:40]}]")
        if ranks:
            # gloo dumps in 2.13 key the default group by "" (reference §4.2)
            out[plain(val.get("name") or key or "0")] = ranks
    return out


def _pg_status(doc: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """pg_status is keyed by the local pg_id; translate to the pg name via the entries."""
    names = {plain(e.get("pg_id")): _pg_name(e) for e in entries}
    out: dict[str, dict[str, int]] = {}
    status = doc.get("pg_status") or {}
    if isinstance(status, dict):
        for pg_id, st in itertools.islice(status.items(), 100_000):
            if isinstance(st, dict) and plain(pg_id) in names:
                out[names[plain(pg_id)]] = {plain(k): _int(v) for k, v in itertools.islice(st.items(), 64)}
    return out


def _int(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 63:
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdecimal() and len(v) < 20:
        return int(v)
    return -1


def _pg_name(e: dict[str, Any]) -> str:
    pg = e.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        return plain(pg[0])
    return plain(e.get("pg_id", "0"))


def _op(e: dict[str, Any]) -> str:
    name = plain(e.get("profiling_name", "?"))
    op = name.split(":", 1)[-1]
    return op.split(" ", 1)[0]  # "send 1->2" -> "send"


def calls(dump: Dump) -> dict[str, dict[int, Call]]:
    """pg name -> collective_seq_id -> call (point-to-point entries left out)."""
    out: dict[str, dict[int, Call]] = {}
    for e in dump.entries:
        if e.get("is_p2p"):
            continue
        seq = e.get("collective_seq_id")
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 < seq < 1 << 63:
            continue
        raw_frames = e.get("frames")
        frames = [f for f in (raw_frames[:64] if isinstance(raw_frames, list) else []) if isinstance(f, dict)]
        stack = [f"{plain(f.get('filename'))}:{plain(f.get('line'))} in {plain(f.get('name'))}" for f in frames]
        op = _op(e)
        sizes = (render(e.get("input_sizes")), render(e.get("output_sizes")))
        dtypes = (render(e.get("input_dtypes")), render(e.get("output_dtypes")))
        out.setdefault(_pg_name(e), {})[seq] = Call(
            op=op,
            sig=(op, sizes, dtypes),
            site=user_frame(list(reversed(stack))),
            index=seq,
            detail=f"{op} in={sizes[0]} out={sizes[1]} {dtypes[0]}",
            stack=tuple(reversed(stack)),
            state=plain(e.get("state")) if e.get("state") is not None else None,
        )
    return out


def window(hist: dict[int, dict[int, Call]]) -> dict[int, dict[int, Call]]:
    """Histories cut to SPAN sequence numbers past the first one every rank has (hostile or
    corrupt numbers far apart would otherwise make the comparison walk a huge range)."""
    firsts = [min(h) for h in hist.values() if h]
    if not firsts:
        return hist
    top = max(firsts) + SPAN
    return {r: {k: c for k, c in h.items() if k <= top} for r, h in hist.items()}


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
        hist = window({r: per_rank[r].get(pg, {}) for r in members if r in by_rank})
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
