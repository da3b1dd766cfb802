"""validator/facts/share.py: what the ranks of one node have in common is held once, and holding
it once changes nothing any check finds."""

from __future__ import annotations

import json
from pathlib import Path

from tests.factories import rank_job, tweak
from validator.checks import run_checks
from validator.facts.share import Shared
from validator.pipeline import load_inputs


def as_read(job: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    """Each document as a JSON parser gives it: its own strings, keys and containers."""
    return [json.loads(json.dumps(f)) for f in job]


def test_a_nodes_ranks_share_their_equal_sections_and_other_nodes_only_equal_ones() -> None:
    s = Shared()
    job = [s.add(f) for f in as_read(rank_job(nodes=2, per_node=4))]  # type: ignore[arg-type]
    node1, node2 = job[:4], job[4:]
    for name in ("gpus", "software", "system", "network"):
        assert all(f[name] is node1[0][name] for f in node1), name
    assert node2[0]["software"] is node1[0]["software"]  # the same image: one object for the job
    assert node2[0]["network"] is not node1[0]["network"]  # other addresses: each host its own
    assert all(f["env"] is not node1[0]["env"] for f in node1[1:])  # RANK differs
    assert all(f["env"]["MASTER_ADDR"] is node1[0]["env"]["MASTER_ADDR"] for f in node1)  # equal values are
    assert [f["env"]["RANK"] for f in job] == [str(r) for r in range(8)]
    assert [f["launch"]["rank"] for f in job] == list(range(8))


def test_plain_values_are_shared_across_hosts_when_equal_in_type_and_value() -> None:
    s = Shared()
    one = s.add(json.loads('{"host": "a", "system": {"ib": ["mlx5_0"], "flags": [true, 2], "name": "xyz"}}'))
    two = s.add(json.loads('{"host": "b", "system": {"ib": ["mlx5_0"], "flags": [1, 2], "name": "xyz", "t": 1}}'))
    assert two["system"] is not one["system"]  # the sections differ
    assert two["system"]["ib"] is one["system"]["ib"] and two["system"]["name"] is one["system"]["name"]
    assert two["system"]["flags"] is not one["system"]["flags"]  # 1 == True, but not the same fact
    assert [type(v) for v in two["system"]["flags"]] == [int, int]
    assert [type(v) for v in one["system"]["flags"]] == [bool, int]
    soft = [
        s.add(json.loads(f'{{"host": "h{n}", "software": {{"v": {v}}}}}')) for n, v in enumerate(["1", "true", "true"])
    ]
    assert soft[1]["software"] is not soft[0]["software"] and soft[1]["software"]["v"] is True  # not 1
    assert soft[2]["software"] is soft[1]["software"]  # equal, and equal in type: one object


def test_a_section_that_differs_keeps_its_own_value() -> None:
    job = as_read(rank_job(nodes=1, per_node=3))
    job[2]["gpus"]["devices"] = job[2]["gpus"]["devices"][:7]
    s = Shared()
    held = [s.add(f) for f in job]  # type: ignore[arg-type]
    assert len(held[2]["gpus"]["devices"]) == 7 and len(held[0]["gpus"]["devices"]) == 8
    assert held[1]["gpus"] is held[0]["gpus"] and held[2]["gpus"] is not held[0]["gpus"]
    assert held[2]["gpus"]["driver"] == held[0]["gpus"]["driver"]


def test_checks_find_the_same_with_and_without_sharing() -> None:
    job = rank_job(nodes=3, per_node=4)
    for i in range(4, 8):  # node002 loads another NCCL
        job = tweak(job, i, software={"nccl": "2.18.5"})
    job = tweak(job, 9, launch={"rank": 8})
    alone = run_checks(as_read(job))  # type: ignore[arg-type]
    s = Shared()
    shared = run_checks([s.add(f) for f in as_read(job)])  # type: ignore[arg-type]
    assert [f.to_json() for f in shared] == [f.to_json() for f in alone]
    assert {f.code for f in alone} >= {"SW002", "RNK001"}


def test_check_shares_across_per_rank_files(tmp_path: Path) -> None:
    paths = []
    for f in rank_job(nodes=2, per_node=4):
        p = tmp_path / f"rank{f['launch']['rank']}.json"
        p.write_text(json.dumps(f))
        paths.append(str(p))
    facts, errors = load_inputs(paths)
    assert not errors and len(facts) == 8
    assert facts[1]["gpus"] is facts[0]["gpus"] and facts[5]["gpus"] is facts[4]["gpus"]
    assert facts[4]["gpus"] is not facts[0]["gpus"]
