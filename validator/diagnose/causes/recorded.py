"""Rules over recorded call histories: the rehearsal traces, Flight Recorder dumps, NCCL's COLL
lines. They compare what every rank called, so they name the rank that diverged most directly."""

from __future__ import annotations

from validator.diagnose import collseq
from validator.diagnose import strength as S
from validator.diagnose.causes.base import Evidence
from validator.diagnose.classify import classify
from validator.diagnose.events import Cause, Confidence, Quote, Role
from validator.diagnose.sequences import Divergence, describe, enclosing_branch
from validator.targets import fold_ranks

_KIND_CODE = {"mismatch": "COL001", "extra": "COL001", "split": "COL001", "skipped": "COL002", "stopped": "COL002"}


def from_divergence(d: Divergence, members: list[int], source: str, strength: int, files: dict[int, str]) -> Cause:
    confidence: Confidence = (
        "high" if d.confident and d.culprits and len(members) > 2 else "medium" if d.culprits else "unknown"
    )
    how = {
        "majority": "by majority over the group's ranks",
        "missing": "no majority; the rank without the call did not join (NCCL's desync rule)",
        "branch": "no majority; only the named rank's call sits inside a branch (`"
        + str(enclosing_branch(next((c.site for c in d.actual.values() if c), None)) or "").split(" (")[0]
        + "`)",
        "none": "the group splits evenly: no majority, nobody named",
    }[d.basis]
    if d.basis == "branch":
        confidence = "low"
    if d.kind == "split":
        confidence = "unknown"
    culprit_call = next((c for c in d.actual.values() if c), None)
    stack = list(culprit_call.stack) if culprit_call and culprit_call.stack else []
    if not stack and d.expected and d.expected.stack:
        stack = list(d.expected.stack)
    evidence = [
        Quote(
            files.get(r, source),
            f"rank {r}: {c.detail if c else 'no call'}{' at ' + c.site if c and c.site else ''}",
            r,
        )
        for r, c in sorted(d.actual.items())
    ][:3]
    if d.expected and d.majority:
        r0 = d.majority[0]
        evidence.append(
            Quote(
                files.get(r0, source),
                f"rank {r0}: {d.expected.detail}{' at ' + d.expected.site if d.expected.site else ''}",
                r0,
            )
        )
    expected = d.expected.detail if d.expected else None
    actual = culprit_call.detail if culprit_call else ("no call" if d.culprits else None)
    if expected and actual == expected and d.expected and culprit_call and d.expected.site != culprit_call.site:
        expected, actual = f"{expected} at {d.expected.site}", f"{actual} at {culprit_call.site}"
    return Cause(
        code=_KIND_CODE[d.kind],
        summary=describe(d) + (f" (process group {d.group})" if d.group != "0" else ""),
        culprits=d.culprits,
        confidence=confidence,
        reason=f"{source}: collective #{d.index} compared across ranks {fold_ranks(members)}, {how}",
        evidence=evidence,
        expected=expected,
        actual=actual if actual != expected else None,
        stack=stack,
        strength=strength if confidence in ("high", "medium") else S.SPLIT if d.kind == "split" else S.PARTIAL,
    )


def traces(ev: Evidence) -> list[Cause]:
    """The rehearsal traces diverge (the first two places)."""
    if not ev.traces:
        return []
    return [from_divergence(d, m, "rehearsal traces", S.TRACE, ev.files) for d, m in ev.traces.divergences[:2]]


def flight_recorder(ev: Evidence) -> list[Cause]:
    """The Flight Recorder dumps diverge (the first two places)."""
    if not ev.dumps:
        return []
    return [from_divergence(d, m, "Flight Recorder", S.FLIGHT_RECORDER, ev.files) for d, m in ev.dumps.divergences[:2]]


def trace_endings(ev: Evidence) -> list[Cause]:
    """A rank's rehearsal trace ends with an exception of its own."""
    out = []
    for r, end in sorted(ev.trace_endings.items()):
        got = classify(f"{end.get('type')}: {end.get('msg')}")
        if got is not None and got[1] != Role.ORIGIN:
            continue  # a timeout or lost peer: collateral of another rank's failure, not a warning of its own
        if end.get("kind") == "exception":
            site = f" at {end.get('site')}" if end.get("site") else ""
            out.append(
                Cause(
                    code="DGN010",
                    summary=f"rank {r} raised {end.get('type')}: {str(end.get('msg'))[:160]}{site}",
                    culprits=[r],
                    confidence="high",
                    reason="its rehearsal trace ends with this exception",
                    evidence=[Quote(f"trace rank {r}", f"{end.get('type')}: {end.get('msg')}", r)],
                    strength=S.TRACE_EXCEPTION,
                )
            )
    return out


def p2p(ev: Evidence) -> list[Cause]:
    """Sends and receives that do not pair up in the rehearsal traces."""
    if not ev.traces:
        return []
    return [
        Cause(
            code="COL004",
            summary=sentence,
            culprits=[],
            confidence="medium",
            reason="send/recv pairs counted per (sender, receiver) in the traces",
            strength=S.P2P_UNMATCHED,
        )
        for sentence in ev.traces.p2p[:1]
    ]


def coll_history(ev: Evidence) -> list[Cause]:
    """NCCL_DEBUG_SUBSYS=COLL sequences compared per communicator (collseq)."""
    c = collseq.first_divergence(ev.coll) if ev.coll else None
    return [c] if c is not None else []
