"""Every real launch path in front of `validator preflight`, healthy and broken (issue 9).

Two "nodes" are two wrappers on loopback, each wrapping its own torchrun command, as on two
hosts. Broken launches are decided before torchrun starts (the wrapped command is parsed, never
run), so they cost no torch start-up; healthy ones exec real torchrun (gloo, CPU) and run an
all_reduce. A run that did not decide early is killed by the test's own limit, well before its
``--timeout``: that, not a stopwatch, is what shows the verdict came early.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import HARNESS, Slurm, free_port
from tests.preflight.conftest import Run, base_env, codes, finding, holding, preflight, tails

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
ALLREDUCE = str(HARNESS / "allreduce.py")
LONG = "120"  # --timeout of broken runs: each must end long before it (test limit below)
LIMIT = 60.0
pytestmark = pytest.mark.slow


def static(node_rank: object, nnodes: object, port: int, addr: str = "127.0.0.1", *extra: str) -> list[str]:
    return [TORCHRUN, f"--nnodes={nnodes}", "--nproc-per-node=1", f"--node-rank={node_rank}", f"--master-addr={addr}",
            f"--master-port={port}", "--rdzv-conf=timeout=30", "--max-restarts=0", *extra, ALLREDUCE]  # fmt: skip


def c10d(node_rank: object, nnodes: object, port: int, addr: str = "127.0.0.1", *extra: str) -> list[str]:
    rank = [] if node_rank is None else [f"--node-rank={node_rank}"]
    return [TORCHRUN, f"--nnodes={nnodes}", "--nproc-per-node=1", "--rdzv-backend=c10d", *rank,
            f"--rdzv-endpoint={addr}:{port}", "--rdzv-conf=timeout=30,last_call_timeout=2", "--max-restarts=0",
            *extra, ALLREDUCE]  # fmt: skip


def c10d_norank(_: object, nnodes: object, port: int, addr: str = "127.0.0.1", *extra: str) -> list[str]:
    return c10d(None, nnodes, port, addr, *extra)


Launch = Callable[..., list[str]]
BACKENDS: dict[str, Launch] = {"static": static, "c10d": c10d_norank}


def broken(tmp_path: Path, commands: list[list[str]], timeout: str = LONG) -> list[Run]:
    runs = preflight(tmp_path, [{}] * len(commands), "--timeout", timeout, commands=commands, limit=LIMIT)
    assert not any("[start]" in r.out + r.err for r in runs), "torchrun never started"
    assert not any("Traceback" in r.err for r in runs), tails(runs)
    return runs


def ran(runs: list[Run], workers: int) -> None:
    assert [r.rc for r in runs] == [0] * len(runs), [r.err[-2000:] for r in runs]
    out = "".join(r.out + r.err for r in runs)
    assert out.count("[done]") == workers, out[-3000:]
    assert f"world={workers} " in out


# ----------------------------------------------------------------------------- healthy: pass and exec


def test_c10d_without_node_rank_passes_and_runs(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, [{}, {}], "--timeout", "30", commands=[c10d(None, 2, port)] * 2, limit=150)
    ran(runs, 2)
    assert "preflight PASSED: 2/2 nodes" in runs[0].err + runs[1].err


def test_c10d_with_the_same_node_rank_everywhere_passes_and_runs(tmp_path: Path, port: int) -> None:
    # torchrun ignores --node-rank with c10d ("node_rank is only used for static rdzv_backend")
    runs = preflight(tmp_path, [{}, {}], "--timeout", "30", commands=[c10d(0, 2, port)] * 2, limit=150)
    ran(runs, 2)
    assert all("RNK006" not in r.err for r in runs)


def test_a_launch_under_wrappers_passes_and_runs(tmp_path: Path, port: int) -> None:
    """`env ... timeout ... torchrun`: the wrappers are seen through (the launch is node mode, two nodes expected)
    and what execs is the whole command."""
    wrap = ["env", "VALIDATOR_WRAPPED=1", "timeout", "-k", "5", "100"]
    runs = preflight(tmp_path, [{}, {}], "--timeout", "30", commands=[[*wrap, *static(n, 2, port)] for n in (0, 1)],
                     limit=150)  # fmt: skip
    ran(runs, 2)
    assert "preflight PASSED: 2/2 nodes" in runs[0].err + runs[1].err


def test_a_wrapped_node_rank_repeated_is_named_at_once(tmp_path: Path, port: int) -> None:
    runs = broken(tmp_path, [["nice", "-n", "1", *static(0, 2, port)]] * 2)
    assert all(r.rc == 1 for r in runs) and all("RNK006" in codes(r) for r in runs), tails(runs)


def test_elastic_range_passes_with_three_of_four_after_the_last_call(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, [{}] * 3, "--timeout", "60", commands=[c10d(None, "2:4", port)] * 3, limit=200)
    ran(runs, 3)
    coordinator = next(r for r in runs if r.report and r.report["participants"] == 3 and "3/4 nodes" in r.err)
    assert coordinator.report is not None and not coordinator.report["outcomes"]


def elastic(nnodes: str, port: int, last_call: int, *extra: str) -> list[str]:
    cmd = c10d(None, nnodes, port, "127.0.0.1", *extra)
    return [f"--rdzv-conf=timeout=60,last_call_timeout={last_call}" if a.startswith("--rdzv-conf") else a for a in cmd]


def test_elastic_range_starts_at_once_and_a_late_node_is_checked_at_the_door(tmp_path: Path, port: int) -> None:
    """--nnodes=2:3, the third node 4 s late: the two decide once arrivals pause (not after the
    last call) and exec torchrun; the third meets torchrun's store on the job's port, is checked at
    the door against the two, passes, and joins torchrun's own last call: one world of 3."""
    cmd = elastic("2:3", port, 15)
    runs = preflight(tmp_path, [{}, {}, {"_DELAY": "4"}], "--timeout", "60", commands=[cmd] * 3, limit=200)
    ran(runs, 3)
    err = "".join(r.err for r in runs)
    assert "preflight PASSED: 2/3 nodes" in err and "checked against them on port" in err, err[-3000:]
    late = runs[2]
    assert "late: checked against the 2 node(s) that started" in late.err, late.err[-2000:]
    assert late.report is not None and late.report["participants"] == 3


