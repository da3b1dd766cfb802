"""Baselines per hardware type with real parts: `validator baseline record --local` measures this
machine with the real probe processes and writes the profile; `validator scan --local --probes`
then names this machine, one node alone (no peers to judge it), when it runs in a cgroup v1 ``cpu``
group held to a CFS quota (shared/harness/fabric-lab's ``cpu`` fault), and not when it runs free.
Then two emulated hosts (tests/harness/nodefab.py): fewer than three peers, the baseline alone names
the throttled one and only it; a baseline both miss names neither (PRB004)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR, _root_with, unavailable
from tests.harness.netfab import Fabric
from tests.harness.nodefab import CPU, Nodes, cgroup_v1_cpu, named
from validator import baseline
from validator.probes import rounds
from validator.profiles import BaselineFigure, Baselines, load_profile
from validator.transports.local import this_host

pytestmark = [pytest.mark.root, pytest.mark.slow]

PROFILE = """\
# a lab profile: these lines stay as written
name: lab
description: one node  # kept
"""


SHARES = "262144"  # cgroup v1's most: the group's processes take the cores before the rest of this machine


def cgroup(name: str, **settings: str) -> Iterator[Path]:
    _root_with()
    if not cgroup_v1_cpu():
        unavailable(f"no cgroup v1 cpu controller at {CPU}")
    group = CPU / f"cvbaseline-{os.getpid()}-{name}"
    group.mkdir()
    try:
        for key, value in settings.items():
            (group / f"cpu.{key}").write_text(value)
        yield group
    finally:
        for left in (group / "cgroup.procs").read_text().split():  # nothing should be left: the scan waits for all
            (CPU / "cgroup.procs").write_text(left)
        group.rmdir()


@pytest.fixture
def node() -> Iterator[Path]:
    """This machine as a node of its own: other work here (other test suites) does not take its
    cores from under the probes, so a healthy run measures what the baseline measured."""
    yield from cgroup("node", shares=SHARES)


@pytest.fixture
def quota() -> Iterator[Path]:
    """A cgroup v1 cpu group with 15% of one CPU; what joins it is throttled."""
    yield from cgroup("quota", cfs_period_us="100000", cfs_quota_us="15000")


def validator(*args: str, group: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*VALIDATOR, *args]
    if group is not None:  # the validator and every probe it starts run in the group
        argv = ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


def probe_findings(doc: dict[str, object]) -> list[dict[str, object]]:
    return [f for f in doc["findings"] if str(f["code"]) in ("PRB001", "PRB002")]  # type: ignore[attr-defined]


def test_recorded_on_this_machine_a_throttled_run_is_named_against_the_baseline_alone(
    tmp_path: Path, node: Path, quota: Path
) -> None:
    p = tmp_path / "lab.yaml"
    p.write_text(PROFILE)
    rec = validator("baseline", "record", "--local", "--profile", str(p), group=node)
    assert rec.returncode == 0, rec.stderr
    assert rec.stdout.startswith(f"baseline of 1 node written to {p}:") and rec.stderr == ""
    text = p.read_text()
    assert text.startswith(PROFILE + "\n")  # the rest as written, the block appended
    (hardware, kinds), *others = load_profile(p).baselines.items()
    assert others == [] and hardware
    assert set(kinds["compute"]) == {"cpu python"} and set(kinds["memory"]) == {"host copy"}
    assert kinds["compute"]["cpu python"].n == 1 and kinds["compute"]["cpu python"].median > 0

    free = validator("scan", "--local", "--probes", "--profile", str(p), "-f", "json", group=node)
    doc = json.loads(free.stdout)
    assert free.returncode == 0 and probe_findings(doc) == [], (free.stderr, doc["findings"])
    probes = doc["scan"]["probes"]
    assert [(b["hardware"], b["key"], b["nodes"], b["named"]) for b in probes["baseline"]] == [
        (hardware, "cpu python", 1, []),
        (hardware, "host copy", 1, []),
    ]
    assert probes["nodes"][0]["hardware"] == hardware and probes["nodes"][0]["against"] == {}
    assert "none slower than 1.5x the baseline" in probes["line"]

    held = validator("scan", "--local", "--probes", "--profile", str(p), "-f", "json", group=quota)
    doc = json.loads(held.stdout)
    found = probe_findings(doc)
    # a CPU quota slows the multiply and the copies alike: either probe, or both, may convict it
    assert found and {h for f in found for h in str(f["hosts"]).split(",")} == {this_host()}, doc["findings"]
    assert all(str(f["message"]).startswith(f"{this_host()}: below the baseline for {hardware} in ") for f in found)
    assert all(" vs " in str(f["message"]) and "slower than its peers" not in str(f["message"]) for f in found)
    row = doc["scan"]["probes"]["nodes"][0]
    assert row["named"] and all(row["against"][k] == ["baseline"] for k in row["named"])
    assert held.returncode == 0  # warnings: the job would run, slowly
    assert doc["scan"]["exclude"]["hosts"] == [this_host()]


@pytest.fixture(scope="module")
def two() -> Iterator[Nodes]:
    _root_with()
    if not cgroup_v1_cpu():
        unavailable(f"no cgroup v1 cpu controller at {CPU}")
    with Fabric.loopback(2, base=37) as fab, Nodes(fab, samples=5, window=0.4) as n:
        for g in n.groups:  # each host as a node of its own (see ``node``)
            (g / "cpu.shares").write_text(SHARES)
        yield n


def judge(nodes: Nodes, recorded: Baselines) -> rounds.Probed:
    return asyncio.run(rounds.run(list(nodes.fab.names), nodes.probe_round, rounds.KINDS, recorded))


def test_with_two_nodes_the_baseline_alone_names_the_throttled_one(two: Nodes) -> None:
    healthy = two.check()
    assert healthy.findings == [] and "too few nodes to compare" in healthy.doc["line"]
    recorded, left = baseline.measured(healthy.doc, "2026-12-02")
    assert left == [] and all(f.n == 2 for kinds in recorded.values() for figs in kinds.values() for f in figs.values())

    again = judge(two, recorded)
    assert [f.code for f in again.findings] == [], [f.message for f in again.findings]

    slow = two.fab.names[1]
    two.cpu(1, 10)
    try:
        # under load every node is slowed and the baseline's judgement may decline rather than guess (CI: one run
        # named nobody): up to three judgements (bounded), as tests/integration/test_probes_nodes.py; what any names
        # must be that node alone
        for _ in range(3):
            outcome = judge(two, recorded)
            if named(outcome):
                break
    finally:
        two.clear()
    assert named(outcome) == {slow}, [f.message for f in outcome.findings]
    assert all("below the baseline for" in f.message for f in outcome.findings if f.code != "PRB003")
    row = next(r for r in outcome.doc["nodes"] if r["host"] == slow)
    assert row["against"] and all(v == ["baseline"] for v in row["against"].values())
    assert all(s["suspects"] == [] for s in outcome.doc["stats"])  # the peers could not say: two nodes


def test_with_two_nodes_a_baseline_both_miss_names_neither(two: Nodes) -> None:
    """A baseline four times what the healthy nodes do (recorded on other hardware, or before every
    node changed): one PRB004 per figure lists both, none is named or taken out."""
    healthy = two.check()
    recorded, _ = baseline.measured(healthy.doc, "2026-12-02")
    inflated = {hw: {kind: {k: BaselineFigure(4 * f.median, f.mad, f.n, f.date) for k, f in figs.items()}
                     for kind, figs in kinds.items()} for hw, kinds in recorded.items()}  # fmt: skip
    outcome = judge(two, inflated)
    assert named(outcome) == set() and outcome.doc["rounds"] == 2  # one round a kind, none again
    assert sorted((f.code, tuple(f.hosts)) for f in outcome.findings) == [("PRB004", tuple(two.fab.names))] * 2
    assert all(row["most_below"] and row["named"] == [] for row in outcome.doc["baseline"])
