"""Message families derived from the sources' format strings (validator/diagnose/families.py):
messages of each family, as its format string prints them, land in the right kind with their
fields; NCCL results map to the corpus classes by return code."""

from __future__ import annotations

from pathlib import Path

import pytest

from validator.diagnose.classify import classify
from validator.diagnose.events import Role
from validator.diagnose.families import nccl_class, nccl_vocab
from validator.diagnose.run import diagnose_paths
from validator.docs import explain_text

CASES = [
    # NCCL init.cc (2.4-2.7)
    (
        "NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 3. You can use "
        "NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs",
        "nccl.mismatch_around",
        "around",
        "3",
    ),
    # proxy.cc
    (
        "NCCL WARN [Proxy Service 12] Failed to execute operation Connect from rank 12, retcode 3",
        "nccl.proxy_failed",
        "retcode",
        "3",
    ),
    # misc/socket.cc (current and older)
    (
        "NCCL WARN socketStartConnect: connect to 10.1.2.3<41257> returned Connection timed out, exceeded error retry "
        "count after 35 attempts",
        "nccl.connect_failed",
        "peer",
        "10.1.2.3",
    ),
    (
        "NCCL WARN Net : Connect to 10.38.10.112<21724> failed : Connection refused",
        "nccl.connect_failed",
        "port",
        "21724",
    ),
    (
        "NCCL WARN ncclOsSocketTryAccept: Accept failed: Too many open files",
        "nccl.connect_failed",
        "why",
        "Too many open files",
    ),
    # net_ib: current status= form and the older error form
    (
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.7<52311> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
        "nccl.ib_error",
        "status",
        "12",
    ),
    ("NCCL WARN NET/IB : mlx5_0:1 async fatal event: local catastrophic error", "nccl.ib_error", "dev", "mlx5_0"),
    # alloc.h
    ("NCCL WARN Failed to CUDA calloc async 8388608 bytes", "cuda.oom", "bytes", "8388608"),
    # RAS (2.24+)
    ("  Process 4242 on node gpu-17 managing GPU 3", "nccl.ras_missing", "node", "gpu-17"),
    ("  Rank 5 -- GPU 5 managed by process 4242 on node gpu-17", "nccl.ras_missing", "comm_rank", "5"),
    # gloo pair.cc / socket.cc
    (
        "RuntimeError: [gloo/transport/tcp/pair.cc:799] connect [127.0.1.1]:13195: Connection refused",
        "gloo.connect_refused",
        "peer",
        "127.0.1.1",
    ),
    (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:210] Connect timeout [10.0.0.2]:4567",
        "gloo.connect_refused",
        "port",
        "4567",
    ),
    # c10d socket.cpp, distributed_c10d.py
    (
        "[c10d] The client socket has failed to connect to any network address of (node-0, 29500).",
        "rdzv.connect_failed",
        "host",
        "node-0",
    ),
    (
        "RuntimeError: Timed out initializing process group in store based barrier on rank 3, for key: "
        "store_based_barrier_key:1 (world_size=8, num_workers_joined=7, timeout=0:30:00 error=...)",
        "rdzv.store_barrier",
        "count",
        "7",
    ),
    # ProcessGroupGloo monitoredBarrier, reporter side
    (
        "RuntimeError: Rank 3 successfully reached monitoredBarrier, but received errors while waiting for send/recv from "
        "rank 0. Please check rank 0 logs for faulty rank.",
        "coll.monitored_peer",
        "reporter",
        "3",
    ),
    # net_ib.cc / net_socket.cc: a transfer's two ends disagree on its size, in each release's wording
    (
        "NCCL WARN NET/IB : collective mismatch error local size 546816 remote 524288 addr 7ff7d1530000 rkey 2553d "
        "seq 14/1c",  # 2.4-2.9
        "nccl.size_mismatch",
        "remote",
        "524288",
    ),
    (
        "NCCL WARN NET/IB : peer 10.0.0.2<45678> collective mismatch error local size 1024 remote 2048 addr 7f00 rkey 1 "
        "seq 3/4",  # 2.11
        "nccl.size_mismatch",
        "peer",
        "10.0.0.2",
    ),
    (
        "NCCL WARN NET/IB : req 0/1 tag 7 peer 10.0.0.3<1234> collective mismatch error, local size 8 remote size 16",
        "nccl.size_mismatch",
        "local",
        "8",
    ),
    (
        "NCCL WARN NET/Socket : message truncated : receiving 4096 bytes instead of 2048",
        "nccl.size_mismatch",
        "local",
        "2048",
    ),
    (
        "NCCL WARN NET/Socket : peer 10.1.1.1<5555> message truncated : receiving 4096 bytes instead of 2048. If you "
        "believe your socket network is in healthy state, there may be a mismatch in collective sizes",
        "nccl.size_mismatch",
        "remote",
        "4096",
    ),
    # aws-ofi-nccl; NCCL 2.0-2.2's WARN without "NCCL"
    (
        "NCCL WARN NET/OFI Unable to register memory (type = 1) for device 0. RC: 12, Error: Cannot allocate memory",
        "nccl.syscall_failed",
        "err",
        "Cannot allocate memory",
    ),
    (
        "[0] include/socket.h:185 WARN Call to connect failed : Connection refused",
        "nccl.syscall_failed",
        "call",
        "connect",
    ),
    # Horovod's NCCL error text inside a framework's exception; Triton's CUDA error; NCCL <= 2.11 socket()
    (
        "tensorflow.python.framework.errors_impl.UnknownError:  ncclCommInitRank failed: unhandled system error",
        "nccl.error",
        "what",
        "unhandled system error",
    ),
    (
        "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
        "cuda.error",
        "what",
        "an illegal memory access was encountered",
    ),
    ("Net : Socket creation failed : Address family not supported by protocol", "nccl.no_interface", "", ""),
    (
        "include/socket.h:311 WARN Socket creation failed : Too many open files",
        "nccl.syscall_failed",
        "err",
        "Too many open files",
    ),
    # a watchdog timeout hard-wrapped inside its WorkNCCL(...): still a timeout, its fields lost
    (
        "[PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(S",
        "coll.watchdog_timeout",
        "",
        "",
    ),
    # Horovod stall_inspector.cc
    ("HorovodAllreduce_grad_0 [missing ranks: 2, 5]", "hvd.stall", "sets", "missing:2,5"),
    # ProcessGroupNCCL dump signal; allocators and ROCm wording
    (
        "[PG ID 0 PG GUID 0(default_pg) Rank 2] Received a dump signal due to a collective timeout from  rank 6 and we "
        "will try our best to dump the debug info.",
        "coll.dump_signal",
        "from",
        "6",
    ),
    (
        "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
        "allocate 8589934592 bytes.",
        "host.oom",
        "",
        "",
    ),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB.", "cuda.oom", "", ""),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR", "cuda.error", "what", "CUDNN_STATUS_INTERNAL_ERROR"),
    # launchers
    (
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL",
        "agent.child_failed",
        "exit",
        "-9",
    ),
    (
        "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.",
        "agent.child_failed",
        "exit",
        "1",
    ),
]


