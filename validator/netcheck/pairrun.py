"""One rank of a named pair's all_reduce (allreduce.py) as a child of a preflight participant, when
its coordinator asks (coordinator.check_network; the scan runs the same program through its
transport). ``serve`` answers with the child's first line (its store's port) and leaves it running:
it ends by itself once rank 1 has joined and measured, at its own timeout, or when ``stop`` kills
it (before the job's exec, and at exit: a rank 1 that never joined leaves nothing behind);
``join`` waits for the child's answer. The request came from the coordinator, sealed: its arguments are still checked
for shape, and the child gets them as an argument list (no shell)."""

from __future__ import annotations

import atexit
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from validator.procs import first_line

PROGRAM = str(Path(__file__).with_name("allreduce.py"))
START_S = 75.0  # rank 0's first line: torch's import (46 s on a node held to 5 % of a CPU)
MAX_OUT = 1 << 16
_serving: list[subprocess.Popen[bytes]] = []  # rank 0 children still running: reaped on the next call


def run(argv: Any) -> dict[str, Any]:
    """allreduce.py's answer (``{"port", "backend"}`` to serve, ``{"allreduce": {...}}`` to join), or
    ``{"error": why}``."""
    for p in [p for p in _serving if p.poll() is not None]:
        _serving.remove(p)
    if not (isinstance(argv, list) and 4 <= len(argv) <= 6 and argv[0] in ("serve", "join")
            and all(isinstance(a, str) and len(a) <= 256 for a in argv)):  # fmt: skip
        return {"error": "a malformed all_reduce request"}
    try:
        limit = float(argv[-1]) * 3 + 30 if argv[0] == "join" else START_S
    except ValueError:
        return {"error": "a malformed all_reduce request"}
    try:
        proc = subprocess.Popen([sys.executable, PROGRAM, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)  # fmt: skip
    except OSError as e:
        return {"error": f"cannot start {sys.executable}: {e.strerror}"}
    assert proc.stdout is not None
    line = first_line(proc.stdout.fileno(), time.monotonic() + min(limit, 600.0), MAX_OUT)
    if argv[0] == "serve" and line is not None and proc.poll() is None:
        _serving.append(proc)  # measuring with rank 1 now
    else:
        if proc.poll() is None:
            proc.kill()  # ours, by its pid
        proc.wait()
    if proc.stdout is not None and proc not in _serving:
        proc.stdout.close()
    try:
        doc = json.loads(line) if line else None
    except ValueError:
        doc = None
    return doc if isinstance(doc, dict) else {"error": f"no answer within {limit:g} s" if line is None else "no answer"}


def stop() -> None:
    """Kill the rank 0 children still serving (ours, by their pids): before the job's exec
    (finish.act) and at exit."""
    while _serving:
        proc = _serving.pop()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


atexit.register(stop)
