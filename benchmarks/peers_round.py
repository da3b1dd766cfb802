"""What the name round (validator/preflight/peers.py) adds to a healthy preflight verdict.

    python benchmarks/peers_round.py [REPEAT]     (default 5; needs root: network namespaces)
    python benchmarks/peers_round.py --cpu N      (the coordinator's CPU for N nodes' answers)

Three namespace hosts, each with its own /etc/hosts listing all three, run `validator preflight`
together (node ranks 0-2): the wall time until the last one exits, with the round and without it
(`--ignore NET201,NET202,NET203` skips it), alternating, median of REPEAT runs each. Python
start-up dominates both; the difference is the round. With --cpu: N synthetic nodes, each answering
its sample (SAMPLE_MAX names, one resolving differently on every 50th node), through the coordinator's
validation and decisions, timed in this process.
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


def cpu(n: int) -> dict[str, float]:
    import random

    from tests import factories as fx
    from validator.preflight import peers

    base = [fx.facts(f"n{i:05d}", node=i % 250, gpus=0) for i in range(250)]
    facts = [{**base[i % 250], "host": f"n{i:05d}", "hostname": f"n{i:05d}"} for i in range(n)]
    names = [f["hostname"] for f in facts]
    addr = {name: f"10.0.0.{i % 250 + 1}" for i, name in enumerate(names)}  # each node's own (fx.facts)
    rng = random.Random(1)
    answers = []
    for i in range(n):
        mine = peers.sample(names, i, rng)
        wrong = i % 50 == 7
        results = {m: {"addrs": ["10.9.9.9" if wrong and m != names[i] else addr[m]], "error": None} for m in mine}
        answers.append((names[i], {"type": "resolved", "results": results}, mine))
    t0 = time.process_time()
    views = {host: peers.parse_answer(msg, mine) for host, msg, mine in answers}
    t1 = time.process_time()
    found = peers.findings(facts, views, names[0])  # type: ignore[arg-type]
    t2 = time.process_time()
    return {"nodes": n, "parse_s": round(t1 - t0, 3), "decide_s": round(t2 - t1, 3), "findings": len(found),
            "us_per_node": round((t2 - t0) / n * 1e6, 1)}  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cpu"]:
        print(json.dumps(cpu(int(sys.argv[2]) if len(sys.argv) > 2 else 12500)))
    else:
        print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)))
