"""Run real `validator preflight` processes and collect what each one printed and returned."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, VALIDATOR, free_port

# Variables of the surrounding shell that would leak into the participants' launch contract.
SCRUB = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
         "NODE_RANK", "VALIDATOR_SECRET", "TORCHELASTIC_RUN_ID")  # fmt: skip


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUB and not k.startswith(("SLURM_", "PET_"))}
    env.update({"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"})
    env.update(extra)
    return env


@dataclass
class Run:
    rc: int
    out: str
    err: str
    seconds: float
    report: dict[str, Any] | None
    pid: int


def start(argv: list[str], env: dict[str, str], report: Path | None) -> subprocess.Popen[str]:
    extra = ["--output", str(report)] if report else []
    cmd = argv[:]
    if "preflight" in cmd:
        at = cmd.index("preflight") + 1
        cmd[at:at] = extra
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def collect(procs: list[tuple[subprocess.Popen[str], Path | None, float]], limit: float = 120) -> list[Run]:
    """Wait for every process (bounded), kill stragglers by pid, read their reports."""
    runs = []
    for p, report, t0 in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, limit - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER (base_env): where it hung, on its stderr
            try:
                out, err = p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
        doc = json.loads(report.read_text()) if report and report.exists() else None
        runs.append(Run(p.returncode, out, err, time.monotonic() - t0, doc, p.pid))
    return runs


def tails(runs: list[Run]) -> str:
    """Each run's exit code and the end of its stderr, as an assertion's message: a string is shown
    whole (a list's repr is cut in the middle, where a hung run's faulthandler stack is)."""
    return "\n".join(f"--- run {i}: rc {r.rc} ---\n{r.err[-2500:]}" for i, r in enumerate(runs))


def preflight(
    tmp_path: Path,
    envs: list[dict[str, str]],
    *args: str,
    command: list[str] | None = None,
    commands: list[list[str]] | None = None,
    limit: float = 120,
) -> list[Run]:
    """One `validator preflight` process per env, all started together; ``commands`` gives each
    its own wrapped command."""
    procs = []
    for n, env in enumerate(envs):
        if commands is not None:
            command = commands[n]
        env = dict(env)
        delay = env.pop("_DELAY", None)  # start this participant late (seconds)
        report = tmp_path / f"report{n}-{time.monotonic_ns()}.json"
        argv = [*VALIDATOR, "preflight", "--output", str(report), *args] + (["--", *command] if command else [])
        if delay:
            argv = ["sh", "-c", f'sleep {delay}; exec "$@"', "sh", *argv]
        procs.append((start(argv, base_env(**env), None), report, time.monotonic()))
    return collect(procs, limit)


def ranks(n: int, port: int, **common: str) -> list[dict[str, str]]:
    return [
        {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n),
         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), **common}
        for r in range(n)
    ]  # fmt: skip


def codes(run: Run) -> set[str]:
    assert run.report is not None, run.err
    return {f["code"] for f in run.report["findings"]}


def finding(run: Run, code: str) -> dict[str, Any]:
    assert run.report is not None, run.err
    hits = [f for f in run.report["findings"] if f["code"] == code]
    assert hits, f"no {code} in {run.report['findings']}\n{run.err}"
    return hits[0]


@pytest.fixture
def port() -> int:
    return free_port(span=4)  # the coordinator's candidates inside torchrun: MASTER_PORT+1, +2, +3


@contextlib.contextmanager
def holding(port: int) -> Iterator[socket.socket]:
    """Something else on the port, as a stale TCPStore would be: it accepts and never speaks."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("0.0.0.0", port))
        holder.listen(16)
        yield holder
