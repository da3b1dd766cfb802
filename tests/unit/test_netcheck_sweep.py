"""``--net-check-pairs all`` (validator/netcheck/sweep.py): the round-robin schedule, the pairs off
the rings, their judgement and isolation (on rows shaped like the prober's, as
tests/unit/test_netcheck.py), and the usage error above the cap through the real commands. The
sweep between real listener processes in network namespaces: tests/integration/test_netcheck_sweep.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from itertools import combinations
from typing import Literal

import pytest

from tests.unit.test_netcheck import SLOW, Figures, nodes, rows_of
from validator import cliopts
from validator.errors import UserError
from validator.netcheck import ring, rounds, sweep
from validator.netcheck.ring import plan


def every_pair_once(rounds_: list[list[sweep.Pair]], labels: list[str]) -> None:
    seen = [frozenset(p) for r in rounds_ for p in r]
    assert len(seen) == len(set(seen))  # no pair twice
    for r in rounds_:
        ends = [e for p in r for e in p]
        assert len(ends) == len(set(ends)) and r  # disjoint, none empty
    assert set(seen) <= {frozenset(p) for p in combinations(labels, 2)}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17])
def test_the_schedule_holds_every_pair_once_in_rounds_of_disjoint_pairs(n: int) -> None:
    labels = [f"n{i}" for i in range(n)]
    got = sweep.schedule(labels)
    every_pair_once(got, labels)
    assert sum(map(len, got)) == n * (n - 1) // 2  # every pair
    assert len(got) == (0 if n == 1 else n - 1 if n % 2 == 0 else n)  # N odd: one node rests each round
    assert all(len(r) == n // 2 for r in got)


def test_the_smallest_schedules() -> None:
    assert sweep.schedule([]) == [] and sweep.schedule(["a"]) == []
    assert sweep.schedule(["a", "b"]) == [[("a", "b")]]
    assert sweep.schedule(["a", "b", "c"]) == [[("b", "c")], [("a", "c")], [("a", "b")]]  # one rests each round
    assert sweep.schedule(["a", "b", "c", "d"]) == [[("a", "d"), ("b", "c")], [("a", "c"), ("d", "b")],
                                                    [("a", "b"), ("c", "d")]]  # fmt: skip


@pytest.mark.parametrize("n", [2, 4, 5, 6, 7, 8, 16, 128])
def test_the_sweep_measures_the_pairs_the_rings_did_not_and_no_more_rounds(n: int) -> None:
    ns = nodes(n)
    rings = sweep.measured_pairs(plan(ns))
    got = sweep.rounds_of(ns, rings)
    every_pair_once(got, [x.label for x in ns])
    swept = {frozenset(p) for r in got for p in r}
    assert not swept & rings and swept | rings == {frozenset(p) for p in combinations([x.label for x in ns], 2)}
    assert len(got) <= max(0, n - 1 if n % 2 == 0 else n)
    if n <= 5:
        assert got == []  # two rings of 4-5 nodes are every pair already
    if n == 6:
        assert swept == {frozenset(("n0", "n3")), frozenset(("n1", "n4")), frozenset(("n2", "n5"))}
        assert len(got) == 1  # moved to the earliest round: all three at once


def run(n: int, first: Figures, again: Figures, pairs: Literal["rings", "all"]) -> tuple[rounds.NetVerdict, int]:
    """rounds.run over ``n`` nodes: every measurement of a link in ``first`` (either way) the
    rings' round and the sweep take has its figures, every later one those of ``again``. Returns
    the outcome and the rounds run."""
    ran: list[ring.Plans] = []

    async def probe_round(plans: ring.Plans) -> ring.Results:
        roles = {t["role"] for ts in plans.values() for t in ts}
        ran.append(plans)
        use = first if roles & {"ring", "sweep"} else again
        figures = {(s, t["label"]): use.get((s, t["label"])) or use.get((t["label"], s)) or {}
                   for s, ts in plans.items() for t in ts}  # fmt: skip
        return rows_of(plans, figures)

    return asyncio.run(rounds.run(nodes(n), probe_round, pairs)), len(ran)


def test_a_slow_pair_off_both_rings_is_named_only_when_every_pair_is_measured() -> None:
    off = ("n1", "n4")  # 6 nodes: stride 2, so n1 <-> n4 is on neither ring
    assert frozenset(off) not in sweep.measured_pairs(plan(nodes(6)))
    slow = {off: {"rtt": 5.0}}
    quiet, ran = run(6, slow, slow, "rings")
    assert quiet.findings == [] and quiet.doc["sweep"] is None and ran == 1
    assert "every pair" not in quiet.line
    found, _ = run(6, slow, slow, "all")
    assert [(f.code, f.hosts) for f in found.findings] == [("NET104", ["h1", "h4"])]
    assert found.doc["pairs"] == "all" and found.doc["sweep"] == {"rounds": 1, "pairs": 3, "seconds": 0.0}
    assert found.doc["measured"] == 15 and "every pair: 3 off the rings in 1 round" in found.line


def test_a_slow_node_is_still_named_as_the_node_when_every_pair_is_measured() -> None:
    bad = {(f"n{i}", "n2"): SLOW for i in range(8) if i != 2}  # every pair with n2, ring or not
    outcome, _ = run(8, bad, bad, "all")
    assert [(f.code, f.hosts) for f in outcome.findings] == [("NET105", ["h2"])]
    assert outcome.doc["suspects"] == 7 and outcome.doc["confirmed"] == 7  # its 3 sweep links are explained too
    assert outcome.doc["sweep"] is not None and outcome.doc["sweep"]["pairs"] == 28 - 16


def test_a_prober_that_failed_in_the_sweep_is_not_checked() -> None:
    """A failed prober is never a silent gap in "every pair": the node's probes were not run (NET103)."""

    failed: list[str] = []

    async def probe_round(plans: ring.Plans) -> ring.Results:
        got = rows_of(plans, {})
        if any(t["role"] == "sweep" for ts in plans.values() for t in ts):
            failed.append(min(got))
            got[failed[-1]] = "the prober failed: killed"
        return got

    outcome = asyncio.run(rounds.run(nodes(6), probe_round, "all"))
    assert len(failed) == 1 and [(f.code, f.hosts) for f in outcome.findings] == [("NET103", [f"h{failed[0][1:]}"])]
    assert outcome.findings[0].message == "prober: the prober failed: killed"


