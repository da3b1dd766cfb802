"""What the blind set zq (tests/corpus/diagnose/heldout-zq.md) showed was not read, written from the sources' own
format strings, not from the set's cases (the logs below are built from them):

- a glog CHECK of an NCCL call's result with nothing streamed after it (Paddle's platform/nccl_helper.h
  PADDLE_ENFORCE(dynload::ncclGroupEnd() == ncclSuccess)): "(1 vs. 0)" is ncclUnhandledCudaError, "(2 vs. 0)"
  ncclSystemError in every NCCL; a higher number is not decoded (NCCL 1's enum differs there);
- Paddle's ExternalError for an NCCL result: "NCCL error(6), remote process exited or there was a network error.";
- NCCL 2.0-2.2's include/socket.h socketReceive: "WARN Connection closed by remote peer" with no peer after it;
- glibc's own aborts: debug/fortify_fail.c "*** %s ***: %s terminated" and malloc_printerr's "double free or
  corruption (out)", "free(): invalid pointer".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict

CHECK = (
    "F1125 15:44:39.266677 200102 nccl_helper.h:62] Check failed: dynload::ncclGroupEnd() == ncclSuccess ({} vs. 0)\n"
)
STACK = "*** Check failure stack trace: ***\n    @     0x7fd3677641ed  google::LogMessage::Fail()\n"


@pytest.mark.parametrize(("result", "klass"), [("1", "cuda_error"), ("2", "nccl_system_error")])
def test_a_glog_check_of_an_nccl_result_alone_is_decoded(tmp_path: Path, result: str, klass: str) -> None:
    assert verdict(tmp_path, CHECK.format(result) + STACK).klass == klass


def test_an_nccl_result_number_nccl_versions_disagree_on_is_not_decoded(tmp_path: Path) -> None:
    assert verdict(tmp_path, CHECK.format("5") + STACK).klass not in ("nccl_init_duplicate_gpu", "nccl_remote_error")


def test_paddles_external_error_for_a_remote_error(tmp_path: Path) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.9/site-packages/paddle/distributed/collective.py", line 280, in barrier\n'
        "    task = group.process_group.barrier()\n"
        "OSError: (External) NCCL error(6), remote process exited or there was a network error.\n"
        "  [Hint: Please search for the error code(6) on website.] (at /paddle/fluid/distributed/collective/"
        "ProcessGroupNCCL.cc:247)\n"
    )
    assert verdict(tmp_path, log).klass == "nccl_remote_error"


def test_nccl_2_0s_connection_closed_by_remote_peer_names_no_peer(tmp_path: Path) -> None:
    log = (
        "node7:15819:15981 [1] include/socket.h:196 WARN Connection closed by remote peer\n"
        "node7:15819:15981 [1] INFO bootstrap.cu:170 -> 2\n"
        "node7:15819:15981 [1] INFO init.cu:422 -> 2\n"
    )
    assert verdict(tmp_path, log).klass == "nccl_remote_error"


@pytest.mark.parametrize(
    "line",
    [
        "*** stack smashing detected ***: mpi_test terminated",
        "*** buffer overflow detected ***: terminated",
        "double free or corruption (out)",
        "free(): invalid pointer",
    ],
)
def test_glibcs_own_abort_is_the_process_crash(tmp_path: Path, line: str) -> None:
    log = f"{line}\n[gpu07:16792] *** Process received signal ***\n[gpu07:16792] Signal: Aborted (6)\n"
    assert verdict(tmp_path, log).klass == "child_failed_other"
