"""What the name round (validator/preflight/peers.py) adds to a healthy preflight verdict.

    python benchmarks/peers_round.py [REPEAT]     (default 5; needs root: network namespaces)
    python benchmarks/peers_round.py --cpu N      (the coordinator's CPU for N nodes' answers)

Three namespace hosts, each with its own /etc/hosts listing all three, run `validator preflight`
together (node ranks 0-2), REPEAT times: the round's time as the coordinator's verdict line states it
(from sending the questions to the last answer), and the wall time of the whole run (mostly Python
start-up on this shared machine). With --cpu: N synthetic nodes, each answering
its sample (SAMPLE_MAX names, one resolving differently on every 50th node), through the coordinator's
validation and decisions, timed in this process.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.usage import counts
from tests.conftest import TAG, NetnsHosts, netns_up
from tests.preflight.test_peers import run_three


def main(repeat: int) -> dict[str, float]:
    subnet = f"10.{200 + TAG % 50}.{(TAG // 50 + 11) % 250}"
    rounds: list[float] = []
    walls: list[float] = []
    with netns_up(3, "netns", f"cv{TAG}b", subnet, NetnsHosts) as h:
        tmp = Path(tempfile.mkdtemp(prefix="cv-peers-bench-"))
        for n in range(repeat):
            errs: list[str] = []
            t0 = time.monotonic()
            report = run_three(h, tmp, f"r{n}-", {}, errs=errs)[0]
            walls.append(time.monotonic() - t0)
            assert report["summary"]["error"] == 0, report["findings"]
            m = re.search(r"names: 3 hosts resolved their peers in ([0-9.]+) s", errs[0])
            assert m, errs[0][-2000:]
            rounds.append(float(m.group(1)))
    return {"nodes": 3, "repeat": repeat, "round_s_median": statistics.median(rounds), "round_s_max": max(rounds),
            "verdict_wall_s_median": round(statistics.median(walls), 3)}  # fmt: skip


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
    flag, ns = counts(sys.argv[1:3], __doc__, ("--cpu",))
    if flag:
        print(json.dumps(cpu((ns or [12500])[0])))
    else:
        print(json.dumps(main((ns or [5])[0])))
