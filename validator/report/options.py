"""What a renderer may be told beyond the report itself (the report's own sections, such as the
scan's drain list or the diagnosis, travel in the ``Report``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from validator.model import Severity


@dataclass(frozen=True, slots=True)
class RenderOptions:
    colour: bool = False  # table: ANSI colours (a terminal)
    verdict: str | None = None  # table: the block under the findings
    codes: Sequence[str] = ()  # junit: the codes that ran, passing ones included
    fail_on: Severity | None = Severity.ERROR  # junit failures, html drain list
