"""From probe results to NET1xx findings.

Reachability (NET101-103): a destination no prober reaches. Speed (NET104-105): each measured
link is compared with the median link, never with a fixed figure (a 2-core VM and a 400 Gb/s
fabric both have a median); a link is *suspect* when its latency or either direction's
throughput is FACTOR times worse than the median and the difference is above the timing noise
floor, or when it retransmits LOSS_RATIO of its segments (FACTOR times the median rate), or when
its transfer broke off. Suspects are measured again, while the other links are quiet; only a
link suspect both times is *slow*. A node all of whose measured links are slow (at least two,
with two peers, or three of four) is named as the node (NET105); the other slow links are named
as pairs (NET104). Below MIN_LINKS measured links there is no median to compare with.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from validator.checks import netcheck as codes
from validator.model import Finding
from validator.netcheck.probe import BULK_BYTES
from validator.netcheck.ring import Node, Plans, Results, rows
from validator.targets import fold_hosts

FACTOR = 3.0  # this many times worse than the median link
RTT_FLOOR_MS = 1.0  # ... and at least this much more latency
BULK_FLOOR_MS = 5.0  # ... or this much longer to move BULK_BYTES (the timing noise of a busy node)
LOSS_RATIO = 0.02  # retransmitted segments / segments sent
MIN_LINKS = 3
Link = tuple[str, str]  # (prober label, destination label)


def medians(measured: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for key in ("rtt_ms", "up_mbps", "down_mbps"):
        values = [float(r[key]) for r in measured if isinstance(r.get(key), (int, float))]
        out[key] = statistics.median(values) if values else 0.0
    out["loss"] = statistics.median([loss(r) for r in measured]) if measured else 0.0
    return out


def loss(row: dict[str, Any]) -> float:
    got = row.get("retrans")
    if isinstance(got, list) and len(got) == 2 and all(isinstance(x, int) for x in got) and got[1] > 0:
        return float(got[0]) / float(got[1])
    return 0.0


def mbps(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def _bulk_ms(rate: float) -> float:
    return BULK_BYTES * 8 / max(rate, 1e-3) / 1e3


def why_slow(row: dict[str, Any], med: dict[str, float]) -> list[str]:
    """What makes this link suspect against the medians (empty: nothing)."""
    if row.get("lost"):
        return [f"the transfer broke off ({row.get('error')})"]
    out = []
    rtt = row.get("rtt_ms")
    if isinstance(rtt, (int, float)) and rtt >= FACTOR * med["rtt_ms"] and rtt - med["rtt_ms"] >= RTT_FLOOR_MS:
        out.append(f"latency {rtt:.2f} ms (median {med['rtt_ms']:.2f} ms)")
    for key, way in (("up_mbps", "out"), ("down_mbps", "back")):
        rate = row.get(key)
        if not isinstance(rate, (int, float)) or not med[key]:
            continue
        if rate * FACTOR <= med[key] and _bulk_ms(rate) - _bulk_ms(med[key]) >= BULK_FLOOR_MS:
            out.append(f"{way} {mbps(rate)} Mbit/s (median {mbps(med[key])} Mbit/s)")
    lost = loss(row)
    if lost >= LOSS_RATIO and lost >= FACTOR * med["loss"]:
        out.append(f"{lost:.1%} of segments retransmitted (median {med['loss']:.1%})")
    return out


def measured(results: Results) -> dict[Link, dict[str, Any]]:
    return {
        (src, str(r.get("label"))): r for src, r in rows(results) if r.get("ok") and ("rtt_ms" in r or r.get("lost"))
    }


def suspects(results: Results) -> set[Link]:
    links = measured(results)
    if len(links) < MIN_LINKS:
        return set()
    med = medians(list(links.values()))
    return {link for link, r in links.items() if why_slow(r, med)}


def slow_findings(nodes: dict[str, Node], first: Results, again: Results) -> list[Finding]:
    links = measured(first)
    if len(links) < MIN_LINKS:
        return []
    med = medians(list(links.values()))
    redo = measured(again)
    slow = {link: why for link in redo if (why := why_slow(redo[link], med)) and why_slow(links[link], med)}
    peers: dict[str, set[str]] = {}
    bad: dict[str, set[str]] = {}
    for a, b in links:
        peers.setdefault(a, set()).add(b)
        peers.setdefault(b, set()).add(a)
    for a, b in slow:
        bad.setdefault(a, set()).add(b)
        bad.setdefault(b, set()).add(a)
    named = {n for n, p in bad.items() if len(p) >= 2 and 4 * len(p) >= 3 * len(peers[n])}
    out = []
    for n in sorted(named, key=list(nodes).index):
        whys = [f"{nodes[p].host}: {'; '.join(slow.get((n, p)) or slow[(p, n)])}" for p in sorted(bad[n])]
        out.append(codes.slow_node.finding(
            f"{nodes[n].host} ({nodes[n].where()}): all {len(bad[n])} of its measured links are slow, measured twice: "
            + " | ".join(whys),
            hosts=[nodes[n].host], expected=f"within {FACTOR:g}x of the median link", actual=f"{len(bad[n])} slow links",
            verify="validator scan NODES --net-check   # or preflight --net-check: no NET105"))  # fmt: skip
    for (a, b), why in slow.items():
        if a in named or b in named:
            continue
        pair = f"{nodes[a].host} ({nodes[a].where()}) <-> {nodes[b].host} ({nodes[b].where()})"
        out.append(codes.slow_link.finding(
            f"{pair}: {'; '.join(why)}, measured twice; the other links of both nodes are fine",
            hosts=[nodes[a].host, nodes[b].host], expected=f"within {FACTOR:g}x of the median link",
            actual="; ".join(why), verify="validator scan A,B,C --net-check   # no NET104 for the pair"))  # fmt: skip
    return out


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


def line(results: Results) -> str:
    """What the verdict line says: "net-check: 6 links ok; median 0.08 ms, 9000/9100 Mbit/s"."""
    made = rows(results)
    bad = sum(1 for _, r in made if not r.get("ok"))
    if not made:
        return "net-check: no links to test"
    text = f"net-check: {len(made)} links ok" if not bad else f"net-check: {bad} of {len(made)} links failed"
    links = measured(results)
    if links:
        med = medians(list(links.values()))
        text += (
            f"; median of {len(links)} measured: {med['rtt_ms']:.2f} ms, "
            f"{mbps(med['up_mbps'])}/{mbps(med['down_mbps'])} Mbit/s"
        )
    return text


def by_label(nodes: Iterable[Node]) -> dict[str, Node]:
    return {n.label: n for n in nodes}
