"""Who a participant is: its process's token, not its host and pid. Ranks in containers of their own share a host
name and are each pid 1 (one container per GPU on the host's network, `hostNetwork` pods); a rank restarted in place
after it died has the rank of the dead one. Each was refused as an impostor or counted twice, blocking a healthy job
(docs/preflight.md, "Identity"). And a rank whose output is closed acts on the verdict as the others do. Real
processes in real pid namespaces (`unshare -p`), on loopback."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import VALIDATOR
from tests.preflight.conftest import base_env, collect, ranks, start

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")


def _run(tmp_path: Path, env: dict[str, str], n: int, *prefix: str) -> tuple[object, Path, float]:
    report = tmp_path / f"report{n}-{time.monotonic_ns()}.json"
    argv = [*prefix, *VALIDATOR, "preflight", "--output", str(report), "--timeout", "30", "--", "true"]
    return start(argv, base_env(**env), None), report, time.monotonic()


@pytest.mark.parametrize("aggregated", [False, True])  # each rank direct, or through its node's leader (node-local)
def test_ranks_that_are_each_pid_1_on_one_host_pass(tmp_path: Path, port: int, aggregated: bool) -> None:
    envs = ranks(2, port)
    for e in envs if not aggregated else ():
        del e["LOCAL_WORLD_SIZE"]  # no node-local aggregation: each rank connects to the coordinator
    runs = collect([_run(tmp_path, e, n, "unshare", "-p", "-f", "--mount-proc") for n, e in enumerate(envs)], 90)
    assert [r.rc for r in runs] == [0, 0], [r.err[-1500:] for r in runs]
    assert runs[0].report is not None and runs[0].report["participants"] == 2
    assert all("PRE003" not in r.err and "PRE004" not in r.err for r in runs)


@pytest.mark.parametrize("pid_1", [False, True])  # a new pid, or pid 1 again (a container restarted in place)
def test_a_rank_killed_after_its_facts_and_restarted_passes(tmp_path: Path, port: int, pid_1: bool) -> None:
    """Rank 1 sends its facts, is killed (SIGKILL: its connection closes) and is started again before rank 2 comes:
    the new process takes the dead one's place (it was a duplicate rank 1, or refused as an impostor of itself)."""
    prefix = ("unshare", "-p", "-f", "--mount-proc", "--kill-child") if pid_1 else ()  # the kill reaches pid 1
    envs = ranks(3, port)
    for e in envs:
        del e["LOCAL_WORLD_SIZE"]  # each rank connects to the coordinator itself
    first = [_run(tmp_path, envs[0], 0), _run(tmp_path, envs[1], 1, *prefix)]
    victim = first[1][0]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(  # rank 1 is connected to the coordinator: it sent its facts
        c.status == psutil.CONN_ESTABLISHED and c.raddr and c.raddr[1] == port
        for p in (psutil.Process(victim.pid), *psutil.Process(victim.pid).children(recursive=True))  # type: ignore[attr-defined]
        for c in p.net_connections("tcp")
    ):
        time.sleep(0.1)
    time.sleep(0.5)
    victim.send_signal(signal.SIGKILL)  # type: ignore[attr-defined]
    victim.wait(timeout=10)  # type: ignore[attr-defined]
    again = _run(tmp_path, envs[1], 3, *prefix)
    time.sleep(1.0)
    runs = collect([first[0], again, _run(tmp_path, envs[2], 2)], 90)
    assert [r.rc for r in runs] == [0, 0, 0], [r.err[-1500:] for r in runs]
    assert runs[0].report is not None and runs[0].report["participants"] == 3


@pytest.mark.parametrize("closed", [">&-", "2>&-", "2>&1 | true"])  # stdout, stderr closed; a reader gone (EPIPE)
def test_a_rank_with_its_output_closed_execs_as_the_others_do(tmp_path: Path, port: int, closed: str) -> None:
    """A supervisor or a daemon's wrapper starts rank 1 with its output closed: it confirmed the pass, then crashed
    printing the verdict, never exec'd, while rank 0 started the job (the split the two phases exist to prevent)."""
    envs = ranks(2, port)
    procs = []
    for n, env in enumerate(envs):
        ran = tmp_path / f"ran{n}"
        argv = [*VALIDATOR, "preflight", "--timeout", "30", "--", "sh", "-c", f"echo > {ran}"]
        if n == 1:
            argv = ["sh", "-c", f'"$@" {closed}', "sh", *argv]
        procs.append((start(argv, base_env(**env), None), None, time.monotonic()))
    runs = collect(procs, 90)
    assert [r.rc for r in runs] == [0, 0], [r.err[-1500:] for r in runs]
    assert (tmp_path / "ran0").exists() and (tmp_path / "ran1").exists()


def test_a_rank_of_another_job_on_the_port_is_told_so(tmp_path: Path, port: int) -> None:
    """Two jobs configured with one MASTER_PORT: the other job's rank is refused, and told that another job's
    preflight may hold the port (it was told only to give every participant the same job id)."""
    envs = ranks(2, port)
    procs = [(start([*VALIDATOR, "preflight", "--timeout", "8", "--job-id", job, "--", "true"], base_env(**env), None),
              None, time.monotonic()) for job, env in zip(("job-a", "job-b"), envs, strict=True)]  # fmt: skip
    runs = collect(procs, 60)
    assert runs[1].rc == 1 and "PRE003" in runs[1].err, runs[1].err[-1500:]
    assert "another job's preflight holds this port" in runs[1].err, runs[1].err[-1500:]
