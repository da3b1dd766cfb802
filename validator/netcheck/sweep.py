"""``--net-check-pairs all``: every unordered pair of nodes measured, not only the rings' 2n.

A pair on neither ring (a bad cable between two nodes far apart on both) is never seen by the
rings. The sweep measures the pairs the rings did not, after the rings' round, in rounds of
disjoint pairs (a node in at most one pair a round; each round's pairs at once, as the rounds
after the rings run): the round-robin schedule of the circle method (node 0 fixed, the others
turn one place a round; N odd: a rest slot, one node rests each round), N-1 rounds for N even
and N for N odd. The pairs the rings measured are left out and each other pair is moved to the
earliest round where both its nodes are free, which never makes more rounds. Each pair is judged
against the rings' median link, as the rings' links are; a slow one is a suspect that pairing.py
isolates as any other (a bad link named as the link, a bad node as the node). Bounded: refused
above ``cliopts.NET_PAIRS_MAX`` nodes.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from validator.cliopts import NET_PAIRS_MAX
from validator.documents import SweepDoc
from validator.netcheck.ring import Node, Plans, Results, target

Pair = tuple[str, str]  # (prober, destination)


def schedule(labels: list[str]) -> list[list[Pair]]:
    """Every unordered pair of ``labels`` once, in rounds of disjoint pairs (the circle method)."""
    slots: list[str | None] = [*labels, None] if len(labels) % 2 else list(labels)
    out: list[list[Pair]] = []
    for _ in range(len(slots) - 1):
        half = len(slots) // 2
        out.append([(a, b) for a, b in zip(slots[:half], reversed(slots[half:]), strict=True) if a and b])
        slots = [slots[0], slots[-1], *slots[1:-1]]
    return [r for r in out if r]


def rounds_of(nodes: list[Node], done: set[frozenset[str]]) -> list[list[Pair]]:
    """The schedule over the listening nodes, less the pairs in ``done``, each pair in the
    earliest round where both its nodes are free (never later than its own round)."""
    out: list[list[Pair]] = []
    busy: list[set[str]] = []
    for rnd in schedule([n.label for n in nodes if n.listening]):
        for a, b in rnd:
            if frozenset((a, b)) in done:
                continue
            i = next((i for i, used in enumerate(busy) if not used & {a, b}), len(busy))
            if i == len(busy):
                out.append([])
                busy.append(set())
            out[i].append((a, b))
            busy[i].update((a, b))
    return out


def measured_pairs(plans: Plans) -> set[frozenset[str]]:
    """The pairs a plan measures (the rings' links; a link to the first node only reaches it)."""
    return {frozenset((src, t["label"])) for src, targets in plans.items() for t in targets if t["measure"]}


async def run(
    nodes: list[Node], rings: Plans, probe_round: Callable[[Plans], Awaitable[Results]]
) -> tuple[Results, SweepDoc]:
    """Measure every pair ``rings`` did not, round after round: every prober's rows, and the cost."""
    if sum(n.listening for n in nodes) > NET_PAIRS_MAX:
        raise ValueError(f"the sweep is bounded to {NET_PAIRS_MAX} nodes")  # the callers refuse before
    by = {n.label: n for n in nodes}
    plan = rounds_of(nodes, measured_pairs(rings))
    out: Results = {}
    t0 = time.monotonic()
    for rnd in plan:
        out = merge(out, await probe_round({a: [target(by[a], by[b], "sweep", True)] for a, b in rnd}))
    seconds = round(time.monotonic() - t0, 2)
    return out, {"rounds": len(plan), "pairs": sum(map(len, plan)), "seconds": seconds}


def merge(a: Results, b: Results) -> Results:
    """Each prober's rows of both; a prober that failed in either (why: a string) failed."""
    out = dict(a)
    for src, got in b.items():
        had = out.get(src, [])
        out[src] = had if isinstance(had, str) else got if isinstance(got, str) else [*had, *got]
    return out
