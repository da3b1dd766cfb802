"""Several real `validator preflight` processes on loopback (issue 3, "Tests with real parts")."""

from __future__ import annotations

import json
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.harness import hostile
from tests.preflight.conftest import base_env, codes, collect, finding, preflight, ranks, start, tails
from validator import pipeline
from validator.preflight import protocol as wire


def test_four_ranks_pass_with_one_verdict(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, ranks(4, port, SLURM_JOB_ID="41"), "--timeout", "60")
    assert [r.rc for r in runs] == [0, 0, 0, 0], tails(runs)
    assert "preflight PASSED: 4/4 ranks" in runs[0].err
    reports = [r.report for r in runs]
    assert all(rep == reports[0] for rep in reports), "every participant gets the same report"
    assert reports[0] is not None and reports[0]["participants"] == 4


def test_duplicate_rank_is_named_and_everyone_fails(tmp_path: Path, port: int) -> None:
    envs = ranks(4, port)
    envs[2]["RANK"] = "1"  # two processes claim rank 1, rank 2 never shows up
    runs = preflight(tmp_path, envs, "--timeout", "8")
    assert {r.rc for r in runs} == {1}, tails(runs)
    dup = finding(runs[0], "RNK001")
    assert dup["ranks"] == "1"  # JSON folds ranks: "0-3,5"
    assert {o["target"] for o in runs[0].report["outcomes"]} == {"rank 2"}  # type: ignore[index]
    assert "3/4 ranks (4 participants)" in runs[0].err, "rank 1 twice fills one place"


def test_second_process_claiming_rank_zero(tmp_path: Path, port: int) -> None:
    envs = ranks(3, port)
    envs[1]["RANK"] = "0"
    runs = preflight(tmp_path, envs, "--timeout", "8")
    assert {r.rc for r in runs} == {1}, tails(runs)
    dup = finding(runs[0], "RNK001")
    assert dup["ranks"] == "0"
    pids = {str(r.pid) for r in runs[:2]}
    assert all(p in dup["message"] for p in pids), dup["message"]


def test_world_size_outlier_named(tmp_path: Path, port: int) -> None:
    envs = ranks(4, port)
    envs[3]["WORLD_SIZE"] = "8"
    runs = preflight(tmp_path, envs, "--timeout", "60")
    assert {r.rc for r in runs} == {1}
    ws = finding(runs[1], "RNK004")
    assert ws["ranks"] == "3" and ws["expected"] == "4" and ws["actual"] == "8"
    assert "WORLD_SIZE" in runs[0].err and "RNK004" not in runs[3].err, "one report a node: its local rank 0's"


def test_one_report_a_node_printed_by_its_local_rank_zero(tmp_path: Path, port: int) -> None:
    envs = ranks(8, port, LOCAL_WORLD_SIZE="4")
    for r, e in enumerate(envs):  # two emulated nodes: node-local aggregation tells them apart by SLURMD_NODENAME
        e.update(LOCAL_RANK=str(r % 4), SLURMD_NODENAME=f"node{r // 4 + 1}")
    envs[6]["WORLD_SIZE"] = "9"
    runs = preflight(tmp_path, envs, "--timeout", "60")
    assert {r.rc for r in runs} == {1}, [r.err[-500:] for r in runs]
    printed = [r for r, run in enumerate(runs) if "RNK004" in run.err]
    assert printed == [0, 4], "the coordinator and the named node's local rank 0, once each"
    assert [run.err.count("preflight FAILED") for run in runs] == [1, 0, 0, 0, 1, 0, 0, 0], "one verdict a node"


def test_missing_rank_named_by_host_at_the_deadline(tmp_path: Path, port: int) -> None:
    envs = ranks(4, port, SLURM_JOB_ID="7", SLURM_JOB_NODELIST="gpu[01-04]")
    for e in envs:  # one rank per node: rank r should run on gpu0(r+1)
        e.update(LOCAL_WORLD_SIZE="1", LOCAL_RANK="0", GROUP_RANK=e["RANK"])
    runs = preflight(tmp_path, envs[:3], "--timeout", "8")
    assert {r.rc for r in runs} == {3}, "missing participants only: incomplete, worth a retry"
    rep = runs[0].report
    assert rep is not None
    assert [(o["target"], o["status"]) for o in rep["outcomes"]] == [("rank 3", "missing")]
    assert "expected on gpu04" in rep["outcomes"][0]["detail"]
    waited = float(runs[0].err.split(" ranks in ")[1].split(" s")[0])
    assert waited <= 8 + 1, "named within deadline + 1 s"


def test_allow_incomplete_passes(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, ranks(3, port)[:2], "--timeout", "6", "--allow-incomplete")
    assert [r.rc for r in runs] == [0, 0]


