"""Shared fixtures: real services for the integration ring (STYLE.md "tests in three rings").

Every service is started by a script in tests/harness/ (adapted from the project's measured
recipes) with ports, directories and names unique to this pytest process, so several test runs
can share a machine, and stopped by pid at the end of the session.

Where a service cannot start (not root, package missing), the tests that need it are skipped,
unless VALIDATOR_REQUIRE_SERVICES=1 (set by .ci/run), where that is a failure: CI must not pass
by skipping the real parts.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "harness"
FIXTURES = ROOT / "tests" / "fixtures"
PYTHON = sys.executable
VALIDATOR = [PYTHON, "-m", "validator"]
REQUIRE = os.environ.get("VALIDATOR_REQUIRE_SERVICES") == "1"
TAG = os.getpid() % 10000  # makes names, ports and subnets unique to this pytest process
# Every JSON document a validator process of the suite prints is validated against docs/schema/
# first (validator.schema.self_check): a mismatch fails that command with exit 70.
os.environ.setdefault("VALIDATOR_SELF_CHECK", "1")


def unavailable(why: str) -> None:
    if REQUIRE:
        pytest.fail(f"required service unavailable: {why}")
    pytest.skip(why)


def free_port(span: int = 1) -> int:
    """A free port, and the ``span - 1`` after it free too (preflight inside torchrun tries
    MASTER_PORT+1, +2, ...). Below the kernel's ephemeral range, as a job's MASTER_PORT (29500) is:
    a port inside it may become any outgoing connection's own port between the pick and its use
    (CI saw a test's rendezvous port taken so), which no listener can then bind. The kernel's pick
    where the range leaves no room below it."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for attempt in range(100):
        below = attempt < 80 and low - span > 20000
        if below:
            port = random.randrange(20000, low - span)
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
        if port + span > 65536:
            continue
        try:
            with contextlib.ExitStack() as held:
                for p in range(port if below else port + 1, port + span):  # the kernel's own pick was free
                    t = held.enter_context(socket.socket())
                    t.bind(("0.0.0.0", p))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no {span} free ports in a row")


def run_harness(script: str, *args: str, env: dict[str, str], timeout: float = 120) -> str:
    p = subprocess.run(
        ["bash", str(HARNESS / script), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if p.returncode != 0:
        raise RuntimeError(f"{script} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


def service_dir(name: str) -> Path:
    """A world-readable directory: sshd reads authorized_keys as the unprivileged test user, and
    pytest's own tmp dirs are private (0700)."""
    d = Path(tempfile.mkdtemp(prefix=f"cv-{name}-{TAG}-", dir="/tmp"))
    d.chmod(0o755)
    return d


def _root_with(*binaries: str) -> None:
    if os.geteuid() != 0:
        unavailable("needs root")
    for b in binaries:
        if not shutil.which(b) and not Path(b).exists():
            unavailable(f"{b} not installed (see .ci/run)")


@dataclass
class Sshd:
    dir: Path
    port: int
    config: Path  # ssh_config for the OpenSSH client and asyncssh
    user: str
    key: Path
    known_hosts: Path


@pytest.fixture(scope="session")
def sshd_loopback() -> Iterator[Sshd]:
    """One real OpenSSH sshd on 0.0.0.0:PORT answering as any 127.x.y.z "host"."""
    _root_with("/usr/sbin/sshd")
    d = service_dir("sshd")
    port = free_port()
    env = {"SSH_HARNESS_DIR": str(d), "SSH_HARNESS_USER": "simhost"}
    run_harness("ssh-loopback-up.sh", str(port), env=env)
    try:
        yield Sshd(d, port, d / "ssh_config", "simhost", d / "id_ed25519", d / "known_hosts")
    finally:
        run_harness("ssh-loopback-down.sh", env=env)


@dataclass
class NetnsHosts:
    names: list[str]
    addrs: list[str]
    dir: Path
    prefix: str
    subnet: str

    def exec(self, i: int, *cmd: str) -> list[str]:
        """argv running ``cmd`` on host i (0-based) inside its namespace (own IP and hostname)."""
        return ["ip", "netns", "exec", self.names[i], "unshare", "--uts", "sh", "-c",
                f'hostname {self.names[i]} && exec "$@"', "sh", *cmd]  # fmt: skip


H = TypeVar("H", bound=NetnsHosts)


@contextlib.contextmanager
def netns_up(count: int, name: str, prefix: str, subnet: str, cls: type[H]) -> Iterator[H]:
    """``count`` namespace hosts from tests/harness/netns-hosts-up.sh, removed afterwards."""
    d = service_dir(name)
    env = {"NETNS_HARNESS_DIR": str(d), "NETNS_PREFIX": prefix, "NETNS_SUBNET": subnet, "NETNS_USER": "simhost"}
    try:
        run_harness("netns-hosts-up.sh", str(count), env=env)
        names = [f"{prefix}{i}" for i in range(1, count + 1)]
        yield cls(names, [f"{subnet}.{10 + i}" for i in range(1, count + 1)], d, prefix, subnet)
    finally:
        run_harness("netns-hosts-down.sh", env=env)


@pytest.fixture(scope="session")
def netns_hosts() -> Iterator[NetnsHosts]:
    """Four hosts, each a network namespace with its own IP, hostname and sshd, on one bridge
    with no default route (nothing leaves the test subnet)."""
    _root_with("ip", "/usr/sbin/sshd", "unshare")
    with netns_up(4, "netns", f"cv{TAG}h", f"10.{200 + TAG % 50}.{TAG // 50 % 250}", NetnsHosts) as hosts:
        yield hosts


@dataclass
class Slurm:
    conf: Path
    nodes: list[str]

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}


@pytest.fixture(scope="session")
def slurm() -> Iterator[Slurm]:
    """Real slurmctld + one slurmd per logical node (n1..n4) on this host, auth/none."""
    _root_with("slurmctld", "slurmd", "srun")
    d = service_dir("slurm")
    base = 21000 + TAG % 800 * 10
    env = {"SLURM_HARNESS_DIR": str(d), "SLURM_HARNESS_BASEPORT": str(base), "SLURM_HARNESS_CTLPORT": str(base + 9)}
    try:
        run_harness("slurm-up.sh", "4", "none", env=env)
        yield Slurm(d / "slurm.conf", [f"n{i}" for i in range(1, 5)])
    finally:
        run_harness("slurm-down.sh", env=env)
