"""Rank placement under c10d in the wrapper (issue 24): torchrun's dynamic rendezvous numbers the
nodes in the sorted order of (fqdn or --local-addr, agent pid) (torch's dynamic_rendezvous.py,
``_mark_rendezvous_complete``), and `validator preflight -- torchrun ...` execs torchrun in place,
so the coordinator predicts every node's node rank before torchrun runs: for the group map (LAY007
with hosts) and for `--groups` in node mode.

Three "nodes" are three wrappers on loopback (told apart by SLURMD_NODENAME), each wrapping its own
real torchrun (c10d, gloo, CPU). The first one started (the lowest pid: node rank 0 by torch's rule)
starts its preflight 3 s late, so it arrives last and does not coordinate: neither arrival order nor
the coordinator's node gives the answer. The job script prints what torchrun actually assigned.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.preflight.conftest import preflight
from validator import pipeline
from validator.preflight import placement
from validator.preflight.plan import Options, plan

if TYPE_CHECKING:
    from validator.model import Facts

pytestmark = pytest.mark.slow
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
NAMES = ("node3", "node1", "node2")  # in start order: host names sort otherwise than pids
PLACED = re.compile(r"placed group_rank=(\d+) rank=(\d+) host=(\S+) agent=(\d+)")
SEAT = re.compile(r"placement: node rank (\d+) of 3 here \((\S+) pid (\d+), ranks")


def c10d(port: int, script: Path, nnodes: str = "3", nproc: int = 2) -> list[str]:
    return [TORCHRUN, f"--nnodes={nnodes}", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-conf=timeout=60", "--max-restarts=0", str(script)]  # fmt: skip


def job(tmp_path: Path) -> Path:
    """What torchrun assigned, as each worker sees it (no torch import: the workers start at once)."""
    script = tmp_path / "job.py"
    script.write_text("import os\nprint(f\"placed group_rank={os.environ['GROUP_RANK']} rank={os.environ['RANK']} "
                      "host={os.environ['SLURMD_NODENAME']} agent={os.getppid()}\", flush=True)\n")  # fmt: skip
    return script


def nodes(**extra: str) -> list[dict[str, str]]:
    return [{"SLURMD_NODENAME": n, **extra, **({"_DELAY": "3"} if i == 0 else {})} for i, n in enumerate(NAMES)]


def test_groups_in_node_mode_under_c10d_use_the_node_ranks_torchrun_assigns(tmp_path: Path, port: int) -> None:
    """--groups with tp=2 over 3 nodes x 2: each wrapper starts its 2 ranks where c10d will put them,
    rank 3 is held 2 s in its DP group and named with the node that torchrun then gives ranks 2-3."""
    envs = nodes(CV_FAULT_GROUPS="delay:dp:2@3")
    runs = preflight(tmp_path, envs, "--groups", "--layout", "tp=2", "--timeout", "60",
                     command=c10d(port, job(tmp_path)), limit=240)  # fmt: skip
    assert [r.rc for r in runs] == [0, 0, 0], [r.err[-2000:] for r in runs]
    assigned = {int(m[4]): int(m[1]) for r in runs for m in PLACED.finditer(r.out)}  # agent pid -> GROUP_RANK
    hosts = {int(m[1]): m[3] for r in runs for m in PLACED.finditer(r.out)}  # GROUP_RANK -> host
    assert len(assigned) == 3 and sorted(assigned.values()) == [0, 1, 2], [r.out for r in runs]
    for r in runs:  # the wrapper's pid is its torchrun agent's: the prediction is what torchrun did
        (seat,) = SEAT.findall(r.err)
        assert int(seat[2]) == r.pid and int(seat[0]) == assigned[r.pid], (seat, assigned)
    assert assigned[runs[0].pid] == 0, "the lowest pid is node rank 0, though it arrived last"
    err = "".join(r.err for r in runs)
    assert "groups: 5 groups (dp x2, tp x3) rehearsed on 6 ranks" in err, err[-3000:]
    assert "dynamic_rendezvous.py:833" in err
    late = [line for line in err.splitlines() if "PRE012" in line]
    assert late and f"rank 3 ({hosts[1]}) in dp group [1,3,5]" in late[0], late or err[-3000:]


def test_the_group_map_places_ranks_by_the_predicted_node_ranks(tmp_path: Path, port: int) -> None:
    """tp=3 over 3 nodes x 2: both TP groups span two nodes (LAY007), on the nodes c10d will give ranks
    0-2 and 3-5; --fail-on warning blocks, so torchrun never starts."""
    runs = preflight(tmp_path, nodes(), "--layout", "tp=3", "--fail-on", "warning", "--timeout", "60",
                     command=c10d(port, job(tmp_path)), limit=120)  # fmt: skip
    assert [r.rc for r in runs] == [1, 1, 1], [r.err[-2000:] for r in runs]
    assert not any("placed" in r.out for r in runs), "torchrun never started"
    order = [NAMES[i] for i in sorted(range(3), key=lambda i: runs[i].pid)]  # one fqdn: by pid
    report = next(r.report for r in runs if r.report and r.report.get("layout"))
    shown = report["layout"]["groups"]["tp"]["shown"]
    assert shown == [f"ranks 0-2 on {fold(order[0], order[1])}", f"ranks 3-5 on {fold(order[1], order[2])}"], shown
    assert any(f["code"] == "LAY007" for f in report["findings"]), report["findings"]
    assert any("node ranks predicted from torch's c10d rank assignment" in r.err for r in runs)
    seat = report["layout"]["placement"]  # the prediction in a field of its own, its rule named
    assert seat["source"] == "predicted" and "dynamic_rendezvous.py:833 in torch 2.13" in seat["rule"], seat
    assert seat["nodes"] == [{"host": h, "node_rank": i, "ranks": f"{2 * i}-{2 * i + 1}"} for i, h in enumerate(order)]


def test_smoke_in_node_mode_under_c10d_numbers_the_nodes_itself(tmp_path: Path, port: int) -> None:
    """--smoke under c10d in the wrapper: no node has a node rank before torchrun, so the node that
    coordinated is the smoke's rank 0 and hosts its store, the others number themselves from it;
    then torchrun runs on the same port. (It ran nothing and said nothing: the rank was None.)"""
    envs = [{"SLURMD_NODENAME": "node1"}, {"SLURMD_NODENAME": "node2"}]
    runs = preflight(tmp_path, envs, "--smoke", "--timeout", "60", command=c10d(port, job(tmp_path), nnodes="2"),
                     limit=180)  # fmt: skip
    assert [r.rc for r in runs] == [0, 0], [r.err[-2000:] for r in runs]
    assert all("smoke: all_reduce ok in" in r.err for r in runs), [r.err[-2000:] for r in runs]
    table = [r.err for r in runs if "smoke: all_reduce of 4 MiB per node" in r.err]
    assert len(table) == 1 and "node1:" in table[0] and "node2:" in table[0], [r.err[-2000:] for r in runs]
    assert sorted(m[2] for r in runs for m in PLACED.finditer(r.out)) == ["0", "1", "2", "3"]  # torchrun ran after
    (ranged,) = preflight(tmp_path, [{}], "--smoke", "--timeout", "5", command=c10d(port, job(tmp_path), nnodes="1:2"),
                          limit=60)  # fmt: skip
    assert ranged.rc == 2 and ranged.err.strip().splitlines() == [
        "validator preflight: error: --smoke cannot number the nodes: --nnodes=1:2: how many nodes start is decided at "
        "torchrun's rendezvous"
    ], ranged.err


def test_groups_in_node_mode_under_the_static_backend_use_the_given_node_ranks(tmp_path: Path, port: int) -> None:
    """--smoke and --groups together: the smoke first (it was skipped in node mode), then the groups."""
    script = job(tmp_path)
    commands = [[TORCHRUN, "--nnodes=2", "--nproc-per-node=2", f"--node-rank={n}", "--master-addr=127.0.0.1",
                 f"--master-port={port}", "--max-restarts=0", str(script)] for n in (1, 0)]  # fmt: skip
    envs = [{"SLURMD_NODENAME": "node2"}, {"SLURMD_NODENAME": "node1"}]
    runs = preflight(tmp_path, envs, "--smoke", "--groups", "--layout", "tp=2", "--timeout", "60", commands=commands,
                     limit=180)  # fmt: skip
    assert [r.rc for r in runs] == [0, 0], [r.err[-2000:] for r in runs]
    assert all("smoke: all_reduce ok in" in r.err for r in runs), [r.err[-2000:] for r in runs]
    assert "placement: node rank 1 of 2 here (node2 pid" in runs[0].err and "ranks 2-3), given" in runs[0].err
    assert "groups: 4 groups (dp x2, tp x2) rehearsed on 4 ranks" in runs[1].err, runs[1].err[-2000:]
    assert sorted(m[1] for r in runs for m in PLACED.finditer(r.out)) == ["0", "0", "1", "1"]


def test_hsdp_shard_and_replicate_groups_are_rehearsed(tmp_path: Path, port: int) -> None:
    """torchtitan's HSDP (dp_replicate 2, dp_shard -1 = 2, TP 2) over 2 nodes x 4: the rehearsal creates the
    dp_shard and dp_replicate groups of the device mesh beside DP and TP (torchtitan itself is not installed:
    torchrun then fails to start it, which is the job's own exit)."""
    toml = tmp_path / "hsdp.toml"
    toml.write_text("[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = -1\n"
                    "tensor_parallel_degree = 2\n")  # fmt: skip
    commands = [[TORCHRUN, "--nnodes=2", "--nproc-per-node=4", f"--node-rank={n}", "--master-addr=127.0.0.1",
                 f"--master-port={port}", "--max-restarts=0", "-m", "torchtitan.train", "--job.config_file", str(toml)]
                for n in (0, 1)]  # fmt: skip
    envs = [{"SLURMD_NODENAME": "node1"}, {"SLURMD_NODENAME": "node2"}]
    runs = preflight(tmp_path, envs, "--groups", "--timeout", "60", commands=commands, limit=180)
    err = "".join(r.err for r in runs)
    assert "groups: 14 groups (dp x2, dp_replicate x4, dp_shard x4, tp x4) rehearsed on 8 ranks" in err, err[-3000:]
    assert "PRE011" not in err and "No module named" in err  # rehearsed, then torchrun ran the job


def fold(a: str, b: str) -> str:
    from validator.targets import fold_hosts

    return fold_hosts([a, b])


def test_an_elastic_range_keeps_groups_per_rank_and_says_why(tmp_path: Path, port: int) -> None:
    (run,) = preflight(tmp_path, [{}], "--groups", "--layout", "tp=2", "--timeout", "5",
                       command=c10d(port, job(tmp_path), nnodes="1:2"), limit=60)  # fmt: skip
    assert run.rc == 2 and "Traceback" not in run.err, run.err
    (line,) = run.err.strip().splitlines()
    assert "--groups cannot place the ranks on the nodes: --nnodes=1:2" in line and "decided by arrival" in line


# ----------------------------------------------------------------------------- the prediction's rules


def facts_of(argv: list[str], host: str, pid: int, addr: str | None = "a.example", torch: str = "2.13.0") -> Facts:
    f = pipeline.probe_local(argv, port_check=False)
    f = {**f, "host": host, "pid": pid, "software": {**f["software"], "torch": torch}, "env": dict(f["env"])}
    if addr is not None:
        f["env"][placement.ADDR_ENV] = addr
    return f


def test_predict_sorts_by_address_then_pid_and_refuses_what_torch_would_not_do() -> None:
    argv = [TORCHRUN, "--nnodes=3", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:29400", "x.py"]
    base = pipeline.probe_local(argv, port_check=False)
    p = plan(Options(command=argv), base, None)
    a, b, c = facts_of(argv, "h1", 900, "b.example"), facts_of(argv, "h2", 50, "b.example"), facts_of(argv, "h3", 7000)
    order, why = placement.predict([a, b, c], p)
    assert order is not None and [f["host"] for f in order] == ["h3", "h2", "h1"], why
    assert placement.mine(placement.wire_doc(order, ""), b, 3) == 1
    twin = facts_of(argv, "h4", 900, "b.example")
    assert (
        placement.predict([a, b, twin], p)[1]
        == "h4 and h1 both join as b.example pid 900: torch would count them as one node"
    )
    newer = facts_of(argv, "h3", 7000, torch="2.14.0")
    assert "h3 has torch 2.14.0" in placement.predict([a, b, newer], p)[1]
    stalled = facts_of(argv, "h3", 7000, addr="")
    assert "socket.getfqdn() did not answer" in placement.predict([a, b, stalled], p)[1]
    assert placement.predict([a, b], p) == (None, "2 of 3 nodes arrived")
    assert "not once among" in str(placement.mine({"nodes": [["h1", 900]] * 3}, a, 3))
    assert placement.mine({"unknown": "why"}, a, 3) == "why"
    local = pipeline.probe_local([*argv[:1], "--local-addr=z.example", *argv[1:]], port_check=False)
    placement.record_addr(local)  # --local-addr is the address torch joins with: no lookup
    assert local["env"][placement.ADDR_ENV] == "z.example"
