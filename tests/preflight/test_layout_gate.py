"""The parallel layout at the gate (docs/layout.md): real `validator preflight` ranks on loopback,
8 ranks as 2 emulated nodes x 4 (SLURMD_NODENAME names each rank's node), the layout read from the
wrapped command's own Megatron arguments."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.preflight.conftest import finding, preflight, ranks


def job(*megatron: str) -> list[str]:
    """A command that prints [ran] and carries Megatron's arguments (python -c ignores them)."""
    return [sys.executable, "-c", "print('[ran]')", *megatron]


def envs(port: int) -> list[dict[str, str]]:
    """Ranks 0-3 on node1, 4-7 on node2."""
    return [env | {"SLURMD_NODENAME": f"node{1 + r // 4}", "GROUP_RANK": str(r // 4), "LOCAL_RANK": str(r % 4),
                   "LOCAL_WORLD_SIZE": "4"} for r, env in enumerate(ranks(8, port))]  # fmt: skip


def test_layout_that_does_not_divide_blocks_every_rank(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, envs(port), "--timeout", "30", command=job("--tensor-model-parallel-size", "3"))
    assert [r.rc for r in runs] == [1] * 8, runs[0].err[-2000:]
    assert "world 8 % (tp 3 x pp 1 x cp 1 = 3) = 2" in finding(runs[0], "LAY002")["message"]
    assert not any("[ran]" in r.out for r in runs)


def test_healthy_megatron_layout_passes_runs_and_maps_its_groups(tmp_path: Path, port: int) -> None:
    command = job("--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "8",
                  "--global-batch-size", "16", "--micro-batch-size", "2")  # fmt: skip
    runs = preflight(tmp_path, envs(port), "--timeout", "30", command=command)
    assert [r.rc for r in runs] == [0] * 8, runs[0].err[-2000:]
    assert all("[ran]" in r.out for r in runs)
    report = runs[0].report
    assert report is not None and report["layout"]["degrees"]["dp"] == 2
    assert report["layout"]["groups"]["pp"]["shown"][0] == "ranks 0,4 on node[1-2]"
    assert report["layout"]["groups"]["tp"]["spanning"] == 0


def test_tp_spanning_the_two_nodes_is_a_warning_named(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, envs(port), "--timeout", "30", command=job("--tensor-model-parallel-size", "8"))
    assert [r.rc for r in runs] == [0] * 8, runs[0].err[-2000:]  # slow, not broken: the job runs
    f = finding(runs[0], "LAY007")
    assert f["severity"] == "warning" and f["hosts"] == "node[1-2]" and f["ranks"] == "0-7"
