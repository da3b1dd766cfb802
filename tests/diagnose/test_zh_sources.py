"""What the blind set zh (tests/corpus/diagnose/heldout-zh.md) showed was not read, written from its sources' own format
strings, not from the set's cases (the logs below are built from them):

- JAX's coordination service (xla/tsl/distributed_runtime/coordination/coordination_service.cc): absl::UnavailableError(
  absl::StrCat("Task ", task_name, " heartbeat timeout. This indicates that the remote task has failed, got preempted,
  or crashed unexpectedly. ...")): the task (JAX's process_id) it stopped hearing from;
- XLA on TPU (tpu_execute_op.cc, XRT's xla_util.cc relaying it): "RESOURCE_EXHAUSTED: Attempting to reserve %s at the
  bottom of memory. That was not possible. ...": the device's memory is exhausted;
- DeepSpeed's transformer kernels (csrc/transformer/cublas_wrappers.cu): "!!!! kernel execution error. (m: %d, n: %d,
  k: %d, error: %d) \\n", a cuBLAS status.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def heartbeat(task: int) -> str:
    return (
        "2022-11-15 16:03:15.140058: E external/org_tensorflow/tensorflow/core/distributed_runtime/coordination/"
        f"coordination_service.cc:954] /job:jax_worker/replica:0/task:{task} has been set to ERROR in coordination "
        f"service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:{task} heartbeat timeout. This indicates that the "
        "remote task has failed, got preempted, or crashed unexpectedly.\n"
    )


def test_the_task_the_coordination_service_stopped_hearing_from_is_named(tmp_path: Path) -> None:
    assert verdict(tmp_path, heartbeat(37) + heartbeat(37))[:2] == ("missing_rank", [37])
    assert verdict(tmp_path, heartbeat(37) + heartbeat(12))[:2] == ("missing_rank", [])  # several: none first


def test_a_tpus_exhausted_memory_is_out_of_memory(tmp_path: Path) -> None:
    log = (
        "2023-03-23 02:02:23.050198: W tensorflow/core/framework/op_kernel.cc:1830] OP_REQUIRES failed at "
        "tpu_execute_op.cc:266 : RESOURCE_EXHAUSTED: Attempting to reserve 10.51G at the bottom of memory. That was not "
        "possible. There are 8.97G free, 0B reserved, and 8.97G reservable.\n"
    )
    assert verdict(tmp_path, log)[:2] == ("oom", [])


def test_deepspeeds_cublas_kernel_error_is_a_cuda_error(tmp_path: Path) -> None:
    log = "".join(f"!!!! kernel execution error. (m: {m}, n: 4608, k: 768, error: 13)\n" for m in (768, 2304, 3072))
    assert verdict(tmp_path, log)[:2] == ("cuda_error", [])
