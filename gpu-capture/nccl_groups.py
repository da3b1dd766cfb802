"""The groups rehearsal (validator/preflight/groups.py) over real NCCL on one GPU: N ranks as
per-rank preflight participants run it (``groups.on_node`` with one rank each: a child process per
rank, stopped by its pid at a deadline), all on cuda:0, told apart by NCCL_HOSTID (NCCL's
duplicate-GPU check passes; they talk over its socket transport on lo).

    nccl_groups.py N PORT LAYOUT [FAULT]     e.g. 8 29581 tp=2,pp=2,dp=2 delay:dp:3@5

Two emulated nodes (ranks 0..N/2-1 on node0). Prints each rank's answer, one JSON line a rank, as
it ends, then the seconds until the last.
"""

import json
import os
import subprocess
import sys
import time


def one(rank: int, n: int, port: int, layout: str) -> None:
    from validator.facts.layout import group_map, parse_explicit
    from validator.preflight import groups as g

    t0 = time.monotonic()
    gm = group_map(parse_explicit(layout, "--layout"), n)
    error, lines = g.on_node("127.0.0.1", port, rank, 1, n, gm, f"node{rank * 2 // n}", gpus=True,
                             master=rank == 0, local0=0)  # fmt: skip
    print(json.dumps({"rank": rank, "error": error, "lines": lines, "seconds": round(time.monotonic() - t0, 2)}))


def main(n: int, port: int, layout: str, fault: str = "") -> int:
    t0 = time.monotonic()
    procs = []
    for rank in range(n):
        env = {**os.environ, "RANK": str(rank), "NCCL_HOSTID": f"fake-host-{rank}", "CV_FAULT_GROUPS": fault}
        procs.append(subprocess.Popen([sys.executable, __file__, "one", str(rank), str(n), str(port), layout], env=env))
    for p in procs:
        p.wait()
    print(json.dumps({"layout": layout, "fault": fault, "seconds": round(time.monotonic() - t0, 2)}))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "one":
        one(*map(int, sys.argv[2:5]), sys.argv[5])
    else:
        sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], *sys.argv[4:5]))
