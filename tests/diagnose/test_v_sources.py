"""What the blind set v (tests/corpus/diagnose/heldout-v.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- horovodrun's gloo launcher (horovod/runner/gloo_run.py _exec_command): print('Process {idx} exit with status code
  {ec}.'), idx the slot's rank, printed by each worker's thread when its process ends;
- vLLM V1's multiproc workers (vllm/v1/executor/multiproc_executor.py WorkerProc): _add_prefix(sys.stdout, f"VllmWorker
  rank={rank}", pid), the prefix f"({worker_name} pid={pid}) ";
- NCCL's proxy service (src/proxy.cc): WARN("[Proxy Service %d] Failed to execute operation %s from rank %d, retcode
  %d", proxyState->tpRank, ...), the rank of the process whose proxy thread prints it;
- NCCL's connect retries (include/socket.h <= 2.11 connectAddress): INFO(NCCL_ALL,"Call to connect returned %s,
  retrying", strerror(errno)) while ECONNREFUSED or ETIMEDOUT repeat, before WARN("Connect to %s failed : %s") and
  ncclSystemError;
- ProcessGroupWrapper's DETAIL report (torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp): "Detected mismatch between
  collectives on ranks. Rank %d is running collective: %s, but Rank %d is running collective: %s.", its ranks wrapped
  onto lines of their own.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

HVD_EXIT = "Process {idx} exit with status code {ec}.\n"
HVD_FIRST = (
    "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to "
    "be terminated. The first process to do so was:\nProcess name: {name}\nExit code: {code}\n"
)


def test_horovods_gloo_launcher_names_the_one_process_it_saw_exit(tmp_path: Path) -> None:
    assert verdict(tmp_path, HVD_EXIT.format(idx=2, ec=1))[:3] == ("child_failed_other", [2], "low")
    # 128 + 9: the shell's report of a SIGKILL, still the one process that exited
    assert verdict(tmp_path, HVD_EXIT.format(idx=0, ec=137))[:2] == ("child_failed_other", [0])


def test_horovod_processes_exiting_alike_name_nobody_from_their_print_order(tmp_path: Path) -> None:
    text = "".join(HVD_EXIT.format(idx=i, ec=250) for i in (3, 2, 1, 0))
    assert verdict(tmp_path, text)[:2] == ("child_failed_other", [])


def test_horovods_first_process_summary_still_decides_over_the_exit_lines(tmp_path: Path) -> None:
    text = HVD_EXIT.format(idx=1, ec=1) + HVD_EXIT.format(idx=0, ec=1) + HVD_FIRST.format(name="1", code=1)
    assert verdict(tmp_path, text)[:2] == ("child_failed_other", [1])


def _vllm(rank: int, pid: int, msg: str) -> str:
    return f"(VllmWorker rank={rank} pid={pid}) ERROR 04-25 10:24:22 [multiproc_executor.py:380] {msg}\n"


def test_a_vllm_v1_worker_prefix_places_its_rank(tmp_path: Path) -> None:
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of 79.10 GiB "
        "of which 2.00 MiB is free."
    )
    text = _vllm(2, 4101, "WorkerProc hit an exception.") + _vllm(2, 4101, oom)
    assert verdict(tmp_path, text)[:2] == ("oom", [2])


def _nccl(tid: int, where: str, msg: str) -> str:
    return f"gpu-node-3:51234:{tid} [0] {where} NCCL WARN {msg}\n"


def test_nccls_proxy_service_places_the_rank_of_its_process(tmp_path: Path) -> None:
    text = _nccl(51300, "include/alloc.h:178", "Cuda failure 'out of memory'") + _nccl(
        51300, "proxy.cc:1518", "[Proxy Service 12] Failed to execute operation Setup from rank 12, retcode 1"
    )
    assert verdict(tmp_path, text)[:2] == ("oom", [12])


def test_an_init_line_of_the_default_group_outranks_the_proxys_communicator(tmp_path: Path) -> None:
    text = (
        "gpu-node-3:51234:51234 [0] NCCL INFO comm 0x5581 rank 40 nranks 64 cudaDev 0 busId 18000 - Init COMPLETE\n"
        + _nccl(51300, "include/alloc.h:178", "Cuda failure 'out of memory'")
        + _nccl(51300, "proxy.cc:1518", "[Proxy Service 3] Failed to execute operation Setup from rank 3, retcode 1")
    )
    assert verdict(tmp_path, text)[:2] == ("oom", [40])


RETRY = "worker:4100:4200 [0] NCCL INFO Call to connect returned {}, retrying\n"


def test_nccls_timed_out_connect_retries_alone_are_a_system_error_naming_nobody(tmp_path: Path) -> None:
    assert verdict(tmp_path, RETRY.format("Connection timed out") * 3)[:2] == ("nccl_system_error", [])


def test_refused_connect_retries_are_start_up_chatter(tmp_path: Path) -> None:
    # ECONNREFUSED: the peer is not listening yet, retried while every job starts
    assert verdict(tmp_path, RETRY.format("Connection refused") * 3)[0] == "none"


def test_connect_retries_do_not_outrank_a_failure_after_them(tmp_path: Path) -> None:
    text = (
        RETRY.format("Connection timed out")
        + "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    assert verdict(tmp_path, text)[0] == "oom"


def test_a_detail_report_whose_ranks_wrapped_off_its_line_is_a_mismatch_naming_nobody(tmp_path: Path) -> None:
    text = (
        "RuntimeError: Detected mismatch between collectives on ranks. \n"
        "Rank 5 is running collective: CollectiveFingerPrint(SequenceNumber=18, OpType=BROADCAST),\n"
        "but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=30, OpType=BROADCAST).\n"
    )
    assert verdict(tmp_path, text)[:2] == ("collective_mismatch", [])
