"""`validator preflight --groups` (issue 24 item 4): after a pass, 8 real ranks (2 emulated nodes x 4,
told apart by SLURMD_NODENAME) create the layout's TP, PP and DP groups with gloo on loopback and
run collectives in each. A slow rank and a rank that never joins its PP group are planted by the
rehearsal's fault hook (CV_FAULT_GROUPS, read only by validator/preflight/groups.py); the processes,
torch, gloo and the sockets are real."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.preflight.conftest import base_env, collect, preflight, ranks, start, tails
from validator.preflight.groups import decide

pytestmark = pytest.mark.slow
LAYOUT = ("--groups", "--layout", "tp=2,pp=2", "--timeout", "60")


def eight(port: int) -> list[dict[str, str]]:
    envs = ranks(8, port, LOCAL_WORLD_SIZE="4")
    for r, e in enumerate(envs):
        e.update(LOCAL_RANK=str(r % 4), SLURMD_NODENAME=f"node{r // 4 + 1}")
    return envs


def test_healthy_layout_rehearses_every_group_and_runs(tmp_path: Path, port: int) -> None:
    marker = tmp_path / "ran"
    runs = preflight(tmp_path, eight(port), *LAYOUT, command=["sh", "-c", f"echo x >> {marker}"], limit=180)
    assert [r.rc for r in runs] == [0] * 8, [r.err[-800:] for r in runs if r.rc]
    assert "groups: 12 groups (dp x4, pp x4, tp x4) rehearsed on 8 ranks" in runs[0].err, runs[0].err[-800:]
    assert marker.read_text().count("x") == 8, "every rank execed the job after the rehearsal"


def test_a_slow_rank_is_named_with_its_group(tmp_path: Path, port: int) -> None:
    envs = eight(port)
    envs[5]["CV_FAULT_GROUPS"] = "delay:dp:2"
    runs = preflight(tmp_path, envs, *LAYOUT, limit=180)
    assert [r.rc for r in runs] == [0] * 8, "slow is a warning, not a block"
    lines = [line for line in runs[5].err.splitlines() if "PRE012" in line]
    assert lines and "rank 5 (node2) in dp group [" in lines[0], runs[5].err[-800:]


def test_a_rank_that_never_joins_its_pp_group_blocks_everyone(tmp_path: Path, port: int) -> None:
    marker = tmp_path / "ran"
    envs = eight(port)
    envs[6]["CV_FAULT_GROUPS"] = "exit:pp"
    runs = preflight(tmp_path, envs, *LAYOUT, command=["sh", "-c", f"echo x >> {marker}"], limit=180)
    assert all(r.rc != 0 for r in runs), [r.rc for r in runs]
    assert not marker.exists(), "nobody starts the job"
    line = next((x for x in runs[0].err.splitlines() if "PRE011" in x), "")
    assert "failed: rank 6 (node2): never reported, stopped in pp group [2,6] (held up by it: " in line, runs[0].err[
        -800:
    ]
    assert ": rank 2 (node1)" not in line.split("(held up by it:")[0], "its peers are not culprits"
    for r in runs[:6] + runs[7:]:  # one decision, the same on every rank: none gave up waiting for it
        assert "failed: rank 6 (node2): never reported" in r.err, r.err[-800:]


@pytest.mark.parametrize("held", [0, 2])
def test_a_rank_held_in_a_group_for_good_is_named_and_every_rank_ends(tmp_path: Path, port: int, held: int) -> None:
    """NCCL's init waits forever for a peer that stopped (seen on a GPU: tests/fixtures/gpu/h200/
    groups-nccl8-*.jsonl). Here one rank is held in its TP group for good (the fault hook sleeps an
    hour): rank 0, which hosts the store, decides beside its own groups (held itself, it still
    does); the held rank's child prints that decision and ends (rank 2: after it read it, since
    rank 0 and its store are gone by then); every rank names the held one, well before the hour."""
    envs = eight(port)
    envs[held]["CV_FAULT_GROUPS"] = "hang:tp"
    runs = preflight(tmp_path, envs, *LAYOUT, command=["sh", "-c", "echo RAN"], limit=240)
    assert all(r.rc == 1 and "RAN" not in r.out for r in runs), tails(runs)
    said = f"failed: rank {held} (node1): never reported, stopped in tp group [{held}-{held + 1}] (held up by it:"
    for r in runs:
        assert said in r.err, r.err[-800:]


def test_a_rank_slow_to_read_the_decision_still_gets_it_and_every_rank_runs(tmp_path: Path, port: int) -> None:
    """Rank 0's child hosts the store and used to end as soon as it had the decision itself: a rank
    that had reported but not yet read it (a busy node, here 1 s) lost the store and failed while
    the others ran the job. The store now stays until every rank that reported has read it."""
    marker = tmp_path / "ran"
    envs = ranks(4, port, LOCAL_WORLD_SIZE="2")
    for r, e in enumerate(envs):
        e.update(LOCAL_RANK=str(r % 2), SLURMD_NODENAME=f"node{r // 2 + 1}")
    envs[3]["CV_FAULT_GROUPS"] = "late:1"
    runs = preflight(tmp_path, envs, "--groups", "--layout", "tp=2,pp=2", "--timeout", "60",
                     command=["sh", "-c", f"echo x >> {marker}"], limit=180)  # fmt: skip
    assert [r.rc for r in runs] == [0] * 4, tails(runs)
    assert marker.read_text().count("x") == 4


def test_fail_on_warning_blocks_every_rank_on_a_slow_one_not_only_those_that_print_it(
    tmp_path: Path, port: int
) -> None:
    """Per rank, only local rank 0 and the rank named print the PRE012 line; with --fail-on warning
    every rank must still act on it, or the ranks that do not print it run the job alone."""
    marker = tmp_path / "ran"
    envs = ranks(4, port, LOCAL_WORLD_SIZE="2")
    for r, e in enumerate(envs):
        e.update(LOCAL_RANK=str(r % 2), SLURMD_NODENAME=f"node{r // 2 + 1}")
    envs[3]["CV_FAULT_GROUPS"] = "delay:tp:2"
    runs = preflight(tmp_path, envs, "--groups", "--layout", "tp=2,pp=2", "--timeout", "60", "--fail-on", "warning",
                     command=["sh", "-c", f"echo x >> {marker}"], limit=180)  # fmt: skip
    assert [r.rc for r in runs] == [1] * 4, tails(runs)
    assert not marker.exists(), "nobody runs the job"
    assert all("PRE012 slow in its tp groups: rank 3 (node2)" in r.err for r in runs), tails(runs)


def children(pid: int) -> list[int]:
    """``pid``'s rehearsal children (not the commands the agent runs, such as ``ip``)."""
    try:
        kids = [int(c) for t in os.listdir(f"/proc/{pid}/task")
                for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]  # fmt: skip
        return [k for k in kids if b"validator.preflight.groups" in Path(f"/proc/{k}/cmdline").read_bytes()]
    except OSError:
        return []


