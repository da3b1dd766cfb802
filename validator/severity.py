"""Severities: how bad a finding is. Apart from validator.model (which re-exports it), so that a
preflight participant, which parses ``--fail-on`` and never builds a finding, need not load the
typed facts and reports on every rank's launch path."""

from __future__ import annotations

import enum

TYPE_CHECKING = False  # no typing on every rank's launch path (tests/preflight/test_lean.py)
if TYPE_CHECKING:
    from typing import Literal


class Severity(enum.IntEnum):
    INFO = 10
    WARNING = 20
    ERROR = 30

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def json_label(self) -> Literal["info", "warning", "error"]:
        return "info" if self is Severity.INFO else "warning" if self is Severity.WARNING else "error"

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            from validator.errors import UserError

            raise UserError(f"unknown severity {text!r}; use one of: {', '.join(s.label for s in cls)}") from None