def test_coordinator_missing_each_participant_says_what_it_tried(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, ranks(3, port)[1:], "--timeout", "3")
    for r in runs:
        assert r.rc == 1
        f = finding(r, "PRE001")
        assert "127.0.0.1 -> 127.0.0.1" in f["message"] and "refused" in f["message"].lower()


def test_unresolvable_master_is_reported(tmp_path: Path, port: int) -> None:
    envs = [dict(e, MASTER_ADDR="no-such-master.invalid") for e in ranks(2, port)][1:]
    runs = preflight(tmp_path, envs, "--timeout", "2")
    assert runs[0].rc == 1
    assert "no-such-master.invalid -> no address" in finding(runs[0], "PRE001")["message"]
    assert "RDZ005" in codes(runs[0])


def test_port_held_by_another_process(tmp_path: Path, port: int) -> None:
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("", port))
    holder.listen()
    try:
        runs = preflight(tmp_path, ranks(2, port), "--timeout", "3")
    finally:
        holder.close()
    assert [r.rc for r in runs] == [1, 1]
    busy = finding(runs[0], "RDZ006")
    assert f"pid {os.getpid()}" in busy["message"], "the master names the process holding the port"
    # a silent listener is never taken for another program: a stalled coordinator is silent too
    assert "PRE002" not in codes(runs[1])
    assert "never said hello" in finding(runs[1], "PRE001")["message"]


