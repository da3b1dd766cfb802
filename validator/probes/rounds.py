"""Rounds of the node probes: each probe on every node at once (it only proposes), then the
suspects measured again, CONFIRM times (stopping at the first pass), each alone on its node
(nothing else of the check running: one probe kind at a time, no net check), in one round with
CONTROLS nodes that were not suspect; named only when slow every time (judge.py). Nodes share no
hardware, so the suspects and the controls of a confirmation run at once: one round each.

With a baseline (a launch profile's ``baselines``, `validator baseline record`), each node is also
held to the figures recorded for its hardware type (the GPU model, else the CPU model): a node under
the baseline is a suspect however few its peers, confirmed alone the same way; the finding says
which named it, the baseline or the peers. A baseline that most nodes of its hardware miss (more
than half, two or more) names none of them: it is stale, or every node changed (a driver, firmware,
clocks, a power cap, a shared host), and taking most of the set out would leave no job to run; one
PRB004 says so, with the nodes under it, and they are not measured again.

The caller gives ``Round``: run one probe on these nodes and return each node's answer (the
probe's JSON object) or why there is none. The scan runs it through its transport; the tests
and benchmarks/isolate.py on emulated hosts.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from validator.documents import ProbeBaselineDoc, ProbeNodeDoc, ProbesDoc, ProbeStatDoc
from validator.model import Finding
from validator.probes import codes, judge
from validator.profiles import BaselineFigure, Baselines
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
MAX_NAME = 100  # characters of a hardware name read from an answer
Against = Literal["baseline", "peers"]


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


def hardware_of(answer: dict[str, Any] | str) -> str:
    """A node's hardware type from its probe's answer: the first GPU's name, else the CPU model."""
    if isinstance(answer, str):
        return ""
    rows = answer.get("devices")
    names = [r.get("name") for r in rows[:MAX_ROWS] if isinstance(r, dict)] if isinstance(rows, list) else []
    name = next((n for n in names if isinstance(n, str) and n), answer.get("cpu"))
    return name.strip()[:MAX_NAME] if isinstance(name, str) else ""


