"""Hostile files benchmark (issue 10): each attack on `validator check` and `validator profiles
validate`, run as a real command; prints per attack the exit code, wall time, the child's peak
RSS and the length of its stderr (one line each: the error quotes a short prefix at most), then
one JSON object on the last line. Target: exit 2, one line, peak RSS under 512 MiB each.

    .venv/bin/python benchmarks/hostile_files.py [--big-mib 500]

Files are written under a temporary directory (the 500 MB one sparse) and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.factories import rank_job  # noqa: E402  (after the path is set)


def facts(**launch: object) -> str:
    doc = json.loads(json.dumps(rank_job(2, 1)[0]))
    doc["launch"].update(launch)
    return json.dumps(doc)


def attacks(d: Path, big_mib: int) -> list[tuple[str, list[str]]]:
    """(name, command arguments) after writing each attack's file."""
    files: dict[str, bytes] = {
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "digits.json": b'{"schema": 1, "pid": ' + b"7" * 5000 + b"}",
        "infinity.json": b'{"schema": 1, "pid": Infinity}',
        "world_size.json": facts(world_size=10**9).encode(),
        "tiny_docs.json": b"[" + b",".join([b"{}"] * ((16 << 20) // 3 - 2)) + b"]",
        "binary.yaml": b"\x00\xff\xfe binary",
        "complex_key.yaml": b"? [a, b]\n: 1\n",
        "digits.yaml": b"nodes: " + b"9" * 5000 + b"\n",
        "alias_bomb.yaml": "".join(
            f"{n}: &{n} [{', '.join([f'*{p}'] * 9 if p else ['lol'] * 9)}]\n"
            for p, n in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
        ).encode(),
        "hosts_range.yaml": b"hosts: n[0-9999999]\n",
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    with (d / "big.json").open("wb") as f:
        f.write(b'{"schema": 1, "kind": "' + b"x" * 1000)
        f.truncate(big_mib << 20)
    os.mkfifo(d / "fifo.json")
    out = [(name, ["check", str(d / name)]) for name in files if name.endswith(".json")]
    out += [("big.json", ["check", str(d / "big.json")]), ("fifo.json", ["check", str(d / "fifo.json")])]
    out += [(name, ["profiles", "validate", str(d / name)]) for name in files if name.endswith(".yaml")]
    return out


def run(args: list[str]) -> tuple[int, float, int, str]:
    """Exit code, wall seconds, peak RSS (KiB, from GNU time: a child of this process would
    count this process's own memory until its exec) and stderr of one command."""
    started = time.monotonic()
    p = subprocess.run(
        ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "validator", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
        check=False,
    )
    err, _, rss = p.stderr.rstrip().rpartition("\n")
    return p.returncode, time.monotonic() - started, int(rss), err.replace("Command exited with non-zero status 2", "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--big-mib", type=int, default=500)
    opts = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in attacks(Path(tmp), opts.big_mib):
            rc, wall, rss_kib, err = run(args)
            lines = err.strip().splitlines()
            results.append(
                {"attack": name, "command": args[0], "rc": rc, "wall_s": round(wall, 2),
                 "peak_rss_mib": round(rss_kib / 1024, 1), "stderr_lines": len(lines),
                 "longest_line": max((len(x) for x in lines), default=0)}
            )  # fmt: skip
            print(
                f"{args[0]:8} {name:18} rc={rc} {wall:6.2f} s  {rss_kib / 1024:7.1f} MiB  {lines[-1][:110] if lines else ''}"
            )
    ok = all(r["rc"] == 2 and float(r["peak_rss_mib"]) < 512 and "Traceback" not in str(r) for r in results)
    print(json.dumps({"benchmark": "hostile_files", "ok": ok, "attacks": results}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
