"""Find the slow node and the bad link among N emulated hosts, with real processes (root).

    python benchmarks/isolate.py [HOSTS [HEALTHY]]     (default: 256 2)

HOSTS hosts, each a network namespace on one bridge (tests/harness/netfab.py's wiring on a /16);
each host runs a real net-check listener (validator/netcheck/probe.py) and its own cgroup v1
``cpu`` group for the node probes (tests/harness/nodefab.py: validator/probes/compute.py and
memory.py as python3 processes, at most one per core at once, each as if on a node of its own).
Planted: a slow node (host N/2 held to 20% of one CPU by a CFS quota, in 10 ms periods so that the
probes' short windows see it) and a bad link (h10 <-> h11, a ring-1 pair: every packet h10
receives from h11 waits 5 ms, NFQUEUE and tests/harness/nfdelay.py). One planted run of the
probes and the net check (what `validator scan --probes --net-check` runs, the same rounds and
verdicts), then HEALTHY runs with nothing planted (false when anything is named). Probe windows
are shortened (3 samples of 20 ms, 4 MiB copies) to fit the time; the scan's defaults are 5 x
0.25 s, 64 MiB. Prints the load average at the start and the end, and last one JSON object:
{"hosts", "planted", "named", "exact", "rounds", "seconds", "healthy_runs", "false_runs", ...}.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts, measured  # noqa: E402
from tests.harness.netfab import Fabric, sh  # noqa: E402
from tests.harness.nodefab import Nodes, cgroup_v1_cpu  # noqa: E402
from validator.model import Finding  # noqa: E402
from validator.netcheck.ring import Plans, Results  # noqa: E402
from validator.probes import rounds as proberounds  # noqa: E402


class Hosts(Fabric):
    """N hosts, each a network namespace on one bridge (netfab's wiring, on a /16 so that 256 fit)."""

    def __init__(self, n: int, tag: int) -> None:
        super().__init__([f"10.{100 + tag % 50}.{i // 250}.{1 + i % 250}" for i in range(n)], f"iso{tag}")
        self.rounds = 0

    def _wire(self) -> None:
        sw = f"{self.prefix}sw"
        sh("ip", "netns", "add", sw)
        cmds = ["link add br0 type bridge", "link set br0 up"]
        for i, name in enumerate(self.names):
            sh("ip", "netns", "add", name)
            cmds += [f"link add p{i} type veth peer name eth0 netns {name}", f"link set p{i} master br0 up"]
        subprocess.run(
            ["ip", "-n", sw, "-batch", "-"], input="\n".join(cmds) + "\n", text=True, check=True, timeout=300
        )
        for i, name in enumerate(self.names):
            for cmd in (f"addr add {self.addrs[i]}/16 dev eth0", "link set eth0 up", "link set lo up"):
                sh("ip", "-n", name, *cmd.split())

    async def _probe(self, plans: Plans) -> Results:
        self.rounds += 1
        return await super()._probe(plans)


def names(findings: list[Finding]) -> list[str]:
    """Hosts named as slow nodes, and pairs named as bad links ("a<->b")."""
    out = {h for f in findings if f.code in ("PRB001", "PRB002", "NET105") for h in f.hosts}
    out |= {"<->".join(sorted(f.hosts)) for f in findings if f.code == "NET104"}
    out |= {f"{f.code}:{','.join(f.hosts)}" for f in findings if f.code in ("NET101", "NET102", "NET103", "PRB003")}
    return sorted(out)


def one_run(fab: Hosts, nodes: Nodes) -> tuple[list[str], int, float, dict[str, float]]:
    """(named, rounds, seconds, seconds per part): the probes, then the net check."""
    fab.rounds = 0
    t0 = time.monotonic()
    probed = asyncio.run(proberounds.run(list(fab.names), nodes.probe_round))
    t1 = time.monotonic()
    net = fab.check()
    t2 = time.monotonic()
    parts = {"probes_s": round(t1 - t0, 1), "net_check_s": round(t2 - t1, 1),
             "probe_rounds": probed.doc["rounds"], "net_rounds": fab.rounds}  # fmt: skip
    return names(probed.findings + net.findings), probed.doc["rounds"] + fab.rounds, t2 - t0, parts


def main(argv: list[str]) -> None:
    given = counts(argv, __doc__)[1]
    hosts, healthy = (given + [256, 2][len(given) :])[:2]
    if os.geteuid() != 0 or not cgroup_v1_cpu():
        sys.stderr.write("isolate.py: needs root and cgroup v1 cpu (network namespace, iptables, cgroups)\n")
        sys.exit(2)
    if not 12 <= hosts <= 1000:
        sys.stderr.write(f"isolate.py: HOSTS must be 12 to 1000 (the bad link is h10 <-> h11), got {hosts}\n")
        sys.exit(2)
    t0 = time.monotonic()
    with Hosts(hosts, os.getpid() % 10000) as fab, Nodes(fab, samples=3, window=0.02, mib=4) as nodes:
        ready = time.monotonic() - t0
        slow = hosts // 2
        planted = sorted([fab.names[slow], "<->".join(sorted((fab.names[9], fab.names[10])))])
        nodes.cpu(slow, 20, period_us=10_000)
        fab.delay(9, 5.0, peer=10)
        named, rounds, seconds, parts = one_run(fab, nodes)
        print(f"planted run: named {named[:20]}, {rounds} rounds, {seconds:.1f} s, {parts}", flush=True)
        nodes.clear()
        fab.clear()
        false = 0
        for i in range(healthy):
            got, r, s, p = one_run(fab, nodes)
            print(f"healthy run {i + 1}: named {got[:20]}, {r} rounds, {s:.1f} s, {p}", flush=True)
            false += bool(got)
    measured({"hosts": hosts, "planted": planted, "named": named, "exact": named == planted, "rounds": rounds,
              "seconds": round(seconds, 1), "healthy_runs": healthy, "false_runs": false,
              "setup_s": round(ready, 1), "probe_processes": nodes.runs, **parts}, ratios=False)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
