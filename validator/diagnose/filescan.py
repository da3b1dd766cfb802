"""One log file -> events and rank facts. Runs in worker processes: plain data in, plain data out."""

from __future__ import annotations

import itertools
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from validator.diagnose import blocks, collseq
from validator.diagnose.anchors import ANCHORS, Anchored, anchored
from validator.diagnose.classify import classify
from validator.diagnose.events import Event, Ident, Role
from validator.diagnose.inputs import local_rank_from_path, open_binary
from validator.diagnose.logs import line_cleaner, parse_line, rank_in_message, starts_message, stream_of, strip_time

PER_KEY = 3  # events kept per (kind, who); the rest are counted
MAX_WHO = 4096  # distinct "who" kept per kind in one file: a flood of distinct pids or ranks is counted, not kept
TEXT_MAX = 400
PARSE_MAX = 4096  # characters of a line that are parsed (a message's fields are at its front)
HEAD = 1 << 16  # bytes read first to learn the file's shape (line numbers, terminal width)
MAX_SHAPES = 1 << 14  # line shapes remembered per file
_MSG_RANK = re.compile(rb"Rank \d+\]")
# torchrun --tee's "[default3]:" / "[gpu187:3]:" opening a line: a local rank that printed (looked for in a
# file's head only; events add the streams of the rest). Found after a newline (the head is read with one in
# front): sre skips to each "\n[" at C speed, where "^" with re.M would try every byte
_TEE = re.compile(rb"\n\[(?:(?!rank\d)([A-Za-z_][A-Za-z_\-]*?)(\d+)(?:\|\d+)?|([A-Za-z][\w.\-]{0,62}):(\d{1,4}))\]:")
_MPI_PROC = re.compile(r"Process name:\s*\[\[\d+,\d+\],(?P<rank>\d+)\]")
# horovodrun's gloo launcher (horovod/runner/gloo_run.py launch_gloo, launch_gloo_elastic): "... The first process to do so
# was:\nProcess name: {name}\nExit code: {code}", the workers sorted by the time they exited; the name is the slot's index
# in the allocation plan (its rank) under launch_gloo, "{hostname}[{local_rank}]" under the elastic driver
_HVD_PROC = re.compile(r"\s*Process name:\s*(?P<name>(?P<rank>\d+)|(?P<host>[\w.\-]+)\[(?P<slot>\d+)\])\s*$")
_MPI_EXIT = re.compile(r"Exit code:\s*(?P<exit>-?\d+)")
# MPICH's mpiexec (Hydra, src/pm/hydra/mpiexec/mpiexec.c): a process that ended badly, in a block of "=" lines:
# "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", "=   [RANK %d ]PID %d RUNNING AT %s", then "=   EXIT CODE: %d"
# or (MPICH 3.3+) "=   KILLED BY SIGNAL: %d (%s)"; older ones add "YOUR APPLICATION TERMINATED WITH THE EXIT STRING:
# Killed (signal 9)" after the block. mpiexec prints a block for every process that ended so, its own cleanup's kills
# too, in rank order: a block's rank is no evidence (the gn59 log: a CUDA error, then blocks for ranks 0, 1, ...)
_HYDRA_PROC = re.compile(r"^=\s+(?:RANK \d+ )?PID (?P<pid>\d+) RUNNING AT (?P<node>[^\s=]+)")
_HYDRA_EXIT = re.compile(
    r"^=\s+(?:EXIT CODE: (?P<exit>\d+)|KILLED BY SIGNAL: (?P<signum>\d+))|\(signal (?P<sig>\d+)\)\s*$"
)
# NCCL src/proxy.cc: WARN("[Proxy Service %d] Failed to execute operation %s from rank %d, retcode %d", proxyState->tpRank
# (comm->rank before 2.19), ...): the rank of the process whose proxy thread prints it, in the communicator that made the
# proxy (its top parent), so below any Init line's default group (nranks 0)
_PROXY = re.compile(r"\[Proxy Service (?P<rank>\d{1,7})\]")
# NCCL 2.4-2.6's transport setup, one line per peer a process connects to: "Ring %02d : %d[%d] -> %d[%d] via %s"
# (rank[cudaDev], the sender's first): the printing process's rank is the one on every line it prints (2.7+'s "Channel"
# lines are not anchored: 2.7+ prints "comm %p rank %d nranks %d" at init, read above)
_RING = re.compile(r"NCCL INFO Ring \d{1,3} ?: (\d{1,7})\[\d+\] -> (\d{1,7})\[\d+\]")
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
    streams: set[tuple[str | None, int]] = field(default_factory=set)  # (node, local rank) of --tee prefixes
    error: str | None = None


