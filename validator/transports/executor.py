"""A thread pool whose workers are daemon threads, for the event loop's default executor.

asyncssh resolves host names (getaddrinfo) and loads keys in the loop's default executor. With
broken DNS a lookup can block for the resolver's full timeout; ``ThreadPoolExecutor`` joins its
threads at exit, so one stalled lookup would hold the finished scan open. Daemon workers are
abandoned instead: the per-host connect timeout already recorded that host as unreachable.

It subclasses ``ThreadPoolExecutor`` only because ``loop.set_default_executor`` insists on one;
``submit`` and ``shutdown`` are its own, so the base class never starts a (joined) thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
_Item = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonExecutor(ThreadPoolExecutor):
    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=1)
        self._max = max(1, max_workers)
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._workers = 0
        self._idle = 0
        self._lock = threading.Lock()
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._shutdown:
            raise RuntimeError("cannot submit after shutdown")
        fut: Future[T] = Future()
        self._queue.put((fut, fn, args, kwargs))
        with self._lock:
            if self._idle == 0 and self._workers < self._max:
                self._workers += 1
                threading.Thread(target=self._work, name="validator-io", daemon=True).start()
        return fut

    def _work(self) -> None:
        while True:  # ends on the shutdown sentinel; daemon, so never holds the process
            with self._lock:
                self._idle += 1
            item = self._queue.get()
            with self._lock:
                self._idle -= 1
            if item is None:
                return
            fut, fn, args, kwargs = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 (handed to the awaiting coroutine, as ThreadPoolExecutor does)
                fut.set_exception(e)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Never waits: workers stuck in a system call are abandoned (they are daemons)."""
        self._shutdown = True
        for _ in range(self._workers):
            self._queue.put(None)