def test_a_participant_terminated_during_the_rehearsal_takes_its_child_with_it(tmp_path: Path, port: int) -> None:
    """SIGTERM to rank 0's participant alone (its default action: no cleanup) while its rehearsal child
    runs. The child hosts the store; left behind, it decided a pass and the three others ran the job
    without rank 0. It now ends once its participant is gone (its pid is in the child's spec: it may be
    gone before the child looks), and nobody runs the job."""
    marker = tmp_path / "ran"
    procs = []
    for r, env in enumerate(ranks(4, port, LOCAL_WORLD_SIZE="2")):
        env.update(LOCAL_RANK=str(r % 2), SLURMD_NODENAME=f"node{r // 2 + 1}")
        argv = [*VALIDATOR, "preflight", "--groups", "--layout", "tp=2,pp=2", "--timeout", "60", "--",
                "sh", "-c", f"echo x >> {marker}"]  # fmt: skip
        procs.append((start(argv, base_env(**env), None), None, time.monotonic()))
    first, until = procs[0][0], time.monotonic() + 120
    while time.monotonic() < until and not children(first.pid) and first.poll() is None:
        time.sleep(0.01)
    kids = children(first.pid)
    assert kids, "rank 0 started no rehearsal child"
    first.send_signal(signal.SIGTERM)
    runs = collect(procs, 240)
    assert runs[0].rc == -signal.SIGTERM and [r.rc for r in runs[1:]] == [1, 1, 1], tails(runs)
    assert not marker.exists(), "nobody runs the job without rank 0"
    assert all("PRE011" in r.err and "Traceback" not in r.err for r in runs[1:]), tails(runs)
    for k in kids:  # gone, or a zombie waiting for an init that does not reap
        state = Path(f"/proc/{k}/stat").read_text().split()[2] if Path(f"/proc/{k}/stat").exists() else "gone"
        assert state in ("gone", "Z"), f"rank 0's child {k} outlived it: {state}"