@dataclass
class Judged:
    """One probe kind: the first round's figures, the statistics, what each round found."""

    kind: Kind
    baselines: dict[str, dict[str, BaselineFigure]] = field(default_factory=dict)  # hardware -> key -> figure
    hardware: dict[str, str] = field(default_factory=dict)  # node -> its hardware type
    first: dict[str, dict[str, float]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    # (key, hardware) -> over the nodes of that hardware: median, MAD, suspects; those under the baseline,
    # or most of them (PRB004: named by none)
    stats: dict[tuple[str, str], tuple[float, float, set[str]]] = field(default_factory=dict)
    below: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    most: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    alone: list[dict[str, dict[str, float]]] = field(default_factory=list)  # per confirmation
    controls: list[str] = field(default_factory=list)  # beside the last confirmation
    named: dict[str, list[tuple[str, Against]]] = field(default_factory=dict)  # node -> (key, what named it)
    rounds: int = 0

    def suspects(self) -> set[str]:
        return {h for _, _, s in self.stats.values() for h in s} | {h for s in self.below.values() for h in s}

    def base(self, node: str, key: str) -> BaselineFigure | None:
        return self.baselines.get(self.hardware.get(node, ""), {}).get(key)


async def judge_kind(
    kind: Kind, nodes: list[str], probe_round: Round, baselines: Baselines | None = None,
    hardware: dict[str, str] | None = None,
) -> Judged:  # fmt: skip
    j = Judged(kind, {hw: kinds[kind] for hw, kinds in (baselines or {}).items() if kind in kinds})
    j.rounds += 1
    for node, answer in (await probe_round(kind, nodes)).items():
        j.hardware[node] = (hardware or {}).get(node) or hardware_of(answer)
        got = figures(kind, answer)
        if isinstance(got, str):
            j.failed[node] = got
        else:
            j.first[node] = got
    for key, hw in sorted({(k, j.hardware[h]) for h, f in j.first.items() for k in f}):
        peers = {h: j.first[h][key] for h in nodes if key in j.first.get(h, {}) and j.hardware[h] == hw}
        j.stats[(key, hw)] = judge.suspects(peers, key)
        b = j.baselines.get(hw, {}).get(key)
        under = [h for h, v in peers.items() if b and judge.below(v, b.median, b.mad, key)]
        if len(under) >= 2 and 2 * len(under) > len(peers):  # the baseline, not the nodes
            j.most[(key, hw)] = under
        else:
            j.below[(key, hw)] = set(under)
    redo = j.suspects()
    for _ in range(CONFIRM if redo else 0):
        j.controls = controls(j, redo)
        again: dict[str, dict[str, float]] = {}
        j.rounds += 1
        for node, answer in (await probe_round(kind, [*sorted(redo, key=nodes.index), *j.controls])).items():
            if not isinstance(got := figures(kind, answer), str):
                again[node] = got
        j.alone.append(again)
        redo = {h for h in redo if slow_keys(j, h, again)}
        if not redo:
            break
    if len(j.alone) == CONFIRM:
        for node in redo:
            j.named[node] = slow_keys(j, node, j.alone[-1])
    return j


def slow_keys(j: Judged, node: str, again: dict[str, dict[str, float]]) -> list[tuple[str, Against]]:
    """The figures of ``node`` that were suspect and are slow in ``again`` too (against the controls
    measured beside it): against the peers' median, against its hardware's baseline, or both."""
    out: list[tuple[str, Against]] = []
    hw = j.hardware.get(node, "")
    for (key, group), (med, _, sus) in j.stats.items():
        value = again.get(node, {}).get(key)
        if group != hw or value is None:
            continue
        refs = [again[c][key] for c in j.controls if j.hardware.get(c) == hw and key in again.get(c, {})]
        if node in sus and judge.confirmed(value, med, refs, key):
            out.append((key, "peers"))
        b = j.base(node, key)
        if b and node in j.below.get((key, hw), ()) and judge.confirmed(value, b.median, refs, key):
            out.append((key, "baseline"))
    return out


def controls(j: Judged, suspects: set[str]) -> list[str]:
    """CONTROLS nodes per hardware type of the suspects, of that type, neither suspect nor under their
    baseline, nearest its median of the first figure (the same each time)."""
    out = j.suspects() | suspects | {h for under in j.most.values() for h in under}
    chosen: list[str] = []
    for hw in sorted({j.hardware.get(h, "") for h in suspects}):
        key = next((k for k, group in j.stats if group == hw), None)
        if key is None:
            continue
        med = j.stats[(key, hw)][0]
        spare = [h for h, f in j.first.items() if h not in out and j.hardware.get(h) == hw and key in f]
        chosen += sorted(spare, key=lambda h: (abs(j.first[h][key] - med), h))[:CONTROLS]
    return chosen


def evidence(j: Judged, node: str, key: str, against: Against) -> str:
    unit = UNIT[j.kind]
    value = j.first[node][key]
    alone = ", ".join(f"{a[node][key]:.4g}" for a in j.alone if key in a.get(node, {}))
    b = j.base(node, key)
    if against == "baseline" and b:
        return (f"{key}: {value:.4g} vs {b.median:.4g} {unit} (the baseline: MAD {b.mad:.2g}, n={b.n}, "
                f"{b.date or 'undated'}); alone {alone}")  # fmt: skip
    hw = j.hardware.get(node, "")
    med, mad, _ = j.stats[(key, hw)]
    peers = sum(1 for h, f in j.first.items() if key in f and j.hardware.get(h) == hw)
    return (
        f"{key}: {value:.4g} {unit} against the peers' median {med:.4g} (MAD {mad:.2g}, {peers} nodes); alone {alone}"
    )


def most_below(j: Judged, key: str, hw: str, under: list[str]) -> Finding:
    """PRB004: most nodes of ``hw`` under its baseline for ``key`` in the first round."""
    b = j.baselines[hw][key]
    held = sum(1 for h, f in j.first.items() if key in f and j.hardware.get(h) == hw)
    med = judge.spread([j.first[h][key] for h in under])[0]
    unit = UNIT[j.kind]
    return codes.set_below.finding(
        f"{len(under)} of {held} nodes of {hw} below the baseline in {j.kind}, in the first round: {key}: median "
        f"{med:.4g} vs {b.median:.4g} {unit} (the baseline: MAD {b.mad:.2g}, n={b.n}, {b.date or 'undated'}); "
        "none is named or taken out: the baseline is stale or every node changed", hosts=under,
        expected=f"most nodes within {judge.FACTOR:g}x of the baseline for {hw}",
        actual=f"{key}: median {med:.4g} {unit} over {len(under)} nodes", verify=codes.VERIFY_BASELINE)  # fmt: skip


def verdict(j: Judged, node: str) -> tuple[str, str]:
    """(what named the node, what was expected): "below the baseline for H100 and slower than its peers"."""
    against = {a for _, a in j.named[node]}
    which, expected = [], []
    if "baseline" in against:
        which.append(f"below the baseline for {j.hardware[node]}")
        expected.append(f"within {judge.FACTOR:g}x of the baseline for {j.hardware[node]}")
    if "peers" in against:
        which.append("slower than its peers")
        expected.append(f"within {judge.FACTOR:g}x of the peers' median")
    return " and ".join(which), " and ".join(expected)


@dataclass
class Probed:
    """What the node probes found: the per-node table and statistics (the report's ``probes``) and the
    findings (PRB001-003); not a ``model.Outcome``, which is a target's state."""

    doc: ProbesDoc
    findings: list[Finding]


def gpu_model(facts: Any) -> str | None:
    """A node's hardware type for its baseline, from its facts: the first GPU's model (without a GPU,
    the probe's own CPU model is used)."""
    devices = (facts.get("gpus") or {}).get("devices") or [] if isinstance(facts, dict) else []
    return str(devices[0]["name"]) if devices and devices[0].get("name") else None


async def run(
    nodes: list[str], probe_round: Round, kinds: tuple[Kind, ...] = KINDS, baselines: Baselines | None = None,
    hardware: dict[str, str] | None = None,
) -> Probed:  # fmt: skip
    """Each probe kind in turn (never two at once), judged against the peers and, where ``baselines``
    has the node's hardware (``hardware``: node -> type, else read from the probe's answer), against
    its baseline, and confirmed; the findings and the per-node table."""
    known = dict(hardware or {})
    judged: list[Judged] = []
    for kind in kinds:
        judged.append(j := await judge_kind(kind, nodes, probe_round, baselines, known))
        known.update({h: hw for h, hw in j.hardware.items() if hw and h not in known})  # the same type in every kind
    findings: list[Finding] = []
    failed: dict[str, list[str]] = {}
    for j in judged:
        for node in sorted(j.named, key=nodes.index):
            which, expected = verdict(j, node)
            beside = f" beside {len(j.controls)} control nodes" if j.controls else ""
            findings.append(CODE[j.kind].finding(
                f"{node}: {which} in {j.kind}, {1 + len(j.alone)} rounds (all nodes, then again "
                f"{len(j.alone)} times{beside}): " + " | ".join(evidence(j, node, k, a) for k, a in j.named[node]),
                hosts=[node], expected=expected,
                actual="; ".join(f"{k}: {j.first[node][k]:.4g} {UNIT[j.kind]}" for k in dict.fromkeys(k for k, _ in j.named[node])),
                verify=codes.VERIFY))  # fmt: skip
        findings += [most_below(j, key, hw, under) for (key, hw), under in j.most.items()]
        for node, why in j.failed.items():
            failed.setdefault(f"{j.kind} probe: {why}", []).append(node)
    for why, hosts in failed.items():
        findings.append(codes.not_run.finding(why, hosts=hosts, expected="the probe ran", actual=why.split(":", 1)[0]
                                              + " failed", verify=codes.VERIFY))  # fmt: skip
    return Probed(document(nodes, judged, baselines or {}), findings)


def document(nodes: list[str], judged: list[Judged], baselines: Baselines) -> ProbesDoc:
    rows: list[ProbeNodeDoc] = []
    for node in nodes:
        rows.append({
            "host": node,
            "hardware": next((j.hardware[node] for j in judged if j.hardware.get(node)), ""),
            "compute": next((j.first.get(node, {}) for j in judged if j.kind == "compute"), {}),
            "memory": next((j.first.get(node, {}) for j in judged if j.kind == "memory"), {}),
            "named": [j.kind for j in judged if node in j.named],
            "against": {j.kind: sorted({a for _, a in j.named[node]}) for j in judged if node in j.named},
        })  # fmt: skip
    stats: list[ProbeStatDoc] = [
        {"kind": j.kind, "key": key, "hardware": hw, "unit": UNIT[j.kind],
         "nodes": sum(1 for h, f in j.first.items() if key in f and j.hardware.get(h) == hw),
         "median": round(med, 4), "mad": round(mad, 4), "suspects": sorted(sus, key=nodes.index),
         "named": sorted((h for h in j.named if h in sus), key=nodes.index)}
        for j in judged for (key, hw), (med, mad, sus) in j.stats.items()
    ]  # fmt: skip
    doc: ProbesDoc = {"nodes": rows, "stats": stats, "baseline": baseline_rows(nodes, judged),
                      "no_baseline": sorted({j.hardware.get(h, "") for j in judged for h in j.first} - set(baselines))
                      if baselines else [],
                      "rounds": sum(j.rounds for j in judged),
                      "failed": sorted({h for j in judged for h in j.failed}, key=nodes.index), "line": ""}  # fmt: skip
    doc["line"] = line(doc)
    return doc


def baseline_rows(nodes: list[str], judged: list[Judged]) -> list[ProbeBaselineDoc]:
    """Each baseline figure some node was held to: the figure, the nodes under it, the nodes it named."""
    rows: list[ProbeBaselineDoc] = []
    for j in judged:
        for hw, figs in sorted(j.baselines.items()):
            for key, b in sorted(figs.items()):
                held = [h for h in nodes if j.hardware.get(h) == hw and key in j.first.get(h, {})]
                if held:
                    rows.append({"hardware": hw, "kind": j.kind, "key": key, "unit": UNIT[j.kind], "median": b.median,
                                 "mad": b.mad, "n": b.n, "date": b.date, "nodes": len(held),
                                 "below": [h for h in held if h in j.below.get((key, hw), ()) or h in j.most.get((key, hw), ())],
                                 "named": [h for h in held if (key, "baseline") in j.named.get(h, [])],
                                 "most_below": (key, hw) in j.most})  # fmt: skip
    return rows


def line(doc: ProbesDoc) -> str:
    """ "probes: 8 nodes, compute cpu python median 0.021 GFLOP/s, ...; none slower than 1.5x the median"."""
    named = [r["host"] for r in doc["nodes"] if r["named"]]
    types = len({s["hardware"] for s in doc["stats"]}) > 1  # peers are nodes of one hardware type
    figs = ", ".join(f"{s['hardware'] + ': ' if types else ''}{s['kind']} {s['key']} median {s['median']:.4g} {s['unit']}"
                     for s in doc["stats"])  # fmt: skip
    text = f"probes: {len(doc['nodes'])} nodes, {doc['rounds']} rounds" + (f"; {figs}" if figs else "")
    held = sorted({b["hardware"] for b in doc["baseline"]})
    if held:
        text += f"; against the baseline for {', '.join(held)}"
    if doc["no_baseline"]:
        text += f"; no baseline for {', '.join(h or 'unknown hardware' for h in doc['no_baseline'])}"
    if doc["failed"]:
        text += f"; not run on {fold_hosts(doc['failed'])}"
    if named:
        return text + f"; slow: {fold_hosts(named)}"
    few = len(doc["nodes"]) - len(doc["failed"]) < judge.MIN_NODES
    if held:
        peers = (
            f" (too few nodes to compare with each other: fewer than {judge.MIN_NODES})" if few else " or the median"
        )
        return text + f"; none slower than {judge.FACTOR:g}x the baseline" + peers
    if few:
        return text + f"; too few nodes to compare (fewer than {judge.MIN_NODES})"
    return text + f"; none slower than {judge.FACTOR:g}x the median"
