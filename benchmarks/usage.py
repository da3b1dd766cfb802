"""What every benchmark shares: the command line of those that take counts (``[--flag] [N ...]``),
and the machine's load beside every figure (``measured``): a ratio measured while the machine
was busy is refused unless ``--allow-busy`` is given. Busy: the load average was above the core
count at the start, or other processes used more than OTHERS cores on average while it ran (all
CPU time in /proc/stat minus this benchmark's own and its children's; the 1-minute load average
at the end counts the benchmark's own processes, so it is printed, not judged)."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

ALLOW_BUSY = "--allow-busy"
LOAD_AT_START = os.getloadavg()[0]  # when the benchmark's module was imported: its start
OTHERS = 0.25  # cores that other processes may use on average before the machine counts as busy
HZ = os.sysconf("SC_CLK_TCK")


def _cpu() -> tuple[float, float, float]:
    """(monotonic time, CPU seconds the whole machine spent busy, CPU seconds of this process and
    the children it waited for)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        busy = (sum(fields) - fields[3] - fields[4]) / HZ  # all but idle and iowait
    except (OSError, ValueError):
        busy = float("nan")
    t = os.times()
    return time.monotonic(), busy, t.user + t.system + t.children_user + t.children_system


CPU_AT_START = _cpu()


def counts(argv: list[str], doc: str | None, flags: tuple[str, ...] = ()) -> tuple[str | None, list[int]]:
    """(the flag, if the first word is one of ``flags``; the counts after it). ``-h``/``--help``
    prints ``doc`` and exits 0; a word that is not a positive count exits 2 with one line naming it."""
    prog = os.path.basename(sys.argv[0])
    argv = [a for a in argv if a != ALLOW_BUSY]  # read by measured()
    if any(a in ("-h", "--help") for a in argv):
        print((doc or "").strip())
        sys.exit(0)
    flag = argv[0] if argv and argv[0] in flags else None
    out = []
    for a in argv[1:] if flag else argv:
        if not a.isdigit() or int(a) < 1:
            sys.stderr.write(f"{prog}: {a!r} is not a count (a positive integer); see {prog} --help\n")
            sys.exit(2)
        out.append(int(a))
    return flag, out


def measured(doc: dict[str, Any], ratios: bool = True) -> None:
    """Print the load average at the start and now, then ``doc`` (with ``"load"``) as the last
    line. With ``ratios`` (the figures compare against an anchor measured in the same run) and a
    busy machine, one line on stderr and exit 2 instead, unless --allow-busy: a ratio measured
    under load is not the product's figure (a floor measured at load 2 read 0.5x; quiet, 0.34x)."""
    cores = os.cpu_count() or 1
    end = os.getloadavg()[0]
    (t0, busy0, ours0), (t1, busy1, ours1) = CPU_AT_START, _cpu()
    others = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / max(t1 - t0, 1e-9)  # cores, on average
    busy = cores < LOAD_AT_START or (not math.isnan(others) and others > OTHERS)
    print(f"load average (1 min): {LOAD_AT_START:.2f} at the start, {end:.2f} at the end, on {cores} cores; "
          f"other processes used {others:.2f} cores while it ran" + (" (busy)" if busy else ""), flush=True)  # fmt: skip
    load = {
        "start": round(LOAD_AT_START, 2),
        "end": round(end, 2),
        "cores": cores,
        "others": round(others, 2),
        "busy": busy,
    }
    doc = {**doc, "load": load}
    if busy and ratios and ALLOW_BUSY not in sys.argv:
        prog = os.path.basename(sys.argv[0])
        why = (
            f"load average {LOAD_AT_START:.1f} at the start"
            if cores < LOAD_AT_START
            else f"other processes used {others:.2f} cores"
        )
        sys.stderr.write(f"{prog}: the machine was busy ({why}, on {cores} cores): "
                         f"no ratio reported; run it on a quiet machine, or pass {ALLOW_BUSY}\n")  # fmt: skip
        sys.exit(2)
    print(json.dumps(doc), flush=True)
