"""The launch contract from every launcher's environment (reference §1). Fixtures under
tests/fixtures/launch/: torchrun-*.json were captured from real torchrun workers
(capture-torchrun.sh), slurm-srun-env.txt is a real srun step, *.env are the documented sets."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from validator.agent.probe import endpoint_host, filtered_env
from validator.facts.command import parse_command
from validator.facts.launch import parse_launch, split_endpoint, tasks_on_node
from validator.model import LaunchFacts

LAUNCH = Path(__file__).resolve().parent.parent / "fixtures" / "launch"


def env_of(name: str) -> dict[str, str]:
    """A fixture's environment, through the agent's allowlist as in a real probe."""
    p = LAUNCH / name
    if p.suffix == ".json":
        raw = json.loads(p.read_text())
    else:
        raw = dict(ln.split("=", 1) for ln in p.read_text().splitlines() if ln and not ln.startswith("#"))
    return filtered_env(raw)


def srun_task(task: int) -> dict[str, str]:
    lines = (LAUNCH / "slurm-srun-env.txt").read_text().splitlines()
    return dict(ln.split(": ", 1)[1].split("=", 1) for ln in lines if ln.startswith(f"{task}: "))


def launch(name: str | dict[str, str], argv: list[str] | None = None) -> LaunchFacts:
    env = env_of(name) if isinstance(name, str) else filtered_env(name)
    return parse_launch(env, parse_command(argv) if argv else None)


def pick(lf: LaunchFacts, *keys: str) -> dict[str, Any]:
    return {k: lf[k] for k in keys}  # type: ignore[literal-required]


CORE = ("launcher", "mode", "rank", "local_rank", "world_size", "local_world_size", "node_rank", "nnodes")
RDZV = ("master_addr", "master_port", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "job_id")


def test_real_torchrun_standalone_workers() -> None:
    lf = launch("torchrun-standalone-rank1.json")
    assert pick(lf, *CORE) == dict(zip(CORE, ("torchrun", "rank", 1, 1, 2, 2, 0, 1), strict=True))
    assert lf["master_addr"] == "localhost"
    assert lf["job_id"] == lf["rdzv_id"] and re.fullmatch(r"[0-9a-f-]{36}", str(lf["job_id"]))
    assert lf["sources"]["node_rank"] == "env:GROUP_RANK"


def test_real_torchrun_static_two_nodes() -> None:
    for r in range(4):
        lf = launch(f"torchrun-static-rank{r}.json")
        assert pick(lf, *CORE) == dict(zip(CORE, ("torchrun", "rank", r, r % 2, 4, 2, r // 2, 2), strict=True))
        assert lf["master_addr"] == "127.0.0.1" and lf["rdzv_id"] == "none" and lf["job_id"] is None


def test_real_torchrun_c10d_hands_workers_localhost() -> None:
    lf = launch("torchrun-c10d-rank3.json")
    assert pick(lf, "rank", "node_rank", "world_size", "master_addr", "job_id") == {
        "rank": 3, "node_rank": 1, "world_size": 4, "master_addr": "localhost", "job_id": "job42",
    }  # fmt: skip


def test_real_srun_tasks() -> None:
    t0, t3 = parse_launch(filtered_env(srun_task(0)), None), parse_launch(filtered_env(srun_task(3)), None)
    assert pick(t0, *CORE) == dict(zip(CORE, ("slurm", "rank", 0, 0, 4, 3, 0, 2), strict=True))
    assert pick(t3, *CORE) == dict(zip(CORE, ("slurm", "rank", 3, 0, 4, 1, 1, 2), strict=True))
    assert (t3["job_id"], t3["nodelist"]) == ("3", "n[1-2]")
    assert t3["sources"]["local_world_size"] == "env:SLURM_STEP_TASKS_PER_NODE"
    assert t0["master_addr"] is None  # srun sets no MASTER_ADDR (RDZ008's business)


def test_slurm_compressed_tasks_per_node() -> None:
    lf = launch("slurm-sbatch-tasks-2x3-1.env")
    assert pick(lf, *CORE) == dict(zip(CORE, ("slurm", "rank", 5, 1, 7, 2, 2, 4), strict=True))
    last = launch({**env_of("slurm-sbatch-tasks-2x3-1.env"), "SLURM_NODEID": "3", "SLURM_PROCID": "6"})
    assert last["local_world_size"] == 1


@pytest.mark.parametrize(
    ("text", "counts"),
    [("2(x3),1", [2, 2, 2, 1]), ("3,1", [3, 1]), ("8(x64)", [8] * 64), ("72(x2),36", [72, 72, 36]), ("1", [1])],
)
def test_tasks_on_node(text: str, counts: list[int]) -> None:
    assert [tasks_on_node(text, i) for i in range(len(counts) + 1)] == [*counts, None]


def test_huge_compressed_counts_are_not_expanded() -> None:
    assert tasks_on_node("1(x999999999),4", 999_999_999) == 4  # a list of 10^9 would not fit in memory


def test_bad_tasks_per_node_is_recorded_not_raised() -> None:
    with pytest.raises(ValueError):
        tasks_on_node("2(x)", 0)
    lf = launch({**env_of("slurm-sbatch-tasks-2x3-1.env"), "SLURM_STEP_TASKS_PER_NODE": "2(x)"})
    assert lf["invalid"] == {"env:SLURM_STEP_TASKS_PER_NODE": "2(x)"} and lf["local_world_size"] is None


def test_kubeflow_v1_pods() -> None:
    m, w = launch("kubeflow-v1-master-nproc1.env"), launch("kubeflow-v1-worker2-nproc1.env")
    assert pick(m, *CORE) == dict(zip(CORE, ("kubeflow", "rank", 0, None, 4, None, 0, 4), strict=True))
    assert pick(w, "rank", "node_rank", "master_addr", "master_port") == {
        "rank": 3, "node_rank": 3, "master_addr": "bert-master-0", "master_port": 23456,
    }  # fmt: skip


def test_kubeflow_v1_nproc_per_node_rank_is_a_node_rank() -> None:
    lf = launch("kubeflow-v1-worker0-nproc8.env")
    assert pick(lf, *CORE) == dict(zip(CORE, ("kubeflow", "node", None, None, 16, 8, 1, 2), strict=True))
    assert lf["world_size"] == lf["nnodes"] * lf["local_world_size"]  # type: ignore[operator]


def test_kubeflow_v1_elastic_standalone() -> None:
    lf = launch("kubeflow-v1-elastic-standalone.env")
    assert pick(lf, "launcher", "nnodes", "local_world_size", "rdzv_backend") == {
        "launcher": "kubeflow", "nnodes": 3, "local_world_size": 2, "rdzv_backend": "c10d",
    }  # fmt: skip
    assert pick(lf, "master_addr", "master_port") == {"master_addr": "elastic-worker-0", "master_port": 23456}
    assert lf["sources"]["master_addr"] == "env:PET_RDZV_ENDPOINT"
    assert env_of("kubeflow-v1-elastic-standalone.env")["PET_STANDALONE"] == ""  # kept for ENV003


def test_trainer_v2_nproc_auto_is_not_invalid() -> None:
    lf = launch("trainer-v2-node1.env")
    assert pick(lf, *CORE) == dict(zip(CORE, ("trainer", "node", None, None, None, None, 1, 4), strict=True))
    assert (lf["master_addr"], lf["master_port"], lf["invalid"]) == ("ft-trainer-node-0-0.ft", 29500, {})


def test_indexed_job_jobset_and_lws() -> None:
    assert pick(launch("indexed-job-2.env"), "launcher", "node_rank", "master_addr") == {
        "launcher": "indexed-job", "node_rank": 2, "master_addr": "train-0.train",
    }  # fmt: skip
    js = launch("jobset-1.env")
    assert pick(js, "launcher", "node_rank", "job_id") == {"launcher": "jobset", "node_rank": 1, "job_id": "pytorch"}
    lws = launch("lws-worker2.env")
    assert pick(lws, "launcher", "node_rank", "nnodes", "master_addr") == {
        "launcher": "lws", "node_rank": 2, "nnodes": 4, "master_addr": "vllm-0.vllm.default",
    }  # fmt: skip


def test_mpi_launchers() -> None:
    assert pick(launch("openmpi-rank5.env"), *CORE) == dict(
        zip(CORE, ("mpi", "rank", 5, 1, 8, 4, None, None), strict=True)
    )
    assert pick(launch("mpich-pmi-fd-rank3.env"), *CORE) == dict(
        zip(CORE, ("mpich", "rank", 3, 1, 4, 2, None, None), strict=True)
    )
    port_mode = launch("mpich-pmi-port-local1.env")  # PMI_PORT mode: no global rank in the env
    assert pick(port_mode, "launcher", "rank", "local_rank", "world_size") == {
        "launcher": "mpich", "rank": None, "local_rank": 1, "world_size": None,
    }  # fmt: skip


def test_deepspeed_env() -> None:
    lf = launch("deepspeed-rank6.env")
    assert pick(lf, *CORE) == dict(zip(CORE, ("deepspeed", "rank", 6, 2, 8, 4, 1, 2), strict=True))
    assert lf["sources"]["node_rank"] == "env:CROSS_RANK"


def test_plain_env_and_nothing() -> None:
    lf = launch({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "n1", "MASTER_PORT": "29500"})
    assert pick(lf, "launcher", "mode", "rank", "world_size", "master_port") == {
        "launcher": "env", "mode": "rank", "rank": 1, "world_size": 2, "master_port": 29500,
    }  # fmt: skip
    assert pick(launch({}), "launcher", "mode", "rank") == {"launcher": "none", "mode": "node", "rank": None}


def test_invalid_values_are_recorded_with_their_source() -> None:
    lf = launch({"RANK": "${SLURM_PROCID}", "WORLD_SIZE": "4", "MASTER_PORT": "x"})
    assert lf["invalid"] == {"env:RANK": "${SLURM_PROCID}", "env:MASTER_PORT": "x"}
    assert lf["rank"] is None and lf["master_port"] is None


# ---------------------------------------------------------------- wrapped launch commands


def test_torchrun_static_command_on_node_one() -> None:
    argv = [
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node",
        "8",
        "--node-rank=1",
        "--master-addr",
        "n1",
        "--master-port=23456",
        "t.py",
    ]
    lf = launch({"SLURM_PROCID": "1", "SLURM_NODEID": "1"}, argv)
    assert pick(lf, *CORE) == dict(zip(CORE, ("torchrun", "node", None, None, 16, 8, 1, 2), strict=True))
    assert pick(lf, *RDZV[:3]) == {"master_addr": "n1", "master_port": 23456, "rdzv_backend": "static"}
    assert lf["sources"]["world_size"] == "derived: nnodes x nproc-per-node"
    assert lf["sources"]["node_rank"] == "torchrun:--node-rank"


def test_torchrun_defaults_are_named_as_defaults() -> None:
    lf = launch({}, ["torchrun", "--nnodes=2", "t.py"])
    assert pick(lf, "node_rank", "master_addr", "master_port", "local_world_size") == {
        "node_rank": 0, "master_addr": "127.0.0.1", "master_port": 29500, "local_world_size": 1,
    }  # fmt: skip
    assert lf["sources"]["node_rank"] == "torchrun default --node-rank"


def test_torchrun_static_endpoint_wins_over_master_addr() -> None:
    lf = launch({}, ["torchrun", "--rdzv-endpoint=n9:1234", "--master-addr=n1", "t.py"])
    assert pick(lf, "master_addr", "master_port", "rdzv_endpoint") == {
        "master_addr": "n9",
        "master_port": 1234,
        "rdzv_endpoint": "n9:1234",
    }


def test_torchrun_c10d_has_no_node_rank_and_a_default_port() -> None:
    env = {"SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURM_NTASKS": "4"}  # srun: one task per node
    lf = launch(
        env, ["torchrun", "--nnodes=1:4", "--nproc-per-node=gpu", "--rdzv-backend=c10d", "--rdzv-endpoint=n1", "t.py"]
    )
    assert pick(lf, "node_rank", "nnodes", "local_world_size", "world_size", "master_addr", "master_port") == {
        "node_rank": None, "nnodes": 4, "local_world_size": None, "world_size": None, "master_addr": "n1", "master_port": 29400,
    }  # fmt: skip


def test_torchrun_standalone() -> None:
    lf = launch(
        {"PET_NNODES": "4"}, ["python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "t.py"]
    )
    assert pick(lf, "nnodes", "rdzv_backend", "rdzv_endpoint", "master_addr", "master_port", "world_size") == {
        "nnodes": 1, "rdzv_backend": "c10d", "rdzv_endpoint": "localhost:0", "master_addr": "localhost", "master_port": 0, "world_size": 2,
    }  # fmt: skip


def test_pet_variables_fill_what_the_command_leaves_out() -> None:
    env = env_of("kubeflow-v1-worker0-nproc8.env")
    lf = launch(env, ["torchrun", "train.py"])
    assert pick(lf, "nnodes", "local_world_size", "node_rank", "master_addr", "master_port", "world_size") == {
        "nnodes": 2, "local_world_size": 8, "node_rank": 1, "master_addr": "llama-master-0", "master_port": 23456, "world_size": 16,
    }  # fmt: skip
    assert lf["sources"]["nnodes"] == "env:PET_NNODES"
    assert launch(env, ["torchrun", "--nnodes=3", "train.py"])["nnodes"] == 3  # the command line wins


def test_deepspeed_command() -> None:
    argv = [
        "deepspeed",
        "--num_nodes=2",
        "--num_gpus",
        "8",
        "--master_addr=n1",
        "--master_port",
        "29600",
        "train.py",
        "--deepspeed",
    ]
    lf = launch({"RANK": "3"}, argv)
    assert pick(lf, "launcher", "mode", "rank", "nnodes", "local_world_size", "master_addr", "master_port") == {
        "launcher": "deepspeed", "mode": "node", "rank": None, "nnodes": 2, "local_world_size": 8, "master_addr": "n1", "master_port": 29600,
    }  # fmt: skip


ENDPOINTS = ["n1:29400", "n1", " n1:7 ", "[fd00::1]:5", "[fd00::1]", "::1:29500", "fd00::1",
             "10.0.0.1:1234", "", "[::1]:0"]  # fmt: skip


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_endpoint_is_read_as_torch_reads_it(endpoint: str) -> None:
    """torchrun writes an IPv6 --master-addr as ``::1:29500`` and reads a bare ``fd00::1`` as host ``fd00:``
    port 1: the contract and the agent's names to resolve say where torch will connect, not what was meant."""
    utils = pytest.importorskip("torch.distributed.elastic.rendezvous.utils")
    host, port = utils.parse_rendezvous_endpoint(endpoint, 29400)
    assert split_endpoint(endpoint, 29400) == (host, str(port))
    if endpoint.strip():
        assert endpoint_host(endpoint) == host


