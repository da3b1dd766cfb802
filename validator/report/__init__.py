"""Report renderers. Each takes a Report and returns text; the CLI decides where it goes."""

from __future__ import annotations

from collections.abc import Callable

from validator.errors import UserError
from validator.model import Report
from validator.report.junit import render_junit
from validator.report.text import render_json, render_table

FORMATS: dict[str, Callable[..., str]] = {
    "table": render_table,
    "json": render_json,
    "junit": render_junit,
}


def render(report: Report, fmt: str, **options: object) -> str:
    if fmt == "html":
        from validator.report.html import render_html

        return render_html(report, **options)
    try:
        renderer = FORMATS[fmt]
    except KeyError:
        raise UserError(f"unknown format {fmt!r}; use one of: {', '.join([*FORMATS, 'html'])}") from None
    return renderer(report, **options)