class _State:
    def __init__(self, path: str, year: int, name: str) -> None:
        self.res = FileResult(path)
        self.year = year
        self.name = name
        self.local = local_rank_from_path(path)  # torchrun --log-dir: .../attempt_0/<local rank>/stderr.log
        self.kept: Counter[tuple[str, Any]] = Counter()
        self.whos: Counter[str] = Counter()  # distinct keys of self.kept per kind (MAX_WHO)
        self.stacks: dict[bytes, tuple[int, list[str]]] = {}  # stream -> (exception line, frames)
        self.heads: dict[bytes, int] = {}  # stream -> the rank a traceback's header line carried
        self.skip: dict[bytes, int] = {}  # stream -> skip hits up to this line (inside a block)
        self.wrap: int | None = None  # terminal width the paste was hard-wrapped at
        self.joined_until = 0  # lines up to here were continuations of a wrapped line
        self.last: Event | None = None  # the event the current hit produced
        self.rings: dict[tuple[str | None, int], set[int]] = {}  # NCCL (host, pid) -> the ranks on every ring line
        # A line's shape: its stream, its c10d [Rank N], its bytes without digits. Once two lines of
        # one shape gave the same answer (no event, or an event of a kind already kept PER_KEY
        # times for that rank), further lines of that shape are only counted, not parsed: a log of
        # a million different "RuntimeError: boom 123" lines costs a lookup each.
        self.seen: dict[tuple[bytes, bytes, bytes], tuple[str, Any] | None] = {}
        self.known: dict[tuple[bytes, bytes, bytes], str | None] = {}

    def learn(self, shape: tuple[bytes, bytes, bytes] | None, outcome: tuple[str, Any] | None) -> None:
        if shape is None:
            return
        if shape in self.seen and self.seen[shape] == outcome:
            if len(self.known) < MAX_SHAPES:
                self.known[shape] = outcome[0] if outcome else None
        elif len(self.seen) < MAX_SHAPES:
            self.seen[shape] = outcome

    @staticmethod
    def who(ev: Event) -> Any:
        ident = ev.ident  # a c10d "[Rank N]" in the message tells ranks apart where no prefix does
        return (
            ident.rank if ident.rank is not None else (ev.data.get("msg_rank"), ident.node, ident.local_rank, ident.pid)
        )

    def add(self, ev: Event) -> bool:
        """Keep the event, or count it (False) when PER_KEY of its kind and rank are kept."""
        if ev.ident.local_rank is None and ev.ident.rank is None and self.local is not None:
            ev.ident.local_rank = self.local
        key = (ev.kind, self.who(ev))
        if key not in self.kept and ev.role != Role.FACT:
            if self.whos[ev.kind] >= MAX_WHO:
                self.res.suppressed[ev.kind] += 1
                return False
            self.whos[ev.kind] += 1
        self.kept[key] += 1
        self.last = ev
        if self.kept[key] > PER_KEY and ev.role != Role.FACT:
            self.res.suppressed[ev.kind] += 1
            return False
        self.res.events.append(ev)
        return True


_ELASTIC_FRAME = re.compile(r"/torch/distributed/elastic/|/bin/torchrun:")


