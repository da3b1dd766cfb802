"""What the blind set zn (tests/corpus/diagnose/heldout-zn.md) showed was not read, written from its sources' own format
strings, not from the set's cases (the logs below are built from them):

- NCCL src/misc/socket.cc ncclSocketProgressOpt: "Net : Call to %s %s failed : %s": a recv or send refused is a
  non-blocking connect refused (the peer was not listening), a connect failure (system), as "Connect to %s failed :
  Connection refused" is; a connection reset or a broken pipe is the peer going away (remote);
- OpenSSH ssh.c: fatal("%s: Could not resolve hostname %.100s: %s"): a launcher's ssh cannot name a node;
- Open MPI help-errmgr-base.txt [node-died] (and PRRTE's): "ORTE has lost communication with a remote daemon." with
  the daemons' names (a daemon's vpid is no rank).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import verdict

WARN = "node2:15874:17284 [4] misc/socket.cc:503 NCCL WARN Net : Call to recv from 10.0.0.8<56843> failed : {why}\n"
INTERNAL = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, "
    "internal error, NCCL version 2.14.3\nncclInternalError: Internal check failed.\nLast error:\n"
    "Net : Call to recv from 10.0.0.8<38309> failed : {why}\n"
)


@pytest.mark.parametrize(
    ("why", "kind"),
    [("Connection refused", "nccl_system_error"), ("Connection reset by peer", "nccl_remote_error"),
     ("Broken pipe", "nccl_remote_error")],
)  # fmt: skip
def test_a_refused_socket_call_is_a_connect_failure_and_a_reset_the_peer_going(
    tmp_path: Path, why: str, kind: str
) -> None:
    assert verdict(tmp_path, WARN.format(why=why)).klass == kind
    assert verdict(tmp_path, INTERNAL.format(why=why)).klass == kind  # under torch's "internal error" too


def test_ssh_that_cannot_resolve_a_node_is_the_launcher_not_reaching_it(tmp_path: Path) -> None:
    text = (
        "ssh: Could not resolve hostname nccl-tests-worker-3.nccl-tests.default.svc: Name or service not known\n"
        + "-" * 74
        + "\nORTE was unable to reliably start one or more daemons.\n"
    )
    got = verdict(tmp_path, text)
    assert (got.klass, got.ranks) == ("connection_refused", [])


def test_a_lost_daemon_is_a_process_that_died_named_by_no_rank(tmp_path: Path) -> None:
    lost = (
        "ORTE has lost communication with a remote daemon.\n\n  HNP daemon   : [[43015,0],0] on node launcher-0\n"
        "  Remote daemon: [[43015,0],20] on node worker-19\n\nThis is usually due to either a failure of the TCP network\n"
        "connection to the node, or possibly an internal failure of\nthe daemon itself. We cannot recover from this "
        "failure, and\ntherefore will terminate the job.\n"
    )
    got = verdict(tmp_path, lost)
    assert (got.klass, got.ranks, got.hosts) == ("child_failed_other", [], [])
    prte = "ssh: connect to host 10.1.1.7 port 22: Connection refused\n" + lost.replace("ORTE", "PRTE")
    assert verdict(tmp_path, prte).klass == "connection_refused"  # the launcher never reached the node
    assert verdict(tmp_path, lost.replace("ORTE", "PRTE")).klass == "child_failed_other"
