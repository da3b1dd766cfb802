"""validator.preflight.plan.missing: who never arrived, named by rank and host; a few hosts one
line each, many hosts (10 % of 12,500 nodes) one line with ranks and hosts folded."""

from __future__ import annotations

from tests.factories import facts, rank_job
from validator.preflight.plan import MISSING_HOSTS, Plan, missing
from validator.targets import expand, expand_ranks


def plan(mode: str, expected: int, names: list[str]) -> Plan:
    return Plan("node000", [29500], mode, True, expected, expected, 0.0, "job", names)


def test_a_missing_local_rank_is_named_by_rank_and_host() -> None:
    job = rank_job(nodes=2, per_node=8)
    arrived = [f for f in job if f["launch"]["rank"] != 11]
    (out,) = missing(plan("rank", 16, ["node001", "node002"]), arrived, job[0], 30.0)
    assert out.target == "rank 11" and out.detail.startswith("expected on node002; never reached")


def test_many_missing_nodes_are_one_folded_line_naming_exactly_them() -> None:
    n = 2000
    names = [f"gpu{i:05d}" for i in range(n)]
    absent = [i for i in range(n) if i % 10 == 5 or 1500 <= i < 1700]  # 1 in 10, and a whole rack
    own = facts("gpu00000", launch={"node_rank": 0})
    gone = set(absent)
    arrived = [own] + [facts(names[i], node=i, launch={"node_rank": i}) for i in range(1, n) if i not in gone]
    outs = missing(plan("node", n, names), arrived, own, 20.0)
    assert len(outs) == 1 and len(absent) > MISSING_HOSTS
    (out,) = outs
    assert out.target.startswith(f"{len(absent)} node ranks: ")
    ranks = out.target.split(": ", 1)[1]
    hosts = out.detail.split("expected on ", 1)[1].split("; ", 1)[0]
    assert expand_ranks(ranks) == absent and expand(hosts) == [names[i] for i in absent]
    assert "1500-1699" in ranks and "gpu[00005,00015" in hosts  # folded


def test_keys_counted_as_they_came_name_the_same_missing_as_a_recount() -> None:
    """The coordinator passes the keys it counted at each arrival (coordinator.Gathered.present):
    the verdict at the last arrival does not walk every participant's facts again."""
    job = rank_job(nodes=2, per_node=8)
    arrived = [f for f in job if f["launch"]["rank"] not in (3, 11)]
    p = plan("rank", 16, ["node001", "node002"])
    counted = {f["launch"]["rank"] for f in arrived}
    assert missing(p, arrived, job[0], 30.0, present=counted) == missing(p, arrived, job[0], 30.0)
    assert [o.target for o in missing(p, arrived, job[0], 30.0, present=counted)] == ["rank 3", "rank 11"]
    c10d = Plan("node000", [29500], "node", False, 3, 3, 0.0, "job", ["node001", "node002", "node003"])
    hosts = [facts("node001"), facts("node002", node=1)]
    ids = {(f["host"], f["pid"]) for f in hosts}
    (out,) = missing(c10d, hosts, hosts[0], 30.0, present=ids)
    assert out == missing(c10d, hosts, hosts[0], 30.0)[0] and out.target == "1 of 3 nodes (--nnodes)"
