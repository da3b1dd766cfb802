"""End every process a command started, whatever it did after it started: no cgroups needed.

A ``Tree`` marks the environment it gives its commands (``CLUSTER_VALIDATOR_RUN=<token>``): every
descendant inherits the mark, also one that starts its own session (torchrun's workers do) or
is orphaned when its parent dies. ``Tree.end`` finds the members in /proc: a process carrying
the mark, in a session or process group a started command leads, or whose parent is a member
(a child started with a cleared environment, while its parent lives); with ``adopt``, this
process is their subreaper (prctl PR_SET_CHILD_SUBREAPER) while the tree lives, so an orphan
stays a descendant whatever else it changed, and is reaped here. It sends them SIGTERM,
waits up to a grace for them to go, then SIGKILL until none is left (a rank blocked in a gloo
collective never runs its Python SIGTERM handler). A process is signalled through a pidfd
after its start time is checked again, so a pid reused meanwhile is never hit. Zombies are
not counted: they run nothing, and their parent (or init) reaps them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

PR_SET_CHILD_SUBREAPER = 36
ENV = "CLUSTER_VALIDATOR_RUN"  # not a VALIDATOR_ name: the agent collects those as facts


class Row(NamedTuple):
    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot: with the pid, names one process
    zombie: bool = False


def row(pid: int, zombies: bool = False) -> Row | None:
    """The process's /proc/PID/stat fields; None once it is gone (or a zombie, unless ``zombies``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # the name before it may hold spaces and ")"
    zombie = fields[:1] in ([b"Z"], [b"X"])
    if len(fields) < 20 or (zombie and not zombies):
        return None
    return Row(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), zombie)


def _rows(zombies: bool = False) -> list[Row]:
    me = os.getpid()
    return [r for p in os.listdir("/proc") if p.isdecimal() and int(p) != me and (r := row(int(p), zombies))]


def _subreaper(on: bool) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0


