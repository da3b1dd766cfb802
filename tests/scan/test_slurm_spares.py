"""The README's sbatch recipe for spares ("Slow or broken nodes, taken out before launch"), run for
real as it is written there: a batch job allocates 4 nodes for a job that needs 3, runs `validator
scan --slurm --probes --net-check` inside its allocation, reads `scan.exclude.hosts` and starts the
job (a python program that prints its SLURMD_NODENAME) with `srun --nodes=3 --exclude=...` on the rest.

Real parts: slurmctld and 4 slurmd (n1..n4 on this host, tests/harness/slurm-up.sh). The slow node is
planted as shared/harness/fabric-lab plants one (tests/harness/nodefab.py): n3's slurmd, and so every
step it starts (the agent, the probes, the job), in a cgroup v1 ``cpu`` group with 5 % of one CPU.
The four nodes share this machine's 2 cores, so each is given a node of its own: its slurmd in a group
with 40 % of one CPU and a high ``cpu.shares`` (the others on a busy machine do not take it). Without
that, the peers' figures spread by 30 % or more (one got a core to itself, two shared the other), and
at 4 nodes that spread, with the slow node's own distance in the MAD, hid a node 8 times slower: missed
in 1 of 6 runs at 10 %, 2 of 4 at 5 %, 1 of 4 with the 40 % groups but no shares (load 4-21); with
both, 4 of 4 runs passed at load 13-45.
n3, not n1: the batch script itself runs on the allocation's first node."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, TAG, Slurm, unavailable
from tests.harness.nodefab import CPU, cgroup_v1_cpu
from tests.scan.conftest import expand_hosts, scan_env

pytestmark = [pytest.mark.root, pytest.mark.slow]

RECIPE = re.compile(r"^<!-- run by: tests/scan/test_slurm_spares\.py -->\n```sh\n(.*?)^```", re.M | re.S)
PEER, SLOW = 40, 5  # % of one CPU: each node's share, and the slow node's
SHARES = 8192  # cpu.shares of each node's group: 8 busy processes' worth, beside a busy machine's others
JOB = "import os\nprint('ran on', os.environ['SLURMD_NODENAME'], flush=True)\n"
# the README's 18 nodes for a job of 16 become 4 for a job of 3; torchrun becomes the job above
FOR_4_NODES = {
    "#SBATCH -N 18": "#SBATCH -N 4",
    "srun --nodes=16": "srun --nodes=3",
    "bash -c 'exec torchrun --nnodes=16 ... train.py'": "python3 job.py",
}


def recipe(**more: str) -> str:
    """The README's block, for 4 nodes (each text replaced must be there: a changed README fails here)."""
    found = RECIPE.findall((ROOT / "README.md").read_text())
    assert len(found) == 1, "README.md: no single block marked run by tests/scan/test_slurm_spares.py"
    script = str(found[0])
    for old, new in {**FOR_4_NODES, **more}.items():
        assert old in script, f"README.md's recipe no longer has {old!r}"
        script = script.replace(old, new)
    return script


@dataclass
class Batch:
    rc: int
    log: str  # the batch script's stdout and stderr (the job's lines among them)
    scan: dict[str, Any] | None  # scan.json

    @property
    def ran_on(self) -> list[str]:
        return sorted(line.split()[-1] for line in self.log.splitlines() if line.startswith("ran on "))


def sbatch(slurm: Slurm, tmp_path: Path, script: str) -> Batch:
    """``script`` as a batch job (in ``tmp_path``, `validator` on PATH), waited for."""
    tmp_path.chmod(0o755)
    (tmp_path / "job.sh").write_text(script)
    (tmp_path / "job.py").write_text(JOB)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "validator").write_text(f'#!/bin/sh\nexec {sys.executable} -m validator "$@"\n')
    (bindir / "validator").chmod(0o755)
    env = {**scan_env(), "SLURM_CONF": str(slurm.conf), "PATH": f"{bindir}:{os.environ['PATH']}"}
    argv = ["sbatch", "--parsable", "--time=8", f"--job-name=cv-spares-{TAG}", f"--chdir={tmp_path}",
            f"--output={tmp_path / 'job.out'}", str(tmp_path / "job.sh")]  # fmt: skip
    job = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=True).stdout.strip()
    rc = wait(job, env)
    out, scan = tmp_path / "job.out", tmp_path / "scan.json"
    return Batch(rc, out.read_text() if out.exists() else "", json.loads(scan.read_text()) if scan.exists() else None)


