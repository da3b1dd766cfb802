"""The options every report command shares: names, metavars, help, parsing, where the report goes.

One vocabulary for the typer commands (cli.py, diagnose/cli.py, through ``typer_options``) and the
argparse ones that run on every rank or in every prolog (preflight/main.py, nodecheck/main.py).
Standard library only and nothing imported at load: those lean parsers import this on the launch
path of thousands of processes.
"""

from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False  # no typing on every rank's launch path (tests/preflight/test_lean.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Literal, TypeAlias

    from validator.severity import Severity

FAIL_LEVELS = ("error", "warning", "info", "never")
LEAN_FORMATS = ("table", "json")  # what preflight and node-check print (no XML or HTML on every rank)

# metavars and help, the same in every command's --help
FORMAT_METAVAR = "FORMAT"
LEVEL_METAVAR = "LEVEL"
CODES_METAVAR = "CODES"
FILE_METAVAR = "FILE"
FAIL_ON_HELP = "lowest severity that fails: error, warning, info or never"
SELECT_HELP = "only these codes or prefixes (repeat or comma-separate)"
IGNORE_HELP = "skip these codes or prefixes (repeat or comma-separate)"
OUTPUT_HELP = "write the report to FILE instead of stdout"
PROFILE_HELP = "launch profile YAML"
LAYOUT_HELP = "the parallel layout, for jobs whose configuration names none: tp=2,pp=4,cp=1,ep=1,dp=2 (docs/layout.md)"
PROM_HELP = "also write Prometheus textfile metrics to FILE"
NetPairs: TypeAlias = "Literal['rings', 'all']"  # a string: never evaluated at run time
NET_PAIRS: tuple[NetPairs, ...] = ("rings", "all")  # --net-check-pairs (scan and preflight)
NET_PAIRS_MAX = 128  # nodes at most for --net-check-pairs all: 127 rounds of disjoint pairs
NET_PAIRS_METAVAR = "PAIRS"
NET_PAIRS_HELP = (
    "with --net-check, the pairs measured: rings (two rings, 2 per node; default) or all (every pair, in "
    f"N-1 rounds of disjoint pairs, at most {NET_PAIRS_MAX} nodes)"
)


class HelpFormatter(argparse.HelpFormatter):
    """argparse help in the typer commands' style: "Usage:", "Options:".

    argparse makes one of these per ``add_argument``, only to check its metavar: the terminal's
    width (and shutil's import, on every rank's launch path) is looked up when help is formatted."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24) -> None:
        super().__init__(prog, indent_increment, max_help_position, width=80)
        self._help_position = max_help_position

    def format_help(self) -> str:
        import shutil

        self._width = shutil.get_terminal_size().columns - 2
        self._max_help_position = min(self._help_position, max(self._width - 20, self._indent_increment * 2))
        return super().format_help()

    def add_usage(self, usage: str | None, actions: Iterable[argparse.Action], groups: Iterable[argparse._MutuallyExclusiveGroup], prefix: str | None = None) -> None:  # fmt: skip
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)

    def start_section(self, heading: str | None) -> None:
        super().start_section(heading.capitalize() if heading else heading)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings:
            return super()._format_action_invocation(action)
        names = ", ".join(sorted(action.option_strings, key=len))  # "-p, --profile FILE", as click
        if action.nargs == 0:
            return names
        return f"{names} {self._format_args(action, self._get_default_metavar_for_optional(action))}"


def lean_parser(prog: str, usage: str | None, description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """The parser of a command that runs on every rank or in every prolog (no typer there)."""
    ap = argparse.ArgumentParser(
        prog=prog, usage=usage, description=description, epilog=epilog, formatter_class=HelpFormatter, add_help=False
    )
    ap.add_argument("-h", "--help", action="help", help="Show this message and exit.")  # as click says it
    return ap


def parse_lean(ap: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The options; a bad one is a UserError naming it (``--format/-f: invalid choice: ...``), one
    line, not argparse's usage block and second error line. ``--help`` still exits 0."""
    from validator.errors import UserError

    ap.exit_on_error = False
    try:
        ns, extra = ap.parse_known_args(argv)
    except argparse.ArgumentError as e:
        raise UserError(e.message, e.argument_name or "") from None
    if extra:
        raise UserError(f"unrecognized argument{'s' if len(extra) > 1 else ''} (see --help)", " ".join(extra))
    return ns


def format_help(formats: Iterable[str]) -> str:
    return f"report format: {', '.join(formats)}"


def check_format(fmt: str, formats: Iterable[str]) -> str:
    """``fmt`` if it is one of ``formats``; else a UserError listing them all."""
    names = list(formats)
    if fmt not in names:
        from validator.errors import UserError

        raise UserError(f"unknown format {fmt!r}; use one of: {', '.join(names)}", "--format")
    return fmt


def fail_level(text: str) -> Severity | None:
    """``--fail-on``: a severity, or None for never; a UserError naming all four otherwise."""
    from validator.errors import UserError
    from validator.severity import Severity

    word = text.strip().lower()
    if word not in FAIL_LEVELS:
        raise UserError(f"unknown level {text!r}; use one of: {', '.join(FAIL_LEVELS)}", "--fail-on")
    return None if word == "never" else Severity.parse(word)


def net_pairs(text: str, net_check: bool, nodes: int | None = None) -> NetPairs:
    """``--net-check-pairs``: rings or all (all only with --net-check, and at most NET_PAIRS_MAX
    ``nodes`` when they are known); a UserError naming the option otherwise."""
    from validator.errors import UserError

    word = text.strip().lower()
    if word not in NET_PAIRS:
        raise UserError(f"unknown pairs {text!r}; use one of: {', '.join(NET_PAIRS)}", "--net-check-pairs")
    if word == "all" and not net_check:
        raise UserError("all measures the net check's pairs: add --net-check", "--net-check-pairs")
    if word == "all" and nodes is not None and nodes > NET_PAIRS_MAX:
        raise UserError(f"all: {nodes} nodes, above the cap of {NET_PAIRS_MAX} (every pair would take "
                        f"{nodes - 1 + nodes % 2} rounds); use rings, or check at most {NET_PAIRS_MAX} nodes at a time",
                        "--net-check-pairs")  # fmt: skip
    return "all" if word == "all" else "rings"


def split_codes(values: Iterable[str] | None) -> list[str]:
    """``--select``/``--ignore``: repeated and comma-separated, blanks dropped."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def write_report(text: str, output: str | None) -> None:
    """The report to ``output``, or to stdout when None; a file that cannot be written is a
    UserError naming it."""
    if output is None:
        sys.stdout.write(text)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        from validator.errors import UserError

        raise UserError(f"cannot write report: {e.strerror}", str(output)) from None
