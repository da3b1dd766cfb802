"""Stream a log in large chunks and hand over only the lines that can matter.

A training log is mostly noise (loss lines, NCCL INFO chatter). Finding the few lines worth
parsing at C speed (a ``bytes.find`` pass for each anchor made of common bytes, one regex pass for
all the others: ``_plan``) keeps diagnose near grep's speed and its memory flat: one chunk (plus a
carried partial line or block, its translated copy, and the chunk before until this one is
searched) is held at a time. Every trigger phrase of the classifier contains one of the anchors;
block readers (tracebacks, torchrun's failure summary, NCCL's ``Last error:``) look at the lines
that follow a hit.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

CHUNK = 1 << 22  # 4 MiB
MAX_CARRY = 1 << 24  # a block that needs more context than this is read as far as it goes
FOLLOW_BYTES = 1 << 18  # lines after a hit handed to a block reader
MAX_LINE = 1 << 16  # of a longer line, this much is kept and the rest skipped (a 2 GB line: flat memory)

# Every rule in classify.py (and every block opener) contains one of these byte strings.
ANCHORS: tuple[bytes, ...] = (
    b"rror",  # Error, error: exceptions (also "Timed out", "mismatch" ones), NCCL/CUDA errors, srun errors, Last error
    b"exits with return code",  # DeepSpeed launcher: a worker died
    b"WARN",  # NCCL WARN
    b"imeout",  # Watchdog ... timeout, desync "caused this timeout" (Timed out ... lines are exceptions: rror)
    b"fail",  # failed (exitcode), failed to pass monitoredBarrier, connect failed, gloo "enforce fail at",
    # torchrun's "Root Cause (first observed failure)" in an excerpt cut above ChildFailedError
    b"xception",  # SignalException, generic Exception lines
    b"bort",  # abort, Aborted (core dumped), ncclCommAbort: failures that name no error
    b"collective #",  # desync report lines
    b"ast enqueued",  # watchdog PG status: last enqueued / last completed work
    b"Traceback",  # Python tracebacks (call sites of exceptions)
    b"ranks",  # NCCL Init "rank R nranks N" (pid -> rank), COLL "[nranks=N]" opCount lines, Horovod "[missing
    # ranks: 0]" / "Missing ranks:"; one anchor for three families (each anchor is one pass over the data)
    b"Rendezvous complete",  # torchelastic INFO: local -> global ranks
    b"debug info",  # Flight Recorder dump written to ...
    b"OOMKilled",  # Kubernetes; oom_kill lines come with "slurmstepd: error:"
    b"ation fault",  # Segmentation fault (Bus error has "rror")
    b"death signal",  # torchelastic agent stopped from outside
    b"refused",  # Connection refused: gloo pair.cc connect, c10d clients, uncaught gloo::IoException what()
    b"Duplicate GPU",  # NCCL's duplicate-GPU text pasted bare (without WARN or Last error:)
    b" on node ",  # NCCL RAS: ... managed by process P on node H; mpirun: ... on node H exited on signal
    b"NCCL version",  # NCCL's version banner, compared across nodes
    b".cc:",  # NCCL INFO "bootstrap.cc:270 -> 2": a failed call's result trail (not " -> ": init's Channel lines)
    b"from peer",  # a net plugin's completion error quoted without NCCL's WARN ("NET/IBP:Got completion from peer")
    b"Failures:",  # torchrun's summary in an excerpt cut below ChildFailedError ("train.py FAILED" / "Failures:")
    b"timed out after",
    b"MPI_ABORT was invoked",
    b"exited due to process rank",
    b"distributed init (rank",  # one process's log says its rank once (filescan.rank_of_file)  # Open MPI: the process that ended without MPI_Finalize (help-orterun.txt)  # Open MPI: the process that called MPI_Abort (help-mpi-api.txt)
    b"/distributed/elastic/",  # a torchrun (elastic agent) frame: the store is the agent's, not rank 0's
    b"bin/torchrun",
    b"CUDA warning",  # c10 TORCH_WARN("CUDA warning: ", ...) where a destructor may not throw (device-side assert)
    b"RANK=",  # the launch environment as a shell sets it ("export RANK=1"): a rank outside WORLD_SIZE hosts no store
    b"WORLD_SIZE=",
    b"Device: cuda:",  # accelerate's PartialState repr: a process's device, its index on the lines before
    b"got stuck for",  # ProcessGroupNCCL's heartbeat monitor: "ProcessGroupNCCL's watchdog got stuck for %d seconds ..."
    b"Child process with PID",  # Lightning's _ChildProcessObserver: the first child to exit non-zero
    b"exit with status code",  # horovodrun's gloo launcher: "Process {idx} exit with status code {ec}."
    b"connect returned",  # NCCL <= 2.11 include/socket.h: INFO "Call to connect returned %s, retrying"
    b" Ring ",  # NCCL 2.4-2.6 transport lines "Ring 00 : 4[4] -> 5[5] via P2P/IPC": the printing process's rank
    # (not 2.7+'s "Channel 00/0 : ..." lines: dozens a rank at every init, and 2.7+ prints "comm %p rank %d" anyway)
    b"unexpectedly disconnected",  # Open MPI's btl/tcp [peer hung up]: a peer process of the job died
    b"first process to do so",  # mpirun: "...exited with non-zero status... The first process to do so was:"  # c10d socket.cpp "The client socket has timed out after 600s while trying to connect to"
)


@dataclass(slots=True)
class Anchored:
    buf: bytes
    start: int  # line start in buf
    end: int  # line end (index of the newline or limit)
    limit: int  # end of complete lines in buf
    line: int  # 1-based line number in the file
    eof: bool
    repeats: int = 0  # identical lines right after this one (collapsed: a flood of one line costs one hit)
    clean: Callable[[bytes], bytes] | None = None  # per-file normalizer (ANSI, CR, line-number prefixes)
    deferred: bool = field(default=False)

    @property
    def raw(self) -> bytes:
        raw = self.buf[self.start : min(self.end, self.start + MAX_LINE)]
        return self.clean(raw) if self.clean else raw

    def following(self, max_lines: int) -> tuple[list[bytes], bool]:
        """Up to ``max_lines`` lines after this one (at most FOLLOW_BYTES of them: a block is
        small, and a hit every line must not copy the same megabytes again and again), and
        whether the buffer ran out first (more may follow in the file)."""
        out: list[bytes] = []
        pos, size = self.end + 1, 0
        while len(out) < max_lines and pos < self.limit and size < FOLLOW_BYTES:
            nl = self.buf.find(b"\n", pos, self.limit)
            nl = self.limit if nl == -1 else nl
            raw = self.buf[pos : min(nl, pos + MAX_LINE)]
            out.append(self.clean(raw) if self.clean else raw)
            size += len(raw)
            pos = nl + 1
        return out, len(out) < max_lines and size < FOLLOW_BYTES and not self.eof

    def defer(self) -> bool:
        """Ask for this hit again with more of the file after it; False when no more can be had."""
        if self.eof or self.limit - self.start > MAX_CARRY:
            return False
        self.deferred = True
        return True


def _run_end(buf: bytes, start: int, end: int, limit: int) -> tuple[int, int]:
    """(repeats, end of the last line) of the run of lines identical to ``buf[start:end]``, found
    with doubling block compares (C speed): 1 GiB of one repeated error line is one hit."""
    line = buf[start : end + 1]
    pos, k, repeats = end + 1, 1, 0
    if not line.endswith(b"\n") or not buf.startswith(line, pos):
        return 0, end
    while k:
        block = line * k
        if pos + len(block) <= limit and buf.startswith(block, pos):
            pos, repeats, k = pos + len(block), repeats + k, k * 2
        else:
            k //= 2
    return repeats, pos - 1


def _gaps(runs: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """The parts of [0, limit) outside the runs of repeated lines found so far."""
    out, pos = [], 0
    for start, end in sorted(runs):
        if start > pos:
            out.append((pos, start))
        pos = max(pos, end + 1)
    if pos < limit:
        out.append((pos, limit))
    return out


# The bytes of log text, the most common first (the corpus's real logs and the scale benchmark's
# training output, averaged); a byte not listed is rarer than all of them. An anchor's pivot is its
# rarest byte but the last (so that a literal byte follows it). An anchor whose pivot is among the
# first _COMMON (each above ~1.7 % of log text: "rror", " on node ") is found with its own
# bytes.find pass (~0.5 ms/MB); the others are found together, in one regex pass over a copy of the
# buffer in which every pivot byte reads \x01 (bytes.translate, ~0.7 ms/MB): sre skips to the next
# \x01 in a tight loop (~0.5 ms/MB) and tries the anchors there (~20 ns each time, every
# alternative starting with a literal byte: one compare when it cannot match), so the pass costs
# about as much as three anchors of their own, whatever the number of anchors in it. A line found
# there is confirmed on its real bytes (another pivot byte may have stood in).
_BY_FREQUENCY = b" ertaoni0s1l:2dc3pu.CN/4-_m][h\n69g5kfRGL7I8b,OyPv=()EDAF|USwTBWHM^'z>\"xYq*;X<#+KjZV\\{`}J%~!&$\t@?Q"
_COMMON = 19
_PIVOT = b"\x01"


@dataclass(frozen=True, slots=True)
class _Plan:
    finds: tuple[bytes, ...]  # anchors searched one bytes.find pass each
    table: bytes  # translate table: every pivot byte -> \x01 (a \x01 in the text -> \x02)
    joint: re.Pattern[bytes] | None  # the other anchors, on the translated buffer (a pivot stands for any)
    exact: re.Pattern[bytes] | None  # the same anchors on the real bytes: confirms a line the joint pass found


def _rarity(byte: int) -> int:
    i = _BY_FREQUENCY.find(bytes([byte]))
    return len(_BY_FREQUENCY) if i == -1 else i


def _trie(items: list[tuple[bytes, bytes]]) -> bytes:
    """A regex of (literal, tail) pairs sharing their first bytes: every alternative of a branch
    starts with a different literal byte (sre rejects it at one compare), the tails last."""
    by_first: dict[bytes, list[tuple[bytes, bytes]]] = {}
    ends: list[bytes] = []
    for lit, tail in items:
        if lit:
            by_first.setdefault(lit[:1], []).append((lit[1:], tail))
        else:
            ends.append(tail)
    alts = [
        re.escape(first + rest[0][0]) + rest[0][1] if len(rest) == 1 else re.escape(first) + b"(?:" + _trie(rest) + b")"
        for first, rest in by_first.items()
    ]
    return b"|".join(alts + ends)


@functools.lru_cache(maxsize=16)
def _plan(anchors: tuple[bytes, ...]) -> _Plan:
    finds: list[bytes] = []
    pivots: list[tuple[bytes, int]] = []
    for a in dict.fromkeys(anchors):
        p = max(range(len(a) - 1 or 1), key=lambda i: _rarity(a[i]), default=0)  # not the last byte: a literal follows
        if not a or b"\n" in a or _rarity(a[p]) < _COMMON:
            finds.append(a)
        else:
            pivots.append((a, p))
    table = bytearray(range(256))
    table[_PIVOT[0]] = _PIVOT[0] + 1
    for a, p in pivots:
        table[a[p]] = _PIVOT[0]
    t = bytes(table)
    if not pivots:
        return _Plan(tuple(finds), t, None, None)

    def pattern(tr: bytes | None) -> re.Pattern[bytes]:
        items = [(a.translate(tr)[p:], b"(?<=" + re.escape(a.translate(tr)) + b")" if p else b"") for a, p in pivots]
        return re.compile(_trie(items))

    return _Plan(tuple(finds), t, pattern(t), pattern(None))


def _hit_lines(buf: bytes, limit: int, anchors: tuple[bytes, ...]) -> list[tuple[int, tuple[int, int, int]]]:
    """Sorted (line start, (line end, repeats, run end)) of the lines holding an anchor. Later
    passes do not search inside runs of repeated lines already found (a flood is scanned once)."""
    plan = _plan(anchors)
    passes: list[tuple[Callable[[int, int], int], re.Pattern[bytes] | None]] = [
        (functools.partial(buf.find, a), None) for a in plan.finds
    ]
    if plan.joint is not None:
        search, table = plan.joint.search, plan.table
        translated: list[bytes] = []  # made at the first search: a buffer that is one flood has nothing left to search

        def joint(lo: int, hi: int) -> int:
            if not translated:
                translated.append(buf.translate(table))
            m = search(translated[0], lo, hi)
            return -1 if m is None else m.start()

        passes.append((joint, plan.exact))
    lines: dict[int, tuple[int, int, int]] = {}
    runs: list[tuple[int, int]] = []
    for find, exact in passes:
        for lo, hi in _gaps(runs, limit) if runs else [(0, limit)]:
            i = find(lo, hi)
            while i != -1:
                start = buf.rfind(b"\n", 0, i) + 1
                end = buf.find(b"\n", i, limit)
                end = limit if end == -1 else end
                if start not in lines:
                    if exact is not None and exact.search(buf, start, end) is None:  # another pivot byte there
                        i = find(end + 1, hi)
                        continue
                    repeats, run_end = _run_end(buf, start, end, limit)
                    lines[start] = (end, repeats, run_end)
                    if repeats:
                        runs.append((start, run_end))
                i = find(lines[start][2] + 1, hi)
    return sorted(lines.items())


def anchored(
    stream: BinaryIO,
    anchors: tuple[bytes, ...] = ANCHORS,
    chunk: int = CHUNK,
    head: bytes = b"",
    clean: Callable[[bytes], bytes] | None = None,
) -> Iterator[Anchored]:
    """Lines holding an anchor, in file order, with line numbers. A consumer may ``defer()`` a hit
    to see it again once more of the file is buffered. ``head``: bytes already read from the
    stream. Of a line longer than MAX_LINE only its first MAX_LINE bytes are looked at."""
    carry = head
    first_line = 1  # of carry's first line, once the newlines in ``uncounted`` are added
    uncounted: tuple[bytes, int, int] | None = None  # (buffer, from, to): counted when a later hit needs it
    eof = skipping = False
    error: OSError | EOFError | None = None
    while not eof:
        try:
            data = stream.read(chunk)
        except (OSError, EOFError) as e:  # a truncated .gz: read what came before, then tell
            data, error = b"", e
        eof = not data
        if skipping:  # inside an over-long line: drop everything up to its newline
            nl = data.find(b"\n")
            if nl == -1 and not eof:
                continue
            data, skipping = (data[nl:] if nl != -1 else b""), False
        buf = carry + data if carry else data
        limit = len(buf) if eof else buf.rfind(b"\n") + 1
        if limit <= 0 and not eof:
            carry, skipping = (buf[:MAX_LINE], True) if len(buf) > MAX_LINE else (buf, False)
            continue
        hits = _hit_lines(buf, limit, anchors)
        if uncounted is not None and hits:
            first_line += uncounted[0].count(b"\n", uncounted[1], uncounted[2])
            uncounted = None
        line, counted = first_line, 0
        resume: int | None = None
        for start, (end, repeats, _last) in hits:
            line += buf.count(b"\n", counted, start)
            counted = start
            hit = Anchored(buf, start, end, limit, line, eof, repeats, clean)
            yield hit
            if hit.deferred:
                resume = start
                break
        del hits  # a buffer of hit lines is not kept while the next buffer is searched
        if resume is not None:
            carry, first_line = buf[resume:], line
            continue
        if uncounted is not None:  # two buffers without a hit: the older one is let go
            line += uncounted[0].count(b"\n", uncounted[1], uncounted[2])
        # the rest of this buffer is counted only if a hit follows (a file's tail after its last hit never is)
        first_line, uncounted = line, (buf, counted, limit)
        carry = buf[limit:]
        if len(carry) > MAX_LINE:
            carry, skipping = carry[:MAX_LINE], True
    if error is not None:
        raise error
