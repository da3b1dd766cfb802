"""The rehearsal's liveness (validator/preflight/groups.py): each rank counts in the store while it is alive, and
rank 0 stops waiting for the ranks without a report once they have all stopped counting, never for a rank that
never counted (slow to start: torch's import on a busy node). A real TCPStore on loopback."""

from __future__ import annotations

import datetime
import threading
import time

import pytest

from validator.preflight import groups

torch_dist = pytest.importorskip("torch.distributed")


def test_ranks_that_stopped_counting_are_dead_and_one_that_never_counted_is_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(groups, "DEAD_S", 0.6)
    store = torch_dist.TCPStore("127.0.0.1", 0, 4, True, timeout=datetime.timedelta(seconds=10), wait_for_workers=False)
    key = groups.KEY
    store.set(f"{key}0", "{}")  # ranks 0 and 1 reported
    store.set(f"{key}1", "{}")
    seen: dict[int, tuple[int, float]] = {}
    store.add(f"{key}beat/2", 1)  # rank 2 beat once, rank 3 never
    assert not groups._dead(store, 4, seen)
    time.sleep(0.7)
    assert not groups._dead(store, 4, seen), "rank 3 never beat: it may be slow to start"
    store.add(f"{key}beat/3", 1)
    assert not groups._dead(store, 4, seen)
    time.sleep(0.7)
    assert groups._dead(store, 4, seen), "both stopped counting"
    store.add(f"{key}beat/2", 1)  # rank 2 counts again: alive (held, or slow), waited for
    assert not groups._dead(store, 4, seen)


def test_a_rank_counts_while_alive_and_stops_when_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(groups, "BEAT_S", 0.05)
    store = torch_dist.TCPStore("127.0.0.1", 0, 2, True, timeout=datetime.timedelta(seconds=10), wait_for_workers=False)
    stop = threading.Event()
    t = threading.Thread(target=groups._beat, args=("127.0.0.1", store.port, 2, 1, stop), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while store.add(f"{groups.KEY}beat/1", 0) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.add(f"{groups.KEY}beat/1", 0) >= 3
    stop.set()
    t.join(5)
    assert not t.is_alive()
    count = store.add(f"{groups.KEY}beat/1", 0)
    time.sleep(0.3)
    assert store.add(f"{groups.KEY}beat/1", 0) == count
