"""One log line -> who printed it, when, at which level, and the message itself.

Lines arrive wrapped in prefixes that launchers and loggers add, in any combination:
srun ``--label`` (``3: ``), mpirun ``--tag-output`` (``[1,3]<stdout>:``), torchrun ``--tee``
(``[default3]:``, role + *local* rank; templates such as ``[default-r5-l1]:``; ``--role
`hostname -s`:`` gives ``[gpu187:2]:``, host and local rank), c10d's own
``[rank5]:``, ``kubectl logs --timestamps``, then a header: c10d/glog
(``[E1130 09:39:26.201103723 ProcessGroupNCCL.cpp:632]``, older ``[E ProcessGroupNCCL.cpp:737]``),
torchelastic (``E1130 09:40:37.598000 31830 torch/.../api.py:1002]``), Python logging
(``WARNING:torch.distributed...:``, ``2024-01-01 10:00:00,123 - INFO -``), NCCL
(``host:pid:tid [dev] file.cc:123 NCCL WARN``, optionally after ``[2026-11-30 09:39:26] ``).
Also Ray (``(RayTrainWorker pid=7, ip=10.0.0.2) ``), Determined (``[ts] 5c902731 [rank=1] || ``),
``kubectl logs --prefix`` (``[pod/train-worker-1/pytorch] ``), pdsh (``10.0.87.143: ``), docker
compose (``worker-1  | ``), vLLM/Ray-style level headers
(``ERROR 04-07 00:57:46 ray_utils.py:45] ``) and time stamps users add (``Dec 01 04:36:22 ``).
Formats are matched by shape, not by version, so new versions that keep the shape still parse.
Per file, ``line_cleaner`` removes what is not the program's output: ANSI colours, carriage
returns (progress bars) and line numbers the user added.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

from validator.diagnose.events import Ident
from validator.diagnose.rankshapes import COMPOSE_TAG, HOST_TAG, peel

# mpirun --timestamp-output: "Fri Aug 11 12:31:45 2023[1,0]<stdout>:", before every other prefix
_CTIME = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\d{4}) ?"
_CTIME_RE = re.compile(_CTIME)
_CLOCK = re.compile(r"\[?(?:([A-Z][a-z]{2}) ([ \d]\d) )?(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?\]? ")
_MONTHS = {
    m: i for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)
}
_ISO = re.compile(
    r"\[?(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?:Z| UTC|[+-]\d\d:?\d\d)?\]?(?: \|)?[ ,]\s*"
)

_GLOG = re.compile(r"\[([IWEF])(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? ([\w.\-]+):\d+\]\s?")
_GLOG_OLD = re.compile(r"\[([IWEF]) [\w.\-]+:\d+\]\s?")
_ELASTIC = re.compile(r"([IWEF])(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? (\d+) \S+?:\d+\]\s?")
_PYLOG = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:")
# vLLM's logger: "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] ", newer "... [%(filename)s:%(lineno)d] "
_VLLM = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) \[?[\w.\-]+:\d+\] ")
_LEVEL_WORD = re.compile(
    r"(?:- )?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b:?(?: -)?\s*(?:\| )?(?:\d\d-\d\d \d\d:\d\d:\d\d )?(?:\S+:\d+\] )?"
)
# NCCL 2.0-2.2 wrote no "NCCL" between the source line and the level ("socket.h:311 WARN"); a bare "[N]" glued before
# the host (a job runner's tag that no rank shape reads, e.g. "[15]worker-23:83:2526 [0] NCCL INFO ...") is skipped,
# not read as a rank
_NCCL = re.compile(
    r"(?:\[\d+\])?([\w.\-]+):(\d+):(\d+) \[(\d+)\] (?:(\S+:\d+) (?:\(\w+\) )?(?:NCCL )?|(?:\(\w+\) )?NCCL )(WARN|INFO|TRACE|ABORT)\s?"
)
# Open MPI's signal handler (opal/util/stacktrace.c): each line of its report starts "[%s:%05d] " (node, pid), then "***
# Process received signal ***", "Signal: %s (%d)", "Signal code: ...", "Failing at address: %p", "[%2d] frame" or "*** End
# of error message ***": that node's process; mpirun's "noticed that process rank" line ties it to a rank (ranks.py)
_OPAL = re.compile(
    r"\s*\[([A-Za-z0-9][\w.\-]*):(\d{1,10})\] (?:\*\*\* |Signal(?: code)?: |Failing at address: |\[ ?\d+\] )"
)
# UCX's log (ucs/debug/log.c): "[%lu.%06lu] [%s:%d:%d] %16s:%-4u UCX  %-5s " (time, host, pid, thread, file, line, level)
_UCX = re.compile(r"(?:\[\d+\.\d+\] )?\[([A-Za-z0-9][\w.\-]*):(\d{1,10}):\d+\]\s+\S+:\d+\s+UCX\s")
# UCX's fatal report (ucs/debug/log.c ucs_log_fatal_error, a signal's "Caught signal %d (%s: %s)" and the backtrace's
# header): "[%s:%-5d:%s:%d] " (host, pid padded to five, thread name, tid)
_UCX_FATAL = re.compile(r"\[([A-Za-z0-9][\w.\-]*):(\d{1,10}) *:[^\s:\]]{1,32}:\d{1,10}\] ")
# Spark's TaskSetManager (scheduler/TaskSetManager.scala handleFailedTask): "Lost task %s in stage %s (TID %d) (%s executor
# %s): %s" (3.x; "(TID %d, %s, executor %s): " in 2.x): the task's host, then the failure as the task raised it
_SPARK_LOST = re.compile(
    r"Lost task [\d.]+ in stage [\d.]+ \(TID \d+(?:\) \(|, )([A-Za-z0-9][\w.\-]*),? executor [\w.\-]+\): "
)
_LEVELS = {"I": "info", "W": "warning", "E": "error", "F": "fatal"}


@dataclass(slots=True)
class Line:
    ident: Ident
    stream: str  # the prefixes as printed: lines of one process share it
    text: str  # the message
    time: float | None
    level: str | None
    nccl: str | None  # WARN / INFO when an NCCL debug line


def _ts(year: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None) -> float | None:
    try:
        base = dt.datetime(year, mo, d, h, mi, s).timestamp()
    except (ValueError, OverflowError):
        return None
    return base + (int(frac) / 10 ** len(frac) if frac else 0.0)


def parse_line(raw: str, year: int) -> Line:
    """Split one line into who/when/level/message. Never raises."""
    ident = Ident()
    text = raw.rstrip("\r\n")
    time: float | None = None
    if (m := _CTIME_RE.match(text)) and m.group(1) in _MONTHS:
        time = _ts(int(m[6]), _MONTHS[m[1]], int(m[2]), int(m[3]), int(m[4]), int(m[5]), None)
        text = text[m.end() :]
    stream, rest = peel(text, ident)
    level: str | None = None
    nccl: str | None = None
    if (m := _CLOCK.match(rest)) and (m.group(1) in _MONTHS or m.group(1) is None):
        if m.group(1):  # syslog / moreutils ts: "Dec 01 04:36:22 "
            time = _ts(year, _MONTHS[m.group(1)], int(m.group(2)), int(m[3]), int(m[4]), int(m[5]), m.group(6))
        rest = rest[m.end() :]
        more, rest = peel(rest, ident)
        stream = f"{stream} {more}".strip()
    if m := _ISO.match(rest):
        y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
        time = _ts(y, mo, d, h, mi, s, m.group(7))
        rest = rest[m.end() :]
        # a second round: c10d's [rankN]: can follow a kubectl timestamp
        more, rest = peel(rest, ident)
        stream = f"{stream} {more}".strip()
        if lm := _LEVEL_WORD.match(rest):
            level, rest = lm.group(1).lower(), rest[lm.end() :]
    if m := _GLOG.match(rest):
        level = _LEVELS[m.group(1)]
        time = _ts(
            year, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6)), m.group(7)
        )
        rest = rest[m.end() :]
    elif m := _GLOG_OLD.match(rest):
        level, rest = _LEVELS[m.group(1)], rest[m.end() :]
    elif m := _ELASTIC.match(rest):
        level = _LEVELS[m.group(1)]
        time = _ts(
            year, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6)), m.group(7)
        )
        ident.pid = ident.pid or int(m.group(8))
        rest = rest[m.end() :]
    elif m := _PYLOG.match(rest):
        level, rest = m.group(1).lower(), rest[m.end() :]
    elif m := _VLLM.match(rest):
        level = m.group(1).lower()
        time = time or _ts(year, int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]), None)
        rest = rest[m.end() :]
    if "Lost task " in rest and (m := _SPARK_LOST.search(rest)):
        ident.host, rest = m.group(1), rest[m.end() :]
    # a paste indented as a whole (a code block in an issue): its prefixes still name the host
    body = rest.lstrip(" \t")
    if ident.pid is None and (m := _OPAL.match(body) or _UCX.match(body) or _UCX_FATAL.match(body)):
        ident.host, ident.pid = m.group(1), int(m.group(2))
    if m := _NCCL.match(body):
        ident.host, ident.pid = m.group(1), int(m.group(2))
        nccl = m.group(6)
        level = "warning" if nccl == "WARN" else level or "info"
        rest = f"NCCL {nccl} " + body[m.end() :]
    return Line(ident, stream, rest.strip(), time, level, nccl)


_RANK_IN_MSG = re.compile(
    r"\[(?:PG (?:ID )?(?P<pg>\S+?) (?:PG GUID (?P<guid>[^\s(\]]+)(?:\((?P<desc>[^)]*)\))? |\((?P<desc2>[^)]*)\) )?)?Rank (?P<rank>\d+)\]"
)


def rank_in_message(text: str) -> tuple[int | None, str | None]:
    """``[PG ID 0 PG GUID 0(default_pg) Rank 3]`` / ``[PG 1 Rank 3]`` / ``[Rank 3]`` -> (3, pg)."""
    m = _RANK_IN_MSG.search(text)
    if not m:
        return None, None
    desc = m.group("desc") or m.group("desc2")
    pg = m.group("guid") or m.group("pg")
    if pg is not None and desc:
        pg = f"{pg}({desc})"
    elif pg is None and desc:
        pg = desc
    return int(m.group("rank")), pg


STREAM_KEY = re.compile(
    rb"(?:\[\d+(?:,\d+)?\]<std(?:out|err)>:\s?|\[rank: \d+\] |\[[A-Za-z][^\]\s]{0,39}\]:\s?|\d{1,6}: "
    rb"|\((?:[\w.]+ )?pid=\d{1,9}(?:, ip=[\w.:\-]{1,64})?\)\s?|\[pod/[\w.\-/]{1,320}\]\s?"
    rb"|(?:[0-9a-f]{8} )?(?:\[rank=\d{1,9}\] )?\|\|\s?|std(?:out|err): |(?:\[[0-9a-f]{0,64}\] )?\[rank=\d{1,9}\] |"
    + HOST_TAG.encode()
    + b"|"
    + COMPOSE_TAG.encode()
    + rb")*"
)
# a time stamp in front of the prefixes (kubectl --timestamps, Determined, moreutils ts): not part of the stream
_LEAD_TIME = re.compile(
    _CTIME.encode()
    + rb"|\[?(?:\d{4}-\d\d-\d\d[ T_]|[A-Z][a-z]{2} [ \d]\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z| UTC|[+-]\d\d:?\d\d)?\]? "
)


def strip_time(line: bytes) -> bytes:
    """The line without a time stamp in front (kept when nothing follows it on the line)."""
    t = _LEAD_TIME.match(line)
    return line[t.end() :] if t and t.end() < len(line) else line


def stream_of(line: bytes) -> bytes:
    """The raw prefix bytes of a line: the lines of one process's stream share it."""
    t = _LEAD_TIME.match(line)
    m = STREAM_KEY.match(line, t.end() if t else 0)
    return m.group(0).strip() if m else b""


