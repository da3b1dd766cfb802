"""Small fact factories for check tests (STYLE.md "tests in three rings").

Every document they build is validated by ``validate_facts``, so a check test can only ever feed
the checks facts a real probe could produce. Defaults describe a healthy 8 x H100 node on
``eth0``; pass nested overrides (dicts merge, everything else replaces).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import pytest

from validator.checks import run_checks
from validator.facts.schema import validate_facts
from validator.model import Facts, Finding, GpuDevice, Interface, MasterFacts, Selection
from validator.profiles import Profile

H100 = "NVIDIA H100 80GB HBM3"
DRIVER = "550.54.15"


def fires(*codes: str) -> pytest.MarkDecorator:
    """Mark a test that makes ``codes`` fire; tests/checks/test_check_coverage.py requires one per
    code in CHECKS."""
    return pytest.mark.fires(*codes)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) and v else copy.deepcopy(v)
    return out


def iface(
    name: str,
    *addrs: str,
    up: bool = True,
    running: bool = True,
    kind: str | None = None,
    mtu: int | None = 1500,
    virtual: bool = False,
) -> Interface:
    return {
        "name": name,
        "addrs": list(addrs),
        "up": up,
        "running": running,
        "loopback": name == "lo",
        "virtual": virtual,
        "kind": kind,
        "mtu": 65536 if name == "lo" else mtu,
        "speed_mbps": None,
    }


LO = iface("lo", "127.0.0.1/8", "::1/128")


def selection(
    ifaces: list[str], addr: str | None, rule: str = "default: not docker/lo/virbr", error: str | None = None
) -> Selection:
    return {"ifaces": ifaces, "addr": addr, "rule": rule, "error": error}


def gpu(index: int, node: int = 0, name: str = H100) -> GpuDevice:
    return {
        "index": index,
        "uuid": f"GPU-{node:08x}-{index:04x}-4000-8000-000000000000",
        "name": name,
        "pci_bus_id": f"0000:{0x18 + index * 0x10:02x}:00.0",
        "memory_mib": 81559,
        "mig_uuids": [],
    }


def master(
    addr: str = "node001",
    resolved: Iterable[str] = ("10.0.0.1",),
    *,
    local: bool = False,
    port: int | None = 29500,
    error: str | None = None,
    port_free: bool | None = None,
    owner: str | None = None,
) -> MasterFacts:
    res = list(resolved)
    loop = bool(res) and all(a.startswith("127.") or a == "::1" for a in res)
    return {
        "addr": addr,
        "resolved": res,
        "error": error if res else error or "[Errno -2] Name or service not known",
        "loopback": loop,
        "local": local or loop,
        "route_dev": "lo" if loop else "eth0",
        "route_src": "127.0.0.1" if loop else "10.0.0.1",
        "port": port,
        "port_free": port_free,
        "port_owner": owner,
    }


LAUNCH_NONE: dict[str, Any] = {
    "launcher": "env",
    "mode": "rank",
    "rank": None,
    "local_rank": None,
    "world_size": None,
    "local_world_size": None,
    "node_rank": None,
    "nnodes": None,
    "master_addr": None,
    "master_port": None,
    "rdzv_backend": None,
    "rdzv_endpoint": None,
    "rdzv_id": None,
    "job_id": None,
    "nodelist": None,
    "sources": {},
    "invalid": {},
    "command": None,
    "layout": None,
}


def facts(host: str = "node001", *, node: int = 0, gpus: int = 8, **over: Any) -> Facts:
    """One participant's facts on ``host`` (the ``node``-th node: its address is 10.0.0.node+1)."""
    ip = f"10.0.0.{node + 1}"
    doc: dict[str, Any] = {
        "schema": 1,
        "kind": "facts",
        "validator": "0.1.0",
        "host": host,
        "hostname": host,
        "pid": 1000 + node,
        "probe_ms": 12.5,
        "errors": {},
        "launch": LAUNCH_NONE,
        "gpus": {
            "source": "nvml" if gpus else "none",
            "driver": DRIVER if gpus else None,
            "cuda": "12.4" if gpus else None,
            "devices": [gpu(i, node) for i in range(gpus)],
            "visible": None,
            "visible_error": None,
            "health": None,
        },
        "network": {
            "interfaces": [LO, iface("eth0", f"{ip}/24", "fe80::1/64")],
            "nccl": selection(["eth0"], f"{ip}/24"),
            "gloo": selection(["eth0"], ip, f"hostname {host} -> {ip}"),
            "master": None,
        },
        "software": {
            "python": "3.11.7",
            "torch": "2.5.1+cu124",
            "torch_cuda": "12.4",
            "nccl": "2.21.5" if gpus else None,
            "nccl_path": "/usr/lib/libnccl.so.2" if gpus else None,
            "deepspeed": None,
            "transformers": None,
        },
        "system": {
            "shm_bytes": 64 << 30,
            "memlock_soft": -1,
            "memlock_hard": -1,
            "nofile_soft": 1048576,
            "nofile_hard": 1048576,
            "somaxconn": 4096,
            "ib_devices": [],
            "time": 1796036778.0,
        },
        "env": {},
    }
    return validate_facts(merge(doc, over), host)


