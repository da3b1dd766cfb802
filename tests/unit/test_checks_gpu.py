"""GPU: from factory facts. A CPU (gloo) job never hears about GPUs."""

from __future__ import annotations

import pytest

from tests.factories import check, cpu_job, fires, gpu, node_job, only, rank_job, tweak
from validator.checks import CHECKS, run_checks
from validator.facts.gpu import map_visible
from validator.model import Facts, Severity

GPU_CODES = [c for c in CHECKS if c.startswith("GPU")]


def narrowed(job: list[Facts]) -> list[Facts]:
    """Each rank sees exactly its own GPU (srun --gpus-per-task=1, --virtual-local-rank)."""
    out = []
    for f in job:
        lr = f["launch"]["local_rank"]
        uuid = f["gpus"]["devices"][lr]["uuid"]
        out.append(
            tweak([f], 0, launch={"local_rank": 0}, gpus={"visible": [uuid]}, env={"CUDA_VISIBLE_DEVICES": uuid})[0]
        )
    return out


@fires("GPU001")
def test_node_with_fewer_gpus_than_ranks() -> None:
    job = rank_job(2, 8)
    for i in range(8, 16):
        job = tweak(job, i, gpus={"devices": [gpu(g, 1) for g in range(6)]})
    f = only(check(job, "GPU001"))
    assert f.hosts == ["node002"]
    assert (f.expected, f.actual) == (">= 8", "6")


@fires("GPU001")
def test_cuda_visible_devices_hiding_gpus_from_a_wrapper() -> None:
    job = tweak(
        node_job(2), 1, gpus={"visible": [gpu(0, 1)["uuid"], gpu(1, 1)["uuid"]]}, env={"CUDA_VISIBLE_DEVICES": "0,1"}
    )
    assert only(check(job, "GPU001")).hosts == ["node002"]


def test_ranks_narrowed_to_one_gpu_each_use_the_whole_node() -> None:
    assert check(narrowed(rank_job(2, 8)), "GPU001") == []


@fires("GPU002")
def test_two_ranks_on_one_gpu() -> None:
    job = rank_job(1, 4)
    same = job[0]["gpus"]["devices"][0]["uuid"]
    job = tweak(job, 1, gpus={"visible": [same]}, env={"CUDA_VISIBLE_DEVICES": "0"})
    job = tweak(job, 0, gpus={"visible": [same]}, env={"CUDA_VISIBLE_DEVICES": "0"})
    f = only(check(job, "GPU002"))
    assert f.ranks == [0, 1]
    assert same in f.message


def test_one_gpu_per_rank() -> None:
    assert check(rank_job(1, 8), "GPU002") == []
    assert check(narrowed(rank_job(1, 8)), "GPU002") == []


@fires("GPU003")
def test_node_that_lost_a_gpu() -> None:
    job = tweak(node_job(3, 4), 2, gpus={"devices": [gpu(g, 2) for g in range(7)]})
    f = only(check(job, "GPU003"))
    assert f.severity == Severity.WARNING
    assert f.hosts == ["node003"]
    assert (f.expected, f.actual) == ("8", "7")


@fires("GPU004")
def test_node_with_another_gpu_model() -> None:
    job = tweak(node_job(3), 1, gpus={"devices": [gpu(g, 1, "NVIDIA A100-SXM4-80GB") for g in range(8)]})
    f = only(check(job, "GPU004"))
    assert f.hosts == ["node002"]
    assert f.actual == "NVIDIA A100-SXM4-80GB"


@fires("GPU005")
def test_driver_tie_goes_to_the_node_of_rank_zero() -> None:
    job = rank_job(2, 2)
    for i in (2, 3):
        job = tweak(job, i, gpus={"driver": "535.104.05"})
    for order in (job, [job[3], job[2], job[1], job[0]], [job[1], job[0], job[2], job[3]]):
        f = only(check(order, "GPU005"))
        assert f.hosts == ["node002"]
        assert f.actual == "535.104.05"


def test_same_driver_everywhere() -> None:
    assert check(rank_job(3, 2), "GPU005") == []


@fires("GPU006")
def test_cuda_visible_devices_naming_a_missing_gpu() -> None:
    devices = rank_job(1, 1)[0]["gpus"]["devices"]
    visible, err = map_visible(devices, "0,9,1")
    job = tweak(node_job(2), 1, gpus={"visible": visible, "visible_error": err}, env={"CUDA_VISIBLE_DEVICES": "0,9,1"})
    f = only(check(job, "GPU006"))
    assert f.hosts == ["node002"]
    assert "no GPU 9" in f.message


def test_minus_one_hides_the_rest_on_purpose() -> None:
    devices = rank_job(1, 1)[0]["gpus"]["devices"]
    visible, err = map_visible(devices, "0,2,-1,1")
    assert err is None and len(visible or []) == 2
    job = tweak(
        node_job(2), 1, gpus={"visible": visible, "visible_error": err}, env={"CUDA_VISIBLE_DEVICES": "0,2,-1,1"}
    )
    assert check(job, "GPU006") == []


@pytest.mark.parametrize("cvd", [None, "", "-1"])
def test_cpu_job_hears_nothing_about_gpus(cvd: str | None) -> None:
    job = cpu_job(2, 4)
    if cvd is not None:
        job = [tweak([f], 0, env={"CUDA_VISIBLE_DEVICES": cvd}, gpus={"visible": []})[0] for f in job]
    job = tweak(job, 0, gpus={"driver": "535.104.05"})  # a stray driver fact must not matter either
    assert [f.code for f in run_checks(job, codes=GPU_CODES)] == []


def test_gpu_job_on_nodes_without_gpus_is_flagged() -> None:
    # NCCL settings ask for GPUs: a node without any is a real problem, not a CPU job
    job = cpu_job(1, 2)
    job = [tweak([f], 0, env={"NCCL_SOCKET_IFNAME": "eth0"})[0] for f in job]
    assert only(check(job, "GPU001")).actual == "0"
