"""Scale benchmark for `validator scan` (issue 4): N loopback "hosts" (127.0.x.y) behind one tuned
OpenSSH sshd on this machine, so every handshake and every node-side process shares its cores.

Timed on the same hosts, in this order:

  scan            ``validator scan HOSTS -f json`` (the CLI: start-up, fan-out 64, agent, checks,
                  report), checked to have reached every host
  openssh         OpenSSH ``ssh HOST hostname``, 64 in parallel (xargs -P 64)          [baseline]
  asyncssh        a bare asyncssh ``hostname`` fan-out, 64 at once                    [baseline]
  asyncssh+agent  the same bare fan-out running the agent (``python3 -`` < probe.py): the scan's
                  node-side work without its orchestration, checks or report
  openssh+agent   ``ssh HOST python3 - < probe.py``, 64 in parallel

and prints wall times and ratios. The sshd is started here (tests/harness/ssh-loopback-up.sh,
MaxStartups 1000:30:2000) and stopped by pid at the end.

    .venv/bin/python benchmarks/scan_scale.py [--hosts 200 1000] [--fanout 64] [--skip-agent-baselines]
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import measured  # noqa: E402

AGENT = (ROOT / "validator" / "agent" / "probe.py").read_text()


def hosts(n: int) -> list[str]:
    out, ip = [], ipaddress.IPv4Address("127.0.10.1")
    while len(out) < n:
        if int(ip) & 0xFF not in (0, 255):
            out.append(str(ip))
        ip += 1
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    t0 = time.monotonic()
    ok = fn()
    return time.monotonic() - t0, ok


def run_scan(hs: list[str], cfg: Path, fanout: int) -> int:
    p = subprocess.run(
        [sys.executable, "-m", "validator", "scan", ",".join(hs), "-F", str(cfg), "-f", "json",
         "--fanout", str(fanout), "--allow-incomplete"],
        capture_output=True, text=True, cwd=ROOT, timeout=1800, check=False,
    )  # fmt: skip
    doc = json.loads(p.stdout)
    return int(doc["host_count"] if "host_count" in doc else len(doc["hosts"]))


def run_openssh(hs: list[str], cfg: Path, fanout: int, agent: bool) -> int:
    cmd = f"ssh -F {cfg} {{}} python3 - --no-port-probe < {AGENT_FILE}" if agent else f"ssh -F {cfg} {{}} hostname"
    p = subprocess.run(
        ["xargs", "-P", str(fanout), "-I{}", "sh", "-c", cmd],
        input="\n".join(hs) + "\n", capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    return sum(1 for line in p.stdout.splitlines() if line.strip())


def run_asyncssh(hs: list[str], port: int, key: Path, user: str, fanout: int, agent: bool) -> int:
    import asyncssh

    async def main() -> int:
        client_key = asyncssh.read_private_key(str(key))
        sem = asyncio.Semaphore(fanout)

        async def one(h: str) -> bool:
            async with sem, asyncssh.connect(h, port=port, username=user, client_keys=[client_key],
                                        known_hosts=None, kex_algs=["curve25519-sha256"]) as c:  # fmt: skip
                if agent:
                    r = await c.run("python3 - --no-port-probe", input=AGENT, check=True, timeout=120)
                else:
                    r = await c.run("hostname", check=True, timeout=120)
                return bool(str(r.stdout).strip())

        res = await asyncio.gather(*(one(h) for h in hs), return_exceptions=True)
        return sum(1 for r in res if r is True)

    return asyncio.run(main())


AGENT_FILE = ROOT / "validator" / "agent" / "probe.py"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--fanout", type=int, default=64)
    ap.add_argument("--skip-agent-baselines", action="store_true")
    ap.add_argument("--allow-busy", action="store_true", help="report ratios measured on a busy machine")
    a = ap.parse_args()
    if os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists():
        print("needs root and openssh-server (it starts a private sshd)", file=sys.stderr)
        return 2
    d = Path(tempfile.mkdtemp(prefix="cv-scan-bench-", dir="/tmp"))
    d.chmod(0o755)
    port = free_port()
    env = {**os.environ, "SSH_HARNESS_DIR": str(d), "SSH_HARNESS_USER": "simhost"}
    subprocess.run(["bash", str(ROOT / "tests/harness/ssh-loopback-up.sh"), str(port)], env=env, check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    cfg = d / "ssh_config"
    print(f"sshd on port {port}; {os.cpu_count()} CPUs; fan-out {a.fanout}", flush=True)
    rows = []
    try:
        for n in a.hosts:
            hs = hosts(n)
            key = d / "id_ed25519"
            runs: dict[str, Callable[[], int]] = {
                "scan": partial(run_scan, hs, cfg, a.fanout),
                "openssh": partial(run_openssh, hs, cfg, a.fanout, False),
                "asyncssh": partial(run_asyncssh, hs, port, key, "simhost", a.fanout, False),
            }
            if not a.skip_agent_baselines:
                runs["asyncssh+agent"] = partial(run_asyncssh, hs, port, key, "simhost", a.fanout, True)
                runs["openssh+agent"] = partial(run_openssh, hs, cfg, a.fanout, True)
            wall = {}
            for name, fn in runs.items():
                secs, ok = timed(fn)
                wall[name] = secs
                row = {"hosts": n, "run": name, "wall_s": round(secs, 2), "ok": ok}
                rows.append(row)
                print(json.dumps(row), flush=True)
            ratios = {f"scan/{k}": round(wall["scan"] / wall[k], 2) for k in wall if k != "scan" and wall[k] > 0}
            if n != a.hosts[-1]:
                print(json.dumps({"hosts": n, "ratios": ratios}), flush=True)
            else:
                measured({"hosts": n, "ratios": ratios})
    finally:
        subprocess.run(["bash", str(ROOT / "tests/harness/ssh-loopback-down.sh")], env=env, check=False,
                       capture_output=True, timeout=120)  # fmt: skip
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