def _event(st: _State, kind: str, role: Role, data: dict[str, Any], text: str, line_no: int, line: Any) -> Event:
    ident = line.ident
    if kind == "agent.child_failed" and str(data.get("exit", "")).isdecimal() and 128 < int(data["exit"]) < 160:
        # 128 + N: a child a shell (or ssh, or a wrapper) saw die of signal N (137: SIGKILL, often the OOM killer),
        # as torchrun reports a signal: -N
        data["exit"] = str(128 - int(data["exit"]))
    if "reporter" in data and ident.rank is None:  # a message that names the rank printing it
        ident.rank = int(data["reporter"])
    msg_rank, pg = rank_in_message(text)
    if msg_rank is not None:
        data.setdefault("msg_rank", msg_rank)
    if pg is not None:
        data.setdefault("pg", pg)
    return Event(kind, role, text[:TEXT_MAX], f"{st.name}:{line_no}", ident, line.time, data, file=st.res.path)


def _handle(st: _State, hit: Anchored) -> bool:
    """Process one hit; False when it needs more of the file (deferred)."""
    raw = hit.raw
    stream = stream_of(raw)
    if st.skip.get(stream, 0) > hit.line or hit.line <= st.joined_until:
        return True
    shape = None
    if st.wrap is None:
        tag = _MSG_RANK.search(raw)
        shape = (stream, tag.group(0) if tag else b"", raw.translate(None, b"0123456789"))
        if shape in st.known:
            kind = st.known[shape]
            if kind is not None:
                st.res.suppressed[kind] += 1 + hit.repeats
            return True
    first = raw.decode("utf-8", "replace")[:PARSE_MAX]
    if st.wrap is not None and len(first) == st.wrap:
        joined = _unwrap(st, hit, first)
        if joined is None:
            return False
        first = joined
    line = parse_line(first, st.year)
    text = line.text
    # also a logger's record that embeds the traceback after its message (SGLang's scheduler, python/sglang/srt/managers/
    # scheduler.py: logger.error(f"Scheduler hit an exception: {get_exception_traceback()}"))
    if text.startswith("Traceback (most recent call last)") or text.endswith(": Traceback (most recent call last):"):
        follow, more = _following(hit, 400)
        head = blocks.after_stream(first, stream) if stream else first
        tb = blocks.read_traceback(follow, stream, len(head) - len(head.lstrip()))
        if not tb.complete and more and hit.defer():
            return False
        st.stacks[stream] = (hit.line + 1 + _nth_line(follow, stream, tb.span), tb.frames)
        if any(_ELASTIC_FRAME.search(f) for f in tb.frames):  # torchrun's own code: the store is its agent's
            st.add(_event(st, "launch.elastic", Role.FACT, {}, text, hit.line, line))
        if line.ident.rank is not None:  # a logger's prefix on a record's first line only (ParlAI's "rank:  3 |")
            st.heads[stream] = line.ident.rank
        else:
            st.heads.pop(stream, None)
        st.skip[stream] = hit.line + 1 + _nth_line(follow, stream, tb.span)
        return True
    if "ChildFailedError" in text or text.startswith("Root Cause (first observed failure)"):
        return _summary(st, hit, stream, line)
    if text.strip() == "Failures:" and _entry_follows(hit, stream):  # the summary, cut above its header
        return _summary(st, hit, stream, line)
    if text.startswith("error_file"):  # ... and inside its list of failures
        if lead := _entry_above(hit, stream):
            return _summary(st, hit, stream, line, lead)
        return True  # an entry whose opener is not in reach (cut, or lines between): the next entry's may be
    if text.rstrip().endswith("The first process to do so was:"):  # mpirun: "Process name: [[J,V],R]", "Exit code: N"
        follow, more = hit.following(6)
        after = [t.text for t in (parse_line(f.decode("utf-8", "replace"), st.year) for f in follow)]
        if len(after) < 2 and more and hit.defer():
            return False
        proc = next((m for t in after if (m := _MPI_PROC.search(t))), None)
        code = next((m for t in after if (m := _MPI_EXIT.search(t))), None)
        hvd = next((m for t in after if (m := _HVD_PROC.match(t))), None)
        exit_code = code["exit"] if code else "1"
        if proc is not None:
            rank = proc["rank"]
            data = {"reporter": rank, "exit": exit_code, "launcher": "mpirun"}
            what = f"mpirun: the first process to exit non-zero was rank {rank} (exit code {exit_code})"
            st.add(_event(st, "agent.child_failed", Role.SUMMARY, data, what, hit.line, line))
        elif hvd is not None and "Horovod detected" in text:
            data = {"exit": exit_code, "launcher": "horovodrun"}
            if hvd["rank"] is not None:
                data["reporter"] = hvd["rank"]
            else:
                data["node"], data["slot"] = hvd["host"], hvd["slot"]
            what = f"horovodrun: the first process to exit non-zero was {hvd['name']} (exit code {exit_code})"
            st.add(_event(st, "agent.child_failed", Role.SUMMARY, data, what, hit.line, line))
        return True
    if text.startswith("=") and "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" in text:
        follow, more = hit.following(8)
        after = [t.text for t in (parse_line(f.decode("utf-8", "replace"), st.year) for f in follow)]
        if len(after) < 3 and more and hit.defer():
            return False
        proc = next((m for t in after[:2] if (m := _HYDRA_PROC.match(t))), None)
        ends = [m for t in after if (m := _HYDRA_EXIT.search(t))]
        if proc is not None:
            sig = next((m["signum"] or m["sig"] for m in ends if m["signum"] or m["sig"]), None)
            status = next((m["exit"] for m in ends if m["exit"]), "1")
            data = {"exit": str(-int(sig)) if sig else status, "launcher": "mpiexec", "pid": proc["pid"],
                    "node": proc["node"]}  # fmt: skip
            how = f"signal {sig}" if sig else f"exit code {status}"
            what = f"mpiexec: process {proc['pid']} on {proc['node']} ended badly ({how})"
            st.add(_event(st, "agent.child_failed", Role.SUMMARY, data, what, hit.line, line))
        return True
    if text.rstrip().endswith("Last error:"):
        follow, more = hit.following(8)
        same = [
            t for t in (parse_line(f.decode("utf-8", "replace"), st.year) for f in follow) if t.stream == line.stream
        ]
        if not same and more and hit.defer():
            return False
        # a double-spaced paste puts a blank line before the text; an empty "Last error:" is followed by the next log
        # line (NCCL's own, a logger's record with its time or level), which is not that text
        nxt = next((t for t in same[:3] if t.text.strip()), None)
        if nxt is not None and (nxt is same[0] or (nxt.nccl is None and nxt.time is None and nxt.level is None)):
            got = classify(nxt.text)
            kind, role, data = got if got else ("nccl.last_error", Role.SYMPTOM, {"what": nxt.text})
            st.add(_event(st, kind, role, data, nxt.text, hit.line + 1, line))
        return True
    if "Rendezvous complete" in text:
        follow, more = _following(hit, 16)
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
    if line.nccl == "INFO" and line.ident.pid is not None and (m := _RING.match(text)):
        key = (line.ident.host, line.ident.pid)
        if key in st.rings or len(st.rings) < MAX_SHAPES:  # the printer's rank is on each of its lines, either end
            st.rings[key] = st.rings.get(key, {int(m[1]), int(m[2])}) & {int(m[1]), int(m[2])}
        return True
    if line.nccl == "INFO" and " nranks " in text:
        if m := _INIT.search(text):
            st.res.facts.append(("nccl_init", line.ident.host, line.ident.pid, int(m["rank"]), int(m["n"]), m["bus"]))
        return True
    got = classify(text)
    if got is None:
        st.learn(shape, None)
        return True
    kind, role, data = got
    if kind == "agent.child_failed" and "without calling finalize" in text and str(line.ident.node).isdecimal():
        data["reporter"] = str(line.ident.node)  # MS-MPI's "[%d] process exited without calling finalize": its rank
    if kind == "nccl.proxy_failed" and line.ident.pid is not None and (m := _PROXY.search(text)):
        st.res.facts.append(("nccl_init", line.ident.host, line.ident.pid, int(m["rank"]), 0, ""))
    if kind == "hvd.missing_block":
        data["ranks"], split = blocks.missing_ranks(hit.raw, hit.following(64)[0])
        if split:
            data["split"] = "1"
    elif kind == "nccl.ras_missing":
        data["section"] = blocks.ras_section(hit.buf, hit.start)
    elif kind == "accel.state":
        data.update(blocks.accel_state(hit.buf, hit.start))
    elif kind == "jax.barrier_timeout":
        follow, more = _following(hit, 64)
        if len(follow) < 64 and more and hit.defer():
            return False
        data.update(blocks.jax_tasks(text, follow))
    ev = _event(st, kind, role, data, text, hit.line, line)
    pending = st.stacks.get(stream)
    if pending and pending[0] == hit.line:
        ev.stack = pending[1]
        if ev.ident.rank is None and stream in st.heads:  # the exception line of that record
            ev.ident.rank = st.heads[stream]
    if not st.add(ev):  # counted: its shape, seen twice with the same answer, is not parsed again
        who = st.who(ev)
        st.learn(shape, (kind, who if (kind, who) in st.kept else "past MAX_WHO"))
    return True


