"""The net check tells a bad link from a bad node (validator/netcheck/pairing.py): each suspect's
nodes paired with known-good nodes, in rounds of disjoint pairs beside control pairs.

Real parts: 12 hosts in network namespaces on one bridge, a listener process each, real prober
processes per round, the rounds and verdict scan and preflight use (tests/harness/netfab.py).
Faults planted as this kernel allows (no netem): every packet a host receives from one peer (a
bad link) or from everyone (a bad node) waits 5 ms (NFQUEUE and nfdelay.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import TAG, _root_with
from tests.harness.netfab import Fabric, planted
from validator.netcheck.pairing import budget

pytestmark = [pytest.mark.root]
HOSTS = 12
HEALTHY_RUNS = 5


@pytest.fixture(scope="module")
def fabric() -> Iterator[Fabric]:
    _root_with("ip", "iptables")
    with Fabric.netns(HOSTS, (TAG + 5000) % 10000) as fab:
        yield fab


def found(fab: Fabric) -> tuple[set[tuple[str, tuple[str, ...]]], int, int]:
    """(code, hosts) of the speed findings, the rounds run, the suspects."""
    outcome = fab.check()
    named = {(f.code, tuple(sorted(f.hosts))) for f in outcome.findings if f.code in ("NET104", "NET105")}
    assert [f for f in outcome.findings if f.code not in ("NET104", "NET105")] == [], outcome.line
    return named, outcome.doc["rounds"], outcome.doc["suspects"]


def test_a_bad_link_is_named_as_the_link_and_neither_node(fabric: Fabric) -> None:
    with planted(fabric) as fab:
        fab.delay(3, 5.0, peer=4)  # ring 1 neighbours h4 <-> h5: only what h4 receives from h5 waits
        named, rounds, k = found(fab)
    assert named == {("NET104", (fab.names[3], fab.names[4]))}
    assert rounds <= budget(HOSTS, k)


def test_a_bad_link_off_ring_one_is_named_as_the_link(fabric: Fabric) -> None:
    with planted(fabric) as fab:
        fab.delay(0, 5.0, peer=5)  # ring 2 (stride 5): h1 <-> h6
        named, _, _ = found(fab)
    assert named == {("NET104", (fab.names[0], fab.names[5]))}


def test_a_bad_node_is_named_as_the_node_and_not_its_links(fabric: Fabric) -> None:
    with planted(fabric) as fab:
        fab.delay(7, 5.0)  # everything h8 receives
        named, rounds, k = found(fab)
    assert named == {("NET105", (fab.names[7],))}
    assert k >= 3 and rounds <= budget(HOSTS, k)


def test_a_bad_node_and_a_bad_link_in_one_run(fabric: Fabric) -> None:
    with planted(fabric) as fab:
        fab.delay(7, 5.0)
        fab.delay(1, 5.0, peer=2)  # h2 <-> h3, far from h8 on both rings
        named, rounds, k = found(fab)
    assert named == {("NET105", (fab.names[7],)), ("NET104", (fab.names[1], fab.names[2]))}
    assert rounds <= budget(HOSTS, k)


def test_healthy_hosts_name_nothing_run_after_run(fabric: Fabric) -> None:
    for run in range(HEALTHY_RUNS):
        named, rounds, k = found(fabric)
        assert named == set(), run
        assert rounds <= budget(HOSTS, k)
