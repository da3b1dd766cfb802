"""Progress of a fan-out on stderr: a rich progress bar (hosts done / failed) when stderr is a
terminal, one line per host with ``verbose``, nothing otherwise. Never touches stdout."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any, TextIO

from validator.model import Outcome
from validator.transports import Result


class Progress:
    def __init__(self, total: int, bar: bool, verbose: bool = False, stream: TextIO | None = None) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.verbose = verbose
        self.done = 0
        self.failed = 0
        self._bar: Any = None
        self._task: Any = None
        if bar and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("scan"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failed]} failed"),
                TimeElapsedColumn(),
                console=Console(file=self.stream, stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task("scan", total=total, failed=0)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, target: str, result: Result) -> None:
        self.done += 1
        failed = isinstance(result, Outcome)
        self.failed += failed
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=self.failed)
        if self.verbose:
            what = f"{result.status}: {result.detail}" if isinstance(result, Outcome) else "ok"
            if self._bar is not None:
                self._bar.console.print(f"{target}: {what}", markup=False, highlight=False)
            else:
                self.stream.write(f"validator: [{self.done}/{self.total}] {target}: {what}\n")
                self.stream.flush()

    def note(self, text: str) -> None:
        """A phase or warning line (the net check starting, a host key that could not be saved)."""
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
        elif self.verbose:
            self.stream.write(f"validator: {text}\n")
            self.stream.flush()
