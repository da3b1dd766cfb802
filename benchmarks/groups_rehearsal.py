"""What `validator preflight --groups` adds to a healthy start, per rank count.

    python benchmarks/groups_rehearsal.py [N ...] [--allow-busy]     (default: 8 16 32)
    python benchmarks/groups_rehearsal.py --dead [N ...]             (default: 8)

N real `validator preflight` ranks on loopback (2 emulated nodes, told apart by SLURMD_NODENAME), a
TP2 x PP2 x DP(N/4) layout, each wrapping `true`: the time until every rank has exited, with and
without `--groups`, in the same run. The difference is what the rehearsal adds: each rank imports
torch (the job would too, moments later), initialises gloo on the job's port, creates every group
and runs two all_reduces in each. On a 2-core machine N torch imports dominate it (about 3.4 s of
CPU each). Prints the load beside the figures; the last line is one JSON object
{"ranks": n, "added_s": s, "rows": [...]}, n and s those of the largest N.

--dead: the time until every rank has ended when one rank (N-2, on the second node) dies as it enters its PP
group (the rehearsal's fault hook, CV_FAULT_GROUPS=exit:pp), beside the healthy `--groups` start in the same run:
what a user waits to hear which rank stopped. Last line {"ranks": n, "added_s": s, "dead_s": d, "rows": [...]}.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts, measured  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(n: int, groups: bool, dead: bool = False) -> float:
    port = free_port()
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PET_")) and k not in ("RANK", "WORLD_SIZE")
    }
    extra = ["--groups", "--layout", "tp=2,pp=2"] if groups else []
    procs = []
    t0 = time.monotonic()
    for r in range(n):
        env = {**base, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "RANK": str(r), "WORLD_SIZE": str(n),
               "LOCAL_RANK": str(r % (n // 2)), "LOCAL_WORLD_SIZE": str(n // 2), "SLURMD_NODENAME": f"node{r * 2 // n}",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
        if dead and r == n - 2:
            env["CV_FAULT_GROUPS"] = "exit:pp"
        argv = [sys.executable, "-m", "validator", "preflight", "--timeout", "120", "-q", *extra, "--", "true"]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    codes = [p.wait(timeout=600) for p in procs]
    if dead and not all(codes):
        raise SystemExit(f"groups_rehearsal.py: with rank {n - 2} dead, ranks exited {codes}: every rank must fail")
    if any(codes) and not dead:
        raise SystemExit(
            f"groups_rehearsal.py: {n} ranks{' with --groups' if groups else ''} exited {sorted(set(codes))}"
        )
    return time.monotonic() - t0


def main() -> None:
    flag, sizes = counts(sys.argv[1:], __doc__, ("--dead",))
    sizes = sizes or ([8] if flag else [8, 16, 32])
    if any(n % 4 for n in sizes):
        raise SystemExit("groups_rehearsal.py: each N must be a multiple of 4 (TP2 x PP2 x DP)")
    rows: list[dict[str, float]] = []
    print(f"{'ranks':>6} {'plain s':>8} {'--groups s':>11} {'added s':>8}{'  one dead s' if flag else ''}", flush=True)
    for n in sizes:
        plain, rehearsed = start(n, False), start(n, True)
        row = {"ranks": n, "plain_s": round(plain, 2), "groups_s": round(rehearsed, 2),
               "added_s": round(rehearsed - plain, 2)}  # fmt: skip
        if flag:
            row["dead_s"] = round(start(n, True, dead=True), 2)
        rows.append(row)
        tail = f" {row['dead_s']:>12.2f}" if flag else ""
        print(f"{n:>6} {plain:>8.2f} {rehearsed:>11.2f} {rehearsed - plain:>8.2f}{tail}", flush=True)
    last = {"ranks": rows[-1]["ranks"], "added_s": rows[-1]["added_s"]}
    measured({**last, **({"dead_s": rows[-1]["dead_s"]} if flag else {}), "rows": rows}, ratios=False)


if __name__ == "__main__":
    main()
