"""A CPU (gloo) job on GPU-less nodes is not blocked because the cluster exports NCCL_* (issue 21,
"no false blocks"): real `validator preflight -- torchrun --standalone` on this machine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import HARNESS
from tests.preflight.conftest import finding, preflight
from validator.agent.probe import GPU_SOURCES, gpus

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
ALLREDUCE = str(HARNESS / "allreduce.py")  # gloo
STANDALONE = [TORCHRUN, "--standalone", "--nproc-per-node=2", "--max-restarts=0", ALLREDUCE]
CLUSTER_NCCL = {"NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "WARN"}

pytestmark = pytest.mark.skipif(
    gpus(list(GPU_SOURCES), {}) is not None, reason="a GPU stack answers here: the job would be a GPU job"
)


@pytest.mark.slow
def test_gloo_job_with_nccl_settings_exported_passes_and_runs(tmp_path: Path) -> None:
    (run,) = preflight(tmp_path, [CLUSTER_NCCL], "--timeout", "30", command=STANDALONE, limit=120)
    assert run.rc == 0, run.err[-3000:]
    assert run.report is not None and not [f for f in run.report["findings"] if f["code"].startswith("GPU")]
    out = run.out + run.err
    assert out.count("[done]") == 2 and "world=2 " in out, out[-3000:]


def test_a_profile_asking_for_gpus_blocks_without_drain_advice(tmp_path: Path) -> None:
    """Only the job's configuration says GPUs: still an error, but nothing on the node to drain."""
    profile = tmp_path / "gpus.yaml"
    profile.write_text("name: gpus\ngpus_per_node: 2\n")
    (run,) = preflight(tmp_path, [CLUSTER_NCCL], "--timeout", "30", "--profile", str(profile), command=STANDALONE)
    assert run.rc == 1, run.err[-3000:]
    assert "[start]" not in run.out + run.err  # blocked before torchrun started
    gpu001 = finding(run, "GPU001")
    assert "only gpus_per_node: 2 (the profile) asks for GPUs" in gpu001["message"]
    assert "drain" not in gpu001["fix"], gpu001
