"""Seconds from the last participant's arrival to the verdict, for each decisive launch failure.

    python benchmarks/preflight_decisive.py [REPEAT]      (default 3)

Two wrapped torchrun "nodes" on loopback (`validator preflight --timeout 60 -- torchrun ...`; the
torchrun on PATH is a stub that exits 0, so a pass costs nothing after the exec). Node 0 starts
first; node 1 starts once node 0 listens (or after 1 s when nothing can listen). The figure per
scenario is the time from starting the last node until it exits with the verdict (the coordinator
prints it at the same moment, then answers late arrivals for at most 10 s), minus the same for a
healthy launch measured in the same run (the anchor: Python start-up, the probe and the
exchange). The target is <= 2 s for each (issues 9 and 21); without an early verdict each would
take the whole --timeout (60 s). "all exited" is the time from the first node's start until every
node has exited (the master included: <= 10 s after a decided verdict). In "a node killed after its
facts", a third node sends its facts and is SIGKILLed before the last one arrives (the two-phase
verdict names it, PRE010). The load average is printed beside the figures. The last line is one
JSON object.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts  # noqa: E402

TIMEOUT = "60"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def static(node_rank: object, nnodes: int, port: int, addr: str = "127.0.0.1") -> list[str]:
    return ["torchrun", f"--nnodes={nnodes}", "--nproc-per-node=1", f"--node-rank={node_rank}",
            f"--master-addr={addr}", f"--master-port={port}", "train.py"]  # fmt: skip


def c10d(nnodes: int, port: int, *extra: str) -> list[str]:
    return ["torchrun", f"--nnodes={nnodes}", "--nproc-per-node=1", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}", *extra, "train.py"]  # fmt: skip


SCENARIOS: dict[str, Callable[[int], list[list[str]]]] = {
    "healthy (anchor)": lambda p: [static(0, 2, p), static(1, 2, p)],
    "node rank claimed twice": lambda p: [static(0, 2, p), static(0, 2, p)],
    "node rank empty": lambda p: [static(0, 2, p), static("", 2, p)],
    "nnodes 3 on the master, 2 elsewhere": lambda p: [static(0, 3, p), static(1, 2, p)],
    "rdzv backend differs": lambda p: [static(0, 2, p), c10d(2, p)],
    "master address typo": lambda p: [static(0, 2, p), static(1, 2, p, "127.0.0.2")],
    "master port held": lambda p: [static(0, 2, p), static(1, 2, p)],
    "rdzv backend differs, with --rdzv-id": lambda p: [static(0, 2, p), c10d(2, p, "--rdzv-id=job42")],
    "node rank 1 everywhere": lambda p: [static(1, 2, p), static(1, 2, p)],
    "a node killed after its facts": lambda p: [static(0, 3, p), static(1, 3, p), static(2, 3, p)],
}
KILLED = "a node killed after its facts"  # node 1 sends its facts and is SIGKILLed; node 2 completes the count


def once(name: str, env: dict[str, str]) -> tuple[float, list[int], float]:
    """(seconds from the last node's start to its verdict, exit codes of the first and last node,
    seconds from the first node's start until both exited: the master lingers at most 10 s)."""
    port = free_port()
    holder = None
    if name == "master port held":
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("0.0.0.0", port))
        holder.listen(16)
    first, *middle, last = SCENARIOS[name](port)
    argv = [sys.executable, "-m", "validator", "preflight", "--timeout", TIMEOUT, "-q", "--"]
    try:
        t_start = time.monotonic()
        p0 = subprocess.Popen(argv + first, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t_wait = time.monotonic()
        while not listening(port) and time.monotonic() - t_wait < 10:
            time.sleep(0.02)
        if holder is not None:
            time.sleep(1.0)
        for cmd in middle:  # sends its facts, then is killed before the verdict
            victim = subprocess.Popen(argv + cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.5)
            victim.kill()
            victim.wait()
        t0 = time.monotonic()
        p1 = subprocess.Popen(argv + last, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        p1.wait(timeout=120)  # node 1 exits once it has the verdict (the coordinator may linger)
        seconds = time.monotonic() - t0
        codes = [p.wait(timeout=120) for p in (p0, p1)]
        return seconds, codes, time.monotonic() - t_start
    finally:
        if holder is not None:
            holder.close()


def main() -> None:
    repeat = (counts(sys.argv[1:2], __doc__)[1] or [3])[0]
    with tempfile.TemporaryDirectory() as stub:
        (Path(stub) / "torchrun").write_text("#!/bin/sh\nexit 0\n")
        (Path(stub) / "torchrun").chmod(0o755)
        env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "SLURM_JOB_ID"):
            env.pop(k, None)
        results: dict[str, dict[str, object]] = {}
        load0 = os.getloadavg()
        for name in SCENARIOS:
            times, codes, alls = [], [], []
            for _ in range(repeat):
                t, c, whole = once(name, env)
                times.append(t)
                codes.append(c)
                alls.append(whole)
            results[name] = {"seconds": round(statistics.median(times), 2), "exit_codes": codes[-1],
                             "all_exited_s": round(max(alls), 1)}  # fmt: skip
        anchor = float(results["healthy (anchor)"]["seconds"])  # type: ignore[arg-type]
        print(f"{'scenario':40} {'median s':>9} {'over anchor':>12} {'all exited':>11}  exit codes")
        for name, r in results.items():
            extra = float(r["seconds"]) - anchor  # type: ignore[arg-type]
            r["after_last_arrival_s"] = round(max(0.0, extra), 2)
            print(f"{name:40} {r['seconds']:>9} {extra:>12.2f} {r['all_exited_s']:>10}s  {r['exit_codes']}")
        decisive = {k: v["after_last_arrival_s"] for k, v in results.items() if k != "healthy (anchor)"}
        exited = {k: v["all_exited_s"] for k, v in results.items()}
        load = [round(x, 2) for x in (*load0[:1], *os.getloadavg()[:1])]
        print(f"load average (1 min) at start and end: {load[0]} {load[1]} on {os.cpu_count()} cores")
        print(json.dumps({"anchor_s": anchor, "after_last_arrival_s": decisive, "all_exited_s": exited,
                          "max_s": max(decisive.values()), "timeout_s": float(TIMEOUT), "load": load}))  # type: ignore[type-var]  # fmt: skip


if __name__ == "__main__":
    main()
