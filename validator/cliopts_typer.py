"""The shared options of cliopts.py as typer annotations, for cli.py and diagnose/cli.py.

Every option names its metavar: without one, typer prints Python types (``<str>``,
``<list[str]>``). A format or level not among the choices is one line naming every choice, exit 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand

from validator import cliopts
from validator.report import FORMATS

DIAGNOSE_FORMATS = ("table", "json", "junit")  # html is the scan's node x check page


class Argument(TyperArgument):
    """An argument shown by its metavar alone (``FILE...``, ``[TARGET...]``): typer would add
    the Python type (``<list[str]>``) and braces (``{files}...``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        return self.display_name_raw


class Command(TyperCommand):
    """Every command of the CLI: ``@app.command(cls=Command)``; its arguments name a metavar."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if type(param) is TyperArgument:
                param.__class__ = Argument


def _format(formats: tuple[str, ...]) -> Callable[[str], str]:
    return lambda value: cliopts.check_format(value.strip().lower(), formats)


def _level(value: str) -> str:
    cliopts.fail_level(value)  # a UserError (one line, exit 2) names all four levels
    return value.strip().lower()


def _net_pairs(value: str) -> str:
    cliopts.net_pairs(value, net_check=True)  # a UserError (one line, exit 2) names both choices
    return value.strip().lower()


def format_option(formats: tuple[str, ...] = tuple(FORMATS)) -> object:
    return typer.Option(
        "--format", "-f", metavar=cliopts.FORMAT_METAVAR, parser=_format(formats), help=cliopts.format_help(formats)
    )


FORMAT = Annotated[str, format_option()]
DIAGNOSE_FORMAT = Annotated[str, format_option(DIAGNOSE_FORMATS)]
FAIL_ON = Annotated[
    str,
    typer.Option(metavar=cliopts.LEVEL_METAVAR, parser=_level, help=cliopts.FAIL_ON_HELP),
]
SELECT = Annotated[
    list[str] | None,
    typer.Option("--select", metavar=cliopts.CODES_METAVAR, help=cliopts.SELECT_HELP),
]
IGNORE = Annotated[
    list[str] | None,
    typer.Option("--ignore", metavar=cliopts.CODES_METAVAR, help=cliopts.IGNORE_HELP),
]
OUTPUT = Annotated[
    Path | None,
    typer.Option("--output", "-o", metavar=cliopts.FILE_METAVAR, help=cliopts.OUTPUT_HELP),
]
PROFILE = Annotated[
    str | None,
    typer.Option("--profile", "-p", metavar=cliopts.FILE_METAVAR, help=cliopts.PROFILE_HELP),
]
NET_CHECK_PAIRS = Annotated[
    str,
    typer.Option(
        "--net-check-pairs", metavar=cliopts.NET_PAIRS_METAVAR, parser=_net_pairs, help=cliopts.NET_PAIRS_HELP
    ),
]
PROM_FILE = Annotated[
    Path | None,
    typer.Option("--prom-file", metavar=cliopts.FILE_METAVAR, help=cliopts.PROM_HELP),
]


def output_path(output: Path | None) -> str | None:
    return None if output is None else str(output)
