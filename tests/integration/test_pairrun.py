"""A named pair's rank 0 (validator/netcheck/pairrun.py, a child of a preflight participant) whose
rank 1 never joins does not outlive the participant: it is killed, by its pid, before the job's exec
(finish.act) and when the participant exits. Real processes: a participant stand-in that serves
rank 0 of a real gloo all_reduce on loopback (torch from this suite's interpreter), then execs a
job or exits; rank 0 waits for a rank 1 that never comes (its own timeout here is 120 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
PARTICIPANT = """
import json, sys, types
from validator.netcheck import pairrun
from validator.preflight.finish import act
answer = pairrun.run(["serve", "127.0.0.1", "lo", "120"])
print(json.dumps({"answer": answer, "pids": [p.pid for p in pairrun._serving]}), flush=True)
if sys.argv[1] == "exec":
    act(types.SimpleNamespace(command=[sys.executable, "-c", "import time; print('job', flush=True); time.sleep(30)"]), 0)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.parametrize("how", ["exec", "exit"])
def test_rank_0_whose_partner_never_joined_ends_with_the_participant(how: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", PARTICIPANT, how], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert type(first["answer"].get("port")) is int and first["answer"]["backend"] == "gloo", first
        (child,) = first["pids"]  # rank 0, serving: waiting for rank 1
        if how == "exec":
            assert proc.stdout.readline().strip() == "job"  # the job runs in the participant's place
        else:
            proc.wait(timeout=30)
        deadline = time.monotonic() + 5
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child), f"rank 0 (pid {child}) outlived the participant ({how})"
    finally:
        proc.kill()
        proc.wait()
