"""`validator explain` and the per-code pages in docs/checks/, generated from check docstrings.

`python -m validator.docs docs/checks` rewrites the pages; a test fails when they drift.
"""

from __future__ import annotations

import sys
from pathlib import Path

from validator.checks import CHECKS
from validator.checks.base import Check
from validator.errors import UserError


def extra_checks() -> dict[str, Check]:
    """Codes that come from other stages than the fact checks (preflight, diagnose)."""
    out: dict[str, Check] = {}
    for module in (
        "validator.preflight.findings",
        "validator.preflight.peers",
        "validator.diagnose.codes",
        "validator.checks.netcheck",
        "validator.nodecheck",
    ):
        try:
            mod = __import__(module, fromlist=["CODES"])
        except ImportError:
            continue
        out.update(getattr(mod, "CODES", {}))
    return out


def all_checks() -> dict[str, Check]:
    return {**CHECKS, **extra_checks()}


def explain_text(code: str) -> str:
    checks = all_checks()
    chk = checks.get(code.upper())
    if chk is None:
        raise UserError(f"unknown code {code!r} (see `validator explain --list`)")
    d = chk.doc
    return (
        f"{chk.code} ({chk.severity.label}): {chk.title}\n\n"
        f"What it checks: {d['what']}\n\nWhy it matters: {d['why']}\n\nHow to fix: {d['fix']}\n"
    )


def list_codes() -> str:
    return "".join(
        f"{c.code:<8}{c.severity.label:<8}{c.title}\n" for c in sorted(all_checks().values(), key=lambda c: c.code)
    )


def page(chk: Check) -> str:
    d = chk.doc
    return (
        f"# {chk.code}: {chk.title}\n\nSeverity: **{chk.severity.label}**\n\n"
        f"## What it checks\n\n{d['what']}\n\n## Why it matters\n\n{d['why']}\n\n## How to fix\n\n{d['fix']}\n\n"
        f"Each finding also carries a command that verifies the fix; `validator explain {chk.code}` prints this page.\n"
    )


def index(checks: dict[str, Check]) -> str:
    rows = "".join(
        f"| [{c.code}]({c.code}.md) | {c.severity.label} | {c.title} |\n"
        for c in sorted(checks.values(), key=lambda c: c.code)
    )
    return (
        "# Finding codes\n\nGenerated from the check docstrings by `python -m validator.docs docs/checks`; "
        "a code never changes meaning once released.\n\n| code | severity | title |\n| --- | --- | --- |\n" + rows
    )


def expected_pages() -> dict[str, str]:
    checks = all_checks()
    pages = {f"{c.code}.md": page(c) for c in checks.values()}
    pages["README.md"] = index(checks)
    return pages


def write(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.md"):
        old.unlink()
    for name, text in expected_pages().items():
        (directory / name).write_text(text)


def drift(directory: Path) -> list[str]:
    """Pages that differ from the docstrings (missing, changed or stale)."""
    want = expected_pages()
    have = {p.name: p.read_text() for p in directory.glob("*.md")} if directory.is_dir() else {}
    return sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))


if __name__ == "__main__":
    args = sys.argv[1:]
    target = Path(next((a for a in args if not a.startswith("-")), "docs/checks"))
    if "--check" in args:
        stale = drift(target)
        if stale:
            sys.exit(f"{target} is out of date ({', '.join(stale)}): run python -m validator.docs {target}")
    else:
        write(target)
