"""After the gather: how each node resolves its peers' hostnames, and how far its clock is from
the coordinator's.

Name round: the coordinator sends each node (one participant per host) a sample of at most
SAMPLE_MAX hostnames (its own, its ring neighbours', the master's, then random others; everyone
when the job has that few nodes); the node resolves them in parallel threads, all within
RESOLVE_S, and answers with what it got. The coordinator compares the answers with each peer's own
addresses (from that peer's facts) and with the other nodes' answers. A node's answer is evidence
about the node itself only: a finding names the node whose view is wrong, never the peer it
resolved. Clock: each participant puts its wall clock in its facts header; the coordinator takes
its own clock at receipt, less half the hello-to-header round trip.
"""

from __future__ import annotations

import asyncio
import math
import random
import socket
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from validator.checks.base import Job
from validator.facts.network import is_loopback
from validator.model import Facts, Finding, Severity
from validator.preflight import findings as pre  # NET201-203, PRE008: with the other preflight codes
from validator.preflight import protocol as wire
from validator.preflight.participant import ADDRS_MAX, RESOLVE_S, SAMPLE_MAX

if TYPE_CHECKING:
    from validator.preflight.connection import Arrival
    from validator.preflight.coordinator import Coordinator

ROUND_S = RESOLVE_S + 0.5  # the coordinator waits this long for the answers
SKEW_S = 1.0  # clock offset beyond the round-trip uncertainty that is worth a warning
FINDINGS_MAX = 32  # per code: a node with a wrong /etc/hosts for everyone stays a few lines
GETENT = "getent ahosts NAME   # on each named node"

View = tuple[tuple[str, ...], str | None]  # addresses in the resolver's order, or why none


NAME_CODES = ("NET201", "NET202", "NET203")  # the name round runs only when one of them is selected


# --------------------------------------------------------------------------- coordinator side


def parse_answer(msg: object, asked: list[str]) -> dict[str, View]:
    """A node's answer, validated: only names it was asked, addresses that parse, short errors."""
    from validator.preflight.refusals import clip

    results = msg.get("results") if isinstance(msg, dict) and msg.get("type") == "resolved" else None
    out: dict[str, View] = {}
    if not isinstance(results, dict):
        return out
    for name in asked:
        r = results.get(name)
        if not isinstance(r, dict) or not isinstance(r.get("addrs"), list):
            continue
        addrs = tuple(dict.fromkeys(a for a in (_ip(x) for x in r["addrs"][:ADDRS_MAX]) if a))
        err = r.get("error")
        out[name] = (addrs, None if addrs else clip(err, 120) if isinstance(err, str) else "no address")
    return out


