"""Preflight starts no process of its own: the net check's listener and the smoke test's gloo group
are threads and sockets of the participant, which the job replaces (exec) or which end with it.
With --net-check and --smoke on two real ranks: the job inherits no socket, and once every
participant has exited no process carrying the test's marker is left."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.leftovers import leftovers, marker
from tests.preflight.conftest import preflight, ranks

# The job: prints what it inherited (its open descriptors), then exits.
FDS = (
    "import os\n"
    "fds = []\n"
    "for f in os.listdir('/proc/self/fd'):\n"
    "    try:\n"
    "        fds.append(os.readlink(f'/proc/self/fd/{f}'))\n"
    "    except OSError:\n"
    "        pass\n"
    "print('inherited', sorted(fds))\n"
)


def test_net_check_and_smoke_leave_nothing(tmp_path: Path, port: int) -> None:
    mark = marker()
    runs = preflight(tmp_path, ranks(2, port, CV_MARK=mark), "--timeout", "60", "--net-check", "--smoke",
                     command=[sys.executable, "-c", FDS])  # fmt: skip
    assert [r.rc for r in runs] == [0, 0], [r.err[-1500:] for r in runs]
    assert all("smoke: all_reduce ok" in r.err for r in runs)
    inherited = [line for r in runs for line in r.out.splitlines() if line.startswith("inherited")]
    assert len(inherited) == 2 and not any("socket:" in line for line in inherited), inherited
    assert leftovers(mark) == []