_ANSI = re.compile(rb"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b[()][0-9A-Za-z]")
_ANSI_LOST = re.compile(rb"\[(?:\d{1,3};){0,4}\d{1,3}m")  # a paste that lost the ESC: "[36m(pid=1)[0m"
_LINE_NUMBERS = (  # prefixes users add when they paste: "[80746] ", "   12\t" (cat -n), "12 | ", "12: "
    re.compile(rb"\s{0,8}\[(\d{1,9})\] ?"),
    re.compile(rb"\s{0,8}(\d{1,9})(?:\t| ?[|:] ?| )"),
)


def _line_numbers(lines: list[bytes]) -> re.Pattern[bytes] | None:
    """The line-number prefix of a pasted log: on most lines, strictly increasing, mostly by one
    (srun labels and pids repeat or jump, so they never qualify)."""
    for pat in _LINE_NUMBERS:
        nums = [int(m.group(1)) for ln in lines if (m := pat.match(ln))]
        pairs = list(itertools.pairwise(nums))
        if len(nums) < 3 or len(nums) < 0.8 * len(lines) or any(b <= a for a, b in pairs):
            continue
        if sum(b == a + 1 for a, b in pairs) >= 0.8 * len(pairs):
            return pat
    return None


def _last_segment(raw: bytes, anchors: tuple[bytes, ...]) -> bytes:
    """A line redrawn with carriage returns (progress bars): the last segment holding an anchor,
    else the last one with text, as a terminal would have left it."""
    parts = [p for p in raw.split(b"\r") if p.strip()]
    for part in reversed(parts):
        if any(a in part for a in anchors):
            return part
    return parts[-1] if parts else b""


