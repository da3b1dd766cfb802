"""What a test's run left behind: the processes that carry a marker the test set, in their
environment or on their command line (a child that clears its environment still names it in its
arguments). Zombies are not counted: they run nothing and their parent or init reaps them."""

from __future__ import annotations

import os
import uuid


def marker() -> str:
    return f"cv-leftover-{uuid.uuid4().hex}"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def leftovers(mark: str) -> list[str]:
    """``pid cmdline`` of every live process whose environment or command line holds ``mark``."""
    needle, me, found = mark.encode(), os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me or not alive(int(name)):
            continue
        cmdline = _read(f"/proc/{name}/cmdline")
        if needle in cmdline or needle in _read(f"/proc/{name}/environ"):
            words = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{name} {words[:200]}")
    return found
