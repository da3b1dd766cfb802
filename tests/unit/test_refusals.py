"""The coordinator's tally of refused connections: what makes a flood, and whom it names."""

from __future__ import annotations

import pytest

from validator.preflight import refusals as rf


def test_a_flood_is_flood_n_within_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(rf.time, "monotonic", lambda: now[0])
    r = rf.Refusals()
    for _ in range(rf.FLOOD_N - 1):
        r.add(rf.SILENT, "10.0.0.9")
        now[0] += 0.01
    assert not r.flooding(), "one short of FLOOD_N"
    r.add(rf.MALFORMED, "10.0.0.9", "frame of 40 bytes")
    assert r.flooding()
    now[0] += rf.FLOOD_WINDOW_S  # the first of the last FLOOD_N is now older than the window
    assert not r.flooding(), "a flood that stopped is over"


def test_a_trickle_is_never_a_flood(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(rf.time, "monotonic", lambda: now[0])
    r = rf.Refusals()
    for _ in range(10 * rf.FLOOD_N):  # a port scanner's pace: 20 a second, for as long as it likes
        r.add(rf.SILENT, "10.0.0.9")
        now[0] += 0.05
        assert not r.flooding()


def test_sources_are_the_peers_that_sent_most_across_reasons() -> None:
    r = rf.Refusals()
    for peer, n in (("10.0.0.1", 3), ("10.0.0.2", 5), ("10.0.0.3", 1)):
        for i in range(n):
            r.add(rf.SILENT if i % 2 else rf.MALFORMED, peer)
    assert r.sources(2) == ["10.0.0.2", "10.0.0.1"]
    assert r.by_reason[rf.SILENT].count + r.by_reason[rf.MALFORMED].count == 9
