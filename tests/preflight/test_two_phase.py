"""The two-phase verdict (issue 21): a pass is proposed, every counted participant confirms it, and
only then does the coordinator say go; no rank execs or exits 0 without the go. Real
`validator preflight` processes on loopback, killed and stopped with real signals; two emulated
nodes on one machine are told apart by SLURMD_NODENAME (the name node-local aggregation uses)."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from tests.conftest import VALIDATOR
from tests.preflight.conftest import base_env, collect, finding, ranks, start


def listening(port: int, limit: float = 30.0) -> None:
    """Wait (bounded) until something accepts on the port."""
    until = time.monotonic() + limit
    while time.monotonic() < until:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} after {limit:g} s")


def two_nodes(port: int, late: int, delay: float) -> list[dict[str, str]]:
    """8 ranks as 2 nodes x 4 (node-local aggregation: a leader per node); ``late`` starts ``delay`` s late."""
    envs = ranks(8, port, LOCAL_WORLD_SIZE="4")
    for r, e in enumerate(envs):
        e.update(LOCAL_RANK=str(r % 4), SLURMD_NODENAME=f"node{r // 4 + 1}", GROUP_RANK=str(r // 4))
    envs[late]["_DELAY"] = str(delay)
    return envs


def launch(tmp_path: Path, envs: list[dict[str, str]], *args: str, command: list[str] | None = None) -> list:
    procs = []
    for n, env in enumerate(envs):
        env = dict(env)
        delay = env.pop("_DELAY", None)
        report = tmp_path / f"report{n}.json"
        argv = [*VALIDATOR, "preflight", "--output", str(report), *args] + (["--", *command] if command else [])
        if delay:
            argv = ["sh", "-c", f'sleep {delay}; exec "$@"', "sh", *argv]
        procs.append((start(argv, base_env(**env), None), report, time.monotonic()))
    return procs


def test_rank_killed_after_its_facts_fails_everyone_and_is_named(tmp_path: Path, port: int) -> None:
    """Rank 6 (a node leader's member) and rank 2 (on the coordinator's node) die after sending
    their facts, before the verdict; the last rank arrives later and completes the count. The old
    coordinator said PASSED 8/8 and the live ranks execed the job."""
    marker = tmp_path / "started"
    procs = launch(tmp_path, two_nodes(port, late=3, delay=8), "--timeout", "60",
                   command=["sh", "-c", f"echo x >> {marker}"])  # fmt: skip
    time.sleep(3.5)  # everyone but rank 3 has sent its facts
    for r in (2, 6):
        procs[r][0].kill()
    runs = collect(procs)
    live = [run for r, run in enumerate(runs) if r not in (2, 6)]
    assert [run.rc for run in live] == [1] * 6, [run.err[-600:] for run in live]
    assert not marker.exists(), "no rank started the job"
    gone = finding(live[0], "PRE010")
    assert gone["ranks"] == "2,6", gone
    assert "rank 2: connection closed" in gone["message"], gone["message"]
    assert all(run.report == live[0].report for run in live), "one report for every live rank"


def test_rank_stopped_before_the_go_is_named_after_the_window(tmp_path: Path, port: int) -> None:
    """A member that is SIGSTOPped cannot confirm: its leader lists it as lost within 3 s."""
    procs = launch(tmp_path, two_nodes(port, late=3, delay=14), "--timeout", "60")
    time.sleep(9)  # every rank but rank 3 has sent its facts, even on a loaded machine
    stopped = procs[5][0]
    os.kill(stopped.pid, signal.SIGSTOP)
    try:
        time.sleep(12)  # the late rank arrives at 14 s; the leader's window is 3 s
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
    runs = collect(procs)
    assert {run.rc for r, run in enumerate(runs) if r != 5} == {1}, [run.err[-600:] for run in runs]
    gone = finding(runs[0], "PRE010")
    assert gone["ranks"] == "5" and "no confirmation" in gone["message"], gone


def test_stalled_coordinator_gives_one_answer(tmp_path: Path, port: int) -> None:
    """The coordinator is stopped for 12 s while the last rank arrives: the late rank keeps trying
    (a silent listener is not another program) and everyone passes when it resumes."""
    procs = launch(tmp_path, two_nodes(port, late=7, delay=2.5), "--timeout", "60")
    time.sleep(1.5)
    os.kill(procs[0][0].pid, signal.SIGSTOP)
    try:
        time.sleep(12)
    finally:
        os.kill(procs[0][0].pid, signal.SIGCONT)
    runs = collect(procs)
    assert [run.rc for run in runs] == [0] * 8, [run.err[-600:] for run in runs]
    assert "PRE002" not in runs[7].err


def test_stopped_coordinator_every_live_rank_says_so(tmp_path: Path, port: int) -> None:
    """A coordinator that never resumes: every other rank ends with the same exit code and says
    the coordinator stopped answering, not that another program holds the port."""
    procs = launch(tmp_path, [dict(e, LOCAL_WORLD_SIZE="1", LOCAL_RANK="0") for e in ranks(3, port)], "--timeout", "8")
    listening(port)  # the coordinator is up: it stops answering from now on
    os.kill(procs[0][0].pid, signal.SIGSTOP)
    try:
        runs = collect(procs[1:], limit=60)
    finally:
        os.kill(procs[0][0].pid, signal.SIGKILL)
        procs[0][0].communicate()
    assert [run.rc for run in runs] == [1, 1], [run.err[-600:] for run in runs]
    for run in runs:
        assert "stopped answering" in finding(run, "PRE001")["message"], run.err[-800:]
        assert "PRE002" not in run.err


def test_decided_failure_does_not_hold_the_master_to_the_deadline(tmp_path: Path, port: int) -> None:
    """A failure no late arrival can fix is decided at once; the master answers late arrivals for
    at most 10 s, says so once, and exits (it used to stay until the 60 s deadline)."""
    envs = [dict(e, LOCAL_WORLD_SIZE="1", LOCAL_RANK="0") for e in ranks(3, port)]
    envs[1]["WORLD_SIZE"] = "4"  # drift: decisive; rank 2 never comes
    procs = launch(tmp_path, envs[:2], "--timeout", "60")
    runs = collect(procs, limit=90)
    assert [run.rc for run in runs] == [1, 1], [run.err[-600:] for run in runs]
    assert runs[0].seconds < 30, f"the master exited {runs[0].seconds:.0f} s after start (deadline 60 s)"
    assert runs[0].err.count("answering late arrivals") == 1, runs[0].err[-600:]


def test_at_the_deadline_no_late_answering_is_announced(tmp_path: Path, port: int) -> None:
    """A rank never comes: at the deadline the verdict (MISSING) is final and nothing is left to answer; the master
    does not announce "answering late arrivals for 0 s" (red-teamed: it did)."""
    envs = [dict(e, LOCAL_WORLD_SIZE="1", LOCAL_RANK="0") for e in ranks(2, port)]
    procs = launch(tmp_path, envs[:1], "--timeout", "3")
    (run,) = collect(procs, limit=60)
    assert run.rc == 3, run.err[-600:]
    assert "MISSING" in run.err and "answering late arrivals" not in run.err, run.err[-600:]
