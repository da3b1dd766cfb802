"""Emulated pods: each one a real process in a network namespace host (its own IP), with its own
UTS namespace (hostname = the pod's hostname) and mount namespace (its own /etc/hosts, written
the way the kubelet and cluster DNS would fill it, and a resolv.conf pointing at nothing), the
init container's env as rendered from the example manifest, and the manifest's own init
container command. See tests/k8s/README.md for what this does not exercise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, NetnsHosts
from tests.k8s.render import Job, Pod, init_env, kubelet_hosts, published

BIN = str(Path(sys.executable).parent)
# The pod's own mount namespace, where its /etc is a directory of its own: hosts and resolv.conf
# are real files there, everything else links to the machine's /etc (bind-mounted at /etc/.host).
# Mounting over the file /etc/hosts itself would not do: another test session's `sed -i
# /etc/hosts` (netns-hosts-down.sh) renames over it, and the kernel then drops that mount here.
SCRIPT = (
    'mount --make-rprivate / && hostname "$0" && mount --bind /etc "$1/.host" && mount --rbind "$1" /etc && '
    'shift && exec "$@"'
)
NO_DNS = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"  # nothing listens: lookups fail at once


def pod_etc(path: Path, hosts: str) -> Path:
    """The pod's /etc: its own hosts and resolv.conf, links to the machine's /etc for the rest."""
    path.mkdir()
    (path / ".host").mkdir()
    for name in os.listdir("/etc"):
        if name not in ("hosts", "resolv.conf"):
            (path / name).symlink_to(f"/etc/.host/{name}")
    (path / "hosts").write_text(hosts)
    (path / "resolv.conf").write_text(NO_DNS)
    path.chmod(0o755)
    return path


@dataclass
class Running:
    workload: str
    pod: Pod
    proc: subprocess.Popen[str]
    report: Path
    message: Path
    hosts: Path
    started: float


@dataclass
class Done:
    workload: str
    pod: Pod
    rc: int
    out: str
    err: str
    report: dict[str, Any] | None  # --output
    stdout: dict[str, Any] | None  # --format json
    message: str | None  # --termination-log


def hosts_text(job: Job, pod: Pod, ip: str, ips: list[str], publish: bool | None, absent: set[str]) -> str:
    """The pod's /etc/hosts: the kubelet's lines, then what cluster DNS answers (no pod in ``absent``)."""
    dns = {n: a for n, a in published(job, ips, publish).items() if a not in absent}
    return kubelet_hosts(pod, ip) + "".join(f"{a}\t{name}\n" for name, a in dns.items())


def start(
    hosts: NetnsHosts,
    job: Job,
    pod: Pod,
    tmp: Path,
    *,
    tag: str,
    timeout: float,
    env: dict[str, str] | None = None,
    publish: bool | None = None,
    slot: int | None = None,
    absent: tuple[int, ...] = (),
) -> Running:
    """Start ``pod``'s init container in netns host ``slot`` (default: its index); pods in
    ``absent`` do not exist yet, so DNS has no record of them."""
    slot = pod.index if slot is None else slot
    ips = list(hosts.addrs)
    ip = ips[slot]
    etc = pod_etc(tmp / f"{tag}-{pod.hostname}.etc", hosts_text(job, pod, ip, ips, publish, {ips[i] for i in absent}))
    report, message = tmp / f"{tag}-{pod.hostname}.json", tmp / f"{tag}-{pod.hostname}.msg"
    argv = [*pod.init["command"], "--timeout", str(timeout), "--output", str(report), "--termination-log", str(message)]
    penv = {"PATH": f"{BIN}:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8",
            **init_env(pod, ip), **(env or {})}  # fmt: skip
    cmd = ["ip", "netns", "exec", hosts.names[slot], "unshare", "--mount", "--uts", "--",
           "sh", "-c", SCRIPT, pod.hostname, str(etc), *argv]  # fmt: skip
    proc = subprocess.Popen(cmd, env=penv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return Running(job.workload, pod, proc, report, message, etc / "hosts", time.monotonic())


def publish_late(running: list[Running], job: Job, ips: list[str], pod: Pod) -> None:
    """Cluster DNS starts answering for ``pod`` (it got scheduled and has an IP): append its
    records to every running pod's /etc/hosts in place (the bind mount sees the same file)."""
    lines = "".join(f"{ip}\t{name}\n" for name, ip in published(job, ips).items() if ip == ips[pod.index])
    for r in running:
        if r.workload != job.workload:
            continue
        with r.hosts.open("a") as f:
            f.write(lines)


def wait(running: list[Running], limit: float = 90.0) -> list[Done]:
    """Wait for every pod (bounded), kill stragglers by pid, read what each one wrote."""
    done = []
    for r in running:
        try:
            out, err = r.proc.communicate(timeout=max(1.0, limit - (time.monotonic() - r.started)))
        except subprocess.TimeoutExpired:
            r.proc.kill()
            out, err = r.proc.communicate()
        report = json.loads(r.report.read_text()) if r.report.exists() else None
        try:
            stdout = json.loads(out) if out.strip() else None
        except json.JSONDecodeError:
            stdout = None
        message = r.message.read_text() if r.message.exists() else None
        done.append(Done(r.workload, r.pod, r.proc.returncode, out, err, report, stdout, message))
    return done
