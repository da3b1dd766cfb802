"""What the blind set zy (tests/corpus/diagnose/heldout-zy.md) showed was not read, or read wrong (two false
attributions at first sight), written from each source's own format, not from the set's cases:

- Open MPI's --tag-output prefix inside a line: another process's output spliced in (its own, from its tag on);
- mpirun's first process to exit, another rank than the only one whose error is shown: never high confidence;
- cudaErrorMemoryAllocation (RAPIDS rmm, cupy) is an oom;
- bitsandbytes' CUDA_CHECK_RETURN "Error %s at line %d in file %s";
- torch_npu's HCCL_CHECK_ERROR "HCCL function error: %s, error code is %d" with its HcclResult;
- XLA's "NCCL operation %s failed: Unable to load NCCL library";
- SGLang's "TP rank %d could finish the model loading, but there are other ranks that didn't finish loading"."""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

FIRST = (
    "-" * 74 + "\nmpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to "
    "be terminated. The first process to do so was:\n\n  Process name: [[777,1],{r}]\n  Exit code:    1\n"
    + "-" * 74
    + "\n"
)


def test_a_line_spliced_from_two_processes_is_read_as_the_later_ones(tmp_path: Path) -> None:
    log = (
        "[1,0]<stderr>:terminate called after throwing an instance of 'std::runtime_error'\n"
        "[1,3]<stderr>:  what():  CUDA error: an illegal memory access was encountered\n"
        "[1,3]<stderr>:[node9:4242] [ 0] [1,0]<stderr>:  what():  CUDA error: an illegal memory access was encountered\n"
    )
    got = verdict(tmp_path, log)
    assert got.klass == "cuda_error"
    # rank 0's error, spliced into rank 3's line, is read as rank 0's: 3 is not shown to be first
    assert 0 in got.ranks and got.confidence not in ("high", "medium"), got
    # one process's output, every chunk tagged: still its own line
    own = "[1,2]<stderr>:RuntimeError: CUDA error: an illegal [1,2]<stderr>:memory access was encountered\n"
    assert verdict(tmp_path, own).ranks == [2]


def test_mpiruns_first_exit_outranks_the_only_error_shown(tmp_path: Path) -> None:
    oom = "[1,2]<stderr>:MemoryError: std::bad_alloc: out_of_memory: CUDA error at: /x/rmm.hpp:70: cudaErrorMemoryAllocation out of memory\n"
    got = verdict(tmp_path, oom + FIRST.format(r=1))
    assert (got.klass, got.ranks, got.confidence) == ("oom", [1], "low")
    same = verdict(tmp_path, oom + FIRST.format(r=2))
    assert (same.ranks, same.klass) == ([2], "oom")


def test_bitsandbytes_cuda_check(tmp_path: Path) -> None:
    log = "Error invalid device function at line 88 in file /src/bitsandbytes/csrc/ops.cu\n"
    assert verdict(tmp_path, log).klass == "cuda_error"
    assert verdict(tmp_path, "Error reading config at line 3 in file /etc/app.c\n").klass != "cuda_error"


def test_torch_npus_hccl_results(tmp_path: Path) -> None:
    def line(code: int) -> str:
        return (
            "RuntimeError: create_config:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:102 HCCL function error: "
            f"HcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &comm), error code is {code}\n"
        )

    assert verdict(tmp_path, line(7)).klass == "nccl_system_error"
    assert verdict(tmp_path, line(11)).klass == "nccl_system_error"  # a TCP connect
    assert verdict(tmp_path, line(21)).klass == "nccl_remote_error"  # an error completion from the peer


def test_xla_cannot_load_nccl(tmp_path: Path) -> None:
    log = (
        "E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2732] Execution of replica 0 failed: INTERNAL: "
        "external/xla/xla/service/gpu/nccl_utils.cc:134: NCCL operation ncclGetUniqueId(&id) failed: Unable to load "
        "NCCL library. Multi-GPU collectives will not work.\n"
    )
    assert verdict(tmp_path, log).klass == "nccl_system_error"


def test_sglangs_peers_that_did_not_finish_loading(tmp_path: Path) -> None:
    log = (
        "[2025-01-01 00:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 417, in load_model\n'
        "    raise ValueError(\n"
        "ValueError: TP rank 3 could finish the model loading, but there are other ranks that didn't finish loading. "
        "It is likely due to unexpected failures (e.g., OOM) or a slow node.\n"
    )
    got = verdict(tmp_path, log)
    assert (got.klass, got.ranks) == ("missing_rank", [])  # rank 3 is the one that did finish


def test_two_ranks_with_errors_of_their_own_and_no_order_are_not_said_to_have_failed_first(tmp_path: Path) -> None:
    from validator.diagnose.run import diagnose_paths

    (tmp_path / "job.log").write_text(
        "[1,0]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "[1,2]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    _, diag = diagnose_paths([str(tmp_path / "job.log")])
    assert diag.primary is not None and diag.primary.culprits == [0, 2] and diag.primary.confidence == "low"
    assert "failed first" not in diag.primary.summary and "each failed on their own" in diag.primary.summary
