"""Stream a log in large chunks and hand over only the lines that can matter.

A training log is mostly noise (loss lines, NCCL INFO chatter). Finding the few lines worth
parsing with one C-speed ``bytes.find`` pass per anchor keeps diagnose near grep's speed and its
memory flat: one chunk (plus a carried partial line or block) is held at a time. Every trigger
phrase of the classifier contains one of the anchors; block readers (tracebacks, torchrun's
failure summary, NCCL's ``Last error:``) look at the lines that follow a hit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

CHUNK = 1 << 22  # 4 MiB
MAX_CARRY = 1 << 24  # a block that needs more context than this is read as far as it goes

# Every rule in classify.py (and every block opener) contains one of these byte strings.
ANCHORS: tuple[bytes, ...] = (
    b"rror",  # Error, error: exceptions (also "Timed out", "mismatch" ones), NCCL/CUDA errors, srun errors, Last error
    b"exits with return code",  # DeepSpeed launcher: a worker died
    b"WARN",  # NCCL WARN
    b"imeout",  # Watchdog ... timeout, desync "caused this timeout" (Timed out ... lines are exceptions: rror)
    b"fail",  # failed (exitcode), failed to pass monitoredBarrier, connect failed, gloo "enforce fail at",
    # torchrun's "Root Cause (first observed failure)" in an excerpt cut above ChildFailedError
    b"xception",  # SignalException, generic Exception lines
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
)


@dataclass(slots=True)
class Hit:
    buf: bytes
    start: int  # line start in buf
    end: int  # line end (index of the newline or limit)
    limit: int  # end of complete lines in buf
    line: int  # 1-based line number in the file
    eof: bool
    deferred: bool = field(default=False)

    @property
    def raw(self) -> bytes:
        return self.buf[self.start : self.end]

    def following(self, max_lines: int) -> tuple[list[bytes], bool]:
        """Up to ``max_lines`` lines after this one, and whether the buffer ran out first
        (more may follow in the file)."""
        out: list[bytes] = []
        pos = self.end + 1
        while len(out) < max_lines and pos < self.limit:
            nl = self.buf.find(b"\n", pos, self.limit)
            nl = self.limit if nl == -1 else nl
            out.append(self.buf[pos:nl])
            pos = nl + 1
        return out, len(out) < max_lines and not self.eof

    def defer(self) -> bool:
        """Ask for this hit again with more of the file after it; False when no more can be had."""
        if self.eof or self.limit - self.start > MAX_CARRY:
            return False
        self.deferred = True
        return True


def _hit_lines(buf: bytes, limit: int, anchors: tuple[bytes, ...]) -> list[tuple[int, int]]:
    lines: dict[int, int] = {}
    for anchor in anchors:
        i = buf.find(anchor, 0, limit)
        while i != -1:
            start = buf.rfind(b"\n", 0, i) + 1
            end = buf.find(b"\n", i, limit)
            end = limit if end == -1 else end
            lines[start] = end
            i = buf.find(anchor, end + 1, limit)
    return sorted(lines.items())


def hits(stream: BinaryIO, anchors: tuple[bytes, ...] = ANCHORS, chunk: int = CHUNK) -> Iterator[Hit]:
    """Lines holding an anchor, in file order, with line numbers. A consumer may ``defer()`` a hit
    to see it again once more of the file is buffered."""
    carry = b""
    first_line = 1
    eof = False
    while not eof:
        data = stream.read(chunk)
        eof = not data
        buf = carry + data if carry else data
        limit = len(buf) if eof else buf.rfind(b"\n") + 1
        if limit <= 0 and not eof:
            carry = buf  # one very long line so far
            continue
        line, counted = first_line, 0
        resume: int | None = None
        for start, end in _hit_lines(buf, limit, anchors):
            line += buf.count(b"\n", counted, start)
            counted = start
            hit = Hit(buf, start, end, limit, line, eof)
            yield hit
            if hit.deferred:
                resume = start
                break
        if resume is not None:
            carry, first_line = buf[resume:], line
            continue
        first_line = line + buf.count(b"\n", counted, limit)
        carry = buf[limit:]