def test_port_held_as_a_connections_own_port_is_named_at_once(tmp_path: Path, port: int) -> None:
    """An outgoing connection (any program's, from an ephemeral port that happens to be MASTER_PORT) holds the port
    without listening: the job's TCPStore cannot bind it (EADDRINUSE), and no coordinator can be there. Rank 0 said
    for the whole --timeout that "nothing listened" and that the endpoint was not this node's (CI hit it as a hang);
    it now names the holder at once (RDZ006)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.socket()
    client.bind(("127.0.0.1", port))
    client.connect(server.getsockname())
    try:
        runs = preflight(tmp_path, ranks(2, port), "--timeout", "8")
    finally:
        client.close()
        server.close()
    assert [r.rc for r in runs] == [1, 1], tails(runs)
    assert runs[0].seconds < 5, runs[0].err  # not the 8 s deadline
    busy = finding(runs[0], "RDZ006")
    assert f"pid {os.getpid()}" in busy["message"] and "as a connection's own port, not a listener" in busy["message"]
    assert "PRE001" not in codes(runs[0]), runs[0].err


def test_stranger_of_another_job_changes_nothing(tmp_path: Path, port: int) -> None:
    envs = ranks(2, port, SLURM_JOB_ID="100")
    stranger = dict(envs[1], SLURM_JOB_ID="999")
    envs[1]["_DELAY"] = "4"  # the stranger knocks while the job is still gathering
    runs = preflight(tmp_path, [*envs, stranger], "--timeout", "30")
    assert [r.rc for r in runs[:2]] == [0, 0], tails(runs)
    assert runs[2].rc == 1
    assert "another job" in finding(runs[2], "PRE003")["message"]
    assert "'999'" in finding(runs[0], "PRE004")["message"]


def test_shared_secret(tmp_path: Path, port: int) -> None:
    good = ranks(3, port, VALIDATOR_SECRET="s3cret")
    good[2]["VALIDATOR_SECRET"] = "wrong"
    runs = preflight(tmp_path, good, "--timeout", "8")
    assert runs[2].rc == 1 and "authentication failed" in finding(runs[2], "PRE003")["message"]
    assert runs[0].rc == 3, "rank 2 never joined"
    assert "s3cret" not in json.dumps(runs[0].report), "secrets never leave the node"


def _fuzz(port: int, stop: threading.Event, seed: int) -> int:
    """Hostile and broken clients against the coordinator; returns how many connections it made."""
    rnd = random.Random(seed)
    made = 0
    idle: list[socket.socket] = []
    while not stop.is_set() and made < 300:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            time.sleep(0.02)
            continue
        made += 1
        kind = made % 6
        try:
            if kind == 0:
                s.sendall(os.urandom(rnd.randint(1, 4096)))  # garbage
            elif kind == 1:
                s.sendall(wire.LEN.pack(0xFFFFFFF0) + b"x" * 100)  # oversized frame
            elif kind == 2:
                s.sendall(wire.encode({"type": "facts", "proto": 1, "job_id": "", "size": 10**9}))
            elif kind == 3:
                s.sendall(wire.LEN.pack(50) + b'{"type": "fa')  # vanishes mid-frame
            elif kind == 4:
                idle.append(s)  # half-open: connects and never speaks
                continue
            else:
                s.sendall(wire.encode({"type": "facts", "proto": 1, "job_id": "", "size": 30}) + wire.frame(b"[1,2,3]"))
        except OSError:
            pass
        s.close()
    for s in idle:
        s.close()
    return made


def test_fuzzing_client_beside_a_healthy_job(tmp_path: Path, port: int) -> None:
    stop = threading.Event()
    made: list[int] = []
    fuzzer = threading.Thread(target=lambda: made.append(_fuzz(port, stop, 1)), daemon=True)
    fuzzer.start()
    try:
        runs = preflight(tmp_path, ranks(4, port), "--timeout", "60")
    finally:
        stop.set()
        fuzzer.join(10)
    assert [r.rc for r in runs] == [0, 0, 0, 0], [r.err[-500:] for r in runs]
    assert made and made[0] > 5, "the fuzzer reached the coordinator"
    assert runs[0].report is not None and runs[0].report["participants"] == 4


def _connect_with_retry(port: int, limit: float = 10) -> socket.socket:
    deadline = time.monotonic() + limit
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.settimeout(limit)
            return s
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _send_facts(s: socket.socket, body: bytes, token: str = "t0ken") -> dict[str, object]:
    hello = wire.recv_msg(s)
    assert hello["type"] == "hello"
    header = {"type": "facts", "proto": 1, "job_id": "", "size": len(body), "mac": "", "token": token}
    s.sendall(wire.encode(header) + wire.frame(body))
    return wire.recv_msg(s)


def test_same_participant_connecting_twice_counts_once(tmp_path: Path, port: int) -> None:
    envs = ranks(3, port)  # rank 1 is this test process, connecting twice
    body = json.dumps(pipeline.probe_local(environ=base_env(**envs[1]), port_check=False)).encode()
    coordinator = start([*VALIDATOR, "preflight", "--timeout", "15"], base_env(**envs[0]), tmp_path / "r0.json")
    t0 = time.monotonic()
    first = _connect_with_retry(port)
    assert _send_facts(first, body)["type"] == "ack"
    first.close()  # vanishes after its ack
    second = _connect_with_retry(port)
    ack = _send_facts(second, body)
    assert ack == {"type": "ack", "arrived": 2, "expected": 3}, "the reconnect replaced the first arrival"
    with _connect_with_retry(port) as impostor:  # same host and pid, another token: refused
        reply = _send_facts(impostor, body, token="other")
    assert reply["type"] == "reject" and "without its token" in str(reply["reason"]), reply
    last = start([*VALIDATOR, "preflight", "--timeout", "15"], base_env(**envs[2]), tmp_path / "r2.json")
    verdict = hostile.final_verdict(second)
    second.close()
    runs = collect([(coordinator, tmp_path / "r0.json", t0), (last, tmp_path / "r2.json", t0)])
    assert verdict["type"] == "verdict" and verdict["exit_code"] == 0, verdict
    assert [r.rc for r in runs] == [0, 0], tails(runs)
    assert runs[0].report is not None and runs[0].report["participants"] == 3


def test_pass_execs_the_command_in_place(tmp_path: Path, port: int) -> None:
    cmd = [sys.executable, "-c", "import os; print('pid', os.getpid())"]
    runs = preflight(tmp_path, ranks(2, port), "--timeout", "60", command=cmd)
    for r in runs:
        assert r.rc == 0, r.err
        assert r.out.strip() == f"pid {r.pid}", "the command replaced the preflight process"


def test_failure_does_not_run_the_command(tmp_path: Path, port: int) -> None:
    envs = ranks(2, port)
    envs[1]["WORLD_SIZE"] = "3"
    runs = preflight(tmp_path, envs, "--timeout", "60", command=["sh", "-c", "echo RAN"])
    assert all(r.rc == 1 and "RAN" not in r.out for r in runs)


def test_usage_error_exit_2(tmp_path: Path) -> None:
    runs = preflight(tmp_path, [{"RANK": "0", "WORLD_SIZE": "2"}], "--timeout", "1")
    assert runs[0].rc == 2
    assert "no rendezvous address" in runs[0].err and "Traceback" not in runs[0].err


@pytest.mark.parametrize(
    ("env", "command", "said"),
    [
        ({}, ["torchrun", "--nnodes=1", "--rdzv-endpoint=127.0.0.1", "train.py"],
         "invalid rendezvous port torchrun:--rdzv-endpoint without a port (the static rendezvous needs one)="
         "'127.0.0.1': write the endpoint as HOST:PORT"),
        ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29x"}, [],
         "invalid rendezvous port env:MASTER_PORT='29x': use a port number in 1024-65535"),
    ],
)  # fmt: skip
def test_an_invalid_port_is_named_not_called_missing(
    tmp_path: Path, env: dict[str, str], command: list[str], said: str
) -> None:
    """A static endpoint without a port, or a MASTER_PORT that is no number: torch refuses both on
    every node. The one line says which value and how to write it (as RDZ007 in `check`), not that
    no rendezvous address was set."""
    runs = preflight(tmp_path, [env], "--timeout", "1", command=command)
    assert runs[0].rc == 2, runs[0].err
    assert runs[0].err.strip() == f"validator preflight: error: {said}", runs[0].err
