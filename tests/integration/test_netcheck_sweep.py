"""``--net-check-pairs all`` finds a bad pair on neither ring (validator/netcheck/sweep.py).

Real parts: 6 hosts in network namespaces on one bridge, a listener process each, real prober
processes per round, the rounds and verdict scan and preflight use (tests/harness/netfab.py).
The fault is planted as this kernel allows (no netem): every packet one host receives from one
peer waits 5 ms (NFQUEUE and nfdelay.py). The pair is taken from ring.py's own plan: off both
rings, asserted, so that a change of the rings fails here rather than test a ring link."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import TAG, _root_with
from tests.harness.netfab import Fabric, planted
from validator.cliopts import NetPairs
from validator.netcheck import sweep
from validator.netcheck.pairing import budget
from validator.netcheck.ring import plan

pytestmark = [pytest.mark.root]
HOSTS = 6  # the fewest with pairs off both rings (stride 2): h1 <-> h4, h2 <-> h5, h3 <-> h6


@pytest.fixture(scope="module")
def fabric() -> Iterator[Fabric]:
    _root_with("ip", "iptables")
    with Fabric.netns(HOSTS, (TAG + 7000) % 10000) as fab:
        yield fab


def speed(fab: Fabric, pairs: NetPairs) -> tuple[set[tuple[str, tuple[str, ...]]], dict[str, object]]:
    outcome = fab.check(pairs)
    assert [f.message for f in outcome.findings if f.code not in ("NET104", "NET105")] == [], outcome.line
    return {(f.code, tuple(sorted(f.hosts))) for f in outcome.findings}, dict(outcome.doc)


def test_a_slow_pair_on_neither_ring_is_named_as_the_link_only_with_every_pair(fabric: Fabric) -> None:
    labels = [n.label for n in fabric.nodes]
    rings = sweep.measured_pairs(plan(fabric.nodes))
    off = [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :] if frozenset((a, b)) not in rings]
    assert off == [(labels[0], labels[3]), (labels[1], labels[4]), (labels[2], labels[5])]
    a, b = off[1]
    with planted(fabric) as fab:
        fab.delay(labels.index(b), 5.0, peer=labels.index(a))  # what h5 receives from h2 waits
        rings_only, doc = speed(fab, "rings")
        assert rings_only == set() and doc["sweep"] is None and doc["measured"] == 12  # never measured
        every, doc = speed(fab, "all")
    assert every == {("NET104", (a, b))}  # the link, both hosts; neither node
    cost = doc["sweep"]
    assert isinstance(cost, dict) and (cost["pairs"], cost["rounds"]) == (3, 1) and cost["seconds"] > 0
    assert doc["measured"] == 15 and isinstance(doc["rounds"], int) and isinstance(doc["suspects"], int)
    assert doc["rounds"] <= budget(HOSTS, doc["suspects"])
    assert "every pair: 3 off the rings in 1 round" in str(doc["line"])
