"""Cause strengths come from one table (validator/diagnose/strength.py), listed highest first."""

from __future__ import annotations

import re
from pathlib import Path

from validator.diagnose import strength as S

DIAGNOSE = Path(S.__file__).parent


def test_levels_are_listed_highest_first() -> None:
    levels = [v for n, v in vars(S).items() if n.isupper() and isinstance(v, int)]
    assert len(levels) > 40 and levels == sorted(levels, reverse=True)
    assert set(S.EXCEPTION.values()) <= set(levels)


def test_no_rule_sets_a_bare_number() -> None:
    bare = [f"{p.relative_to(DIAGNOSE)}:{i}" for p in sorted(DIAGNOSE.rglob("*.py")) if p != Path(S.__file__)
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"strength\s*[=<>]=?\s*\d", line)]  # fmt: skip
    assert bare == []
