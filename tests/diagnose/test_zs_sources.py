"""What the blind set zs (tests/corpus/diagnose/heldout-zs.md) showed was not read, written from the sources' own
format strings, not from the set's cases (the logs below are built from them):

- UCX's socket connect (ucs/sys/sock.c): "connect(fd=%d, dest_addr=%s) failed: Connection refused";
- MPICH's and MS-MPI's MPI_ERR_TRUNCATE: "Message truncated; %d bytes received but buffer size is %d", "Message from
  rank %d and tag %d truncated; ...": the two ends disagree on a collective;
- MS-MPI's mpiexec: "[%d] process exited without calling finalize" names the rank that ended first;
- CNTK's CudaCall: "%s failure %d; GPU=%d ; hostname=%s ; expr=%s";
- NCCL's shmutils.cc: "Error while creating shared memory segment %s (size %d)", the host's own /dev/shm;
- glibc's allocator assertion, "malloc.c:%d: %s: Assertion `%s' failed.", a crash;
- a loopback name ("localhost") on a one-host log's lines names no node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict


@pytest.mark.parametrize(
    ("log", "klass"),
    [
        ("[1716594409.541480] [gpu1:1581047:0]       sock.c:323  UCX  ERROR connect(fd=87, dest_addr=172.17.0.1:47133) "
         "failed: Connection refused", "connection_refused"),
        ("MPIDI_CH3U_Request_unpack_uebuf(599): Message truncated; 1536 bytes received but buffer size is 1024",
         "collective_mismatch"),
        ("MPI_Waitany, MPI error 782: Message truncated, error stack:\nMessage from rank 3 and tag 1 truncated; 1020000 "
         "bytes received but buffer size is 48", "collective_mismatch"),
        ("CUDA failure 35; GPU=0 ; hostname=worker3 ; expr=cudaStreamCreate(&_commStream)", "cuda_error"),
        ("CUDA failure 2; GPU=1 ; hostname=worker3 ; expr=cudaMalloc((void**) &p, n)", "oom"),
        ("python: malloc.c:3722: _int_malloc: Assertion `(unsigned long) (size) >= (unsigned long) (nb)' failed.",
         "child_failed_other"),
    ],
)  # fmt: skip
def test_each_sources_own_words(tmp_path: Path, log: str, klass: str) -> None:
    assert verdict(tmp_path, log + "\n").klass == klass


def test_ms_mpi_names_the_rank_that_exited_first(tmp_path: Path) -> None:
    log = "job aborted:\n[ranks] message\n\n[2] process exited without calling finalize\n\n[0-1,3] terminated\n"
    got = verdict(tmp_path, log)
    assert (got.klass, got.ranks, got.confidence) == ("child_failed_other", [2], "low")


def test_nccls_shared_memory_segment_is_the_hosts_own(tmp_path: Path) -> None:
    log = (
        "node7:4707:5232 [2] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-CsYXMW (size 9637888)\n"
    )
    got = verdict(tmp_path, log)
    assert (got.klass, got.hosts) == ("nccl_system_error", ["node7"])
    got = verdict(tmp_path, log.replace("node7", "localhost"))
    assert (got.klass, got.hosts) == ("nccl_system_error", [])  # a loopback name says nothing of which node