def test_elastic_late_node_that_drifts_is_turned_away_at_the_door(tmp_path: Path, port: int) -> None:
    """The late node launches with --nnodes=2:4: the door names the drift (RNK009) and keeps it out
    (exit 1, torchrun never started there); the two that started run as a world of 2."""
    runs = preflight(tmp_path, [{}, {}, {"_DELAY": "4"}], "--timeout", "60",
                     commands=[elastic("2:3", port, 8)] * 2 + [elastic("2:4", port, 8)], limit=200)  # fmt: skip
    ran(runs[:2], 2)
    late = runs[2]
    assert late.rc == 1 and "RNK009" in codes(late), late.err[-2000:]
    assert "[start]" not in late.out + late.err
    assert "turned away (exit 1)" in runs[0].err + runs[1].err


def test_a_node_beyond_nnodes_is_turned_away_at_the_door_and_the_job_runs(tmp_path: Path, port: int) -> None:
    """c10d --nnodes=2 and a third wrapper a moment after the pass (red-teamed: it took the job's port in the
    moment before torchrun bound it, coordinated alone, and both torchruns failed 60 s later on its protocol): the
    full job's door turns it away at once (PRE003, one too many), the two run as a world of 2."""
    runs = preflight(tmp_path, [{}, {}, {"_DELAY": "1"}], "--timeout", "30", commands=[c10d(None, 2, port)] * 3,
                     limit=150)  # fmt: skip
    ran(runs[:2], 2)
    extra = runs[2]
    assert extra.rc == 1 and "[start]" not in extra.out + extra.err, tails(runs)
    if "PRE003" in codes(extra):  # it met the door (else torchrun's store already held the port: named too)
        assert "this node is one too many" in extra.err, tails(runs)
    assert "Traceback" not in "".join(r.err for r in runs), tails(runs)


def test_a_listener_on_the_door_port_is_no_door(tmp_path: Path, port: int) -> None:
    """Something else holds the port above the job's (another job's MASTER_PORT, say): the master of an elastic
    range still coordinates (red-teamed: it took itself for a late node and waited out its --timeout), without a
    door, and the job runs."""
    with holding(port + 1):
        runs = preflight(tmp_path, [{}], "--timeout", "30", commands=[c10d(None, "1:2", port)], limit=120)
    ran(runs, 1)
    assert "preflight PASSED: 1/2 nodes" in runs[0].err, tails(runs)


def test_elastic_minimum_of_one_passes_alone(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, [{}], "--timeout", "30", commands=[c10d(None, "1:4", port)], limit=120)
    ran(runs, 1)


def test_standalone_passes_and_runs(tmp_path: Path) -> None:
    cmd = [TORCHRUN, "--standalone", "--nproc-per-node=2", "--max-restarts=0", ALLREDUCE]
    runs = preflight(tmp_path, [{}], "--timeout", "30", command=cmd, limit=120)
    ran(runs, 2)


def test_srun_one_task_per_rank_passes_and_execs(slurm: Slurm, port: int) -> None:
    p = subprocess.run(
        ["srun", "-N2", "--ntasks-per-node=2", "--export=ALL", sys.executable, "-m", "validator", "preflight",
         "--timeout", "30", "--", "sh", "-c", "echo rank $SLURM_PROCID"],
        env={**base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)), "SLURM_CONF": str(slurm.conf)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(p.stdout.split()) == sorted(["rank", "0", "rank", "1", "rank", "2", "rank", "3"])
    assert p.stderr.count("preflight PASSED: 4/4 ranks") == 2, "one verdict line per node, not per rank"


