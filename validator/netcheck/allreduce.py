"""A two-rank all_reduce between two nodes, on the nodes, in the collective library the job will use:
gloo on the CPU, NCCL where torch sees a GPU. Self-contained; torch where it imports (it is the job's
own), the standard library otherwise. The scan sends this source like the agent, after the net check
named a slow node or link (validator/netcheck/collective.py).

    allreduce.py serve ADDR IFACE TIMEOUT
        rank 0: a TCPStore on ADDR, a port the kernel picks; print {"port", "backend"} (or {"error"}),
        then join the group and run the all_reduces with rank 1
    allreduce.py join ADDR PORT BACKEND IFACE TIMEOUT
        rank 1: join the group at ADDR:PORT, run the all_reduces, print {"allreduce": {...}} (or {"error"})

IFACE pins the library's own socket interface (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME): the one the
net check measured, and no name lookup of the host (gloo resolves the host name without it). After
a one-element all_reduce (the connections up) and one of SMALL bytes, timed, rank 0 picks the size:
what that pace moves in TARGET_S, between SMALL and MIB MiB (a 1 Mbit/s link is measured in about a
second, not 33), then all_reduces of it are timed: one, then as many more as fit in BUDGET_S at its
pace (at most REPEATS). Rank 0 tells rank 1 the size and the count through the store, so both run
the same collectives. The figure is the second-fastest (as for every probe: one
stall of a busy node does not make the link slow), as the bus bandwidth nccl-tests reports: bytes /
seconds x 2(n-1)/n, which for two ranks is the algorithm bandwidth. TIMEOUT bounds the group's setup
and each collective: an all_reduce slower than that is the answer's error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

MIB = 4
SMALL = 256 << 10  # bytes: the all_reduce that sets the pace
TARGET_S = 0.5  # what one measured all_reduce should take, at most, at that pace
REPEATS = 5
BUDGET_S = 5.0
WORLD = 2
NODE = os.environ.get("SLURMD_NODENAME", "")


def say(doc: dict[str, Any]) -> None:
    print(json.dumps({**doc, "node": NODE}), flush=True)


def torch_or_why() -> tuple[Any, str]:
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
        import torch.distributed as dist  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, a broken install: the answer, not a traceback
        return None, f"torch is not importable: {type(e).__name__}: {e}"[:300]
    return torch, ""


def pin(iface: str) -> None:
    if iface:
        os.environ["GLOO_SOCKET_IFNAME"] = iface
        os.environ["NCCL_SOCKET_IFNAME"] = iface


def measure(torch: Any, store: Any, rank: int, backend: str, timeout: float) -> dict[str, Any]:
    import torch.distributed as dist  # type: ignore[import-not-found,unused-ignore]

    dist.init_process_group(backend, store=store, rank=rank, world_size=WORLD, timeout=timedelta(seconds=timeout))
    try:
        device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")

        def once(t: Any) -> float:
            start = time.perf_counter()
            dist.all_reduce(t)
            if backend == "nccl":
                torch.cuda.synchronize(device)
            return time.perf_counter() - start

        once(torch.ones(1, device=device))  # connections up
        pace = SMALL / max(once(torch.ones(SMALL // 4, device=device)), 1e-6)  # bytes a second
        if rank == 0:
            store.set("validator-size", str(int(min(MIB << 20, max(SMALL, pace * TARGET_S))) // 4 * 4))
        size = int(store.get("validator-size"))
        x = torch.ones(size // 4, dtype=torch.float32, device=device)
        first = once(x)
        if rank == 0:
            store.set("validator-repeats", str(max(1, min(REPEATS, int(BUDGET_S / max(first, 1e-6))))))
        repeats = int(store.get("validator-repeats"))
        samples = sorted([first, *(once(x) for _ in range(repeats))])
    finally:
        dist.destroy_process_group()
    algbw = size / samples[1] / 1e9
    return {
        "backend": backend,
        "ranks": WORLD,
        "bytes": size,
        "samples_s": [round(s, 6) for s in samples],
        "algbw_gbps": round(algbw, 4),
        "busbw_gbps": round(algbw * 2 * (WORLD - 1) / WORLD, 4),
    }


def serve(addr: str, iface: str, timeout: float) -> int:
    torch, why = torch_or_why()
    if torch is None:
        say({"error": why})
        return 0
    import torch.distributed as dist  # type: ignore[import-not-found,unused-ignore]

    pin(iface)
    backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    try:
        store = dist.TCPStore(addr, 0, WORLD, True, timedelta(seconds=timeout), wait_for_workers=False)  # type: ignore[attr-defined,unused-ignore]
    except Exception as e:  # noqa: BLE001 - the address cannot be bound: the answer
        say({"error": f"cannot listen on {addr}: {type(e).__name__}: {e}"[:300]})
        return 0
    say({"port": int(store.port), "backend": backend})
    try:
        measure(torch, store, 0, backend, timeout)  # rank 1 reports the figures
    except Exception as e:  # noqa: BLE001 - rank 1 never came, or the collective failed: rank 1 says so
        say({"error": f"{type(e).__name__}: {e}"[:300]})
    return 0


def join(addr: str, port: int, backend: str, iface: str, timeout: float) -> int:
    torch, why = torch_or_why()
    if torch is None:
        say({"error": why})
        return 0
    import torch.distributed as dist  # type: ignore[import-not-found,unused-ignore]

    pin(iface)
    try:
        store = dist.TCPStore(addr, port, WORLD, False, timedelta(seconds=timeout))  # type: ignore[attr-defined,unused-ignore]
        say({"allreduce": measure(torch, store, 1, backend, timeout)})
    except Exception as e:  # noqa: BLE001 - the answer, not a traceback
        say({"error": f"{type(e).__name__}: {e}"[:300]})
    return 0


def main(args: list[str]) -> int:
    try:
        if args[:1] == ["serve"] and len(args) == 4:
            return serve(args[1], args[2], max(1.0, min(600.0, float(args[3]))))
        if args[:1] == ["join"] and len(args) == 6 and args[3] in ("gloo", "nccl") and args[2].isdecimal():
            return join(args[1], int(args[2]), args[3], args[4], max(1.0, min(600.0, float(args[5]))))
    except ValueError:
        pass
    say({"error": f"usage: allreduce.py serve ADDR IFACE TIMEOUT | join ADDR PORT BACKEND IFACE TIMEOUT, got {args}"})
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
