"""The agent's /sys/class/infiniband reading on a tree shaped like a large RoCE node: N devices,
one port each, a 256-slot GID table with 4 populated GIDs (as `show_gids` shows pods and hosts),
built under a temporary directory from tests/fixtures/ib. Prints the collector's time and the
size of its reading; the last line is one JSON object.

    .venv/bin/python benchmarks/ib_collect.py [--devices 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.ibtree import ZERO, build, sysfs_files
from validator.agent.probe import ib_sysfs
from validator.facts.ib import parse_ib


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    port = {k.split("/", 1)[1]: v for k, v in sysfs_files("ibstat-roce-200.txt").items() if k.startswith("mlx5_0/")}
    gids = {
        k.split("/", 1)[1]: v for k, v in sysfs_files("show_gids-pod-macvlan.txt").items() if k.startswith("mlx5_0/")
    }
    change: dict[str, str | None] = {}
    for d in range(args.devices):
        for path, content in {**port, **gids, **{f"ports/1/gids/{g}": ZERO for g in range(8, 256)}}.items():
            change[f"mlx5_{d}/{path}"] = content
    with tempfile.TemporaryDirectory() as tmp:
        top = build(Path(tmp), change=change)
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            reading = ib_sysfs(str(top))
            best = min(best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        facts = parse_ib(reading, {})
        parse_s = time.perf_counter() - t0
    assert facts is not None and len(facts["used"]) == args.devices, facts and facts["used"]
    out = {
        "devices": args.devices,
        "collect_ms": round(best * 1000, 2),
        "parse_ms": round(parse_s * 1000, 2),
        "raw_bytes": len(json.dumps(reading)),
        "facts_bytes": len(json.dumps(facts)),
        "errors": reading["errors"],
    }
    print(f"{args.devices} RoCE devices, 256 GID slots each: collect {out['collect_ms']} ms (best of {args.repeat}), "
          f"parse {out['parse_ms']} ms, raw {out['raw_bytes']} B, facts {out['facts_bytes']} B")  # fmt: skip
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
