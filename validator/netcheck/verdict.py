"""From probe results to NET1xx findings.

Reachability (NET101-103): a destination no prober reaches. Speed (NET104-105): each measured
link is compared with the median link of the first round, never with a fixed figure (a 2-core
VM and a 400 Gb/s fabric both have a median). The figures are already robust values of repeated
samples (probe.py: latency a low percentile of 9 round trips, a rate the second-fastest of 4
parts). A link is *suspect* when

- its latency is FACTOR times the median *and* RTT_FLOOR_MS more (both: 0.05 against 0.01 ms is
  5x but only scheduling noise; 1 ms more is what a mis-routed or congested path costs),
- or a direction's rate is under the median / FACTOR *and* under RATE_FLOOR_MBPS (both: a link
  still moving 5 Gbit/s through one Python TCP stream is not what this check can tell from a
  busy node's noise, while a port negotiated down to 1 Gbit/s, a rate limit or a bad cable is),
- or it retransmits LOSS_RATIO of its segments out, or receives that share out of order back (a
  drop on the way in), *and* at least LOSS_FLOOR segments (and FACTOR times the median rate: a
  healthy link here retransmits 0-1 of ~2,900; one drop in a hundred frames already cuts a TCP
  stream's rate several times), or its transfer broke off.

The rings' round measures every link at once, so on a busy node links compete with each other
(and with whatever else runs there): that round only proposes. pairing.py then pairs each
suspect's nodes with known-good nodes and measures the suspect links again, in rounds of disjoint
pairs beside control pairs of two known-good nodes; each of those measurements is compared with
the rings' medians or the slowest control of its own round, whichever is more lenient
(``reference``). A node slow with CONFIRM known-good partners is named as the node (NET105); a
link slow again CONFIRM times while both its nodes are fine with theirs as the pair (NET104).
Below MIN_LINKS measured links there is no median to compare with.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from validator.checks import netcheck as codes
from validator.cliopts import NET_PAIRS_MAX, NetPairs
from validator.documents import NetCheckDoc, SpreadDoc, SweepDoc
from validator.model import Finding
from validator.netcheck.ring import Node, Plans, Results, rows
from validator.targets import fold_hosts

FACTOR = 3.0  # this many times worse than the median link
RTT_FLOOR_MS = 1.0  # ... and at least this much more latency
RATE_FLOOR_MBPS = 5000.0  # ... or a rate below this (and below median / FACTOR)
LOSS_RATIO = 0.01  # segments lost (retransmitted out, or out of order back) / segments
LOSS_FLOOR = 10  # ... and at least this many segments retransmitted
CONFIRM = 2  # known-good partners a node must be slow with, or measurements again a link must fail
CONTROLS = 3  # pairs of two known-good nodes measured beside each round's pairs (``reference``)
MIN_LINKS = 3
Link = tuple[str, str]  # (prober label, destination label)


def medians(measured: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for key in ("rtt_ms", "up_mbps", "down_mbps"):
        values = [float(r[key]) for r in measured if isinstance(r.get(key), (int, float))]
        out[key] = statistics.median(values) if values else 0.0
    out["loss"] = statistics.median([loss(r) for r in measured]) if measured else 0.0
    return out


def _ratio(row: dict[str, Any], key: str) -> tuple[float, int]:
    got = row.get(key)
    if isinstance(got, list) and len(got) == 2 and all(isinstance(x, int) for x in got) and got[1] > 0:
        return float(got[0]) / float(got[1]), int(got[0])
    return 0.0, 0


def loss(row: dict[str, Any]) -> float:
    """The larger of the segments the prober retransmitted (out) and those that reached it out
    of order (back: a drop before the prober shows as the segments after it arriving early)."""
    return max(_ratio(row, "retrans")[0], _ratio(row, "reorder")[0])


def mbps(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def why_slow(row: dict[str, Any], med: dict[str, float]) -> list[str]:
    """What makes this link suspect against the medians (empty: nothing)."""
    return [text for _, text in _slow(row, med)]


def symptoms(row: dict[str, Any], med: dict[str, float]) -> set[str]:
    """Which measures are slow: latency, out, back (the rates), loss (a broken transfer too)."""
    return {kind for kind, _ in _slow(row, med)}


def _slow(row: dict[str, Any], med: dict[str, float]) -> list[tuple[str, str]]:
    if row.get("lost"):
        return [("loss", f"the transfer broke off ({row.get('error')})")]
    out = []
    rtt = row.get("rtt_ms")
    if isinstance(rtt, (int, float)) and rtt >= FACTOR * med["rtt_ms"] and rtt - med["rtt_ms"] >= RTT_FLOOR_MS:
        out.append(("latency", f"latency {rtt:.2f} ms (median {med['rtt_ms']:.2f} ms)"))
    for key, way in (("up_mbps", "out"), ("down_mbps", "back")):
        rate = row.get(key)
        if not isinstance(rate, (int, float)) or not med[key]:
            continue
        if rate * FACTOR <= med[key] and rate < RATE_FLOOR_MBPS:
            out.append((way, f"{way} {mbps(rate)} Mbit/s (median {mbps(med[key])} Mbit/s)"))
    lost = loss(row)
    if lost >= LOSS_RATIO and lost >= FACTOR * med["loss"]:
        for key, what in (("retrans", "retransmitted out"), ("reorder", "out of order back")):
            ratio, count = _ratio(row, key)
            if ratio >= LOSS_RATIO and count >= LOSS_FLOOR:
                out.append(("loss", f"{ratio:.1%} of segments {what} (median {med['loss']:.1%})"))
    return out


def measured(results: Results) -> dict[Link, dict[str, Any]]:
    return {
        (src, str(r.get("label"))): r for src, r in rows(results) if r.get("ok") and ("rtt_ms" in r or r.get("lost"))
    }


def suspects(results: Results, med: dict[str, float] | None = None) -> dict[Link, list[str]]:
    """The links of ``results`` (the rings' round) slow against its medians (or ``med``: the
    rings' medians, for the sweep's pairs), with why."""
    links = measured(results)
    if med is None:
        if len(links) < MIN_LINKS:
            return {}
        med = medians(list(links.values()))
    return {link: why for link, r in links.items() if (why := why_slow(r, med))}


def reference(med: dict[str, float], controls: list[dict[str, Any]]) -> dict[str, float]:
    """What a later round's pairs are compared with: the rings' medians or the slowest of the
    control pairs measured beside them in that round, whichever is more lenient. The rings were
    measured under their own contention (and the high percentile of a contended transfer can be a
    burst); the controls under the pairs' own conditions, so a pair is slow only when it is FACTOR
    times worse than each of them."""
    if not controls:
        return med

    def worst(key: str, pick: Any) -> float:
        values = [float(r[key]) for r in controls if isinstance(r.get(key), (int, float))]
        return float(pick([med[key], *values])) if values else med[key]

    return {"rtt_ms": worst("rtt_ms", max), "up_mbps": worst("up_mbps", min), "down_mbps": worst("down_mbps", min),
            "loss": max([med["loss"], *map(loss, controls)])}  # fmt: skip


def node_finding(node: Node, pairs: list[tuple[str, list[str]]], ring: list[tuple[str, list[str]]]) -> Finding:
    """NET105: ``node`` is slow with each known-good partner (host, why), and these ring links were suspect."""
    with_good = " | ".join(f"with {host}: {'; '.join(why)}" for host, why in pairs)
    on_ring = " | ".join(f"{host}: {'; '.join(why)}" for host, why in ring)
    return codes.slow_node.finding(
        f"{node.host} ({node.where()}): slow with each of the {len(pairs)} known-good nodes it was paired with "
        f"(beside control pairs): {with_good}; its suspect ring links: {on_ring}",
        hosts=[node.host], expected=f"within {FACTOR:g}x of the median link with known-good peers",
        actual=f"slow with {len(pairs)} of {len(pairs)} known-good peers",
        verify="validator scan NODES --net-check   # or preflight --net-check: no NET105")  # fmt: skip


def link_finding(a: Node, b: Node, whys: list[list[str]], partners: list[str]) -> Finding:
    """NET104: the link a <-> b was slow every time (the rings' round first), while both nodes
    were fine with known-good ``partners``."""
    pair = f"{a.host} ({a.where()}) <-> {b.host} ({b.where()})"
    return codes.slow_link.finding(
        f"{pair}: {'; '.join(whys[0])}; slow again {len(whys) - 1} of {len(whys) - 1} times beside control pairs"
        f" ({'; '.join(whys[-1])}); both nodes are fine with known-good nodes ({', '.join(partners)})",
        hosts=[a.host, b.host], expected=f"within {FACTOR:g}x of the median link", actual="; ".join(whys[0]),
        verify="validator scan A,B,C --net-check   # no NET104 for the pair")  # fmt: skip


def reach_findings(nodes: dict[str, Node], plans: Plans, results: Results) -> list[Finding]:
    """NET101 for each destination some prober cannot reach, NET102 for an address that cannot
    be bound, NET103 where a listener or prober did not run."""
    out: list[Finding] = []
    not_run: dict[str, list[str]] = {}
    for n in nodes.values():
        if n.error and n.bind:
            out.append(codes.cannot_listen.finding(
                f"cannot listen on {n.where()}: {n.error}", hosts=[n.host], expected="a bindable address",
                actual=n.error, fix="make sure the chosen interface has this address, or pin NCCL_SOCKET_IFNAME",
                verify=codes.VERIFY))  # fmt: skip
        elif n.error:
            not_run.setdefault(f"listener: {n.error}", []).append(n.host)
    failed: dict[str, list[tuple[str, str]]] = {}
    probed_from: dict[str, set[str]] = {}
    for src, got in results.items():
        if isinstance(got, str):
            not_run.setdefault(f"prober: {got}", []).append(nodes[src].host)
    for src, r in rows(results):
        dest = str(r.get("label"))
        probed_from.setdefault(dest, set()).add(src)
        if not r.get("ok") and dest in nodes:
            failed.setdefault(dest, []).append((src, str(r.get("error"))))
    for dest, fails in failed.items():
        sources = [nodes[s].host for s, _ in fails]
        everyone = len(fails) >= 2 and {s for s, _ in fails} >= probed_from[dest]
        d = nodes[dest]
        pairs = ", ".join(f"{s} -> {d.host}" for s in sources)
        out.append(codes.unreachable_pair.finding(
            f"{d.host} ({d.where()}) cannot be reached: {pairs}: {fails[0][1]}"
            + ("" if everyone else " (if other nodes get through, look at the named source's routes and firewall)"),
            hosts=list(dict.fromkeys([d.host] if everyone else [*sources, d.host])), expected="connects from every peer",
            actual=f"unreachable from {fold_hosts(sources)}", verify=codes.VERIFY,
            fix="open the ports between the nodes, fix the route, or pin NCCL_SOCKET_IFNAME to the cluster interface"))  # fmt: skip
    for why, hosts in not_run.items():
        out.append(codes.not_checked.finding(
            why, hosts=sorted(set(hosts)), expected="listener and prober ran", actual=why.split(":", 1)[0] + " failed",
            fix="rerun with --net-check; check the node's load and sshd MaxSessions", verify=codes.VERIFY))  # fmt: skip
    return out


def spread(values: list[float]) -> SpreadDoc | None:
    """Median, 10th and 90th percentile (nearest rank), lowest and highest; None when empty."""
    if not values:
        return None
    v = sorted(values)

    def at(q: float) -> float:
        return round(v[min(len(v) - 1, int(q * len(v)))], 3)

    return {"median": round(statistics.median(v), 3), "p10": at(0.1), "p90": at(0.9), "min": v[0], "max": v[-1]}


def summary_doc(
    first: Results,
    nodes: int,
    suspected: int,
    confirmed: int,
    findings: list[Finding],
    rounds: int = 1,
    pairs: NetPairs = "rings",
    sweep: SweepDoc | None = None,
) -> NetCheckDoc:
    """What the scan's JSON carries: counts, the first round's figures (median and spread; with
    the sweep's pairs: ``first`` holds them too), how many suspects there were and were confirmed,
    the rounds run, and what the sweep of every pair cost."""
    made, links = rows(first), measured(first)
    values = list(links.values())
    figures = {k: [float(r[k]) for r in values if isinstance(r.get(k), (int, float))] for k in ("rtt_ms", "up_mbps", "down_mbps")}  # fmt: skip
    doc: NetCheckDoc = {
        "nodes": nodes,
        "probes": len(made),
        "failed": sum(1 for _, r in made if not r.get("ok")),
        "measured": len(links),
        "rtt_ms": spread(figures["rtt_ms"]),
        "up_mbps": spread(figures["up_mbps"]),
        "down_mbps": spread(figures["down_mbps"]),
        "suspects": suspected,
        "confirmed": confirmed,
        "rounds": rounds,
        "pairs": pairs,
        "sweep": sweep,
        "allreduce": [],
        "line": "",
    }
    doc["line"] = line(doc, findings)
    return doc


def line(doc: NetCheckDoc, findings: list[Finding]) -> str:
    """One line for the table, the HTML and preflight's verdict: "net check: 16 links, all within
    3x of the median link (3 more reached); median 0.05 ms, 9000/9100 Mbit/s" when it passed."""
    if not doc["probes"]:
        return "net check: no links to test"
    named = sorted({f.code for f in findings})
    if doc["failed"]:
        text = f"net check: {doc['failed']} of {doc['probes']} links failed"
    elif named:
        text = f"net check: {doc['measured']} links, {len(findings)} named ({', '.join(named)})"
    elif doc["measured"] < MIN_LINKS:
        text = f"net check: {doc['probes']} links ok ({doc['measured']} measured: too few to compare)"
    else:
        text = f"net check: {doc['measured']} links, all within {FACTOR:g}x of the median link"
        text += f" ({doc['probes'] - doc['measured']} more reached)" if doc["probes"] > doc["measured"] else ""
    rtt, up, down = doc["rtt_ms"], doc["up_mbps"], doc["down_mbps"]
    if rtt and up and down:
        text += f"; median {rtt['median']:.2f} ms, {mbps(up['median'])}/{mbps(down['median'])} Mbit/s" + (
            f"; {doc['suspects']} suspect, {doc['confirmed']} confirmed in {doc['rounds'] - 1} more rounds"
            if doc["suspects"]
            else ""
        )
    if doc["sweep"]:
        cost = doc["sweep"]
        rounds = f"{cost['rounds']} round{'' if cost['rounds'] == 1 else 's'}"
        text += f"; every pair: {cost['pairs']} off the rings in {rounds}, {cost['seconds']:g} s"
    elif doc["pairs"] == "all":
        text += f"; every pair: not measured ({doc['nodes']} nodes, above the cap of {NET_PAIRS_MAX})"
    return text


def by_label(nodes: Iterable[Node]) -> dict[str, Node]:
    return {n.label: n for n in nodes}
