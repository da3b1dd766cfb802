"""Hosts for the net check, each a real listener process (validator/netcheck/probe.py) on its own
address, probed by real prober processes, judged by the rounds and verdict scan and preflight use:

    with Fabric.loopback(8) as f: f.check()          # 127.x addresses, no root
    with Fabric.netns(8, tag) as f:                  # network namespaces on a bridge (root)
        f.delay(3, 5.0); f.check(); f.clear()

In ``netns`` each host is a namespace ``PREFIXhI`` with ``eth0`` = SUBNET.I on a bridge that lives
in its own namespace (``PREFIXsw``): nothing gets an address in the caller's namespace. Faults are
planted the way this kernel allows (no netem; the recipes of shared/harness/fabric-lab): delay by
NFQUEUE and nfdelay.py on what the host receives, loss by ``iptables -m statistic`` with GSO off
on both ends of the cable (one drop is one MTU frame), rate by tbf on both ends. Everything
started is stopped by its pid; the namespaces are deleted on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from validator.netcheck import probe, rounds
from validator.netcheck.ring import Node, Plans, Results

PROBE = str(Path(probe.__file__).resolve())
NFDELAY = str(Path(__file__).resolve().parent / "nfdelay.py")


def sh(*cmd: str) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()[:300]}")


class Fabric:
    def __init__(self, addrs: list[str], prefix: str | None) -> None:
        self.addrs, self.prefix = addrs, prefix
        self.names = [f"{prefix or 'lo'}h{i}" for i in range(1, len(addrs) + 1)]
        self.listeners: list[subprocess.Popen[str]] = []
        self.helpers: list[subprocess.Popen[str]] = []  # delay lines
        self.nodes: list[Node] = []
        self.queue = 0

    @classmethod
    def loopback(cls, n: int, base: int = 11) -> Fabric:
        return cls([f"127.0.{base}.{i}" for i in range(1, n + 1)], None)

    @classmethod
    def netns(cls, n: int, tag: int) -> Fabric:
        return cls([f"10.{100 + tag % 50}.{tag // 50 % 250}.{i}" for i in range(1, n + 1)], f"nf{tag}")

    def on(self, i: int, *cmd: str) -> list[str]:
        """argv running ``cmd`` on host i (0-based)."""
        return ["ip", "netns", "exec", self.names[i], *cmd] if self.prefix else list(cmd)

    def __enter__(self) -> Fabric:
        try:
            if self.prefix:
                self._wire()
            for i, addr in enumerate(self.addrs):
                p = subprocess.Popen(self.on(i, sys.executable, PROBE, "listen", addr), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)  # fmt: skip
                self.listeners.append(p)
                got = json.loads(p.stdout.readline() if p.stdout else "{}")
                if "port" not in got:
                    raise RuntimeError(f"no listener on {addr}: {got}")
                self.nodes.append(Node(self.names[i], self.names[i], addr, "eth0", got["port"], got["token"]))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wire(self) -> None:
        sw = f"{self.prefix}sw"
        sh("ip", "netns", "add", sw)
        sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", sw, "link", "set", "br0", "up")
        for i, name in enumerate(self.names):
            sh("ip", "netns", "add", name)
            sh("ip", "-n", sw, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", name)
            sh("ip", "-n", sw, "link", "set", f"p{i}", "master", "br0", "up")
            sh("ip", "-n", name, "addr", "add", f"{self.addrs[i]}/24", "dev", "eth0")
            sh("ip", "-n", name, "link", "set", "eth0", "up")
            sh("ip", "-n", name, "link", "set", "lo", "up")

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        for p in self.listeners:
            with contextlib.suppress(OSError):
                if p.stdin:
                    p.stdin.close()
        for p in self.listeners:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.listeners.clear()
        if self.prefix:
            self.clear()
            for name in [*self.names, f"{self.prefix}sw"]:
                subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)

    async def _probe(self, plans: Plans) -> Results:
        async def one(src: str, targets: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]] | str]:
            i = self.names.index(src)
            p = await asyncio.create_subprocess_exec(*self.on(i, sys.executable, PROBE, "probe", str(probe.TIMEOUT_S)),
                                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
            try:
                out, _ = await asyncio.wait_for(p.communicate(json.dumps(targets).encode()), 60)
            except TimeoutError:
                p.kill()
                await p.wait()
                return src, "the prober did not finish within 60 s"
            lines = out.decode().strip().splitlines()
            got = json.loads(lines[-1]) if lines else {}
            return src, got["results"] if isinstance(got.get("results"), list) else f"the prober failed: {out[-200:]!r}"

        return dict(await asyncio.gather(*(one(s, t) for s, t in plans.items() if t)))

    def check(self, pairs: Literal["rings", "all"] = "rings") -> rounds.NetVerdict:
        """One net check over every host, in host order (what scan and preflight run)."""
        return asyncio.run(rounds.run(self.nodes, self._probe, pairs))

    # faults (netns only)

    def _ns(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.names[i]]

    def delay(self, i: int, ms: float, peer: int | None = None) -> None:
        """Every packet host i receives (from ``peer`` only, if given) waits ``ms``."""
        self.queue += 1
        p = subprocess.Popen([*self._ns(i), sys.executable, NFDELAY, str(self.queue), str(ms)],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
        self.helpers.append(p)
        if not (p.stdout and p.stdout.readline().startswith("nfdelay: queue")):
            raise RuntimeError(f"nfdelay.py did not start (exit {p.poll()})")
        src = ["-s", self.addrs[peer]] if peer is not None else []
        sh(*self._ns(i), "iptables", "-A", "INPUT", "-i", "eth0", *src, "-j", "NFQUEUE", "--queue-num",
           str(self.queue), "--queue-bypass")  # fmt: skip

    def loss(self, i: int, fraction: float) -> None:
        """Drop ``fraction`` of host i's frames each way."""
        for ns, dev in ((self.names[i], "eth0"), (f"{self.prefix}sw", f"p{i}")):
            sh("ip", "-n", ns, "link", "set", dev, "gso_max_segs", "1")
        for chain, way in (("OUTPUT", "-o"), ("INPUT", "-i")):
            sh(*self._ns(i), "iptables", "-A", chain, way, "eth0", "-m", "statistic", "--mode", "random",
               "--probability", str(fraction), "-j", "DROP")  # fmt: skip

    def rate(self, i: int, rate: str) -> None:
        """Cap both directions of host i's cable (a port negotiated down)."""
        for ns, dev in ((self.names[i], "eth0"), (f"{self.prefix}sw", f"p{i}")):
            sh("tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", "64kb",
               "latency", "20ms")  # fmt: skip

    def clear(self) -> None:
        for p in self.helpers:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.helpers.clear()
        for i, name in enumerate(self.names):
            for chain in ("INPUT", "OUTPUT"):
                subprocess.run([*self._ns(i), "iptables", "-F", chain], capture_output=True, check=False)
            for ns, dev in ((name, "eth0"), (f"{self.prefix}sw", f"p{i}")):
                subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True, check=False)
                subprocess.run(["ip", "-n", ns, "link", "set", dev, "gso_max_segs", "65535"],
                               capture_output=True, check=False)  # fmt: skip


def named(outcome: rounds.NetVerdict) -> set[str]:
    """The hosts the net check's speed findings (NET104, NET105) name."""
    return {h for f in outcome.findings if f.code in ("NET104", "NET105") for h in f.hosts}


@contextlib.contextmanager
def planted(fab: Fabric) -> Iterator[Fabric]:
    try:
        yield fab
    finally:
        fab.clear()