def _following(hit: Anchored, n: int) -> tuple[list[bytes], bool]:
    """The lines after a hit for the block readers, without time stamps in front of their
    prefixes (``Oct 16 02:07:00   File ...``: a stamp users or CI add to every line)."""
    follow, more = hit.following(n)
    return [strip_time(raw) for raw in follow], more


def _unwrap(st: _State, hit: Anchored, first: str) -> str | None:
    """A line exactly as wide as the terminal, joined with the lines it was wrapped into; None
    when more of the file is needed."""
    follow, more = hit.following(8)
    if not follow and more and hit.defer():
        return None
    n = 0
    for raw in follow:
        part = raw.decode("utf-8", "replace")
        if starts_message(part, st.year) or len(first) >= PARSE_MAX:
            break
        first, n = first + part, n + 1
        if len(part) != st.wrap:
            break
    st.joined_until = hit.line + n
    return first[:PARSE_MAX]


def wrap_width(head: bytes, clean: Callable[[bytes], bytes], year: int) -> int | None:
    """The width a terminal hard-wrapped this paste at: the longest line length, shared by at
    least two lines that are each followed by a line that does not open a message."""
    raw = head.split(b"\n")[:-1]
    if head.isascii() and b"\x1b" not in head and b"\r" not in head:
        lines: list[bytes | str] = list(raw)  # decided on bytes (one byte, one column)
    else:
        lines = [clean(ln).decode("utf-8", "replace") for ln in raw]
    lengths = list(map(len, lines))
    width = max(lengths, default=0)
    if width < 70:
        return None
    cut = 0
    longest: list[int] = []
    i = -1
    while len(longest) < 256:  # the first 256 lines of that length, not the last line (list.index: C speed)
        try:
            i = lengths.index(width, i + 1, len(lines) - 1)
        except ValueError:
            break
        longest.append(i)
    distinct = {lines[i]: i for i in longest}  # a repeated log line is not a wrap
    for i in itertools.islice(distinct.values(), 16):
        b = lines[i + 1]
        text = b if isinstance(b, str) else clean(b).decode("utf-8", "replace")
        if text[:1].isspace() or stream_of(text.encode()):  # cheap: plainly a message of its own
            continue
        if len(set(lines[i])) <= 1 or len(set(text.strip())) <= 1:  # a rule drawn (mpirun's 74 dashes) is no wrap
            continue
        cut += not starts_message(text, year)
        if cut >= 2:
            return width
    return None


