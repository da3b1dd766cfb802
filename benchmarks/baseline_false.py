"""Baselines per hardware type: false alarms on healthy nodes and the planted slow node, with real
probe processes (root, cgroup v1 cpu).

    python benchmarks/baseline_false.py [HOSTS [HEALTHY]]     (default: 2 20)

HOSTS emulated hosts (tests/harness/netfab.py on loopback, each with its own cgroup v1 ``cpu``
group: tests/harness/nodefab.py; validator/probes/compute.py and memory.py as processes of the
system's python3, 3 windows of 0.15 s as the suite runs them). A baseline is recorded over one
healthy run (validator.baseline.measured: the median and MAD per hardware type and figure, as
`validator baseline record` writes them), then HEALTHY runs are judged against the baseline and
the peers (validator/probes/rounds.py, as `validator scan --probes --profile` judges them): a run
is false when it names anything. Last, one run with the last host held to 10% of one CPU by a CFS
quota: exact when it alone is named, by the baseline. Each host's group has the most CPU shares,
as if on a node of its own (without them, on this shared 2-core machine, 8 of 20 healthy runs of one
host were named while other suites raised the load from 4 to 20 after the baseline was recorded). With fewer than 3 hosts the peers cannot
judge: the baseline alone decides. Prints the load average at the start and the end, and last one
JSON object: {"hosts", "healthy_runs", "false_runs", "planted", "named", "exact", "against", ...}.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts, measured  # noqa: E402
from tests.harness.netfab import Fabric  # noqa: E402
from tests.harness.nodefab import Nodes, cgroup_v1_cpu, named  # noqa: E402
from validator.baseline import measured as recorded  # noqa: E402
from validator.probes import rounds  # noqa: E402
from validator.profiles import Baselines  # noqa: E402

SHARES = "262144"  # cgroup v1's most
NODE_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"


def judged(nodes: Nodes, baselines: Baselines) -> rounds.Probed:
    return asyncio.run(rounds.run(list(nodes.fab.names), nodes.probe_round, rounds.KINDS, baselines))


def main(argv: list[str]) -> None:
    given = counts(argv, __doc__)[1]
    hosts, healthy = (given + [2, 20][len(given) :])[:2]
    if os.geteuid() != 0 or not cgroup_v1_cpu():
        sys.stderr.write("baseline_false.py: needs root and cgroup v1 cpu (cgroups for the slow node)\n")
        sys.exit(2)
    if hosts > 64:
        sys.stderr.write(f"baseline_false.py: HOSTS must be 1 to 64, got {hosts}\n")
        sys.exit(2)
    t0 = time.monotonic()
    with Fabric.loopback(hosts, base=41) as fab, Nodes(fab, samples=3, window=0.15, python=NODE_PYTHON) as nodes:
        for g in nodes.groups:  # each host as a node of its own: other work here does not take its cores
            (g / "cpu.shares").write_text(SHARES)
        base, left = recorded(nodes.check().doc, time.strftime("%Y-%m-%d"))
        figures = {
            f"{kind} {key}": f.median for kinds in base.values() for kind, fs in kinds.items() for key, f in fs.items()
        }
        print(f"baseline over {hosts - len(left)} hosts: {figures}", flush=True)
        false = 0
        for i in range(healthy):
            got = sorted(named(judged(nodes, base)))
            false += bool(got)
            if got:
                print(f"healthy run {i + 1}: named {got}", flush=True)
        slow = fab.names[-1]
        nodes.cpu(hosts - 1, 10)
        try:
            outcome = judged(nodes, base)
        finally:
            nodes.clear()
        got = sorted(named(outcome))
        row = next(r for r in outcome.doc["nodes"] if r["host"] == slow)
        print(f"planted run: named {got}, against {row['against']}", flush=True)
    measured({"hosts": hosts, "healthy_runs": healthy, "false_runs": false, "planted": [slow], "named": got,
              "exact": got == [slow], "against": row["against"], "baseline": figures,
              "seconds": round(time.monotonic() - t0, 1)}, ratios=False)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
