"""One probe program (compute.py, memory.py) run on this node as a child process, as the scan
runs it through its transport: the preflight's participants and coordinator use this. A child,
not a thread: the probe holds a core (and the GIL) for its windows, and torch stays out of the
rank that runs it. Its answer is the program's last line, a JSON object, or why there is none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TIMEOUT_S = 60.0  # torch's import plus five windows, on a loaded node
KINDS = ("compute", "memory")
MAX_OUT = 1 << 20  # an answer is a few KB; more is not a probe's


def run(kind: str, timeout: float = TIMEOUT_S) -> dict[str, Any] | str:
    """The probe's answer (``{"probe": kind, "devices": [...]}``), or why there is none."""
    if kind not in KINDS:
        return f"no {kind!r} probe"
    program = Path(__file__).with_name(f"{kind}.py")
    try:
        done = subprocess.run([sys.executable, str(program)], capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout:g} s"
    except OSError as e:
        return f"cannot start {sys.executable}: {e.strerror}"
    lines = done.stdout[-MAX_OUT:].decode(errors="replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or answer.get("probe") != kind:
        err = done.stderr[-300:].decode(errors="replace").strip().splitlines()
        return f"exit {done.returncode}: {err[-1] if err else 'no answer'}"[:300]
    return answer
