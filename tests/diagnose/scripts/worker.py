"""A tiny gloo training loop that fails on purpose (tests of diagnose and rehearse).

env SCENARIO: ok | skip (rank 1 skips an all_reduce in step 1: branch on an empty batch) |
mismatch (rank 1 calls all_gather where the others call all_reduce) | raise (rank 1 raises
before its first collective). PG_TIMEOUT_S bounds every collective; FR_DUMP_DIR makes each rank
write its Flight Recorder trace (pickle) when a collective fails.
"""

import datetime
import os

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
    if scenario == "raise" and rank == 1:
        raise RuntimeError("bad shard on rank 1")
    try:
        for step in range(3):
            grads = torch.ones(4)
            batch = torch.ones(0 if (scenario == "skip" and rank == 1 and step == 1) else 8)
            if batch.numel() > 0:  # branch on an empty batch
                dist.all_reduce(grads)
            if scenario == "mismatch" and rank == 1 and step == 1:
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