def test_accelerate_launch_is_the_torchrun_contract_it_runs() -> None:
    argv = ["accelerate", "launch", "--multi_gpu", "--num_machines", "2", "--machine_rank", "1",
            "--main_process_ip", "n1", "--main_process_port", "29600", "--num_processes", "16", "train.py"]  # fmt: skip
    lf = launch({"RANK": "3"}, argv)
    assert pick(lf, "launcher", "mode", "rank", "node_rank", "nnodes", "local_world_size", "world_size",
                "master_addr", "master_port", "rdzv_backend", "rdzv_endpoint") == {
        "launcher": "torchrun", "mode": "node", "rank": None, "node_rank": 1, "nnodes": 2, "local_world_size": 8,
        "world_size": 16, "master_addr": "n1", "master_port": 29600, "rdzv_backend": "static", "rdzv_endpoint": "n1:29600",
    }  # fmt: skip
    assert lf["sources"]["node_rank"] == "accelerate:--machine_rank"
    single = launch({}, ["accelerate", "launch", "--num_processes=2", "train.py"])
    assert pick(single, "nnodes", "node_rank", "master_port", "rdzv_endpoint") == {
        "nnodes": 1, "node_rank": 0, "master_port": 29500, "rdzv_endpoint": None,
    }  # fmt: skip


