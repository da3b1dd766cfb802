"""Rounds of the node probes: each probe on every node at once (it only proposes), then the
suspects measured again, CONFIRM times (stopping at the first pass), each alone on its node
(nothing else of the check running: one probe kind at a time, no net check), in one round with
CONTROLS nodes that were not suspect; named only when slow every time (judge.py). Nodes share no
hardware, so the suspects and the controls of a confirmation run at once: one round each.

The caller gives ``Round``: run one probe on these nodes and return each node's answer (the
probe's JSON object) or why there is none. The scan runs it through its transport; the tests
and benchmarks/isolate.py on emulated hosts.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from validator.documents import ProbeNodeDoc, ProbesDoc, ProbeStatDoc
from validator.model import Finding
from validator.probes import codes, judge
from validator.targets import fold_hosts

Kind = Literal["compute", "memory"]
KINDS: tuple[Kind, ...] = ("compute", "memory")
UNIT = {"compute": "GFLOP/s", "memory": "GB/s"}
FIGURE = {"compute": "gflops", "memory": "gbps"}
CODE = {"compute": codes.slow_compute, "memory": codes.slow_memory}
Answers = dict[str, "dict[str, Any] | str"]  # node -> the probe's answer, or why there is none
Round = Callable[[Kind, list[str]], Awaitable[Answers]]
CONFIRM = 2  # measurements alone a suspect must fail too
CONTROLS = 2  # nodes that were not suspect, measured alone beside the suspects
MAX_ROWS = 64  # devices per node read from an answer


def figures(kind: Kind, answer: dict[str, Any] | str) -> dict[str, float] | str:
    """ "DEVICE ENGINE" -> figure from one node's answer, or why there is none. The answer came
    from the node: only finite, non-negative numbers of well-formed rows are read."""
    if isinstance(answer, str):
        return answer
    if answer.get("error"):
        return str(answer["error"])[:300]
    rows = answer.get("devices")
    out: dict[str, float] = {}
    for row in rows[:MAX_ROWS] if isinstance(rows, list) else []:
        value = row.get(FIGURE[kind]) if isinstance(row, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
            out[f"{str(row.get('device'))[:40]} {str(row.get('engine'))[:40]}"] = float(value)
    return out or f"the {kind} probe gave no figures"


@dataclass
class Judged:
    """One probe kind: the first round's figures, the statistics, what each round found."""

    kind: Kind
    first: dict[str, dict[str, float]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    stats: dict[str, tuple[float, float, set[str]]] = field(default_factory=dict)  # key -> median, MAD, suspects
    alone: list[dict[str, dict[str, float]]] = field(default_factory=list)  # per confirmation
    named: dict[str, list[str]] = field(default_factory=dict)  # node -> its evidence, per key
    rounds: int = 0

    def suspects(self) -> set[str]:
        return {h for _, _, s in self.stats.values() for h in s}


async def judge_kind(kind: Kind, nodes: list[str], probe_round: Round) -> Judged:
    j = Judged(kind)
    j.rounds += 1
    for node, answer in (await probe_round(kind, nodes)).items():
        got = figures(kind, answer)
        if isinstance(got, str):
            j.failed[node] = got
        else:
            j.first[node] = got
    keys = sorted({k for f in j.first.values() for k in f})
    for key in keys:
        j.stats[key] = judge.suspects({h: f[key] for h, f in j.first.items() if key in f}, key)
    redo = j.suspects()
    for _ in range(CONFIRM if redo else 0):
        ctl = controls(j, redo)
        again: dict[str, dict[str, float]] = {}
        j.rounds += 1
        for node, answer in (await probe_round(kind, [*sorted(redo, key=nodes.index), *ctl])).items():
            if not isinstance(got := figures(kind, answer), str):
                again[node] = got
        j.alone.append(again)
        redo = {h for h in redo if slow_keys(j, h, again, ctl)}
        if not redo:
            break
    if len(j.alone) == CONFIRM:
        for node in redo:
            j.named[node] = [evidence(j, node, key) for key in slow_keys(j, node, j.alone[-1], controls(j, redo))]
    return j


def slow_keys(j: Judged, node: str, again: dict[str, dict[str, float]], ctl: list[str]) -> list[str]:
    """The figures of ``node`` that were suspect and are slow in ``again`` too (against the controls)."""
    out = []
    for key, (med, _, sus) in j.stats.items():
        value = again.get(node, {}).get(key)
        if node in sus and value is not None:
            refs = [again[c][key] for c in ctl if key in again.get(c, {})]
            if judge.confirmed(value, med, refs, key):
                out.append(key)
    return out


def controls(j: Judged, suspects: set[str]) -> list[str]:
    """CONTROLS nodes that were not suspect, nearest the median of the first figure (the same each time)."""
    key = next(iter(j.stats), None)
    if key is None:
        return []
    med = j.stats[key][0]
    spare = [h for h, f in j.first.items() if h not in j.suspects() and h not in suspects and key in f]
    return sorted(spare, key=lambda h: (abs(j.first[h][key] - med), h))[:CONTROLS]


def evidence(j: Judged, node: str, key: str) -> str:
    med, mad, _ = j.stats[key]
    unit = UNIT[j.kind]
    alone = ", ".join(f"{a[node][key]:.4g}" for a in j.alone if key in a.get(node, {}))
    return (f"{key}: {j.first[node][key]:.4g} {unit} against the peers' median {med:.4g} (MAD {mad:.2g}, "
            f"{sum(1 for f in j.first.values() if key in f)} nodes); alone {alone}")  # fmt: skip


@dataclass
class Outcome:
    doc: ProbesDoc
    findings: list[Finding]


async def run(nodes: list[str], probe_round: Round, kinds: tuple[Kind, ...] = KINDS) -> Outcome:
    """Each probe kind in turn (never two at once), judged and confirmed; the findings and the
    per-node table."""
    judged = [await judge_kind(kind, nodes, probe_round) for kind in kinds]
    findings: list[Finding] = []
    failed: dict[str, list[str]] = {}
    for j in judged:
        for node in sorted(j.named, key=nodes.index):
            findings.append(CODE[j.kind].finding(
                f"{node}: slower than its peers in {j.kind}, {1 + len(j.alone)} rounds (all nodes, then again "
                f"{len(j.alone)} times beside {CONTROLS} control nodes): " + " | ".join(j.named[node]),
                hosts=[node], expected=f"within {judge.FACTOR:g}x of the peers' median",
                actual="; ".join(e.split(" against", 1)[0] for e in j.named[node]), verify=codes.VERIFY))  # fmt: skip
        for node, why in j.failed.items():
            failed.setdefault(f"{j.kind} probe: {why}", []).append(node)
    for why, hosts in failed.items():
        findings.append(codes.not_run.finding(why, hosts=hosts, expected="the probe ran", actual=why.split(":", 1)[0]
                                              + " failed", verify=codes.VERIFY))  # fmt: skip
    return Outcome(document(nodes, judged), findings)


def document(nodes: list[str], judged: list[Judged]) -> ProbesDoc:
    rows: list[ProbeNodeDoc] = []
    for node in nodes:
        rows.append({
            "host": node,
            "compute": next((j.first.get(node, {}) for j in judged if j.kind == "compute"), {}),
            "memory": next((j.first.get(node, {}) for j in judged if j.kind == "memory"), {}),
            "named": [j.kind for j in judged if node in j.named],
        })  # fmt: skip
    stats: list[ProbeStatDoc] = [
        {"kind": j.kind, "key": key, "unit": UNIT[j.kind], "nodes": sum(1 for f in j.first.values() if key in f),
         "median": round(med, 4), "mad": round(mad, 4), "suspects": sorted(sus, key=nodes.index),
         "named": sorted((h for h in j.named if h in sus), key=nodes.index)}
        for j in judged for key, (med, mad, sus) in j.stats.items()
    ]  # fmt: skip
    doc: ProbesDoc = {"nodes": rows, "stats": stats, "rounds": sum(j.rounds for j in judged),
                      "failed": sorted({h for j in judged for h in j.failed}, key=nodes.index), "line": ""}  # fmt: skip
    doc["line"] = line(doc)
    return doc


def line(doc: ProbesDoc) -> str:
    """ "probes: 8 nodes, compute cpu python median 0.021 GFLOP/s, ...; none slower than 1.5x the median"."""
    named = [r["host"] for r in doc["nodes"] if r["named"]]
    figs = ", ".join(f"{s['kind']} {s['key']} median {s['median']:.4g} {s['unit']}" for s in doc["stats"])
    text = f"probes: {len(doc['nodes'])} nodes, {doc['rounds']} rounds" + (f"; {figs}" if figs else "")
    if doc["failed"]:
        text += f"; not run on {fold_hosts(doc['failed'])}"
    if named:
        return text + f"; slow: {fold_hosts(named)}"
    if len(doc["nodes"]) - len(doc["failed"]) < judge.MIN_NODES:
        return text + f"; too few nodes to compare (fewer than {judge.MIN_NODES})"
    return text + f"; none slower than {judge.FACTOR:g}x the median"
