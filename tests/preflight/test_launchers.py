"""Preflight in front of real launchers: torchrun (gloo, CPU), Slurm srun, network-namespace hosts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HARNESS, NetnsHosts, Slurm
from tests.preflight.conftest import base_env, finding, holding, preflight, ranks
from validator.targets import expand

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
ALLREDUCE = str(HARNESS / "allreduce.py")
pytestmark = pytest.mark.slow


def torchrun(node_rank: int, nnodes: int, port: int) -> list[str]:
    return [TORCHRUN, f"--nnodes={nnodes}", "--nproc-per-node=2", f"--node-rank={node_rank}", "--master-addr=127.0.0.1",
            f"--master-port={port}", "--rdzv-conf=timeout=30", "--max-restarts=0", ALLREDUCE]  # fmt: skip


def test_wrapped_torchrun_two_nodes_pass_and_run(tmp_path: Path, port: int) -> None:
    envs = [{"PG_TIMEOUT_S": "30"}] * 2
    done = preflight(tmp_path, envs, "--timeout", "30", commands=[torchrun(n, 2, port) for n in (0, 1)], limit=150)
    assert [r.rc for r in done] == [0, 0], [r.err[-2000:] for r in done]
    results = "".join(r.out + r.err for r in done)
    assert results.count("result=10.0 expected=10.0") == 4, "all four workers ran their all_reduce"
    assert done[0].report is not None and done[0].report["participants"] == 2


def test_nnodes_mismatch_caught_before_torchrun_runs(tmp_path: Path, port: int) -> None:
    # torchrun alone runs this with WORLD_SIZE=4 and exits 0 (../shared/logs/torch-nnodes_mismatch.log)
    commands = [torchrun(0, 2, port), torchrun(1, 3, port)]
    done = preflight(tmp_path, [{}, {}], "--timeout", "20", commands=commands, limit=60)
    assert [r.rc for r in done] == [1, 1]
    assert not any("[start]" in r.out + r.err for r in done), "torchrun never started"
    f = finding(done[0], "RNK009")
    assert "--nnodes=3" in f["message"] and f["expected"] == "2" and f["actual"] == "3"


def per_rank_inside_torchrun(port: int, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TORCHRUN, "--nnodes=1", "--nproc-per-node=2", f"--master-port={port}", "--rdzv-conf=timeout=30",
         "-m", "validator.preflight", "--timeout", "30", "--output", str(out)],
        env=base_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_per_rank_mode_inside_torchrun(tmp_path: Path, port: int) -> None:
    out = tmp_path / "rank.json"
    p = per_rank_inside_torchrun(port, out)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stderr.count("preflight PASSED: 2/2 ranks") == 1, "one report per node, not one per rank"
    report = json.loads(out.read_text())
    assert report["participants"] == 2 and not report["findings"]
    assert f"127.0.0.1:{port + 1}," in report["title"], "the first port after the agent's store"


def test_per_rank_mode_inside_torchrun_moves_past_a_held_port(tmp_path: Path, port: int) -> None:
    out = tmp_path / "rank.json"
    with holding(port + 1):  # MASTER_PORT+1 belongs to someone else: the next candidate is used
        p = per_rank_inside_torchrun(port, out)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"127.0.0.1:{port + 2}," in json.loads(out.read_text())["title"]


def test_smoke_all_reduce_after_a_pass(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, ranks(2, port), "--timeout", "30", "--smoke", command=["sh", "-c", "echo after-smoke"])
    assert [r.rc for r in runs] == [0, 0], [r.err[-1500:] for r in runs]
    assert all(r.out.strip() == "after-smoke" for r in runs)
    assert all("smoke: all_reduce ok in" in r.err for r in runs), "a smoke test that passed says it ran"
    timed = [r for r in runs if "smoke: all_reduce of 4 MiB per node: median" in r.err]
    assert len(timed) == 1, "rank 0 alone prints every node's time and bus bandwidth"
    assert timed[0].err.count(" GB/s") == 1, "both ranks run on one host: one row for the node, its slowest rank"


def test_srun_one_task_per_node_passes_and_execs(slurm: Slurm, tmp_path: Path, port: int) -> None:
    p = subprocess.run(
        ["srun", "-N2", "--ntasks-per-node=1", "--export=ALL", sys.executable, "-m", "validator", "preflight",
         "--timeout", "30", "--", "sh", "-c", "echo ran on $SLURMD_NODENAME"],
        env={**base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)), "SLURM_CONF": str(slurm.conf)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(p.stdout.split()) == sorted(["ran", "on", "n1", "ran", "on", "n2"])
    assert "preflight PASSED: 2/2 ranks" in p.stderr


def test_srun_task_with_wrong_env_names_its_node(slurm: Slurm, tmp_path: Path, port: int) -> None:
    script = (
        'if [ "$SLURM_NODEID" = 1 ]; then export WORLD_SIZE=3; fi; '
        f"exec {sys.executable} -m validator preflight --timeout 20 --output {tmp_path}/r$SLURM_PROCID.json"
    )
    p = subprocess.run(
        ["srun", "-N2", "-w", "n[1-2]", "--ntasks-per-node=1", "--export=ALL", "bash", "-c", script],
        env={**base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2"), "SLURM_CONF": str(slurm.conf)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr[-3000:]
    report = json.loads((tmp_path / "r0.json").read_text())
    bad = [f for f in report["findings"] if f["code"] == "RNK004"]
    assert bad and bad[0]["hosts"] == "n2" and bad[0]["ranks"] == "1", report["findings"]


@pytest.mark.root
def test_net_check_finds_an_interface_that_cannot_reach_the_others(netns_hosts: NetnsHosts, tmp_path: Path) -> None:
    h = netns_hosts
    ns = h.names[1]
    # an interface with an address on a network no other host is on (a veth pair inside one host)
    subprocess.run(["ip", "-n", ns, "link", "add", "cvbad0", "type", "veth", "peer", "name", "cvbad1"], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "addr", "add", "10.77.7.7/24", "dev", "cvbad0"], check=True)
        for dev in ("cvbad0", "cvbad1"):
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)

        def run_pair(bad: bool, port: int) -> list[tuple[int, dict[str, object]]]:
            procs = []
            for i in (0, 1):
                env = base_env(RANK=str(i), LOCAL_RANK="0", WORLD_SIZE="2", GROUP_RANK=str(i),
                               MASTER_ADDR=h.addrs[0], MASTER_PORT=str(port))  # fmt: skip
                if bad and i == 1:  # a CPU job (NCCL_* alone would not make it a GPU job): Gloo's interface
                    env["GLOO_SOCKET_IFNAME"] = "cvbad0"
                out = tmp_path / f"net{int(bad)}-{i}.json"
                cmd = h.exec(i, sys.executable, "-m", "validator", "preflight", "--net-check", "--timeout", "20",
                             "--output", str(out))  # fmt: skip
                procs.append(
                    (subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out)
                )
            results = []
            for proc, out in procs:
                try:
                    proc.communicate(timeout=90)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
                results.append((proc.returncode, json.loads(out.read_text())))
            return results

        good = run_pair(False, 29811)
        assert [rc for rc, _ in good] == [0, 0], good
        bad = run_pair(True, 29812)
        assert {rc for rc, _ in bad} == {1}
        pre = [f for f in bad[0][1]["findings"] if f["code"] == "NET101"]  # type: ignore[union-attr]  # PRE005 until 0.1.0
        assert pre, bad[0][1]
        assert set(expand(pre[0]["hosts"])) == {h.names[0], h.names[1]}
        assert "cvbad0" in pre[0]["message"] and "10.77.7.7" in pre[0]["message"]
    finally:
        subprocess.run(["ip", "-n", ns, "link", "del", "cvbad0"], check=False)
