"""What every benchmark shares: the command line of those that take counts (``[--flag] [N ...]``),
and the machine's load beside every figure (``measured``): a ratio measured while the machine
was busy (load average above its core count) is refused unless ``--allow-busy`` is given."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

ALLOW_BUSY = "--allow-busy"
LOAD_AT_START = os.getloadavg()[0]  # when the benchmark's module was imported: its start


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
    busy = max(LOAD_AT_START, end) > cores
    print(f"load average (1 min): {LOAD_AT_START:.2f} at the start, {end:.2f} at the end, on {cores} cores"
          + (" (busy)" if busy else ""), flush=True)  # fmt: skip
    doc = {**doc, "load": {"start": round(LOAD_AT_START, 2), "end": round(end, 2), "cores": cores, "busy": busy}}
    if busy and ratios and ALLOW_BUSY not in sys.argv:
        prog = os.path.basename(sys.argv[0])
        sys.stderr.write(f"{prog}: the machine was busy (load average {max(LOAD_AT_START, end):.1f} on {cores} cores): "
                         f"no ratio reported; run it on a quiet machine, or pass {ALLOW_BUSY}\n")  # fmt: skip
        sys.exit(2)
    print(json.dumps(doc), flush=True)
