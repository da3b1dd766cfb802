"""The local transport leaves nothing running: its python3 here starts a grandchild that hides (its
own session, an empty environment, SIGTERM ignored) before it runs the real program. After a
`validator scan --local` that completes, one interrupted by Ctrl-C, and the net check's listeners
(`Local.start` / `stop`), no process carrying the test's marker is left."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.leftovers import alive, leftovers, marker
from tests.scan.conftest import foreground, scan_env
from validator.netcheck import probe
from validator.transports import Program
from validator.transports.local import Local

# A python3 that first starts a hidden grandchild (its pid appended to argv[1]'s file), then runs
# the real one; HANG=1: it hangs instead (touching the file's .hang) after the grandchild started.
PYTHON = """#!{python}
import os, signal, subprocess, sys, time
mark, pids = {mark!r}, {pids!r}
deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
g = subprocess.Popen([sys.executable, "-c", deaf, mark], env={{}}, start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
with open(pids, "a") as f:
    f.write(f"{{g.pid}}\\n")
if {hang}:
    open(pids + ".hang", "w").close()
    time.sleep(300)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def fake_python(tmp: Path, mark: str, hang: bool = False) -> tuple[str, Path]:
    pids, path = tmp / "pids", tmp / ("hang" if hang else "python3")
    path.write_text(PYTHON.format(python=sys.executable, mark=mark, pids=str(pids), hang=hang))
    path.chmod(0o755)
    return str(path), pids


def started(pids: Path) -> list[int]:
    return [int(x) for x in pids.read_text().split()] if pids.exists() else []


def clean(mark: str) -> None:
    for line in leftovers(mark):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def test_a_completed_scan_leaves_nothing(tmp_path: Path) -> None:
    mark = marker()
    python, pids = fake_python(tmp_path, mark)
    try:
        p = subprocess.run([*VALIDATOR, "scan", "--local", "--python", python, "-f", "json"], capture_output=True,
                           text=True, env=scan_env(CV_MARK=mark), timeout=120, check=False)  # fmt: skip
        assert json.loads(p.stdout)["outcomes"] == [], p.stderr
        assert len(started(pids)) == 1  # the hidden grandchild ran
        assert leftovers(mark) == [] and not alive(started(pids)[0])
    finally:
        clean(mark)


def test_ctrl_c_of_a_scan_leaves_nothing(tmp_path: Path) -> None:
    mark = marker()
    python, pids = fake_python(tmp_path, mark, hang=True)
    try:
        p = subprocess.Popen([*VALIDATOR, "scan", "--local", "--python", python, "--timeout", "120", "-f", "json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=scan_env(CV_MARK=mark),
                             preexec_fn=foreground)  # fmt: skip
        hung = Path(f"{pids}.hang")
        for _ in range(600):  # bounded: 60 s
            if hung.exists() or p.poll() is not None:
                break
            time.sleep(0.1)
        assert hung.exists() and len(leftovers(mark)) >= 2  # the hanging python3 and its grandchild
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        assert leftovers(mark) == [] and not alive(started(pids)[0])
    finally:
        clean(mark)


def test_the_net_check_listeners_leave_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mark = marker()
    monkeypatch.setenv("CV_MARK", mark)  # the listeners carry it too
    python, pids = fake_python(tmp_path, mark)
    source = Path(probe.__file__).read_text()
    job = Program(source, {t: ["listen", "127.0.0.1"] for t in ("a", "b")}, timeout=60, answer=lambda d: "port" in d)

    async def listen() -> list[object]:
        async with Local(python) as local:
            answers = await local.start(job, ["a", "b"])
            assert len(leftovers(mark)) == 4  # two listeners, each with its hidden grandchild
        return list(answers.values())

    try:
        answers = asyncio.run(listen())
        assert all(isinstance(a, dict) and isinstance(a.get("port"), int) for a in answers), answers
        assert len(started(pids)) == 2 and leftovers(mark) == []
    finally:
        clean(mark)
