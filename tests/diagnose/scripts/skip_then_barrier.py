"""Rank 1 skips the second all_reduce; then every rank calls barrier: rank 1's barrier meets the others' all_reduce
and the run hangs (rehearse stops it). Used by tests/diagnose/test_torchrun.py."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
if dist.get_rank() != 1:
    dist.all_reduce(t)
dist.barrier()
dist.destroy_process_group()
