"""`validator check` on raw agent documents, as a subprocess: the real agent's output on this
machine with its ``ib`` reading taken by the real collector from sysfs trees built of public
ibstat/show_gids outputs (tests/fixtures/ib), one tree and one environment per node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.ibtree import raw
from validator.agent.probe import collect

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ("ibstat-roce-200.txt", "show_gids-pod-macvlan.txt")


def agent_doc(tmp_path: Path, host: str, env: dict[str, str], change: dict[str, str | None]) -> Path:
    doc = collect(environ={"SLURMD_NODENAME": host, **env}, port_check=False, gpu_sources=())
    doc["hostname"] = host
    doc["ib"] = raw(tmp_path / host, *FIXTURES, change=change)
    path = tmp_path / f"{host}.json"
    path.write_text(json.dumps(doc))
    return path


def test_check_names_the_node_that_would_fall_back_to_sockets(tmp_path: Path) -> None:
    hca = {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"}
    files = [
        agent_doc(tmp_path, "gpu001", hca, {}),
        agent_doc(tmp_path, "gpu002", hca, {f"mlx5_{d}/ports/1/state": "1: DOWN" for d in (0, 1)}),
        agent_doc(tmp_path, "gpu003", hca, {}),
    ]
    profile = tmp_path / "gpu.yaml"  # the job's GPUs: NCCL_* alone no longer says so (GPU001's evidence rule)
    profile.write_text("gpus_per_node: 8\n")
    cmd = [sys.executable, "-m", "validator", "check", *map(str, files), "--profile", str(profile), "--select", "IB",
           "--format", "json"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert p.returncode == 1, p.stderr
    found = {(f["code"], f["hosts"]) for f in json.loads(p.stdout)["findings"]}
    assert found == {("IB001", "gpu002"), ("IB004", "gpu002")}, p.stdout
