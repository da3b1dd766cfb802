"""In per-rank mode one report is printed a node, by its local rank 0, the node's leader. When that leader dies
after the node's facts went up, the node's other ranks reach the coordinator directly: the one that had to says
what the verdict is about its node (red-teamed: node1's leader killed during --probes, rank 3 printed nothing while
every rank exited 1). Real `validator preflight` processes, 2 emulated nodes x 2 ranks on loopback."""

from __future__ import annotations

import os
import signal
import time

from tests.conftest import VALIDATOR
from tests.preflight.conftest import base_env, collect, ranks, start, tails


def _probing(pid: int) -> list[int]:
    """The probe worker a participant started (validator/probes/worker.py), by its parent's pid."""
    found = []
    for p in filter(str.isdecimal, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read()
        except OSError:
            continue
        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == pid and b"worker.py" in argv:
            found.append(int(p))
    return found


def test_a_nodes_other_rank_says_the_verdict_when_its_leader_died(port: int) -> None:
    envs = ranks(4, port, LOCAL_WORLD_SIZE="2")
    for r, env in enumerate(envs):
        env.update(LOCAL_RANK=str(r % 2), SLURMD_NODENAME=f"node{r // 2}")
    argv = [*VALIDATOR, "preflight", "--timeout", "90", "--probes", "--", "true"]
    procs = [(start(argv, base_env(**env), None), None, time.monotonic()) for env in envs]
    leader = procs[2][0]
    until = time.monotonic() + 90
    while time.monotonic() < until and not (workers := _probing(leader.pid)) and leader.poll() is None:
        time.sleep(0.02)
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    leader.kill()
    runs = collect(procs, limit=150)
    assert workers, "node1's leader never started its probe: " + tails(runs)
    assert [r.rc for r in (runs[0], runs[1], runs[3])] == [1, 1, 1], tails(runs)
    said = runs[3].out + runs[3].err
    assert "node1" in said and "PASSED" not in said, tails(runs)  # the report about its node, from rank 3 itself
    assert "Traceback" not in "".join(r.err for r in runs), tails(runs)
