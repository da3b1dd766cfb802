"""What the blind set zj (tests/corpus/diagnose/heldout-zj.md) showed was not read, written from its sources' own format
strings, not from the set's cases (the logs below are built from them):

- c10d TCPStore.cpp's connect loop: C10D_WARNING("TCP client failed to connect/validate to host {}:{} - retrying
  (try={}, timeout={}ms, delay={}ms): {}") for a failed try, C10D_ERROR("... - timed out (try={}, timeout={}ms): {}")
  once the deadline passed: only the second is a timeout, and neither names rank 0 by itself;
- c10d socket.cpp: "The client socket has failed to connect to any network address of ({}, {})." followed on its line by
  the last try's "The client socket has failed to connect to {} (errno: {} - {})." (EINVAL: an address no host has);
- ColossalAI's `colossalai run` (multinode_runner.py): f"Error: failed to run {cmds} on {hostname}, is localhost:
  {is_local_host}, exception: {e}": fabric's ssh login or connect failed, or the remote command exited non-zero;
- Rust's default allocation error hook (library/std/src/alloc.rs): "memory allocation of {} bytes failed";
- the TPU allocator's "Attempting to allocate %s. That was not possible. There are %s free." behind PJRT's
  "RESOURCE_EXHAUSTED: Error allocating device buffer: " or XRT's "(1) Resource exhausted: ";
- NCCL net_ib.cc (2.4-2.18): WARN("NET/IB : Got async event : %s", ibv_event_type_str(...)) for a port error;
- NCCL net_socket.cc: "NET/Socket : peer %s message truncated : receiving %d bytes instead of %d", wrapped by a paste;
- Huawei CANN (EI9999): "... hccl fftsplus task timeout occurred during task execution, stream_id:%u, ..."
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

RETRY = (
    "[W426 16:56:01.831041000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to host {host}:59782 - "
    "retrying (try={n}, timeout=1800000ms, delay=5241ms): {why}\n"
)
TIMED_OUT = (
    "[E426 17:26:01.831041000 TCPStore.cpp:338] [c10d] TCP client failed to connect/validate to host {host}:59782 - "
    "timed out (try={n}, timeout=1800000ms): The client socket has timed out after 1800000ms while trying to connect "
    "to ({host}, 59782).\n"
)


def test_a_store_connect_retried_is_a_failed_try_not_a_timeout_and_names_nobody(tmp_path: Path) -> None:
    reset = "".join(RETRY.format(host="10.1.2.3", n=n, why="Connection reset by peer") for n in range(3))
    assert verdict(tmp_path, reset)[:2] == ("connection_refused", [])
    refused = "".join(RETRY.format(host="10.1.2.3", n=n, why="Connection refused") for n in range(3))
    assert verdict(tmp_path, refused)[:2] == ("connection_refused", [])
    # the deadline passed: a timeout, and in an env:// world (no torchrun) the client waited for rank 0's store
    assert verdict(tmp_path, TIMED_OUT.format(host="10.1.2.3", n=7))[:2] == ("rendezvous_timeout", [0])


def test_a_connect_that_fails_at_once_on_a_bogus_address_is_refused(tmp_path: Path) -> None:
    log = (
        "RuntimeError: The client socket has failed to connect to any network address of (0.0.188.125, 59771). "
        "The client socket has failed to connect to 0.0.188.125:59771 (errno: 22 - Invalid argument).\n"
    )
    assert verdict(tmp_path, log)[:2] == ("connection_refused", [])
    waited = log.replace("errno: 22 - Invalid argument", "errno: 110 - Connection timed out")
    assert verdict(tmp_path, waited)[0] == "rendezvous_timeout"


def test_colossalai_runs_failed_ssh_login_is_a_node_it_could_not_reach(tmp_path: Path) -> None:
    cmd = "torchrun --nproc_per_node=4 --nnodes=2 --node_rank=1 --master_addr=10.0.0.1 --master_port=29500 train.py"
    for why in ("No authentication methods available", "not a valid RSA private key file", "Authentication failed."):
        log = f"Error: failed to run {cmd} on gpu-7, is localhost: False, exception: {why}\n"
        got = verdict(tmp_path, log)
        assert got[:2] == ("connection_refused", []), why
    # the remote torchrun ran and exited non-zero: its own failure, not an unreachable node
    ran = f"Error: failed to run {cmd} on gpu-7, is localhost: False, exception: Encountered a bad command exit code!\n"
    assert verdict(tmp_path, ran)[0] != "connection_refused"


def test_rusts_allocation_failure_is_out_of_memory(tmp_path: Path) -> None:
    assert verdict(tmp_path, "memory allocation of 2097152 bytes failed\nAborted (core dumped)\n")[0] == "oom"


def test_a_tpus_refused_allocation_is_out_of_memory(tmp_path: Path) -> None:
    pjrt = (
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate "
        "196.00M. That was not possible. There are 134.44M free.; (1x0x0_HBM0)\n"
    )
    xrt = (
        "2020-10-22 02:48:58 10.128.0.33 [3]   (1) Resource exhausted: Attempting to allocate 180.59M. That was not "
        "possible. There are 142.58M free.; (0x3x0_HBM1)\n"
    )
    assert verdict(tmp_path, pjrt)[0] == "oom"
    assert verdict(tmp_path, xrt)[0] == "oom"  # no error word on the line: its own anchor
    grpc = "grpc: RESOURCE_EXHAUSTED: Received message larger than max (4194305 vs. 4194304)\n"
    assert verdict(tmp_path, grpc)[0] != "oom"


def test_an_ib_port_error_of_the_older_form_is_an_nccl_network_failure(tmp_path: Path) -> None:
    log = "".join(
        f"node-48:{pid}:{pid + 70} [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error\n\n"
        for pid in range(34050, 34058)
    )
    assert verdict(tmp_path, log)[0] == "nccl_remote_error"
    benign = log.replace("port error", "GID table change")
    assert verdict(tmp_path, benign)[0] not in ("nccl_remote_error", "nccl_system_error")


def test_a_wrapped_socket_size_mismatch_is_a_collective_mismatch(tmp_path: Path) -> None:
    log = (
        "transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 192.168.161.30<59210> message truncated :\n"
        "receiving 1048576 bytes instead of 65536\n"
    )
    assert verdict(tmp_path, log)[0] == "collective_mismatch"


def test_an_hccl_task_timeout_is_a_collective_timeout(tmp_path: Path) -> None:
    log = (
        "EI9999: 2024-10-21-10:42:00.358.410  The error from device(chipId:3, dieId:0), serial number is 9, hccl fftsplus "
        "task timeout occurred during task execution, stream_id:5, sq_id:5, task_id:38827, stuck notify num:1, "
        "timeout:30min(default).[FUNC:ProcessStarsHcclFftsPlusTimeoutErrorInfo][FILE:device_error_proc.cc][LINE:1435]\n"
    )
    assert verdict(tmp_path, log)[0] == "collective_timeout"
