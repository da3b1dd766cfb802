"""Wall time that `validator preflight -- true` adds in front of a launch, on loopback.

    python benchmarks/preflight_overhead.py [N ...]     (default: 2 8 32; 5 repetitions each)
    python benchmarks/preflight_overhead.py --cpu [N]   (default 8: CPU time of each process)

For N participants (one per rank, all on this machine): the time from starting N processes of
`validator preflight --timeout 60 -- true` until the last one has exited, minus the same for N
plain `true` processes; beside it the same for N `python -c pass` (the interpreter's own start-up,
which every participant pays too). The last line is one JSON object: ratio_to_python_startup (the
largest, over N, of added time / python's own added time) and n32_s (time added for 32).

--cpu: the CPU time (user + system, with the children it waited for, such as `ip`) of each
process of N participants, median of 5 runs: the coordinator's, a participant's, and `python -c
pass`'s. Wall times on a shared 2-core machine follow its load; CPU times much less. Last line
{"cpu_ms": {"coordinator": c, "participant": p, "python": y}, "participant_to_python": p / y}.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.usage import counts, measured  # noqa: E402

VALIDATOR = shutil.which("validator", path=str(Path(sys.executable).parent)) or "validator"
REPEAT = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_all(cmds: list[list[str]], envs: list[dict[str, str]]) -> float:
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(c, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for c, e in zip(cmds, envs, strict=True)
    ]
    for p in procs:
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            raise SystemExit("a participant hung past 120 s") from None
        if p.returncode != 0:
            raise SystemExit(f"participant failed ({p.returncode}): {err.decode()[-500:]}")
    return time.monotonic() - t0


def cpu_of(cmds: list[list[str]], envs: list[dict[str, str]]) -> list[float]:
    """Each process's CPU seconds (user + system, its waited-for children included), in order."""
    procs = [
        subprocess.Popen(c, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for c, e in zip(cmds, envs, strict=True)
    ]
    order, cpu = {p.pid: i for i, p in enumerate(procs)}, [0.0] * len(procs)
    for _ in procs:
        pid, status, usage = os.wait4(-1, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"a process exited {os.waitstatus_to_exitcode(status)}")
        cpu[order[pid]] = usage.ru_utime + usage.ru_stime
    for p in procs:
        p.returncode = 0  # reaped above
    return cpu


def main_cpu(n: int) -> None:
    compiled()
    coordinator, participant, python = [], [], []
    for _ in range(REPEAT):
        envs = envs_for(n, free_port())
        got = cpu_of([[VALIDATOR, "preflight", "--timeout", "60", "--quiet", "--", "true"]] * n, envs)
        coordinator.append(got[0])  # rank 0 on 127.0.0.1 coordinates
        participant += got[1:]
        python += cpu_of([[sys.executable, "-c", "pass"]] * n, envs)
    ms = {k: round(statistics.median(v) * 1000, 1) for k, v in
          (("coordinator", coordinator), ("participant", participant), ("python", python))}  # fmt: skip
    print(f"CPU a process, {n} participants, median of {REPEAT}: coordinator {ms['coordinator']} ms, "
          f"participant {ms['participant']} ms, python -c pass {ms['python']} ms", flush=True)  # fmt: skip
    measured({"cpu_ms": ms, "participant_to_python": round(ms["participant"] / ms["python"], 2)})


def envs_for(n: int, port: int) -> list[dict[str, str]]:
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PET_")) and k not in ("RANK", "WORLD_SIZE")
    }
    return [
        dict(base, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
             MASTER_PORT=str(port))
        for r in range(n)
    ]  # fmt: skip


def compiled() -> None:
    """Byte-compile, as an installed package is (this machine sets PYTHONDONTWRITEBYTECODE, which
    would otherwise make every participant compile the validator's sources on each start)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "validator")], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))  # fmt: skip


def main(sizes: list[int]) -> None:
    compiled()
    print(f"{'N':>4} {'true s':>8} {'python s':>9} {'preflight s':>12} {'added s':>8} {'ratio':>6}"
          f"   (median of {REPEAT}; cores: {os.cpu_count()}; ratio: added / python -c pass's own)")  # fmt: skip
    rows = []
    for n in sizes:
        base, py, pre = [], [], []
        for _ in range(REPEAT):
            envs = envs_for(n, free_port())
            base.append(run_all([["true"]] * n, envs))
            py.append(run_all([[sys.executable, "-c", "pass"]] * n, envs))
            pre.append(run_all([[VALIDATOR, "preflight", "--timeout", "60", "--quiet", "--", "true"]] * n, envs))
        b, y, p = statistics.median(base), statistics.median(py), statistics.median(pre)
        ratio = (p - b) / max(y - b, 1e-3)
        rows.append({"n": n, "true_s": round(b, 3), "python_s": round(y, 3), "preflight_s": round(p, 3),
                     "added_s": round(p - b, 3), "ratio_to_python_startup": round(ratio, 2)})  # fmt: skip
        print(f"{n:>4} {b:>8.3f} {y:>9.3f} {p:>12.3f} {p - b:>8.3f} {ratio:>6.2f}", flush=True)
    last = {r["n"]: r for r in rows}
    measured({"ratio_to_python_startup": max(r["ratio_to_python_startup"] for r in rows),
              "n32_s": last[32]["added_s"] if 32 in last else None, "rows": rows})  # fmt: skip


if __name__ == "__main__":
    flag, ns = counts(sys.argv[1:], __doc__, ("--cpu",))
    if flag:
        main_cpu(ns[0] if ns else 8)
    else:
        main(ns or [2, 8, 32])
