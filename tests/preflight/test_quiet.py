"""Issue 14: participants ask for no acknowledgement ("quiet": one send less per participant for
the coordinator). A real Coordinator (tests/harness/hostile.Live, on loopback) acks only those who
do not ask for quiet; a participant still works with a coordinator that acks anyway (an older one,
played here by a plain socket server on loopback that speaks the protocol's frames).

While the coordinator measures after the gather (--net-check, --probes: rounds that may leave a participant out),
every participant hears a keepalive from it, quiet or not: a node 20x slow made each of its probes take 46 s, and a
participant that heard nothing for its grace took the coordinator for stalled (a CI run of test_probes_gate.py)."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
import threading
import time

from tests.harness.hostile import Live, connect, register, reply
from tests.preflight.conftest import base_env, ranks
from validator import pipeline
from validator.preflight import protocol as wire
from validator.preflight.participant import participate

FACTS = pipeline.probe_local(environ=base_env(**ranks(3, 1)[0]), port_check=False)


def rank_facts(rank: int) -> dict:  # type: ignore[type-arg]
    f = copy.deepcopy(FACTS)
    f["launch"]["rank"], f["pid"] = rank, f["pid"] + rank
    return f  # type: ignore[return-value]


def test_the_coordinator_acks_only_participants_that_do_not_ask_for_quiet() -> None:
    live = Live(rank_facts(0), {0, 1, 2}, None)  # type: ignore[arg-type]
    try:
        quiet = connect(live.port)
        hello = reply(quiet)
        body = json.dumps(rank_facts(1)).encode()
        head = {"type": "facts", "proto": wire.PROTO, "job_id": "", "size": len(body), "mac": "", "quiet": True}
        quiet.sendall(wire.encode(head) + wire.frame(body))
        assert hello["type"] == "hello"
        for _ in range(200):  # bounded: until the coordinator has registered it
            if live.c is not None and len(live.c.arrivals) == 2:
                break
            time.sleep(0.05)
        assert live.c is not None and len(live.c.arrivals) == 2
        loud, ack, _ = register(live.port, json.dumps(rank_facts(2)).encode(), "", "t2")
        assert ack["type"] == "ack" and ack["arrived"] == 3  # the one without "quiet" is acked
        with quiet:
            quiet.setblocking(False)  # what is already there, without waiting
            try:
                got = quiet.recv(1)
            except BlockingIOError:
                got = b""
        assert got == b"", "the quiet participant was sent something before the verdict"
        loud.close()
    finally:
        live.close()
    assert not live.errors


def test_toward_an_older_coordinator_the_facts_go_whole_and_an_unasked_ack_is_taken() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    seen: dict[str, object] = {}

    def older_coordinator() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(10)
            # an older coordinator's hello: no "sections", so the facts come as one JSON document
            conn.sendall(
                wire.encode({"type": "hello", "proto": 1, "job_id": "job", "nonce": "n0nce", "deadline_in": 30.0})
            )
            head = wire.recv_msg(conn)
            seen["header"] = head
            seen["body"] = wire.recv_exact(conn, wire.LEN.unpack(wire.recv_exact(conn, 4))[0])
            conn.sendall(wire.encode({"type": "ack", "arrived": 2, "expected": 2}))
            conn.sendall(wire.encode({"type": "verdict", "exit_code": 0, "report": {}, "text": "ok"}))
            conn.recv(1)  # until the participant closes first

    t = threading.Thread(target=older_coordinator, daemon=True)
    t.start()
    try:
        result = participate(rank_facts(1), "127.0.0.1", [port], "job", None, 10.0)  # type: ignore[arg-type]
    finally:
        t.join(10)
        srv.close()
    assert result.verdict is not None and result.verdict["exit_code"] == 0, result.attempts.summary()
    assert seen["header"]["quiet"] is True  # type: ignore[index]
    assert "chunks" not in seen["header"] and "sections" not in seen["header"]  # type: ignore[operator]
    assert json.loads(seen["body"]) == json.loads(json.dumps(rank_facts(1)))  # type: ignore[arg-type]


def frames_until(s: socket.socket, until: float) -> list[dict]:  # type: ignore[type-arg]
    """Every frame that arrives on ``s`` before ``until`` (bounded by time: a frame every 0.1 s at least)."""
    got = []
    while (left := until - time.monotonic()) > 0:
        s.settimeout(left)
        try:
            got.append(wire.recv_msg(s))
        except TimeoutError:
            break
    return got


def test_while_the_coordinator_measures_every_participant_hears_a_keepalive(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(wire, "KEEPALIVE_S", 0.2)  # the real coordinator runs in this process (Live)
    live = Live(rank_facts(0), {0, 1, 2}, None)  # type: ignore[arg-type]
    try:
        loud, ack, _ = register(live.port, json.dumps(rank_facts(1)).encode(), "", "t1")
        quiet, _, _ = register(live.port, json.dumps(rank_facts(2)).encode(), "", "t2", quiet=True)
        assert ack["type"] == "ack" and live.loop is not None and live.c is not None
        work = asyncio.run_coroutine_threadsafe(live.c.working(asyncio.sleep(1.5, "measured")), live.loop)
        assert work.result(5) == "measured"
        during = [frames_until(s, time.monotonic() + 0.3) for s in (loud, quiet)]  # buffered while it worked
        after = [frames_until(s, time.monotonic() + 0.6) for s in (loud, quiet)]
        loud.close()
        quiet.close()
    finally:
        live.close()
    assert not live.errors
    for got in during:  # one each 0.2 s of the 1.5 s, the quiet participant too; nothing else
        assert 4 <= len(got) <= 7 and all(f == {"type": "ack"} for f in got), got
    assert after == [[], []]  # the work done, the keepalives stop
