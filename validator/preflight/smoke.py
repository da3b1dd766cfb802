"""--smoke: after a pass, a tiny all_reduce over the real stack (gloo; NCCL where GPUs exist),
on the job's own rendezvous port (already released by the coordinator), with a short timeout."""

from __future__ import annotations

import datetime

from validator.model import Facts


def smoke(facts: Facts, host: str, port: int, rank: int, world: int, timeout: float = 30.0) -> str | None:
    """None when the sum is right; otherwise what went wrong."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return None if world == 1 else "torch is not importable here, so the smoke test cannot run"
    use_nccl = bool(facts["gpus"]["devices"]) and torch.cuda.is_available()
    device = "cpu"
    if use_nccl:
        local = facts["launch"]["local_rank"] or 0
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    addr = f"[{host}]" if ":" in host else host
    try:
        dist.init_process_group("nccl" if use_nccl else "gloo", init_method=f"tcp://{addr}:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=timeout))  # fmt: skip
        t = torch.ones(1, device=device)
        dist.all_reduce(t)
        got = float(t.item())
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - any failure of the stack is the smoke test's finding
        return f"{'nccl' if use_nccl else 'gloo'} all_reduce over {world} participants failed: {type(e).__name__}: {e}"
    return None if got == world else f"all_reduce returned {got}, expected {world}"
