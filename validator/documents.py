"""The JSON documents every report command prints (check, scan, preflight, node-check,
diagnose), as types: the ``to_json`` methods are checked against them (mypy), and the published
JSON Schema (docs/schema/, ``validator.schema``) is generated from them, next to the facts
``TypedDict``s in ``validator.model``."""

from __future__ import annotations

from typing import Literal, TypedDict


class FindingDoc(TypedDict):
    """One finding; hosts and ranks folded (``node[01-04]``, ``0-7,9``), empty when none."""

    code: str
    severity: Literal["info", "warning", "error"]
    title: str
    message: str
    ranks: str
    hosts: str
    expected: str | None
    actual: str | None
    fix: str
    verify: str


class OutcomeDoc(TypedDict):
    """A target that gave no usable facts (scan, preflight): exit code 3 unless allowed."""

    target: str
    status: str  # unreachable | timeout | auth | no-python | unparsed | missing | interrupted | error
    detail: str


class SummaryDoc(TypedDict):
    """Findings per severity."""

    info: int
    warning: int
    error: int


class ScanDoc(TypedDict):
    """What `validator scan` did: transport, targets reached, the net check's counts."""

    transport: str  # ssh | slurm | kubectl | local
    targets: int
    reached: int
    interrupted: bool
    elapsed_s: float
    net_check: dict[str, int] | None  # nodes, probes, failed
    warnings: list[str]
    failed: str | None  # the scan failed on the scanner's side (exit 2, nothing drained)


class EvidenceDoc(TypedDict):
    source: str  # file:line, or a dump/trace file
    text: str
    rank: int | None


class OtherCauseDoc(TypedDict):
    code: str
    summary: str
    ranks: list[int]


# functional form: "class" (the failure class in the corpus vocabulary) is a Python keyword
DiagnosisDoc = TypedDict(
    "DiagnosisDoc",
    {
        "failure_class": str,
        "class": str,  # codes.VOCAB: collective_timeout, oom, ... unrecognised, none
        "code": "str | None",
        "initiating_ranks": "list[int]",
        "initiating_hosts": "list[str]",
        "confidence": str,  # high | medium | low | unknown
        "reason": str,
        "summary": str,
        "stack": "list[str]",
        "collateral_ranks": "list[int]",
        "ranks_seen": "list[int]",
        "evidence": "list[EvidenceDoc]",
        "other_causes": "list[OtherCauseDoc]",
        "notes": "list[str]",
    },
)
DiagnosisDoc.__doc__ = """The verdict of `validator diagnose` (docs/diagnose.md)."""


class ReportDoc(TypedDict):
    """The report of `check`, `preflight` and `node-check`; the base of the others."""

    schema: int
    validator: str
    title: str
    participants: int
    hosts: str
    host_count: int
    summary: SummaryDoc
    findings: list[FindingDoc]
    outcomes: list[OutcomeDoc]
    input_errors: list[str]


class _ReportExtras(TypedDict, total=False):
    scan: ScanDoc  # `validator scan`
    drain: list[str]  # `validator scan`: the hosts to drain
    diagnosis: DiagnosisDoc  # `validator diagnose`


class AnyReportDoc(ReportDoc, _ReportExtras):
    """A report of any command: the common fields, and the command's own ones."""
