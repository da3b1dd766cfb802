"""Shapes the blind held-out sets (tests/corpus/diagnose-heldout/q and r) showed were misread: a torchrun
summary whose Root Cause ties other failures in the same second; a summary excerpt that starts below
its ChildFailedError header; an InfiniBand port going down; ncclGetErrorString's text after a
framework's own "NCCL ...:" prefix. Each log is written here in the printed formats (torch
elastic/multiprocessing/errors, NCCL net_ib.cc and its error strings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from validator.diagnose.run import diagnose_paths

ENTRY = """[{i}]:
  time      : 2024-04-01_05:16:{sec}
  host      : node01
  rank      : {rank} (local_rank: {rank})
  exitcode  : 1 (pid: {pid})
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
"""


def summary(root_sec: str, other_sec: str, header: bool) -> str:
    head = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n" if header else ""
    return (
        head + "=" * 60 + "\ntrain.py FAILED\n" + "-" * 60 + "\nFailures:\n"
        + ENTRY.format(i=1, sec=other_sec, rank=1, pid=101)
        + "-" * 60 + "\nRoot Cause (first observed failure):\n"
        + ENTRY.format(i=0, sec=root_sec, rank=0, pid=100) + "=" * 60 + "\n"
    )  # fmt: skip


def primary(tmp_path: Path, text: str) -> tuple[str | None, list[int], list[str]]:
    log = tmp_path / "case.log"
    log.write_text(text)
    _report, d = diagnose_paths([str(log)])
    assert d.primary is not None
    return d.vocab_class, d.primary.culprits, d.primary.hosts


def test_a_root_cause_tied_in_the_same_second_names_nobody(tmp_path: Path) -> None:
    for header in (True, False):  # with the ChildFailedError line, and an excerpt cut below it
        assert primary(tmp_path, summary("50", "50", header)) == ("child_failed_other", [], ["node01"])


def test_a_root_cause_seconds_before_the_others_is_named(tmp_path: Path) -> None:
    for header in (True, False):
        cls, culprits, _ = primary(tmp_path, summary("48", "50", header))
        assert (cls, culprits) == ("child_failed_other", [0])


def test_a_bare_failures_line_of_another_program_opens_no_summary(tmp_path: Path) -> None:
    text = "Failures:\n  none\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert primary(tmp_path, text)[0] == "cuda_error"


def test_an_infiniband_port_going_down_is_a_network_failure(tmp_path: Path) -> None:
    text = (
        "node-2:311:405 [0] transport/net_ib.cc:199 NCCL WARN NET/IB : mlx5_3:1 Got async error event: port error\n"
        "node-2:311:405 [0] transport/net_ib.cc:199 NCCL WARN NET/IB : mlx5_3:1 Got async error event: port active\n"
    )
    assert primary(tmp_path, text)[0] == "nccl_remote_error"


def test_an_nccl_error_string_after_a_frameworks_prefix(tmp_path: Path) -> None:
    text = "2023-10-26 12:12:06.704113: E nccl_collective.cc:461] NCCL communication aborted: unhandled system error\n"
    assert primary(tmp_path, text)[0] == "nccl_system_error"


def test_rays_memory_monitor_killing_workers_is_an_oom(tmp_path: Path) -> None:
    text = (
        "(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) "
        "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 5a9c, IP: 10.0.0.2)\n"
    )
    assert primary(tmp_path, text)[0] == "oom"


def test_a_cuda_driver_curesult_error_is_a_cuda_error(tmp_path: Path) -> None:
    text = "[torch_memory_saver.cpp] CUresult error  result=1 file=csrc/torch_memory_saver.cpp func=resume line=214\n"
    assert primary(tmp_path, text)[0] == "cuda_error"


def test_a_store_connect_timeout_line_alone_is_read(tmp_path: Path) -> None:
    text = (
        "[E socket.cpp:957] [c10d] The client socket has timed out after 600s while trying to connect to "
        "(10.0.0.1, 3333).\n"
    )
    assert primary(tmp_path, text)[0] == "rendezvous_timeout"


STORE_TIMEOUT = (
    "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to "
    "(10.0.0.1, 29500).\n"
)


def test_a_store_client_timeout_under_env_init_names_rank_0_which_hosts_the_store(tmp_path: Path) -> None:
    """env:// init_process_group: rank 0's own process creates the TCPStore (is_master = rank == 0). A line
    alone does not show it is not a torchrun worker's (set zp's zp20): rank 0 is a lead, low; the client's
    traceback through torch.distributed's rendezvous makes it medium."""
    log = tmp_path / "case.log"
    log.write_text(STORE_TIMEOUT)
    got = diagnose_paths([str(log)])[1].primary
    assert got is not None and got.culprits == [0] and got.confidence == "low"
    frames = (
        'Traceback (most recent call last):\n  File "/usr/lib/python3.10/site-packages/torch/distributed/rendezvous.py", '
        "line 191, in _create_c10d_store\n    return TCPStore(\n"
    )
    log.write_text(frames + STORE_TIMEOUT)
    got = diagnose_paths([str(log)])[1].primary
    assert got is not None and got.culprits == [0] and got.confidence == "medium"


@pytest.mark.parametrize(
    "frames",
    [  # torchrun's agent timed out itself (its traceback after the line; an excerpt may lose the exception)
        'Traceback (most recent call last):\n  File "/opt/conda/bin/torchrun", line 8, in <module>\n    sys.exit(main())\n',
        # the elastic rendezvous creating its store (an excerpt that starts inside the traceback)
        '  File "/usr/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", '
        "line 1126, in _create_tcp_store_server\n    return dist.TCPStore(\n",
    ],
)
def test_a_store_client_timeout_under_torchrun_names_nobody(tmp_path: Path, frames: str) -> None:
    """Under torchrun the agent of node 0 hosts the store and every rank, rank 0 too, is its client: the
    timeout says the agent's store was not reached, not which rank is missing (held-out t28, t29)."""
    text = frames + STORE_TIMEOUT if "dynamic_rendezvous" in frames else STORE_TIMEOUT + frames
    assert primary(tmp_path, text)[:2] == ("rendezvous_timeout", [])


def test_a_cuda_runtime_calls_failure_in_a_libraries_words(tmp_path: Path) -> None:
    text = "[1,25]<stderr>:  what():  cudaEventQuery failed: an illegal memory access was encountered\n"
    assert primary(tmp_path, text)[0] == "cuda_error"


def test_ncclsystemerrors_words_without_nccl_before_them(tmp_path: Path) -> None:
    assert (
        primary(tmp_path, "RuntimeError: Runtime error: unhandled system error at wdl.py:31\n")[0]
        == "nccl_system_error"
    )


def test_mpiruns_first_process_to_fail_is_named_at_low_confidence(tmp_path: Path) -> None:
    """Open MPI's errmgr help text names the process (job, vpid = rank) and its exit code."""
    text = (
        "--------------------------------------------------------------------------\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n"
        "\n"
        "  Process name: [[12167,1],10]\n"
        "  Exit code:    3\n"
        "--------------------------------------------------------------------------\n"
    )
    log = tmp_path / "case.log"
    log.write_text(text)
    _report, d = diagnose_paths([str(log)])
    assert d.primary is not None and d.vocab_class == "child_failed_other"
    assert (d.primary.culprits, d.primary.confidence) == ([10], "low")
    assert "exited with code 3" in d.primary.summary
