"""Every finding code, declared once: a ``Code`` record in the table (``CODES``) of its family module.

A fact check is a ``Code`` with its function (``checks.base.Check``, declared with ``@check``);
the codes of the other stages (preflight, the scan's net check, node-check, diagnose) and VAL900
are plain ``Code``s whose findings those stages make. ``validator explain``, docs/checks/ and
--select/--ignore read ``validator.registry.registry()``, which imports every family module: an
error there propagates, and a code declared twice or malformed fails at import. This module is a
leaf: the families import it, never the reverse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

from validator.model import Finding, Severity

PREFIXES = (
    "RNK",
    "RDZ",
    "GPU",
    "NET",
    "IB",
    "SW",
    "ENV",
    "SYS",
    "PRF",
    "LAY",
    "COL",
    "DGN",
    "PRE",
    "NOD",
    "VAL",
    "PRB",
)
CODE = re.compile(rf"(?:{'|'.join(PREFIXES)})\d{{3}}")
PARAGRAPH = re.compile(r"\n[ \t]*\n")
MAX_TEXT = 1000  # characters of a finding's message, expected and actual


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else f"{text[: MAX_TEXT - 30]}... ({len(text):,} characters)"


Status = Literal["stable", "retired"]


@dataclass(frozen=True)
class Code:
    """One finding code: what `validator explain` prints, docs/checks/ shows, and each finding
    of it carries (title, severity, and the fix and verify command unless it knows better ones)."""

    code: str  # a family prefix (PREFIXES) and three digits; never changes meaning once released
    severity: Severity  # the default; a finding may override it
    title: str
    what: str  # what it checks (or, for a stage's finding, what went wrong): one paragraph
    why: str  # why it matters
    fix: str  # how to fix: the documentation's paragraph
    verify: str = ""  # how to check the fix, carried by findings that name no better one
    hint: str = ""  # one line: the fix carried by findings that name no better one
    status: Status = "stable"  # retired: never emitted again, never reused (as ruff's rule lifecycle)
    successor: str = ""  # a retired code's replacement, which `validator explain` names

    def __post_init__(self) -> None:
        if not CODE.fullmatch(self.code):
            raise ValueError(f"{self.code!r} is not a finding code (a prefix of {', '.join(PREFIXES)}, three digits)")
        if not (self.title and self.what and self.why and self.fix):
            raise ValueError(f"{self.code}: a code needs a title and what / why / fix paragraphs")
        if (self.status == "retired") != bool(self.successor) or (
            self.successor and not CODE.fullmatch(self.successor)
        ):
            raise ValueError(f"{self.code}: a retired code names its successor, and only a retired one does")

    def finding(
        self,
        message: str,
        *,
        ranks: Iterable[int] = (),
        hosts: Iterable[str] = (),
        expected: str | None = None,
        actual: str | None = None,
        fix: str = "",
        verify: str = "",
        severity: Severity | None = None,
    ) -> Finding:
        """A finding of this code: its title and severity, culprits, expected vs actual, fix, verify.
        Texts are cut at ``MAX_TEXT`` characters: they may quote values from the input."""
        return Finding(self.code, severity or self.severity, self.title, _cut(message), list(ranks), list(hosts),
                       expected and _cut(expected), actual and _cut(actual), fix or self.hint,
                       verify or self.verify)  # fmt: skip


def paragraphs(code: str, text: str) -> tuple[str, str, str]:
    """What / why / fix from a three-paragraph text (the form check docstrings take), each on one line."""
    parts = [" ".join(p.split()) for p in PARAGRAPH.split(text.strip())]
    if len(parts) != 3:
        raise ValueError(f"{code}: {len(parts)} paragraphs where what / why / fix are three: {text.strip()[:60]!r}")
    return parts[0], parts[1], parts[2]


def code(
    code: str, severity: Severity, title: str, text: str, *, verify: str = "", hint: str = "", successor: str = ""
) -> Code:
    """A ``Code`` whose findings a stage makes, documented by a three-paragraph ``text``; with a
    ``successor``, a retired one."""
    return Code(code, severity, title, *paragraphs(code, text), verify, hint, "retired" if successor else "stable",
                successor)  # fmt: skip


C = TypeVar("C", bound=Code)


def table(*codes: C) -> dict[str, C]:
    """Codes by code, in the order given; a code declared twice fails."""
    out: dict[str, C] = {}
    for c in codes:
        if c.code in out:
            raise ValueError(f"finding code {c.code} declared twice: {out[c.code].title!r} and {c.title!r}")
        out[c.code] = c
    return out
