"""After the net check named a slow node (NET105) or link (NET104): a second witness, in the job's
own collective library. Each named link, and each named node with a known-good partner, runs a
two-rank all_reduce (allreduce.py on the nodes: gloo on the CPU, NCCL where torch sees a GPU) in
rounds of disjoint pairs, each round beside a control pair of two known-good nodes; the finding
gets the pair's bus bandwidth and the control's. It names nothing and clears nothing: the TCP
rounds decided; this says whether the library the job will use sees the same.

The caller gives ``Measure``: run rank 0 on each pair's first node and rank 1 on its second, all
pairs at once, and return each pair's answer (allreduce.py's ``allreduce`` object) or why there is
none. The scan runs it through its transport (validator/scan.py).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Literal

from validator.documents import AllreduceDoc
from validator.model import Finding
from validator.netcheck.allreduce import MIB
from validator.netcheck.ring import Node, scoped

Pair = tuple[str, str]  # node labels: rank 0 (it serves the store), rank 1
Measure = Callable[[list[Pair]], Awaitable[dict[Pair, "dict[str, Any] | str"]]]
Role = Literal["node", "link", "control"]
MAX_PAIRS = 16  # named pairs measured, at most (the rest keep their TCP evidence alone)


def timeout(net_timeout: float) -> float:
    """Each rank's bound on the group's setup and on each collective (allreduce.py's TIMEOUT)."""
    return max(10.0, net_timeout * 5)


def serve_argv(node: Node, limit: float) -> list[str]:
    return ["serve", scoped(str(node.addr), node.iface), node.iface or "", str(limit)]


def join_argv(a: Node, served: Any, b: Node, limit: float) -> list[str] | str:
    """Rank 1's arguments on ``b``, from rank 0's first answer on ``a``, or why rank 0 has none."""
    if isinstance(served, dict) and type(served.get("port")) is int and served.get("backend") in ("gloo", "nccl"):
        return [
            "join",
            scoped(str(a.addr), b.iface),
            str(served["port"]),
            str(served["backend"]),
            b.iface or "",
            str(limit),
        ]
    if isinstance(served, dict):
        return str(served.get("error") or "rank 0 gave no port")[:300]
    return str(served or "no answer")[:300]


def plan(bad_nodes: list[str], bad_links: list[Pair], good: list[str]) -> list[tuple[Pair, Role]]:
    """Each named link; each named node with a known-good partner (a different one each, in turn)."""
    out: list[tuple[Pair, Role]] = [(link, "link") for link in bad_links]
    out += [((n, good[i % len(good)]), "node") for i, n in enumerate(bad_nodes) if good]
    return out[:MAX_PAIRS]


def rounds(pairs: list[tuple[Pair, Role]], good: list[str]) -> list[list[tuple[Pair, Role]]]:
    """Disjoint pairs a round (a node in one pair at a time), first come first placed, and in each
    round a control pair of two known-good nodes not busy in it, where two are free."""
    out: list[list[tuple[Pair, Role]]] = []
    busy: list[set[str]] = []
    for pair, role in pairs:
        i = next((i for i, b in enumerate(busy) if not set(pair) & b), len(out))
        if i == len(out):
            out.append([])
            busy.append(set())
        out[i].append((pair, role))
        busy[i].update(pair)
    for rnd, b in zip(out, busy, strict=True):
        free = [n for n in good if n not in b]
        if len(free) >= 2:
            rnd.append(((free[0], free[1]), "control"))
    return out


def figure(answer: dict[str, Any] | str) -> tuple[dict[str, Any], str]:
    """(the well-formed figures, why there are none): the answer came from a node."""
    if isinstance(answer, str):
        return {}, answer[:300]
    got = answer.get("allreduce")
    if not isinstance(got, dict):
        return {}, str(answer.get("error") or "no figures")[:300]
    bw, backend, size = got.get("busbw_gbps"), got.get("backend"), got.get("bytes")
    if not (isinstance(bw, (int, float)) and not isinstance(bw, bool) and math.isfinite(bw) and bw >= 0):
        return {}, "no figures"
    size = size if type(size) is int and 0 < size <= MIB << 20 else 0
    return {"busbw_gbps": float(bw), "backend": backend if backend in ("gloo", "nccl") else "?", "bytes": size}, ""


async def measure(
    nodes: dict[str, Node], bad_nodes: list[str], bad_links: list[Pair], good: list[str], run: Measure
) -> list[AllreduceDoc]:
    """The rows: each pair measured, its role, its figure or why none."""
    rows: list[AllreduceDoc] = []
    for rnd in rounds(plan(bad_nodes, bad_links, good), good):
        answers = await run([pair for pair, _ in rnd])
        control = next((pair for pair, role in rnd if role == "control"), None)
        for (a, b), role in rnd:
            got, why = figure(answers.get((a, b), "no answer"))
            rows.append({
                "pair": [nodes[a].host, nodes[b].host], "role": role, "backend": got.get("backend", ""),
                "bytes": got.get("bytes", 0), "busbw_gbps": got.get("busbw_gbps"), "error": why,
                "control": [nodes[c].host for c in control] if control and role != "control" else [],
            })  # fmt: skip
    return rows


def evidence(rows: list[AllreduceDoc], hosts: list[str]) -> str:
    """ "; all_reduce (gloo, 2 ranks, 4 MiB) with gpu002: 0.011 GB/s bus bandwidth, a control pair
    (gpu005, gpu006) 0.94 GB/s" for the finding that names ``hosts`` (or why it was not measured),
    "" when no pair of it was tried."""
    out = []
    for row in rows:
        if row["role"] == "control" or not set(hosts) <= set(row["pair"]):
            continue
        other = [h for h in row["pair"] if h not in hosts]
        size = f", {row['bytes'] / (1 << 20):.3g} MiB" if row["bytes"] else ""
        head = f"all_reduce ({row['backend'] or 'torch'}, 2 ranks{size}){' with ' + other[0] if other else ''}"
        if row["busbw_gbps"] is None:
            out.append(f"{head}: not measured: {row['error']}")
            continue
        ctrl = next((r for r in rows if r["role"] == "control" and r["pair"] == row["control"]), None)
        beside = (f", a control pair ({', '.join(ctrl['pair'])}) {ctrl['busbw_gbps']:.3g} GB/s"
                  if ctrl and ctrl["busbw_gbps"] is not None else ", no control pair measured")  # fmt: skip
        out.append(f"{head}: {row['busbw_gbps']:.3g} GB/s bus bandwidth{beside}")
    return "; " + "; ".join(out) if out else ""


def annotate(findings: list[Finding], rows: list[AllreduceDoc]) -> list[Finding]:
    """NET104/NET105 with their pair's all_reduce figures appended."""
    return [replace(f, message=f.message + evidence(rows, f.hosts)) if f.code in ("NET104", "NET105") else f
            for f in findings]  # fmt: skip