def rank_job(
    nodes: int = 2,
    per_node: int = 8,
    *,
    gpus: int = 8,
    launcher: str = "torchrun",
    env: dict[str, str] | None = None,
    host: str = "node{:03d}",
) -> list[Facts]:
    """A healthy job seen from every rank (torchrun workers, MASTER_ADDR=node001 -> 10.0.0.1)."""
    ws = nodes * per_node
    out = []
    for n in range(nodes):
        for lr in range(per_node):
            rank = n * per_node + lr
            worker_env = {
                "RANK": str(rank),
                "LOCAL_RANK": str(lr),
                "WORLD_SIZE": str(ws),
                "LOCAL_WORLD_SIZE": str(per_node),
                "GROUP_RANK": str(n),
                "MASTER_ADDR": "node001",
                "MASTER_PORT": "29500",
                "OMP_NUM_THREADS": "1",
                **(env or {}),
            }
            launch = {
                "launcher": launcher,
                "rank": rank,
                "local_rank": lr,
                "world_size": ws,
                "local_world_size": per_node,
                "node_rank": n,
                "nnodes": nodes,
                "master_addr": "node001",
                "master_port": 29500,
                "sources": {"rank": "env:RANK", "world_size": "env:WORLD_SIZE", "node_rank": "env:GROUP_RANK"},
            }
            network = {"master": master(local=n == 0)}
            f = facts(host.format(n + 1), node=n, gpus=gpus, launch=launch, env=worker_env, network=network)
            f["pid"] = 10000 + rank
            out.append(f)
    return out


def node_job(nodes: int = 2, nproc: int = 8, *, gpus: int = 8, backend: str = "static") -> list[Facts]:
    """A healthy job seen from one torchrun wrapper per node (`validator probe -- torchrun ...`)."""
    out = []
    for n in range(nodes):
        argv = ["torchrun", f"--nnodes={nodes}", f"--nproc-per-node={nproc}", f"--node-rank={n}"]
        argv += ["--master-addr=node001", "--master-port=29500", "train.py"]
        options = {"nnodes": str(nodes), "nproc_per_node": str(nproc), "node_rank": str(n)}
        options |= {"master_addr": "node001", "master_port": "29500"}
        launch = {
            "launcher": "torchrun",
            "mode": "node",
            "world_size": nodes * nproc,
            "local_world_size": nproc,
            "node_rank": n,
            "nnodes": nodes,
            "master_addr": "node001",
            "master_port": 29500,
            "rdzv_backend": backend,
            "rdzv_id": "none",
            "sources": {"world_size": "derived: nnodes x nproc-per-node", "nnodes": "torchrun:--nnodes"},
            "command": {"tool": "torchrun", "argv": argv, "options": options, "script": "train.py", "errors": []},
        }
        out.append(
            facts(f"node{n + 1:03d}", node=n, gpus=gpus, launch=launch, network={"master": master(local=n == 0)})
        )
    return out


def cpu_job(nodes: int = 2, per_node: int = 2) -> list[Facts]:
    """A healthy CPU (gloo) job: no GPUs, no NCCL settings."""
    return rank_job(nodes, per_node, gpus=0)


def tweak(job: list[Facts], index: int, **over: Any) -> list[Facts]:
    """The job with participant ``index`` changed (nested overrides, re-validated)."""
    out = list(job)
    out[index] = validate_facts(merge(dict(job[index]), over), job[index]["host"])
    return out


def check(job: list[Facts], code: str, profile: Profile | None = None) -> list[Finding]:
    """Findings of one check code."""
    return [f for f in run_checks(job, profile, [code]) if f.code == code]


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, [f"{f.code} {f.message}" for f in findings]
    return findings[0]


def captured_network(
    host: str, env: dict[str, str] | None = None, nccl: str | None = "2.21.5", hostname_addrs: Iterable[str] = ()
) -> dict[str, Any]:
    """NetworkFacts parsed from a real capture under tests/fixtures/network/<host>/ (see capture.sh)."""
    import json
    from pathlib import Path

    from validator.agent.probe import _slim
    from validator.facts.network import gloo_select, nccl_select, parse_interfaces

    d = Path(__file__).parent / "fixtures" / "network" / host
    ip = [_slim(link) for link in json.loads((d / "ip-addr.json").read_text())]
    interfaces = parse_interfaces(ip, json.loads((d / "sysfs.json").read_text()))
    env = env or {}
    return {
        "interfaces": interfaces,
        "nccl": nccl_select(interfaces, env, nccl),
        "gloo": gloo_select(interfaces, env, host, list(hostname_addrs)),
    }