def test_a_rank_that_never_joins_the_rehearsal_is_named_by_every_rank(tmp_path: Path, port: int) -> None:
    """Rank 2's torch does not import (a package on its PYTHONPATH shadows it): it never joins, the others
    time out in init_process_group. Each used to print only torch's `wait timeout ... keys: /pg/0//cpu//0/2`;
    each now names rank 2 (every rank that joined leaves its mark in the store), and nobody runs the job."""
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("planted: no torch on this node")\n')
    marker = tmp_path / "ran"
    envs = ranks(4, port, LOCAL_WORLD_SIZE="2")
    for r, e in enumerate(envs):
        e.update(LOCAL_RANK=str(r % 2), SLURMD_NODENAME=f"node{r // 2 + 1}")
    envs[2]["PYTHONPATH"] = f"{shadow.parent}:{os.environ.get('PYTHONPATH', '')}"
    runs = preflight(tmp_path, envs, "--groups", "--layout", "tp=2,pp=2", "--timeout", "60",
                     command=["sh", "-c", f"echo x >> {marker}"], limit=180)  # fmt: skip
    assert [r.rc for r in runs] == [1] * 4 and not marker.exists(), tails(runs)
    assert "torch is not importable here" in runs[2].err, runs[2].err[-800:]
    for r in (0, 1, 3):
        assert "PRE011 process group rehearsal failed: rank 2 never joined the rehearsal" in runs[r].err, tails(runs)


def test_decide_names_a_silent_rank_and_a_failed_group() -> None:
    groups = {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]]}
    ok = {"late": 0.001, "s": 0.002}
    reports = {0: {"host": "a", "groups": {"tp": ok, "dp": {"error": "Timeout"}}},
               1: {"host": "a", "groups": {"tp": ok, "dp": ok}},
               2: {"host": "b", "groups": {"tp": ok, "dp": {"error": "Timeout"}}}}  # fmt: skip
    got = decide(reports, {}, groups, 4)
    assert got["error"] == "rank 3: never reported, never reached the groups; dp group [0,2]: rank 0 (a): Timeout, " \
        "rank 2 (b): Timeout"  # fmt: skip
    assert (got["ranks"], got["hosts"]) == ([0, 2, 3], ["a", "b"])  # failed or never reported (rank 3: no host known)
    healthy = {r: {"host": "h", "groups": {"tp": ok, "dp": ok}} for r in range(4)}
    assert decide(healthy, {}, groups, 4) == {
        "error": None,
        "lines": ["groups: 4 groups (dp x2, tp x2) rehearsed on 4 ranks"],
        "ranks": [],
        "hosts": [],
    }


def test_decide_names_the_rank_that_stopped_not_the_ranks_it_held_up() -> None:
    """As seen with NCCL on a GPU (tests/fixtures/gpu/h200/groups-nccl8-gone.jsonl): TP2 x PP2 x DP2,
    rank 3 stops as it enters its PP group. Rank 2, next in TP with it, hangs in NCCL's init and
    never reports either; rank 7, its PP peer, reports a store timeout. Only rank 3 is the culprit."""
    groups = {"tp": [[0, 1], [2, 3], [4, 5], [6, 7]], "dp": [[0, 2], [1, 3], [4, 6], [5, 7]],
              "pp": [[0, 4], [1, 5], [2, 6], [3, 7]]}  # fmt: skip
    ok = {"late": 0.001, "s": 0.002}
    reports = {r: {"host": f"node{r // 4}", "groups": {"tp": ok, "dp": ok, "pp": ok}} for r in (0, 1, 4, 5, 6, 7)}
    reports[7]["groups"]["pp"] = {"error": "DistBackendError: store->get('0') got error: wait timeout"}
    at = {3: {"kind": "pp", "members": [3, 7], "host": "node0"}, 2: {"kind": "tp", "members": [2, 3], "host": "node0"}}
    got = decide(reports, at, groups, 8)
    assert (got["ranks"], got["hosts"]) == ([3], ["node0"]), got
    assert got["error"] == "rank 3 (node0): never reported, stopped in pp group [3,7] (held up by it: rank 2 (node0) " \
        "waiting in tp group [2-3] for rank 3; pp group [3,7] without rank 3: rank 7 (node1): DistBackendError: " \
        "store->get('0') got error: wait timeout)"  # fmt: skip
    both = decide(reports, {**at, 2: {"kind": "tp", "members": [2, 3], "host": "node0"},
                            3: {"kind": "tp", "members": [2, 3], "host": "node0"}}, groups, 8)  # fmt: skip
    assert both["ranks"] == [2, 3], "two ranks stopped in one group: neither waits for the other, both named"
    assert decide({0: {"host": "h", "groups": {}}}, {}, {}, 1)["lines"] == [
        "groups: none of more than one rank in this layout on 1 ranks: nothing to rehearse"]  # fmt: skip
    silent = decide(reports, {}, groups, 8)
    assert silent["ranks"] == [2, 3], "nothing says where they stopped: both named, as before"