# a paste whose rich-text editor turned every dotted word into a link: "transport/[net_ib.cc:101](http://net_ib.cc:101/)",
# "[10.1.3.201](http://10.1.3.201/)" (GitHub's Markdown of such a paste): the link's text is what the program printed
_AUTOLINK = re.compile(rb"\[([^\]\s]{1,200})\]\(https?://[^)\s]{1,250}\)")


# Open MPI's --tag-output (and horovodrun's) prefix: one inside a line starts another process's output spliced into it
_MPI_TAG = re.compile(rb"\[\d+(?:,\d+)?\]<std(?:out|err)>:")


def _spliced(raw: bytes, anchors: tuple[bytes, ...]) -> bytes:
    """A line into which another process's output was spliced ("[1,2]<stderr>:[h:1] [ 0] [1,0]<stderr>:  what(): ..."):
    the last piece, from its own tag on, that holds an anchor, else the last piece (each piece is its process's). A
    line whose tags all name one process is that process's (Open MPI tags every chunk a process writes)."""
    tags = list(_MPI_TAG.finditer(raw))
    if len({m.group() for m in tags}) < 2:  # one process's output in pieces, each tagged: its own line
        return raw
    cuts = [m.start() for m in tags if m.start() > 0]
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    return next((p for p in reversed(pieces) if any(a in p for a in anchors)), pieces[-1])


