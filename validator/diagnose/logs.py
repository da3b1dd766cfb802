"""One log line -> who printed it, when, at which level, and the message itself.

Lines arrive wrapped in prefixes that launchers and loggers add, in any combination:
srun ``--label`` (``3: ``), mpirun ``--tag-output`` (``[1,3]<stdout>:``), torchrun ``--tee``
(``[default3]:``, role + *local* rank; templates such as ``[default-r5-l1]:``), c10d's own
``[rank5]:``, ``kubectl logs --timestamps``, then a header: c10d/glog
(``[E1130 09:39:26.201103723 ProcessGroupNCCL.cpp:632]``, older ``[E ProcessGroupNCCL.cpp:737]``),
torchelastic (``E1130 09:40:37.598000 31830 torch/.../api.py:1002]``), Python logging
(``WARNING:torch.distributed...:``, ``2024-01-01 10:00:00,123 - INFO -``), NCCL
(``host:pid:tid [dev] file.cc:123 NCCL WARN``, optionally after ``[2026-11-30 09:39:26] ``).
Formats are matched by shape, not by version, so new versions that keep the shape still parse.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from validator.diagnose.events import Ident

_MPI = re.compile(r"\[\d+,(\d+)\]<(?:stdout|stderr)>:\s?")
_RANK = re.compile(r"\[rank(\d+)\]:\s?")
_TEMPLATE = re.compile(r"\[([A-Za-z_][\w]*)-r(\d+)-l(\d+)\]:\s?")
_ROLE = re.compile(r"\[([A-Za-z_][A-Za-z_\-]*?)(\d+)(?:\|\d+)?\]:\s?")
_SRUN = re.compile(r"(\d{1,6}): ")
_BRACKET_NUM = re.compile(r"\[(\d{1,7})\] (?=\S)")
_ISO = re.compile(r"\[?(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?:Z|[+-]\d\d:?\d\d)?\]?[ ,]\s*")

_GLOG = re.compile(r"\[([IWEF])(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? ([\w.\-]+):\d+\]\s?")
_GLOG_OLD = re.compile(r"\[([IWEF]) [\w.\-]+:\d+\]\s?")
_ELASTIC = re.compile(r"([IWEF])(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? (\d+) \S+?:\d+\]\s?")
_PYLOG = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:")
_LEVEL_WORD = re.compile(
    r"(?:- )?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b(?: -)?\s*(?:\d\d-\d\d \d\d:\d\d:\d\d )?(?:\S+:\d+\] )?"
)
_NCCL = re.compile(r"([\w.\-]+):(\d+):(\d+) \[(\d+)\] (?:(\S+:\d+) )?(?:\(\w+\) )?NCCL (WARN|INFO|TRACE|ABORT)\s?")
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


def _prefixes(text: str, ident: Ident) -> tuple[str, str]:
    """Peel launcher prefixes off the front; returns (stream key, rest)."""
    pos = 0
    for _ in range(6):
        if (m := _MPI.match(text, pos)) or (m := _RANK.match(text, pos)):
            ident.rank = int(m.group(1))
        elif m := _TEMPLATE.match(text, pos):
            ident.rank, ident.local_rank = int(m.group(2)), int(m.group(3))
        elif m := _ROLE.match(text, pos):
            ident.local_rank = int(m.group(2))
        elif m := _SRUN.match(text, pos):
            ident.node = m.group(1)
        elif m := _BRACKET_NUM.match(text, pos):
            ident.node = ident.node or m.group(1)
        else:
            break
        pos = m.end()
    return text[:pos].strip(), text[pos:]


def parse_line(raw: str, year: int) -> Line:
    """Split one line into who/when/level/message. Never raises."""
    ident = Ident()
    stream, rest = _prefixes(raw.rstrip("\r\n"), ident)
    time: float | None = None
    level: str | None = None
    nccl: str | None = None
    if m := _ISO.match(rest):
        y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
        time = _ts(y, mo, d, h, mi, s, m.group(7))
        rest = rest[m.end() :]
        # a second round: c10d's [rankN]: can follow a kubectl timestamp
        more, rest = _prefixes(rest, ident)
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
    if m := _NCCL.match(rest):
        ident.host, ident.pid = m.group(1), int(m.group(2))
        nccl = m.group(6)
        level = "warning" if nccl == "WARN" else level or "info"
        rest = f"NCCL {nccl} " + rest[m.end() :]
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


STREAM_KEY = re.compile(rb"(?:\[\d+,\d+\]<std(?:out|err)>:\s?|\[[A-Za-z][^\]\s]{0,39}\]:\s?|\d{1,6}: )*")


def stream_of(line: bytes) -> bytes:
    """The raw prefix bytes of a line: the lines of one process's stream share it."""
    m = STREAM_KEY.match(line)
    return m.group(0).strip() if m else b""