@pytest.mark.parametrize(("text", "kind", "key", "value"), CASES, ids=[c[1] + ":" + c[3] for c in CASES])
def test_family(text: str, kind: str, key: str, value: str) -> None:
    got = classify(text)
    assert got is not None and got[0] == kind, got
    assert not key or str(got[2][key]) == value


def test_nccl_result_classes() -> None:
    """retcode 6 anywhere is remote; 'internal error' defers to the family underneath."""
    assert nccl_class("nccl.proxy_failed", {"retcode": "6"}, "") == ("remote", True)
    assert nccl_class("nccl.error", {}, "NCCL error in: x.cpp:1, unhandled system error, NCCL version 2.18") == (
        "system",
        True,
    )
    assert nccl_vocab([("internal", True), ("remote", False)]) == "nccl_remote_error"
    assert nccl_vocab([("remote", False), ("system", True)]) == "nccl_system_error"
    assert nccl_vocab([("system", True), ("remote", True)]) == "nccl_remote_error"


def test_nccl_result_trail_is_read_and_other_info_is_not() -> None:
    """checks.h's INFO("%s:%d -> %d") trail carries the failed call's result (2 system .. 6 remote)."""
    assert classify("NCCL INFO bootstrap.cc:270 -> 2") == ("nccl.result", Role.SYMPTOM, {"retcode": "2"})
    assert classify("NCCL INFO group.cc:64 -> 6 [Async thread]") == ("nccl.result", Role.SYMPTOM, {"retcode": "6"})
    assert classify("NCCL INFO include/alloc.h:48 -> 1") is None  # a CUDA result: the CUDA error line says more
    assert classify("NCCL INFO Channel 00/02 : 0 -> 1 via P2P/IPC") is None  # a ring, not a result


def test_ordinary_lines_are_not_errors() -> None:
    for text in ("step 10 | loss 2.3 | lr 3e-4", "NCCL INFO Call to connect returned Connection refused, retrying",
                 "UserWarning: TypedStorage is deprecated", "NCCL INFO comm 0x1 rank 0 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE"):  # fmt: skip
        assert classify(text) is None, text


def test_unrecognised_failure_quotes_first_error_lines_per_rank(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "[rank0]:[E1201 10:00:01.000 foo.cpp:1] widget error: something odd happened\n"
        "step 3 loss 2.0\n"
        "[rank1]:[E1201 10:00:02.000 foo.cpp:1] Error in widget: exploded at stage 3\n"
        "[rank0]:[E1201 10:00:03.000 foo.cpp:9] widget error: second line\n"
    )
    _, d = diagnose_paths([str(log)])
    p = d.primary
    assert p is not None and (p.code, p.culprits, d.vocab_class) == ("DGN013", [], "unrecognised")
    assert "job.log:1: rank 0: widget error: something odd happened; job.log:3: rank 1: Error in widget" in p.summary
    assert [e.source.rsplit("/", 1)[-1] for e in p.evidence] == ["job.log:1", "job.log:4", "job.log:3"]
    assert d.collateral == []
    assert "share the log" in explain_text("DGN013")


SUMMARY = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_10:00:{sec}
  host      : {host}
  rank      : {rank} (local_rank: {local})
  exitcode  : {exit} (pid: 4{rank}00)
  error_file: <N/A>
  traceback : {tb}
============================================================
"""


def test_several_agents_in_one_log_earliest_root_cause_wins(tmp_path: Path) -> None:
    """Two nodes' torchrun summaries in one log (srun output): node1's rank 5 failed at :02, node0's
    rank 3 only at :09 (after losing its peer); the summaries are compared by time, not by order."""
    log = tmp_path / "job.log"
    log.write_text(
        SUMMARY.format(sec="09", host="node0", rank=3, local=3, exit=1, tb="To enable traceback see: https://x")
        + SUMMARY.format(
            sec="02", host="node1", rank=5, local=1, exit=-11, tb="Signal 11 (SIGSEGV) received by PID 4500"
        )
    )
    _, d = diagnose_paths([str(log)])
    p = d.primary
    assert p is not None and (p.code, p.culprits) == ("DGN011", [5]) and p.hosts == ["node1"]
    assert "across nodes, by time" in p.reason