def accelerate_node(tmp_path: Path, port: int, machine_rank: int) -> list[str]:
    """`accelerate launch` of one of two machines, its launch values and FSDP1 HYBRID_SHARD in the
    config file (as `accelerate config` writes them), none on the line."""
    cfg = tmp_path / f"machine{machine_rank}.yaml"
    cfg.write_text(f"compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
                   f"  fsdp_sharding_strategy: HYBRID_SHARD\n  fsdp_version: 1\nmachine_rank: {machine_rank}\n"
                   f"main_process_ip: 127.0.0.1\nmain_process_port: {port}\nnum_machines: 2\nnum_processes: 8\n")  # fmt: skip
    return ["accelerate", "launch", "--config_file", str(cfg), "train.py"]


def gpu_nodes(tmp_path: Path, gpus: int) -> str:
    """A PATH whose `nvidia-smi` answers the inventory query with ``gpus`` H100s (lines of a real
    nvidia-smi's CSV, tests/fixtures/gpu/smi-h100x8.csv) and refuses the health query: no GPU can
    run here, so the nodes' inventory is the one part stood in for (torch sees no CUDA and the
    rehearsal runs gloo). `accelerate` is the job: it counts its runs."""
    csv = Path(__file__).resolve().parents[1] / "fixtures" / "gpu" / "smi-h100x8.csv"
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    (bin_ / "inventory.csv").write_text("".join(csv.read_text().splitlines(keepends=True)[: gpus + 1]))
    smi = bin_ / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\ncase "$*" in\n  *"--format=csv") exec cat {bin_}/inventory.csv ;;\nesac\n'
                   'echo "Field is not a valid field to query." >&2\nexit 2\n')  # fmt: skip
    job = bin_ / "accelerate"
    job.write_text(f"#!/bin/sh\necho x >> {tmp_path}/ran\n")
    for f in (smi, job):
        f.chmod(0o755)
    return f"{bin_}:{os.environ['PATH']}"


def test_fsdp1_hybrid_shard_rehearses_the_node_shard_and_replicate_groups(tmp_path: Path, port: int) -> None:
    """accelerate FSDP1 HYBRID_SHARD passes torch no process group: torch shards over
    dist.new_subgroups(torch.cuda.device_count()) (consecutive ranks: a node of 4 GPUs here) and
    replicates across them. Two wrappers of `accelerate launch` (everything in their config files)
    start their nodes' ranks; --groups creates exactly those groups, and a rank that never joins
    its shard group is named with it."""
    path = gpu_nodes(tmp_path, 4)
    commands = [accelerate_node(tmp_path, port, n) for n in (0, 1)]
    envs = [{"SLURMD_NODENAME": f"node{n + 1}", "PATH": path} for n in (0, 1)]
    runs = preflight(tmp_path, envs, "--groups", "--timeout", "60", commands=commands, limit=180)
    assert [r.rc for r in runs] == [0, 0], tails(runs)
    err = "".join(r.err for r in runs)
    assert "groups: 7 groups (dp x1, dp_replicate x4, dp_shard x2) rehearsed on 8 ranks" in err, tails(runs)
    assert "placement: node rank 1 of 2 here (node2 pid" in runs[1].err and "ranks 4-7), given" in runs[1].err
    assert (tmp_path / "ran").read_text().count("x") == 2, "both nodes ran the job after the rehearsal"
    reports = [r.report for r in runs if r.report and "layout" in r.report]
    assert reports and reports[0]["layout"]["groups"]["dp_shard"]["shown"] == ["ranks 0-3 on node1",
                                                                                "ranks 4-7 on node2"], reports  # fmt: skip

    (tmp_path / "ran").unlink()
    envs = [{**e, "CV_FAULT_GROUPS": "exit:dp_shard@6"} for e in envs]
    runs = preflight(tmp_path, envs, "--groups", "--timeout", "60", commands=commands, limit=180)
    assert all(r.rc != 0 for r in runs) and not (tmp_path / "ran").exists(), tails(runs)
    err = "".join(r.err for r in runs)
    assert "PRE011" in err and "dp_shard group [4-7]" in err and "rank 6" in err, tails(runs)
