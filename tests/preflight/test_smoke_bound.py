"""`validator preflight --smoke` is bounded in time however its all_reduce stalls: it runs in a child
process of each participant, stopped by its pid (NCCL's communicator init has no deadline: on a GPU a
participant whose peer stopped waits there for good; tests/fixtures/gpu/h200/README.md). Here one of two
real participants is held in its all_reduce for good (the smoke's fault hook, CV_FAULT_SMOKE, read only
by validator/preflight/smoke.py); torch, gloo, the processes and the sockets are real."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.preflight.conftest import preflight, ranks, tails

pytestmark = pytest.mark.slow


def test_a_participant_held_in_the_smoke_for_good_ends_and_nobody_runs_the_job(tmp_path: Path, port: int) -> None:
    envs = ranks(2, port)
    envs[1]["CV_FAULT_SMOKE"] = "hang"
    runs = preflight(tmp_path, envs, "--smoke", "--timeout", "20", command=["sh", "-c", "echo RAN"], limit=150)
    assert all(r.rc == 1 and "RAN" not in r.out for r in runs), tails(runs)
    assert "PRE006 smoke all_reduce failed: gloo all_reduce over 2 participants failed" in runs[0].err, tails(runs)
    assert "PRE006 smoke all_reduce failed: the all_reduce did not finish within 47 s" in runs[1].err, tails(runs)
    assert all("Traceback" not in r.err for r in runs), tails(runs)
