"""`--format markdown` (validator/report/markdown.py): the summary a CI job appends to
$GITHUB_STEP_SUMMARY. Real `validator check` and `validator scan --local` runs, read back with a
CommonMark parser (markdown-it, with tables): the verdict agrees with the exit code, one row per
folded finding, and host names holding `|`, backticks, `<`, line breaks or control bytes neither
break the table nor become HTML, code, emphasis or links."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

from tests.report.test_render_hostile import hostile_job, parse_markdown
from validator import pipeline
from validator.model import Outcome, Report
from validator.report import RenderOptions
from validator.report.text import fold, visible
from validator.scan import ScanResult, render_scan

ROOT = Path(__file__).resolve().parents[2]
VERDICT = {0: "PASSED", 1: "FAILED", 3: "INCOMPLETE"}
HOSTS = ["gpu01", "a|b`x`<img src=x onerror=alert(1)>", "c\nd *e* _f_ ~~g~~ [l](http://x) &amp; \x1b[2J"]


def validator(*args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([sys.executable, "-m", "validator", *args], capture_output=True, text=True, timeout=120,
                       check=False, cwd=ROOT)  # fmt: skip
    assert "Traceback" not in p.stderr, p.stderr
    return p


def cells(markdown: str) -> list[list[str]]:
    """The rendered text of each cell: Markdown's escapes undone."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    out: list[list[str]] = []
    for t, content in pairwise(tokens):
        if t.type == "tr_open":
            out.append([])
        elif t.type in ("th_open", "td_open"):  # the next token is the cell's inline content
            out[-1].append("".join(c.content for c in content.children or []))
    return out


def verdict_line(markdown: str) -> str:
    return markdown.splitlines()[2]


def test_check_with_hostile_host_names(tmp_path: Path) -> None:
    job = hostile_job(HOSTS, "2.4|`y`", "eth0<b>", "m$x$\x07")
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps(f) + "\n" for f in job))
    p = validator("check", str(facts), "-f", "markdown", "--fail-on", "warning")
    assert p.returncode == 1 and not p.stderr.strip(), p.stderr
    out = p.stdout
    assert out.startswith("## cluster-validator check\n\n") and verdict_line(out).startswith("**FAILED**: ")
    shown = parse_markdown(out)  # no HTML, code, emphasis or link; every row as wide as its header
    table = cells(out)
    expected = fold(pipeline.check(job).findings)
    assert table[0] == ["code", "severity", "where", "message"]
    assert [r[0] for r in table[1:]] == [f.code for f in expected] and len(expected) >= 3
    assert [r[1] for r in table[1:]] == [f.severity.label for f in expected]
    for host in HOSTS[1:]:
        assert visible(host) in shown and any(visible(host) in r[2] for r in table[1:])
    assert "\\x1b[2J" in shown and "\x1b" not in out and "<img" not in out.replace("\\<img", "")


def test_check_verdict_matches_the_exit_code(tmp_path: Path) -> None:
    """This machine's own facts (`validator probe --json`), and a job with a drifting node."""
    facts = tmp_path / "local.json"
    probe = validator("probe", "--json")
    assert probe.returncode == 0, probe.stderr
    facts.write_text(probe.stdout)
    p = validator("check", str(facts), "-f", "markdown")
    assert p.returncode in (0, 1) and verdict_line(p.stdout).startswith(f"**{VERDICT[p.returncode]}**: ")
    parse_markdown(p.stdout)
    clean = validator("check", str(facts), "-f", "markdown", "--fail-on", "never")
    assert clean.returncode == 0 and verdict_line(clean.stdout).startswith("**PASSED**: ")


def test_scan_of_this_machine(tmp_path: Path) -> None:
    """A real `validator scan --local`: a reached node, then a node without the interpreter
    (a target without facts: its own table, and INCOMPLETE, exit 3)."""
    p = validator("scan", "--local", "-f", "markdown")
    assert p.returncode in (0, 1), p.stderr
    assert p.stdout.startswith("## scan of ") and verdict_line(p.stdout).startswith(f"**{VERDICT[p.returncode]}**")
    parse_markdown(p.stdout)
    p = validator("scan", "--local", "--python", "/nonexistent/python3", "-f", "markdown")
    assert p.returncode == 3 and verdict_line(p.stdout).startswith("**INCOMPLETE**: "), p.stdout
    table = cells(p.stdout)
    assert table[0] == ["target", "status", "detail"] and table[1][1] == "no-python", table
    assert "/nonexistent/python3" in table[1][2]


def test_drain_list_and_a_failed_scan() -> None:
    report = Report([], 1, ["n1"], [Outcome("x|y`z`", "unreachable", "no route <to> host")], [], title="scan of n1")
    result = ScanResult(report, ["n1", "x|y`z`"], "ssh", ["n1", "x|y`z`"], False, 1.0)
    out = render_scan(result, "markdown", RenderOptions())
    assert "**Drain**: n1,x\\|y\\`z\\` (2 hosts)" in out and verdict_line(out).startswith("**INCOMPLETE**")
    assert "x|y`z`" in parse_markdown(out) and cells(out)[1] == ["x|y`z`", "unreachable", "no route <to> host"]
    result.failed, result.drain = "the scan failed, not the nodes: 2 of 2 hosts: auth", []
    out = render_scan(result, "markdown", RenderOptions())
    assert verdict_line(out) == "**SCAN FAILED**: the scan failed, not the nodes: 2 of 2 hosts: auth"
    assert "**Drain**" not in out
