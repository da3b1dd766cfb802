"""Real torchrun scenarios (torch CPU, gloo) for diagnose/rehearse tests, run once per session.

All scenarios start together (different ports in 29600-29699) so the ~3.4 s torch import per
process overlaps; every process runs in its own session and is killed by pid when the fixture
ends or its time is up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
WORKER = HERE / "scripts" / "worker.py"
VENV_BIN = Path(sys.executable).parent
TORCHRUN = VENV_BIN / "torchrun"
FIXTURES = HERE.parent / "fixtures"
HARD_LIMIT_S = 90


@dataclass
class Scenario:
    name: str
    dir: Path
    logs: list[Path]
    dumps: Path
    returncodes: list[int | None]


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 - closed when the process is reaped
    return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=log.parent)


def _kill(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
    p.wait(10)


def _torchrun(port: int, nnodes: int, node_rank: int, extra: list[str]) -> list[str]:
    return [str(TORCHRUN), f"--nnodes={nnodes}", "--nproc-per-node=3", f"--node-rank={node_rank}",
            "--master-addr=127.0.0.1", f"--master-port={port}", "--rdzv-conf=timeout=6", "--max-restarts=0",
            *extra, str(WORKER)]  # fmt: skip


@pytest.fixture(scope="session")
def torch_scenarios(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Scenario]]:
    if not TORCHRUN.exists():
        pytest.skip("torchrun not installed in this environment")
    base = tmp_path_factory.mktemp("torch-scenarios")
    env0 = dict(os.environ, OMP_NUM_THREADS="1", PG_TIMEOUT_S="6", PYTHONUNBUFFERED="1")
    env0.pop("TORCHELASTIC_RUN_ID", None)
    plan = {
        # name: (port, env, torchrun extra args, nnodes)
        "mismatch": (29601, {"SCENARIO": "mismatch", "TORCH_FR_BUFFER_SIZE": "200"}, [], 1),
        "skip": (29603, {"SCENARIO": "skip", "TORCH_FR_BUFFER_SIZE": "200"}, ["--tee=3"], 1),
        "raise": (29605, {"SCENARIO": "raise"}, [], 1),
        "missing_node": (29607, {"SCENARIO": "ok"}, [], 2),  # node 1 never starts
        # torchrun --log-dir trees (attempt_0/<local rank>/stderr.log), nothing on the console
        "raise_logdir": (29609, {"SCENARIO": "raise"}, ["--redirects=3", "--log-dir=LOGDIR"], 1),
        "skip_logdir": (29611, {"SCENARIO": "skip"}, ["--redirects=3", "--log-dir=LOGDIR"], 1),
    }
    procs: list[subprocess.Popen[bytes]] = []
    scenarios: dict[str, Scenario] = {}
    for name, (port, extra_env, extra, nnodes) in plan.items():
        d = base / name
        d.mkdir()
        env = dict(env0, **extra_env, FR_DUMP_DIR=str(d / "fr"))
        log = d / "node0.log"
        extra = [a.replace("LOGDIR", str(d / "logs")) for a in extra]
        procs.append(_start(_torchrun(port, nnodes, 0, extra), env, log))
        scenarios[name] = Scenario(name, d, [log], d / "fr", [])
    deadline = time.monotonic() + HARD_LIMIT_S
    try:
        for p in procs:
            try:
                p.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(p)
        for sc, p in zip(scenarios.values(), procs, strict=True):
            sc.returncodes = [p.returncode]
        yield scenarios
    finally:
        for p in procs:
            _kill(p)
        shutil.rmtree(base, ignore_errors=True)
