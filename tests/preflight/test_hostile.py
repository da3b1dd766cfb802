"""Issue 10's attacks on a live coordinator, each beside real `validator preflight` ranks on
loopback: every legitimate rank gets the same, correct verdict and exit code, and nothing prints
a traceback. The attack is put in place while the job gathers (all ranks but the last have
started), then the last rank starts; the coordinator decides when it arrives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VALIDATOR
from tests.harness import hostile
from tests.preflight.conftest import Run, base_env, collect, ranks, start
from validator import pipeline
from validator.preflight import protocol as wire
from validator.preflight import refusals


@dataclass
class Job:
    """Real preflight ranks; rank 0 is the coordinator."""

    tmp: Path
    envs: list[dict[str, str]]
    args: tuple[str, ...] = ("--timeout", "60")
    procs: list[Any] = field(default_factory=list)

    def start(self, *which: int) -> None:
        for r in which:
            report = self.tmp / f"rank{r}-{time.monotonic_ns()}.json"
            proc = start([*VALIDATOR, "preflight", *self.args], base_env(**self.envs[r]), report)
            self.procs.append((proc, report, time.monotonic()))

    def finish(self) -> list[Run]:
        return collect(self.procs)


def agreed(runs: list[Run], rc: int = 0) -> dict[str, Any]:
    """Every rank exited ``rc`` with the same report and no traceback; that report."""
    for r in runs:
        assert "Traceback" not in r.err + r.out, r.err[-3000:]
    assert [r.rc for r in runs] == [rc] * len(runs), [r.err[-1500:] for r in runs]
    reports = [r.report for r in runs]
    assert reports[0] is not None and all(rep == reports[0] for rep in reports), "one verdict for everyone"
    return reports[0]


def refused(report: dict[str, Any]) -> dict[str, int]:
    """PRE004 findings: reason -> count."""
    out = {}
    for f in report["findings"]:
        if f["code"] == "PRE004":
            count, _, rest = f["message"].partition(" connection(s) ")
            out[rest.split("; e.g. ")[0]] = int(count)
    return out


def own_body(env: dict[str, str]) -> bytes:
    facts = pipeline.probe_local(environ=base_env(**env), port_check=False)
    return json.dumps(facts, separators=(",", ":")).encode()


@pytest.mark.parametrize("secret", ["", "s3cret"])
def test_refusal_spam_with_huge_job_ids(tmp_path: Path, port: int, secret: str) -> None:
    extra = {"VALIDATOR_SECRET": secret} if secret else {}
    job = Job(tmp_path, ranks(4, port, **extra), ("--timeout", "60", "--fail-on", "info"))
    job.start(0, 1, 2)
    spam = hostile.spam_job_ids(port, 150, 15_000)  # each a different 15 KB job id
    oversized = hostile.spam_job_ids(port, 20, 60_000)  # over the header limit
    job.start(3)
    report = agreed(job.finish())
    assert spam == {"reject": 150} and oversized == {"closed": 20}
    counts = refused(report)
    assert counts[refusals.OTHER_JOB] == 150 and counts[refusals.MALFORMED] == 20, counts
    assert all(len(f["message"]) < 400 for f in report["findings"]), "refusals are folded, ids cut short"
    assert len(json.dumps(report)) < 32_000, "the verdict stays small whatever strangers send"
    assert report["summary"]["info"] == 2, "reported, yet --fail-on info still passes: strangers never fail a job"


@pytest.mark.parametrize("secret", ["", "s3cret"])
def test_replayed_frame_does_not_displace_a_rank(tmp_path: Path, port: int, secret: str) -> None:
    envs = ranks(4, port, **({"VALIDATOR_SECRET": secret} if secret else {}))
    job = Job(tmp_path, envs)
    job.start(0, 1)
    body = own_body(envs[2])  # rank 2 is this test process, speaking the protocol as a participant does
    rank2, ack, sent = hostile.register(port, body, "", "token-of-rank-2", secret.encode() or None)
    assert ack["type"] == "ack", ack
    forged = [hostile.register(port, body, "", token)[1] for token in (None, "guessed")]  # same host and pid
    verbatim = hostile.replay(port, sent) if secret else None  # an eavesdropper's copy of rank 2's bytes
    job.start(3)
    rank2.settimeout(60)
    verdict = hostile.final_verdict(rank2)
    rank2.close()
    report = agreed(job.finish())
    assert verdict["type"] == "verdict" and verdict["exit_code"] == 0 and verdict["report"] == report
    assert report["participants"] == 4
    why = refusals.AUTH if secret else refusals.IMPOSTOR  # without the secret, no MAC; else, no token
    assert all(f["type"] == "reject" and why in f["reason"] for f in forged), forged
    if verbatim is not None:  # the MAC covers the nonce of rank 2's own connection: a copy is refused
        assert verbatim["type"] == "reject" and refusals.AUTH in verbatim["reason"], verbatim
    assert refused(report)[why] == len(forged) + (verbatim is not None)


def test_idle_flood_cannot_keep_a_rank_out(tmp_path: Path, port: int) -> None:
    job = Job(tmp_path, ranks(3, port))
    job.start(0, 1)
    hostile.connect(port).close()  # the coordinator listens
    flood = hostile.idle_flood(port, 1100)  # more than the connection limit (1024)
    assert len(flood) == 1100
    seen = hostile.drain(flood, 30)  # evicted at the limit, or dropped as idle after SPEAK_S
    assert seen == {"reject": 1100}, seen
    job.start(2)
    report = agreed(job.finish())
    counts = refused(report)
    assert counts[refusals.EVICTED] >= 1100 - 1024 and counts[refusals.IDLE] >= 1000, counts
    assert counts[refusals.EVICTED] + counts[refusals.IDLE] >= 1100  # and a slow rank 1 may be evicted too


def test_flood_beside_late_rank(tmp_path: Path, port: int) -> None:
    """The flood is still held when the last rank connects: it evicts the oldest idle socket."""
    job = Job(tmp_path, ranks(3, port))
    job.start(0, 1)
    hostile.connect(port).close()
    flood = hostile.idle_flood(port, 1030)
    try:
        job.start(2)
        report = agreed(job.finish())
    finally:
        for s in flood:
            s.close()
    assert refused(report)[refusals.EVICTED] >= 1030 - 1024, refused(report)


def test_memory_many_connections_holding_big_bodies(tmp_path: Path, port: int) -> None:
    job = Job(tmp_path, ranks(3, port))
    job.start(0, 1)
    hostile.connect(port).close()
    coord_pid = job.procs[0][0].pid
    before = hostile.peak_rss(coord_pid)
    held = hostile.big_bodies(port, 120)  # 480 MiB announced, 4 MiB each
    try:
        after = hostile.peak_rss(coord_pid)
        job.start(2)  # its small facts make room by dropping a big body
        report = agreed(job.finish())
    finally:
        for s in held:
            s.close()
    assert 0 < before < after, "the coordinator was alive and buffered bodies"
    assert after - before < refusals.BODY_BUDGET + (64 << 20), f"{(after - before) >> 20} MiB buffered"
    assert after < 512 << 20
    assert refused(report)[refusals.BUDGET] >= 120 - refusals.BODY_BUDGET // wire.MAX_FACTS


def test_deep_nesting_and_non_finite_numbers(tmp_path: Path, port: int) -> None:
    envs = ranks(3, port)
    job = Job(tmp_path, envs)
    job.start(0, 1)
    frames = hostile.malformed_frames(own_body(envs[2]))
    seen = hostile.send_all(port, frames)
    job.start(2)
    report = agreed(job.finish())
    assert seen["deep header"] == "closed" and seen["header Infinity"] == "closed"  # unreadable: dropped
    for name in set(frames) - {"deep header", "header Infinity"}:
        assert refusals.INVALID in seen[name], (name, seen[name])
    assert "nested more than" in seen["deep body"] and "Infinity is not a JSON number" in seen["pid Infinity"]
    assert "integer of 5,000 digits" in seen["5000-digit int"]
    counts = refused(report)
    assert counts[refusals.MALFORMED] == 2 and counts[refusals.INVALID] == len(frames) - 2, counts


def test_rank_refused_at_the_connection_limit_says_so(tmp_path: Path) -> None:
    """A coordinator whose every connection is a registered participant refuses more with a reason
    before its hello; the refused rank reports that, not "port held by another program". (A limit
    of 3 on a coordinator in this process: reaching 1,024 registered participants is the benchmark's.)"""
    own = pipeline.probe_local(environ=base_env(**ranks(8, 1)[0]), port_check=False)
    live = hostile.Live(own, set(range(8)), None, max_connections=3)
    envs = ranks(8, live.port)
    held = []
    try:
        for r in (1, 2, 3):
            facts = json.loads(own_body(envs[r]))
            facts["pid"] += r  # three participants of this process, told apart by pid
            s, ack, _ = hostile.register(live.port, json.dumps(facts).encode(), "", f"t{r}")
            assert ack["type"] == "ack", ack
            held.append(s)
        job = Job(tmp_path, envs, ("--timeout", "3"))
        job.start(4)
        (run,) = job.finish()
        held.pop().close()  # a free connection, but no room for a 5th participant
        facts["pid"] += 1
        _, full, _ = hostile.register(live.port, json.dumps(facts).encode(), "", "t5")
    finally:
        for s in held:
            s.close()
        live.close()
    assert run.rc == 1 and "Traceback" not in run.err, run.err
    codes = {f["code"]: f["message"] for f in (run.report or {"findings": []})["findings"]}
    assert "PRE002" not in codes, "a busy coordinator is not another program on the port"
    assert refusals.CAPACITY in codes["PRE003"], codes
    assert full["type"] == "reject" and refusals.FULL in full["reason"], full
    assert live.c is not None and live.c.rejected.by_reason[refusals.CAPACITY].count >= 1
    assert live.errors == []


def test_stranger_frames_never_reach_a_participant_report(tmp_path: Path, port: int) -> None:
    """Control characters in a stranger's job id are escaped and cut in every report."""
    job = Job(tmp_path, ranks(2, port))
    job.start(0)
    with hostile.connect(port) as s:
        hostile.reply(s)
        s.sendall(hostile.header("\x1b[2J\x1b]0;pwned\x07" + "A" * 5000, 10))
        assert hostile.reply(s)["type"] == "reject"
    job.start(1)
    runs = job.finish()
    report = agreed(runs)
    assert all("\x1b" not in r.err for r in runs) and "\\x1b[2J" in json.dumps(report)
    assert os.linesep.join(r.err for r in runs).count("A" * 50) == 0


class Flood:
    """``hostile.flood`` on the job's port from a thread, from now until ``stop`` (bounded)."""

    def __init__(self, port: int) -> None:
        self.until = threading.Event()
        self.made: list[int] = []
        self.thread = threading.Thread(target=lambda: self.made.append(hostile.flood(port, self.until)), daemon=True)
        self.thread.start()

    def stop(self) -> int:
        self.until.set()
        self.thread.join(10)
        return self.made[0] if self.made else 0


def started_with_stderr(job: Job, r: int, stderr: Path, *command: str) -> None:
    """Rank ``r`` of ``job`` running ``command`` after its preflight, its stderr in a file that a
    test can read while it runs."""
    report = job.tmp / f"rank{r}.json"
    argv = [*VALIDATOR, "preflight", "--output", str(report), *job.args, "--", *command]
    proc = subprocess.Popen(
        argv, env=base_env(**job.envs[r]), stdout=subprocess.PIPE, stderr=stderr.open("w"), text=True
    )
    job.procs.append((proc, report, time.monotonic()))


def finished(job: Job, stderr: list[Path]) -> list[Run]:
    """``job.finish()``, each run's stderr read back from its file."""
    runs = job.finish()
    for run, path in zip(runs, stderr, strict=True):
        run.err = path.read_text()
    return runs


def test_a_flood_still_going_when_the_verdict_is_due_fails_the_job_naming_its_source(tmp_path: Path, port: int) -> None:
    """A stranger floods the job's port (empty and garbage connections, as fast as one thread
    makes them) and never stops. The job's TCPStore would meet the same flood the moment the
    verdict lets it start, and torch's does not survive one: every rank fails with PRE009 naming
    the source, after the coordinator waited for the flood to stop, and no rank runs the job."""
    job = Job(tmp_path, ranks(2, port), ("--timeout", "60"))
    run = ["sh", "-c", f"touch {tmp_path}/ran-$RANK"]
    started_with_stderr(job, 0, tmp_path / "coordinator.err", *run)
    hostile.connect(port).close()  # the coordinator listens
    flood = Flood(port)
    try:
        started_with_stderr(job, 1, tmp_path / "rank1.err", *run)
        runs = finished(job, [tmp_path / "coordinator.err", tmp_path / "rank1.err"])
    finally:
        made = flood.stop()
    assert made > 500, f"the flood made only {made} connections"
    assert [r.rc for r in runs] == [1, 1], [(tmp_path / "coordinator.err").read_text()[-2000:]]
    reports = [r.report for r in runs]
    assert reports[0] is not None and reports[0] == reports[1], "one verdict for everyone"
    (pre009,) = [f for f in reports[0]["findings"] if f["code"] == "PRE009"]
    assert pre009["hosts"] == "127.0.0.1" and "still flooded" in pre009["message"], (pre009, refused(reports[0]))
    assert sum(refused(reports[0]).values()) > 100, refused(reports[0])
    assert not list(tmp_path.glob("ran-*")), "no rank ran the job into the flood"
    err = (tmp_path / "coordinator.err").read_text()
    assert "is flooded" in err and "127.0.0.1" in err and "Traceback" not in err, err


def test_a_flood_that_stops_while_the_verdict_waits_lets_the_job_run(tmp_path: Path, port: int) -> None:
    """The same flood, stopped as soon as the coordinator says it waits for it: the verdict is a
    pass (the flood is information, PRE004, with each kind of connection counted) and every
    rank runs the job."""
    job = Job(tmp_path, ranks(2, port), ("--timeout", "60"))
    run = ["sh", "-c", f"touch {tmp_path}/ran-$RANK"]
    err = tmp_path / "coordinator.err"
    started_with_stderr(job, 0, err, *run)
    hostile.connect(port).close()
    flood = Flood(port)
    try:
        started_with_stderr(job, 1, tmp_path / "rank1.err", *run)
        for _ in range(400):  # bounded: 40 s
            if "is flooded" in err.read_text() or job.procs[0][0].poll() is not None:
                break
            time.sleep(0.1)
    finally:
        flood.stop()
    runs = finished(job, [err, tmp_path / "rank1.err"])
    assert "is flooded" in err.read_text(), err.read_text()[-2000:]
    report = agreed(runs)
    assert not [f for f in report["findings"] if f["code"] == "PRE009"]
    counts = refused(report)
    assert counts.get(refusals.SILENT, 0) > 20 and sum(counts.values()) >= refusals.FLOOD_N, counts
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == ["ran-0", "ran-1"]


def test_a_coordinator_stalled_for_seconds_is_waited_for_not_taken_for_a_stranger(tmp_path: Path, port: int) -> None:
    """A coordinator that accepts (the kernel does) but says nothing for seconds is a loaded or
    stalled node, not a stale store: each try waits twice as long for the hello (1, 2, 4 s). Before,
    three silent seconds made the other ranks report the port held by another program (PRE002), seen
    in CI with 40 torch processes on 2 cores. Here the coordinator is stopped (SIGSTOP) for 6 s."""
    envs = [{"RANK": str(r), "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)} for r in range(2)]  # fmt: skip
    job = Job(tmp_path, envs, ("--timeout", "40", "--ignore", "RNK005"))  # two "nodes" on one host
    job.start(0)
    hostile.connect(port).close()  # it listens
    coordinator = job.procs[0][0]
    os.kill(coordinator.pid, signal.SIGSTOP)
    try:
        job.start(1)
        time.sleep(6)
    finally:
        os.kill(coordinator.pid, signal.SIGCONT)
    report = agreed(job.finish())
    assert report["participants"] == 2 and "PRE002" not in {f["code"] for f in report["findings"]}
