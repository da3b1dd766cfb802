"""The extra time `--net-check` adds, at N emulated hosts on one machine.

    python benchmarks/netcheck_scale.py [N ...]        (default: 50 100 200)

Each host is a real listener (validator/netcheck/probe.py, the participant's own code) on its own
loopback address 127.0.x.y, and a real prober run in a thread as a participant runs it; the rounds,
the planner and the decisions are the ones scan and preflight use (validator/netcheck/rounds.py).
Not counted: the wire messages that carry the targets and rows (one small frame each way per node
and round). All N hosts share this machine's cores and its loopback, so every link is measured
under full contention: the time is an upper bound for N real hosts, and a finding here is a false
positive. One JSON line per N; the last line is one JSON object with all of them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts  # noqa: E402
from validator.netcheck import probe, rounds  # noqa: E402
from validator.netcheck.ring import Node  # noqa: E402
from validator.preflight.coordinator import raise_nofile  # noqa: E402


def one(n: int) -> dict[str, Any]:
    listeners = [probe.Listener([f"127.0.{1 + i // 250}.{1 + i % 250}"]) for i in range(n)]
    nodes = [Node(f"n{i}", f"host{i}", x.bound[0], "lo", x.port, x.token) for i, x in enumerate(listeners)]

    async def probe_round(plans: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        got = await asyncio.gather(*(asyncio.to_thread(probe.probe, t, probe.TIMEOUT_S) for t in plans.values()))
        return dict(zip(plans, got, strict=True))

    try:
        t0 = time.monotonic()
        outcome = asyncio.run(rounds.run(nodes, probe_round))
        seconds = time.monotonic() - t0
    finally:
        for x in listeners:
            x.close()
    return {
        "hosts": n,
        "seconds": round(seconds, 2),
        "within_5s": seconds <= 5.0,
        **outcome.doc,
        "findings": [f"{f.code} {f.message[:120]}" for f in outcome.findings],
        "line": outcome.line,
    }


def main(argv: list[str]) -> None:
    raise_nofile()
    sizes = counts(argv, __doc__)[1] or [50, 100, 200]
    out = []
    for n in sizes:
        out.append(one(n))
        print(json.dumps(out[-1]), flush=True)
    print(json.dumps({"netcheck_scale": out}))


if __name__ == "__main__":
    main(sys.argv[1:])
