"""Shapes no corpus case shows yet (issue 25, "the shapes it does not read yet"), each written here from its
source's own format string, not from a thread:

- gloo (pytorch/gloo 70dc360272dfc57e3617184c78ff9b06f8cd4757): transport/tcp/unbound_buffer.cc "Timed out
  waiting %dms for recv operation to complete" after signalling "Application timeout caused pair closure" to the
  other pairs; transport/tcp/pair.cc "writev %s: %s", "Connection closed by peer %s. This is typically caused by a
  remote worker crashing..."; transport/tcp/helpers.h "timed out connecting: %s"; rendezvous/hash_store.cc "Wait
  timeout for key(s): %s" over transport/context.cc's keys "rank_<rank>";
- c10d (pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp) SocketImpl::waitForInput: "waitForInput: socket
  SocketImpl(fd=%d, addr=%s, remote=%s) timed out after %dms";
- Open MPI (open-mpi/ompi v4.1.8, ea8f4d03089018f08451f42f2cfa2467570f395e): orte/tools/orterun/help-orterun.txt
  [orterun:proc-aborted-strsignal] "%s noticed that process rank %lu with PID %lu on node %s exited on signal %d
  (%s)." and [orterun:proc-aborted]; errmgr_default_hnp.c + help-errmgr-base.txt [normal-termination-but];
- ParlAI (facebookresearch/ParlAI a29567f7ce76992fd1f03c51ba9e3b155a37ea51): parlai/utils/distributed.py
  distributed_context, print_prefix = 'rank:{:3d} |'.format(rank);
- stern (stern/stern, the default template "{{.PodName}} {{.ContainerName}} {{.Message}}");
- the last resort: failure words in the cases the scanner's anchors do not cover.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from validator.diagnose.logs import parse_line

from .corpus import verdict

GLOO = "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/{}] {}\n"


def test_a_gloo_recv_timeout_and_its_pair_closures_are_a_collective_timeout(tmp_path: Path) -> None:
    closure = GLOO.format("pair.cc:534", "Application timeout caused pair closure")
    timeout = GLOO.format("unbound_buffer.cc:81", "Timed out waiting 1800000ms for recv operation to complete")
    assert verdict(tmp_path, closure)[:2] == ("collective_timeout", [])
    assert verdict(tmp_path, closure + timeout)[:2] == ("collective_timeout", [])


@pytest.mark.parametrize(
    "line",
    [
        GLOO.format("pair.cc:339", "writev [10.0.0.2]:4312: Broken pipe"),
        GLOO.format("pair.cc:152", "timed out connecting: Connection timed out"),
        GLOO.format(
            "pair.cc:589",
            "Connection closed by peer [10.0.0.2]:4312. This is typically caused by a remote worker crashing. "
            "Check the logs of the remote worker before reporting an error. GLHF!",
        ),
    ],
)
def test_gloo_pairs_lost_or_never_connected_name_no_rank(tmp_path: Path, line: str) -> None:
    cls, culprits, _, hosts, _ = verdict(tmp_path, line)
    assert (cls, culprits, hosts) == ("connection_refused", [], [])  # the peer's address is a victim's view


def test_a_gloo_store_wait_names_the_rank_whose_key_is_missing(tmp_path: Path) -> None:
    line = "RuntimeError: [gloo/rendezvous/hash_store.cc:55] Wait timeout for key(s): rank_1\n"
    assert verdict(tmp_path, line)[:2] == ("rendezvous_timeout", [1])


WAIT = (
    "[W228 18:45:15.741177013 socket.cpp:487] [c10d] waitForInput: socket SocketImpl(fd=11, addr=[node1]:38674, "
    "remote=[::ffff:10.0.0.1]:23456) timed out after 900000ms\n"
)


def test_a_store_request_without_reply_is_a_rendezvous_timeout_naming_nobody(tmp_path: Path) -> None:
    poll = WAIT.replace("timed out after 900000ms", "returned 0, likely a timeout")
    assert verdict(tmp_path, poll + WAIT)[:2] == ("rendezvous_timeout", [])
    # under a rank's own failure it is that failure's echo
    oom = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert verdict(tmp_path, WAIT + oom)[:2] == ("oom", [1])


MPI_BANNER = "-" * 74 + "\n"
PRIMARY = (
    "Primary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
)


def test_mpirun_names_the_process_it_saw_die_of_a_signal_with_low_confidence(tmp_path: Path) -> None:
    noticed = "mpirun noticed that process rank 3 with PID 4121 on node gpu-node-07 exited on signal 9 (Killed).\n"
    got = verdict(tmp_path, MPI_BANNER + PRIMARY + MPI_BANNER + MPI_BANNER + noticed + MPI_BANNER)
    assert got[:4] == ("child_failed_other", [3], "low", ["gpu-node-07"])
    # PRRTE (Open MPI 5) and the form without the signal's name
    old = "prterun noticed that process rank 5 with PID 17 on node n2 exited on signal 11.\n"
    assert verdict(tmp_path, old)[:3] == ("child_failed_other", [5], "low")


def test_mpirun_alone_with_a_non_zero_exit_names_nobody(tmp_path: Path) -> None:
    assert verdict(tmp_path, MPI_BANNER + PRIMARY + MPI_BANNER)[:2] == ("child_failed_other", [])


def test_mpirun_noticing_a_signal_is_the_echo_of_the_ranks_own_error(tmp_path: Path) -> None:
    text = (
        "[1,1]<stderr>:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [10.0.0.3]:5212: "
        "Connection refused\n"
        "mpirun noticed that process rank 1 with PID 881 on node n1 exited on signal 6 (Aborted).\n"
    )
    assert verdict(tmp_path, text)[0] == "connection_refused"


@pytest.mark.parametrize(
    ("line", "rank", "host"),
    [
        ("rank:  3 | 2022-04-03 18:44:26,615 CRITICAL | Traceback (most recent call last):", 3, None),  # ParlAI logger
        ("rank:  3 | RuntimeError: CUDA out of memory.", 3, None),  # ParlAI print
        ("rank:123 | hello", 123, None),
        ("train-worker-1 pytorch [rank1]: RuntimeError: x", 1, "train-worker-1"),  # stern
        ("job-x7k2p trainer Traceback (most recent call last):", None, "job-x7k2p"),
        ("master-0 >> [rank1]:[E1104 10:07:58.664587143 ProcessGroupNCCL.cpp:2068] x", 1, "master-0"),
        ("step-10 loss INFO fine", None, None),  # not a pod and a container
        ("data-loader worker RuntimeError: boom", None, None),  # no replica suffix
    ],
)
def test_rank_and_host_prefixes(line: str, rank: int | None, host: str | None) -> None:
    ident = parse_line(line, 2025).ident
    assert (ident.rank, ident.host) == (rank, host)


@pytest.mark.parametrize(
    "line",
    [
        "ERROR: the data loader stopped",
        "FAILED: step 3",
        "Failed to load the checkpoint",
        "TIMEOUT waiting for the other workers",
        "ABORTED by the job manager",
        "EXCEPTION in worker 3",
        "Timed out waiting for peers",
        "an exception in the worker thread",
    ],
)
def test_failure_words_in_any_case_never_yield_no_failure_found(tmp_path: Path, line: str) -> None:
    cls, culprits, confidence, _, _ = verdict(tmp_path, "step 1 loss 0.3\n" + line + "\nstep 2 loss 0.2\n")
    assert (cls, culprits, confidence) == ("unrecognised", [], "unknown")


def test_a_log_without_failure_words_is_still_no_failure(tmp_path: Path) -> None:
    assert verdict(tmp_path, "step 1 loss 0.3\nstep 2 loss 0.2\nTraining finished, TIMEOUTS=0 disabled\n")[0] == "none"


def test_a_parlai_record_carries_its_rank_from_its_first_line_to_its_exception(tmp_path: Path) -> None:
    # ParlAI's logger puts the prefix before its format once per record: a traceback's later lines have none
    text = (
        "rank:  3 | 2022-04-03 18:44:26,615 CRITICAL | Traceback (most recent call last):\n"
        '  File "/x/train.py", line 10, in <module>\n'
        "    main()\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 21.06 GiB (GPU 3; 79.35 GiB total capacity)\n"
    )
    assert verdict(tmp_path, text)[:2] == ("oom", [3])
    # without the prefix the record names no rank (GPU 3 is a device)
    assert verdict(tmp_path, text.replace("rank:  3 | ", ""))[:2] == ("oom", [])


ABORT = (
    "--------------------------------------------------------------------------\n"
    "MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD\n"
    "with errorcode 1.\n\n"
    "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n"
    "You may or may not see output from other processes, depending on\n"
    "exactly when Open MPI kills them.\n"
    "--------------------------------------------------------------------------\n"
)  # open-mpi/ompi v4.1.8 ompi/mpi/help-mpi-api.txt [mpi-abort]


def test_the_process_that_called_mpi_abort_is_named_with_low_confidence(tmp_path: Path) -> None:
    assert verdict(tmp_path, ABORT)[:3] == ("child_failed_other", [5], "low")
    # in a communicator of its own, the rank is not the job's
    assert verdict(tmp_path, ABORT.replace("MPI_COMM_WORLD", "MPI COMMUNICATOR 3 SPLIT FROM 0"))[1] == []
    # its own error, where the log has it, is the cause: MPI_Abort is how it ended (the error line is as wide
    # as mpirun's banner of 74 dashes, which is no terminal's hard wrap: the two are not joined)
    oom = "[1,5]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert len(oom) - 1 == len(ABORT.splitlines()[0]) == 74
    assert verdict(tmp_path, oom + ABORT)[:2] == ("oom", [5])


def test_the_process_mpirun_saw_exit_without_finalize_is_named_with_low_confidence(tmp_path: Path) -> None:
    """open-mpi/ompi v4.1.8 orte/tools/orterun/help-orterun.txt [orterun:proc-exit-no-sync], as mpirun wraps it."""
    text = (
        "mpirun has exited due to process rank 11 with PID 10211 on\n"
        "node gpu-12 exiting improperly. There are two reasons this could occur:\n"
    )
    assert verdict(tmp_path, text)[:3] == ("child_failed_other", [11], "low")
    one_line = 'mpiexec has exited due to process rank 3 with PID 9 on node gpu-7 exiting without calling "finalize".\n'
    assert verdict(tmp_path, one_line)[:4] == ("child_failed_other", [3], "low", ["gpu-7"])


INIT = "| distributed init (rank {}): env://\n"  # torchvision references/classification/utils.py init_distributed_mode


def test_a_file_one_process_wrote_has_the_rank_its_init_line_says(tmp_path: Path) -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert verdict(tmp_path, INIT.format(3) + "epoch 0 step 10\n" + oom)[:2] == ("oom", [3])
    # every rank printing into one stream: the file is no one rank's
    assert verdict(tmp_path, INIT.format(0) + INIT.format(1) + oom)[:2] == ("oom", [])


def test_horovods_shut_down_message_is_a_victims_not_a_cause(tmp_path: Path) -> None:
    """horovod/common/operations.cc SHUT_DOWN_ERROR: every rank but the failing one says it; mpirun's report of the
    first process to fail (rank 0 here) decides."""
    text = (
        "[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks "
        "or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.\n"
        "Primary job  terminated normally, but 1 process returned\n"
        "a non-zero exit code. Per user-direction, the job has been aborted.\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n"
        "  Process name: [[50371,1],0]\n"
        "  Exit code:    1\n"
    )
    assert verdict(tmp_path, text)[:3] == ("child_failed_other", [0], "low")
