"""Ranks that outlive a stopped rehearsal (tests/diagnose/test_rehearse_cleanup.py), two per run.

env LINGER: hung (rank 1 skips the second all_reduce, rank 0 waits in it; the gloo timeout is
300 s) | deaf (after one all_reduce every rank ignores SIGTERM and sleeps; rank 1 first starts a
grandchild in its own session, with an empty environment, that ignores SIGTERM too; it carries
the test's marker, argv[1], on its command line). Each rank writes its pid to PIDS_DIR/rank<R>,
the grandchild its pid to PIDS_DIR/grandchild, and prints "linger: rank R waits".
"""

import datetime
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist

DEAF = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"


def main() -> None:
    scenario, mark, pids = os.environ["LINGER"], sys.argv[1], os.environ["PIDS_DIR"]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    dist.all_reduce(torch.ones(2))
    if scenario == "deaf":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if rank == 1:
            g = subprocess.Popen([sys.executable, "-c", DEAF, mark], env={}, start_new_session=True)
            with open(os.path.join(pids, "grandchild"), "w") as f:
                f.write(str(g.pid))
    with open(os.path.join(pids, f"rank{rank}"), "w") as f:
        f.write(str(os.getpid()))
    print(f"linger: rank {rank} waits", flush=True)
    if scenario == "deaf" or rank == 1:
        time.sleep(600)
    dist.all_reduce(torch.ones(2))  # rank 0 hangs here: rank 1 never joins


if __name__ == "__main__":
    main()
