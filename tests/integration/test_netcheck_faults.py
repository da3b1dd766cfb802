"""The net check names nothing on healthy hosts, run after run, and names a planted fault.

Real parts: one listener process per host (validator/netcheck/probe.py), real prober processes,
the rounds and verdict scan and preflight use (tests/harness/netfab.py). Hosts on loopback
addresses, and hosts in network namespaces on a bridge with faults planted as this kernel allows
(no netem): delay by NFQUEUE and a delay line (nfdelay.py), loss by ``iptables -m statistic``,
rate by tbf. The suite runs beside other tests on a 2-core machine: the healthy loops are the
false alarms of issue 21 (NET104 on idle loopback in 4 of 10 runs, on 8 namespace hosts in 9 of
20 while the machine was busy). benchmarks/netcheck_false.py runs the same at 100 runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import TAG, _root_with
from tests.harness.netfab import Fabric, named, planted
from validator.netcheck.pairing import budget

HEALTHY_RUNS = 5  # a bounded loop: each run is about a second


def healthy(fab: Fabric) -> None:
    for run in range(HEALTHY_RUNS):
        outcome = fab.check()
        assert outcome.findings == [], (run, [f.message for f in outcome.findings])
        doc = outcome.doc
        assert (doc["nodes"], doc["measured"], doc["failed"], doc["confirmed"]) == (8, 16, 0, 0)
        assert doc["rtt_ms"] is not None and doc["up_mbps"] is not None and doc["down_mbps"] is not None
        assert 0 < doc["rtt_ms"]["min"] <= doc["rtt_ms"]["median"] <= doc["rtt_ms"]["max"]
        assert doc["line"].startswith("net check: 16 links, all within 3x of the median link")


def test_healthy_loopback_hosts_name_nothing_run_after_run() -> None:
    with Fabric.loopback(8, base=100 + TAG % 100) as fab:
        healthy(fab)


@pytest.fixture(scope="module")
def fabric() -> Iterator[Fabric]:
    _root_with("ip", "iptables", "tc")
    with Fabric.netns(8, TAG) as fab:
        yield fab


@pytest.mark.root
def test_healthy_namespace_hosts_name_nothing_run_after_run(fabric: Fabric) -> None:
    healthy(fabric)


@pytest.mark.root
def test_a_host_that_delays_what_it_receives_is_named_as_the_node(fabric: Fabric) -> None:
    with planted(fabric) as fab:
        fab.delay(2, 5.0)
        outcome = fab.check()
    assert [(f.code, f.hosts) for f in outcome.findings] == [("NET105", [fab.names[2]])], outcome.line
    assert "latency 5." in outcome.findings[0].message and "2 known-good nodes" in outcome.findings[0].message
    assert outcome.doc["confirmed"] == 4 and outcome.doc["rounds"] <= budget(8, outcome.doc["suspects"])


@pytest.mark.root
def test_one_delayed_link_is_named_as_the_pair(fabric: Fabric) -> None:
    with planted(fabric) as fab:
        fab.delay(1, 5.0, peer=2)  # ring 1 neighbours: h2 <-> h3 only
        outcome = fab.check()
    assert [(f.code, sorted(f.hosts)) for f in outcome.findings] == [("NET104", [fab.names[1], fab.names[2]])]


@pytest.mark.root
def test_a_rate_limited_host_is_named(fabric: Fabric) -> None:
    with planted(fabric) as fab:
        fab.rate(5, "100mbit")
        outcome = fab.check()
    assert named(outcome) == {fab.names[5]}, [f.message for f in outcome.findings]
    assert "Mbit/s" in outcome.findings[0].message


@pytest.mark.root
def test_a_lossy_host_is_named(fabric: Fabric) -> None:
    with planted(fabric) as fab:
        fab.loss(4, 0.02)
        outcome = fab.check()
    assert named(outcome) == {fab.names[4]}, [f.message for f in outcome.findings]
