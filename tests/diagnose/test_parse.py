"""Line prefixes, timestamps and message classification on real log lines."""

from __future__ import annotations

import io

import pytest

from validator.diagnose.anchors import anchored
from validator.diagnose.classify import classify, fingerprint
from validator.diagnose.events import Role
from validator.diagnose.logs import parse_line, rank_in_message


@pytest.mark.parametrize(
    ("raw", "rank", "local", "node", "host", "text_start"),
    [
        (
            "[rank3]:[E1130 09:39:26.201103723 ProcessGroupGloo.cpp:2901] [Rank 3]: boom",
            3,
            None,
            None,
            None,
            "[Rank 3]",
        ),
        ("[default1]:[rank3]: RuntimeError: boom", 3, 1, None, None, "RuntimeError"),
        ("[default-r5-l1]:hello", 5, 1, None, None, "hello"),
        ("[trainer0|0]:Last error:", None, 0, None, None, "Last error"),
        ("1: W1130 09:51:55.126000 5197 torch/distributed/run.py:874] x", None, None, "1", None, "x"),
        (
            "[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU",
            2,
            None,
            None,
            "smc-gpu-03",
            "NCCL WARN",
        ),
        (
            "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog",
            0,
            None,
            "80746",
            None,
            "[Rank 0]",
        ),
        (
            "2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError: CUDA out of memory.",
            3,
            None,
            None,
            None,
            "torch.OutOfMemoryError",
        ),
        (
            "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 1 closing signal SIGTERM",
            None,
            None,
            None,
            None,
            "Sending",
        ),
        ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught", None, None, None, None, "[Rank 1]"),
    ],
)
def test_prefixes(
    raw: str, rank: int | None, local: int | None, node: str | None, host: str | None, text_start: str
) -> None:
    line = parse_line(raw, 2026)
    assert (line.ident.rank, line.ident.local_rank, line.ident.node, line.ident.host) == (rank, local, node, host)
    assert line.text.startswith(text_start)


def test_timestamps_order_across_formats() -> None:
    c10d = parse_line("[rank0]:[E1130 09:39:26.201103723 ProcessGroupGloo.cpp:2901] x", 2026)
    elastic = parse_line("E1130 09:40:37.598000 31830 torch/distributed/elastic/multiprocessing/api.py:1002] y", 2026)
    short_month = parse_line("[rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] z", 2026)
    assert c10d.time is not None and elastic.time is not None and short_month.time is not None
    assert elastic.time - c10d.time == pytest.approx(71.397, abs=1e-3)
    assert short_month.time < c10d.time  # July before November: month without zero padding
    assert elastic.level == "error" and elastic.ident.pid == 31830


def test_rank_in_message_variants() -> None:
    assert rank_in_message("[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception") == (1, "0(default_pg)")
    assert rank_in_message("[PG 0 (default_pg) Rank 7] x") == (7, "0(default_pg)")
    assert rank_in_message("[PG 1 Rank 0] y") == (0, "1")
    assert rank_in_message("[Rank 4] z") == (4, None)
    assert rank_in_message("no rank here") == (None, None)


