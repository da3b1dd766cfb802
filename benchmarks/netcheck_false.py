"""False alarms and planted faults of the net check, with real processes (root for the namespaces).

    python benchmarks/netcheck_false.py [--every-pair] [HEALTHY [PLANTED]]     (default: 100 20)

HEALTHY runs on healthy hosts, half on 8 loopback addresses and half on 8 network-namespace
hosts on a bridge; a run is *false* when the net check names anyone (NET104/NET105). PLANTED runs
on the namespace hosts, cycling through a fault on one host or one link (delay h3 5 ms by
NFQUEUE, delay h2<->h3 5 ms, rate h6 100 Mbit/s by tbf, loss h5 2% by iptables), each *named*
when exactly the planted host or pair is named. Each run is what scan and preflight do
(tests/harness/netfab.py: a listener process per host, prober processes, validator/netcheck/
rounds and verdict). Run it while the machine is busy too: that is when false alarms came.
--every-pair: each run measures every pair of hosts too (`--net-check-pairs all`: the rings, then
round-robin rounds of the pairs off them). Prints the load average at the start and the end, one line
per failed run, and last one JSON object: {"pairs": "rings" | "all", "healthy_runs": n, "false_runs": f,
"planted": p, "named": k}.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts  # noqa: E402
from tests.harness.netfab import Fabric, named  # noqa: E402

FAULTS = [  # (what, plant, hosts that must be named: indexes)
    ("delay h3 5ms", lambda f: f.delay(2, 5.0), {2}),
    ("delay h2<->h3 5ms", lambda f: f.delay(1, 5.0, peer=2), {1, 2}),
    ("rate h6 100mbit", lambda f: f.rate(5, "100mbit"), {5}),
    ("loss h5 2%", lambda f: f.loss(4, 0.02), {4}),
]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str]) -> None:
    flag, given = counts(argv, __doc__, ("--every-pair",))
    pairs: Literal["rings", "all"] = "all" if flag else "rings"
    healthy, planted = (given + [100, 20][len(given) :])[:2]
    if os.geteuid() != 0:
        sys.stderr.write("netcheck_false.py: needs root (network namespaces, iptables, tc)\n")
        sys.exit(2)
    print(f"load average at start: {load()}", flush=True)
    t0, false, hit = time.monotonic(), 0, 0
    with Fabric.loopback(8, base=200) as fab:
        for i in range(healthy // 2):
            out = fab.check(pairs)
            if out.findings:
                false += 1
                print(
                    f"false (loopback run {i + 1}): {out.line}: {[f.message[:160] for f in out.findings]}", flush=True
                )
    with Fabric.netns(8, os.getpid() % 10000) as fab:
        for i in range(healthy - healthy // 2):
            out = fab.check(pairs)
            if out.findings:
                false += 1
                print(f"false (netns run {i + 1}): {out.line}: {[f.message[:160] for f in out.findings]}", flush=True)
        for i in range(planted):
            what, plant, want = FAULTS[i % len(FAULTS)]
            try:
                plant(fab)
                out = fab.check(pairs)
            finally:
                fab.clear()
            if named(out) == {fab.names[j] for j in want}:
                hit += 1
            else:
                print(f"not named exactly ({what}): {out.line}: {[f.message[:160] for f in out.findings]}", flush=True)
    print(f"load average at end: {load()} ({time.monotonic() - t0:.0f} s)", flush=True)
    print(json.dumps({"pairs": pairs, "healthy_runs": healthy, "false_runs": false, "planted": planted, "named": hit}))


if __name__ == "__main__":
    main(sys.argv[1:])
