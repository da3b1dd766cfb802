"""`validator node-check --mode slurm-prolog --drain` as slurm.conf's Prolog= on real slurmctld and
slurmd daemons: a node that fails its profile is drained with a readable reason and the job is
requeued; a node that meets it runs the job."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.operators.conftest import PrologSlurm

pytestmark = [pytest.mark.root, pytest.mark.slow]


def submit(slurm: PrologSlurm, node: str, out: Path) -> str:
    out_text = slurm.run(
        "sbatch", "--parsable", "-w", node, "-o", str(out), "--wrap", "echo job-ran-on-$SLURMD_NODENAME"
    )
    return out_text.strip().split(";")[0]


def test_a_node_that_meets_the_profile_runs_the_job(slurm_prolog: PrologSlurm, tmp_path: Path) -> None:
    slurm_prolog.profile.write_text("name: fits\nmin_shm_mib: 1\n")
    out = tmp_path / "out.txt"
    info = slurm_prolog.wait_job(submit(slurm_prolog, "n1", out), lambda j: j["JobState"] in ("COMPLETED", "FAILED"))
    assert info.get("JobState") == "COMPLETED", info
    assert out.read_text().strip() == "job-ran-on-n1"
    assert "n1" not in slurm_prolog.reasons()


def test_a_node_that_fails_the_profile_is_drained_and_the_job_requeued(
    slurm_prolog: PrologSlurm, tmp_path: Path
) -> None:
    slurm_prolog.profile.write_text("name: eight-gpus\ngpus_per_node: 8\n")
    out = tmp_path / "out.txt"
    job_id = submit(slurm_prolog, "n2", out)
    info = slurm_prolog.wait_job(
        job_id, lambda j: j["Restarts"] != "0" or j["JobState"] in ("COMPLETED", "FAILED", "CANCELLED")
    )
    # the prolog failed on n2: the batch job went back to the queue, held, and never ran
    assert info["JobState"] == "PENDING" and info["Restarts"] != "0", info
    assert "held" in info["Reason"].lower(), info
    printed = out.read_text() if out.exists() else ""  # slurmd writes the prolog failure there
    assert "job-ran-on" not in printed and "error running slurm prolog" in printed.lower(), printed
    reason = slurm_prolog.reasons().get("n2", "")
    assert reason.startswith("validator: PRF003 0 GPUs"), (reason, (slurm_prolog.dir / "prolog.log").read_text())
    state = slurm_prolog.run("sinfo", "-h", "-N", "-n", "n2", "-o", "%T").strip()
    assert state.startswith("drain"), state
    slurm_prolog.run("scancel", job_id)


def healthcheck(slurm: PrologSlurm, node: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """As HealthCheckProgram= runs it on ``node``: several slurmds share this host, so
    SLURMD_NODENAME, not the hostname, names the node."""
    env = {**slurm.env, "SLURMD_NODENAME": node}
    return subprocess.run([*VALIDATOR, "node-check", "--mode", "slurm-healthcheck", "-p", str(profile), *extra],
                          env=env, capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_healthcheck_drains_and_resumes_only_its_own_drains(slurm_prolog: PrologSlurm, tmp_path: Path) -> None:
    bad, good = tmp_path / "bad.yaml", tmp_path / "good.yaml"
    bad.write_text("name: eight-gpus\ngpus_per_node: 8\n")
    good.write_text("name: fits\nmin_shm_mib: 1\n")
    p = healthcheck(slurm_prolog, "n3", bad, "--drain")
    assert p.returncode == 1, p.stderr
    assert slurm_prolog.reasons().get("n3", "").startswith("validator: PRF003"), p.stderr
    assert "n1" not in slurm_prolog.reasons()
    # fixed: the next run resumes the node it drained
    p = healthcheck(slurm_prolog, "n3", good, "--drain", "--resume")
    assert p.returncode == 0 and "resumed n3" in p.stderr, p.stderr
    assert "n3" not in slurm_prolog.reasons()
    # a drain by someone else stays
    slurm_prolog.run("scontrol", "update", "nodename=n3", "state=drain", "reason=maintenance by ops")
    p = healthcheck(slurm_prolog, "n3", good, "--drain", "--resume")
    assert p.returncode == 0 and "resumed" not in p.stderr, p.stderr
    assert slurm_prolog.reasons().get("n3") == "maintenance by ops"


def test_a_drain_that_fails_is_one_error_line_naming_the_node(slurm_prolog: PrologSlurm, tmp_path: Path) -> None:
    """scontrol's own multi-line error becomes the one style: `validator node-check: error: NODE: ...`."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: eight-gpus\ngpus_per_node: 8\n")
    p = healthcheck(slurm_prolog, "nosuch", bad, "--drain")
    assert p.returncode == 1, p.stderr  # the verdict stands: the node fails its profile
    (line,) = [ln for ln in p.stderr.splitlines() if "drain" in ln and "FAILED" not in ln]
    assert line.startswith("validator node-check: error: nosuch: cannot drain: scontrol exited 1: "), p.stderr
    assert len(p.stderr.splitlines()) == 2 and "FAILED validator: PRF003" in p.stderr, p.stderr
