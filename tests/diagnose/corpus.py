"""The real-log corpus (tests/corpus/diagnose/): loading and scoring, shared by
tests/diagnose/test_corpus.py and benchmarks/diagnose_accuracy.py.

Each case is diagnosed from a copy under a neutral name: the curator's file names
(``...-lagging-rank7.log``) would otherwise tell diagnose the rank (``rankN`` in a name is a
per-rank log).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from validator.diagnose.run import diagnose_paths

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "diagnose"


@dataclass(slots=True)
class Label:
    file: str
    klass: str
    rank: int | None
    rank_set: list[int] | None
    evidence: str
    source: str
    host: str | None = None  # the initiating host, where the log names it

    @property
    def truth(self) -> list[int] | None:
        """The culprit set the log determines, or None."""
        if self.rank is not None:
            return [self.rank]
        return sorted(self.rank_set) if self.rank_set else None


@dataclass(slots=True)
class Score:
    label: Label
    klass: str
    ranks: list[int]
    confidence: str
    code: str | None
    summary: str
    hosts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def class_ok(self) -> bool:
        return self.klass == self.label.klass

    @property
    def rank_ok(self) -> bool:
        return self.label.truth is not None and self.ranks == self.label.truth

    @property
    def host_ok(self) -> bool:
        return self.label.host is not None and self.hosts == [self.label.host]

    @property
    def false_attribution(self) -> bool:
        """A rank named with medium/high confidence where the log names none, or a wrong one."""
        if not self.ranks:
            return False
        truth = self.label.truth
        if truth is None:
            return self.confidence in ("medium", "high")
        return not set(self.ranks) <= set(truth) if self.confidence == "low" else self.ranks != truth


def labels(corpus: Path = CORPUS) -> list[Label]:
    out = []
    for line in (corpus / "labels.jsonl").read_text().splitlines():
        if line.strip():
            d: dict[str, Any] = json.loads(line)
            out.append(Label(d["file"], d["class"], d.get("initiating_rank"), d.get("rank_set"), d.get("evidence", ""),
                             d.get("source", ""), d.get("initiating_host")))  # fmt: skip
    return out


def score(label: Label, corpus: Path = CORPUS) -> Score:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.log"
        shutil.copyfile(corpus / "cases" / label.file, path)
        _, diag = diagnose_paths([str(path)], jobs=1)
    p = diag.primary
    s = Score(label, diag.vocab_class, list(p.culprits) if p else [], p.confidence if p else "unknown",
              p.code if p else None, p.summary if p else "no failure found", list(p.hosts) if p else [])  # fmt: skip
    if not s.class_ok:
        s.problems.append(f"class {s.klass} != {label.klass}")
    if label.truth is not None and not s.rank_ok:
        s.problems.append(f"ranks {s.ranks} != {label.truth}")
    if label.host is not None and s.hosts and not s.host_ok:
        s.problems.append(f"hosts {s.hosts} != [{label.host}]")
    if s.false_attribution:
        s.problems.append(f"false attribution: ranks {s.ranks} ({s.confidence})")
    return s


def totals(scores: list[Score]) -> dict[str, Any]:
    determined = [s for s in scores if s.label.truth is not None]
    return {
        "cases": len(scores),
        "class_ok": sum(s.class_ok for s in scores),
        "rank_ok": sum(s.rank_ok for s in determined),
        "rank_determined": len(determined),
        "false_attributions": sum(s.false_attribution for s in scores),
        "host_ok": sum(s.host_ok for s in scores),
        "host_determined": sum(s.label.host is not None for s in scores),
        "wrong_hosts": sum(s.label.host is not None and bool(s.hosts) and not s.host_ok for s in scores),
    }


class Verdict(NamedTuple):
    """A diagnosis of one log text, as the tests of message shapes compare it."""

    klass: str | None  # the corpus's class of the failure
    ranks: list[int]  # the primary cause's culprits
    confidence: str  # "none" without a primary cause
    hosts: list[str]
    code: str | None


def verdict(tmp_path: Path, text: str) -> Verdict:
    """``text`` written as one log file and diagnosed as `validator diagnose` would (one process)."""
    log = tmp_path / "case.log"
    log.write_text(text)
    _report, d = diagnose_paths([str(log)], jobs=1)
    p = d.primary
    if p is None:
        return Verdict(d.vocab_class, [], "none", [], None)
    return Verdict(d.vocab_class, list(p.culprits), p.confidence, list(p.hosts), p.code)
