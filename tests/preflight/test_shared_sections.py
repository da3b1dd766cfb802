"""Issue 14: in per-rank mode the coordinator holds what a node's ranks share once — a real
Coordinator (tests/harness/hostile.Live, on loopback) given two ranks of one host and one of
another, each sent as its own JSON."""

from __future__ import annotations

import copy
import json
import time

from tests.harness.hostile import Live, register
from tests.preflight.conftest import base_env, ranks
from validator import pipeline

FACTS = pipeline.probe_local(environ=base_env(**ranks(4, 1)[0]), port_check=False)


def rank_facts(rank: int, host: str) -> dict:  # type: ignore[type-arg]
    f = copy.deepcopy(FACTS)
    f["launch"]["rank"], f["pid"], f["host"] = rank, f["pid"] + rank, host
    return f  # type: ignore[return-value]


def test_ranks_of_one_host_share_their_sections_in_the_coordinator() -> None:
    live = Live(rank_facts(0, "nodeA"), {0, 1, 2, 3}, None)  # type: ignore[arg-type]
    socks = []
    try:
        for rank, host in ((1, "nodeA"), (2, "nodeA"), (3, "nodeB")):
            s, ack, _ = register(live.port, json.dumps(rank_facts(rank, host)).encode(), "", f"t{rank}")
            assert ack["type"] == "ack", ack
            socks.append(s)
        assert live.c is not None
        for _ in range(200):  # bounded: the last ack is sent after its registration
            if len(live.c.arrivals) == 4:
                break
            time.sleep(0.05)
        by_rank = {a.facts["launch"]["rank"]: a.facts for a in live.c.arrivals.values()}
        assert by_rank[1]["gpus"] is by_rank[0]["gpus"] and by_rank[2]["software"] is by_rank[0]["software"]
        assert by_rank[3]["gpus"] is not by_rank[0]["gpus"] and by_rank[3]["gpus"] == by_rank[0]["gpus"]
        assert [by_rank[r]["launch"]["rank"] for r in range(4)] == [0, 1, 2, 3]
    finally:
        for s in socks:
            s.close()
        live.close()
    assert not live.errors
