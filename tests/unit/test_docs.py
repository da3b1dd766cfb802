"""docs/ stays true to the code: per-code pages match the code tables, the facts schema page
documents every TypedDict field, the usage page covers every command, option and exit code."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from validator import model
from validator.checks import CHECKS
from validator.docs import expected_pages
from validator.errors import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"
REGEN = "regenerate with: .venv/bin/python -m validator.docs docs/checks"


def test_check_pages_match_the_code_tables() -> None:
    want = expected_pages()
    have = {p.name: p.read_text() for p in (DOCS / "checks").glob("*.md")}
    assert sorted(set(want) - set(have)) == [], REGEN
    assert sorted(set(have) - set(want)) == [], REGEN
    stale = [name for name in want if want[name] != have[name]]
    assert stale == [], REGEN


def test_every_check_docstring_has_three_parts() -> None:
    for code, chk in CHECKS.items():
        assert all((chk.what, chk.why, chk.fix)), code


SECTIONS = {
    "Facts": model.Facts,
    "LaunchFacts": model.LaunchFacts,
    "CommandFacts": model.CommandFacts,
    "GpuFacts": model.GpuFacts,
    "GpuDevice": model.GpuDevice,
    "NetworkFacts": model.NetworkFacts,
    "Interface": model.Interface,
    "Selection": model.Selection,
    "MasterFacts": model.MasterFacts,
    "SoftwareFacts": model.SoftwareFacts,
    "SystemFacts": model.SystemFacts,
    "IbFacts": model.IbFacts,
    "IbDevice": model.IbDevice,
    "IbPort": model.IbPort,
    "LayoutFacts": model.LayoutFacts,
    "GpuHealthFacts": model.GpuHealthFacts,
    "GpuHealth": model.GpuHealth,
    "XidEvent": model.XidEvent,
}
FACTS_DOC = (DOCS / "facts.md").read_text()


def section_fields(name: str) -> set[str]:
    m = re.search(rf"^#+ `{name}`.*?\n(.*?)(?=^#)", FACTS_DOC + "\n#", re.M | re.S)
    assert m, f"docs/facts.md has no section for {name}"
    return set(re.findall(r"^\| `([a-z_0-9]+)` \|", m.group(1), re.M))


@pytest.mark.parametrize("name", SECTIONS)
def test_facts_doc_documents_every_field(name: str) -> None:
    assert section_fields(name) == set(typing.get_type_hints(SECTIONS[name]))


def test_facts_doc_covers_every_typeddict_in_the_model() -> None:
    typed = {n for n, v in vars(model).items() if typing.is_typeddict(v)}
    assert typed == set(SECTIONS)


USAGE = (DOCS / "usage.md").read_text()


@pytest.mark.parametrize(
    "text",
    ["validator probe", "--json", "--raw", "--no-port-probe", "validator check", "--profile", "--format", "--fail-on",
     "--select", "--ignore", "--output", "validator explain", "--list", "validator profiles validate",
     "table", "json", "junit", "JSON Lines"],
)  # fmt: skip
def test_usage_mentions(text: str) -> None:
    assert text in USAGE


def test_usage_lists_every_exit_code() -> None:
    table = USAGE.split("## Exit codes", 1)[1]
    codes = {int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert codes == {EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED}
