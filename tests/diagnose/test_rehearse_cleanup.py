"""`validator rehearse` leaves nothing running, with real torchrun and gloo ranks: a rank hung in a
collective, ranks that ignore SIGTERM (and a grandchild in its own session with an empty
environment), and Ctrl-C of rehearse itself. Every process of a run carries a marker (in its
environment, or on its command line); after rehearse returns, /proc holds none."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.diagnose.conftest import TORCHRUN
from tests.leftovers import alive, leftovers, marker
from tests.scan.conftest import foreground

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
LINGER = Path(__file__).parent / "scripts" / "linger.py"


def rehearse(tmp: Path, scenario: str, mark: str, *opts: str) -> tuple[list[str], dict[str, str]]:
    if not TORCHRUN.exists():
        pytest.skip("torchrun not installed in this environment")
    (tmp / "pids").mkdir()
    env = dict(os.environ, LINGER=scenario, PIDS_DIR=str(tmp / "pids"), OMP_NUM_THREADS="1", CV_MARK=mark)
    cmd = [sys.executable, "-m", "validator", "rehearse", "--trace-dir", str(tmp / "tr"), *opts, "--",
           str(TORCHRUN), "--nproc-per-node=2", f"--master-port={free_port()}", str(LINGER), mark]  # fmt: skip
    return cmd, env


def pids(tmp: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in (tmp / "pids").iterdir() if p.read_text()}


def test_a_rank_hung_in_a_collective_is_ended(tmp_path: Path) -> None:
    mark = marker()
    cmd, env = rehearse(tmp_path, "hung", mark, "--stall-seconds", "2", "--max-seconds", "120", "-f", "json")
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=ROOT)
        assert "(hung)" in p.stderr, p.stderr
        started = pids(tmp_path)
        assert sorted(started) == ["rank0", "rank1"]  # both ranks ran; rank 0 then waited in all_reduce
        assert leftovers(mark) == []
        assert not any(alive(pid) for pid in started.values())
        assert json.loads(p.stdout)["diagnosis"] is not None
        # the report alone on stdout, one line on stderr; the ranks' output in the log
        assert len(p.stderr.splitlines()) == 1 and f"rehearsal.log) in {tmp_path / 'tr'}" in p.stderr, p.stderr
        assert "linger: rank 0 waits" in (tmp_path / "tr" / "rehearsal.log").read_text()
    finally:
        _kill_all(mark)


def test_ranks_that_ignore_sigterm_and_their_hidden_grandchild_are_ended(tmp_path: Path) -> None:
    mark = marker()
    cmd, env = rehearse(tmp_path, "deaf", mark, "--stall-seconds", "2", "--max-seconds", "120", "-v")
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=ROOT)
        assert "(hung)" in p.stderr, p.stderr
        assert "linger: rank 1 waits" in p.stderr  # -v: the command's output on stderr too
        started = pids(tmp_path)
        assert sorted(started) == ["grandchild", "rank0", "rank1"]
        assert leftovers(mark) == []
        assert not any(alive(pid) for pid in started.values())
    finally:
        _kill_all(mark)


def test_ctrl_c_of_rehearse_ends_the_run(tmp_path: Path) -> None:
    mark = marker()
    cmd, env = rehearse(tmp_path, "hung", mark, "--stall-seconds", "0", "--max-seconds", "300")
    out, err = open(tmp_path / "out", "wb"), open(tmp_path / "err", "wb")  # noqa: SIM115
    try:
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, cwd=ROOT, preexec_fn=foreground)
        for _ in range(1200):  # bounded: 120 s for torch to start both ranks
            if len(pids(tmp_path)) == 2 or p.poll() is not None:
                break
            time.sleep(0.1)
        assert sorted(pids(tmp_path)) == ["rank0", "rank1"], (tmp_path / "err").read_text()
        assert len(leftovers(mark)) >= 3  # torchrun and its two ranks, at least, are running
        p.send_signal(signal.SIGINT)
        assert p.wait(60) == 130, (tmp_path / "err").read_text()
        assert leftovers(mark) == []
        assert "Traceback" not in (tmp_path / "err").read_text()
    finally:
        out.close()
        err.close()
        _kill_all(mark)


def _kill_all(mark: str) -> None:
    """What a failed test left: by pid, so that later tests start clean."""
    for line in leftovers(mark):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


@pytest.mark.parametrize("kind", ["stale", "file", "null"])
def test_a_trace_dir_that_is_not_new_or_empty_is_refused_before_anything_runs(tmp_path: Path, kind: str) -> None:
    """Red-teamed: a --trace-dir holding an earlier failure's rank0.log had a healthy run blamed on it; a file or a
    link to /dev/null gave a traceback. Each is one line, exit 2, and the command never runs."""
    where = tmp_path / "tr"
    if kind == "stale":
        where.mkdir()
        (where / "rank0.log").write_text("RuntimeError: boom\n")
    elif kind == "file":
        where.write_text("x")
    else:
        where.symlink_to("/dev/null")
    ran = tmp_path / "ran"
    cmd = [sys.executable, "-m", "validator", "rehearse", "--trace-dir", str(where), "--",
           sys.executable, "-c", f"open({str(ran)!r}, 'w')"]  # fmt: skip
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert got.returncode == 2, got.stderr
    assert got.stderr.count("\n") == 1 and "--trace-dir" in got.stderr and "Traceback" not in got.stderr, got.stderr
    assert not ran.exists()
