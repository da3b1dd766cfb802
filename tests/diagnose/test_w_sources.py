"""What the blind set w (tests/corpus/diagnose/heldout-w.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- torch 1.9-1.11 ProcessGroupNCCL (WorkNCCL, raised from work.wait()): "[Rank %d] Caught collective operation timeout:
  %s ran for %d milliseconds before timing out." (later: "Watchdog caught ...");
- torch's OutOfMemoryError (the caching allocator's TORCH_CHECK_WITH(OutOfMemoryError, ...)), its message on the next
  line as a paste may put it;
- Paddle's NCCL enforce (paddle/fluid/platform/enforce.h, build_nvidia_error_msg): " Nccl error, " +
  ncclGetErrorString(result), raised as ExternalError;
- c10d socket.cpp's connect warning on Windows: "The client socket has failed to connect to %s (system error: %d -
  %s)." (POSIX: "errno: %d - %s"), WSA codes 10061 (refused) and 10049 (address not available): failures at once;
- Open MPI's btl/tcp help text [peer hung up]: "An MPI communication peer process has unexpectedly disconnected.";
- an NCCL line with a bare "[N]" glued before its host:pid:tid (a job runner's tag no rank shape reads): still NCCL's
  line, its "file.cc:N -> R" trail read, N not read as a rank.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

CAUGHT = (
    "RuntimeError: [Rank {rank}] Caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
    "TensorShape=[], Timeout(ms)=1800000) ran for 1800312 milliseconds before timing out.\n"
)


def test_torch_1_x_caught_collective_operation_timeout_is_a_collective_timeout(tmp_path: Path) -> None:
    klass, ranks, _ = verdict(tmp_path, CAUGHT.format(rank=3, seq=12, op="ALLREDUCE"))[:3]
    assert (klass, ranks) == ("collective_timeout", [])  # the one rank that noticed is not the culprit


def test_an_out_of_memory_error_whose_message_is_on_the_next_line_is_an_oom(tmp_path: Path) -> None:
    text = "torch.OutOfMemoryError:\nCUDA out of memory. Tried to allocate 20.00 MiB.\n"
    assert verdict(tmp_path, text)[0] == "oom"
    assert verdict(tmp_path, "torch.cuda.OutOfMemoryError: \n")[0] == "oom"


def test_paddles_nccl_error_carries_ncclgeterrorstring(tmp_path: Path) -> None:
    line = "ExternalError:  Nccl error, {what}  (at /paddle/paddle/fluid/platform/collective_helper.cc:83)\n"
    assert verdict(tmp_path, line.format(what="unhandled cuda error"))[0] == "cuda_error"
    assert verdict(tmp_path, line.format(what="unhandled system error"))[0] == "nccl_system_error"


def test_a_windows_connect_failure_at_once_is_a_refusal_and_a_timeout_is_not(tmp_path: Path) -> None:
    warn = (
        "[W socket.cpp:558] [c10d] The client socket has failed to connect to [node0]:29500 (system error: {code} - "
        "{msg}).\n"
    )
    assert verdict(tmp_path, warn.format(code=10049, msg="The requested address is not valid in its context."))[0] == (
        "connection_refused"
    )
    assert verdict(tmp_path, warn.format(code=10061, msg="No connection could be made."))[0] == "connection_refused"
    assert verdict(tmp_path, warn.format(code=10060, msg="A connection attempt failed."))[0] != "connection_refused"


def test_open_mpis_peer_hung_up_is_a_process_that_failed(tmp_path: Path) -> None:
    text = (
        "An MPI communication peer process has unexpectedly disconnected.  This\n"
        "usually indicates a failure in the peer process (e.g., a crash or\n"
        "otherwise exiting without calling MPI_FINALIZE first).\n\n"
        "  Local host: nodeA\n  Local PID:  7720\n  Peer host:  nodeB\n"
    )
    klass, ranks, _ = verdict(tmp_path, text)[:3]
    assert (klass, ranks) == ("child_failed_other", [])


def test_a_bare_tag_before_nccls_host_keeps_its_result_trail_and_names_no_rank(tmp_path: Path) -> None:
    text = (
        "[5]nodeA:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from 10.0.0.9<41468> failed : "
        "Connection timed out\n"
        "[5]nodeA:83:2526 [0] NCCL INFO misc/socket.cc:520 -> 2\n"
    )
    klass, ranks, _ = verdict(tmp_path, text)[:3]
    assert (klass, ranks) == ("nccl_system_error", [])  # NCCL's own result (2) over the family's usual remote
