"""The table of rank shapes (validator/diagnose/rankshapes.py) and the families of issue 25, each read from its
source's format string: every shape's example is read back through the line parser, every shape that names a
corpus case is shown by that case, and the attribution discipline (a tie, a lone reporter, a key's writer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from validator.diagnose.causes.startup import key_rank
from validator.diagnose.classify import classify
from validator.diagnose.logs import parse_line
from validator.diagnose.rankshapes import SHAPES
from validator.diagnose.run import diagnose_paths

from .corpus import CORPUS

YEAR = 2025


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s.stack}:{s.example}" for s in SHAPES])
def test_every_shape_is_read_and_shown_by_its_case(shape: object) -> None:
    from validator.diagnose.rankshapes import Shape

    assert isinstance(shape, Shape)
    assert shape.pattern.match(shape.example), shape.example
    if shape.case:
        text = (CORPUS / "cases" / shape.case).read_text(encoding="utf-8", errors="replace")
        assert shape.example.strip() in text, f"{shape.case} does not show {shape.example!r}"


@pytest.mark.parametrize(
    ("line", "rank", "host", "pid"),
    [
        ("(Worker_TP3 pid=160) ERROR 05-20 20:54:32 [multiproc_executor.py:962] torch.OutOfMemoryError: x", 3, None, 160),
        ("(Worker_PP1_TP3 pid=160) ERROR boom", None, None, 160),  # with pipeline stages the TP rank is not global
        ("(RayWorkerWrapper pid=92234, ip=172.19.24.110) [rank1]: RuntimeError: x", 1, "172.19.24.110", 92234),
        ("[1]<stderr>:RuntimeError: ncclCommInitRank failed: unhandled cuda error", 1, None, None),
        ("[1,3]<stderr>:2019-08-26 18:41:15.943905: E tensorflow/x.cc:8] failed", 3, None, None),
        ("[2025-04-21 07:28:41 TP6] Scheduler hit an exception", 6, None, None),
        ("[2025-04-21 07:28:41 DP1 TP1] Scheduler hit an exception", None, None, None),  # a DP replica's own TP group
        ("[rank: 1] Child process with PID 652 terminated with code 1", 1, None, None),
        ('{"event": "line", "data": "[rank3]: Search for `hipErrorLaunchFailure\' in x\\n", "pipe": "stderr"}', 3, None,
         None),
        ("worker-1: [rank0]: RuntimeError: x", 0, "worker-1", None),  # doubled prefixes: a host, then a rank
    ],
)  # fmt: skip
def test_ranks_in_every_shape(line: str, rank: int | None, host: str | None, pid: int | None) -> None:
    got = parse_line(line, YEAR).ident
    assert (got.rank, got.host, got.pid) == (rank, host, pid)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[FATAL ERROR]: HIP failure: 'invalid device pointer'", "cuda.error"),  # RCCL checks.h
        ("p2p.cc:256 NCCL WARN HIP failure 'invalid argument'", "cuda.error"),
        ("Search for `cudaErrorLaunchFailure' in https://docs.nvidia.com/cuda/ for more information.", "cuda.error"),
        ("RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62", "cuda.oom"),
        ("E tensorflow/stream_executor/cuda/cuda_driver.cc:828] failed to allocate 2.96G (3173555200 bytes) from device: "
         "CUDA_ERROR_OUT_OF_MEMORY: out of memory", "cuda.oom"),
        ("srun: error: gpu20-15: task 0: Out Of Memory", "host.oom"),
        ("NCCL WARN NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument", "nccl.syscall_failed"),
        ("NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696", "nccl.ib_error"),
        ("RuntimeError: [/pytorch/caffe2/distributed/file_store_handler.cc:154] Wait timeout for name(s): cw/1",
         "rdzv.wait_keys"),
        ("RuntimeError: [2] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store "
         "by key '0', but store->get('0') got error: Socket Timeout", "nccl.uniqueid_wait"),
        ("(raylet) There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high "
         "memory usage.", "misc.error"),
        ("Container rank 0 status failed cmd ['python', 'train.py'] code 1 log log/workerlog.0", "agent.child_failed"),
    ],
)  # fmt: skip
def test_families_from_their_sources(text: str, kind: str) -> None:
    got = classify(text)
    assert got is not None and got[0] == kind, got


def test_store_keys_name_their_writer_only_where_the_format_does() -> None:
    assert key_rank("allreduce_0_cw_op/1") == 1  # gloo rendezvous: <prefix>/<rank> (Caffe2 common world)
    assert key_rank("/default_pg/0//cpu//0/2") == 2
    assert key_rank("/broadcast_from/0/75465") is None  # vLLM StatelessProcessGroup: src, then a counter
    assert key_rank("/torchelastic/agent/3") is None


def _diagnose(tmp_path: Path, text: str) -> tuple[list[int], str, str]:
    log = tmp_path / "job.log"
    log.write_text(text)
    _, diag = diagnose_paths([str(log)], jobs=1)
    p = diag.primary
    assert p is not None
    return p.culprits, p.confidence, diag.vocab_class


def test_a_lone_barrier_reporter_names_the_missing_rank_only_with_low_confidence(tmp_path: Path) -> None:
    one = ("RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: "
           "store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:05:00)\n")  # fmt: skip
    assert _diagnose(tmp_path, one) == ([1], "low", "missing_rank")


def test_the_unique_id_key_names_its_writer_and_a_lost_store_names_nobody(tmp_path: Path) -> None:
    line = ("torch.distributed.DistBackendError: [4] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
            "via c10d key-value store by key '{key}', but store->get('{key}') got error: {what}\n")  # fmt: skip
    assert _diagnose(tmp_path, line.format(key="0", what="Socket Timeout")) == ([0], "low", "rendezvous_timeout")
    assert _diagnose(tmp_path, line.format(key="2:5", what="Socket Timeout"))[0] == [2]  # a p2p pair: the lower rank
    lost = _diagnose(tmp_path, line.format(key="0", what="Connection reset by peer"))
    assert lost == ([], "unknown", "connection_refused")  # a reset, not a wait that ran out (corpus q04)


def test_a_vllm_stateless_group_key_names_no_rank_of_the_job(tmp_path: Path) -> None:
    text = "[rank0]: torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /broadcast_from/0/75465\n"
    assert _diagnose(tmp_path, text) == ([], "unknown", "rendezvous_timeout")
