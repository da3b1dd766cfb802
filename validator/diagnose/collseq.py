"""Per-rank collective sequences from ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL`` lines, and the
first place the ranks of one communicator part.

NCCL src/enqueue.cc prints one line per collective:
``INFO(NCCL_COLL, "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d
comm %p [nranks=%d] stream %p", opName, comm->opCount, ...)``; src/init.cc ties the comm pointer
of a process to its rank: ``"%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId
0x%llx - Init COMPLETE"`` (older releases: no commId). Communicators are matched across processes
by commId, else by their size.

Memory is bounded: per (host, pid, comm) only the last ``WINDOW`` collectives are kept, where a
hang's divergence is.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque
from typing import Any

from validator.diagnose import strength as S
from validator.diagnose.events import Cause, Quote
from validator.targets import fold_ranks

WINDOW = 2048
_COLL = re.compile(
    r"(?P<op>\w+): opCount (?P<n>[0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) datatype (?P<dt>\d+) "
    r"op (?P<redop>\d+) root (?P<root>\d+) comm (?P<comm>\S+) \[nranks=(?P<nranks>\d+)\]"
    r"(?:.*? globalrank (?P<grank>\d+))?"  # RCCL appends "task %d globalrank %d"
)
_INIT = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<n>\d+)(?:.*?commId (?P<id>0x[0-9a-fA-F]+))?"
)
# ncclDataType_t (src/include/nccl.h)
DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
          "float8e4m3", "float8e5m2"]  # fmt: skip

Key = tuple[str | None, int | None, str]  # host, pid, comm pointer


def _store(facts: list[tuple[Any, ...]]) -> dict[str, Any]:
    for f in facts:
        if f[0] == "coll_seq":
            store: dict[str, Any] = f[1]
            return store
    store = {"seq": {}, "init": {}}
    facts.append(("coll_seq", store))
    return store


def record(facts: list[tuple[Any, ...]], host: str | None, pid: int | None, text: str, source: str) -> bool:
    """An NCCL INFO line: a COLL line or an Init line goes into this file's sequences."""
    if "opCount" in text and (m := _COLL.search(text)):
        seqs = _store(facts)["seq"]
        key = (host, pid, m["comm"])
        if key not in seqs:
            seqs[key] = deque(maxlen=WINDOW)
        sig = (m["op"], int(m["count"]), int(m["dt"]), int(m["redop"]), int(m["root"]))
        seqs[key].append((int(m["n"], 16), sig, int(m["nranks"]), source))
        if m["grank"] is not None:
            _store(facts)["init"].setdefault(key, (int(m["grank"]), int(m["nranks"]), None))
        return True
    if " nranks " in text and (m := _INIT.search(text)):
        _store(facts)["init"][(host, pid, m["comm"])] = (int(m["rank"]), int(m["n"]), m["id"])
    return False


def _show(sig: tuple[Any, ...]) -> str:
    op, count, dt, _redop, root = sig
    dts = DTYPES[dt] if 0 <= dt < len(DTYPES) else f"datatype {dt}"
    return f"{op} count {count} {dts}" + (f" root {root}" if op in ("Broadcast", "Reduce") else "")


def first_divergence(stores: list[dict[str, Any]]) -> Cause | None:
    """Merge the stores of all files, group per communicator, compare the ranks at each opCount."""
    init: dict[Key, tuple[int, int, str | None]] = {}
    seqs: dict[Key, deque[tuple[int, tuple[Any, ...], int, str]]] = {}
    for st in stores:
        init.update(st["init"])
        seqs.update(st["seq"])
    comms: dict[tuple[Any, ...], dict[int, dict[int, tuple[tuple[Any, ...], str]]]] = defaultdict(dict)
    for key, entries in seqs.items():
        if key not in init or not entries:
            continue
        rank, nranks, comm_id = init[key]
        comms[(comm_id or "", nranks)][rank] = {n: (sig, src) for n, sig, _nr, src in entries}
    found = [c for c in (_compare(ranks) for ranks in comms.values() if len(ranks) > 1) if c is not None]
    return max(found, key=lambda c: c.strength) if found else None


def _compare(ranks: dict[int, dict[int, tuple[tuple[Any, ...], str]]]) -> Cause | None:
    lo = max(min(s) for s in ranks.values())  # the window every rank still holds
    hi = max(max(s) for s in ranks.values())
    for n in range(lo, hi + 1):
        at = {r: s.get(n) for r, s in ranks.items()}
        present = {r: x for r, x in at.items() if x is not None}
        if not present:
            continue
        votes = Counter(x[0] for x in present.values())
        (top, k), *rest = votes.most_common()
        odd = sorted(r for r, x in present.items() if x[0] != top)
        missing = sorted(r for r, x in at.items() if x is None)
        if not odd and not missing:
            continue
        members = sorted(ranks)
        majority = sorted(r for r, x in present.items() if x[0] == top)
        evidence = [Quote(present[r][1], f"rank {r}: {_show(present[r][0])} (opCount {n:#x})", r) for r in odd[:2]]
        evidence.append(
            Quote(present[majority[0]][1], f"rank {majority[0]}: {_show(top)} (opCount {n:#x})", majority[0])
        )
        where = f"opCount {n:#x} of the {len(members)}-rank communicator"
        if odd:
            clear = not rest or k > rest[0][1]
            what = "; ".join(sorted({f"{_show(present[r][0])}" for r in odd}))
            return Cause(
                code="COL001",
                summary=f"rank{'s' if len(odd) > 1 else ''} {fold_ranks(odd)} called {what} at {where} where "
                f"ranks {fold_ranks(majority)} called {_show(top)}",
                culprits=odd if clear else [],
                confidence="high" if clear and k >= 2 else "unknown",
                reason="NCCL_DEBUG_SUBSYS=COLL sequences compared per communicator at each opCount (majority)",
                evidence=evidence,
                expected=_show(top),
                actual=what,
                strength=S.HISTORY_MISMATCH,
            )
        if len(missing) * 2 < len(members):
            return Cause(
                code="COL002",
                summary=f"rank{'s' if len(missing) > 1 else ''} {fold_ranks(missing)} never called {_show(top)} "
                f"at {where}; ranks {fold_ranks(majority)} did",
                culprits=missing,
                confidence="medium",
                reason="NCCL_DEBUG_SUBSYS=COLL sequences: the other ranks logged this collective, these never did",
                evidence=evidence,
                expected=_show(top),
                actual="no call",
                strength=S.HISTORY_MISSING,
            )
        return None
    return None
