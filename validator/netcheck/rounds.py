"""Rounds of the net check: probe along the rings (every link at once: it only proposes suspect
links; with ``--net-check-pairs all``, then every pair off the rings in rounds of disjoint pairs,
sweep.py, judged against the rings' median link), then isolate (pairing.py): each suspect's nodes
paired with known-good nodes and the suspect links measured again, in rounds of disjoint pairs
beside control pairs, until each suspect is a bad node (NET105), a bad link (NET104) or noise;
decide (verdict.py). Never more than ``pairing.budget`` rounds (2k log2 n + 2 for k suspects among
n nodes) after the rings and the sweep. Then, where the caller gives ``allreduce``, each named node
and link runs a two-rank all_reduce in the job's collective library beside a control pair
(collective.py): evidence added to its finding."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from validator.cliopts import NET_PAIRS_MAX, NetPairs
from validator.documents import NetCheckDoc
from validator.facts.network import chosen
from validator.model import Facts, Finding
from validator.netcheck import collective, sweep
from validator.netcheck.pairing import Pairing, budget
from validator.netcheck.ring import Node, Plans, Results, plan
from validator.netcheck.verdict import (
    MIN_LINKS,
    by_label,
    link_finding,
    measured,
    medians,
    node_finding,
    reach_findings,
    summary_doc,
    suspects,
)

Round = Callable[[Plans], Awaitable[Results]]  # run these probes on their nodes, return the rows


@dataclass
class NetVerdict:
    doc: NetCheckDoc  # counts, figures, suspects, rounds (the scan's JSON)
    findings: list[Finding]

    @property
    def line(self) -> str:  # "net check: 6 links, all within 3x of the median link (...)"
        return self.doc["line"]


async def run(
    nodes: list[Node], probe_round: Round, pairs: NetPairs = "rings", allreduce: collective.Measure | None = None
) -> NetVerdict:
    """Probe along the rings (with ``pairs`` all, then every pair off the rings: sweep.py); isolate
    the suspects in rounds of disjoint pairs (each round's pairs at once, bounded by the caller's
    round); decide."""
    plans = plan(nodes)
    first = await probe_round(plans)
    named = by_label(nodes)
    found = suspects(first)
    med = medians(list(measured(first).values()))
    cost = None
    if pairs == "all" and sum(n.listening for n in nodes) <= NET_PAIRS_MAX:  # the callers refuse above it
        swept, cost = await sweep.run(nodes, plans, probe_round)
        if len(measured(first)) >= MIN_LINKS:  # judged against the rings' median link, as the rings are
            found |= suspects(swept, med)
        first = sweep.merge(first, swept)
    pairing = Pairing.start(named, first, med, found)
    cap = budget(len(nodes), len(found))
    while batch := pairing.next_phase():
        if 1 + pairing.rounds + len(batch) > cap:
            break  # out of rounds: what is not confirmed yet is not named
        for rnd in batch:
            pairing.record(rnd, await probe_round(rnd.plans(named)))
    findings = reach_findings(named, plans, first) + speed_findings(named, pairing)
    confirmed = len(pairing.bad_links()) + len(pairing.explained())
    doc = summary_doc(first, len(nodes), len(found), confirmed, findings, 1 + pairing.rounds, pairs, cost)
    if allreduce is not None and (pairing.bad_nodes() or pairing.bad_links()):
        bad = pairing.bad_nodes()  # known-good: untouched by the suspects, or cleared since (a small cluster)
        good = [
            n for n in dict.fromkeys([*pairing.good, *sorted(pairing.cleared, key=list(named).index)]) if n not in bad
        ]
        doc["allreduce"] = await collective.measure(named, pairing.bad_nodes(), pairing.bad_links(), good, allreduce)
        findings = collective.annotate(findings, doc["allreduce"])
    return NetVerdict(doc, findings)


def speed_findings(nodes: dict[str, Node], pairing: Pairing) -> list[Finding]:
    """NET105 for each node slow with all its known-good partners, NET104 for each link slow
    every time whose nodes are both fine with theirs."""
    out = []
    for n in pairing.bad_nodes():
        pairs = [(nodes[p].host, why) for p, why, _ in pairing.tries[n]]
        ring = [(nodes[b if a == n else a].host, why) for (a, b), why in pairing.suspects.items() if n in (a, b)]
        out.append(node_finding(nodes[n], pairs, ring))
    for a, b in pairing.bad_links():
        whys = [pairing.suspects[(a, b)], *(why for why, _ in pairing.relinks[(a, b)])]
        partners = [nodes[p].host for end in (a, b) for p, why, _ in pairing.tries.get(end, []) if not why]
        out.append(link_finding(nodes[a], nodes[b], whys, partners))
    return out


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
