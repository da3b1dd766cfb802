"""What the blind set zk (tests/corpus/diagnose/heldout-zk.md) showed was not read, or read into a false attribution,
written from its sources' own format strings and rules, not from the set's cases (the logs below are built from them):

- Horovod's stall inspector (horovod/common/stall_inspector.cc): a "Missing ranks:" block of "R: [tensor, ...]" lines;
  ranks missing tensors with nothing in common wait on each other (different collectives): none is behind;
- ProcessGroupNCCL's watchdog, "[Rank R] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=S, OpType=OP,
  ...)": a vote over the ops at one SeqNum is a majority of the group, not of the lines an excerpt kept;
- Python's traceback printed inside an indented paste: its exception is the first line indented no more than its header;
- aws-ofi-nccl before 1.7: "NET/OFI Request %p completed with error. RC: %d. Error: %s. Completed length: %ld, ...";
- torch 1.10-1.12's ProcessGroupWrapper: "Detected mismatch between collectives on ranks. Rank {} is running
  inconsistent collective: {fingerprint}" (the reporter only);
- NCCL 2.3-2.6 include/socket.h: WARN("Call to connect timeout : %s", strerror(errno)), bootstrap's system error;
- NCCL 1.x src/core.cu: WARN("failed to allocate %lu byte device buffer") / "rank %d failed to allocate device buffer".
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

STALL = (
    "[2020-09-18 03:11:09.347196: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be "
    "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 "
    "seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of "
    "ranks is submitting tensors, which will cause deadlock.\nMissing ranks:\n"
)


def stalled(*lines: str) -> str:
    """The report as horovodrun prints rank 0's stderr: each line behind its "[0]<stderr>:" tag."""
    return "".join(f"[0]<stderr>:{line}\n" for line in (STALL + "\n".join(lines)).splitlines())


def test_ranks_missing_different_tensors_wait_on_each_other_and_none_is_named(tmp_path: Path) -> None:
    split = stalled(*(f"{r}: [broadcast_object_fn.sz]" for r in range(8)), "8: [allreduce.grad_conv1]")
    assert verdict(tmp_path, split)[:2] == ("missing_rank", [])
    behind = stalled(*(f"{r}: [broadcast.conv1.weight, broadcast.conv1.bias]" for r in (0, 1)))
    assert verdict(tmp_path, behind)[:2] == ("missing_rank", [0, 1])  # the same tensors: both are behind
    cut = stalled("0: [allreduce.grad_conv1, allreduce.grad_co$", "1: [allreduce.grad_conv1]")  # a terminal's cut
    assert verdict(tmp_path, cut)[:2] == ("missing_rank", [0, 1])


def watchdog(rank: int, op: str, seq: int = 3742816) -> str:
    return (
        f"[E ProcessGroupNCCL.cpp:737] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        f"OpType={op}, Timeout(ms)=1800000) ran for 1801750 milliseconds before timing out.\n"
    )


def test_an_op_vote_is_a_majority_of_the_group_not_of_the_lines_kept(tmp_path: Path) -> None:
    # ranks 1 and 5 against rank 0, of a world of at least 6: no majority, nobody named
    few = watchdog(1, "_ALLGATHER_BASE") + watchdog(0, "REDUCE") + watchdog(5, "_ALLGATHER_BASE")
    assert verdict(tmp_path, few)[:2] == ("collective_mismatch", [])
    # every rank of 4 reported, 3 against 1: the odd one is named
    most = "".join(watchdog(r, "ALLREDUCE") for r in (0, 1, 3)) + watchdog(2, "BROADCAST")
    assert verdict(tmp_path, most)[:2] == ("collective_mismatch", [2])


def test_a_traceback_in_an_indented_paste_ends_at_its_exception(tmp_path: Path) -> None:
    log = (
        "    Traceback (most recent call last):\n"
        '      File "/app/train.py", line 190, in <module>\n'
        "        work = group.allreduce([tensor], opts)\n"
        "    torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, "
        "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.18.1\n"
        "    ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "    Last error:\n"
        "    Duplicate GPU detected : rank 10 and rank 8 both on CUDA device 160\n"
    )
    assert verdict(tmp_path, log)[0] == "nccl_init_duplicate_gpu"
    flush = "\n".join(line[4:] for line in log.splitlines()) + "\n"  # the same at the margin: the same answer
    assert verdict(tmp_path, flush)[0] == "nccl_init_duplicate_gpu"


def test_the_ofi_plugins_older_completion_error_is_a_network_failure(tmp_path: Path) -> None:
    log = (
        "[1,13]<stdout>:worker-1:35:89 [5] ofi_process_cq:1039 NCCL WARN NET/OFI Request 0x7fbb944701b8 completed with "
        "error. RC: 20. Error: unknown error. Completed length: 0, Request: { buffer_index: 255, dev: 1, size: 0, state: "
        "CREATED, direction: SEND }\n"
    )
    assert verdict(tmp_path, log)[0] == "nccl_remote_error"


def test_the_older_wrappers_report_names_a_mismatch_and_no_rank(tmp_path: Path) -> None:
    log = (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective: "
        "CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[34112], TensorDtypes=Float)\n"
    )
    assert verdict(tmp_path, log)[:2] == ("collective_mismatch", [])


def test_nccl_23s_connect_timeout_is_a_system_error(tmp_path: Path) -> None:
    log = "".join(
        f"gpu-1012:{pid}:{pid + 54} [{d}] include/socket.h:361 NCCL WARN Call to connect timeout : Connection refused\n"
        f"gpu-1012:{pid}:{pid + 54} [{d}] NCCL INFO bootstrap.cu:19 -> 2\n"
        for d, pid in enumerate((4152, 4153))
    )
    assert verdict(tmp_path, log)[0] == "nccl_system_error"


def test_nccl_1s_failed_device_buffer_is_out_of_memory_and_names_no_rank(tmp_path: Path) -> None:
    log = (
        "WARN src/core.cu:225 failed to allocate 2101248 byte device buffer\n"
        "WARN src/core.cu:596 rank 12 failed to allocate device buffer\n"
        "NCCL Init failed (10) 'cuda malloc failed'\n"
    )
    assert verdict(tmp_path, log)[:2] == ("oom", [])


def test_an_hccl_error_is_read_from_the_cann_report_after_it(tmp_path: Path) -> None:
    log = (
        "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64\n"
        "[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST call hccl api failed.\n"
        "EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process. Reason: Maybe the last training "
        "process is running.\n"
    )
    assert verdict(tmp_path, log)[:2] == ("nccl_system_error", [])
    # NCCL's location with its reason cut off stays an exception: nothing says which of NCCL's results it was
    assert (
        verdict(tmp_path, "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:64\n")[0]
        == "child_failed_other"
    )


def test_ranks_that_share_only_their_last_missing_tensor_are_behind_together(tmp_path: Path) -> None:
    """64 ranks of 256 names each, one name in common at the end: read in linear time, and not a split."""
    lists = [", ".join([*(f"t{r}_{i}" for i in range(255)), "allreduce.common"]) for r in range(64)]
    log = stalled(*(f"{r}: [{names}]" for r, names in enumerate(lists)))
    assert verdict(tmp_path, log)[:2] == ("missing_rank", list(range(64)))
