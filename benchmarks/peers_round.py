"""What the name round (validator/preflight/peers.py) adds to a healthy preflight verdict.

    python benchmarks/peers_round.py [REPEAT]     (default 5; needs root: network namespaces)

Three namespace hosts, each with its own /etc/hosts listing all three, run `validator preflight`
together (node ranks 0-2): the wall time until the last one exits, with the round and without it
(`--ignore NET201,NET202,NET203` skips it), alternating, median of REPEAT runs each. Python
start-up dominates both; the difference is the round.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import TAG, NetnsHosts, netns_up
from tests.preflight.test_peers import run_three


def main(repeat: int) -> dict[str, float]:
    subnet = f"10.{200 + TAG % 50}.{(TAG // 50 + 11) % 250}"
    times: dict[str, list[float]] = {"with": [], "without": []}
    with netns_up(3, "netns", f"cv{TAG}b", subnet, NetnsHosts) as h:
        tmp = Path(tempfile.mkdtemp(prefix="cv-peers-bench-"))
        for n in range(repeat):
            for mode, args in (("with", ()), ("without", ("--ignore", "NET201,NET202,NET203"))):
                t0 = time.monotonic()
                report = run_three(h, tmp, f"{mode}{n}-", {}, *args)[0]
                times[mode].append(time.monotonic() - t0)
                assert report["summary"]["error"] == 0, report["findings"]
    with_s, without_s = statistics.median(times["with"]), statistics.median(times["without"])
    return {"nodes": 3, "repeat": repeat, "with_round_s": round(with_s, 3), "without_round_s": round(without_s, 3),
            "round_ms": round((with_s - without_s) * 1000, 1)}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)))