def _marked(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:  # gone, or another user's: not ours to end
        return False


class Tree:
    def __init__(self, adopt: bool = False) -> None:
        """``adopt``: a child of this process that appears while the tree lives, outside this
        process's session, belongs to the tree (an orphan adopted, or a command it started); the
        children of other code of this process stay in its session, or existed before."""
        self.token = secrets.token_hex(8)
        self.leaders: dict[int, int] = {}  # pid -> start time of a command started in its own session
        self.adopt = adopt and _subreaper(True)
        me = os.getpid()
        self.before = {(r.pid, r.start) for r in _rows(zombies=True) if r.ppid == me} if self.adopt else set()

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a command of this tree."""
        return {**(os.environ if base is None else base), ENV: self.token}

    def add(self, pid: int) -> None:
        """A command started with ``start_new_session``: its session and group are members."""
        self.leaders[pid] = r.start if (r := row(pid)) else -1

    def members(self) -> list[Row]:
        mark, me = f"{ENV}={self.token}".encode(), os.getpid()
        rows = _rows()
        # The kernel keeps a pid from reuse while a session or group bears it; once all are gone a new
        # process may take it: a leader's id counts while no process or the leader itself holds it.
        holder = {r.pid: r.start for r in rows if r.pid in self.leaders}
        ours = {pid for pid, start in self.leaders.items() if holder.get(pid, start) == start}
        found = {r.pid for r in rows if r.sid in ours or r.pgid in ours or _marked(r.pid, mark)}
        if self.adopt:
            sid = os.getsid(0)
            found |= {r.pid for r in rows if r.ppid == me and r.sid != sid and (r.pid, r.start) not in self.before}
        while grown := {r.pid for r in rows if r.ppid in found and r.pid not in found}:
            found |= grown
        return [r for r in rows if r.pid in found]

    def end(self, grace: float = 5.0) -> int:
        """SIGTERM every member, SIGKILL what is left after ``grace`` seconds; how many there were."""
        first = self.members()
        seen = self._end(first, grace) if first else set()
        if self.adopt:  # the orphans it ended are its zombies now (a leader is its starter's to reap)
            self.adopt = not _subreaper(False)
            for r in _rows(zombies=True):
                if r.zombie and r.ppid == os.getpid() and r.pid in seen and r.pid not in self.leaders:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(r.pid, 0)
        return len(first)

    def _end(self, first: list[Row], grace: float) -> set[int]:
        """End them; every member seen meanwhile."""
        seen = {r.pid for r in first}
        if grace > 0:
            for r in first:
                _send(r, signal.SIGTERM)
                _send(r, signal.SIGCONT)  # a stopped process acts on SIGTERM only once continued
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and (left := self.members()):
                seen |= {r.pid for r in left}
                time.sleep(0.1)
        deadline = time.monotonic() + 10.0  # one that forks while we look: kill again until none
        while (left := self.members()) and time.monotonic() < deadline:
            seen |= {r.pid for r in left}
            for r in left:
                _send(r, signal.SIGKILL)
            time.sleep(0.02)
        return seen


def _send(r: Row, sig: signal.Signals) -> None:
    """Signal the process ``r`` names, not another that took its pid since."""
    try:
        fd = os.pidfd_open(r.pid)
    except OSError:
        return  # gone
    try:
        now = row(r.pid)
        if now is not None and now.start == r.start:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)


def first_line(fd: int, deadline: float, limit: int = 1 << 20) -> bytes | None:
    """The first line a child writes to pipe ``fd`` before ``deadline`` (monotonic; at most ``limit``
    bytes read), or None: nothing whole in time, or the pipe closed first with nothing in it."""
    import selectors

    got = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in got and len(got) < limit:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            got += chunk
    return got.split(b"\n", 1)[0] if got else None


class Child:
    """``python -m MODULE`` with ``spec`` (and this process's pid, ``parent``) as one JSON object on its
    stdin and its stdout kept in a temporary file; stopped by its pid (``stop``). Its answer is its
    last line, one JSON object; the module reads its spec with ``spec_in``. torch's C++ log lines (with
    their stack frames) stay out of the user's stderr unless TORCH_CPP_LOG_LEVEL says otherwise: what
    failed reaches the user in the answer, in one line; NCCL's own lines (NCCL_DEBUG) are its stdout."""

    def __init__(self, module: str, spec: Mapping[str, object], env: Mapping[str, str] | None = None) -> None:
        import json
        import subprocess
        import sys
        import tempfile

        self.out = tempfile.TemporaryFile()  # noqa: SIM115 - read once the child ends (``answer``), closed there
        env = {"TORCH_CPP_LOG_LEVEL": "FATAL", **(os.environ if env is None else env)}
        self.proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=self.out, env=env)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({**spec, "parent": os.getpid()}).encode())
        self.proc.stdin.close()

    def ended(self, timeout: float = 0.0) -> bool:
        """Whether it has ended, waiting up to ``timeout`` seconds for it."""
        import subprocess

        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # ours, by its pid
            self.proc.wait()

    def answer(self, limit: int = 1 << 20) -> tuple[dict[str, Any] | None, bytes]:
        """(its last line when that is a JSON object, what it printed before it); at most ``limit`` bytes read."""
        import json

        self.out.seek(0)
        text = self.out.read(limit)
        self.out.close()
        head, _, last = text.rstrip().rpartition(b"\n")
        try:
            doc = json.loads(last)
        except ValueError:
            doc = None
        return (doc if isinstance(doc, dict) else None), head


def spec_in() -> dict[str, Any]:
    """In a ``Child``: its spec. It ends (exit 1) once the process that started it is gone."""
    import json
    import sys

    spec = json.loads(sys.stdin.buffer.read())
    orphaned(int(spec["parent"]))
    return dict(spec)


def orphaned(parent: int, every: float = 0.5) -> None:
    """End this process once ``parent``, the one that started it (its pid in the spec: it may be gone
    before this runs), is gone: killed, or SIGTERM's default action. A stage left behind would go
    on hosting a store and deciding for the others."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
