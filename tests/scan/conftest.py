"""Real hosts for `validator scan`: sshd instances on loopback whose addresses behave differently
(hang, no python3, no access, a changed host key, nothing listening, default MaxStartups), and
network-namespace hosts with one odd host each (interface name, a docker-like bridge NCCL would
pick, a different environment, reachable only through a jump host). Everything is started here
and stopped by pid at the end of the session."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    TAG,
    VALIDATOR,
    NetnsHosts,
    Sshd,
    free_port,
    netns_up,
    service_dir,
    unavailable,
)

# Loopback "hosts" of the scenario sshd (all 127/8 reaches one sshd; Match LocalAddress tells
# them apart).
HANG, NO_PYTHON, NO_ACCESS, GARBAGE, CLOSED, CHANGED = (f"127.0.3.{i}" for i in (1, 2, 3, 4, 8, 9))
LOUD, LOUD_ERR, SPY = (f"127.0.3.{i}" for i in (5, 6, 7))  # 50 MB on stdout / stderr; records its command
GOOD = [f"127.0.3.{i}" for i in range(20, 24)]
UNKNOWN_KEY = "127.0.5.1"  # no known_hosts entry
JUMPED = "127.0.6.1"  # reached through ProxyJump (see test_ssh_config)


@dataclass
class ScanSshd:
    dir: Path
    port: int  # the scenario sshd (Match blocks)
    changed_port: int  # a second sshd with another host key
    default_port: int  # a third sshd with OpenSSH's default MaxStartups (10:30:100)
    closed_port: int
    key: Path  # client key
    host_pub: str  # the scenario sshd's host public key line
    user: str

    def config(self, path: Path, known_hosts: Path | None = None, extra: str = "", identity: bool = True) -> Path:
        """An ssh_config routing the scenario addresses to their sshd."""
        ident = f"  IdentityFile {self.key}\n  IdentitiesOnly yes\n" if identity else ""
        path.write_text(
            f"{extra}"
            f"Host {CHANGED}\n  Port {self.changed_port}\n"
            f"Host {CLOSED}\n  Port {self.closed_port}\n"
            f"Host 127.0.4.*\n  Port {self.default_port}\n"
            f"Host *\n  Port {self.port}\n  User {self.user}\n{ident}"
            f"  UserKnownHostsFile {known_hosts or self.dir / 'known_hosts'}\n"
            "  GlobalKnownHostsFile /dev/null\n  KexAlgorithms curve25519-sha256\n"
        )
        return path


SSHD_BASE = """ListenAddress 0.0.0.0
AuthorizedKeysFile {auth}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
StrictModes no
MaxSessions 100
LoginGraceTime 30
"""


def _start_sshd(d: Path, name: str, port: int, hostkey: Path, body: str) -> int:
    cfg = d / f"{name}.conf"
    cfg.write_text(f"Port {port}\nHostKey {hostkey}\nPidFile {d}/{name}.pid\n{body}")
    subprocess.run(["/usr/sbin/sshd", "-t", "-f", str(cfg)], check=True, capture_output=True, timeout=30)
    subprocess.run(["/usr/sbin/sshd", "-f", str(cfg)], check=True, timeout=30)
    pidfile = d / f"{name}.pid"
    for _ in range(100):  # bounded wait for the daemon's pid file
        if pidfile.exists() and pidfile.read_text().strip():
            return int(pidfile.read_text())
        time.sleep(0.05)
    raise RuntimeError(f"sshd {name} did not start")


def _stop_tree(pid: int) -> None:
    """The sshd and any session it still has (a hung command), by pid."""
    import psutil

    try:
        proc = psutil.Process(pid)
        family = [*proc.children(recursive=True), proc]
    except psutil.NoSuchProcess:
        return
    for p in family:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(family, timeout=5)


@pytest.fixture(scope="session")
def scan_sshd(sshd_loopback: Sshd) -> Iterator[ScanSshd]:
    d = service_dir("scan-sshd")
    for k in ("hk1", "hk2"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / k)], check=True, timeout=30)
    (d / "spy").mkdir()
    (d / "spy").chmod(0o1777)  # written by the unprivileged test user's sessions
    base = SSHD_BASE.format(auth=sshd_loopback.dir / "authorized_keys")
    port, changed_port, default_port, closed_port = free_port(), free_port(), free_port(), free_port()
    scenarios = (
        f"MaxStartups 1000:30:2000\n"
        f"Match LocalAddress {HANG}\n  ForceCommand sleep 60\n"
        f'Match LocalAddress {NO_PYTHON}\n  ForceCommand PATH=/nonexistent; export PATH; eval "$SSH_ORIGINAL_COMMAND"\n'
        f"Match LocalAddress {NO_ACCESS}\n  AuthorizedKeysFile none\n"
        f"Match LocalAddress {GARBAGE}\n  ForceCommand echo 'Welcome to the cluster'; cat >/dev/null\n"
        # 50 MB of output, then silence: the output must end the session at once, not the timeout
        f"Match LocalAddress {LOUD}\n  ForceCommand head -c 50000000 /dev/zero; sleep 60\n"
        f"Match LocalAddress {LOUD_ERR}\n  ForceCommand head -c 50000000 /dev/zero >&2; sleep 60\n"
        # the command line sshd was asked to run (what `ps` shows of the session), then the command
        f'Match LocalAddress {SPY}\n  ForceCommand printf %s "$SSH_ORIGINAL_COMMAND" > {d}/spy/command; '
        'eval "$SSH_ORIGINAL_COMMAND"\n'
    )
    pids = []
    try:
        pids.append(_start_sshd(d, "scenarios", port, d / "hk1", base + scenarios))
        pids.append(_start_sshd(d, "changed", changed_port, d / "hk2", base + "MaxStartups 1000:30:2000\n"))
        pids.append(_start_sshd(d, "default", default_port, d / "hk1", base))
        pub = " ".join((d / "hk1.pub").read_text().split()[:2])
        (d / "known_hosts").write_text(
            f"[127.0.3.*]:{port} {pub}\n[127.0.4.*]:{default_port} {pub}\n[127.0.6.*]:{port} {pub}\n"
            f"[{CHANGED}]:{changed_port} {pub}\n"  # remembered key hk1; that sshd now offers hk2
        )
        yield ScanSshd(d, port, changed_port, default_port, closed_port, sshd_loopback.key, pub, sshd_loopback.user)
    finally:
        for pid in pids:
            _stop_tree(pid)
        shutil.rmtree(d, ignore_errors=True)


# ----------------------------------------------------------------------------- netns hosts

ODD_IFNAME, DOCKERISH, ODD_ENV, JUMP_ONLY = 3, 4, 5, 6  # 0-based host indices; 0-2 are plain
DOCKER_BRIDGE = "br-5f3c1a9d7e2b"  # how docker names a user-defined network's bridge


@dataclass
class OddHosts(NetnsHosts):
    config: Path = Path()
    bridge_ip: str = ""

    def restart_sshd(self, i: int, extra: str) -> None:
        ns = self.names[i]
        cfg = self.dir / f"{ns}-sshd_config"
        cfg.write_text(cfg.read_text() + extra)
        pidfile = self.dir / f"{ns}-sshd.pid"
        os.kill(int(pidfile.read_text()), signal.SIGTERM)
        for _ in range(100):  # bounded: the old daemon releases port 22
            if subprocess.run(["ip", "netns", "exec", ns, "ss", "-ltn", "sport = :22"], capture_output=True,
                              text=True, timeout=30).stdout.count("LISTEN") == 0:  # fmt: skip
                break
            time.sleep(0.05)
        pidfile.unlink(missing_ok=True)
        subprocess.run(self.exec(i, "/usr/sbin/sshd", "-f", str(cfg)), check=True, timeout=30)
        for _ in range(100):
            if pidfile.exists() and pidfile.read_text().strip():
                return
            time.sleep(0.05)
        raise RuntimeError(f"sshd on {ns} did not restart")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="session")
def odd_hosts(sshd_loopback: Sshd) -> Iterator[OddHosts]:
    """Seven namespace hosts: 0-2 plain; 3 calls its NIC ens5; 4 has a docker-style bridge
    (br-<id>, 172.18.0.1/16) listed before eth0, which NCCL picks under ^docker,lo; 5 has
    NCCL_IB_DISABLE=1 in its sshd's environment; 6 refuses logins from the test's own address
    (reachable only through a jump host)."""
    if shutil.which("ip") is None:
        unavailable("iproute2 not installed")
    prefix, subnet = f"cs{TAG}h", f"10.{150 + TAG % 50}.{TAG // 50 % 250}"
    with netns_up(7, "scan-netns", prefix, subnet, OddHosts) as hosts:
        names, d = hosts.names, hosts.dir
        hosts.bridge_ip = f"{subnet}.1"
        ns = names[ODD_IFNAME]
        _ip("-n", ns, "link", "set", "eth0", "down")
        _ip("-n", ns, "link", "set", "eth0", "name", "ens5")
        _ip("-n", ns, "link", "set", "ens5", "up")
        ns, i = names[DOCKERISH], DOCKERISH
        _ip("-n", ns, "link", "add", DOCKER_BRIDGE, "type", "bridge")
        _ip("-n", ns, "addr", "add", "172.18.0.1/16", "dev", DOCKER_BRIDGE)
        _ip("-n", ns, "link", "add", "veth3a1f", "type", "veth", "peer", "name", "veth3a1f-c")
        _ip("-n", ns, "link", "set", "veth3a1f", "master", DOCKER_BRIDGE)
        for dev in ("veth3a1f", "veth3a1f-c", DOCKER_BRIDGE):
            _ip("-n", ns, "link", "set", dev, "up")
        # recreate eth0 so that it comes after the bridge in the kernel's (and NCCL's) order
        _ip("link", "del", f"{prefix}v{i + 1}")
        _ip("link", "add", f"{prefix}v{i + 1}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", f"{prefix}v{i + 1}", "master", f"{prefix}-br", "up")
        _ip("-n", ns, "addr", "add", f"{hosts.addrs[i]}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        hosts.restart_sshd(DOCKERISH, "")  # its listening address went away with the old eth0
        hosts.restart_sshd(ODD_ENV, "SetEnv NCCL_IB_DISABLE=1\n")
        hosts.restart_sshd(JUMP_ONLY, f"Match Address {hosts.bridge_ip}\n  AuthorizedKeysFile none\n")
        hosts.config = d / "scan_ssh_config"
        hosts.config.write_text(
            f"Host {names[JUMP_ONLY]}-via-jump\n  HostName {hosts.addrs[JUMP_ONLY]}\n  ProxyJump {names[0]}\n"
            + (d / "ssh_config").read_text()
        )
        yield hosts


# ----------------------------------------------------------------------------- running the CLI


@dataclass
class ScanRun:
    rc: int
    out: str
    err: str
    doc: dict[str, Any] | None

    @property
    def hosts(self) -> list[str]:
        """The hosts with facts (the JSON folds them: ``node[1-4]``)."""
        assert self.doc is not None
        return expand_hosts(self.doc["hosts"])

    def outcome(self, host: str) -> dict[str, str] | None:
        assert self.doc is not None
        return next((o for o in self.doc["outcomes"] if o["target"] == host), None)

    def named(self, code: str) -> list[str]:
        assert self.doc is not None
        return sorted({h for f in self.doc["findings"] if f["code"] == code for h in expand_hosts(f["hosts"])})

    def all_named(self) -> set[str]:
        assert self.doc is not None
        return {h for f in self.doc["findings"] for h in expand_hosts(f["hosts"])}


def expand_hosts(value: str | list[str]) -> list[str]:
    """A folded hostlist (or a plain list, as older reports wrote it) as hosts."""
    from validator.targets import expand

    return list(value) if isinstance(value, list) else (expand(value) if value else [])


def foreground() -> None:
    """For a child that a test stops with SIGINT: the disposition a foreground shell gives it. A
    suite started in the background (``cmd &`` without job control) passes SIGINT on ignored, and
    Python then never raises KeyboardInterrupt: the test would hang instead of testing Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def scan_env(**extra: str) -> dict[str, str]:
    from tests.conftest import ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "NCCL_", "SSH_AUTH_SOCK"))}
    env.update({"PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def run_scan(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> ScanRun:
    """`validator scan ARGS -f json`, bounded; the JSON on stdout parsed."""
    p = subprocess.run(
        [*VALIDATOR, "scan", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or scan_env(),
        check=False,
    )
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        doc = None
    return ScanRun(p.returncode, p.stdout, p.stderr, doc)
