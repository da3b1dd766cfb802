"""The node probes name a slow node, and only it, and nothing on healthy nodes, run after run.

Real parts: eight hosts in network namespaces (tests/harness/netfab.py), each with its own
cgroup v1 ``cpu`` group (tests/harness/nodefab.py); every probe is a real ``python3`` process of
validator/probes/compute.py or memory.py inside its host's namespace and cgroup, judged by the
rounds the scan uses. The slow node is planted as shared/harness/fabric-lab plants it: a CFS
quota on its cgroup. Then the whole path: `validator scan --probes` over SSH into four namespace
hosts whose sshd (and so everything it starts) runs in a throttled cgroup on one host."""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TAG, VALIDATOR, NetnsHosts, _root_with, unavailable
from tests.harness.netfab import Fabric
from tests.harness.nodefab import CPU, Nodes, cgroup_v1_cpu, named

pytestmark = [pytest.mark.root, pytest.mark.slow]
HEALTHY_RUNS = 20  # a bounded loop: each run is a few seconds


@pytest.fixture(scope="module")
def nodes() -> Iterator[Nodes]:
    _root_with("ip")
    if not cgroup_v1_cpu():
        unavailable(f"no cgroup v1 cpu controller at {CPU}")
    with Fabric.netns(8, TAG + 25) as fab, Nodes(fab, samples=3, window=0.15) as n:
        yield n


def test_healthy_nodes_name_nothing_run_after_run(nodes: Nodes) -> None:
    for run in range(HEALTHY_RUNS):
        outcome = nodes.check()
        assert outcome.findings == [], (run, [f.message for f in outcome.findings])
        doc = outcome.doc
        assert [r["host"] for r in doc["nodes"]] == nodes.fab.names and doc["failed"] == []
        assert {(s["kind"], s["key"], s["nodes"]) for s in doc["stats"]} == {("compute", "cpu python", 8),
                                                                              ("memory", "host copy", 8)}  # fmt: skip
        assert all(s["median"] > 0 and s["named"] == [] for s in doc["stats"])
        assert doc["line"].endswith("none slower than 1.5x the median"), doc["line"]


def test_a_node_held_to_a_cpu_quota_is_named_exactly(nodes: Nodes) -> None:
    slow = nodes.fab.names[2]
    nodes.cpu(2, 5)
    try:
        # a conviction needs two confirmations beside control nodes; on a busy machine every node is slowed (its peers
        # too, so a node held to 10 % of a CPU is barely 1.5x slower when 12 processes share 2 cores) and the probe
        # declines rather than guesses (beside 4 busy loops on 2 cores, 10 %: 9 of 20 single checks named nobody, 2 of
        # 12 runs of three checks; none named a healthy node): 5 % of a CPU, up to three checks (bounded), and what any
        # names must be that node alone
        for _ in range(3):
            outcome = nodes.check()
            if named(outcome):
                break
    finally:
        nodes.clear()
    assert named(outcome) == {slow}, [f.message for f in outcome.findings]
    # a CPU quota slows whatever runs there: the compute probe, the memory copies or both may convict it (CI saw memory
    # alone once, under load, as in the scan's test below); each conviction is confirmed beside control nodes
    found = [f for f in outcome.findings if f.code in ("PRB001", "PRB002")]
    assert found and all(f.hosts == [slow] for f in found), [f.message for f in outcome.findings]
    assert all("then again 2 times beside 2 control nodes" in f.message for f in found)
    assert all("cpu python" in f.message for f in found if f.code == "PRB001")
    row = next(r for r in outcome.doc["nodes"] if r["host"] == slow)
    assert {"compute", "memory"} & set(row["named"]) and outcome.doc["line"].endswith(f"slow: {slow}")
    k, n = 1, len(nodes.fab.names)
    assert outcome.doc["rounds"] <= 2 * (2 * k * math.log2(n) + 2)  # per probe kind: first round + confirmations


@pytest.fixture
def throttled(netns_hosts: NetnsHosts) -> Iterator[str]:
    """Host 3's sshd, and everything it starts from now on, in a cgroup with 5% of one CPU (10% is barely slower than
    its peers on a busy 2-core machine: see the test above)."""
    if not cgroup_v1_cpu():
        unavailable(f"no cgroup v1 cpu controller at {CPU}")
    group = CPU / f"cvprobe-{os.getpid()}-sshd"
    group.mkdir()
    pid = (netns_hosts.dir / f"{netns_hosts.names[2]}-sshd.pid").read_text().strip()
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("5000")
        (group / "cgroup.procs").write_text(pid)
        yield netns_hosts.names[2]
    finally:
        (CPU / "cgroup.procs").write_text(pid)  # back to the root group, then the group can go
        for left in (group / "cgroup.procs").read_text().split():
            (CPU / "cgroup.procs").write_text(left)
        group.rmdir()


def test_scan_names_the_throttled_node_and_takes_it_out_in_every_form(
    netns_hosts: NetnsHosts, throttled: str, tmp_path: Path
) -> None:
    hosts = ",".join(netns_hosts.names)
    for _ in range(3):  # a conviction needs two confirmations beside controls: noise may defer it to a later scan
        p = subprocess.run([*VALIDATOR, "scan", hosts, "-F", str(netns_hosts.dir / "ssh_config"), "--probes", "-f",
                            "json", "--drain-list", str(tmp_path / "drain.txt")],
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        doc = json.loads(p.stdout)
        slow = [(f["code"], f["hosts"]) for f in doc["findings"] if f["code"].startswith("PRB")]
        if slow:
            break
    # a CPU quota slows whatever runs there: the compute probe, the memory copies or both may convict it
    # (CI saw memory alone once, under load); what matters is that it alone is named and taken out
    assert slow and {h for _, h in slow} == {throttled}, (p.stderr, doc["findings"])
    assert p.returncode == 0  # warnings: the job would run, slowly; the exclusion says how to take it out
    ex = doc["scan"]["exclude"]
    assert ex["hosts"] == [throttled] and throttled not in ex["keep"] and len(ex["keep"]) == 3
    assert ex["slurm"]["exclude"] == f"--exclude={throttled}" and ex["slurm"]["nodes"] == 3
    assert all(not line.startswith(f"{throttled} ") for line in ex["hostfile"]) and len(ex["hostfile"]) == 3
    assert ex["kubernetes"]["cordon"] == [f"kubectl cordon {throttled}"]
    assert (tmp_path / "drain.txt").read_text() == ""  # the drain list stays what fails: errors
    assert [r["named"] for r in doc["scan"]["probes"]["nodes"] if r["host"] == throttled] != [[]]
