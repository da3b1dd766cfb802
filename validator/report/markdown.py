"""Markdown for `validator check` and `validator scan` (``--format markdown``): the summary a CI
job appends to ``$GITHUB_STEP_SUMMARY`` or someone pastes into a ticket. A title, the verdict
line, one table of the findings (code, severity, where, message), the targets without facts,
the input errors, and the scan's drain list.

What the world wrote (host names, values, messages) goes through ``visible`` (control characters
and line breaks shown as ``\\x1b``-style escapes) and then has Markdown's own characters
backslash-escaped: a name cannot end a cell or a row, open a code span, emphasis or a link, or
become HTML. Standard library only.
"""

from __future__ import annotations

import re

from validator.model import Report
from validator.report.options import RenderOptions
from validator.report.text import fold, summary, visible, where
from validator.targets import fold_hosts

# ASCII punctuation that means something inside a line of Markdown (CommonMark escapes any of
# it with a backslash): code spans, emphasis, links and images, HTML and entities, table cells,
# strikethrough, math ($, on GitHub) and a heading's closing #.
SPECIAL = re.compile(r"([\\`*_\[\]<>&|~$#!])")
VERDICT = {0: "PASSED", 1: "FAILED", 2: "INPUT ERROR", 3: "INCOMPLETE"}  # by exit code


def text(value: object) -> str:
    """``value`` as literal Markdown text, on one line."""
    return SPECIAL.sub(r"\\\1", visible(value))


def row(*cells: object) -> str:
    return "| " + " | ".join(text(c) for c in cells) + " |"


def render_markdown(report: Report, options: RenderOptions) -> str:
    verdict = f"**{VERDICT[report.exit_code(options.fail_on)]}**: {text(summary(report))}"
    if report.scan is not None and report.scan["failed"]:  # the scanner's side: exit 2, nothing drained
        verdict = f"**SCAN FAILED**: {text(report.scan['failed'])}"
    out = [f"## {text(report.title)}", "", verdict, ""]
    if report.scan is not None and report.scan["net_check"] is not None:
        out += [text(report.scan["net_check"]["line"]), ""]
    if report.scan is not None and (probed := report.scan.get("probes")) is not None:
        out += [text(probed["line"]), ""]
    if report.findings:
        out += ["| code | severity | where | message |", "| --- | --- | --- | --- |"]
        out += [row(f.code, f.severity.label, where(f), f.message) for f in fold(report.findings)]
        out.append("")
    if report.outcomes:
        out += ["**Without facts**", "", "| target | status | detail |", "| --- | --- | --- |"]
        out += [row(o.target, o.status, o.detail) for o in report.outcomes]
        out.append("")
    if report.input_errors:
        out += ["**Input errors**", "", "| input error |", "| --- |", *(row(e) for e in report.input_errors), ""]
    if report.drain:
        n = len(report.drain)
        out += [f"**Drain**: {text(fold_hosts(report.drain))} ({n} host{'s' if n != 1 else ''})", ""]
    return "\n".join(out)
