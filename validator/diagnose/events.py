"""What the diagnose stages pass each other: events read from logs, and the verdict."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

from validator.documents import DiagnosisDoc, EvidenceDoc


class Role(enum.IntEnum):
    """How an event relates to the failure: a cause, a consequence, or bookkeeping."""

    FACT = 0  # rank mapping, versions, endpoints: not a failure
    SYMPTOM = 1  # timeouts, closed connections: what collateral ranks print
    SUMMARY = 2  # launcher summaries (torchrun Root Cause): second-hand
    ORIGIN = 3  # exceptions, CUDA errors, misconfiguration: what an initiating rank prints


@dataclass(slots=True)
class Ident:
    """Who printed a line, as far as the line and its file tell."""

    rank: int | None = None  # global rank
    local_rank: int | None = None
    node: str | None = None  # srun task label / mpirun node tag: which agent's stream
    host: str | None = None
    pid: int | None = None


@dataclass(slots=True)
class Event:
    kind: str  # e.g. "coll.watchdog_timeout"
    role: Role
    text: str  # the message, prefixes stripped, truncated
    source: str  # file:line
    ident: Ident
    time: float | None = None  # seconds since the epoch (naive local time)
    data: dict[str, Any] = field(default_factory=dict)
    stack: list[str] = field(default_factory=list)  # "file:line in func", innermost last
    file: str = ""

    @property
    def rank(self) -> int | None:
        return self.ident.rank


@dataclass(slots=True)
class Quote:
    """A line a cause quotes as its evidence."""

    source: str  # file:line, or a dump/trace file
    text: str
    rank: int | None = None

    def to_json(self) -> EvidenceDoc:
        return {"source": self.source, "text": self.text, "rank": self.rank}


Confidence = Literal["high", "medium", "low", "unknown"]


@dataclass(slots=True, kw_only=True)
class Cause:
    """One candidate explanation; the verdict is the strongest of them."""

    code: str
    summary: str  # one line: "rank 3 skipped all_reduce #41 at train.py:88"
    culprits: list[int]
    confidence: Confidence
    reason: str  # why these ranks: the evidence rule that decided
    evidence: list[Quote] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    expected: str | None = None
    actual: str | None = None
    stack: list[str] = field(default_factory=list)
    time: float | None = None
    strength: int = 0  # a level of diagnose/strength.py: the strongest candidate is the verdict
    family: str = ""  # failure class in the corpus vocabulary (codes.VOCAB); "" = the code's default
    fix: str = ""  # a fix that fits this run (its backend); "" = the code's fix


CONFIDENCE: dict[Confidence, int] = {"high": 3, "medium": 2, "low": 1, "unknown": 0}


@dataclass(slots=True)
class Diagnosis:
    failure_class: str
    primary: Cause | None
    others: list[Cause]
    collateral: list[int]
    ranks_seen: list[int]
    hosts: dict[int, str]
    notes: list[str] = field(default_factory=list)  # incompleteness, hints
    vocab_class: str = "none"  # the failure class in the fixed vocabulary (codes.VOCAB)

    def to_json(self) -> DiagnosisDoc:  # its schema: validator.documents.DiagnosisDoc
        p = self.primary
        return {
            "failure_class": self.failure_class,
            "class": self.vocab_class,
            "code": p.code if p else None,
            "initiating_ranks": p.culprits if p else [],
            "initiating_hosts": p.hosts if p else [],
            "confidence": p.confidence if p else "unknown",
            "reason": p.reason if p else "",
            "summary": p.summary if p else "no failure found",
            "stack": p.stack if p else [],
            "collateral_ranks": self.collateral,
            "ranks_seen": self.ranks_seen,
            "evidence": [e.to_json() for e in p.evidence] if p else [],
            "other_causes": [{"code": c.code, "summary": c.summary, "ranks": c.culprits} for c in self.others],
            "notes": self.notes,
        }
