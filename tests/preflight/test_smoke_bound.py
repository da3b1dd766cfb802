"""`validator preflight --smoke` is bounded in time however its all_reduce stalls: it runs in a child
process of each participant, stopped by its pid (NCCL's communicator init has no deadline: on a GPU a
participant whose peer stopped waits there for good; tests/fixtures/gpu/h200/README.md). Here one of two
real participants is held in its all_reduce for good (the smoke's fault hook, CV_FAULT_SMOKE, read only
by validator/preflight/smoke.py); torch, gloo, the processes and the sockets are real."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.preflight.conftest import base_env, collect, preflight, ranks, start, tails

pytestmark = pytest.mark.slow


def test_a_participant_held_in_the_smoke_for_good_ends_and_nobody_runs_the_job(tmp_path: Path, port: int) -> None:
    envs = ranks(2, port)
    envs[1]["CV_FAULT_SMOKE"] = "hang"
    runs = preflight(tmp_path, envs, "--smoke", "--timeout", "20", command=["sh", "-c", "echo RAN"], limit=150)
    assert all(r.rc == 1 and "RAN" not in r.out for r in runs), tails(runs)
    assert "PRE006 smoke all_reduce failed: gloo all_reduce over 2 participants failed" in runs[0].err, tails(runs)
    assert "PRE006 smoke all_reduce failed: the all_reduce did not finish within 47 s" in runs[1].err, tails(runs)
    assert all("Traceback" not in r.err for r in runs), tails(runs)


@pytest.mark.parametrize("stage", ["--smoke", "--groups"])
def test_a_stage_given_to_one_participant_alone_is_the_coordinators_call(tmp_path: Path, port: int, stage: str) -> None:
    """Rank 3 alone was given --smoke (or --groups): the others ran the job at once while it waited 47 s
    in a smoke nobody else joined and failed (a split). The stages after a pass are the coordinator's,
    sent with the pass: every participant acts alike (here: no stage, all run the job)."""
    marker = tmp_path / "ran"
    procs = []
    for r, env in enumerate(ranks(4, port, LOCAL_WORLD_SIZE="2")):
        env.update(LOCAL_RANK=str(r % 2), SLURMD_NODENAME=f"node{r // 2 + 1}")
        extra = [stage] if r == 3 else []
        argv = [*VALIDATOR, "preflight", "--layout", "tp=2", "--timeout", "60", *extra, "--",
                "sh", "-c", f"echo x >> {marker}"]  # fmt: skip
        procs.append((start(argv, base_env(**env), None), None, time.monotonic()))
    runs = collect(procs, 150)
    assert [r.rc for r in runs] == [0] * 4, tails(runs)
    assert marker.read_text().count("x") == 4
    assert not any("smoke:" in r.err or "groups:" in r.err for r in runs), tails(runs)