def test_the_option_names_the_cap_and_its_choices() -> None:
    assert cliopts.net_pairs("rings", False) == "rings" and cliopts.net_pairs(" ALL ", True, 128) == "all"
    with pytest.raises(UserError, match=r"--net-check-pairs: all: 129 nodes, above the cap of 128 .*129 rounds"):
        cliopts.net_pairs("all", True, 129)
    with pytest.raises(UserError, match=r"--net-check-pairs: all measures the net check's pairs: add --net-check"):
        cliopts.net_pairs("all", False)
    with pytest.raises(UserError, match=r"--net-check-pairs: unknown pairs 'some'; use one of: rings, all"):
        cliopts.net_pairs("some", True)


def validator(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "validator", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=False)  # fmt: skip


def one_line_usage_error(p: subprocess.CompletedProcess[str], prefix: str) -> None:
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(prefix) and "Traceback" not in p.stderr
    assert "--net-check-pairs: all: 129 nodes, above the cap of 128" in p.stderr and p.stdout == ""


def test_scan_refuses_every_pair_above_the_cap_before_connecting() -> None:
    # unresolvable hosts: a scan that connected would say so per host, not exit 2 at once
    one_line_usage_error(validator("scan", "nohost[1-129].invalid", "--net-check", "--net-check-pairs", "all"),
                         "validator: error: ")  # fmt: skip
    p = validator("scan", "nohost1.invalid", "--net-check-pairs", "all")
    assert p.returncode == 2 and "add --net-check" in p.stderr and p.stderr.count("\n") == 1


def test_preflight_refuses_every_pair_above_the_cap_on_every_participant() -> None:
    p = validator("preflight", "--net-check", "--net-check-pairs", "all", "--hosts", "nohost[1-129]", "--expect",
                  "129", "--timeout", "5", MASTER_ADDR="127.0.0.1", MASTER_PORT="1", RANK="0", WORLD_SIZE="129")  # fmt: skip
    one_line_usage_error(p, "validator preflight: error: ")


def test_above_the_cap_where_no_one_could_count_the_nodes_before_the_sweep_is_not_run_and_says_so() -> None:
    """Preflight per rank without a host list learns the node count at the gather: rings only."""
    outcome, ran = run(129, {}, {}, "all")
    assert ran == 1 and outcome.findings == [] and outcome.doc["sweep"] is None
    assert outcome.line.endswith("; every pair: not measured (129 nodes, above the cap of 128)")
