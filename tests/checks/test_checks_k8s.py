"""Checks for pod contracts: ENV006 (Kubeflow v1 nprocPerNode > 1 without torchrun), RNK010
(node count differs), RNK011 (node rank outside the node count). Facts come from parse_launch
over the env a controller and the example manifests give a pod (docs/kubernetes.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import check, fires, node_job, only, tweak
from validator.agent.probe import filtered_env
from validator.facts.command import parse_command
from validator.facts.launch import parse_launch
from validator.model import Facts


def pods(envs: list[dict[str, str]], argv: list[str] | None = None) -> list[Facts]:
    """One participant per pod, hosts node001..., with the launch contract parsed from ``envs``."""
    job = node_job(len(envs), 1, gpus=0)
    for i, raw in enumerate(envs):
        env = filtered_env(raw)
        launch: Any = parse_launch(env, parse_command(argv) if argv else None)
        job = tweak(job, i, launch=launch, env=env)
    return job


def kubeflow_v1(nodes: int, nproc: int) -> list[dict[str, str]]:
    """What training-operator v1 injects into the training container (envvar.go, reference §1.4)."""
    return [
        {"MASTER_ADDR": "llama-master-0", "MASTER_PORT": "23456", "PET_MASTER_ADDR": "llama-master-0",
         "PET_MASTER_PORT": "23456", "WORLD_SIZE": str(nodes * nproc), "RANK": str(n), "PET_NODE_RANK": str(n),
         "PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(nproc), "PYTHONUNBUFFERED": "0"}
        for n in range(nodes)
    ]  # fmt: skip


def indexed(nodes: int, nnodes: int | None = None) -> list[dict[str, str]]:
    return [
        {"JOB_COMPLETION_INDEX": str(i), "NNODES": str(nnodes or nodes), "MASTER_ADDR": "train-0.train",
         "MASTER_PORT": "29501", "VALIDATOR_JOB_ID": "uid-1"}
        for i in range(nodes)
    ]  # fmt: skip


@fires("ENV006")
def test_kubeflow_nproc_per_node_with_plain_python_is_caught() -> None:
    job = pods(kubeflow_v1(2, 8), ["python", "train.py", "--epochs", "3"])
    f = only(check(job, "ENV006"))
    assert f.hosts == ["node001", "node002"]
    assert "WORLD_SIZE=16" in f.message and "RANK=0,1" in f.message and "nprocPerNode=8" in f.message
    assert "torchrun train.py" in f.fix


@pytest.mark.parametrize(
    "argv",
    [
        ["torchrun", "train.py"],
        ["python", "-m", "torch.distributed.run", "train.py"],
        ["python3", "-u", "-m", "torch.distributed.run", "--nproc-per-node=8", "train.py"],
    ],
)
def test_kubeflow_nproc_per_node_with_torchrun_is_fine(argv: list[str]) -> None:
    assert check(pods(kubeflow_v1(2, 8), argv), "ENV006") == []


def test_kubeflow_plain_python_with_one_process_per_pod_is_fine() -> None:
    assert check(pods(kubeflow_v1(4, 1), ["python", "train.py"]), "ENV006") == []


def test_kubeflow_without_a_known_command_is_not_judged() -> None:
    # an init container cannot see the training container's command: no guess, no alarm
    assert check(pods(kubeflow_v1(2, 8)), "ENV006") == []


@fires("RNK010")
def test_pod_with_a_different_node_count_is_named() -> None:
    envs = indexed(4)
    envs[2]["NNODES"] = "5"
    f = only(check(pods(envs), "RNK010"))
    assert f.hosts == ["node003"]
    assert (f.expected, f.actual) == ("4", "5")
    assert f.message.startswith("NNODES=5 on node rank 2 on node003")


def test_lws_group_size_differs() -> None:
    envs = [
        {"LWS_LEADER_ADDRESS": "vllm-0.vllm.default", "LWS_GROUP_SIZE": "4", "LWS_WORKER_INDEX": str(w),
         "MASTER_PORT": "29502"}
        for w in range(4)
    ]  # fmt: skip
    envs[3]["LWS_GROUP_SIZE"] = "3"
    f = only(check(pods(envs), "RNK010"))
    assert f.hosts == ["node004"] and "LWS_GROUP_SIZE=3" in f.message


def test_node_count_from_a_wrapped_torchrun_is_left_to_rnk009() -> None:
    envs = indexed(2)
    job = pods(envs, ["torchrun", "--nnodes=2", "--node-rank=0", "t.py"])
    job = tweak(job, 1, launch=parse_launch(filtered_env(envs[1]), parse_command(["torchrun", "--nnodes=3", "t.py"])))
    assert check(job, "RNK010") == []
    assert check(job, "RNK009") != []


@fires("RNK011")
def test_completions_raised_without_the_node_count() -> None:
    envs = indexed(5, nnodes=4)  # completions: 5, NNODES still 4
    f = only(check(pods(envs), "RNK011"))
    assert f.hosts == ["node005"]
    assert f.message == "node rank 4 (env:JOB_COMPLETION_INDEX) is outside 4 nodes (env:NNODES)"


def test_healthy_pods_of_every_workload_raise_nothing() -> None:
    assert [f.code for f in check_all(pods(indexed(4)))] == []
    assert [f.code for f in check_all(pods(kubeflow_v1(2, 8), ["torchrun", "train.py"]))] == []


def check_all(job: list[Facts]) -> list[Any]:
    from validator.checks import run_checks

    return [f for f in run_checks(job) if f.code in ("ENV006", "RNK010", "RNK011")]