# what `accelerate config` writes for the second of two machines (accelerate's commands/config/cluster.py
# fields; the same keys as its docs' multi-node example)
ACCELERATE_CONFIG = """compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
enable_cpu_affinity: false
gpu_ids: all
machine_rank: 1
main_process_ip: 10.1.0.7
main_process_port: 29611
main_training_function: main
mixed_precision: bf16
num_machines: 2
num_processes: 16
rdzv_backend: c10d
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
"""


def test_accelerate_config_file_fills_what_the_line_leaves_unset(tmp_path: Path) -> None:
    """The usual multi-node accelerate job names its machines in a config file, not on the line:
    its machine rank, machine count, processes and main process are the contract (before, every
    node read as node 0 of 1 on 127.0.0.1:29500). The line wins where it says; the config's
    rdzv_backend and same_network never apply (their options default to static and False, and
    accelerate fills only options left None)."""
    from validator.agent.probe import job_configs

    cfg = tmp_path / "multi.yaml"
    cfg.write_text(ACCELERATE_CONFIG)

    def contract(argv: list[str], home: Path = tmp_path) -> LaunchFacts:
        return parse_launch(filtered_env({}), parse_command(argv), job_configs(argv, {"HF_HOME": str(home)}))

    lf = contract(["accelerate", "launch", "--config_file", str(cfg), "train.py"])
    assert pick(lf, "node_rank", "nnodes", "world_size", "local_world_size", "master_addr", "master_port",
                "rdzv_backend", "rdzv_endpoint") == {
        "node_rank": 1, "nnodes": 2, "world_size": 16, "local_world_size": 8, "master_addr": "10.1.0.7",
        "master_port": 29611, "rdzv_backend": "static", "rdzv_endpoint": "10.1.0.7:29611",
    }  # fmt: skip
    assert lf["sources"]["node_rank"] == f"accelerate config --config_file {cfg}: machine_rank"
    line = contract(["accelerate", "launch", "--config_file", str(cfg), "--machine_rank", "0", "--same_network",
                     "train.py"])  # fmt: skip
    assert (line["node_rank"], line["rdzv_endpoint"]) == (0, None) and line["sources"]["node_rank"] == (
        "accelerate:--machine_rank"
    )
    # the default config `accelerate config` saved, read when no --config_file is given
    (tmp_path / "accelerate").mkdir()
    (tmp_path / "accelerate" / "default_config.yaml").write_text(ACCELERATE_CONFIG)
    lf = contract(["accelerate", "launch", "train.py"])
    assert (lf["node_rank"], lf["nnodes"], lf["master_port"]) == (1, 2, 29611)
    assert contract(["accelerate", "launch", "--cpu", "train.py"])["nnodes"] == 1  # --cpu: no default config
    sagemaker = tmp_path / "sm.yaml"
    sagemaker.write_text(ACCELERATE_CONFIG.replace("LOCAL_MACHINE", "AMAZON_SAGEMAKER"))
    assert contract(["accelerate", "launch", "--config_file", str(sagemaker), "train.py"])["nnodes"] == 1


def test_torchrun_empty_option_values_are_invalid() -> None:
    # `--node-rank=$SLURM_NODEID` expanded where the variable is unset: torchrun exits "invalid int value: ''"
    lf = launch({}, ["torchrun", "--nnodes=2", "--node-rank=", "--rdzv-backend=c10d", "t.py"])
    assert lf["invalid"] == {"torchrun:--node-rank": ""}
    assert lf["node_rank"] is None
