"""validator/checks/base.py: the shortcuts that make 100,000 ranks cheap give what the plain
computation gives."""

from __future__ import annotations

import random

import pytest

from tests.factories import rank_job
from validator.checks import base
from validator.checks.base import Job, all_in_range, indices, majority_of


def test_majority_with_a_few_outliers_is_the_plain_grouping(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(14)
    for _ in range(2000):
        n = rng.randint(1, 150)
        pool = rng.choice([[1, 2, 3], [1, True, 1.0, 2, None], ["a", "b", None], [None, 7]])
        common = rng.choice(pool)
        values = [common if rng.random() < 0.95 else rng.choice(pool) for _ in range(n)]
        members = rng.choice([list(range(n)), range(n), sorted(rng.sample(range(1000), n))])
        fast = majority_of(members, values, lambda i: i % 7 == 0)
        with monkeypatch.context() as m:
            m.setattr(base, "FEW", -1)  # never the shortcut
            plain = majority_of(members, values, lambda i: i % 7 == 0)
        assert fast == plain and list(fast[1]) == list(plain[1]), values
        assert [type(v) for v in fast[1]] == [type(v) for v in plain[1]]


def test_indices_and_ranges() -> None:
    assert indices([0, 3, 0, 0, 5], 0) == [0, 2, 3]
    assert indices([1, 2], 0) == []
    assert all_in_range([0, 1, 7], [8, 9, 8])
    assert not all_in_range([0, 1, 8], [8, 9, 8])  # 8 is outside a world of 8
    assert not all_in_range([-1, 1], [8, 8])
    assert not all_in_range([0, None], [8, 8])  # not every value known: the caller looks closer
    assert not all_in_range([0, 1], [8, 8.0])
    assert not all_in_range([], [])


def test_node_values_and_lists_with_nodes_interleaved() -> None:
    job = rank_job(nodes=2, per_node=3)
    interleaved = [job[0], job[3], job[1], job[4], job[2], job[5]]
    for facts in (job, interleaved):
        j = Job(facts)
        for members in j.nodes.values():
            assert all(j.node_lists[i] is members for i in members)
            assert j.pick(j.ranks, members) == [j.ranks[i] for i in members]
    assert list(Job(interleaved).nodes.values()) == [[0, 2, 4], [1, 3, 5]]
