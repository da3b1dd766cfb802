"""Diagnosis -> findings (the shared report formats), the verdict block, and prose."""

from __future__ import annotations

from validator.diagnose import codes as dgn
from validator.diagnose.codes import CODES
from validator.diagnose.events import Cause, Diagnosis
from validator.model import Finding, Outcome, Report, Severity
from validator.targets import fold_hosts, fold_ranks


def _finding(c: Cause, severity: Severity | None = None) -> Finding:
    sure = f" [confidence {c.confidence}: {c.reason}]"
    same = c.expected is not None and c.expected == c.actual  # "expected X, got X" says nothing
    return CODES[c.code].finding(c.summary + sure, ranks=c.culprits, hosts=c.hosts,
                                 expected=None if same else c.expected, actual=None if same else c.actual,
                                 fix=c.fix, severity=severity)  # fmt: skip


def to_report(
    diag: Diagnosis, participants: int, outcomes: list[Outcome], errors: list[str], title: str, suppressed: int = 0
) -> Report:
    findings: list[Finding] = []
    if diag.primary:
        findings.append(_finding(diag.primary))
    collateral = set(diag.collateral)  # another cause that only names collateral ranks is context, not a warning
    findings += [
        _finding(c, Severity.INFO if c.culprits and set(c.culprits) <= collateral else Severity.WARNING)
        for c in diag.others
    ]
    if diag.collateral:
        findings.append(
            dgn.collateral.finding(
                f"{len(diag.collateral)} rank{'s' if len(diag.collateral) != 1 else ''} failed as a consequence "
                f"(timeouts, lost peers, teardown)" + (f"; {suppressed} repeated lines folded" if suppressed else ""),
                ranks=diag.collateral,
                severity=Severity.INFO,
            )
        )
    if diag.notes:
        findings.append(dgn.incomplete.finding("; ".join(diag.notes), severity=Severity.WARNING))
    hosts = sorted(set(diag.hosts.values()))
    return Report(findings, participants, hosts, outcomes, errors, title)


def verdict_text(diag: Diagnosis) -> str:
    """The block under the table: the answer first, then why."""
    p = diag.primary
    if p is None:
        return "verdict: no failure found in the inputs"
    who = f"rank {fold_ranks(p.culprits)}" if p.culprits else "unknown"
    if p.hosts:
        who += f" on {fold_hosts(p.hosts)}"
    lines = [
        f"verdict: {diag.failure_class} ({p.code})",
        f"  initiating: {who} (confidence {p.confidence})",
        f"  why: {p.reason}",
        f"  what: {p.summary}",
    ]
    if p.stack:
        lines.append("  stack (innermost last):")
        lines += [f"    {s}" for s in p.stack[-6:]]
    if diag.collateral:
        lines.append(f"  collateral: rank {fold_ranks(diag.collateral)}")
    if p.evidence:
        lines.append("  evidence:")
        lines += [f"    {e.source}: {e.text[:200]}" for e in p.evidence[:5]]
    return "\n".join(lines)


def explain(diag: Diagnosis) -> str:
    """The same verdict as prose, for a person reading it cold."""
    p = diag.primary
    if p is None:
        return "Nothing in these files reports a failure: no errors, timeouts or diverging collective histories.\n"
    code = CODES[p.code]
    culprit = f"rank {fold_ranks(p.culprits)}" if p.culprits else "no single rank"
    text = [
        f"The run failed with a {diag.failure_class}. {p.summary[0].upper() + p.summary[1:]}.",
        f"This points to {culprit}" + (f" on {fold_hosts(p.hosts)}" if p.hosts else "")
        + f"; confidence is {p.confidence} because {p.reason}.",
    ]  # fmt: skip
    if diag.collateral:
        text.append(
            f"The errors printed by rank {fold_ranks(diag.collateral)} are consequences: once the initiating rank "
            "stopped taking part, the others waited in their collectives until they timed out or lost the connection."
        )
    text.append(code.why)
    text.append(f"What to do: {p.fix or code.fix}")
    if code.verify:
        text.append(f"To check the fix: {code.verify}.")
    for c in diag.others:
        text.append(f"Also seen ({c.code}, confidence {c.confidence}): {c.summary}.")
    if diag.notes:
        text.append("The inputs were incomplete: " + "; ".join(diag.notes) + ".")
    return "\n\n".join(text) + "\n"
