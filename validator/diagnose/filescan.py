"""One log file -> events and rank facts. Runs in worker processes: plain data in, plain data out."""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from validator.diagnose import blocks, collseq
from validator.diagnose.classify import classify
from validator.diagnose.events import Event, Ident, Role
from validator.diagnose.inputs import open_binary
from validator.diagnose.logs import parse_line, rank_in_message, stream_of
from validator.diagnose.scan import Hit, hits

PER_KEY = 3  # events kept per (kind, who); the rest are counted
TEXT_MAX = 400
_INIT = re.compile(
    r"comm \S+ rank (?P<rank>\d+) nranks (?P<n>\d+) cudaDev (?P<dev>\d+)(?: nvmlDev \d+)? busId (?P<bus>\w+)"
)


@dataclass(slots=True)
class FileResult:
    path: str
    events: list[Event] = field(default_factory=list)
    facts: list[tuple[Any, ...]] = field(default_factory=list)
    suppressed: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    bytes: int = 0
    error: str | None = None


class _State:
    def __init__(self, path: str, year: int) -> None:
        self.res = FileResult(path)
        self.year = year
        self.name = os.path.basename(path)
        self.kept: Counter[tuple[str, Any]] = Counter()
        self.stacks: dict[bytes, tuple[int, list[str]]] = {}  # stream -> (exception line, frames)
        self.skip: dict[bytes, int] = {}  # stream -> skip hits up to this line (inside a block)

    def add(self, ev: Event) -> None:
        who = ev.ident.rank if ev.ident.rank is not None else (ev.ident.node, ev.ident.local_rank, ev.ident.pid)
        key = (ev.kind, who)
        self.kept[key] += 1
        if self.kept[key] > PER_KEY and ev.role != Role.FACT:
            self.res.suppressed[ev.kind] += 1
            return
        self.res.events.append(ev)


def _event(st: _State, kind: str, role: Role, data: dict[str, Any], text: str, line_no: int, line: Any) -> Event:
    ident = line.ident
    if "reporter" in data and ident.rank is None:  # a message that names the rank printing it
        ident.rank = int(data["reporter"])
    msg_rank, pg = rank_in_message(text)
    if msg_rank is not None:
        data.setdefault("msg_rank", msg_rank)
    if pg is not None:
        data.setdefault("pg", pg)
    return Event(kind, role, text[:TEXT_MAX], f"{st.name}:{line_no}", ident, line.time, data, file=st.res.path)


def _handle(st: _State, hit: Hit) -> bool:
    """Process one hit; False when it needs more of the file (deferred)."""
    raw = hit.raw
    stream = stream_of(raw)
    if st.skip.get(stream, 0) > hit.line:
        return True
    line = parse_line(raw.decode("utf-8", "replace"), st.year)
    text = line.text
    if text.startswith("Traceback (most recent call last)"):
        follow, more = hit.following(400)
        tb = blocks.read_traceback(follow, stream)
        if not tb.complete and more and hit.defer():
            return False
        st.stacks[stream] = (hit.line + 1 + _nth_line(follow, stream, tb.span), tb.frames)
        st.skip[stream] = hit.line + 1 + _nth_line(follow, stream, tb.span)
        return True
    if "ChildFailedError" in text or text.startswith("Root Cause (first observed failure)"):
        return _summary(st, hit, stream, line)
    if text.rstrip().endswith("Last error:"):
        follow, more = hit.following(8)
        nxt = [
            t for t in (parse_line(f.decode("utf-8", "replace"), st.year) for f in follow) if t.stream == line.stream
        ]
        if not nxt and more and hit.defer():
            return False
        if nxt and nxt[0].text:
            got = classify(nxt[0].text)
            kind, role, data = got if got else ("nccl.last_error", Role.SYMPTOM, {"what": nxt[0].text})
            st.add(_event(st, kind, role, data, nxt[0].text, hit.line + 1, line))
        return True
    if "Rendezvous complete" in text:
        follow, more = hit.following(16)
        if len(follow) < 12 and more and hit.defer():
            return False
        info = blocks.read_rendezvous(follow, stream)
        if "local_ranks" in info and "global_ranks" in info:
            st.res.facts.append(("rdzv", line.ident.node, info["local_ranks"], info["global_ranks"]))
        return True
    if line.nccl == "INFO" and collseq.record(
        st.res.facts, line.ident.host, line.ident.pid, text, f"{st.name}:{hit.line}"
    ):
        return True  # a NCCL_DEBUG_SUBSYS=COLL line: kept in this file's per-rank sequences
    if line.nccl == "INFO" and " nranks " in text:
        if m := _INIT.search(text):
            st.res.facts.append(("nccl_init", line.ident.host, line.ident.pid, int(m["rank"]), int(m["n"]), m["bus"]))
        return True
    got = classify(text)
    if got is None:
        return True
    kind, role, data = got
    if kind == "hvd.missing_block":
        data["ranks"] = blocks.missing_ranks(hit.following(64)[0], stream)
    elif kind == "nccl.ras_missing":
        data["section"] = blocks.ras_section(hit.buf, hit.start)
    ev = _event(st, kind, role, data, text, hit.line, line)
    pending = st.stacks.get(stream)
    if pending and pending[0] == hit.line:
        ev.stack = pending[1]
    st.add(ev)
    return True


def _nth_line(follow: list[bytes], stream: bytes, n: int) -> int:
    """Offset (in all lines) of the n-th line that belongs to ``stream``."""
    seen = 0
    for i, raw in enumerate(follow):
        if stream_of(raw) == stream:
            if seen == n:
                return i
            seen += 1
    return len(follow)


def _summary(st: _State, hit: Hit, stream: bytes, line: Any) -> bool:
    follow, more = hit.following(600)
    lead = [hit.raw] if "ChildFailedError" not in line.text else []  # an excerpt that starts at Root Cause
    failures, span, complete = blocks.read_summary(lead + follow, stream)
    span -= len(lead)
    if not complete and more and hit.defer():
        return False
    st.skip[stream] = hit.line + 1 + _nth_line(follow, stream, span)
    for f in failures:
        data = f.to_data()
        ident = Ident(rank=data.get("rank"), local_rank=data.get("local"), node=line.ident.node, host=data.get("host"))
        text = f"{'root cause' if f.root else 'failure'}: rank {data.get('rank')} exitcode {data.get('exit')}"
        text += f" ({data['signal']})" if data.get("signal") else ""
        text += f": {data['message']}" if data.get("message") else ""
        ev = Event(
            "summary.failure", Role.SUMMARY, text[:TEXT_MAX], f"{st.name}:{hit.line}", ident, data.get("time"), data
        )
        ev.stack, ev.file = data.pop("stack", []), st.res.path
        st.add(ev)
    return True


def scan_file(path: str) -> FileResult:
    """All events of one log file (plain or gzip). Errors are recorded, never raised; what was
    read before an error (a truncated .gz) is kept."""
    try:
        st = _State(path, time.localtime(os.stat(path).st_mtime).tm_year)
        st.res.bytes = os.stat(path).st_size
    except OSError as e:
        res = FileResult(path)
        res.error = f"cannot read: {e.strerror}"
        return res
    try:
        with open_binary(path) as f:
            for hit in hits(f):
                if _handle(st, hit):
                    st.res.lines = hit.line
    except (OSError, EOFError, ValueError) as e:
        st.res.error = f"read stopped early: {e}"
    return st.res
