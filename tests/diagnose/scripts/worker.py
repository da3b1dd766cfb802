"""A tiny gloo training loop that fails on purpose (tests of diagnose and rehearse).

env SCENARIO: ok | skip (rank 1 skips an all_reduce in step 1: branch on an empty batch) |
mismatch (rank 1 calls all_gather where the others call all_reduce) | raise (rank 1 raises
before its first collective) | hang (rank 1 sleeps in step 1 instead of joining; torchrun stops it
once the others fail) | kill (rank 1 is killed by SIGKILL in step 1) | exit (rank 1 skips the
all_reduce of step 1 and exits cleanly: its data ran out). BAD_RANK picks another rank
than 1. PG_TIMEOUT_S bounds every collective; FR_DUMP_DIR makes each rank write its Flight
Recorder trace (pickle) when a collective fails.
"""

import datetime
import os
import signal
import time

import torch
import torch.distributed as dist


def fr_dump() -> None:
    d = os.environ.get("FR_DUMP_DIR")
    if d:
        from torch._C._distributed_c10d import _dump_fr_trace

        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"nccl_trace_rank_{dist.get_rank()}"), "wb") as f:
            f.write(_dump_fr_trace())


def main() -> None:
    scenario = os.environ.get("SCENARIO", "ok")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT_S", "8"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    bad = int(os.environ.get("BAD_RANK", "1"))
    if scenario == "raise" and rank == bad:
        raise RuntimeError(f"bad shard on rank {rank}")
    try:
        for step in range(3):
            grads = torch.ones(4)
            if step == 1 and rank == bad and scenario == "hang":
                time.sleep(600)  # stuck (a dead data loader): stopped by torchrun when the others fail
            if step == 1 and rank == bad and scenario == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if step == 1 and rank == bad and scenario == "exit":
                print(f"rank {rank}: data exhausted after {step} steps", flush=True)
                os._exit(0)  # exit code 0 at once: no teardown still running when torchrun stops the rest
            batch = torch.ones(0 if (scenario == "skip" and rank == bad and step == 1) else 8)
            if batch.numel() > 0:  # branch on an empty batch
                dist.all_reduce(grads)
            if scenario == "mismatch" and rank == bad and step == 1:
                out = [torch.zeros(2) for _ in range(world)]
                dist.all_gather(out, torch.ones(2))
                continue
            dist.all_reduce(torch.ones(2))
        dist.barrier()
    except Exception:
        fr_dump()
        raise
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
