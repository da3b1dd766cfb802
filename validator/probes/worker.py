"""The node probes kept warm in one child process for a preflight's rounds (probes/local.py): it
reads a probe's name a line on stdin ("compute", "memory") and prints that probe's answer, as
compute.py and memory.py print it as programs, one JSON line; it ends when stdin closes. So torch
is imported once for a preflight's rounds, not once a round: on a node held to 5 % of a CPU its
import took 46 s, and the rounds (every node, then the suspects twice, two kinds) imported it up
to six times. Standard library only, run by its path (compute.py and memory.py beside it)."""

from __future__ import annotations

import json
import sys

import compute  # type: ignore[import-not-found,unused-ignore]  # beside this file: sys.path[0]
import memory  # type: ignore[import-not-found,unused-ignore]

PROBES = {"compute": compute.main, "memory": memory.main}


def main() -> int:
    for line in sys.stdin:
        kind = line.strip()
        probe = PROBES.get(kind)
        if probe is None:
            print(json.dumps({"probe": kind[:40], "error": f"no {kind[:40]!r} probe"}), flush=True)
            continue
        probe([])
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
