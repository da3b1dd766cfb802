"""First divergence by majority: who skipped, who called something else, who stopped."""

from __future__ import annotations

from validator.diagnose.sequences import Call, describe, first_divergence


def c(op: str, i: int, site: str, shape: str = "[4]") -> Call:
    return Call(op, (op, shape), site, i, f"{op} {shape}")


def hist(*seqs: list[tuple[str, str]]) -> dict[int, dict[int, Call]]:
    return {r: {i + 1: c(op, i + 1, site) for i, (op, site) in enumerate(seq)} for r, seq in enumerate(seqs)}


STEP = [("all_reduce", "t.py:88"), ("all_reduce", "t.py:90")]


def test_majority_not_rank_zero() -> None:
    h = hist(
        [("broadcast", "t.py:5")], [("all_reduce", "t.py:5")], [("all_reduce", "t.py:5")], [("all_reduce", "t.py:5")]
    )
    d = first_divergence(h)
    assert d is not None and d.culprits == [0] and d.majority == [1, 2, 3] and d.kind == "mismatch" and d.confident


def test_skip_found_by_call_site_even_when_ops_line_up() -> None:
    full = STEP * 3
    skipped = STEP + STEP[1:] + STEP  # rank 2 skips the all_reduce at t.py:88 in step 2
    d = first_divergence(hist(full, full, skipped, full))
    assert d is not None and d.kind == "skipped" and d.culprits == [2] and d.index == 3
    assert d.expected is not None and d.expected.site == "t.py:88"
    assert describe(d).startswith("rank 2 skipped all_reduce #3 at t.py:88")


def test_stopped_rank() -> None:
    d = first_divergence(hist(STEP, STEP, STEP[:1]))
    assert d is not None and d.kind == "stopped" and d.culprits == [2] and d.index == 2
    assert "never called all_reduce #2" in describe(d)


def test_even_split_names_nobody() -> None:
    d = first_divergence(hist([("all_reduce", "a:1")], [("all_gather", "a:2")]))
    assert d is not None and d.kind == "split" and d.culprits == [] and not d.confident


def test_identical_histories() -> None:
    assert first_divergence(hist(STEP, STEP, STEP)) is None


def test_ring_buffer_compares_only_the_common_window() -> None:
    h = hist(STEP * 3, STEP * 3, STEP * 3)
    for k in (1, 2):
        del h[0][k]  # rank 0's buffer dropped its oldest entries
    assert first_divergence(h) is None
