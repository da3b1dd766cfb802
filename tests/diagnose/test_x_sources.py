"""What the blind set x (tests/corpus/diagnose/heldout-x.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- nccl-tests' NCCLCHECK: printf("NCCL failure %s:%d '%s'\\n", __FILE__, __LINE__, ncclGetErrorString(r)); DeepBench's
  "NCCL failure: " + ncclGetErrorString(r) + " in %s at line: %d rank: %d";
- THC's non-throwing check (THCGeneral.cpp __THCudaCheckWarn, PyTorch <= 1.10): "THCudaCheck FAIL file=%s line=%i
  error=%i : %s" with cudaGetErrorString(err); PyTorch <= 0.4's "CuDNN error: CUDNN_STATUS_%s";
- DDP's construction check (reducer.cpp verify_params_across_processes): "DDP expects same model across all ranks, but
  Rank %d has %d params, while rank %d has inconsistent %d params.";
- NCCL 2.4-2.6's transport lines, one per peer: "Ring %02d : %d[%d] -> %d[%d] via %s" (sender first): the printing
  process's rank is the one on all of its lines.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def test_nccl_tests_and_deepbench_nccl_failures_carry_ncclgeterrorstring(tmp_path: Path) -> None:
    assert verdict(tmp_path, "NCCL failure all_reduce.cu:95 'unhandled cuda error'\n")[0] == "cuda_error"
    assert verdict(tmp_path, "NCCL failure common.cu:412 'unhandled system error'\n")[0] == "nccl_system_error"
    two = "".join(
        f"  what():  NCCL failure: unhandled cuda error in nccl_mpi_all_reduce.cu at line: 86 rank: {r}\n"
        for r in (0, 1)
    )
    assert verdict(tmp_path, two)[:2] == ("cuda_error", [])  # both ranks alike, no clock: nobody named


def test_thcs_warning_check_and_old_cudnn_errors_are_cuda_errors(tmp_path: Path) -> None:
    thc = "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line={line} error={err} : {what}\n"
    assert verdict(tmp_path, thc.format(line=383, err=77, what="an illegal memory access was encountered"))[0] == (
        "cuda_error"
    )
    assert verdict(tmp_path, thc.format(line=51, err=2, what="out of memory"))[0] == "oom"
    assert verdict(tmp_path, "RuntimeError: CuDNN error: CUDNN_STATUS_EXECUTION_FAILED\n")[0] == "cuda_error"


def test_ddps_model_check_is_a_mismatch_naming_neither_rank(tmp_path: Path) -> None:
    line = (
        "RuntimeError: DDP expects same model across all ranks, but Rank {a} has {n} params, while rank {b} has "
        "inconsistent {m} params.\n"
    )
    klass, ranks, confidence = verdict(tmp_path, line.format(a=3, n=10, b=0, m=12))[:3]
    assert (klass, ranks, confidence) == ("collective_mismatch", [], "unknown")


def _ring(pid: int, dev: int, line: str) -> str:
    return f"nodeA:{pid}:{pid + 7} [{dev}] NCCL INFO {line}\n"


def test_nccls_transport_lines_tie_a_process_to_its_rank(tmp_path: Path) -> None:
    text = (
        _ring(52617, 4, "Ring 00 : 4[4] -> 5[5] via P2P/IPC")
        + _ring(52617, 4, "Ring 01 : 4[4] -> 3[3] via direct shared memory")
        + _ring(52617, 4, "Ring 02 : 3[3] -> 4[4] via direct shared memory")
        + "nodeA:52617:52624 [4] include/shm.h:42 NCCL WARN Cuda failure 'invalid argument'\n"
    )
    klass, ranks, _, hosts = verdict(tmp_path, text)[:4]
    assert (klass, ranks, hosts) == ("cuda_error", [4], ["nodeA"])
    one = _ring(52617, 4, "Ring 00 : 4[4] -> 5[5] via P2P/IPC") + text.splitlines(keepends=True)[-1]
    assert verdict(tmp_path, one)[1] == []  # one line names two ranks: which one printed it is not known
