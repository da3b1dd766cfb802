"""Shapes the blind sets q, r, s and t showed were misread (issue 25), each written from its source's format string,
so that every message of the family is read, not the one case (the cases are in tests/corpus/diagnose/):

- NCCL src/bootstrap.cc bootstrapNetRecv: WARN("Message truncated : received %d bytes instead of %d", ...);
- THC (PyTorch <= 1.10) THCGeneral.cpp __THCudaCheck: "cuda runtime error (%d) : %s" + " at %s:%d";
- c10d socket.cpp SocketConnectOp::tryConnect: "The {}network addresses of ({}, {}) cannot be retrieved (gai error: {}
  - {})." and SocketListenOp::run "The server socket has failed to listen on any local network address."; older c10d
  Utils.cpp tcputil::connect: std::invalid_argument("host not found: " + gai_strerror(err));
- c10 CUDAGuardImpl: TORCH_WARN("CUDA warning: ", cudaGetErrorString(err));
- ProcessGroupNCCL.cpp broadcastUniqueNCCLID: "... but store->get('%s') got error: %s" with a reset connection;
- Slurm slurmstepd: "*** STEP %s ON %s CANCELLED AT %s ***" without "DUE TO ...";
- the env:// contract (torch/distributed/rendezvous.py: RANK, WORLD_SIZE) as a shell sets it;
- SGLang's scheduler (python/sglang/srt/managers/scheduler.py): logger.error(f"Scheduler hit an exception: {tb}").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict


def test_a_truncated_bootstrap_message_is_a_mismatch_naming_nobody(tmp_path: Path) -> None:
    line = "node-1:4021:4090 [5] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n"
    assert verdict(tmp_path, line)[:2] == ("collective_mismatch", [])


@pytest.mark.parametrize(
    ("line", "cls"),
    [
        ("RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at /p/THCCachingHostAllocator.cpp:265", "cuda_error"),
        ("RuntimeError: cuda runtime error (59) : device-side assert triggered at /p/THCReduceAll.cuh:327", "cuda_error"),
        ("RuntimeError: cuda runtime error (2) : out of memory at /p/THCStorage.cu:58", "oom"),
    ],
)  # fmt: skip
def test_thc_cuda_runtime_errors_are_cuda_class(tmp_path: Path, line: str, cls: str) -> None:
    assert verdict(tmp_path, line + "\n")[:2] == (cls, [])


GAI = "[W socket.cpp:558] [c10d] The {}network addresses of (head-svc, 50176) cannot be retrieved (gai error: -2 - Name or service not known).\n"  # fmt: skip
ANY = "[E socket.cpp:610] [c10d] The client socket has failed to connect to any network address of (head-svc, 50176).\n"


def test_a_store_host_that_does_not_resolve_is_a_refused_connection(tmp_path: Path) -> None:
    assert verdict(tmp_path, GAI.format("IPv6 ") + GAI.format("IPv4 ") + ANY)[:2] == ("connection_refused", [])
    assert verdict(tmp_path, "ValueError: host not found: Name or service not known\n")[:2] == (
        "connection_refused",
        [],
    )


def test_an_ipv6_lookup_alone_does_not_make_a_timeout_a_refusal(tmp_path: Path) -> None:
    # c10d warns per family; IPv4 resolved and the connect then timed out
    timeout = "[W socket.cpp:601] [c10d] The client socket has failed to connect to 10.0.0.9:50176 (errno: 110 - Connection timed out).\n"  # fmt: skip
    assert verdict(tmp_path, GAI.format("IPv6 ") + timeout + ANY)[0] == "rendezvous_timeout"


def test_a_store_that_failed_to_listen_is_a_port_in_use(tmp_path: Path) -> None:
    line = "RuntimeError: The server socket has failed to listen on any local network address.\n"
    assert verdict(tmp_path, line)[:2] == ("address_in_use", [])


def test_a_cuda_warning_outranks_store_connect_retries(tmp_path: Path) -> None:
    text = (
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
        "assign requested address).\n"
        "epoch 2 step 815\n"
        "[W CUDAGuardImpl.h:124] Warning: CUDA warning: device-side assert triggered (function destroyEvent)\n"
    )
    assert verdict(tmp_path, text)[:2] == ("cuda_error", [])


def test_a_reset_store_connection_under_the_unique_id_is_a_refused_connection(tmp_path: Path) -> None:
    line = (
        "RuntimeError: [14] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
        "store by key '0', but store->get('0') got error: Connection reset by peer\n"
    )
    assert verdict(tmp_path, line)[:2] == ("connection_refused", [])


WATCHDOG = (
    "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800008 milliseconds before timing out.\n"
)


def test_a_slurm_cancel_after_the_ranks_failed_is_their_consequence(tmp_path: Path) -> None:
    cancel = "slurmstepd: error: *** STEP 6053.0 ON node1 CANCELLED AT 2024-04-23T12:18:08 ***\n"
    assert verdict(tmp_path, WATCHDOG + cancel)[:2] == ("collective_timeout", [])
    # a stop with a reason is the scheduler's, whatever the ranks printed before it
    limit = cancel.replace(" ***", " DUE TO TIME LIMIT ***")
    assert verdict(tmp_path, WATCHDOG + limit).code == "DGN014"
    assert verdict(tmp_path, cancel).code == "DGN014"


TIMEOUT = "[E socket.cpp:957] [c10d] The client socket has timed out after 600s while trying to connect to (127.0.0.1, 3333).\n"  # fmt: skip


def test_a_store_client_outside_its_world_names_no_rank_0(tmp_path: Path) -> None:
    # env://: rank 0 hosts the store, so a client's timeout names it (corpus 37, k16, m01) ...
    assert verdict(tmp_path, "$ export RANK=1\n$ export WORLD_SIZE=2\n" + TIMEOUT)[:3] == (
        "rendezvous_timeout",
        [0],
        "medium",
    )
    # ... but a RANK outside WORLD_SIZE joins no world whose rank 0 could host it
    assert verdict(tmp_path, "$ export RANK=1\n$ export WORLD_SIZE=1\n" + TIMEOUT)[:2] == ("rendezvous_timeout", [])


def test_an_sglang_record_carries_its_tp_rank_to_the_exception_of_its_traceback(tmp_path: Path) -> None:
    text = (
        "[2025-04-11 16:24:18 TP7] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2009, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95 GiB\n"
    )
    assert verdict(tmp_path, text)[:2] == ("oom", [7])
    # without the record's prefix nothing names a rank (GPU 7 is a device)
    assert verdict(tmp_path, text.replace(" TP7", ""))[:2] == ("oom", [])
