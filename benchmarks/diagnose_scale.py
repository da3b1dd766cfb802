"""Scale benchmark for `validator diagnose` (issue 5).

Synthesizes logs for 1,024 ranks (about 1 GB: NCCL INFO chatter, training-step lines, Python
warnings; a few hundred fatal lines; one initiating rank whose CUDA error precedes everyone
else's watchdog timeout) in a temporary directory, then times

  * ``validator diagnose DIR -f json`` (checks it names the initiating rank), and
  * ``grep -E`` with the same trigger patterns (the scanner's anchors) over the same files,

and prints wall times, throughput and peak memory. A second, smaller corpus shows whether
memory stays flat as the logs grow. Then the hostile shapes of issue 10: one 2 GB line without a
newline, 1 GiB of one repeated ``RuntimeError: boom`` line, 64 MiB of distinct error lines (parsed one by one), and a
.gz of 500,000 one-byte members. Everything it writes is removed at the end. The last line is
one JSON object with all figures.

usage: python benchmarks/diagnose_scale.py [--ranks 1024] [--mb 1024] [--hostile-mb 2048] [--no-hostile] [--keep]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import measured  # noqa: E402
from validator.diagnose.anchors import ANCHORS  # noqa: E402

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


# runs the command as its child and prints the child's peak RSS (KiB): a per-command figure
PEAK = (
    "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
    "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "sys.stderr.write(f'\\npeak_kib={u.ru_maxrss} cpu_s={u.ru_utime + u.ru_stime}\\n'); sys.exit(p.returncode)"
)


CPU: dict[str, float] = {}  # command -> CPU seconds (user + sys, workers included) of its last run


def timed(cmd: list[str]) -> tuple[float, int, bytes]:
    """(seconds, peak RSS in KiB of the command and its workers' largest, stdout or stderr).
    The CPU seconds go to CPU[cmd[0]]: on a shared machine they say more than the wall time."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PEAK, *cmd], capture_output=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    tail = p.stderr.rsplit(b"peak_kib=", 1)
    peak = int(tail[1].split()[0]) if len(tail) == 2 else 0
    CPU[cmd[0]] = float(tail[1].split()[1].split(b"=")[1]) if len(tail) == 2 else 0.0
    return dt, peak, p.stdout if p.returncode in (0, 1) else tail[0]


def _write_repeated(path: Path, block: bytes, total: int) -> int:
    big = block * max(1, (1 << 22) // len(block))
    written = 0
    with path.open("wb") as f:
        while written < total:
            part = big[: total - written]
            f.write(part)
            written += len(part)
    return written


def hostile(base: Path, mb: int) -> dict[str, dict[str, float]]:
    """Issue 10 shapes, one file each: seconds, MB/s, peak RSS, and what diagnose said."""
    out: dict[str, dict[str, float]] = {}
    cases: list[tuple[str, str, bytes, int]] = [
        ("single_line", "rank0.log", b"x" * 1023 + b" ", mb << 20),
        ("one_error_line_1gib", "rank1.log", b"RuntimeError: boom\n", 1 << 30),
        ("distinct_error_lines", "rank2.log", b"", 64 << 20),
    ]
    for name, fname, block, total in cases:
        d = base / name
        d.mkdir()
        p = d / fname
        if block:
            size = _write_repeated(p, block, total)
        else:  # every line different: the cost per parsed line, not the flood shortcut
            lines = b"".join(b"RuntimeError: boom %09d\n" % i for i in range(1 << 16))
            size = _write_repeated(p, lines, total)
        secs, peak, text = timed([sys.executable, "-m", "validator", "diagnose", str(d), "-f", "json"])
        code = json.loads(text)["diagnosis"]["code"] if text.startswith(b"{") else text.decode()[-200:]
        cpu = CPU[sys.executable]
        out[name] = {"mb": size / 1e6, "s": secs, "mb_per_s": size / 1e6 / secs, "cpu_s": cpu, "rss_mib": peak / 1024}
        out[name]["mb_per_cpu_s"] = size / 1e6 / max(cpu, 1e-9)
        print(
            f"{name}: {size / 1e6:.0f} MB in {secs:.1f} s ({size / 1e6 / secs:.0f} MB/s; {cpu:.1f} CPU-s, "
            f"{size / 1e6 / max(cpu, 1e-9):.0f} MB per CPU-s), peak RSS {peak / 1024:.0f} MiB, code {code}"
        )
        shutil.rmtree(d)
    d = base / "gzip_members"
    d.mkdir()
    members = 500_000
    (d / "rank3.log").write_bytes(gzip.compress(b"a", mtime=0) * members)
    secs, peak, _ = timed([sys.executable, "-m", "validator", "diagnose", str(d), "-f", "json"])
    cpu = CPU[sys.executable]
    out["gzip_members"] = {"members": members, "s": secs, "cpu_s": cpu, "rss_mib": peak / 1024}
    print(f"gzip_members: {members} one-byte members in {secs:.1f} s ({cpu:.1f} CPU-s), peak RSS {peak / 1024:.0f} MiB")
    shutil.rmtree(d)
    return out


def floors(files: list[str], grep_ms_per_mb: float) -> dict[str, float]:
    """What one process cannot go below, in CPU ms per MB over the first 64 MB of the files, beside grep's
    (one process too): reading them in 4 MiB blocks; the scanner (anchors.anchored, the lines it hands
    over, no parsing); one bytes.find pass per anchor (the scanner before issue 25); one `re` alternation
    of the anchors (a pure regex pass)."""
    import re

    from validator.diagnose.anchors import anchored

    sample: list[str] = []
    for f in files:
        if sum(map(os.path.getsize, sample)) >= 64 << 20:
            break
        sample.append(f)
    mb = sum(map(os.path.getsize, sample)) / 1e6
    alternation = re.compile(b"|".join(re.escape(a) for a in ANCHORS))

    def blocks(f: str) -> list[bytes]:
        with open(f, "rb") as fh:
            return list(iter(lambda: fh.read(1 << 22), b""))

    def each_find(f: str) -> None:
        for b in blocks(f):
            for a in ANCHORS:
                b.find(a)

    def scanner(f: str) -> None:
        with open(f, "rb") as fh:
            for _ in anchored(fh):
                pass

    out = {"grep": grep_ms_per_mb}
    for name, fn in (("read", blocks), ("scanner", scanner), ("find_per_anchor", each_find),
                     ("re_alternation", lambda f: [alternation.findall(b) for b in blocks(f)])):  # fmt: skip
        t0 = time.process_time()
        for f in sample:
            fn(f)
        out[name] = (time.process_time() - t0) * 1000 / mb
    print(
        "floors, CPU ms per MB in one process: "
        + ", ".join(f"{k} {v:.2f} ({v / grep_ms_per_mb:.1f}x grep)" for k, v in out.items())
    )
    return out


def run(d: Path, label: str) -> dict[str, Any]:
    files = sorted(str(p) for p in d.glob("rank*.log"))
    size = sum(os.path.getsize(f) for f in files)
    pattern = "|".join(re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", a.decode()) for a in ANCHORS)  # each anchor literally
    if subprocess.run(["grep", "-E", "-c", pattern, os.devnull], capture_output=True).returncode == 2:
        raise SystemExit(f"diagnose_scale.py: grep -E refuses the anchors' pattern {pattern[:80]!r}...: no ratio")
    subprocess.run(["cat", *files[:1]], capture_output=True)  # warm the page cache evenly for both
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    g_dt, _, _ = timed(["grep", "-E", "-c", pattern, *files])
    v_dt, v_rss, out = timed([sys.executable, "-m", "validator", "diagnose", str(d), "-f", "json"])
    g_cpu, v_cpu = CPU["grep"], CPU[sys.executable]
    diag = json.loads(out)["diagnosis"]
    ok = diag["initiating_ranks"] == [INITIATOR]
    print(
        f"{label}: {len(files)} files, {size / 1e6:.0f} MB | grep -E {g_dt:.2f} s ({size / 1e6 / g_dt:.0f} MB/s) | "
        f"diagnose {v_dt:.2f} s ({size / 1e6 / v_dt:.0f} MB/s, {v_dt / g_dt:.1f}x grep) | CPU-s grep {g_cpu:.1f}, "
        f"diagnose {v_cpu:.1f} (all workers) | peak RSS of one process "
        f"{v_rss / 1024:.0f} MiB | verdict {diag['code']} rank {diag['initiating_ranks']} ({diag['confidence']}) "
        f"{'OK' if ok else 'WRONG'}"
    )
    floor = floors(files, g_cpu * 1000 / (size / 1e6))
    return {"mb": size / 1e6, "grep_s": g_dt, "diagnose_s": v_dt, "grep_cpu_s": g_cpu, "diagnose_cpu_s": v_cpu,
            "rss_mib": v_rss / 1024, "ok": float(ok), "floor_ms_per_mb": floor}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--hostile-mb", type=int, default=2048, help="size of the single-line file")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-hostile", action="store_true", help="only the two corpora (no hostile shapes)")
    ap.add_argument("--allow-busy", action="store_true", help="report the ratio measured on a busy machine")
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
        bad = {} if args.no_hostile else hostile(base, args.hostile_mb)
        summary = {
            "small": small,
            "full": full,
            "x_grep": full["diagnose_s"] / full["grep_s"],
            "x_grep_small": small["diagnose_s"] / small["grep_s"],
            "rss_growth_mib": full["rss_mib"] - small["rss_mib"],
            **bad,
        }
        measured(dict(sorted(summary.items())))
        return 0 if all(r["ok"] for r in results) else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
