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


def test_an_indented_paste_keeps_its_nccl_prefixes_host(tmp_path: Path) -> None:
    """A paste indented as a whole (a code block in an issue): NCCL's "host:pid:tid [dev]" prefix still names the
    host that printed its own failure."""
    line = "gpu-7:5011:5092 [1] init.cc:824 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device e3000\n"
    for indent in ("", "    ", "          "):
        got = verdict(tmp_path, indent + line)
        assert (got.klass, got.hosts) == ("nccl_init_duplicate_gpu", ["gpu-7"]), indent


def test_a_local_failure_whose_own_line_names_no_host_is_the_one_host_of_the_log(tmp_path: Path) -> None:
    """glibc's abort names no host: where every line that names a host names the same one (Open MPI's signal report,
    "[%s:%05d] "), a failure of the host's own (a crash) is that host's; with two hosts in the log, none is named."""
    abort = "*** stack smashing detected ***: mpi_test terminated\n"
    report = "[{0}:16792] *** Process received signal ***\n[{0}:16792] Signal: Aborted (6)\n"
    assert verdict(tmp_path, abort + report.format("snake07")).hosts == ["snake07"]
    two = abort + report.format("snake07") + report.format("snake08")
    got = verdict(tmp_path, two)
    assert (got.klass, got.hosts) == ("child_failed_other", [])
