"""Scenarios over emulated pods, each run once for all five workloads at the same time (the
workloads use different ports, so their pods share the four network-namespace hosts without
meeting), and cached for the tests that read them."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import NetnsHosts
from tests.k8s.pods import Done, Running, publish_late, start, wait
from tests.k8s.render import FILES, Job, init_env, render

WORKLOADS = list(FILES)
# the variable that tells each workload's init container the size of the job
SIZE_VAR = {"pytorchjob-v1": "WORLD_SIZE", "trainjob-v2": "PET_NNODES", "jobset": "NNODES", "indexed-job": "NNODES",
            "leaderworkerset": "LWS_GROUP_SIZE"}  # fmt: skip
SERVICE = {"pytorchjob-v1": "bert-preflight", "trainjob-v2": "ft", "jobset": "pytorch", "indexed-job": "train",
           "leaderworkerset": "llm"}  # fmt: skip
IDENTITY = {w: "KUBEFLOW_JOB_NAME" if w == "pytorchjob-v1" else "VALIDATOR_JOB_ID" for w in WORKLOADS}
LATE_S = 10.0


class Scenarios:
    def __init__(self, hosts: NetnsHosts, tmp: Path) -> None:
        self.hosts, self.tmp = hosts, tmp
        self.jobs = {w: render(w) for w in WORKLOADS}
        self.cache: dict[str, dict[str, list[Done]]] = {}
        self.waiting_when_master_started: dict[str, bool] = {}

    def get(self, name: str) -> dict[str, list[Done]]:
        if name not in self.cache:
            self.cache[name] = getattr(self, name)()
        return self.cache[name]

    def _run(self, running: list[Running], limit: float = 90.0) -> dict[str, list[Done]]:
        out: dict[str, list[Done]] = {w: [] for w in WORKLOADS}
        for d in wait(running, limit):
            out[d.workload].append(d)
        return out

    def passing(self) -> dict[str, list[Done]]:
        return self._run([start(self.hosts, j, p, self.tmp, tag="pass", timeout=30) for j in self.jobs.values()
                          for p in j.pods])  # fmt: skip

    def late(self) -> dict[str, list[Done]]:
        """The master pod is created 10 s after the others: until then its name has no DNS record."""
        workers = [start(self.hosts, j, p, self.tmp, tag="late", timeout=40, absent=(0,))
                   for j in self.jobs.values() for p in j.pods[1:]]  # fmt: skip
        time.sleep(LATE_S)
        masters = []
        for w, job in self.jobs.items():
            self.waiting_when_master_started[w] = all(r.proc.poll() is None for r in workers if r.workload == w)
            publish_late(workers, job, list(self.hosts.addrs), job.pods[0])
            masters.append(start(self.hosts, job, job.pods[0], self.tmp, tag="late", timeout=40))
        return self._run(masters + workers)

    def wrong_size(self) -> dict[str, list[Done]]:
        """Pod 2 was told a different job size than the others (another template, a stale pod)."""
        running = []
        for w, job in self.jobs.items():
            for p in job.pods:
                env = None
                if p.index == 2:
                    value = int(init_env(p, self.hosts.addrs[2])[SIZE_VAR[w]])
                    env = {SIZE_VAR[w]: str(value + 1)}
                running.append(start(self.hosts, job, p, self.tmp, tag="size", timeout=30, env=env))
        return self._run(running)

    def unresolvable(self) -> dict[str, list[Done]]:
        """The Service does not publish not-ready pods: no pod resolves the master's name."""
        return self._run([start(self.hosts, j, p, self.tmp, tag="nodns", timeout=5, publish=False)
                          for j in self.jobs.values() for p in j.pods])  # fmt: skip

    def stranger(self) -> dict[str, list[Done]]:
        """Pods 0-2 of the job; pod 3 never comes; in its place a pod of another job calls in."""
        running = []
        for w, job in self.jobs.items():
            running += [start(self.hosts, job, p, self.tmp, tag="str", timeout=8, absent=(3,)) for p in job.pods[:3]]
            other = dataclasses.replace(job.pods[3], hostname="stranger")
            running.append(start(self.hosts, job, other, self.tmp, tag=f"str-{w}", timeout=4, absent=(3,),
                                 env={IDENTITY[w]: "another-job"}))  # fmt: skip
        return self._run(running)


@pytest.fixture(scope="module")
def scenarios(netns_hosts: NetnsHosts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenarios]:
    tmp = tmp_path_factory.mktemp("pods")
    tmp.chmod(0o755)
    yield Scenarios(netns_hosts, tmp)


def job_of(s: Scenarios, workload: str) -> Job:
    return s.jobs[workload]