def _nth_line(follow: list[bytes], stream: bytes, n: int) -> int:
    """Offset (in all lines) of the n-th line that belongs to ``stream``."""
    seen = 0
    for i, raw in enumerate(follow):
        if stream_of(raw) == stream:
            if seen == n:
                return i
            seen += 1
    return len(follow)


def _entry_follows(hit: Anchored, stream: bytes) -> bool:
    """The next line of ``stream`` is a summary entry (``[1]:``): a bare "Failures:" of another
    program opens no 600-line block."""
    follow, _ = hit.following(4)
    nxt = [f for f in follow if stream_of(f) == stream][:1]
    return bool(nxt) and blocks.is_entry(parse_line(nxt[0].decode("utf-8", "replace"), 0).text)


def _entry_above(hit: Anchored, stream: bytes) -> list[bytes]:
    """A summary entry's lines from its ``[N]:`` opener (at most 9 lines up, in this buffer: its four fields
    above error_file, and lines another process printed between them) to this field line; [] when none opens
    above it."""
    lines, end = [hit.raw], hit.start - 1
    while end > 0 and len(lines) < 10:
        start = hit.buf.rfind(b"\n", 0, end) + 1
        raw = hit.buf[start : min(end, start + 1024)]
        if stream_of(raw) == stream:
            lines.insert(0, raw)
            if blocks.is_entry(parse_line(raw.decode("utf-8", "replace"), 0).text):
                return lines
        end = start - 1
    return []