def _ip(value: object) -> str | None:
    """An address as the resolver prints it, canonical; None for anything else (C speed: the
    coordinator reads up to SAMPLE_MAX x ADDRS_MAX of them per node)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    family = socket.AF_INET6 if ":" in value else socket.AF_INET
    try:
        return socket.inet_ntop(family, socket.inet_pton(family, value.split("%", 1)[0]))
    except (OSError, ValueError):
        return None


def nodes(arrivals: list[Arrival], order: Callable[[Facts], Any]) -> list[Arrival]:
    """One arrival per machine (kernel hostname: several Slurm node names or node ranks on one
    machine are one) in rank order, the master first: the first that can be asked (the
    coordinator's own, or a live participant that announced its clock)."""

    def rank(a: Arrival) -> tuple[int, int, str]:
        k = order(a.facts)
        return (0, k, "") if isinstance(k, int) else (1, 0, str(k))

    out: dict[str, Arrival] = {}
    for a in sorted(arrivals, key=rank):
        if a.conn is None or (a.conn.state == "registered" and a.clock is not None):
            out.setdefault(a.facts["hostname"], a)
    return list(out.values())


def sample(names: list[str], i: int, rng: random.Random) -> list[str]:
    """Node i's sample of ``names`` (rank order, the master first): itself, its ring neighbours,
    the master, then random others, at most SAMPLE_MAX."""
    n = len(names)
    if n <= SAMPLE_MAX:
        return list(dict.fromkeys([names[i], *names]))
    picked = dict.fromkeys([names[i], names[(i - 1) % n], names[(i + 1) % n], names[0]])
    for j in rng.sample(range(n), min(n, 2 * SAMPLE_MAX)):
        if len(picked) >= SAMPLE_MAX:
            break
        picked.setdefault(names[j])
    return list(picked)


async def round_(c: Coordinator, order: Callable[[Facts], Any]) -> dict[str, dict[str, View]]:
    """Ask every machine (one participant each) to resolve its sample; host -> name -> view. Only
    with two machines or more; bounded by ROUND_S whoever does not answer."""
    from validator.agent.probe import resolve

    asked = nodes(list(c.arrivals.values()), order)
    if len(asked) < 2:
        return {}
    names = [a.facts["hostname"] for a in asked]
    rng = random.Random(len(names))
    loop = asyncio.get_running_loop()
    waiting: dict[str, tuple[list[str], asyncio.Future[Any]]] = {}
    own: tuple[str, list[str]] | None = None
    for i, a in enumerate(asked):
        mine = sample(names, i, rng)
        if a.conn is None:
            own = (a.facts["host"], mine)
            continue
        a.conn.results = fut = loop.create_future()
        a.conn.state = "resolving"
        a.conn.tell(wire.encode({"type": "resolve", "names": mine}))
        waiting[a.facts["host"]] = (mine, fut)
    mine_too = asyncio.ensure_future(asyncio.to_thread(resolve, own[1], RESOLVE_S)) if own else None
    futures = [f for _, f in waiting.values()] + ([mine_too] if mine_too else [])
    await asyncio.wait(futures, timeout=ROUND_S)  # at least one: the coordinator's own, or a participant's
    views: dict[str, dict[str, View]] = {}
    if own is not None and mine_too is not None and mine_too.done():
        views[own[0]] = parse_answer({"type": "resolved", "results": mine_too.result()}, own[1])
    for host, (mine, fut) in waiting.items():
        if fut.done():
            views[host] = parse_answer(fut.result(), mine)
        else:
            fut.cancel()
    for a in asked:
        if a.conn is not None and a.conn.state == "resolving":
            a.conn.state = "registered"
    return views


def own_addrs(facts: Facts) -> list[str]:
    """The node's routable addresses: up, not loopback, not link-local, not on a container bridge
    or tunnel (172.17.0.1 on docker0 is every node's)."""
    out = []
    for iface in facts["network"]["interfaces"]:
        if iface["loopback"] or iface["virtual"] or not iface["up"]:
            continue
        for cidr in iface["addrs"]:
            addr = cidr.split("/", 1)[0]
            if not addr.startswith("fe80") and not is_loopback(addr):
                out.append(addr)
    return out


def _show(addrs: tuple[str, ...] | list[str]) -> str:
    return ", ".join(addrs[:4]) + (f" (+{len(addrs) - 4})" if len(addrs) > 4 else "") if addrs else "nothing"


def _peer(name: str, host: str) -> str:
    return name if name == host else f"{name} ({host})"


def _where(viewers: list[str]) -> str:
    from validator.targets import fold_hosts

    return fold_hosts(viewers) if len(viewers) > 1 else viewers[0]


def findings(facts: list[Facts], views: dict[str, dict[str, View]], master: str) -> list[Finding]:
    """NET201-NET203 from the name round. ``facts``: every arrival's; ``master``: the master's host;
    ``views``: viewer host -> name -> what it resolved (linear in the answers: inverted once)."""
    first: dict[str, Facts] = {}
    for f in facts:
        first.setdefault(f["host"], f)
    by_name: dict[str, list[str]] = {}
    for host, f in first.items():
        by_name.setdefault(f["hostname"], []).append(host)
    of: dict[str, dict[str, View]] = {}  # name -> viewer -> view
    for viewer, got in views.items():
        for name, view in got.items():
            of.setdefault(name, {})[viewer] = view
    out = _own_loopback(first, views, of, facts)
    c10d = any(f["launch"]["rdzv_backend"] == "c10d" for f in first.values())  # workers get the store host's name
    drifted: list[Finding] = []
    missing: list[Finding] = []
    for name, seen in of.items():
        hosts = by_name.get(name, [])
        if len(hosts) != 1:  # not a participant's, or two hosts claim it: whose addresses it should be is unclear
            continue
        peer = hosts[0]
        seen = {v: view for v, view in seen.items() if v != peer}
        sev = None if peer == master and c10d else Severity.WARNING
        drifted.extend(_drift(name, peer, own_addrs(first[peer]), seen, master, sev))
        missing.extend(_unresolved(name, peer, own_addrs(first[peer]), seen, master, sev))
    return out + _capped(drifted) + _capped(missing)


def _capped(found: list[Finding]) -> list[Finding]:
    if len(found) <= FINDINGS_MAX:
        return found
    found = sorted(found, key=lambda f: -f.severity)
    last = found[FINDINGS_MAX - 1]
    last.message += f" ({len(found) - FINDINGS_MAX} more peer names like this not listed)"
    return found[:FINDINGS_MAX]


def _own_loopback(
    first: dict[str, Facts], views: dict[str, dict[str, View]], of: dict[str, dict[str, View]], facts: list[Facts]
) -> list[Finding]:
    """One NET201 for every node whose own hostname resolves to loopback first (as Gloo takes it)."""
    bad: list[tuple[str, str]] = []
    for host, got in views.items():
        f = first.get(host)
        if f is None or "GLOO_SOCKET_IFNAME" in f["env"]:
            continue
        addrs, _ = got.get(f["hostname"], ((), None))
        routable = own_addrs(f)
        if addrs and is_loopback(addrs[0]) and routable:
            others = sorted({a for v, (got_v, _) in of[f["hostname"]].items() if v != host for a in got_v})
            peers = f"; its peers resolve it to {_show(others)}" if others else ""
            bad.append((host, f"{f['hostname']} -> {_show(addrs)} on {host}, which has {_show(routable)}{peers}"))
    if not bad:
        return []
    gpu = Job(facts, None, "preflight").uses_gpus
    what = "Gloo groups would advertise loopback" if gpu else "Gloo would advertise loopback"
    more = f" (and {len(bad) - 3} more nodes)" if len(bad) > 3 else ""
    return [pre.own_loopback.finding(
        f"hostname resolves to loopback on its own node: {'; '.join(b for _, b in bad[:3])}{more}: {what}",
        hosts=[h for h, _ in bad], expected="the node's routable address", actual=bad[0][1].split(" -> ")[1].split(" on ")[0],
        fix=pre.own_loopback.fix, verify="getent ahosts $(hostname)   # on each named node: a routable address first",
        severity=Severity.WARNING if gpu else None)]  # fmt: skip


def _drift(
    name: str, peer: str, has: list[str], seen: dict[str, View], master: str, sev: Severity | None
) -> list[Finding]:
    """NET202 for ``peer``: the viewers whose answer is neither the peer's nor the majority's."""
    from validator.checks.base import majority

    answers = {v: frozenset(a) for v, (a, _) in seen.items() if a}
    if len(set(answers.values())) <= 1:
        return []
    right = {v for v, a in answers.items() if a & set(has)}
    if right and len(right) < len(answers):
        wrong = sorted(set(answers) - right)
        agreed = sorted({a for v in right for a in seen[v][0]})
    elif not right:  # none resolves to an address the peer shows (NAT, a Service address): the majority
        viewers = sorted(answers)
        top, groups = majority(((i, answers[v]) for i, v in enumerate(viewers)), lambda i: viewers[i] == master)
        backed = [viewers[i] for i in groups[top]] if top is not None else []
        if not (master in backed or 2 * len(backed) > len(answers)):
            return []  # no majority, no master's view: one node's word against another's is not enough
        wrong = [v for v, a in answers.items() if a != top]
        agreed = sorted(top or ())
    else:
        return []  # every answer is one of the peer's addresses (a multi-homed peer): it is reached
    got = {v: seen[v][0] for v in wrong}
    shown = "; ".join(f"{v} -> {_show(a)}" for v, a in list(got.items())[:4]) + (" ..." if len(got) > 4 else "")
    ok = len(answers) - len(wrong)
    return [pre.drift.finding(
        f"{_peer(name, peer)} resolves differently: {shown}; {ok} other node(s) resolve it to {_show(agreed)}; "
        f"{peer} has {_show(has)}", hosts=wrong, expected=f"{name} -> {_show(agreed)}",
        actual=f"{name} -> {_show(next(iter(got.values())))}", fix=pre.drift.fix,
        verify=GETENT.replace("NAME", name), severity=sev)]  # fmt: skip


def _unresolved(
    name: str, peer: str, has: list[str], seen: dict[str, View], master: str, sev: Severity | None
) -> list[Finding]:
    """NET203 for ``peer``: the viewers that cannot resolve it while others can, on credible
    evidence: an answer that is one of the peer's own addresses, the master's, or most nodes'."""
    failed = sorted(v for v, (a, _) in seen.items() if not a)
    found = sorted({x for addrs, _ in seen.values() for x in addrs})
    resolving = [v for v, (a, _) in seen.items() if a]
    credible = set(found) & set(has) or master in resolving or 2 * len(resolving) > len(seen)
    if not failed or not found or not credible:
        return []
    why = seen[failed[0]][1] or "no address"
    return [pre.unresolved.finding(
        f"{_peer(name, peer)} does not resolve on {_where(failed)} ({why}); {len(seen) - len(failed)} other node(s) "
        f"resolve it to {_show(found)}", hosts=failed, expected=f"{name} -> {_show(found)}", actual=why,
        fix=pre.unresolved.fix, verify=GETENT.replace("NAME", name), severity=sev)]  # fmt: skip


# --------------------------------------------------------------------------- clock


def offset(clock: object, sent_at: float, now: float, wall: float) -> tuple[float, float] | None:
    """(offset, round trip) of a participant's ``clock`` (its time.time() in the header), received
    at ``wall`` (our time.time()) ``now - sent_at`` seconds (monotonic) after our hello left."""
    if isinstance(clock, bool) or not isinstance(clock, (int, float)) or not math.isfinite(clock):
        return None
    if not 0 < clock < 1e11:
        return None
    rtt = max(0.0, now - sent_at)
    return float(clock) - (wall - rtt / 2), rtt


def clock_findings(arrivals: list[Arrival], coordinator: str) -> list[Finding]:
    """One PRE008 naming every node whose clock is off by more than SKEW_S beyond half its round trip. The
    reference is the coordinator's clock, unless two or more other nodes agree on another time: then it is their
    median, and the coordinator's own node, off alone, is the one named."""
    clocks: dict[str, tuple[float, float]] = {}
    for a in arrivals:
        if a.clock is not None:
            clocks.setdefault(a.facts["host"], a.clock)
    own = next((a.facts["host"] for a in arrivals if a.conn is None), None)  # conn None: the coordinator's facts
    others = [o for h, (o, _) in clocks.items() if h != own]
    mid = statistics.median(others) if len(others) >= 2 else 0.0
    if abs(mid) > SKEW_S and own is not None:
        clocks.setdefault(own, (0.0, 0.0))
    else:
        mid = 0.0
    off = {h: (o - mid, r) for h, (o, r) in clocks.items() if abs(o - mid) - r / 2 > SKEW_S}
    if not off:
        return []
    worst = sorted(off.items(), key=lambda kv: -abs(kv[1][0]))
    shown = ", ".join(f"{h} {o:+.1f} s (round trip {r * 1000:.0f} ms)" for h, (o, r) in worst[:5])
    more = f" and {len(worst) - 5} more" if len(worst) > 5 else ""
    return [pre.clock_skew.finding(
        f"clock offset beyond {SKEW_S:.0f} s from the "
        + ("other nodes' median" if mid else f"coordinator's ({coordinator})") + f": {shown}{more}",
        hosts=[h for h, _ in worst], expected=f"within {SKEW_S:.0f} s", actual=f"{worst[0][1][0]:+.1f} s",
        fix=pre.clock_skew.fix, verify="chronyc tracking   # or: timedatectl; on each named node")]  # fmt: skip


def defer(found: list[Finding], checked: list[Finding]) -> list[Finding]:
    """NET201 adds nothing where NET003 (from the facts: Gloo would use loopback) already names
    every one of its hosts: the same cause, said once."""
    said = {h for f in checked if f.code == "NET003" for h in f.hosts}
    return [f for f in found if not (f.code == "NET201" and said.issuperset(f.hosts))]
