"""Compute probe, on the node: a fixed matrix multiply per local device, repeated; standard
library only and self-contained (scan sends this source to ``python3 -c`` like the agent).

    compute.py [SAMPLES [WINDOW_S]]   print {"probe": "compute", "devices": [...], ...} on one line

Each device runs its multiply over and over for WINDOW_S (at least once), SAMPLES times; a
sample's rate is the work done in its window over the window's length. A device's figure is the
second-fastest sample (a high percentile: one stall of a busy node does not make it slow, while a
throttled device never reaches its peers' speed; a window longer than the kernel's CFS period,
100 ms, sees a CPU quota). The engine is torch on each CUDA device when torch sees one, torch on
the CPU when torch imports, else a pure-Python multiply of PY_SIZE x PY_SIZE floats: a node is
compared only with peers that ran the same engine on the same kind of device.
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
PY_SIZE = 40  # pure Python: 2 * 40^3 = 128,000 floating-point operations per multiply
TORCH_SIZE = 512  # torch on the CPU
CUDA_SIZE = 4096  # torch on a GPU
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


def python_multiply(n: int) -> Callable[[], None]:
    a = [[float((i * n + j) % 7 + 1) for j in range(n)] for i in range(n)]
    bt = [list(col) for col in zip(*a, strict=True)]

    def step() -> None:
        [[sum(x * y for x, y in zip(row, col, strict=True)) for col in bt] for row in a]

    return step


def figure(rates: list[float]) -> float:
    """The second-fastest sample (the fastest with one)."""
    ordered = sorted(rates)
    return ordered[-2] if len(ordered) >= 2 else ordered[-1]


def device_row(device: str, engine: str, n: int, rates: list[float]) -> dict[str, Any]:
    flops = 2.0 * n**3
    best = figure(rates)
    return {
        "device": device,
        "engine": engine,
        "size": n,
        "seconds": round(1.0 / best, 6),  # per multiply, at the figure's rate
        "gflops": round(best * flops / 1e9, 4),
        "samples": [round(r * flops / 1e9, 4) for r in rates],
    }


def measure(samples: int, window: float) -> list[dict[str, Any]]:
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
    except Exception:  # noqa: BLE001 - absent or broken: the stdlib fallback
        return [device_row("cpu", "python", PY_SIZE, timed(python_multiply(PY_SIZE), samples, window))]
    rows = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            dev = torch.device("cuda", i)
            a = torch.randn(CUDA_SIZE, CUDA_SIZE, device=dev, dtype=torch.float16)
            b = torch.randn(CUDA_SIZE, CUDA_SIZE, device=dev, dtype=torch.float16)
            torch.matmul(a, b)
            torch.cuda.synchronize(dev)
            rates = timed(
                functools.partial(torch.matmul, a, b), samples, window, functools.partial(torch.cuda.synchronize, dev)
            )
            row = device_row(f"cuda:{i}", "torch-cuda-fp16", CUDA_SIZE, rates)
            row["name"] = str(torch.cuda.get_device_name(i))[:100]
            rows.append(row)
        return rows
    torch.set_num_threads(1)  # one core: nodes with other core counts still compare per core
    a = torch.randn(TORCH_SIZE, TORCH_SIZE)
    b = torch.randn(TORCH_SIZE, TORCH_SIZE)
    return [device_row("cpu", "torch-cpu", TORCH_SIZE, timed(functools.partial(torch.matmul, a, b), samples, window))]


def main(args: list[str]) -> int:
    try:
        samples = max(1, min(50, int(args[0]))) if args else SAMPLES
        window = max(0.001, min(10.0, float(args[1]))) if len(args) > 1 else WINDOW_S
    except ValueError:
        print(json.dumps({"probe": "compute", "error": f"usage: compute.py [SAMPLES [WINDOW_S]], got {args}"}))
        return 2
    try:
        devices = measure(samples, window)
    except Exception as e:  # noqa: BLE001 - a failing device is the answer, not a traceback
        print(json.dumps({"probe": "compute", "error": f"{type(e).__name__}: {e}"[:300], "node": NODE}))
        return 0
    print(
        json.dumps({"probe": "compute", "cpu": cpu_model(), "unit": "GFLOP/s", "devices": devices, "node": NODE}),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
