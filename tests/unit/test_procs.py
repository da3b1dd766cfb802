"""validator.procs.Tree ends every process a command started, with real processes: a child in its
own session that ignores SIGTERM, a grandchild that starts another session and clears its
environment, an orphan whose parent has exited, a stopped process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.leftovers import alive, leftovers, marker
from validator.procs import Tree, row

# Started by the test: ignores SIGTERM, starts (1) a grandchild in its own session with an empty
# environment that ignores SIGTERM, (2) an orphan (a double fork: its parent exits at once), and
# (3) a child it stops with SIGSTOP; writes their pids; sleeps.
FAMILY = """import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
mark, pids = sys.argv[1], sys.argv[2]
deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
g = subprocess.Popen([sys.executable, "-c", deaf, mark], env={}, start_new_session=True)
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", deaf, "orphan"])
    os._exit(0)
s = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", mark])
os.kill(s.pid, signal.SIGSTOP)
open(pids, "w").write(f"{g.pid} {s.pid}")
time.sleep(300)
"""


def _wait_for(path: Path) -> None:
    for _ in range(300):  # bounded: 30 s
        if path.exists() and path.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} never written")


def test_end_leaves_nothing_of_a_family_that_hides(tmp_path: Path) -> None:
    mark, pids = marker(), tmp_path / "pids"
    tree = Tree()
    p = subprocess.Popen([sys.executable, "-c", FAMILY, mark, str(pids)], env=tree.env(dict(os.environ, M=mark)),
                         start_new_session=True)  # fmt: skip
    try:
        tree.add(p.pid)
        _wait_for(pids)
        hidden = [int(x) for x in pids.read_text().split()]
        members = {r.pid for r in tree.members()}
        assert {p.pid, *hidden} <= members  # the env-less grandchild through its parent
        assert len(members) == 4  # and the orphan, through the mark in its environment
        assert len(leftovers(mark)) == 4
        assert tree.end(grace=0.5) == 4
        p.wait(10)
        assert leftovers(mark) == [] and tree.members() == []
        assert not any(alive(pid) for pid in hidden)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_gentle_command_ends_at_sigterm_without_waiting_the_grace(tmp_path: Path) -> None:
    tree = Tree()
    p = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(300)"],
                         env=tree.env(), stdout=subprocess.PIPE, start_new_session=True)  # fmt: skip
    tree.add(p.pid)
    assert p.stdout is not None and p.stdout.readline() == b"up\n"
    assert tree.end(grace=60) == 1  # returns as soon as it is gone: the test would take a minute otherwise
    assert p.wait(10) == -signal.SIGTERM


def test_a_session_id_taken_by_a_new_process_is_not_ours() -> None:
    """Once every process of a started session is gone, the kernel may give its id to a new
    process; one that starts its own session then bears the same session id."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        tree = Tree()
        tree.add(other.pid)
        assert [r.pid for r in tree.members()] == [other.pid]
        now = row(other.pid)
        assert now is not None
        tree.leaders[other.pid] = now.start - 1  # as if the leader we started had been another process
        assert tree.members() == []
        assert tree.end(grace=0) == 0 and other.poll() is None
    finally:
        other.kill()
        other.wait()


# Leaves an orphan that hides every way it can (a double fork, its own session, an empty
# environment, SIGTERM ignored; the marker on its command line), writes its pid and exits.
ORPHAN = """import os, sys, time
mark, pids = sys.argv[1], sys.argv[2]
deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.execve(sys.executable, [sys.executable, "-c", deaf, mark], {})
    os._exit(0)
os.close(w)
open(pids, "w").write(os.read(r, 32).decode())
"""


def test_an_orphan_that_hides_every_way_is_adopted(tmp_path: Path) -> None:
    mark, pids = marker(), tmp_path / "pids"
    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    tree = Tree(adopt=True)
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # other code's, our session
    try:
        subprocess.run([sys.executable, "-c", ORPHAN, mark, str(pids)], env=tree.env(), check=True, timeout=30)
        orphan = int(pids.read_text())
        assert leftovers(mark) != [] and alive(orphan)
        assert {r.pid for r in tree.members()} == {orphan}  # not the child from before, nor one in our session
        assert tree.end(grace=0.2) == 1
        assert leftovers(mark) == [] and not alive(orphan)
        assert row(orphan, zombies=True) is None  # reaped
        assert before.poll() is None and mine.poll() is None
    finally:
        for p in (before, mine):
            p.kill()
            p.wait()
        for line in leftovers(mark):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def test_a_child_answers_with_its_last_line_and_is_stopped_by_its_pid() -> None:
    from validator.procs import Child

    child = Child("tests.unit.child_echo", {"echo": [1, "two"]})
    assert child.ended(30)
    doc, before = child.answer()
    assert doc == {"echo": [1, "two"], "parent": os.getpid()}
    assert before == b"chatter before the answer"
    slow = Child("tests.unit.child_echo", {"sleep": 60})
    assert not slow.ended(0.5)
    slow.stop()
    assert slow.proc.returncode == -signal.SIGKILL
    assert slow.answer() == (None, b"")  # stopped before its answer: none, its chatter kept out of the answer


def test_a_child_ends_when_the_process_that_started_it_is_gone(tmp_path: Path) -> None:
    starter = (
        "import os, sys; from validator.procs import Child\n"
        "c = Child('tests.unit.child_echo', {'sleep': 120})\n"
        "print(c.proc.pid, flush=True); os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", starter], capture_output=True, timeout=30, check=True)
    pid = int(out.stdout.split()[0])
    for _ in range(100):  # bounded: 10 s (it looks every 0.5 s)
        if row(pid) is None:
            break
        time.sleep(0.1)
    assert row(pid) is None, "the child outlived the process that started it"


def test_torchs_cpp_warnings_stay_out_of_the_users_stderr(capfd) -> None:  # type: ignore[no-untyped-def]
    import socket

    from validator.procs import Child

    with socket.socket() as s:  # a port nobody listens on: the store client's refusal warns
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = Child("tests.unit.child_echo", {"warn": port})
    assert child.ended(60)
    assert child.answer()[0] is not None
    err = capfd.readouterr().err
    assert "socket.cpp" not in err and "Exception raised from" not in err, err[-2000:]
