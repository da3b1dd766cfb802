"""Scale benchmark for `validator diagnose` (issue 5).

Synthesizes logs for 1,024 ranks (about 1 GB: NCCL INFO chatter, training-step lines, Python
warnings; a few hundred fatal lines; one initiating rank whose CUDA error precedes everyone
else's watchdog timeout) in a temporary directory, then times

  * ``validator diagnose DIR -f json`` (checks it names the initiating rank), and
  * ``grep -E`` with the same trigger patterns (the scanner's anchors) over the same files,

and prints wall times, throughput and peak memory. A second, smaller corpus shows whether
memory stays flat as the logs grow. Everything it writes is removed at the end.

usage: python benchmarks/diagnose_scale.py [--ranks 1024] [--mb 1024] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from validator.diagnose.scan import ANCHORS  # noqa: E402

NOISE = [
    b"node@N@:12345:12399 [@L@] NCCL INFO Channel 03/0 : @R@[@L@] -> @R1@[@L@] via P2P/CUMEM/read\n",
    b"node@N@:12345:12399 [@L@] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n",
    b"[rank@R@]:[I1130 09:3@M@:26.201103723 ProcessGroupNCCL.cpp:1234] [PG ID 0 PG GUID 0(default_pg) Rank @R@] ProcessGroupNCCL initialization options: size: 1024, global rank: @R@\n",
    b"[default@L@]:step @S@ | loss 2.3456 | lr 3.0e-04 | grad_norm 1.234 | tokens/s 123456 | elapsed 12.3ms\n",
    b"2026-11-30 09:39:26,201 - INFO - train.py:88 - iteration @S@/100000 consumed samples 5000 throughput 123.4\n",
    b"[rank@R@]:[W1130 09:39:26.201103723 Utils.hpp:165] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())\n",
    b"[default@L@]:  data loader worker 3 prefetched 8 batches in 41.2 ms (queue depth 4)\n",
    b"[default@L@]:  memory allocated 61.2 GiB reserved 70.0 GiB peak 71.3 GiB\n",
]
INITIATOR = 417
FATAL_INITIATOR = [
    b"[rank@R@]:[E1130 10:05:38.100000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank @R@] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\n",
    b"[rank@R@]: RuntimeError: CUDA error: an illegal memory access was encountered\n",
]
FATAL_OTHERS = [
    b"[rank@R@]:[E1130 10:15:38.162555850 ProcessGroupNCCL.cpp:632] [Rank @R@] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=20585, OpType=ALLREDUCE, NumelIn=1259621, NumelOut=1259621, Timeout(ms)=600000) ran for 600000 milliseconds before timing out.\n",
]


def synthesize(d: Path, ranks: int, total_mb: int) -> tuple[int, int]:
    """One log per rank, ``total_mb`` in all; returns (bytes, fatal lines)."""
    per_rank = total_mb * (1 << 20) // ranks
    block = b"".join(
        NOISE[(i * 7) % len(NOISE)].replace(b"@S@", str(i).encode()).replace(b"@M@", str(i % 10).encode())
        for i in range(4000)
    )
    body = block * (per_rank // len(block) + 1)
    body = body[: body.rfind(b"\n", 0, per_rank) + 1]
    written = fatal = 0
    for r in range(ranks):
        subs = {
            b"@R@": str(r).encode(),
            b"@R1@": str((r + 1) % ranks).encode(),
            b"@L@": str(r % 8).encode(),
            b"@N@": str(r // 8).encode(),
        }
        text = body
        for k, v in subs.items():
            text = text.replace(k, v)
        tail = FATAL_INITIATOR if r == INITIATOR else FATAL_OTHERS if r % 4 == 0 else []
        extra = b"".join(t.replace(b"@R@", str(r).encode()) for t in tail)
        data = text + extra
        (d / f"rank{r:04d}.log").write_bytes(data)
        written += len(data)
        fatal += len(tail)
    return written, fatal


def timed(cmd: list[str]) -> tuple[float, int, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return dt, max(peak, before), p.stdout if p.returncode in (0, 1) else p.stderr


def run(d: Path, label: str) -> dict[str, float]:
    files = sorted(str(p) for p in d.glob("rank*.log"))
    size = sum(os.path.getsize(f) for f in files)
    pattern = "|".join(a.decode() for a in ANCHORS)
    subprocess.run(["cat", *files[:1]], capture_output=True)  # warm the page cache evenly for both
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    g_dt, _, _ = timed(["grep", "-E", "-c", pattern, *files])
    v_dt, v_rss, out = timed([sys.executable, "-m", "validator", "diagnose", str(d), "-f", "json"])
    diag = json.loads(out)["diagnosis"]
    ok = diag["initiating_ranks"] == [INITIATOR]
    print(
        f"{label}: {len(files)} files, {size / 1e6:.0f} MB | grep -E {g_dt:.2f} s ({size / 1e6 / g_dt:.0f} MB/s) | "
        f"diagnose {v_dt:.2f} s ({size / 1e6 / v_dt:.0f} MB/s, {v_dt / g_dt:.1f}x grep) | peak RSS of one process "
        f"{v_rss / 1024:.0f} MiB | verdict {diag['code']} rank {diag['initiating_ranks']} ({diag['confidence']}) "
        f"{'OK' if ok else 'WRONG'}"
    )
    return {"mb": size / 1e6, "grep_s": g_dt, "diagnose_s": v_dt, "rss_mib": v_rss / 1024, "ok": float(ok)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="diagnose-scale-"))
    try:
        results = []
        for label, mb in (("small", max(64, args.mb // 4)), ("full", args.mb)):
            d = base / label
            d.mkdir()
            t0 = time.perf_counter()
            size, fatal = synthesize(d, args.ranks, mb)
            print(
                f"synthesized {label}: {size / 1e6:.0f} MB, {fatal} fatal lines, {args.ranks} ranks in {time.perf_counter() - t0:.1f} s"
            )
            results.append(run(d, label))
            if not args.keep:
                shutil.rmtree(d)
        small, full = results
        print(
            f"memory growth from {small['mb']:.0f} MB to {full['mb']:.0f} MB of logs: {full['rss_mib'] - small['rss_mib']:+.0f} MiB"
        )
        return 0 if all(r["ok"] for r in results) else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
