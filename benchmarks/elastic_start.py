"""An elastic start that fewer than MAX nodes join: plain torchrun against the same launch behind
`validator preflight`, on loopback (two "nodes", gloo on CPU, c10d, `--nnodes=2:3`, torchrun's
default last call of 30 s unless LAST_CALL is given).

    python benchmarks/elastic_start.py [LAST_CALL_S]   [--allow-busy]

Each side starts both nodes at once and is timed until both have exited 0 (torchrun's rendezvous
waits its last call for a third node that never comes, then runs one all_reduce). The preflight
decides once arrivals pause (door.py) instead of waiting a last call of its own, so the two should
differ by the preflight's own time, not by a second last call. Prints the load average at the start
and the end, and last one JSON object: {"last_call_s", "plain_s", "preflight_s", "added_s"}.
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

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
ALLREDUCE = str(ROOT / "tests" / "harness" / "allreduce.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(port: int, last_call: int) -> list[str]:
    return [TORCHRUN, "--nnodes=2:3", "--nproc-per-node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
            f"--rdzv-conf=timeout=120,last_call_timeout={last_call}", "--max-restarts=0", ALLREDUCE]  # fmt: skip


def timed(wrap: list[str], last_call: int) -> float:
    """Both nodes started at once; seconds until both exited 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    port = free_port()
    t0 = time.monotonic()
    procs = [subprocess.Popen([*wrap, *launch(port, last_call)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    for p in procs:
        try:
            _, err = p.communicate(timeout=last_call * 3 + 120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            sys.exit(f"elastic_start.py: a node did not finish within {last_call * 3 + 120} s")
        if p.returncode != 0:
            sys.exit(f"elastic_start.py: a node exited {p.returncode}: {err.strip().splitlines()[-1:]}")
    return time.monotonic() - t0


def main() -> None:
    _, given = counts(sys.argv[1:], __doc__)
    last_call = given[0] if given else 30
    plain = timed([], last_call)
    print(f"plain torchrun: {plain:.2f} s", flush=True)
    gated = timed([sys.executable, "-m", "validator", "preflight", "--timeout", "120", "--"], last_call)
    print(f"validator preflight -- torchrun: {gated:.2f} s", flush=True)
    measured({"last_call_s": last_call, "plain_s": round(plain, 2), "preflight_s": round(gated, 2),
              "added_s": round(gated - plain, 2)})  # fmt: skip


if __name__ == "__main__":
    main()
