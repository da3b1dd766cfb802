"""The command line of the benchmarks that take counts: ``[--flag] [N ...]``."""

from __future__ import annotations

import os
import sys


def counts(argv: list[str], doc: str | None, flags: tuple[str, ...] = ()) -> tuple[str | None, list[int]]:
    """(the flag, if the first word is one of ``flags``; the counts after it). ``-h``/``--help``
    prints ``doc`` and exits 0; a word that is not a positive count exits 2 with one line naming it."""
    prog = os.path.basename(sys.argv[0])
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