def _summary(st: _State, hit: Anchored, stream: bytes, line: Any, lead: list[bytes] | None = None) -> bool:
    follow, more = _following(hit, 600)
    if lead is None:
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


def tee_streams(head: bytes) -> set[tuple[str | None, int]]:
    """(node, local rank) of the ``--tee`` prefixes opening the lines of a file's head; of the
    ``[roleN]:`` ones only the most common role (a user's ``[epoch5]:`` line is no stream)."""
    found = Counter(_TEE.findall(b"\n" + head))  # a prefix per line, and few different ones
    roles: Counter[bytes] = Counter()
    for m, n in found.items():
        if m[0]:
            roles[m[0]] += n
    role = roles.most_common(1)[0][0] if roles else None
    return {(None, int(m[1])) if m[0] else (m[2].decode(), int(m[3])) for m in found if not m[0] or m[0] == role}


def scan_file(
    path: str, name: str | None = None, anchors: tuple[bytes, ...] = ANCHORS, plain: bool = False
) -> FileResult:
    """All events of one log file (plain or gzip); ``name``: the path shown in evidence; ``anchors``: the
    lines looked at (the last resort's). ``plain`` (the last resort): no block (a traceback, a summary)
    keeps the lines after it from being read on their own, so a block that could not be read hides
    nothing. Errors are recorded, never raised; what was read before an error (a truncated .gz) is kept."""
    try:
        st = _State(path, time.localtime(os.stat(path).st_mtime).tm_year, name or os.path.basename(path))
        st.res.bytes = os.stat(path).st_size
    except OSError as e:
        res = FileResult(path)
        res.error = f"cannot read: {e.strerror}"
        return res
    try:
        with open_binary(path) as f:
            head = f.read(HEAD)
            st.res.streams = tee_streams(head)
            clean = line_cleaner(head, anchors)
            st.wrap = wrap_width(head, clean, st.year)
            for hit in anchored(f, anchors, head=head, clean=clean):
                st.last = None
                if plain:
                    st.skip.clear()
                if _handle(st, hit):
                    st.res.lines = hit.line
                    if hit.repeats and st.last is not None:  # a flood of one line: counted, not parsed
                        st.res.suppressed[st.last.kind] += hit.repeats
    except (OSError, EOFError, ValueError) as e:
        st.res.error = f"read stopped early: {e}"
    for (host, pid), ends in st.rings.items():  # lines to two peers or more leave one rank: the printer's
        if len(ends) == 1:
            st.res.facts.append(("nccl_init", host, pid, ends.pop(), 0, ""))
    rank_of_file(st.res.events)
    return st.res


def rank_of_file(events: list[Event]) -> None:
    """A file that one process wrote says its rank once, at its init ("| distributed init (rank 3): ..."): its
    events without a rank of their own are that rank's. Not where the file holds two ranks' init lines (every
    rank printing into one stream) or events another rank's prefix names."""
    said = {e.data["init_rank"] for e in events if e.kind == "launch.init_rank"}
    if len(said) != 1:
        return
    rank = int(next(iter(said)))
    if any(e.ident.rank not in (None, rank) for e in events):
        return
    for e in events:
        if e.ident.rank is None:
            e.ident.rank = rank
