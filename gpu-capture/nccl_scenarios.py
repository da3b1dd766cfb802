"""Deliberate NCCL failures on one GPU, for diagnose fixtures (run under torchrun, 2 ranks).

duplicate: both ranks use cuda:0 -> NCCL refuses ("Duplicate GPU detected" / "Multiple Ranks are using
           the same GPU"), unless NCCL_MULTI_RANK_GPU_ENABLE=1.
skip:      rank 1 skips the second all_reduce inside a branch (the classic desync); rank 0 times out
           in the watchdog after 20 s and the Flight Recorder dumps.
mismatch:  rank 1 calls all_gather where rank 0 calls all_reduce.
For skip/mismatch the two ranks share the one GPU by claiming different hosts (NCCL_HOSTID), so
NCCL's duplicate-GPU check passes and they talk over its socket transport on lo.
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def main(mode: str) -> None:
    rank = int(os.environ["RANK"])
    if mode != "duplicate":
        os.environ["NCCL_HOSTID"] = f"fake-host-{rank}"
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=20), device_id=torch.device("cuda:0"))
    x = torch.ones(1024, device="cuda:0")
    dist.all_reduce(x)  # collective 1: everyone
    torch.cuda.synchronize()
    print(f"[rank{rank}] first all_reduce ok: {x[0].item()}", flush=True)
    if mode == "mismatch":
        if rank == 1:
            out = [torch.zeros_like(x) for _ in range(2)]
            dist.all_gather(out, x)
        else:
            dist.all_reduce(x)
        torch.cuda.synchronize()
    if mode == "skip":
        batch_empty = rank == 1
        if not batch_empty:  # rank 1 skips all_reduce #2 (an empty batch)
            dist.all_reduce(x)
            torch.cuda.synchronize()
        else:
            time.sleep(45)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
