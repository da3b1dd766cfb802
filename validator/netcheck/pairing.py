"""After the rings: is a suspect link a bad link, or one of its nodes a bad node?

The rings' round measures every link at once and only proposes *suspects* (verdict.py). Each
endpoint of a suspect is then paired with a *known-good* node (one whose ring links were all fine,
or an endpoint cleared since), a different one in each pass, and the suspect link itself is
measured again. A node is bad when all its pairs with known-good partners are slow (CONFIRM of
them, the same way each time) and it was never fine with any node; a link is bad when it is slow
again CONFIRM times, the same way as in the rings, while both its nodes are fine with their
partners. A bad link never convicts its nodes: only their pairs with known-good partners do, and a
link with a convicted node is explained by it, not named.

A pass is two phases, each one or more rounds of disjoint pairs (a node in at most one pair a
round), all measured at once (each pair REPEAT times in a row, each figure the best: probe.py)
beside up to CONTROLS pairs of two known-good nodes, the round's own reference
(verdict.reference): *pair* (each open endpoint with a fresh partner), then *relink* (the suspect
links both of whose nodes are cleared; from the second pass these also fill the pair phase's
rounds where they fit). An endpoint fine with a partner is cleared (and so is the partner, if it is
an endpoint); a link fine again is dropped; a link whose node is not cleared waits for the node's
verdict. At most CONFIRM + 2 passes: a node slow once then fine leaves its links one pass late, and
in a small cluster a node all of whose ring links were suspect (noise on a busy machine) has no
partner in the first pass (every other node is its peer) and gets one only once its peers are
cleared, a pass late too (CI saw a 4-node bad link go unnamed with one pass fewer).

Rounds: 1 (rings) + at most (CONFIRM + 2) x (pair rounds + relink rounds). With at least as many
known-good nodes as endpoints the pair phase is one round, and the relink phase is at most min(k, 7)
rounds for k suspects (a node has 4 ring links: a greedy packing of links that share nodes needs at
most 2x4-1 rounds): at most 4k + 5 rounds, which is at most 2k log2(n) + 2 from n = 8 and k >= 2.
rounds.py also stops at ``budget`` (2k log2 n + 2) whatever n. Typical: 3 for a bad node, 4 for a
bad link or both at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from validator.netcheck.ring import Node, Plans, Results, target
from validator.netcheck.verdict import CONFIRM, CONTROLS, Link, measured, reference, symptoms, why_slow

Phase = Literal["pair", "relink"]
PASSES = CONFIRM + 2
REPEAT = 2  # measurements in a row of each pair after the rings, each figure the best (probe.py)


def budget(n: int, k: int) -> int:
    """Most rounds the net check runs for k suspects among n nodes: 2k log2(n) + 2."""
    return int(2 * k * math.log2(max(n, 2)) + 2)


@dataclass
class Round:
    """One round: disjoint pairs, all measured at once."""

    pairs: list[Link] = field(default_factory=list)  # (open endpoint, its partner)
    links: list[Link] = field(default_factory=list)  # suspect links measured again (prober, destination)
    controls: list[Link] = field(default_factory=list)  # pairs of two known-good nodes beside them
    busy: set[str] = field(default_factory=set)

    def plans(self, nodes: dict[str, Node]) -> Plans:
        out: Plans = {}
        for role, links in (("pair", self.pairs), ("again", self.links), ("control", self.controls)):
            for src, dest in links:
                out.setdefault(src, []).append({**target(nodes[src], nodes[dest], role, True), "repeat": REPEAT})
        return out


@dataclass
class Pairing:
    """The isolation's state: open endpoints and links, the evidence each round added."""

    nodes: dict[str, Node]
    med: dict[str, float]  # the rings' medians
    suspects: dict[Link, list[str]]  # link -> why it was suspect in the rings' round
    good: list[str]  # known-good nodes, ring order
    signs: dict[Link, set[str]] = field(default_factory=dict)  # link -> what was slow in the rings' round
    tries: dict[str, list[tuple[str, list[str], set[str]]]] = field(default_factory=dict)  # (partner, why, what)
    relinks: dict[Link, list[tuple[list[str], set[str]]]] = field(default_factory=dict)  # (why, what) each time
    cleared: set[str] = field(default_factory=set)  # endpoints fine with a known-good partner
    dropped: set[Link] = field(default_factory=set)  # suspect links fine when measured again
    passes: int = 0
    phase: Phase = "pair"
    this_pass: set[Link] = field(default_factory=set)  # links measured again in this pass
    rounds: int = 0  # rounds run after the rings

    @classmethod
    def start(
        cls, nodes: dict[str, Node], first: Results, med: dict[str, float], suspects: dict[Link, list[str]]
    ) -> Pairing:
        """Known-good: nodes with a measured link, none of them suspect, and no failed probe."""
        touched: set[str] = set()
        for src, got in first.items():
            for r in got if isinstance(got, list) else []:
                if isinstance(r, dict) and not r.get("ok"):
                    touched.update((src, str(r.get("label"))))
        ends = {end for link in suspects for end in link}
        seen = {end for link in measured(first) for end in link}
        good = [n for n in nodes if n in seen and n not in ends and n not in touched]
        p = cls(nodes, med, suspects, good)
        rows = measured(first)
        p.signs = {link: symptoms(rows[link], med) for link in suspects if link in rows}
        p.tries = {end: [] for end in sorted(ends, key=list(nodes).index)}
        return p

    # who is still open

    def peer(self, node: str, partner: str) -> Link | None:
        """The suspect link between ``node`` and ``partner``, if there is one."""
        return next((link for link in ((node, partner), (partner, node)) if link in self.suspects), None)

    def convicted(self, node: str) -> bool:
        """Slow with each of CONFIRM partners or more, the same way (a fault has a signature, the
        noise of a busy machine changes), and never fine with any node. A pair across one of the
        node's own suspect links (a small cluster has no other partner) measures that link again:
        with one among the tries, one more partner is needed, or a bad link and noise on one other
        pair would convict its node."""
        tries = self.tries.get(node, [])
        need = CONFIRM + any(self.peer(node, p) for p, _, _ in tries)
        return (
            node not in self.cleared and len(tries) >= need and all(why for _, why, _ in tries)
            and bool(set.intersection(*(what for _, _, what in tries)))
        )  # fmt: skip

    def open_nodes(self) -> list[str]:
        return [n for n in self.tries if n not in self.cleared and not self.convicted(n)]

    def open_links(self) -> list[Link]:
        """Suspect links still to measure again: not dropped, fewer than CONFIRM measurements, no
        node convicted (it explains the link) or not yet fine with a partner (wait for it)."""
        waiting = set(self.open_nodes())
        return [
            link for link in self.suspects
            if link not in self.dropped and len(self.relinks.get(link, [])) < CONFIRM
            and not any(self.convicted(end) or end in waiting for end in link)
        ]  # fmt: skip

    # what to measure next

    def next_phase(self) -> list[Round]:
        """The rounds of the next phase with something to measure; [] when the isolation is done.
        A pass's pair phase also measures again the links whose nodes are both cleared already
        (they wait for nothing), where they fit; its relink phase the others it can."""
        while self.passes < PASSES:
            if self.phase == "pair":
                found = self._pair_rounds()
                ready = [link for link in self.open_links() if set(link) <= self.cleared]
                self.this_pass = set(ready)
                self.phase = "relink"
            else:
                found, ready = [], [link for link in self.open_links() if link not in self.this_pass]
                self.phase = "pair"
                self.passes += 1
            for link in ready:
                spot = next((r for r in found if not set(link) & r.busy), None)
                if spot is None:
                    found.append(spot := Round())
                spot.busy.update(link)
                spot.links.append(link)
            if found:
                for r in found:
                    r.controls = self._controls(r.busy)
                return found
        return []

    def _order(self) -> list[str]:
        """Partners, best first: known-good nodes, then endpoints already cleared, then the others
        touched by the fewest suspects (a small cluster may have no node untouched by one)."""
        index = {n: i for i, n in enumerate(self.nodes)}
        load = dict.fromkeys(self.nodes, 0)
        for link in self.suspects:
            for end in link:
                load[end] += 1
        convicted = {n for n in self.tries if self.convicted(n)}
        ranked = [*self.good, *sorted(self.cleared, key=index.__getitem__),
                  *sorted(self.nodes, key=lambda n: (load[n], index[n]))]  # fmt: skip
        return [n for n in dict.fromkeys(ranked) if n not in convicted and self.nodes[n].listening]

    def _pair_rounds(self) -> list[Round]:
        """Each open endpoint with a partner it has not been paired with, not a peer of one of its
        suspect links (unless cleared since), and not another open endpoint while a better one is
        free (an endpoint that is a partner is served by that pair); rounds of disjoint pairs."""
        want = self.open_nodes()
        order = self._order()
        rounds: list[Round] = []
        served: set[str] = set()
        for node in want:
            if node in served:
                continue
            peers = {a if b == node else b for a, b in self.suspects if node in (a, b)}
            met = {p for p, _, _ in self.tries[node]} | (peers - self.cleared)
            fresh = [n for n in order if n != node and n not in met]
            ranked = [n for n in fresh if n not in want] + [n for n in fresh if n in want]
            for rnd in [*rounds, Round()]:
                partner = next((n for n in ranked if n not in rnd.busy), None) if node not in rnd.busy else None
                if partner is not None:
                    if not rnd.pairs:
                        rounds.append(rnd)
                    rnd.busy.update((node, partner))
                    rnd.pairs.append((node, partner))
                    served.add(partner)
                    break
        return rounds

    def _controls(self, busy: set[str]) -> list[Link]:
        """Pairs of known-good nodes, or (a small cluster may have none) of cleared endpoints."""
        free = [n for n in dict.fromkeys([*self.good, *self.cleared]) if n not in busy]
        step = max(1, len(free) // (2 * CONTROLS))  # spread over the ring
        picked = free[::step][: 2 * CONTROLS]
        return list(zip(picked[::2], picked[1::2], strict=False))

    # what each round found

    def record(self, rnd: Round, results: Results) -> None:
        self.rounds += 1
        rows = measured(results)
        ref = reference(self.med, [rows[link] for link in rnd.controls if link in rows])
        for link in [*rnd.pairs, *rnd.links]:
            row = rows.get(link)
            if row is None:
                continue  # not measured (the probe failed): no evidence either way; again next pass
            why, what = why_slow(row, ref), symptoms(row, ref)
            if link in rnd.pairs:
                self.tries[link[0]].append((link[1], why, what))
                if not why:  # fine together: neither is a bad node (a partner may be an endpoint too)
                    self.cleared.update(end for end in link if end in self.tries)
                if (again := self.peer(*link)) and link[1] in self.cleared:  # the suspect link measured again
                    self.relinks.setdefault(again, []).append((why, what))
                    self.this_pass.add(again)
                    if not why:
                        self.dropped.add(again)
            else:
                self.relinks.setdefault(link, []).append((why, what))
                if not why:
                    self.dropped.add(link)

    # the verdict

    def bad_nodes(self) -> list[str]:
        return [n for n in self.tries if self.convicted(n)]

    def bad_links(self) -> list[Link]:
        bad = set(self.bad_nodes())
        return [
            link for link in self.suspects
            if link not in self.dropped and not set(link) & bad and set(link) <= self.cleared
            and len(got := self.relinks.get(link, [])) >= CONFIRM and all(why for why, _ in got)
            and bool(self.signs.get(link, set()).intersection(*(what for _, what in got)))
        ]  # fmt: skip

    def explained(self) -> list[Link]:
        """Suspect links explained by a bad node."""
        bad = set(self.bad_nodes())
        return [link for link in self.suspects if set(link) & bad]
