"""How long `validator node-check` takes on this node, per mode: the whole command as Slurm or
node-problem-detector starts it (interpreter start-up included), and the in-process parts
(facts + readings, checks). Also with a resolver that never answers (a blackhole nameserver and a
hostname that is not in /etc/hosts, when run as root), where the 5 s budget must still hold.

    .venv/bin/python benchmarks/node_check.py [--repeat 5]

Prints a table; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from validator.nodecheck import gather, node_report  # noqa: E402

BLACKHOLE = "nameserver 192.0.2.1\noptions timeout:30 attempts:1\n"  # TEST-NET-1: no answer (or unreachable)


def command(argv: list[str], repeat: int, wrap: list[str] | None = None, cli: bool = False) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times, code = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        entry = ["validator"] if cli else ["validator", "node-check"]
        p = subprocess.run([*(wrap or []), sys.executable, "-m", *entry, *argv], env=env,
                           capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        times.append(time.perf_counter() - t0)
        code = p.returncode
    return statistics.median(times), code


def blackhole_wrap(tmp: Path) -> list[str] | None:
    """unshare: own mount and UTS namespaces, a resolv.conf pointing nowhere, an unknown hostname."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return None
    conf = tmp / "resolv.conf"
    conf.write_text(BLACKHOLE)
    script = f'mount --bind {conf} /etc/resolv.conf && hostname cv-bench-unresolvable && exec "$@"'
    return ["unshare", "-m", "-u", "sh", "-c", script, "sh"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    t0 = time.perf_counter()
    facts, readings = gather(30.0)
    t1 = time.perf_counter()
    node_report(facts, readings, None)
    t2 = time.perf_counter()
    out = {"gather_s": round(t1 - t0, 3), "checks_s": round(t2 - t1, 3), "cores": os.cpu_count()}
    print(f"in process: facts + readings {out['gather_s']:.3f} s, checks {out['checks_s']:.3f} s")
    for mode in ("report", "slurm-prolog", "npd"):
        seconds, code = command(["--mode", mode], args.repeat)
        out[f"{mode}_s"] = round(seconds, 3)
        print(f"{mode:<14} {seconds:.3f} s (median of {args.repeat}, exit {code})")
    seconds, code = command(["--version"], args.repeat, cli=True)
    out["cli_version_s"] = round(seconds, 3)
    print(f"{'cli --version':<14} {seconds:.3f} s (the typer CLI's start-up, which node-check skips)")
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"cv-bench-nodecheck-{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    wrap = blackhole_wrap(tmp)
    if wrap:
        seconds, code = command(["--mode", "npd"], args.repeat, wrap)
        out["npd_dns_blackhole_s"], out["npd_dns_blackhole_exit"] = round(seconds, 3), code
        print(f"{'npd, no DNS':<14} {seconds:.3f} s (median of {args.repeat}, exit {code}; budget 5 s)")
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
