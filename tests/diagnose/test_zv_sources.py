"""What the blind set zv (tests/corpus/diagnose/heldout-zv.md) showed was not read, written from each source's own
format, not from the set's cases (the logs below are built from it):

- PyTorch/XLA's mesh service (xla_client/mesh_service.cc): "Failed to meet rendezvous '%s': %s (%d)" with the gRPC
  status's message and code; 14 (UNAVAILABLE) "Socket closed" is the mesh master's end gone;
- TensorPipe (torch.distributed.rpc) reports libuv's errors as "ECONNRESET: connection reset by peer" and "EPIPE:
  broken pipe", and "pipe closed (this error originated at tensorpipe/core/pipe_impl.cc:N)";
- Horovod's SHUT_DOWN_ERROR (horovod/common/operations.cc), a survivor's report of another rank's exception;
- Huawei CANN's EI0006 socket timeout, in its older and newer wordings;
- Level Zero's ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY inside oneCCL's CCL_ERROR: a device out of memory;
- mpirun's "The first process to do so was: Process name: [[J,V],R]" beside NCCL errors on that process alone."""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def test_xla_mesh_rendezvous_socket_closed_is_a_lost_peer(tmp_path: Path) -> None:
    log = (
        "Exception in device=TPU:3: tensorflow/compiler/xla/xla_client/mesh_service.cc:294 : Failed to meet rendezvous "
        "'epoch_end': Socket closed (14)\n"
    )
    got = verdict(tmp_path, log)
    assert (got.klass, got.ranks) == ("connection_refused", [])
    deadline = log.replace("Socket closed (14)", "Deadline Exceeded (4)")
    assert verdict(tmp_path, deadline).klass != "connection_refused"  # a timeout, not a peer gone


def test_tensorpipe_resets_and_closed_pipes_are_lost_peers(tmp_path: Path) -> None:
    for line in (
        "[W tensorpipe_agent.cpp:1025] RPC agent for trainer3 encountered error when reading incoming response from "
        "ps0: ECONNRESET: connection reset by peer (this error originated at tensorpipe/transport/uv/connection_impl.cc:157)",
        "RuntimeError: EPIPE: broken pipe (this error originated at tensorpipe/transport/uv/connection_impl.cc:157)",
        "[W tensorpipe_agent.cpp:725] RPC agent for trainer1 encountered error when reading incoming request from ps0: "
        "pipe closed (this error originated at tensorpipe/core/pipe_impl.cc:356)",
    ):
        got = verdict(tmp_path, line + "\n")
        assert (got.klass, got.ranks) == ("connection_refused", []), line


def test_horovod_shut_down_is_a_survivors_report(tmp_path: Path) -> None:
    down = (
        "W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at mpi_ops.cc:316 : Unknown: Horovod has been "
        "shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or "
        "broadcast a tensor after one of the ranks finished execution.\n"
    )
    got = verdict(tmp_path, down)
    assert (got.klass, got.ranks, got.code) == ("child_failed_other", [], "DGN010")
    # the exception that shut it down, where the log has it, is the verdict
    cause = "[1,2]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert verdict(tmp_path, cause + down).klass == "cuda_error"


def test_cann_ei0006_socket_timeout_is_a_collective_timeout(tmp_path: Path) -> None:
    for line in (
        "EI0006: 2025-01-02-03:04:05.678.901 Getting socket times out. Reason: Remote Rank did not send the data in time.",
        "[PID: 4242] 2025-12-29-03:16:15.787.356 Get_Socket_Timeout(EI0006): Getting socket times out. Reason: 1. The "
        "remote does not initiate a connect request.",
    ):
        got = verdict(tmp_path, line + "\n")
        assert (got.klass, got.ranks) == ("collective_timeout", []), line


def test_level_zero_out_of_device_memory_inside_oneccl_is_an_oom(tmp_path: Path) -> None:
    ccl = (
        "2024:05:29-19:16:18:(4242) |CCL_ERROR| worker.cpp:338 ccl_worker_func: worker 0 caught internal exception: "
        "oneCCL: ze_call.cpp:28 do_call: EXCEPTION: ze error at zeCommandListAppendMemoryCopy, code: {}\n"
    )
    assert verdict(tmp_path, ccl.format("ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY")).klass == "oom"
    assert verdict(tmp_path, ccl.format("ZE_RESULT_ERROR_DEVICE_LOST")).klass == "nccl_system_error"


def _mpirun(ranks_with_errors: list[int]) -> str:
    init = "".join(
        f"gpu{r}:{700 + r}:{710 + r} [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank {r} nranks 2 cudaDev 0 nvmlDev 0 "
        f"busId 59000 commId 0x14de91f5a6ab0c4b - Init COMPLETE\n"
        for r in (0, 1)
    )
    errors = "".join(
        f"gpu{r}:{700 + r}:{720 + r} [0] NCCL INFO transport/net.cc:985 -> 3\n"
        f"gpu{r}:{700 + r}:{720 + r} [0] NCCL INFO proxy.cc:1005 -> 3\n"
        for r in ranks_with_errors
    )
    summary = (
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n"
        "  Process name: [[25545,1],0]\n"
        "  Exit code:    3\n"
    )
    return init + errors + summary


def test_nccl_errors_on_mpiruns_first_process_alone_name_it(tmp_path: Path) -> None:
    got = verdict(tmp_path, _mpirun([0]))
    assert (got.klass, got.ranks, got.confidence, got.hosts) == ("nccl_system_error", [0], "low", ["gpu0"])
    # errors on both processes: the first to exit may be an echo of the other's failure
    assert verdict(tmp_path, _mpirun([0, 1])).ranks == []
    # errors on another process than mpirun's first: nobody named
    assert verdict(tmp_path, _mpirun([1])).ranks == []
