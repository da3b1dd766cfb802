"""SYS limits, PRF profile expectations and VAL collector errors, from factory facts."""

from __future__ import annotations

from tests.factories import H100, check, cpu_job, facts, fires, gpu, node_job, only, rank_job, tweak
from validator.checks import CHECKS, run_checks
from validator.model import Facts
from validator.profiles import Profile

PRF_CODES = [c for c in CHECKS if c.startswith("PRF")]


def per_node(job: list[Facts], host: str, **over: object) -> list[Facts]:
    for i, f in enumerate(job):
        if f["host"] == host:
            job = tweak(job, i, **over)
    return job


@fires("SYS001")
def test_container_default_shm_on_a_multi_gpu_node() -> None:
    job = per_node(rank_job(2, 4), "node002", system={"shm_bytes": 64 << 20})
    f = only(check(job, "SYS001"))
    assert f.hosts == ["node002"] and f.actual == "64 MiB"


@fires("SYS001")
def test_profile_raises_the_shm_minimum() -> None:
    job = per_node(node_job(2), "node001", system={"shm_bytes": 512 << 20})
    assert check(job, "SYS001") == []
    f = only(check(job, "SYS001", Profile("p.yaml", min_shm_mib=1024)))
    assert f.hosts == ["node001"] and f.expected == ">= 1024 MiB"


def test_small_shm_is_fine_for_one_rank_or_a_cpu_job() -> None:
    assert check([facts(system={"shm_bytes": 64 << 20}, launch={"rank": 0, "world_size": 1})], "SYS001") == []
    assert check([tweak([f], 0, system={"shm_bytes": 64 << 20})[0] for f in cpu_job(2, 4)], "SYS001") == []


@fires("SYS002")
def test_memlock_limited_with_infiniband() -> None:
    job = per_node(node_job(2), "node002", system={"ib_devices": ["mlx5_0"], "memlock_soft": 65536})
    f = only(check(job, "SYS002"))
    assert f.hosts == ["node002"] and f.actual == "64 KiB"


def test_memlock_limit_without_infiniband() -> None:
    assert check([tweak([f], 0, system={"memlock_soft": 65536})[0] for f in node_job(2)], "SYS002") == []


@fires("SYS003")
def test_somaxconn_on_the_master_whatever_the_input_order() -> None:
    job = [tweak([f], 0, system={"somaxconn": 2})[0] for f in rank_job(2, 2)]  # 4 ranks, backlog 2
    job = [job[1], job[0], job[3], job[2]]  # rank 1 represents node001
    f = only(check(job, "SYS003"))
    assert f.hosts == ["node001"]
    assert (f.expected, f.actual) == (">= 4", "2")


def test_somaxconn_on_other_nodes_does_not_matter() -> None:
    assert check(per_node(rank_job(2, 2), "node002", system={"somaxconn": 2}), "SYS003") == []


@fires("SYS004")
def test_open_file_limit_on_the_master() -> None:
    job = per_node(rank_job(2, 2), "node001", system={"nofile_soft": 32})
    f = only(check(job, "SYS004"))
    assert f.hosts == ["node001"] and f.expected == ">= 68"


def test_unlimited_open_files() -> None:
    assert check(per_node(rank_job(2, 2), "node001", system={"nofile_soft": -1}), "SYS004") == []


def test_no_profile_no_profile_findings() -> None:
    assert [f.code for f in run_checks(node_job(2), codes=PRF_CODES)] == []


