"""Rounds of the net check: probe along the rings (every link at once), measure each suspect
link again alone, twice (one link at a time, nothing else of the check running: the first round's
contention is not there), with a few control links measured alone the same way, decide
(verdict.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from validator.documents import NetCheckDoc
from validator.facts.network import chosen
from validator.model import Facts, Finding
from validator.netcheck.ring import Node, Plans, Results, alone, controls, merge, plan
from validator.netcheck.verdict import (
    CONFIRM,
    CONTROLS,
    Link,
    by_label,
    reach_findings,
    slow_findings,
    summary_doc,
    suspects,
)

Round = Callable[[Plans], Awaitable[Results]]  # run these probes on their nodes, return the rows
ALONE_ROUNDS = 24  # rounds per confirmation: up to this many suspects, each is measured alone


@dataclass
class Outcome:
    doc: NetCheckDoc  # counts, figures, suspects (the scan's JSON)
    findings: list[Finding]

    @property
    def line(self) -> str:  # "net check: 6 links, all within 3x of the median link (...)"
        return self.doc["line"]


async def run(nodes: list[Node], probe_round: Round) -> Outcome:
    """Probe along the rings; measure each suspect link alone, CONFIRM times (while it stays
    slow), and CONTROLS links that were not suspect alone beside them; decide."""
    plans = plan(nodes)
    first = await probe_round(plans)
    confirms: list[Results] = []
    redo = suspected = suspects(first)
    for _ in range(CONFIRM if redo else 0):
        again: Results = {}
        for batch in confirmation(plans, suspected, redo):
            merge(again, await probe_round(batch))
        confirms.append(again)
        redo = suspects(first, again)
        if not redo:
            break
    named = by_label(nodes)
    findings = reach_findings(named, plans, first) + slow_findings(named, first, *confirms)
    confirmed = len(redo) if len(confirms) == CONFIRM else 0
    return Outcome(summary_doc(first, len(nodes), len(suspected), confirmed, findings), findings)


def confirmation(plans: Plans, suspected: set[Link], redo: set[Link]) -> list[Plans]:
    """The rounds of one confirmation: each link of ``redo`` and CONTROLS links that were not
    suspect, each alone; beyond ALONE_ROUNDS suspects, ALONE_ROUNDS rounds of links that share
    no node, one control in each (the controls share the suspects' conditions, whichever)."""
    few = len(redo) <= ALONE_ROUNDS
    ctl = controls(plans, suspected, CONTROLS if few else ALONE_ROUNDS)
    order = sorted(redo)
    step = -(-len(order) // max(1, len(ctl)))
    for i, link in enumerate(ctl):  # spread: the packing fills rounds in this order
        order.insert(i * (step + 1), link)
    return alone(plans, order, len(order) if few else ALONE_ROUNDS)


def nodes(facts: list[Facts], nccl: bool, labels: list[str] | None = None) -> list[Node]:
    """One node per facts document (label: ``labels`` or the host) on the address NCCL
    (``nccl``: ``facts.network.uses_nccl`` over the whole job) or Gloo would use there; nodes
    without such an address are left out."""
    out = []
    for i, f in enumerate(facts):
        addr, iface = chosen(f, nccl)
        if addr:
            out.append(Node(labels[i] if labels else f["host"], f["host"], addr, iface))
    return out
