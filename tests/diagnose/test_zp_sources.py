"""What the blind set zp (tests/corpus/diagnose/heldout-zp.md) showed was read into a false attribution, or not read,
written from the sources' own format strings and rules, not from the set's cases (the logs below are built from them):

- c10d's TCPStore client, "The client socket has timed out after %dms while trying to connect to (%s, %d)": an env://
  world's store is rank 0's, a torchrun worker's is node 0's agent's. A bare line (no traceback to show which) names
  rank 0 as a lead only, low; the rendezvous frames of an env:// init keep it medium;
- ProcessGroupNCCL's HeartbeatMonitor (torch 2.4+): LOG(FATAL) "Terminating the process after attempting to dump debug
  info, due to ProcessGroupNCCL watchdog hang." (its exit message with the heartbeat's reason).
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

BARE = (
    "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect to "
    "(10.0.0.7, 29500)\n"
)
FRAMES = (
    "Traceback (most recent call last):\n"
    '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/rendezvous.py", line 191, in _create_c10d_store\n'
    "    return TCPStore(\n"
    "TimeoutError: The client socket has timed out after 1800s while trying to connect to (127.0.0.1, 42649).\n"
)


def test_a_bare_store_client_timeout_names_rank_0_as_a_lead_only(tmp_path: Path) -> None:
    bare = verdict(tmp_path, BARE)
    assert (bare.klass, bare.ranks, bare.confidence) == ("rendezvous_timeout", [0], "low")
    framed = verdict(tmp_path, FRAMES)
    assert (framed.klass, framed.ranks, framed.confidence) == ("rendezvous_timeout", [0], "medium")


def test_the_heartbeat_monitors_exit_for_a_watchdog_hang_is_a_collective_timeout(tmp_path: Path) -> None:
    line = (
        "[rank1]:[F603 13:59:14.178973438 ProcessGroupNCCL.cpp:1614] [PG ID 0 PG GUID 0(default_pg) Rank 1] [PG ID 0 "
        "PG GUID 0(default_pg) Rank 1] Terminating the process after attempting to dump debug info, due to "
        "ProcessGroupNCCL watchdog hang.\n"
    )
    got = verdict(tmp_path, line)
    assert (got.klass, got.ranks) == ("collective_timeout", [])  # a lone reporter: its own hang, nobody named
