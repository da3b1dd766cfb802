"""The extra time `--net-check` adds, at N emulated hosts on one machine.

    python benchmarks/netcheck_scale.py [N ...]        (default: 50 100 200)
    python benchmarks/netcheck_scale.py --every-pair [N ...]   (default: 8 16)

With --every-pair, each N is checked twice on the same listeners, in the same run: the default
(``rings``) and ``--net-check-pairs all`` (the rings, then every pair off them in rounds of disjoint
pairs: validator/netcheck/sweep.py); each N's line has both times and the sweep's rounds and pairs,
and the last line (benchmarks/usage.py ``measured``) carries the load beside them.

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
from benchmarks.usage import counts, measured  # noqa: E402
from validator.cliopts import NetPairs  # noqa: E402
from validator.netcheck import probe, rounds  # noqa: E402
from validator.netcheck.ring import Node  # noqa: E402
from validator.preflight.coordinator import raise_nofile  # noqa: E402


def one(n: int, modes: tuple[NetPairs, ...] = ("rings",)) -> dict[str, Any]:
    """The net check over ``n`` loopback hosts, once per mode, on the same listeners: the first
    mode's figures, and each further mode's under its name."""
    listeners = [probe.Listener([f"127.0.{1 + i // 250}.{1 + i % 250}"]) for i in range(n)]
    nodes = [Node(f"n{i}", f"host{i}", x.bound[0], "lo", x.port, x.token) for i, x in enumerate(listeners)]

    async def probe_round(plans: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        got = await asyncio.gather(*(asyncio.to_thread(probe.probe, t, probe.TIMEOUT_S) for t in plans.values()))
        return dict(zip(plans, got, strict=True))

    out: dict[str, Any] = {}
    try:
        for mode in modes:
            t0 = time.monotonic()
            outcome = asyncio.run(rounds.run(nodes, probe_round, mode))
            seconds = time.monotonic() - t0
            doc = {
                "seconds": round(seconds, 2),
                **outcome.doc,
                "findings": [f"{f.code} {f.message[:120]}" for f in outcome.findings],
                "line": outcome.line,
            }
            out.update({"hosts": n, **doc, "within_5s": seconds <= 5.0} if not out else {mode: doc})
    finally:
        for x in listeners:
            x.close()
    return out


def main(argv: list[str]) -> None:
    raise_nofile()
    flag, sizes = counts(argv, __doc__, ("--every-pair",))
    if flag:
        both = []
        for n in sizes or [8, 16]:
            got = one(n, ("rings", "all"))
            every = got["all"]
            both.append({"hosts": n, "rings_s": got["seconds"], "all_s": every["seconds"], "sweep": every["sweep"],
                         "measured": [got["measured"], every["measured"]],
                         "findings": [got["findings"], every["findings"]]})  # fmt: skip
            print(json.dumps(both[-1]), flush=True)
        measured({"netcheck_every_pair": both}, ratios=False)
        return
    out = []
    for n in sizes or [50, 100, 200]:
        out.append(one(n))
        print(json.dumps(out[-1]), flush=True)
    print(json.dumps({"netcheck_scale": out}))


if __name__ == "__main__":
    main(sys.argv[1:])