@pytest.mark.parametrize(
    ("text", "kind", "role", "field", "value"),
    [
        ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete",
         "coll.gloo_timeout", Role.SYMPTOM, "dir", "recv"),
        ("torch.distributed.DistStoreError: Timed out after 21 seconds waiting for clients. 3/4 clients joined.",
         "rdzv.clients_joined", Role.SYMPTOM, "joined", "3"),
        ("torch.distributed.DistStoreError: wait timeout after 20000ms, keys: /default_pg/0//cpu//0/2",
         "rdzv.wait_keys", Role.SYMPTOM, "keys", "/default_pg/0//cpu//0/2"),
        ("torch.distributed.DistNetworkError: The client socket has timed out after 20000ms while trying to connect to (127.0.0.1, 29541).",
         "rdzv.connect_timeout", Role.SYMPTOM, "port", "29541"),
        ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=20585, OpType=ALLREDUCE, NumelIn=1259621, NumelOut=1259621, Timeout(ms)=600000) ran for 600000 milliseconds before timing out.",
         "coll.watchdog_timeout", Role.SYMPTOM, "seq", "20585"),
        ("[PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 20585 PG status: last enqueued work: 20589, last completed work: 20584",
         "coll.watchdog_status", Role.SYMPTOM, "enq", "20589"),
        ("NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000", "nccl.duplicate_gpu", Role.ORIGIN, "dev", "1000"),
        ("NCCL WARN Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.",
         "nccl.duplicate_gpu", Role.ORIGIN, None, None),
        ("NCCL WARN Mismatched NCCL version detected : rank 0 version 21805 rank 3 version 22105", "nccl.version_mismatch", Role.ORIGIN, "vb", "22105"),
        ("bootstrap.cc:37 NCCL WARN Bootstrap : no socket interface found", "nccl.no_interface", Role.ORIGIN, None, None),
        ("RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: bogus0",
         "nccl.no_interface", Role.ORIGIN, "iface", "bogus0"),
        ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 46329, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
         "net.addr_in_use", Role.ORIGIN, "port", "46329"),
        ("[PG ID 2 PG GUID 3 Rank 2] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
         "cuda.error", Role.ORIGIN, "what", "an illegal memory access was encountered"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda.oom", Role.ORIGIN, None, None),
        ("[Rank 0]: Rank 1 failed to pass monitoredBarrier in 10000 ms", "coll.monitored_barrier", Role.ORIGIN, "ranks", "1"),
        ("[1] finished collective #182, but didn't join collective #183 (count from 1)", "coll.desync_not_joined", Role.ORIGIN, "ranks", "1"),
        ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.1]:5333",
         "gloo.peer_closed", Role.SYMPTOM, "peer", "10.0.0.1"),
        ("failed (exitcode: -9) local_rank: 0 (pid: 2410412) of binary: /bin/python", "agent.child_failed", Role.SUMMARY, "exit", "-9"),
        ("slurmstepd: error: *** STEP 1234.0 ON node17 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***",
         "slurm.cancelled", Role.ORIGIN, "host", "node17"),
        ("ValueError: bad shard on rank 1", "py.exception", Role.ORIGIN, "cls", "ValueError"),
        ("[2024-03-01 10:00:00,123] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', 'train.py'] exits with return code = -9",
         "agent.child_failed", Role.SUMMARY, "exit", "-9"),
        ("Fatal Python error: Segmentation fault", "proc.crash", Role.ORIGIN, None, None),
        ("Last State: Terminated  Reason: OOMKilled", "host.oom", Role.ORIGIN, None, None),
        ("torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
         "nccl.uniqueid_wait", Role.SYMPTOM, "root", "0"),
        ("srun: error: node17: task 5: Killed", "slurm.task_failed", Role.SUMMARY, "tasks", "5"),
        # where every CUDA/HIP error is raised (c10 CUDAException.cpp, hipified HIPException.cpp): an excerpt may keep only this
        ("Exception raised from c10_hip_check_implementation at /app/pytorch/c10/hip/HIPException.cpp:43 (most recent call first):",
         "cuda.error", Role.ORIGIN, "what", "hip check failed"),
        ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "py.comm_exception", Role.SYMPTOM, "cls", "ChildFailedError"),
    ],
)  # fmt: skip
def test_classify(text: str, kind: str, role: Role, field: str | None, value: str | None) -> None:
    assert list(anchored(io.BytesIO(text.encode()))), "the scanner must hand this line to the classifier (an anchor)"
    got = classify(text)
    assert got is not None
    assert got[:2] == (kind, role)
    if field:
        assert got[2][field] == value


@pytest.mark.parametrize(
    "text",
    ['File "/x/torch/distributed/distributed_c10d.py", line 3, in f', "step 1234 | loss 2.3",
     "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:580 (most recent call first):"],
)  # fmt: skip
def test_noise_is_not_an_event(text: str) -> None:
    assert classify(text) is None


def test_a_frame_of_torchruns_own_code_is_a_fact_not_a_failure() -> None:
    """Whose the job's store is (torchrun's agent's): a fact the store-timeout rule reads, never a failure."""
    frame = 'File "/x/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 3, in f'
    assert classify(frame) == ("launch.elastic", Role.FACT, {})


def test_fingerprint_keeps_what_detail_compares() -> None:
    fp = "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[1], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu))"
    assert fingerprint(fp) == "ALLGATHER shape=[1] dtype=Float"
