"""Rounds of the net check: probe along the rings, measure the suspect links again, decide."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from validator.facts.network import chosen
from validator.model import Facts, Finding
from validator.netcheck.ring import Node, Plans, Results, plan, recheck, summary
from validator.netcheck.verdict import by_label, line, reach_findings, slow_findings, suspects

Round = Callable[[Plans], Awaitable[Results]]  # run these probes on their nodes, return the rows


@dataclass
class Outcome:
    counts: dict[str, int]  # nodes, probes, failed (of the first round)
    findings: list[Finding]
    line: str  # "net-check: 6 links ok; median ..."


async def run(nodes: list[Node], probe_round: Round) -> Outcome:
    """Probe along the rings; measure the suspect links once more; decide."""
    plans = plan(nodes)
    first = await probe_round(plans)
    redo = recheck(plans, suspects(first))
    again = await probe_round(redo) if redo else {}
    named = by_label(nodes)
    findings = reach_findings(named, plans, first) + slow_findings(named, first, again)
    return Outcome({"nodes": len(nodes), **summary(first)}, findings, line(first))


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
