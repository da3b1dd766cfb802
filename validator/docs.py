"""`validator explain` and the per-code pages in docs/checks/, generated from the code registry
(``validator.registry.registry``: every family's table).

`python -m validator.docs docs/checks` rewrites the pages; a test fails when they drift.
"""

from __future__ import annotations

import sys
from pathlib import Path

from validator.codes import Code
from validator.errors import UserError
from validator.registry import registry


def explain_text(code: str) -> str:
    c = registry().get(code.upper())
    if c is None:
        raise UserError(f"unknown code {code!r} (see `validator explain --list`)")
    verify = f"\nHow to check the fix: {c.verify}\n" if c.verify else ""
    retired = (
        f"Retired: no longer reported; see {c.successor} (`validator explain {c.successor}`).\n\n"
        if c.successor
        else ""
    )
    return (
        f"{c.code} ({c.severity.label}{', retired' if c.successor else ''}): {c.title}\n\n{retired}"
        f"What it checks: {c.what}\n\nWhy it matters: {c.why}\n\nHow to fix: {c.fix}\n{verify}"
    )


def list_codes() -> str:
    return "".join(f"{c.code:<8}{c.severity.label:<8}{c.title}{f' (retired: {c.successor})' if c.successor else ''}\n"
                   for c in registry().values())  # fmt: skip


def page(c: Code) -> str:
    verify = f"To check the fix: {c.verify}.\n\n" if c.verify else ""
    status = f"Status: **retired**, no longer reported; its successor is [{c.successor}]({c.successor}.md).\n\n"
    return (
        f"# {c.code}: {c.title}\n\nSeverity: **{c.severity.label}**\n\n{status if c.successor else ''}"
        f"## What it checks\n\n{c.what}\n\n## Why it matters\n\n{c.why}\n\n## How to fix\n\n{c.fix}\n\n{verify}"
        f"Each finding also carries a command that verifies the fix; `validator explain {c.code}` prints this page.\n"
    )


def index(codes: dict[str, Code]) -> str:
    rows = "".join(f"| [{c.code}]({c.code}.md) | {c.severity.label} | {c.title} |\n" for c in codes.values())
    return (
        "# Finding codes\n\nGenerated from the code tables by `python -m validator.docs docs/checks`; "
        "a code never changes meaning once released.\n\n| code | severity | title |\n| --- | --- | --- |\n" + rows
    )


def expected_pages() -> dict[str, str]:
    codes = registry()
    pages = {f"{c.code}.md": page(c) for c in codes.values()}
    pages["README.md"] = index(codes)
    return pages


def write(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.md"):
        old.unlink()
    for name, text in expected_pages().items():
        (directory / name).write_text(text)


def drift(directory: Path) -> list[str]:
    """Pages that differ from the code tables (missing, changed or stale)."""
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
