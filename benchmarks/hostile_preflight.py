"""Issue 10's attacks on the preflight coordinator, beside a real 8-rank job on loopback.

    python benchmarks/hostile_preflight.py [--ranks 8] [--timeout 30] [--scale 1.0]

For each attack: rank 0 (the coordinator, a real `validator preflight` process) starts, the
attack is put in place while it gathers, then the other ranks start (real processes; for the
replay, rank 7 is this process speaking the protocol, so the replay can follow its registration).
One JSON line per attack: whether every legitimate rank got the same, correct verdict (exit code
and report), the slowest rank's time from its start to its verdict against the deadline + 2 s,
and the coordinator's peak RSS (VmHWM, polled from /proc) against 512 MiB. The last line is one
JSON object summarising. ``--scale`` multiplies the attack sizes (1.0: the issue's figures).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.conftest import VALIDATOR, free_port  # noqa: E402
from tests.harness import hostile  # noqa: E402
from tests.preflight.conftest import base_env, collect, ranks, start  # noqa: E402
from validator import pipeline  # noqa: E402
from validator.preflight import protocol as wire  # noqa: E402
from validator.preflight.coordinator import raise_nofile  # noqa: E402

RSS_LIMIT = 512 << 20
HOLD_S = 2.0  # how long an attack runs before the job's other ranks start (it goes on beside them)


class Peak(threading.Thread):
    """The coordinator's VmHWM, polled until it exits."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stop.is_set():
            value = hostile.peak_rss(self.pid)
            if not value:
                return
            self.peak = max(self.peak, value)
            time.sleep(0.02)


def body_of(env: dict[str, str]) -> bytes:
    return json.dumps(pipeline.probe_local(environ=base_env(**env), port_check=False), separators=(",", ":")).encode()


def scenario(
    name: str, n: int, timeout: float, attack: Callable[[int, list[dict[str, str]]], Any], want: int = 0, **env: str
) -> dict[str, Any]:
    """``want``: the correct exit code (1 for a flood that goes on past the verdict: PRE009)."""
    port = free_port()
    envs = ranks(n, port, **env)
    tmp = Path(tempfile.mkdtemp(prefix="hostile-"))
    args = ["--timeout", str(timeout), "--fail-on", "info"]
    procs: list[tuple[Any, Path, float]] = []

    def launch(r: int) -> None:
        report = tmp / f"rank{r}.json"
        procs.append((start([*VALIDATOR, "preflight", *args], base_env(**envs[r]), report), report, time.monotonic()))

    launch(0)
    peak = Peak(procs[0][0].pid)
    hostile.STOP.clear()
    hostile.connect(port).close()  # the coordinator listens
    t0 = time.monotonic()
    got: list[Any] = []

    def run_attack() -> None:
        with contextlib.suppress(OSError):  # raised once the coordinator is gone: the job has its verdict
            got.append(attack(port, envs))  # sockets to hold, or a function finishing an in-process rank

    thread = threading.Thread(target=run_attack, daemon=True)
    thread.start()
    thread.join(60 if name == "replay" else HOLD_S)  # the attack takes hold (or is over); the job goes on
    attack_s = time.monotonic() - t0
    for r in range(1, n):
        if not (name == "replay" and r == n - 1):
            launch(r)
    extra = got[0] if got else None
    inproc = extra() if callable(extra) else None
    runs = collect(procs, limit=timeout + 60)
    peak.stop.set()
    hostile.STOP.set()
    thread.join(60)
    extra = got[0] if got else None
    if isinstance(extra, list):
        for s in extra:
            s.close()
    reports = [r.report for r in runs] + ([inproc["report"]] if inproc else [])
    codes = [r.rc for r in runs] + ([inproc["exit_code"]] if inproc else [])
    seconds = [r.seconds for r in runs] + ([inproc["seconds"]] if inproc else [])
    agree = bool(reports[0]) and all(rep == reports[0] for rep in reports) and set(codes) == {want}
    traceback = any("Traceback" in r.err + r.out for r in runs)
    first = reports[0] or {"findings": []}
    refused = [f["message"].split("; e.g.")[0] for f in first["findings"] if f["code"] == "PRE004"]
    return {"attack": name, "ranks": n, "agree": agree, "exit_codes": codes, "traceback": traceback,
            "attack_before_ranks_s": round(attack_s, 2), "verdict_s": round(max(seconds), 2),
            "verdict_after_last_start_s": round(max(r.seconds for r in runs[1:]) if n > 1 else 0.0, 2),
            "deadline_s": timeout, "within_deadline_plus_2s": max(seconds) <= timeout + 2,
            "coordinator_peak_rss_mib": round(peak.peak / 2**20, 1), "rss_ok": peak.peak < RSS_LIMIT,
            "refusals": refused, "pre009": [f["message"] for f in first["findings"] if f["code"] == "PRE009"]}  # fmt: skip


