"""A Slurm cluster of its own for the node-check tests: the harness recipe with a Prolog= that
runs `validator node-check --mode slurm-prolog --drain`, on its own directory and ports so the
shared `slurm` fixture (and the tests using it) never see a drained node."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import PYTHON, ROOT, TAG, run_harness, service_dir, unavailable


@dataclass
class PrologSlurm:
    dir: Path
    conf: Path
    nodes: list[str]

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def profile(self) -> Path:
        """The profile the prolog checks the node against (tests write it before submitting)."""
        return self.dir / "profile.yaml"

    def run(self, *cmd: str, env: dict[str, str] | None = None) -> str:
        p = subprocess.run(cmd, env=env or self.env, capture_output=True, text=True, timeout=30, check=False)
        assert p.returncode == 0, f"{' '.join(cmd)}: {p.stderr}"
        return p.stdout

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o` as a dict (JobState, Reason, ...)."""
        line = self.run("scontrol", "show", "job", "-o", job_id).strip()
        return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)

    def wait_job(self, job_id: str, done: Callable[[dict[str, str]], bool], limit_s: float = 90) -> dict[str, str]:
        """Poll the job until ``done`` holds for it (bounded); its last state either way."""
        deadline = time.monotonic() + limit_s
        info = self.job(job_id)
        while not done(info) and time.monotonic() < deadline:
            time.sleep(0.5)
            info = self.job(job_id)
        return info

    def reasons(self) -> dict[str, str]:
        """node -> drain reason, as `sinfo -R` shows it."""
        out = self.run("sinfo", "-R", "-h", "-N", "-o", "%N|%E")
        return {n: r for line in out.splitlines() if "|" in line for n, r in [line.split("|", 1)]}


@pytest.fixture(scope="module")
def slurm_prolog() -> Iterator[PrologSlurm]:
    if os.geteuid() != 0:
        unavailable("needs root")
    for b in ("slurmctld", "slurmd", "sbatch", "scontrol", "sinfo"):
        if not shutil.which(b):
            unavailable(f"{b} not installed (see .ci/run)")
    d = service_dir("slurm-prolog")
    prolog = d / "prolog.sh"
    prolog.write_text(
        "#!/bin/sh\n# Slurm runs this as root before each job on the node (slurm.conf Prolog=).\n"
        f"export PYTHONPATH={ROOT} SLURM_CONF={d}/slurm.conf PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"
        f"exec {PYTHON} -m validator node-check --mode slurm-prolog --drain --profile {d}/profile.yaml "
        f"2>>{d}/prolog.log\n"
    )
    prolog.chmod(0o755)
    base = 29000 + TAG % 300 * 10
    env = {"SLURM_HARNESS_DIR": str(d), "SLURM_HARNESS_BASEPORT": str(base), "SLURM_HARNESS_CTLPORT": str(base + 9),
           "SLURM_HARNESS_EXTRA_CONF": f"Prolog={prolog}"}  # fmt: skip
    try:
        run_harness("slurm-up.sh", "3", "none", env=env)
        yield PrologSlurm(d, d / "slurm.conf", ["n1", "n2", "n3"])
    finally:
        run_harness("slurm-down.sh", env=env)
