"""Multi-line structures that follow a hit: Python tracebacks, torchrun's failure summary,
NCCL's ``Last error:`` and torchelastic's rendezvous result."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from validator.diagnose.logs import stream_of

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>.+)$')


def _same_stream(lines: list[bytes], stream: bytes) -> list[str]:
    out = []
    for raw in lines:
        if stream_of(raw) == stream:
            text = raw.decode("utf-8", "replace").rstrip("\r")
            out.append(after_stream(text, stream) if stream else text)
    return out


def after_stream(text: str, stream: bytes) -> str:
    """The line without its stream prefix (keeping the indentation that follows)."""
    key = stream.decode("utf-8", "replace")
    i = text.find(key)
    rest = text[i + len(key) :] if i != -1 else text
    return rest[1:] if rest.startswith(" ") and not rest.startswith("  ") else rest


@dataclass(slots=True)
class Traceback:
    frames: list[str]  # "file:line in fn", innermost last
    span: int  # how many same-stream lines it covers before the exception line
    complete: bool


def read_traceback(lines: list[bytes], stream: bytes, indent: int = 0) -> Traceback:
    """The frames after a ``Traceback (most recent call last):`` header indented ``indent`` characters (a paste
    indented as a whole, a logger's record quoting it): its exception is the first line indented less than its
    first frame (no more than the header before any frame); frames and their source lines are indented more."""
    frames: list[str] = []
    span = 0
    texts = _same_stream(lines, stream)
    deeper = indent + 1  # a line indented less than the frames is the exception's (a paste may shift the body)
    for i, text in enumerate(texts):
        if m := _FRAME.match(text):
            if not frames:
                deeper = max(deeper, len(text) - len(text.lstrip()))
            frames.append(f"{m.group('file')}:{m.group('line')} in {m.group('fn').strip()}")
        elif (body := text.lstrip()) and len(text) - len(body) < deeper and not body.startswith("^"):
            # Python prints no frame after its exception line, nor a source line after anything but its frame: a
            # line followed by one of them is another process's output between the traceback's lines
            nxt = texts[i + 1] if i + 1 < len(texts) else ""
            after_frame = i > 0 and _FRAME.match(texts[i - 1]) is not None
            if not (_FRAME.match(nxt) or (after_frame and len(nxt) - len(nxt.lstrip()) > indent)):
                return Traceback(frames, span, True)
        span += 1
    return Traceback(frames, span, False)


@dataclass(slots=True)
class Failure:
    index: int
    root: bool
    other: bool = False  # listed under "Failures:": torchrun puts its Root Cause in a section of its own
    fields: dict[str, str] = field(default_factory=dict)
    traceback: list[str] = field(default_factory=list)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"root": self.root, "other": self.other}
        # "rank      : 0 (local_rank: 0)" (torchrun's _format_failure); an excerpt may end inside it, before its ")"
        if m := re.match(r"(-?\d+)\s*\(local_rank:\s*(\d+)\)?\s*$", self.fields.get("rank", "")):
            data["rank"], data["local"] = int(m.group(1)), int(m.group(2))
        if m := re.match(r"(-?\d+)\s*\(pid:\s*(\d+)\)\s*(?:\((SIG\w+)\))?", self.fields.get("exitcode", "")):
            data["exit"], data["pid"] = int(m.group(1)), int(m.group(2))
            if m.group(3):
                data["signal"] = m.group(3)
        for key in ("host", "error_file"):
            if self.fields.get(key):
                data[key] = self.fields[key]
        if t := self.fields.get("time"):
            with contextlib.suppress(ValueError):
                data["time"] = dt.datetime.strptime(t.strip(), "%Y-%m-%d_%H:%M:%S").timestamp()
        tb = [self.fields.get("traceback", ""), *self.traceback]
        exc = [t.strip() for t in tb if t.strip() and not t.strip().startswith(("File ", "Traceback", "^", "..."))]
        if exc:
            data["message"] = exc[-1]
        frames = [m for t in tb if (m := _FRAME.match(t))]
        data["stack"] = [f"{m.group('file')}:{m.group('line')} in {m.group('fn').strip()}" for m in frames]
        return data


_ENTRY = re.compile(r"^\s*\[(\d+)\]:\s*$")
_FIELD = re.compile(r"^\s{1,4}(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")


def is_entry(text: str) -> bool:
    """A summary entry's opening line: ``[1]:``."""
    return _ENTRY.match(text) is not None


def read_summary(lines: list[bytes], stream: bytes) -> tuple[list[Failure], int, bool]:
    """torchrun's ChildFailedError block -> failures (root cause flagged), lines spanned, complete."""
    out: list[Failure] = []
    root = False
    cur: Failure | None = None
    in_tb = False
    seen_root = listed = False
    for span, text in enumerate(_same_stream(lines, stream)):
        s = text.strip()
        if s.startswith("Root Cause"):
            root = seen_root = True
            continue
        if s == "Failures:":
            listed = True
            continue
        if s.startswith("=") and set(s) == {"="} and seen_root and cur is not None:
            return out, span + 1, True
        if m := _ENTRY.match(text):
            cur = Failure(int(m.group(1)), root, listed and not root)
            out.append(cur)
            in_tb = False
        elif cur is not None and (m := _FIELD.match(text)):
            cur.fields[m.group(1)] = m.group(2).strip()
            in_tb = m.group(1) == "traceback"
        elif cur is not None and in_tb and s and not (set(s) <= {"-", "="}):
            cur.traceback.append(s)
    return out, len(lines), False


def read_rendezvous(lines: list[bytes], stream: bytes) -> dict[str, Any]:
    """torchelastic's ``Rendezvous complete for workers. Result:`` block -> the rank mapping."""
    out: dict[str, Any] = {}
    for text in _same_stream(lines[:16], stream):
        if m := re.search(r"\b(group_rank|local_ranks|global_ranks|master_addr|master_port)=(\S+)", text):
            out[m.group(1)] = m.group(2)
    return out


_BLOCK_RANK = re.compile(r"^\s*(\d+)!?: \[")
_BLOCK_HEAD = re.compile(rb"(?:Missing|Stalled) ranks:\s*$")


def missing_ranks(head: bytes, lines: list[bytes]) -> tuple[str, bool]:
    """Horovod's ``Missing ranks:`` block (stall_inspector.cc; ``Stalled ranks:`` before 0.20): ``R: [tensor, ...]``
    lines (``R!: [`` for a rank it will shut down) -> ("1,3", split). Each line carries the prefix its header line
    carried (a collector's stamp, mpirun's ``[1,0]<stderr>:``, a ``[0]`` tag); blank lines between records are
    skipped. Split: two listed ranks miss tensors that have none in common (as far as the lines show them, a
    terminal may cut a long list), so each waits on what the other submitted: different collectives, no laggard."""
    m = _BLOCK_HEAD.search(head)
    prefix = head[: m.start()] if m else b""
    out: list[str] = []
    lists: list[tuple[set[str], str]] = []
    for raw in lines[:64]:  # "1: [..." would read as an srun label: no stream filter here
        if not raw.strip():
            continue
        if prefix and not raw.startswith(prefix):  # another process's line between the block's
            continue
        text = raw[len(prefix) :].decode("utf-8", "replace")
        if not (m2 := _BLOCK_RANK.match(text)):
            break
        out.append(m2.group(1))
        body, closed, _ = text[m2.end() :].partition("]")
        names = [n.strip() for n in body.split(", ")[:256] if n.strip()]
        cut = names.pop().rstrip("$") if names and (not closed or names[-1].endswith("$")) else ""
        lists.append((set(names), cut))
    split = any((a[0] or a[1]) and (b[0] or b[1]) and not _shares(a, b)
                for i, a in enumerate(lists) for b in lists[i + 1 :])  # fmt: skip
    return ",".join(out), split


def _shares(a: tuple[set[str], str], b: tuple[set[str], str]) -> bool:
    """Whether two ranks' missing lists name a tensor in common; a name the line cut (its last, "...$" or no "]")
    matches every name it begins. At most 256 names a list and one cut name each: linear, whatever the block."""
    if a[0] & b[0]:
        return True
    return any(cut and any(n.startswith(cut) or cut.startswith(n) for n in (*other[0], other[1]) if n)
               for cut, other in ((a[1], b), (b[1], a)))  # fmt: skip


_ACCEL = re.compile(rb"Process index: (\d+)\r?\nLocal process index: (\d+)\r?\n$")


def accel_state(buf: bytes, start: int) -> dict[str, str]:
    """The "Process index: N" and "Local process index: L" lines right before accelerate's "Device: D" line in the
    buffer (state.py's repr; a block a chunk border cut gives nothing)."""
    if m := _ACCEL.search(buf, max(0, start - 80), start):
        return {"index": m.group(1).decode(), "local": m.group(2).decode()}
    return {}


_JAX_TASK = re.compile(r"^\s*/job:[\w\-]+/replica:\d+/task:(\d+)\s*$")
_JAX_REACHED = re.compile(r"# of tasks that reached the barrier: (\d+)/(\d+)")


def jax_tasks(first: str, lines: list[bytes]) -> dict[str, str]:
    """The tasks an expired JAX coordination barrier lists, one ``/job:NAME/replica:R/task:N`` line each after
    its message (coordination_service.cc; "The first task at the barrier: ..." names one that arrived and is
    not such a line), and its "# of tasks that reached the barrier: A/B" where printed."""
    out: dict[str, str] = {}
    tasks: list[str] = []
    for text in [first] + [raw.decode("utf-8", "replace") for raw in lines[:256]]:
        if m := _JAX_REACHED.search(text):
            out["reached"], out["total"] = m.group(1), m.group(2)
        if m := _JAX_TASK.match(text):
            tasks.append(m.group(1))
        elif tasks:
            break
    if tasks:
        out["tasks"] = ",".join(tasks)
    return out


_RAS_HEAD = re.compile(rb"^\s*(?:#\d+-\d+ \([0-9a-f]+\) )?([A-Z][A-Z,]{3,})\s*$", re.MULTILINE)


def ras_section(buf: bytes, start: int) -> str:
    """The NCCL RAS section a line sits in (``INCOMPLETE``, ``MISMATCH``, ``DEAD``, ``ERROR``): the
    last status header in the 8 KiB above it."""
    heads = _RAS_HEAD.findall(buf, max(0, start - 8192), start)
    return heads[-1].decode("ascii", "replace") if heads else ""
