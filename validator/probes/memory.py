"""Memory probe, on the node: host memory bandwidth, by large copies between two buffers, timed
and repeated; standard library only and self-contained (scan sends this source like the agent).

    memory.py [SAMPLES [WINDOW_S [MIB]]]   print {"probe": "memory", "devices": [...], ...} on one line

The copy is ``dst[:] = src`` over two MIB MiB buffers through memoryviews (one memmove, read and
write: the rate is bytes copied per second), done over and over for WINDOW_S (at least once),
SAMPLES times; the figure is the second-fastest sample, as for compute.py. Buffers larger than
the caches measure memory, not cache. Where torch sees a GPU, each device's memory is also
measured (a device-to-device copy) and the host-to-device copy from pinned memory.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

SAMPLES = 5
WINDOW_S = 0.25
MIB = 64  # per buffer: larger than any last-level cache of a single socket
NODE = os.environ.get("SLURMD_NODENAME", "")


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), the node's hardware type where it has no GPU."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "cpu model")):
                    return line.split(":", 1)[1].strip()[:100]
    except OSError:
        pass
    return platform.machine()


def timed(
    step: Callable[[], object], samples: int, window: float, sync: Callable[[], object] = lambda: None
) -> list[float]:
    """Per sample: (steps done in the window) / seconds. One step at least, however slow."""
    out = []
    for _ in range(samples):
        done, t0 = 0, time.perf_counter()
        while True:
            step()
            done += 1
            sync()
            spent = time.perf_counter() - t0
            if spent >= window:
                break
        out.append(done / spent)
    return out


def figure(rates: list[float]) -> float:
    ordered = sorted(rates)
    return ordered[-2] if len(ordered) >= 2 else ordered[-1]


def row(device: str, what: str, size: int, rates: list[float]) -> dict[str, Any]:
    return {"device": device, "engine": what, "bytes": size, "gbps": round(figure(rates) * size / 1e9, 4),
            "samples": [round(r * size / 1e9, 4) for r in rates]}  # fmt: skip


def host(samples: int, window: float, mib: int) -> dict[str, Any]:
    size = mib << 20
    src, dst = bytearray(os.urandom(1 << 20)) * mib, bytearray(size)
    a, b = memoryview(src), memoryview(dst)

    def step() -> None:
        b[:] = a

    step()  # touch every page first
    return row("host", "copy", size, timed(step, samples, window))


def devices(samples: int, window: float, mib: int) -> list[dict[str, Any]]:
    if not any(os.path.exists(d) for d in ("/dev/nvidiactl", "/dev/kfd")):  # no GPU driver: torch's import (1 s) spared
        return []
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
    except Exception:  # noqa: BLE001 - no torch: host memory only
        return []
    if not torch.cuda.is_available():
        return []
    out = []
    size = (mib << 20) * 4  # device memory is faster: a larger copy
    for i in range(torch.cuda.device_count()):
        dev = torch.device("cuda", i)
        a = torch.empty(size, dtype=torch.uint8, device=dev)
        b = torch.empty(size, dtype=torch.uint8, device=dev)
        pinned = torch.empty(size, dtype=torch.uint8).pin_memory()

        def sync(d: Any = dev) -> None:
            torch.cuda.synchronize(d)

        name = str(torch.cuda.get_device_name(i))[:100]  # the hardware type, as compute.py gives it
        copy = row(f"cuda:{i}", "device-copy", size, timed(functools.partial(b.copy_, a), samples, window, sync))
        upload = row(f"cuda:{i}", "host-to-device", size,
                     timed(functools.partial(a.copy_, pinned, non_blocking=True), samples, window, sync))  # fmt: skip
        out += [{**copy, "name": name}, {**upload, "name": name}]
    return out


def main(args: list[str]) -> int:
    try:
        samples = max(1, min(50, int(args[0]))) if args else SAMPLES
        window = max(0.001, min(10.0, float(args[1]))) if len(args) > 1 else WINDOW_S
        mib = max(1, min(1024, int(args[2]))) if len(args) > 2 else MIB
    except ValueError:
        print(json.dumps({"probe": "memory", "error": f"usage: memory.py [SAMPLES [WINDOW_S [MIB]]], got {args}"}))
        return 2
    try:
        rows = [host(samples, window, mib), *devices(samples, window, mib)]
    except Exception as e:  # noqa: BLE001 - MemoryError, a failing device: the answer, not a traceback
        print(json.dumps({"probe": "memory", "error": f"{type(e).__name__}: {e}"[:300], "node": NODE}))
        return 0
    print(
        json.dumps({"probe": "memory", "cpu": cpu_model(), "unit": "GB/s", "devices": rows, "node": NODE}), flush=True
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
