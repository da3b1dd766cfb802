"""The job a preflight execs on the GPU machine: one NCCL all_reduce on this rank's GPU (gloo on a
machine without one, where the script is tried first)."""

import os

import torch
import torch.distributed as dist

local = int(os.environ.get("LOCAL_RANK", "0"))
if torch.cuda.is_available():
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    device, name = "cuda", torch.cuda.get_device_name()
else:
    dist.init_process_group("gloo")
    device, name = "cpu", "cpu"
x = torch.ones(4, device=device)
dist.all_reduce(x)
print(f"train: rank {dist.get_rank()} of {dist.get_world_size()} all_reduce {x[0].item():g} on {name}")
dist.destroy_process_group()
