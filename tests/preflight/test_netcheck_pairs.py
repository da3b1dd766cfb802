"""``validator preflight --net-check --net-check-pairs all``: the coordinator hands out the rounds of
every pair off the rings (validator/netcheck/sweep.py) to real participants and says what they cost.

Real parts: six `validator preflight` processes on loopback (the whole job on one host: each
participant is a node of the net check), their listeners and probes. Faults between pairs are
planted in tests/integration/test_netcheck_sweep.py (network namespaces)."""

from __future__ import annotations

from pathlib import Path

from tests.preflight.conftest import preflight, ranks, tails


def test_every_pair_is_measured_through_the_participants(tmp_path: Path, port: int) -> None:
    runs = preflight(tmp_path, ranks(6, port), "--timeout", "60", "--net-check", "--net-check-pairs", "all",
                     limit=150)  # fmt: skip
    assert [r.rc for r in runs] == [0] * 6, tails(runs)
    line = next((ln for ln in runs[0].err.splitlines() if "net check:" in ln), "")
    assert "net check: 15 links, all within 3x of the median link" in line, runs[0].err  # 12 on the rings, 3 off
    assert "; every pair: 3 off the rings in 1 round, " in line, runs[0].err
