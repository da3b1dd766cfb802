"""What every diagnose rule reads, ``Evidence``, and the helpers the rules share.

A rule is one function, ``Evidence`` in, candidate ``Cause``s out (``Rule``); the table of them is
``causes.CAUSES``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from validator.diagnose.events import Cause, Event, Quote, Role
from validator.diagnose.flightrec import DumpAnalysis
from validator.diagnose.tracefile import TraceAnalysis
from validator.targets import fold_ranks


@dataclass(slots=True, kw_only=True)
class Evidence:
    """Everything a run left behind that the rules read."""

    events: list[Event]  # every recognised line of every log, and torchelastic's error files
    dumps: DumpAnalysis | None = None  # Flight Recorder dumps, compared across ranks
    traces: TraceAnalysis | None = None  # rehearsal traces, compared across ranks
    trace_endings: dict[int, dict[str, object]] = field(default_factory=dict)  # rank -> how its trace ended
    hosts: dict[int, str] = field(default_factory=dict)  # rank -> host
    files: dict[int, str] = field(default_factory=dict)  # rank -> its dump or trace file, as shown
    file_ranks: list[int] = field(default_factory=list)  # ranks with a log of their own
    coll: list[dict[str, Any]] = field(default_factory=list)  # NCCL COLL sequences, one store per file (collseq)
    # per rank: its timeouts, lost peers and launcher summaries (what a victim prints)
    symptoms: dict[int, list[Event]] = field(init=False)

    def __post_init__(self) -> None:
        symptoms: dict[int, list[Event]] = defaultdict(list)
        for e in self.events:
            if (
                e.role in (Role.SYMPTOM, Role.SUMMARY)
                and e.rank is not None
                and not e.kind.startswith(("summary", "misc"))
            ):
                symptoms[e.rank].append(e)
        self.symptoms = dict(symptoms)


Rule = Callable[[Evidence], list[Cause]]


def quote(e: Event) -> Quote:
    return Quote(e.source, e.text, e.rank)


def ranks_of(rs: Iterable[int | None]) -> list[int]:
    return sorted({r for r in rs if r is not None})


def who(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) != 1 else ''} {fold_ranks(ranks)}" if ranks else "an unknown rank"


def by_kind(events: list[Event], *kinds: str) -> list[Event]:
    return [e for e in events if e.kind in kinds]


def host_of(hosts: list[str], ranks: list[int]) -> str:
    where = f"host {', '.join(hosts[:4])}" if hosts else "the host"
    return where + (f" (reported by {who(ranks)})" if ranks else "")
