"""Report renderers. Each is ``(Report, RenderOptions) -> str``; the CLI decides where it goes.

A format is one module with one such function and one line in ``FORMATS``; modules load on
first use, so node-check and preflight (every prolog, every rank) import only the table's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from validator.report.options import RenderOptions

if TYPE_CHECKING:
    from validator.model import Report

Renderer = Callable[["Report", RenderOptions], str]

# format -> "module:function"
FORMATS: dict[str, str] = {
    "table": "validator.report.text:render_table",
    "json": "validator.report.text:render_json",
    "junit": "validator.report.junit:render_junit",
    "html": "validator.report.html:render_html",
    "markdown": "validator.report.markdown:render_markdown",
}

__all__ = ["FORMATS", "RenderOptions", "Renderer", "render", "renderer"]


def renderer(fmt: str) -> Renderer:
    from validator.cliopts import check_format

    module, _, name = FORMATS[check_format(fmt, FORMATS)].partition(":")
    fn: Renderer = getattr(importlib.import_module(module), name)
    return fn


def render(report: Report, fmt: str, options: RenderOptions | None = None) -> str:
    return renderer(fmt)(report, options or RenderOptions())
