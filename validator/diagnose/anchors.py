"""Stream a log in large chunks and hand over only the lines that can matter.

A training log is mostly noise (loss lines, NCCL INFO chatter). Finding the few lines worth
parsing at C speed (one Aho-Corasick pass for all the anchors: ``_hit_lines``) keeps diagnose at
grep's speed and its memory flat: one chunk (plus a carried partial line or block, and the chunk
before until this one is searched) is held at a time. Every trigger phrase of the classifier contains one of the anchors;
block readers (tracebacks, torchrun's failure summary, NCCL's ``Last error:``) look at the lines
that follow a hit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import ahocorasick_rs

CHUNK = 1 << 22  # 4 MiB
MAX_CARRY = 1 << 24  # a block that needs more context than this is read as far as it goes
FOLLOW_BYTES = 1 << 18  # lines after a hit handed to a block reader
MAX_LINE = 1 << 16  # of a longer line, this much is kept and the rest skipped (a 2 GB line: flat memory)

# Every rule in classify.py (and every block opener) contains one of these byte strings.
ANCHORS: tuple[bytes, ...] = (
    b"rror",  # Error, error: exceptions (also "Timed out", "mismatch" ones), NCCL/CUDA errors, srun errors, Last error
    b"exits with return code",  # DeepSpeed launcher: a worker died
    b"WARN",  # NCCL WARN
    b"EI0006",  # Huawei CANN's HCCL socket timeout: "EI0006: ... Getting socket times out" (no other anchor in it)
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
    b"Process received signal",  # Open MPI's banner for a process's own fatal signal
    b"detected ***",  # glibc: "*** stack smashing detected ***", "*** buffer overflow detected ***"
    b"RESOURCE_EXHAUSTED",  # XLA's allocators: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate"
    b"OOM when allocating",  # TensorFlow's BFC allocator
    b"was encountered",  # cudaGetErrorString's "an illegal memory access was encountered" in any wrapper
    b"bytes received but buffer size",  # MPICH / MS-MPI: "Message truncated; %d bytes received but buffer size is %d"
    b"without calling finalize",  # MS-MPI's mpiexec: "[%d] process exited without calling finalize"
    b"double free",  # glibc: "double free or corruption (out)"
    b"(): invalid pointer",  # glibc: "free(): invalid pointer", "munmap_chunk(): invalid pointer"
    b"(): memory corruption",  # glibc: "malloc(): memory corruption"
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
    b"watchdog hang",  # ProcessGroupNCCL's heartbeat monitor: "... dump debug info, due to ProcessGroupNCCL watchdog hang."
    b"got stuck for",  # ProcessGroupNCCL's heartbeat monitor: "ProcessGroupNCCL's watchdog got stuck for %d seconds ..."
    b"Child process with PID",  # Lightning's _ChildProcessObserver: the first child to exit non-zero
    b"exit with status code",  # horovodrun's gloo launcher: "Process {idx} exit with status code {ec}."
    b"connect returned",  # NCCL <= 2.11 include/socket.h: INFO "Call to connect returned %s, retrying"
    b" Ring ",  # NCCL 2.4-2.6 transport lines "Ring 00 : 4[4] -> 5[5] via P2P/IPC": the printing process's rank
    # (not 2.7+'s "Channel 00/0 : ..." lines: dozens a rank at every init, and 2.7+ prints "comm %p rank %d" anyway)
    b" out of memory. Tried",  # torch_npu / XPU allocators: "NPU out of memory. Tried to allocate"
    b"Killing subprocess",  # DeepSpeed's launcher tearing down its local processes
    b"recv_msglen",  # PSM3's length assertion
    b"with syndrome",  # NVSHMEM IBGDA's rdma-core call failures
    b"could finish the model loading",  # SGLang: a rank that finished loading, while others did not
    b"lready in use",  # EADDRINUSE in words where no "error" is on the line (ZeroMQ's "Reached max retry for bind")
    b"access fault",  # ROCr's "Memory access fault by GPU node-N"
    b"Permission denied (",  # OpenSSH's failed login: "user@host: Permission denied (publickey)."
    b"reliably start",  # Open MPI: "ORTE was unable to reliably start one or more daemons."
    b"memory space",  # XLA's TPU compiler: "Ran out of memory in memory space hbm."
    b"unexpectedly disconnected",  # Open MPI's btl/tcp [peer hung up]: a peer process of the job died
    b"That was not possible",  # the TPU allocator's refusal behind "Resource exhausted: Attempting to allocate %s."
    b"ssh: connect to host",
    b"HCCP process",  # CANN EJ0001 "Failed to initialize the HCCP process" (no error word of its own)  # OpenSSH, for a launcher that reaches nodes over ssh
    b"BAD TERMINATION OF ONE OF YOUR",  # MPICH's mpiexec (Hydra): a block naming the process's PID, host and exit
    b"Could not resolve hostname",  # OpenSSH: a launcher's ssh cannot name the node
    b"crashed with exit code",  # composer's launcher: "Rank N crashed with exit code C."
    b"with a remote daemon",  # Open MPI / PRRTE: "... has lost communication with a remote daemon"
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


# Every anchor is found in one pass: an Aho-Corasick automaton (the Rust crate ripgrep uses,
# through ahocorasick_rs) lists the anchors' places in a window of the buffer at ~0.3 ms/MB,
# whatever the number of anchors. A window is bounded, so a window of nothing but hits is a bounded
# list; it starts small after a hit (a flood's run is skipped, not listed) and doubles while none
# comes. It ends at a line end or, inside an over-long line, overlaps the next window by an
# anchor's length (an anchor across the cut is found in the next window).
WINDOW = 1 << 18
FIRST_WINDOW = 1 << 12


@functools.lru_cache(maxsize=16)
def _matcher(anchors: tuple[bytes, ...]) -> tuple[Callable[[memoryview], list[tuple[int, int, int]]], int]:
    """(the automaton's search over a window, the overlap an anchor across a cut needs)."""
    if not anchors or not all(anchors):
        raise ValueError("anchors must be non-empty byte strings")
    kinds = ahocorasick_rs.BytesAhoCorasick(
        list(dict.fromkeys(anchors)), matchkind=ahocorasick_rs.MatchKind.LeftmostFirst
    )
    return kinds.find_matches_as_indexes, max(map(len, anchors)) - 1


def _hit_lines(buf: bytes, limit: int, anchors: tuple[bytes, ...]) -> list[tuple[int, tuple[int, int, int]]]:
    """(line start, (line end, repeats, run end)) of the lines holding an anchor, in order. The
    search goes on after a line's run of repeats: a flood of one line is searched once."""
    find, overlap = _matcher(anchors)
    view = memoryview(buf)
    lines: list[tuple[int, tuple[int, int, int]]] = []
    pos = skip = 0  # the next window; the first byte not yet handed over (past a hit line and its run)
    size = FIRST_WINDOW
    while pos < limit:
        hi = nxt = min(pos + size, limit)
        if hi < limit:
            nl = buf.rfind(b"\n", pos, hi)
            hi = nxt = nl + 1 if nl != -1 else hi
            if nl == -1:
                nxt = max(hi - overlap, pos + 1)
        size = min(size * 2, WINDOW)
        for _, at, _end in find(view[pos:hi]):
            size = FIRST_WINDOW
            at += pos
            if at < skip:
                continue
            start = buf.rfind(b"\n", 0, at) + 1
            end = buf.find(b"\n", at, limit)
            end = limit if end == -1 else end
            repeats, run_end = _run_end(buf, start, end, limit)
            lines.append((start, (end, repeats, run_end)))
            skip = run_end + 1
            if skip >= hi:
                break
        pos = max(nxt, skip)
    return lines


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
    carry = head.replace(b"\0", b"")  # NULs are dropped (below)
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
        if b"\0" in data:  # NULs say nothing: a log truncated in place (logrotate's copytruncate) starts with a hole
            data = data.replace(b"\0", b"")  # of them as long as the log was, else one over-long first line
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
