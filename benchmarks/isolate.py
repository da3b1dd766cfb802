"""Find the slow nodes and the bad link among N emulated hosts, with real processes (root).

    python benchmarks/isolate.py [HOSTS [HEALTHY]]     (default: 256 2)

HOSTS hosts, each a network namespace on one bridge (tests/harness/netfab.py's wiring on a /16);
each host runs a real net-check listener and a real prober (validator/netcheck/probe.py; the
prober a process that stays up and probes the targets it is given, as a preflight participant
does) and has its own cgroup v1 ``cpu`` group for the node probes (tests/harness/nodefab.py:
validator/probes/compute.py and memory.py as processes of the system's python3, at most one per
core at once, each as if on a node of its own). The net check's links are measured the same way:
at most one link per core at once, each as if its two nodes were machines of their own (256 hosts
on 2 cores measuring 512 links at once measure only the cores: round trips of 46 ms, a third of
the connections timed out). The planner, the rounds and the verdicts are the scan's.

Planted: a slow node (host N/2 held to 10% of one CPU by a CFS quota, 1 ms in 10 ms periods so
that the probes' short windows see it, as tests/integration/test_probes_nodes.py plants it; the
other engineers' load on this machine often leaves every host 15-25% of a core, so the 20% cap
of earlier runs did not bind), a node slow on the network (host N/4: every packet it receives
waits 5 ms, NFQUEUE and tests/harness/nfdelay.py: a bad NIC or port) and a bad link (h10 <-> h11,
a ring-1 pair: every packet h10 receives from h11 waits 5 ms). One planted run of the probes and
the net check (what `validator scan --probes --net-check` runs; ``named_by`` says which code named
what), then HEALTHY runs with nothing planted (false when anything is named). Probe windows are
shortened (3 samples of 10 ms, 4 MiB copies) to fit the time; the scan's defaults are 5 x 0.25 s,
64 MiB. Prints the load average at the start and the end, and last one JSON object: {"hosts",
"planted", "named", "exact", "rounds", "seconds", "healthy_runs", "false_runs", "round_bound"
(2k log2 n + 2 for the k planted), the seconds and rounds of each part, ...}.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts, measured  # noqa: E402
from tests.harness.netfab import Fabric, sh  # noqa: E402
from tests.harness.nodefab import Nodes, cgroup_v1_cpu  # noqa: E402
from validator.model import Finding  # noqa: E402
from validator.netcheck import probe  # noqa: E402
from validator.netcheck.pairing import budget  # noqa: E402
from validator.netcheck.ring import Plans, Results  # noqa: E402
from validator.probes import rounds as proberounds  # noqa: E402

# a prober that stays up: one JSON list of targets a line in, one JSON list of rows a line out
PROBER = """import json, sys
sys.path.insert(0, sys.argv[1])
import probe
for line in sys.stdin:
    print(json.dumps(probe.probe(json.loads(line), float(sys.argv[2]))), flush=True)