def replay_attack(count: int) -> Callable[[int, list[dict[str, str]]], Any]:
    def attack(port: int, envs: list[dict[str, str]]) -> Callable[[], dict[str, Any]]:
        t0 = time.monotonic()
        body = body_of(envs[-1])  # the last rank is this process
        sock, ack, _ = hostile.register(port, body, "", wire.new_nonce())
        assert ack["type"] == "ack", ack
        for _ in range(count):  # copies of its facts (same host and pid) without its token
            s, _, _ = hostile.register(port, body, "", None)
            s.close()

        def finish() -> dict[str, Any]:
            sock.settimeout(120)
            try:
                verdict = wire.recv_msg(sock, wire.MAX_VERDICT)
            except (OSError, wire.ProtocolError) as e:
                verdict = {"report": None, "exit_code": f"no verdict: {e}"}
            sock.close()
            return {
                "report": verdict.get("report"),
                "exit_code": verdict.get("exit_code"),
                "seconds": time.monotonic() - t0,
            }

        return finish

    return attack


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args()
    raise_nofile()
    k = a.scale

    def spam(port: int, _: list[dict[str, str]]) -> None:
        hostile.spam_job_ids(port, int(1300 * k), 15_000)  # 15 KB ids: "another job"
        hostile.spam_job_ids(port, int(100 * k), 60_000)  # 60 KB ids: over the header limit

    def malformed(port: int, envs: list[dict[str, str]]) -> None:
        frames = hostile.malformed_frames(body_of(envs[1]))
        for _ in range(max(1, int(20 * k))):
            hostile.send_all(port, frames)

    def flood(port: int, _: list[dict[str, str]]) -> None:
        hostile.flood(port, hostile.STOP, limit=timeout_s)  # until the job has its verdict

    timeout_s = a.timeout + 30
    attacks: list[tuple[str, Callable[[int, list[dict[str, str]]], Any], dict[str, str]]] = [
        ("none", lambda port, envs: None, {}),
        ("refusal spam", spam, {}),
        ("refusal spam with VALIDATOR_SECRET", spam, {"VALIDATOR_SECRET": "s3cret"}),
        ("replay", replay_attack(int(100 * k)), {}),
        ("idle flood", lambda port, envs: hostile.idle_flood(port, int(2000 * k)), {}),
        ("memory", lambda port, envs: hostile.big_bodies(port, int(1020 * k)), {}),
        ("deep nesting and non-finite numbers", malformed, {}),
        ("flood: empty and garbage connections, until the verdict", flood, {}),
    ]
    lines = []
    for name, attack, env in attacks:
        line = scenario(name, a.ranks, a.timeout, attack, 1 if name.startswith("flood") else 0, **env)
        print(json.dumps(line), flush=True)
        lines.append(line)
    ok = all(x["agree"] and x["within_deadline_plus_2s"] and x["rss_ok"] and not x["traceback"] for x in lines)
    print(json.dumps({"benchmark": "hostile_preflight", "ranks": a.ranks, "deadline_s": a.timeout, "scale": k,
                      "all_agree": all(x["agree"] for x in lines),
                      "max_verdict_s": max(x["verdict_s"] for x in lines),
                      "max_coordinator_peak_rss_mib": max(x["coordinator_peak_rss_mib"] for x in lines),
                      "targets_met": ok}))  # fmt: skip


if __name__ == "__main__":
    main()
