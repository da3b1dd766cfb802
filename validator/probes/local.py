"""The node probes (compute.py, memory.py) run on this node in a child process, as the scan runs
them through its transport: the preflight's participants and coordinator use this. A child, not a
thread: the probe holds a core (and the GIL) for its windows, and torch stays out of the rank that
runs it. One child for all the rounds (worker.py): torch is imported once, not once a round. Its
answer is one JSON line, or why there is none; a child that does not answer in time is killed (by
its pid) and the next round starts a fresh one. The child ends when this process closes its stdin:
at exit, or at the job's exec (the pipe does not survive it)."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from validator.procs import first_line

TIMEOUT_S = 60.0  # torch's import plus five windows, on a loaded node
KINDS = ("compute", "memory")
MAX_OUT = 1 << 20  # an answer is a few KB; more is not a probe's

_lock = threading.Lock()
_child: tuple[subprocess.Popen[bytes], IO[bytes]] | None = None  # the worker and its stderr


def _start() -> tuple[subprocess.Popen[bytes], IO[bytes]] | str:
    global _child
    if _child is not None and _child[0].poll() is None:
        return _child
    _stop()
    err = tempfile.TemporaryFile()  # noqa: SIM115 - kept with the child, closed by _stop
    try:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("worker.py"))], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err)  # fmt: skip
    except OSError as e:
        err.close()
        return f"cannot start {sys.executable}: {e.strerror}"
    _child = (proc, err)
    return _child


def _stop() -> None:
    global _child
    if _child is None:
        return
    proc, err = _child
    _child = None
    if proc.poll() is None:
        proc.kill()  # ours, by its pid
    proc.wait()
    for f in (proc.stdin, proc.stdout, err):
        if f is not None:
            f.close()


atexit.register(_stop)


def run(kind: str, timeout: float = TIMEOUT_S) -> dict[str, Any] | str:
    """The probe's answer (``{"probe": kind, "devices": [...]}``), or why there is none."""
    if kind not in KINDS:
        return f"no {kind!r} probe"
    with _lock:
        child = _start()
        if isinstance(child, str):
            return child
        proc, err = child
        assert proc.stdin is not None
        try:
            proc.stdin.write(kind.encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            pass  # it died: read says so
        assert proc.stdout is not None
        text = first_line(proc.stdout.fileno(), time.monotonic() + timeout, MAX_OUT)
        try:
            answer = json.loads(text) if text else None
        except ValueError:
            answer = None
        if isinstance(answer, dict) and answer.get("probe") == kind:
            return answer
        if text is None and proc.poll() is None:
            _stop()
            return f"no answer within {timeout:g} s"
        if proc.poll() is None:  # an answer that is not the probe's: no longer trusted
            proc.kill()
        proc.wait()
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 300))
        lines = err.read().decode(errors="replace").strip().splitlines()
        _stop()
        return f"exit {proc.returncode}: {lines[-1] if lines else 'no answer'}"[:300]
