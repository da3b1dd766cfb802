"""What the blind set zr (tests/corpus/diagnose/heldout-zr.md) showed was not read, written from the sources' own
format strings, not from the set's cases (the logs below are built from them):

- ncclGetErrorString's "unhandled CUDA error" as an NCCL-compatible library spells it;
- nccl-tests' older CUDACHECK, "Cuda failure %s:%d '%s'" (file and line before the CUDA error string);
- a CUDA (or HIP) runtime call that failed with cudaGetErrorString after it: NCCL's transports ("%s failed : %s",
  RCCL's hipified hipIpcGetMemHandle) and the dmlc glog CHECK (CUDA_CALL: "Check failed: e == cudaSuccess || e ==
  cudaErrorCudartUnloading CUDA: %s");
- cudaGetErrorString's words for a kernel's fault in any wrapper (NCCL 1's "Faild to clear dev map: %s");
- XLA's XLA_NCCL_STATUS message whose last NCCL warning is CUDA's out of memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict

XLA = (
    "XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: NCCL operation ncclCommInitRank(&comm, "
    "nranks, id, rank) failed: unhandled cuda error (run with NCCL_DEBUG=INFO for details). Last NCCL warning(error) "
    "log entry (may be unrelated) 'Cuda failure 2 '{}''."
)


@pytest.mark.parametrize(
    ("log", "klass"),
    [
        ("gpu-2: Test NCCL failure common.cu:1005 'unhandled CUDA error'", "cuda_error"),
        (">> Cuda failure common.cu:891 'invalid device ordinal'", "cuda_error"),
        ("Cuda failure common.cu:891 'out of memory'", "oom"),
        ("guest:5161:5196 [1] transport/p2p.cc:239 NCCL WARN hipIpcGetMemHandle failed : invalid argument", "cuda_error"),
        ("node1:5161:5196 [1] NCCL WARN cudaIpcOpenMemHandle failed : invalid device context", "cuda_error"),
        ("F byteps/common/nccl_manager.cc:37] Check failed: e == cudaSuccess || e == cudaErrorCudartUnloading CUDA: "
         "an illegal memory access was encountered", "cuda_error"),
        ("F src/storage/./pooled_storage_manager.h:157] Check failed: e == cudaSuccess || e == cudaErrorCudartUnloading "
         "CUDA: out of memory", "oom"),
        ("WARN src/core.cu:327 Faild to clear dev map: an illegal memory access was encountered", "cuda_error"),
        (XLA.format("out of memory"), "oom"),
        (XLA.format("invalid argument"), "cuda_error"),
    ],
)  # fmt: skip
def test_each_sources_own_words(tmp_path: Path, log: str, klass: str) -> None:
    assert verdict(tmp_path, log + "\n").klass == klass
