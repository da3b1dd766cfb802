"""SW and ENV: drift from the peer majority, and launch values that crash before any rendezvous."""

from __future__ import annotations

from tests.factories import check, cpu_job, fires, node_job, only, rank_job, tweak
from validator.agent.probe import filtered_env
from validator.facts.command import parse_command
from validator.facts.launch import parse_launch
from validator.model import Facts, Severity


def per_node(job: list[Facts], host: str, **over: object) -> list[Facts]:
    for i, f in enumerate(job):
        if f["host"] == host:
            job = tweak(job, i, **over)
    return job


@fires("SW001")
def test_torch_outlier_node() -> None:
    job = per_node(rank_job(3, 2), "node002", software={"torch": "2.4.0+cu121"})
    f = only(check(job, "SW001"))
    assert f.severity == Severity.WARNING
    assert f.hosts == ["node002"] and f.ranks == [2, 3]
    assert (f.expected, f.actual) == ("2.5.1+cu124", "2.4.0+cu121")


def test_node_without_torch_is_an_error() -> None:
    job = per_node(rank_job(3, 2), "node003", software={"torch": None})
    f = only(check(job, "SW001"))
    assert f.severity == Severity.ERROR and f.actual == "not installed"


@fires("SW002")
def test_nccl_outlier_in_a_gpu_job() -> None:
    job = per_node(node_job(4), "node004", software={"nccl": "2.18.5"})
    f = only(check(job, "SW002"))
    assert f.hosts == ["node004"] and f.actual == "2.18.5"


def test_nccl_is_irrelevant_to_a_cpu_job() -> None:
    assert check(per_node(cpu_job(2, 1), "node002", software={"nccl": "2.18.5"}), "SW002") == []


@fires("SW003")
def test_torch_cuda_outlier() -> None:
    job = per_node(node_job(3), "node001", software={"torch_cuda": "12.1"})
    assert only(check(job, "SW003")).hosts == ["node001"]


@fires("SW004")
def test_python_outlier() -> None:
    job = per_node(node_job(3), "node003", software={"python": "3.10.12"})
    f = only(check(job, "SW004"))
    assert f.hosts == ["node003"] and f.actual == "3.10.12"


def test_same_versions_everywhere() -> None:
    job = rank_job(3, 2)
    assert [c for c in ("SW001", "SW002", "SW003", "SW004") if check(job, c)] == []


@fires("ENV001")
def test_variable_set_on_one_rank_only() -> None:
    job = tweak(rank_job(2, 2), 3, env={"NCCL_DEBUG": "INFO"})
    f = only(check(job, "ENV001"))
    assert f.ranks == [3]
    assert (f.expected, f.actual) == ("unset", "'INFO'")
    assert "unset NCCL_DEBUG" in f.fix


def test_env_tie_goes_to_rank_zero() -> None:
    job = tweak(rank_job(1, 2), 0, env={"TORCH_NCCL_BLOCKING_WAIT": "1"})
    for order in (job, job[::-1]):
        f = only(check(order, "ENV001"))
        assert f.ranks == [1]
        assert f.expected == "'1'"


def test_per_process_variables_may_differ() -> None:
    job = rank_job(1, 4)
    for i in range(4):
        job = tweak(job, i, env={"CUDA_VISIBLE_DEVICES": str(i), "TORCHELASTIC_ERROR_FILE": f"/tmp/{i}/error.json"})
    assert check(job, "ENV001") == []


@fires("ENV002")
def test_ib_disabled_on_one_node() -> None:
    job = per_node(rank_job(3, 2), "node002", env={"NCCL_IB_DISABLE": "1"})
    f = only(check(job, "ENV002"))
    assert f.severity == Severity.ERROR
    assert f.hosts == ["node002"]
    assert check(job, "ENV001") == []  # reported once, by the stricter code


@fires("ENV003")
def test_kubeflow_standalone_sets_pet_standalone_to_empty() -> None:
    job = tweak(node_job(2), 1, env={"PET_STANDALONE": ""})
    f = only(check(job, "ENV003"))
    assert f.hosts == ["node002"]
    assert "PET_STANDALONE=''" in f.message


def test_pet_flags_set_to_integers() -> None:
    job = [tweak([f], 0, env={"PET_STANDALONE": "1", "PET_NO_PYTHON": "0"})[0] for f in node_job(2)]
    assert check(job, "ENV003") == []


@fires("ENV004")
def test_unexpanded_variable_as_rank() -> None:
    env = filtered_env({"RANK": "$SLURM_PROCID", "WORLD_SIZE": "4", "MASTER_ADDR": "n1", "MASTER_PORT": "29500"})
    job = tweak(rank_job(1, 2), 1, launch=parse_launch(env, None))
    f = only(check(job, "ENV004"))
    assert f.hosts == ["node001"]
    assert "RANK='$SLURM_PROCID'" in f.message


def test_trainer_v2_nproc_auto_is_a_valid_value() -> None:
    env = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "auto", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "ft-0.ft"}
    job = tweak(node_job(2), 1, launch=parse_launch(env, None))
    assert check(job, "ENV004") == []


@fires("ENV005")
def test_launch_command_with_a_bad_option() -> None:
    cmd = parse_command(["torchrun", "--nnodes=2", "--nproc-per-node=8", "--bogus", "train.py"])
    job = tweak(node_job(2), 1, launch={"command": cmd})
    f = only(check(job, "ENV005"))
    assert f.hosts == ["node002"]
    assert "--bogus" in f.message


def test_valid_command() -> None:
    assert check(node_job(2), "ENV005") == []
