"""Issue 14: a participant that prints or writes nothing but the verdict's line (no --output, no
--format json, no --verbose, no Kubernetes termination log or metrics file: finish.brief) says
"brief" in its header, and the coordinator sends it that line alone, not the whole report (at
12,500 nodes, 30 KB a node). A participant the report names gets the whole of it anyway, and so
does one that asks for it. With a secret, each is sealed (protocol.py).

The coordinator is a real `validator preflight` process (rank 0); ranks 1 and 2 are this test's
threads calling the participant's own code (participant.participate), so that what each received
can be looked at. Loopback only."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.conftest import VALIDATOR
from tests.preflight.conftest import Run, base_env, collect, ranks, start
from validator import pipeline
from validator.preflight.participant import participate


def rank_facts(port: int, rank: int, **env: str) -> Any:
    """Rank ``rank`` of a 3-rank job on this machine, as its own probe sees it (a pid of its own:
    the ranks here are threads of one process)."""
    facts: Any = pipeline.probe_local(environ=base_env(**(ranks(3, port)[rank] | env)), port_check=False)
    facts["pid"] += 1000 + rank
    return facts


def job(
    port: int, wants: dict[int, tuple[Any, dict[str, Any]]], secret: str | None = None
) -> tuple[Run, dict[int, Any]]:
    """Rank 0 (a real coordinator) and, as threads, the participants ``wants`` gives (rank ->
    facts, header fields): rank 0's run and what each participant received."""
    env = ranks(3, port)[0] | ({"VALIDATOR_SECRET": secret} if secret else {})
    rank0 = start([*VALIDATOR, "preflight", "--job-id", "job", "--timeout", "30"], base_env(**env), None)
    got: dict[int, Any] = {}
    try:
        key = secret.encode() if secret else None

        def rank(r: int) -> None:
            facts, fields = wants[r]
            got[r] = participate(facts, "127.0.0.1", [port], "job", key, 30.0, fields).verdict

        threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in wants]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        (run0,) = collect([(rank0, None, time.monotonic())], limit=60)  # kills it by pid if it lingers
    return run0, got


@pytest.mark.parametrize("secret", [None, "brief-secret"])
def test_the_verdict_line_alone_to_who_asks_for_no_more(port: int, secret: str | None) -> None:
    """Ranks 1 and 2, neither named; rank 2 asks for the whole verdict (--output, --verbose, ...)."""
    brief = {"listen": None, "brief": True}
    run0, got = job(port, {1: (rank_facts(port, 1), brief), 2: (rank_facts(port, 2), {"brief": False})}, secret)
    assert run0.rc == 0 and "Traceback" not in run0.err, run0.err[-2000:]
    one, two = got.get(1), got.get(2)
    assert one is not None and two is not None, run0.err[-2000:]
    # brief: the verdict line alone, the same line rank 0 printed last
    assert "report" not in one and one["text"].count("\n") == 1 and one["exit_code"] == 0, one
    assert one["text"].strip() == run0.err.strip().splitlines()[-1]
    assert two["report"]["participants"] == 3 and two["exit_code"] == 0


def test_who_the_report_names_gets_all_of_it(port: int) -> None:
    """Rank 2's WORLD_SIZE differs: the report names rank 2 and its host, the host of all three
    here, so both brief ranks get the whole report (what finish.named reads on their side)."""
    brief = {"brief": True}
    run0, got = job(port, {1: (rank_facts(port, 1), brief), 2: (rank_facts(port, 2, WORLD_SIZE="4"), brief)})
    assert run0.rc == 1, run0.err[-2000:]
    for r in (1, 2):
        v = got.get(r)
        assert v is not None and v["exit_code"] == 1 and isinstance(v.get("report"), dict), v
        assert v["text"].count("\n") > 3 and "2" in v["named"]["ranks"], v
