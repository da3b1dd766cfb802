"""Emulated nodes for the node probes (validator/probes/): each host of a ``netfab.Fabric`` (a
network namespace, or a loopback address) gets its own cgroup v1 ``cpu`` group, and each probe
runs there as a real ``python3`` process (validator/probes/compute.py, memory.py), judged by the
rounds and the verdict the scan uses:

    with Fabric.netns(8, tag) as fab, Nodes(fab) as nodes:
        nodes.cpu(2, 5)          # host 3 gets 5% of one CPU (cfs_quota_us per cfs_period_us)
        outcome = nodes.check()  # validator.probes.rounds.run over every host

The slow node is planted as shared/harness/fabric-lab plants it (``fault.sh cpu``): a CFS quota
on the host's cgroup. This machine mounts cgroup v1 (``/sys/fs/cgroup/cpu``); a process joins the
group by writing its pid to ``cgroup.procs`` before it execs (``ip netns exec`` remounts /sys, so
the join comes first). Real nodes run their probes on their own hardware; here every host shares
this machine's cores, so a round runs at most ``width`` probes at once (the cores: each as if on
a node of its own). The cgroups are removed on exit, after every process started is waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from types import TracebackType

from tests.harness.netfab import Fabric
from validator.probes import compute, memory, rounds

CPU = Path("/sys/fs/cgroup/cpu")
PROGRAM = {"compute": str(Path(compute.__file__).resolve()), "memory": str(Path(memory.__file__).resolve())}
PERIOD_US = 100_000


def cgroup_v1_cpu() -> bool:
    return (CPU / "cpu.cfs_quota_us").exists()


class Nodes:
    def __init__(
        self, fab: Fabric, samples: int = 3, window: float = 0.2, mib: int = 16, width: int = 0, python: str = "python3"
    ) -> None:
        self.fab, self.python = fab, python  # the nodes' interpreter: the scan's default, stdlib only
        self.args = {"compute": [str(samples), str(window)], "memory": [str(samples), str(window), str(mib)]}
        self.width = width or os.cpu_count() or 1
        self.groups = [CPU / f"cvprobe-{os.getpid()}-{name}" for name in fab.names]
        self.runs = 0  # probe processes started

    def __enter__(self) -> Nodes:
        for g in self.groups:
            g.mkdir(exist_ok=True)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        for g in self.groups:
            with contextlib.suppress(OSError):
                g.rmdir()

    def cpu(self, i: int, percent: float, period_us: int = PERIOD_US) -> None:
        """Host i gets ``percent`` of one CPU (fault.sh cpu), in CFS periods of ``period_us``."""
        (self.groups[i] / "cpu.cfs_period_us").write_text(str(period_us))
        (self.groups[i] / "cpu.cfs_quota_us").write_text(str(int(period_us * percent / 100)))

    def clear(self) -> None:
        for g in self.groups:
            (g / "cpu.cfs_quota_us").write_text("-1")

    async def _one(self, gate: asyncio.Semaphore, kind: rounds.Kind, name: str) -> tuple[str, dict[str, object] | str]:
        i = self.fab.names.index(name)
        join = f'echo $$ > {self.groups[i]}/cgroup.procs && exec "$@"'
        argv = ["sh", "-c", join, "sh", *self.fab.on(i, self.python, PROGRAM[kind], *self.args[kind])]
        async with gate:
            self.runs += 1
            p = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL
            )
            try:
                out, _ = await asyncio.wait_for(p.communicate(), 120)
            except TimeoutError:
                p.kill()
                await p.wait()
                return name, "the probe did not finish within 120 s"
        lines = out.decode().strip().splitlines()
        try:
            got = json.loads(lines[-1]) if lines else None
        except ValueError:
            got = None
        return name, got if isinstance(got, dict) else f"the probe printed no answer (exit {p.returncode})"

    async def probe_round(self, kind: rounds.Kind, names: list[str]) -> rounds.Answers:
        gate = asyncio.Semaphore(self.width)
        return dict(await asyncio.gather(*(self._one(gate, kind, n) for n in names)))

    def check(self, kinds: tuple[rounds.Kind, ...] = rounds.KINDS) -> rounds.Probed:
        return asyncio.run(rounds.run(list(self.fab.names), self.probe_round, kinds))


def named(outcome: rounds.Probed) -> set[str]:
    """The hosts PRB001/PRB002 name."""
    return {h for f in outcome.findings if f.code in ("PRB001", "PRB002") for h in f.hosts}
