"""Who probes whom: two rings over the nodes, in rank order, and every node towards the first.

Ring 1 (stride 1) is NCCL's own ring: each node connects to the next. Ring 2 (stride ``s``,
about half the ring) gives each node two more peers, so a node whose links are all slow can be
told from one slow link, and two slow links that share a node from a slow node. Every node
also connects to the first node (rank 0 hosts NCCL's bootstrap root) unless a ring already
links them. Ring links are measured (latency, throughput both ways); links to the first node
only prove reachability. Each unordered pair is measured once.
"""

from __future__ import annotations

import contextlib
import ipaddress
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


def scoped(addr: str, iface: str | None) -> str:
    """``addr`` as a socket on a node whose interface is ``iface`` binds or reaches it: a link-local
    IPv6 address only through an interface, which it then names (``fe80::1%eth0``), as NCCL's own
    address carries its scope (getifaddrs); any other as it is."""
    if iface and ":" in addr:
        with contextlib.suppress(ValueError):
            if ipaddress.IPv6Address(addr).is_link_local:
                return f"{addr}%{iface}"
    return addr


def stride(n: int) -> int:
    """Ring 2's stride: about half the ring (far in rank order, often another switch), never
    1 or n-1 (ring 1 again) and, from 5 nodes, never n/2 (which pairs each node with one peer)."""
    if n < 4:
        return 0
    return 2 if n < 6 else n // 2 - 1


def target(src: Node, dest: Node, role: str, measure: bool) -> dict[str, Any]:
    """What ``src`` probes of ``dest``: a link-local address through ``src``'s own interface."""
    return {"label": dest.label, "addr": dest.addr and scoped(dest.addr, src.iface), "port": dest.port, "token": dest.token,
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
            plans[src.label].append(target(src, dest, role, pair not in pairs))
            directed.add((src.label, dest.label))
            pairs.add(pair)
    first = ring[0]
    for src in ring[1:]:
        if frozenset((src.label, first.label)) not in pairs:
            plans[src.label].append(target(src, first, "first", False))
    return plans


def rows(results: Results) -> list[tuple[str, dict[str, Any]]]:
    """(prober, row) for every row of every prober that ran."""
    return [(src, r) for src, got in results.items() if isinstance(got, list) for r in got if isinstance(r, dict)]