# ----------------------------------------------------------------------------- broken: named, both nodes agree


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_node_is_named(tmp_path: Path, port: int, backend: str) -> None:
    (run,) = broken(tmp_path, [BACKENDS[backend](0, 2, port)], timeout="3")
    assert run.rc == 3, run.err
    assert run.report is not None
    (outcome,) = run.report["outcomes"]
    assert outcome["target"] == ("node rank 1" if backend == "static" else "1 of 2 nodes (--nnodes)")


@pytest.mark.parametrize("backend", BACKENDS)
def test_nnodes_drift_is_named_at_once(tmp_path: Path, port: int, backend: str) -> None:
    launch = BACKENDS[backend]
    # on one host either c10d node may coordinate: the one expecting 3 answers a third until its
    # deadline (every node exits with the same code), hence a deadline inside the test's limit
    runs = broken(tmp_path, [launch(0, 2, port), launch(1, 3, port)], timeout="20")
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    f = finding(runs[0], "RNK009")
    assert {f["expected"], f["actual"]} == {"2", "3"}  # one against one: either side may be named
    assert f"--nnodes={f['actual']}" in f["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_port_drift_names_the_node_on_each_side(tmp_path: Path, port: int, backend: str) -> None:
    launch = BACKENDS[backend]
    other = free_port()
    runs = broken(tmp_path, [launch(0, 2, port), launch(1, 2, other)], timeout="4")
    assert runs[0].rc == 3 and runs[0].report is not None and runs[0].report["outcomes"], runs[0].err
    assert "another master address or port" in runs[0].report["outcomes"][0]["detail"]
    # on one host both nodes own the endpoint: each waits on its own port for the other (static: node rank 1
    # coordinates in node rank 0's place once nothing hosts its port for 2 s)
    assert runs[1].rc == 3 and runs[1].report is not None, runs[1].err
    assert f":{other}," in runs[1].report["title"] and f":{port}," in runs[0].report["title"]
    assert "another master address or port" in runs[1].report["outcomes"][0]["detail"]


def test_backend_drift_is_named(tmp_path: Path, port: int) -> None:
    runs = broken(tmp_path, [static(0, 2, port), c10d(None, 2, port)])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    messages = [f["message"] for f in runs[0].report["findings"] if f["code"] == "RNK009"]  # type: ignore[index]
    assert any("--rdzv-backend=" in m for m in messages), tails(runs)  # once flaky in CI: say what it saw


def test_backend_drift_with_a_rendezvous_id_is_named_at_once(tmp_path: Path, port: int) -> None:
    """A c10d node's job id is its --rdzv-id, a static node has none: the coordinator compares the
    two launches (RNK009) instead of refusing a participant of "another job" until its deadline."""
    runs = broken(tmp_path, [static(0, 2, port), c10d(None, 2, port, "127.0.0.1", "--rdzv-id=job42")])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    messages = [f["message"] for f in runs[0].report["findings"] if f["code"] == "RNK009"]  # type: ignore[index]
    assert any("--rdzv-backend=" in m for m in messages), messages
    assert "PRE003" not in runs[1].err


def test_node_rank_one_everywhere_is_named_at_once(tmp_path: Path, port: int) -> None:
    """Nobody will host the rendezvous: the node on MASTER_ADDR coordinates in node rank 0's place
    after 1.5 s, and the node rank claimed twice is named on both (it was PRE001 at the deadline)."""
    runs = broken(tmp_path, [static(1, 2, port), static(1, 2, port)])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    assert finding(runs[0], "RNK006")["ranks"] == "1" or "node rank 1" in finding(runs[0], "RNK006")["message"]
    assert runs[0].report == runs[1].report


def test_static_node_rank_repeated_is_named_with_the_quoting_fix(tmp_path: Path, port: int) -> None:
    runs = broken(tmp_path, [static(0, 2, port), static(0, 2, port)])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    f = finding(runs[0], "RNK006")
    assert "single quotes" in f["fix"]


@pytest.mark.parametrize("backend", ["static", "c10d"])
def test_empty_node_rank_is_named_before_torchrun_refuses_it(tmp_path: Path, port: int, backend: str) -> None:
    launch = static if backend == "static" else c10d
    runs = broken(tmp_path, [launch(0, 2, port), launch("", 2, port)])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    f = finding(runs[0], "ENV004")
    assert "--node-rank" in f["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_master_address_typo_that_reaches_the_master_is_named(tmp_path: Path, port: int, backend: str) -> None:
    launch = BACKENDS[backend]  # 127.0.0.2 reaches the coordinator (bound on every address)
    runs = broken(tmp_path, [launch(0, 2, port), launch(1, 2, port, "127.0.0.2")])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    assert "RDZ001" in codes(runs[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_master_address_that_does_not_resolve_gives_up_early(tmp_path: Path, port: int, backend: str) -> None:
    launch = BACKENDS[backend]
    runs = broken(tmp_path, [launch(0, 2, port), launch(1, 2, port, "no-such-master.invalid")], timeout="12")
    assert runs[0].rc == 3, runs[0].err
    assert runs[1].rc == 1 and "did not resolve" in finding(runs[1], "PRE001")["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_master_port_held_is_named_by_every_node(tmp_path: Path, port: int, backend: str) -> None:
    launch = BACKENDS[backend]
    with holding(port):
        runs = broken(tmp_path, [launch(0, 2, port), launch(1, 2, port)])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    busy = finding(runs[0], "RDZ006")
    assert f"pid {os.getpid()}" in str(busy["actual"]) + busy["message"]
    # static: node rank 1 meets a stranger on the port; c10d on one host: node 1 owns the endpoint too
    # on one host node 1 owns the endpoint too: it sees the port's owner (static: after 1.5 s without a hello; a
    # remote node cannot tell a stranger from a stalled coordinator and says both at its deadline)
    assert "RDZ006" in codes(runs[1])


def test_json_report_is_refused_on_stdout_in_front_of_a_command(tmp_path: Path, port: int) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "validator", "preflight", "--format", "json", "--", "echo", "job output"],
        env=base_env(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 2 and p.stdout == ""
    assert "--output" in p.stderr and "Traceback" not in p.stderr


def test_coordinator_says_what_it_waits_for_and_net_check_says_what_it_tested(tmp_path: Path, port: int) -> None:
    from tests.preflight.conftest import ranks

    envs = ranks(2, port)
    # rank 1 starts late: the coordinator reports the wait on stderr once it has waited WAIT_LINE_S (10 s),
    # counted from its own start-up, which took 1.7 s of an 11 s delay in a loaded CI run (no line then)
    envs[1]["_DELAY"] = "16"
    runs = preflight(tmp_path, envs, "--timeout", "40", "--net-check", limit=90)
    assert [r.rc for r in runs] == [0, 0], tails(runs)
    waiting = [ln for ln in runs[0].err.splitlines() if ln.startswith("validator: waiting for")]
    assert waiting and waiting[0].startswith("validator: waiting for rank 1 (1/2 ranks arrived, "), runs[0].err
    assert runs[0].out == ""
    assert "net check: 2 links ok" in runs[0].err


def test_deepspeed_launcher_num_nodes_drift_is_named_before_it_starts(tmp_path: Path, port: int) -> None:
    # its command line is parsed; the drift stops both nodes before deepspeed would run
    def ds(node_rank: int, nodes: int) -> list[str]:
        return ["deepspeed", f"--num_nodes={nodes}", "--num_gpus=1", f"--node_rank={node_rank}",
                "--master_addr=127.0.0.1", f"--master_port={port}", "train.py"]  # fmt: skip

    runs = broken(tmp_path, [ds(0, 2), ds(1, 3)])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    assert "--num_nodes=3" in finding(runs[0], "RNK009")["message"]


ACCELERATE = str(Path(sys.executable).parent / "accelerate")


def accelerate(machine_rank: int, machines: int, port: int) -> list[str]:
    return [ACCELERATE, "launch", "--multi_gpu", f"--num_machines={machines}", f"--machine_rank={machine_rank}",
            "--main_process_ip=127.0.0.1", f"--main_process_port={port}", f"--num_processes={machines}",
            "--mixed_precision=no", "--dynamo_backend=no", "--rdzv_conf=timeout=30", ALLREDUCE]  # fmt: skip


def test_accelerate_launch_passes_and_runs(tmp_path: Path, port: int) -> None:
    pytest.importorskip("accelerate")  # a test dependency (pyproject); it wraps torchrun's launcher
    runs = preflight(tmp_path, [{}, {}], "--timeout", "40", commands=[accelerate(r, 2, port) for r in (0, 1)],
                     limit=180)  # fmt: skip
    ran(runs, 2)
    assert "preflight PASSED: 2/2 nodes" in runs[0].err


def test_accelerate_machine_count_drift_is_named_before_it_starts(tmp_path: Path, port: int) -> None:
    runs = broken(tmp_path, [accelerate(0, 2, port), accelerate(1, 3, port)])
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    messages = [f["message"] for f in runs[0].report["findings"] if f["code"] == "RNK009"]  # type: ignore[index]
    # --num_processes (the total) differs too: each option that differs is one finding
    assert any(m.startswith("--num_machines=") for m in messages), messages
