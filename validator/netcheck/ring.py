"""Who probes whom: two rings over the nodes, in rank order, and every node towards the first.

Ring 1 (stride 1) is NCCL's own ring: each node connects to the next. Ring 2 (stride ``s``,
about half the ring) gives each node two more peers, so a node whose links are all slow can be
told from one slow link, and two slow links that share a node from a slow node. Every node
also connects to the first node (rank 0 hosts NCCL's bootstrap root) unless a ring already
links them. Ring links are measured (latency, throughput both ways); links to the first node
only prove reachability. Each unordered pair is measured once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Plans = dict[str, list[dict[str, Any]]]  # prober label -> targets
Results = dict[str, "list[dict[str, Any]] | str"]  # prober label -> one row per target, or why none


@dataclass
class Node:
    label: str  # unique among the nodes (scan: the host; preflight: its place in rank order)
    host: str  # what findings name
    addr: str | None  # the address NCCL (GPU jobs) or Gloo would use there
    iface: str | None = None
    port: int | None = None
    token: str | None = None
    error: str | None = None  # why it has no listener
    bind: bool = False  # ... because the address itself cannot be bound

    @property
    def listening(self) -> bool:
        return self.port is not None and self.addr is not None and self.error is None

    def where(self) -> str:
        return f"{self.iface} {self.addr}" if self.iface else str(self.addr)


def stride(n: int) -> int:
    """Ring 2's stride: about half the ring (far in rank order, often another switch), never
    1 or n-1 (ring 1 again) and, from 5 nodes, never n/2 (which pairs each node with one peer)."""
    if n < 4:
        return 0
    return 2 if n < 6 else n // 2 - 1


def target(dest: Node, role: str, measure: bool) -> dict[str, Any]:
    return {"label": dest.label, "addr": dest.addr, "port": dest.port, "token": dest.token,
            "role": role, "measure": measure}  # fmt: skip


def plan(nodes: list[Node]) -> Plans:
    """Targets of each listening node (in the order given: rank order)."""
    ring = [n for n in nodes if n.listening]
    plans: Plans = {n.label: [] for n in ring}
    if len(ring) < 2:
        return plans
    size = len(ring)
    pairs: set[frozenset[str]] = set()
    directed: set[tuple[str, str]] = set()
    for role, step in (("ring", 1), ("ring2", stride(size))):
        for i, src in enumerate(ring if step else []):
            dest = ring[(i + step) % size]
            pair = frozenset((src.label, dest.label))
            if (src.label, dest.label) in directed or (role == "ring2" and pair in pairs):
                continue
            plans[src.label].append(target(dest, role, pair not in pairs))
            directed.add((src.label, dest.label))
            pairs.add(pair)
    first = ring[0]
    for src in ring[1:]:
        if frozenset((src.label, first.label)) not in pairs:
            plans[src.label].append(target(first, "first", False))
    return plans


def alone(plans: Plans, links: list[tuple[str, str]], rounds: int) -> list[Plans]:
    """The links (prober, destination) in rounds of their own, in the order given: one link a
    round while there are at most ``rounds`` of them (nothing else runs while it is measured);
    beyond that, links that share no node run together, about ``rounds`` rounds in all."""
    width = max(1, -(-len(links) // max(1, rounds)))
    targets = {(src, str(t["label"])): t for src, ts in plans.items() for t in ts}
    batches: list[tuple[set[str], Plans]] = []
    for src, dest in links:
        ends = {src, dest}
        spot = next((b for b in batches if not ends & b[0] and sum(map(len, b[1].values())) < width), None)
        if spot is None:
            spot = (set(), {})
            batches.append(spot)
        spot[0].update(ends)
        spot[1].setdefault(src, []).append(targets[(src, dest)])
    return [b[1] for b in batches]


def controls(plans: Plans, links: set[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    """Up to ``count`` measured links that are not in ``links`` (preferring links that touch no
    node of theirs), spread over the ring: measured beside the suspects, the same way."""
    touched = {end for link in links for end in link}
    spare = [(s, str(t["label"])) for s, ts in plans.items() for t in ts if t["measure"]]
    spare = [link for link in spare if link not in links]
    clean = [link for link in spare if not set(link) & touched] or spare
    return clean[:: max(1, len(clean) // max(1, count))][:count]


def merge(into: Results, more: Results) -> Results:
    """Rows of several rounds, per prober (a prober that failed in one keeps its other rows)."""
    for src, got in more.items():
        have = into.get(src)
        if isinstance(got, list):
            into[src] = (have if isinstance(have, list) else []) + got
        elif have is None:
            into[src] = got
    return into


def rows(results: Results) -> list[tuple[str, dict[str, Any]]]:
    """(prober, row) for every row of every prober that ran."""
    return [(src, r) for src, got in results.items() if isinstance(got, list) for r in got if isinstance(r, dict)]