def test_a_job_that_matches_its_profile() -> None:
    p = Profile(
        "p.yaml", name="p", launcher="torchrun", nodes=2, ranks_per_node=8, gpus_per_node=8, gpu_model="H100",
        interface="eth", hosts="node[001-002]", master_port=29500, versions={"torch": "2.5.*", "nccl": "2.21.*"},
        env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert [f.message for f in run_checks(rank_job(2, 8), p, PRF_CODES)] == []


@fires("PRF001")
def test_node_count() -> None:
    f = only(check(node_job(2), "PRF001", Profile("p.yaml", name="p", nodes=4)))
    assert (f.expected, f.actual) == ("4", "2")


@fires("PRF002")
def test_ranks_per_node() -> None:
    job = per_node(node_job(2), "node002", launch={"local_world_size": 4})
    assert only(check(job, "PRF002", Profile("p.yaml", ranks_per_node=8))).hosts == ["node002"]


@fires("PRF003")
def test_gpus_per_node_counts_gpus_of_ranks_narrowed_to_one_each() -> None:
    job = rank_job(2, 2, gpus=2)
    for i, f in enumerate(job):
        job = tweak(job, i, gpus={"visible": [f["gpus"]["devices"][f["launch"]["local_rank"]]["uuid"]]})
    assert check(job, "PRF003", Profile("p.yaml", gpus_per_node=2)) == []
    f = only(check(job, "PRF003", Profile("p.yaml", gpus_per_node=8)))
    assert (f.expected, f.actual) == ("8", "2")


@fires("PRF004")
def test_gpu_model() -> None:
    job = per_node(node_job(2), "node002", gpus={"devices": [gpu(i, 1, "NVIDIA A100-SXM4-80GB") for i in range(8)]})
    f = only(check(job, "PRF004", Profile("p.yaml", gpu_model="h100")))
    assert f.hosts == ["node002"]
    assert H100 not in f.actual


@fires("PRF005")
def test_nccl_interface() -> None:
    job = per_node(node_job(2), "node002", network={"nccl": {"ifaces": ["ib0"], "addr": "10.8.0.2/24"}})
    f = only(check(job, "PRF005", Profile("p.yaml", interface="=eth0")))
    assert f.hosts == ["node002"] and f.actual == "ib0"


@fires("PRF006")
def test_versions_glob() -> None:
    job = per_node(node_job(3), "node003", software={"torch": "2.4.0"}, gpus={"driver": None})
    p = Profile("p.yaml", versions={"torch": "2.5.*", "driver": "550.*"})
    found = {(f.actual, tuple(f.hosts)) for f in check(job, "PRF006", p)}
    assert found == {("2.4.0", ("node003",)), ("not installed", ("node003",))}


@fires("PRF007")
def test_env_pinned_by_the_profile() -> None:
    job = tweak(rank_job(1, 2), 1, env={"NCCL_IB_HCA": "mlx5_1"})
    found = {f.actual: f.ranks for f in check(job, "PRF007", Profile("p.yaml", env={"NCCL_IB_HCA": "=mlx5_0"}))}
    assert found == {"unset": [0], "mlx5_1": [1]}  # one finding per value seen
    assert only(check(job, "PRF007", Profile("p.yaml", env={"NCCL_IB_HCA": "mlx5_1"}))).ranks == [0]


@fires("PRF008")
def test_hosts_outside_and_missing_from_the_profile() -> None:
    found = {f.actual: f.hosts for f in check(node_job(2), "PRF008", Profile("p.yaml", hosts="node[002-003]"))}
    assert found == {"node001": ["node001"], "1 of 2 hosts": ["node003"]}


@fires("PRF009")
def test_launcher() -> None:
    f = only(check(node_job(2), "PRF009", Profile("p.yaml", launcher="deepspeed")))
    assert f.actual == "torchrun" and f.hosts == ["node001", "node002"]


def test_srun_torchrun_matches_a_slurm_profile() -> None:
    job = [tweak([f], 0, env={"SLURM_JOB_ID": "42", "SLURM_PROCID": str(i)})[0] for i, f in enumerate(node_job(2))]
    assert check(job, "PRF009", Profile("p.yaml", launcher="slurm")) == []


@fires("PRF010")
def test_master_port() -> None:
    f = only(check(node_job(2), "PRF010", Profile("p.yaml", master_port=23456)))
    assert (f.expected, f.actual) == ("23456", "29500")


@fires("VAL001")
def test_collector_error_on_one_node() -> None:
    job = per_node(node_job(3), "node002", errors={"gpu.nvml": "RuntimeError: nvmlInit: Driver Not Loaded (9)"})
    f = only(check(job, "VAL001"))
    assert f.hosts == ["node002"]
    assert "Driver Not Loaded" in f.message