def line_cleaner(head: bytes, anchors: tuple[bytes, ...]) -> Callable[[bytes], bytes]:
    """A function that cleans one raw line of this file, learned from the file's first bytes."""
    lost = b"[0m" in head  # colour codes whose ESC the paste dropped: removed from every line
    linked = b"](http" in head
    tagged = b"]<std" in head
    sample = head.split(b"\n", 200)[:200]
    if b"\x1b" in head:
        sample = [_ANSI.sub(b"", ln) for ln in sample]
    if lost:
        sample = [_ANSI_LOST.sub(b"", ln) for ln in sample]
    kept = (ln.rstrip(b"\r") for ln in sample if ln.strip())
    first = list(itertools.islice(kept, 10))  # the rest only when these look numbered
    numbered = sum(1 for ln in first if _LINE_NUMBERS[0].match(ln) or _LINE_NUMBERS[1].match(ln))
    numbers = _line_numbers(first + list(kept)) if numbered >= min(3, len(first)) and first else None

    def clean(raw: bytes) -> bytes:
        if b"\x1b" in raw:
            raw = _ANSI.sub(b"", raw)
        if lost and b"m" in raw:
            raw = _ANSI_LOST.sub(b"", raw)
        if linked and b"](http" in raw:
            raw = _AUTOLINK.sub(rb"\1", raw)
        if b"\r" in raw:
            raw = raw.rstrip(b"\r")
            if b"\r" in raw:
                raw = _last_segment(raw, anchors)
        if numbers is not None and (m := numbers.match(raw)):
            raw = raw[m.end() :]
        if tagged and b"]<std" in raw[1:]:
            raw = _spliced(raw, anchors)
        return raw

    return clean


def starts_message(text: str, year: int) -> bool:
    """Whether a line opens a message of its own (a prefix, a header, a traceback line), i.e. it
    cannot be the rest of a line the terminal wrapped."""
    if not text or text[0].isspace() or text.startswith(("Traceback", "File ")):
        return True
    line = parse_line(text, year)
    return bool(line.stream or line.time is not None or line.level or line.nccl)
