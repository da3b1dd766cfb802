"""GPU: from factory facts. A CPU (gloo) job never hears about GPUs."""

from __future__ import annotations

import pytest

from tests.factories import check, cpu_job, fires, gpu, node_job, only, rank_job, tweak
from validator.checks import CHECKS, run_checks
from validator.facts.command import parse_command
from validator.facts.gpu import GpuEvidence, gpu_evidence, map_visible
from validator.facts.network import uses_nccl
from validator.model import Facts, Severity
from validator.profiles import Profile

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


# ----------------------------------------------------------------------------- is it a GPU job? (issue 21)

NO_GPU = {"source": "none", "driver": None, "cuda": None, "devices": []}


def launched(job: list[Facts], *argv: str) -> list[Facts]:
    """Every participant launched by ``argv`` (parsed as the agent parses it)."""
    command = parse_command(list(argv))
    return [tweak([f], 0, launch={"command": command})[0] for f in job]


def test_nccl_and_cuda_settings_alone_never_make_a_gpu_job() -> None:
    """Clusters export NCCL_* (and Slurm CUDA_VISIBLE_DEVICES) for every job: a gloo job on
    GPU-less nodes passes, and its net check and interface checks follow Gloo."""
    env = {"NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "WARN", "CUDA_VISIBLE_DEVICES": "0,1"}
    job = [tweak([f], 0, env=env)[0] for f in launched(cpu_job(2, 2), "torchrun", "--nproc-per-node=2", "train.py")]
    assert gpu_evidence(job) is None and not uses_nccl(job)
    assert [f.code for f in run_checks(job, codes=GPU_CODES)] == []


@fires("GPU001")
def test_a_node_without_gpus_among_gpu_nodes_is_an_error_to_drain() -> None:
    job = tweak(tweak(rank_job(2, 2), 2, gpus=NO_GPU), 3, gpus=NO_GPU)
    assert gpu_evidence(job) == GpuEvidence("8 GPU(s)", "node001", True)
    f = only(check(job, "GPU001"))
    assert (f.hosts, f.actual, f.severity) == (["node002"], "0", Severity.ERROR)
    assert f.message == "0 usable GPU(s) for 2 local ranks" and "drain the node" in f.fix


def test_a_driver_without_gpus_is_a_gpu_node_that_lost_them() -> None:
    """The kernel driver answers (NVML initialised) but lists no GPU: they fell off the bus."""
    job = [tweak([f], 0, gpus={**NO_GPU, "source": "nvml", "driver": "550.54.15"})[0] for f in cpu_job(1, 2)]
    assert gpu_evidence(job) == GpuEvidence("the NVIDIA driver 550.54.15", "node001", True)
    assert "drain the node" in only(check(job, "GPU001")).fix


def test_a_profile_with_gpus_makes_a_gpu_job_without_drain_advice() -> None:
    job = cpu_job(1, 2)
    f = only(check(job, "GPU001", Profile("p.yaml", name="p", gpus_per_node=8)))
    assert f.message == (
        "0 usable GPU(s) for 2 local ranks; only gpus_per_node: 8 (the profile) asks for GPUs, "
        "and no node has a GPU or a GPU driver"
    )
    assert "drain" not in f.fix and f.fix.startswith("run the job on GPU nodes")
    assert check(job, "GPU001", Profile("p.yaml", name="p", gpus_per_node=0)) == []


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["torchrun", "--nproc-per-node=2", "train.py", "--backend", "nccl"], "--backend nccl"),
        (["torchrun", "--nproc-per-node=2", "train.py", "--dist-backend=NCCL"], "--dist-backend=NCCL"),
        (["python", "train.py", "--ddp_backend", "nccl"], "--ddp_backend nccl"),
        (["python", "pretrain_gpt.py", "--distributed-backend", "nccl"], "--distributed-backend nccl"),
        (["python", "train.py", "trainer.backend=nccl"], "trainer.backend=nccl"),
        (["torchrun", "--nproc-per-node", "gpu", "train.py"], "--nproc-per-node=gpu"),
        (["python", "-m", "torch.distributed.run", "--nproc_per_node=gpu", "train.py"], "--nproc-per-node=gpu"),
    ],
)
def test_a_launch_that_names_a_gpu_backend_makes_a_gpu_job(argv: list[str], named: str) -> None:
    job = launched(cpu_job(1, 2), *argv)
    assert gpu_evidence(job) == GpuEvidence(named, "the launch command on node001", False)
    f = only(check(job, "GPU001"))
    assert f"only {named} (the launch command on node001) asks for GPUs" in f.message
    assert "drain" not in f.fix and f.fix.endswith(f"without {named}")


@pytest.mark.parametrize(
    "argv",
    [
        ["torchrun", "--nproc-per-node=2", "train.py", "--backend", "gloo"],
        ["accelerate", "launch", "--multi_gpu", "--num_processes=2", "train.py"],  # its launcher runs gloo on CPUs
        ["torchrun", "--nproc-per-node=2", "train.py", "--backend=cpu:gloo,cuda:nccl"],  # torch's default
        ["torchrun", "--nproc-per-node=auto", "train.py"],  # CPUs where there is no accelerator
        ["torchrun", "--nproc-per-node=2", "nccl_tests.py", "nccl"],  # names, not a backend option
        ["torchrun", "--rdzv-backend=c10d", "--nproc-per-node=2", "train.py"],
        ["accelerate", "launch", "--cpu", "train.py"],
    ],
)
def test_a_launch_that_names_no_gpu_backend_is_a_cpu_job(argv: list[str]) -> None:
    job = launched(cpu_job(1, 2), *argv)
    assert gpu_evidence(job) is None
    assert [f.code for f in run_checks(job, codes=GPU_CODES)] == []
