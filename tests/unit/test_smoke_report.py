"""The smoke test's per-node figures (validator.preflight.smoke): rows gathered from every rank,
one row per node (its slowest rank), outliers named by the net check's relative rule."""

from __future__ import annotations

from validator.preflight.smoke import BYTES, bus_gbps, outliers, per_node, report


def test_bus_bandwidth_follows_nccl_tests() -> None:
    # 4 MiB in 1 ms over 2 ranks: algbw 4.19 GB/s, busbw x 2(n-1)/n = x 1
    assert round(bus_gbps(1e-3, 2), 2) == round(BYTES / 1e-3 / 1e9, 2)
    assert round(bus_gbps(1e-3, 4), 3) == round(BYTES / 1e-3 / 1e9 * 1.5, 3)


def test_a_node_is_its_slowest_rank() -> None:
    rows = [("a", 0.010, 1.0), ("a", 0.030, 0.3), ("b", 0.011, 0.9)]
    assert per_node(rows) == {"a": (0.030, 0.3), "b": (0.011, 0.9)}


def test_a_node_three_times_the_median_is_named() -> None:
    rows = [("a", 0.010, 1.0), ("b", 0.011, 1.0), ("c", 0.012, 1.0), ("d", 0.040, 0.2)]
    assert outliers(rows) == ["d"]
    lines = report(rows)
    assert lines[-1].startswith("smoke: slow node d: 40.0 ms (median 11.5 ms)")
    assert sum("GB/s" in line for line in lines) == 4


def test_close_but_silent() -> None:
    # 2.9x the median: below the factor
    assert outliers([("a", 0.010, 1.0), ("b", 0.010, 1.0), ("c", 0.010, 1.0), ("d", 0.029, 1.0)]) == []
    # 10x the median but only 2.7 ms more: timing noise on a busy node
    assert outliers([("a", 0.0003, 1.0), ("b", 0.0003, 1.0), ("c", 0.0003, 1.0), ("d", 0.003, 1.0)]) == []
    # two nodes: no median to speak of
    assert outliers([("a", 0.001, 1.0), ("b", 0.1, 1.0)]) == []
    assert report([]) == []
