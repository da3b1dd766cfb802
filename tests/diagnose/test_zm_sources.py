"""What the blind set zm (tests/corpus/diagnose/heldout-zm.md) showed was not read, written from its sources' own format
strings, not from the set's cases (the logs below are built from them):

- glog's CHECK_EQ of an NCCL result with ncclGetErrorString streamed after it: Caffe's NCCL_CHECK
  (include/caffe/util/nccl.hpp: ``CHECK_EQ(result, ncclSuccess) << " " << ncclGetErrorString(result)``), and the
  ``<< what << ": "`` form of C++ projects' own check;
- MPICH's mpiexec (Hydra, src/pm/hydra/mpiexec/mpiexec.c): "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", the
  process's "[RANK r ]PID p RUNNING AT host", "EXIT CODE: n" or "KILLED BY SIGNAL: n (name)", and older versions' "YOUR
  APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)". mpiexec prints a block for every process that ended
  so, its own cleanup's kills too, in rank order: a block's rank is no evidence, its host only when every block agrees.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict

BAR = "=" * 83


@pytest.mark.parametrize(
    ("tail", "kind"),
    [
        ("  unhandled system error", "nccl_system_error"),  # Caffe: CHECK_EQ(...) << " " << ncclGetErrorString
        ("ncclCommInitRank: unhandled cuda error", "cuda_error"),
        ("allreduce: remote process exited or there was a network error", "nccl_remote_error"),
    ],
)
def test_a_glog_check_of_an_nccl_result_is_the_error_it_names(tmp_path: Path, tail: str, kind: str) -> None:
    line = f"F0118 23:24:48.788218 37264 parallel.cpp:135] Check failed: result == ncclSuccess (2 vs. 0) {tail}\n"
    assert verdict(tmp_path, line + "*** Check failure stack trace: ***\n")[:2] == (kind, [])


def hydra(proc: str, end: str) -> str:
    return f"\n{BAR}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   {proc}\n=   {end}\n{BAR}\n"


def test_an_mpiexec_block_names_the_signal_and_its_host_but_no_rank(tmp_path: Path) -> None:
    old = (
        f"\n{BAR}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 4242 RUNNING AT ws01\n=   EXIT CODE: 9\n"
        f"=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n{BAR}\n"
        "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)\n"
    )
    got = verdict(tmp_path, old)
    assert (got.klass, got.ranks, got.hosts, got.code) == ("child_failed_other", [], ["ws01"], "DGN011")
    new = hydra("RANK 3 PID 77 RUNNING AT gn59", "KILLED BY SIGNAL: 9 (Killed)")
    got = verdict(tmp_path, new)
    assert (got.klass, got.ranks, got.hosts) == ("child_failed_other", [], ["gn59"])  # a block's rank: no evidence
    exited = hydra("PID 77 RUNNING AT gn59", "EXIT CODE: 1")
    assert verdict(tmp_path, exited)[:2] == ("child_failed_other", []) and verdict(tmp_path, exited).code == "DGN010"


def test_mpiexec_blocks_on_several_hosts_name_none_and_the_process_own_error_wins(tmp_path: Path) -> None:
    two = hydra("RANK 0 PID 7 RUNNING AT gn59", "KILLED BY SIGNAL: 9 (Killed)") + hydra(
        "RANK 1 PID 8 RUNNING AT gn60", "KILLED BY SIGNAL: 9 (Killed)"
    )
    got = verdict(tmp_path, two)
    assert (got.klass, got.ranks, got.hosts) == ("child_failed_other", [], [])
    crash = "CUDA error: an illegal memory access was encountered\n" + two
    assert verdict(tmp_path, crash).klass == "cuda_error"  # the cleanup's kills under the process's own error