"""
# the node probes' interpreter: a node's python3, not this venv's (torch: a second per import) nor a
# version manager's shim (a shell script: 0.1 s per start)
NODE_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"


class Hosts(Fabric):
    """N hosts, each a network namespace on one bridge (netfab's wiring, on a /16 so that 256 fit),
    with a listener and a prober each; a round measures at most ``width`` links at once."""

    def __init__(self, n: int, tag: int, width: int = 0) -> None:
        super().__init__([f"10.{100 + tag % 50}.{i // 250}.{1 + i % 250}" for i in range(n)], f"iso{tag}")
        self.rounds = 0
        self.width = width or os.cpu_count() or 1
        self.probers: dict[str, tuple[subprocess.Popen[str], threading.Lock]] = {}

    def __enter__(self) -> Hosts:
        super().__enter__()
        try:
            where = str(Path(probe.__file__).resolve().parent)
            for i, name in enumerate(self.names):
                cmd = self.on(i, sys.executable, "-c", PROBER, where, str(probe.TIMEOUT_S))
                p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                self.probers[name] = (p, threading.Lock())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for p, _ in self.probers.values():
            if p.stdin:
                p.stdin.close()
        for p, _ in self.probers.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.probers.clear()
        super().__exit__(*exc)

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
        macs = []
        for i, name in enumerate(self.names):
            for cmd in (f"addr add {self.addrs[i]}/16 dev eth0", "link set eth0 up", "link set lo up"):
                sh("ip", "-n", name, *cmd.split())
            macs.append(_mac(name))
        # Every host knows every other's MAC address: the kernel's ARP table is one for all namespaces,
        # and its garbage collector refuses new entries past gc_thresh3 (1024 by default), while 256
        # hosts learn about 1,800 (each ring pair both ways, 255 to the first host): "neighbor table
        # overflow", and connections from the hosts that came last time out (NET101). Permanent
        # entries do not count towards that limit; they go with the namespaces.
        for i, name in enumerate(self.names):
            lines = [
                f"neigh replace {a} lladdr {m} dev eth0 nud permanent"
                for j, (a, m) in enumerate(zip(self.addrs, macs, strict=True))
                if j != i
            ]
            subprocess.run(
                ["ip", "-n", name, "-batch", "-"], input="\n".join(lines) + "\n", text=True, check=True, timeout=60
            )

    def _one(self, src: str, tgt: dict[str, Any]) -> dict[str, Any]:
        p, lock = self.probers[src]
        with lock:
            assert p.stdin and p.stdout
            p.stdin.write(json.dumps([tgt]) + "\n")
            p.stdin.flush()
            line = p.stdout.readline()
        got = json.loads(line) if line.strip() else []
        return got[0] if got else {"label": tgt["label"], "ok": False, "error": "the prober stopped"}

    async def _probe(self, plans: Plans) -> Results:
        """Every target of the round, at most ``width`` at once (each link as if on machines of its
        own), each by its prober; the rows per prober, in order."""
        self.rounds += 1
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(self.width) as pool:
            jobs = {src: [loop.run_in_executor(pool, self._one, src, t) for t in ts] for src, ts in plans.items() if ts}
            return {src: list(await asyncio.gather(*fs)) for src, fs in jobs.items()}


def _mac(ns: str) -> str:
    out = subprocess.run(["ip", "-n", ns, "-j", "link", "show", "eth0"], capture_output=True, text=True, check=True)
    return str(json.loads(out.stdout)[0]["address"])


def names(findings: list[Finding]) -> list[str]:
    """Hosts named as slow nodes, and pairs named as bad links ("a<->b")."""
    out = {h for f in findings if f.code in ("PRB001", "PRB002", "NET105") for h in f.hosts}
    out |= {"<->".join(sorted(f.hosts)) for f in findings if f.code == "NET104"}
    out |= {f"{f.code}:{','.join(f.hosts)}" for f in findings if f.code in ("NET101", "NET102", "NET103", "PRB003")}
    return sorted(out)


def by_code(findings: list[Finding]) -> dict[str, list[str]]:
    return {c: names([f for f in findings if f.code == c]) for c in sorted({f.code for f in findings})}


def one_run(fab: Hosts, nodes: Nodes) -> tuple[list[str], int, float, dict[str, Any]]:
    """(named, rounds, seconds, seconds per part): the probes, then the net check."""
    fab.rounds = 0
    t0 = time.monotonic()
    probed = asyncio.run(proberounds.run(list(fab.names), nodes.probe_round))
    t1 = time.monotonic()
    net = fab.check()
    t2 = time.monotonic()
    parts = {"probes_s": round(t1 - t0, 1), "net_check_s": round(t2 - t1, 1), "probe_rounds": probed.doc["rounds"],
             "net_rounds": fab.rounds, "net_suspects": net.doc["suspects"], "net_line": net.line,
             "named_by": by_code(probed.findings + net.findings),
             "probe_stats": [{k: st[k] for k in ("kind", "median", "mad", "suspects")} for st in probed.doc["stats"]],
             "probe_figures": {r["host"]: [r["compute"], r["memory"]] for r in probed.doc["nodes"]}}  # fmt: skip
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
    with (
        Hosts(hosts, os.getpid() % 10000) as fab,
        Nodes(fab, samples=3, window=0.01, mib=4, python=NODE_PYTHON) as nodes,
    ):
        ready = time.monotonic() - t0
        slow, nic = hosts // 2, hosts // 4
        planted = sorted([fab.names[slow], fab.names[nic], "<->".join(sorted((fab.names[9], fab.names[10])))])
        nodes.cpu(slow, 10, period_us=10_000)
        fab.delay(nic, 5.0)
        fab.delay(9, 5.0, peer=10)
        named, rounds, seconds, parts = one_run(fab, nodes)
        net_planted = sorted([fab.names[nic], "<->".join(sorted((fab.names[9], fab.names[10])))])
        net_named = sorted(n for c in ("NET104", "NET105") for n in parts["named_by"].get(c, []))
        figures = parts.pop("probe_figures")
        parts["slow_node_figures"] = figures.get(fab.names[slow])
        print(f"planted run: named {named[:20]}, {rounds} rounds, {seconds:.1f} s, {parts}", flush=True)
        nodes.clear()
        fab.clear()
        false = 0
        for i in range(healthy):
            got, r, s, p = one_run(fab, nodes)
            p.pop("probe_figures")
            print(f"healthy run {i + 1}: named {got[:20]}, {r} rounds, {s:.1f} s, {p}", flush=True)
            false += bool(got)
    measured({"hosts": hosts, "planted": planted, "named": named, "exact": named == planted, "rounds": rounds,
              "seconds": round(seconds, 1), "healthy_runs": healthy, "false_runs": false,
              "round_bound": budget(hosts, len(planted)), "exact_net_check": net_named == net_planted,
              "setup_s": round(ready, 1), "probe_processes": nodes.runs, **parts}, ratios=False)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