def wait(job: str, env: dict[str, str], limit: float = 540) -> int:
    """The batch job's exit code, once it ended (`sbatch --wait` polls at growing intervals, up to 10 s; this, every
    0.5 s); cancelled past ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        show = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, env=env,
                              timeout=30, check=True).stdout  # fmt: skip
        state = re.search(r"\bJobState=(\S+)", show)
        if state and state.group(1) not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            code = re.search(r"\bExitCode=(\d+):(\d+)", show)
            assert code, show
            exit_code, signal = int(code.group(1)), int(code.group(2))
            return 128 + signal if signal else exit_code
        time.sleep(0.5)
    subprocess.run(["scancel", job], env=env, timeout=30, check=False)
    raise AssertionError(f"batch job {job} still running after {limit:.0f} s: cancelled")


@contextlib.contextmanager
def held(slurm: Slurm, quota: dict[str, int]) -> Iterator[None]:
    """Each node's slurmd, and every step it starts from now on, in a cgroup v1 ``cpu`` group of its
    own holding ``quota[node]`` % of one CPU; back in the root group afterwards."""
    if not cgroup_v1_cpu():
        unavailable(f"no cgroup v1 cpu controller at {CPU}")
    groups = []
    try:
        for node, percent in quota.items():
            group = CPU / f"cvspares-{os.getpid()}-{node}"
            group.mkdir()
            groups.append(group)
            (group / "cpu.cfs_period_us").write_text("100000")
            (group / "cpu.cfs_quota_us").write_text(str(percent * 1000))
            (group / "cpu.shares").write_text(str(SHARES))
            (group / "cgroup.procs").write_text((slurm.conf.parent / "run" / f"slurmd-{node}.pid").read_text().strip())
        yield
    finally:
        for group in groups:
            for left in (group / "cgroup.procs").read_text().split():  # slurmd, and a step still ending
                with open(CPU / "cgroup.procs", "w") as f:
                    f.write(left)
            group.rmdir()


def named(doc: dict[str, Any]) -> set[str]:
    return {h for f in doc["findings"] if f["code"] in ("PRB001", "PRB002", "NET105") for h in expand_hosts(f["hosts"])}


def measured(run: Batch) -> str:
    """What a failed assertion shows: the probes' figures per node, the findings, the batch log."""
    assert run.scan is not None, run.log[-3000:]
    probes = run.scan["scan"]["probes"] or {"line": "no probes", "nodes": []}
    rows = [f"{r['host']}: {r['compute']} {r['memory']}" for r in probes["nodes"]]
    findings = [f"{f['code']} {f['hosts']}: {f['message']}" for f in run.scan["findings"]]
    return "\n".join([probes["line"], *rows, *findings, run.log[-2000:], f"load {os.getloadavg()}"])


def test_the_slow_node_is_scanned_out_and_the_job_runs_on_the_other_three(slurm: Slurm, tmp_path: Path) -> None:
    slow_n3 = "n3"
    with held(slurm, {node: SLOW if node == slow_n3 else PEER for node in slurm.nodes}):
        run = sbatch(slurm, tmp_path, recipe())
    assert run.scan is not None, run.log[-3000:]
    assert named(run.scan) == {slow_n3}, measured(run)
    assert run.scan["scan"]["exclude"]["hosts"] == [slow_n3]
    assert run.ran_on == sorted(set(slurm.nodes) - {slow_n3}), run.log[-3000:]
    assert run.rc == 0, run.log[-3000:]


def test_with_nothing_planted_nothing_is_excluded_and_the_job_runs_on_three(slurm: Slurm, tmp_path: Path) -> None:
    with held(slurm, dict.fromkeys(slurm.nodes, PEER)):
        run = sbatch(slurm, tmp_path, recipe())
    assert run.scan is not None, run.log[-3000:]
    assert run.scan["scan"]["probes"]["nodes"] and run.scan["scan"]["net_check"]["nodes"] == 4  # both ran
    assert run.scan["scan"]["exclude"]["hosts"] == [], measured(run)
    ran = run.ran_on
    assert len(ran) == 3 and len(set(ran)) == 3 and set(ran) <= set(slurm.nodes), run.log[-3000:]
    assert run.rc == 0, run.log[-3000:]


def test_a_scan_that_failed_itself_starts_no_job(slurm: Slurm, tmp_path: Path) -> None:
    """Every node "without python" is the scanner's --python, not the nodes (exit 2, nothing named):
    the recipe stops rather than start the job on nodes nobody vetted."""
    run = sbatch(slurm, tmp_path, recipe(**{"--probes": "--probes --python /nonexistent/python3"}))
    assert run.scan is not None and run.scan["scan"]["exclude"]["hosts"] == [], run.log[-3000:]
    assert "scan failed (exit 2)" in run.log and run.ran_on == [], run.log[-3000:]
    assert run.rc == 1
