"""What the blind set z (tests/corpus/diagnose/heldout-z.md) showed was not read, each written from its source's own
format string, not from the set's cases (the logs below are built from those strings):

- torchrun's agent (torch/distributed/elastic/multiprocessing/api.py, _poll: "failed (exitcode: %s) local_rank: %s
  (pid: %s) of binary: %s"): under torchrun the store a worker's TCPStore client dials is its agent's, so a client
  that timed out never names rank 0 as the store's host;
- WorkNCCL's repr (ProcessGroupNCCL.cpp: "WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, Timeout(ms)=%d)")
  in the watchdog's "Watchdog caught collective operation timeout: {work} ran for {ms} milliseconds before timing
  out.": one op at one sequence number with different sizes is a mismatched call;
- torchrun's failure summary (_format_failure) whose failures tie in one second with no error file, beside the
  workers' own tracebacks: the workers' own error is the class;
- Horovod's stall inspector (horovod/common/stall_inspector.cc): "Stalled ranks:" (before 0.20) and "Missing ranks:"
  headers, each followed by "R: [tensor, ...]" (or "R!: [" for a rank it will shut down), every line behind the
  prefix its header carried;
- Polyaxon's job logs (polyaxon/logs_handlers/log_queries/base.py: LogSpec(log_line, name=f"{task_type}.{idx}"),
  printed "<time> UTC <name> -- <line>");
- NCCL's results (src/include/nccl.h ncclResult_t: 3 internal, 6 remote) in its "%s:%d -> %d" trail and its socket
  WARN "socketProgress: Connection closed by remote peer %s" (src/misc/socket.cc): one process failing on its own and
  another only losing its peer.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

CLIENT = (
    "Traceback (most recent call last):\n"
    '  File "/env/lib/python3.11/site-packages/torch/distributed/rendezvous.py", line 181, in _create_c10d_store\n'
    "    tcp_store = TCPStore(hostname, port, world_size, False, timeout)\n"
    "torch.distributed.DistNetworkError: The client socket has timed out after 1800s while trying to connect to "
    "(127.0.0.1, 29500).\n"
)
AGENT = (
    "E1026 17:31:34.002000 139984755545088 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) "
    "local_rank: 0 (pid: 167240) of binary: /env/bin/python\n"
)


def test_a_store_client_timeout_under_torchrun_names_no_rank(tmp_path: Path) -> None:
    bare = verdict(tmp_path, CLIENT)
    assert bare[:2] == ("rendezvous_timeout", [0])  # env:// alone: rank 0 hosts the store (precedent 37)
    assert verdict(tmp_path, CLIENT + AGENT)[:2] == ("rendezvous_timeout", [])


def watchdog(rank: int, seq: int, op: str, numel: int) -> str:
    return (
        f"[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}"
        f", OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=1800000) ran for 1800221 milliseconds before "
        "timing out.\n"
    )


def test_one_op_at_one_sequence_number_with_different_sizes_is_a_mismatch(tmp_path: Path) -> None:
    same = "".join(watchdog(r, 13807, "ALLREDUCE", 11274112) for r in (1, 5, 6, 7))
    assert verdict(tmp_path, same)[0] == "collective_timeout"
    odd = "".join(watchdog(r, 13807, "ALLREDUCE", 11274112) for r in (1, 5, 6)) + watchdog(7, 13807, "ALLREDUCE", 9)
    assert verdict(tmp_path, odd)[:2] == ("collective_mismatch", [])  # the silent ranks may side with rank 7
    # a coalesced op sums each rank's own tensors; ranks of other subgroups count their own sequence numbers
    coalesced = watchdog(1, 610, "COALESCED", 56320) + watchdog(7, 610, "COALESCED", 107520)
    assert verdict(tmp_path, coalesced)[0] == "collective_timeout"
    groups = (
        "[rank7]:[E318 07:39:53.719 ProcessGroupNCCL.cpp:1834] [PG ID 2 PG GUID 9 Rank 7] Timeout at NCCL work: 13807, "
        "last enqueued NCCL work: 13810, last completed NCCL work: 13806.\n"
    )
    assert verdict(tmp_path, odd + groups)[0] == "collective_timeout"


def entry(idx: int, rank: int) -> str:
    return (
        f"[{idx}]:\n  time      : 2022-03-28_19:11:13\n  host      : 5c6c6efee186\n  rank      : {rank} (local_rank: "
        f"{rank})\n  exitcode  : 1 (pid: {3166 + rank})\n  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    )


def test_tied_failures_without_a_root_cause_take_the_workers_own_error(tmp_path: Path) -> None:
    summary = "Failures:\n" + "".join(entry(i, i + 1) for i in (1, 2, 3))
    worker = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.7/dist-packages/torch/cuda/__init__.py", line 311, in set_device\n'
        "    torch._C._cuda_setDevice(device)\n"
        "RuntimeError: CUDA error: invalid device ordinal\n"
    )
    assert verdict(tmp_path, summary)[:2] == ("child_failed_other", [])
    assert verdict(tmp_path, worker * 2 + summary)[:2] == ("cuda_error", [])


HVD = (
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for "
    "remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different "
    "tensors or that only subset of ranks is submitting tensors, which will cause deadlock. "
)


def test_horovods_stalled_and_missing_blocks_behind_any_prefix(tmp_path: Path) -> None:
    glog = "[2020-01-15 22:44:33.214399: W horovod/common/stall_inspector.cc:105] "
    old = f"{glog}{HVD}\nStalled ranks:\n0: [HorovodAllreduce_grads_0]\n"
    assert verdict(tmp_path, old)[:2] == ("missing_rank", [0])
    tagged = "".join(f"[0] {line}\n" for line in (glog + HVD, "Missing ranks:", "0: [bias, weight]", "1!: [bias]"))
    assert verdict(tmp_path, tagged)[:2] == ("missing_rank", [0, 1])
    # Polyaxon's collector before each of mpirun's tagged lines, a blank line between records
    poly = "2020-01-15 22:44:33 UTC master.0 -- [1,0]<stderr>:"
    spaced = f"{poly}{glog}{HVD}\n\n{poly}Stalled ranks:\n\n{poly}2: [HorovodAllreduce_grads_0]\n"
    assert verdict(tmp_path, spaced)[:2] == ("missing_rank", [2])


def test_a_process_failing_on_its_own_is_the_cause_of_its_peers_lost_connection(tmp_path: Path) -> None:
    own = "".join(
        f"node-b:914454:914479 [1] NCCL INFO {where} -> 3\n" for where in ("bootstrap.cc:312", "init.cc:1493")
    )
    lost = (
        "node-a:63755:63768 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer "
        "10.102.0.232<40318>\n"
        + "".join(f"node-a:63755:63768 [0] NCCL INFO {where} -> 6\n" for where in ("misc/socket.cc:58", "init.cc:820"))
    )
    assert verdict(tmp_path, lost)[0] == "nccl_remote_error"
    got = verdict(tmp_path, own + lost)
    assert (got.klass, got.hosts) == ("nccl_system_error", ["node-b"])
    both = own + lost + "node-b:914454:914479 [1] NCCL INFO socket.cc:58 -> 6\n"  # node-b lost a peer too: no cause
    assert verdict(tmp_path, both)[0] == "nccl_remote_error"
