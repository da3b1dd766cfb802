"""An emulated Kubernetes cluster for `validator scan --k8s`: pods are processes in the
``netns_hosts`` network namespaces (own IP, hostname, mount namespace: tests/harness/pod-exec.sh),
listed and reached through the fake ``kubectl`` in this folder, which is put first on PATH. No API
server can run here, so kubectl itself is the one fake part (see tests/k8s/README.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import NetnsHosts, service_dir
from tests.k8s.pods import pod_etc
from tests.scan.conftest import scan_env

HERE = Path(__file__).resolve().parent
PATH = "/usr/bin:/bin"  # the pods' PATH: the system python3 (the agent needs the standard library only)
TRAIN = [f"train-{i}" for i in range(4)]
CASES = ("case-unreachable", "case-timeout", "case-nopython", "case-garbage", "case-ctrlc", "case-pending")
# pods that fail one way each; each carries the label of its case, as do train-0 and train-1
ODD = {
    "hang-0": "case-timeout",
    "nopython-0": "case-nopython",
    "garbage-0": "case-garbage",
    "gone-0": "case-unreachable",
}


@dataclass
class Cluster:
    dir: Path
    state: Path
    kubeconfig: Path
    hosts: NetnsHosts
    started: Path  # the hanging pod's python3 touches this before it hangs

    def env(self, **extra: str) -> dict[str, str]:
        """The scanner's environment: the fake kubectl first on PATH, the emulated kubeconfig."""
        path = f"{HERE}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return scan_env(**{"PATH": path, "KUBECONFIG": str(self.kubeconfig), "FAKE_KUBECTL_STATE": str(self.state),
                           **extra})  # fmt: skip


def _script(path: Path, body: str) -> str:
    path.mkdir()
    (path / "python3").write_text(f"#!/bin/sh\n{body}\n")
    (path / "python3").chmod(0o755)
    return f"{path}:{PATH}"


def _pod(name: str, labels: dict[str, str], phase: str = "Running", ip: str = "") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "trainer:1"}]},
            "status": {"phase": phase, "podIP": ip, "hostIP": "10.0.0.1"}}  # fmt: skip


@pytest.fixture(scope="session")
def k8s_cluster(netns_hosts: NetnsHosts) -> Iterator[Cluster]:
    d = service_dir("k8s-cluster")
    started = d / "hang-started"
    paths = {
        "hang-0": _script(d / "bin-hang", f"touch {started}\nexec sleep 300"),
        "garbage-0": _script(d / "bin-garbage", "echo 'Welcome to the cluster'\ncat >/dev/null"),
        "nopython-0": "/nonexistent",
    }
    pods, emulate = [], {}
    for i, name in enumerate(TRAIN):
        labels = {
            "job-name": "train",
            **({c: "" for c in CASES} if i < 2 else {}),
            **({"drift": "yes"} if i == 3 else {}),
        }
        pods.append(_pod(name, labels, ip=netns_hosts.addrs[i]))
        env = {"NCCL_IB_DISABLE": "1"} if i == 3 else {}  # one pod differs from its peers: ENV002
        etc = str(pod_etc(d / f"etc-{name}", f"127.0.0.1\tlocalhost\n{netns_hosts.addrs[i]}\t{name}\n"))  # kubelet's
        emulate[f"ml/{name}"] = {"netns": netns_hosts.names[i], "path": PATH, "env": env, "dir": str(d), "etc": etc}
    for i, (name, case) in enumerate(ODD.items()):
        netns = netns_hosts.names[i % 4] if name != "gone-0" else "cv-no-such-netns"
        pods.append(_pod(name, {case: ""}, ip=netns_hosts.addrs[i % 4]))
        emulate[f"ml/{name}"] = {"netns": netns, "path": paths.get(name, PATH), "dir": str(d)}
    pods.append(_pod("pending-0", {"case-pending": ""}, phase="Pending"))
    state = d / "cluster.json"
    state.write_text(json.dumps({"contexts": {"emu": {"pods": pods}, "other": {"pods": []}}, "emulate": emulate}))
    kubeconfig = d / "kubeconfig.json"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "emu",
        "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "u", "namespace": "ml"}},
                     {"name": "other", "context": {"cluster": "other", "user": "u"}}],
        "clusters": [{"name": "emu", "cluster": {"server": "https://127.0.0.1:1"}},
                     {"name": "other", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "not-used"}}],
    }))  # fmt: skip
    try:
        yield Cluster(d, state, kubeconfig, netns_hosts, started)
    finally:
        import shutil

        shutil.rmtree(d, ignore_errors=True)
