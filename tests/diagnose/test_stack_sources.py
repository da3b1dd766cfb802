"""Failure lines of stacks beside torch and NCCL, written from each source's own format string (not from a log
of the corpus or a blind set): what a user of JAX, TensorFlow, Paddle, UCX or torch's DataLoader pastes.

- XLA's allocators: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate %d bytes." (JAX's XlaRuntimeError);
- TensorFlow's BFC allocator: "OOM when allocating tensor with shape%s and type %s on %s by allocator %s";
- Paddle's build_nvidia_error_msg for cudaError_t: "CUDA error(%d), %s." (an ExternalError);
- c10's C10_CUDA_DRIVER_CHECK: "CUDA driver error: %s";
- UCX's ucs_error: "[%lu.%06lu] [%s:%d:%d] %16s:%-4u UCX  ERROR %s", a verbs call that failed on its own host;
- torch's DataLoader worker: "ERROR: Unexpected bus error encountered in worker. This might be caused by
  insufficient shared memory (shm)."
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict


@pytest.mark.parametrize(
    ("log", "klass"),
    [
        ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
         "17179869184 bytes.", "oom"),
        ("E0101 12:00:00.000000 1234 pjrt_stream_executor_client.cc:2766] Execution of replica 0 failed: "
         "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 512 bytes.", "oom"),
        ("2026-01-01 12:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:479] OOM when allocating "
         "tensor with shape[32,1024,1024] and type float on /job:worker/replica:0/task:0/device:GPU:0 by allocator "
         "GPU_0_bfc", "oom"),
        ("OSError: (External) CUDA error(700), an illegal memory access was encountered.", "cuda_error"),
        ("OSError: (External) CUDA error(2), out of memory.", "oom"),
        ("RuntimeError: CUDA driver error: an illegal memory access was encountered", "cuda_error"),
        ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
         "(shm).", "child_failed_other"),
    ],
)  # fmt: skip
def test_each_stacks_own_words(tmp_path: Path, log: str, klass: str) -> None:
    assert verdict(tmp_path, log + "\n").klass == klass


def test_ucx_names_the_verbs_call_and_its_host(tmp_path: Path) -> None:
    line = (
        "[1700000000.123456] [node3:12345:0]          ib_iface.c:746  UCX  ERROR ibv_create_cq(cqe=4096) failed: "
        "Cannot allocate memory\n"
    )
    got = verdict(tmp_path, line)
    assert (got.klass, got.hosts) == ("nccl_system_error", ["node3"])  # a completion queue: the host's locked memory
