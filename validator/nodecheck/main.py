"""Options and integration modes of `validator node-check` (argparse, like preflight: it runs in
every Slurm prolog and health check, where start-up time counts).

Modes and exit codes (docs/integrations.md):

    report              0 pass, 1 findings at or above --fail-on, 2 usage or bad profile, 3 unknown
    slurm-prolog        1 only for what should drain the node; its own errors are logged, exit 0
    slurm-healthcheck   as slurm-prolog (Slurm ignores the exit code: use --drain)
    npd                 node-problem-detector plugin: 0 OK, 1 problem, 2 unknown; one line on stdout
"""

from __future__ import annotations

import argparse
import sys
import time

from validator import cliopts as o
from validator.errors import EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_USAGE, UserError
from validator.model import Finding, Report

MODES = ("report", "slurm-prolog", "slurm-healthcheck", "npd")
NPD_OK, NPD_PROBLEM, NPD_UNKNOWN = 0, 1, 2
NPD_LINE_MAX = 200
DRAIN_RESERVE_S = 1.0  # of the budget, kept for scontrol (--drain, --resume: two calls, each bounded by what is left)


def parser() -> argparse.ArgumentParser:
    ap = o.lean_parser("validator node-check", "validator node-check [OPTIONS]", "Check this node alone: GPUs, driver and versions against a "
                       "profile, InfiniBand ports, /dev/shm, limits, NCCL, clock.")  # fmt: skip
    ap.add_argument("--profile", "-p", metavar=o.FILE_METAVAR,
                    help=o.PROFILE_HELP + " (gpus_per_node, gpu_model, versions, min_shm_mib, min_nofile)")  # fmt: skip
    ap.add_argument("--mode", choices=MODES, default="report", metavar="MODE",
                    help=f"integration conventions: {', '.join(MODES)} (default report)")  # fmt: skip
    ap.add_argument("--drain", action="store_true", help="slurm modes: drain this node (scontrol) when it fails")
    ap.add_argument("--resume", action="store_true", help="slurm modes: resume this node when it passes and only "
                    "a drain of ours (reason 'validator: ...') holds it")  # fmt: skip
    ap.add_argument("--budget", type=_seconds, default=5.0, metavar="SECONDS", help="hard time budget (default 5)")
    ap.add_argument("--format", "-f", dest="fmt", choices=o.LEAN_FORMATS, default="table", metavar=o.FORMAT_METAVAR,
                    help=o.format_help(o.LEAN_FORMATS) + " (report mode; default table)")  # fmt: skip
    ap.add_argument("--fail-on", default="error", type=str.lower, choices=o.FAIL_LEVELS, metavar=o.LEVEL_METAVAR,
                    help=o.FAIL_ON_HELP + " (default error)")  # fmt: skip
    ap.add_argument("--prom-file", metavar=o.FILE_METAVAR, help=o.PROM_HELP + " (node-exporter textfile dir)")
    return ap


def peek_mode(argv: list[str]) -> str:
    """The mode, before parsing: a usage error must already follow the mode's conventions."""
    for i, a in enumerate(argv):
        value = (
            argv[i + 1]
            if a == "--mode" and i + 1 < len(argv)
            else a.split("=", 1)[1]
            if a.startswith("--mode=")
            else None
        )
        if value in MODES:
            return value
    return "report"


def own_error(mode: str, message: str, report_code: int = EXIT_USAGE) -> int:
    """The validator's own failure (bad option or profile, budget exceeded, a bug): never a drain.
    One line in the one style (``UserError``: where, then what), ``UNKNOWN: ...`` for npd."""
    if mode == "npd":
        print(f"UNKNOWN: {' '.join(message.split())}"[:NPD_LINE_MAX])
        return NPD_UNKNOWN
    error_line(message)
    return 0 if mode.startswith("slurm") else report_code


def error_line(message: str) -> None:
    """``validator node-check: error: WHERE: WHAT`` on stderr, one line whatever scontrol or an
    exception wrote."""
    print(f"validator node-check: error: {' '.join(message.split())}", file=sys.stderr)


def parse(argv: list[str]) -> argparse.Namespace:
    """The options; a bad one is a UserError naming it (``--mode: invalid choice: ...``), not
    argparse's usage block and second error line."""
    return o.parse_lean(parser(), argv)


def _seconds(text: str) -> float:
    """A time budget: a finite number of seconds above zero, else a usage error (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e6:  # nan compares false too
        raise argparse.ArgumentTypeError(f"a number of seconds above 0 is needed, not {text[:40]!r}")
    return value


def main(argv: list[str]) -> int:
    t0 = time.monotonic()
    mode = peek_mode(argv)
    try:
        ns = parse(argv)
    except SystemExit as e:  # --help (argparse printed it)
        return 0 if e.code in (0, None) else own_error(mode, "bad options")
    except UserError as e:
        return own_error(mode, str(e), e.exit_code)
    try:
        return run(ns, t0)
    except KeyboardInterrupt:
        print("validator node-check: interrupted", file=sys.stderr)
        return NPD_UNKNOWN if ns.mode == "npd" else EXIT_INTERRUPTED
    except UserError as e:
        return own_error(ns.mode, str(e), e.exit_code)
    except Exception as e:  # noqa: BLE001 - a bug in the validator must not drain a cluster: log it, never fail
        from validator.nodecheck import BudgetExceeded

        if isinstance(e, BudgetExceeded):
            return own_error(ns.mode, str(UserError(str(e), f"--budget {ns.budget:g}")), EXIT_INCOMPLETE)
        return own_error(ns.mode, f"internal error: {type(e).__name__}: {str(e)[:200]}")


def run(ns: argparse.Namespace, t0: float) -> int:
    from validator.nodecheck import drain, drain_reason, gather, node_name, node_report, resume_own_drain
    from validator.profiles import load_profile

    fail_on = o.fail_level(ns.fail_on)
    profile = load_profile(ns.profile) if ns.profile else None
    deadline = t0 + ns.budget
    facts, readings = gather(deadline - (DRAIN_RESERVE_S if ns.drain or ns.resume else 0.0) - time.monotonic())
    report = node_report(facts, readings, profile)
    failing = [f for f in report.findings if fail_on is not None and f.severity >= fail_on]
    code = 1 if failing else 0
    if failing and ns.drain and ns.mode.startswith("slurm"):
        try:
            drain(node_name(facts), drain_reason(failing), deadline - time.monotonic())
        except RuntimeError as e:  # the non-zero exit still fails the prolog: Slurm drains it
            error_line(str(UserError(f"cannot drain: {e}", node_name(facts))))
    elif not failing and ns.resume and ns.mode.startswith("slurm"):
        try:
            if resume_own_drain(node_name(facts), deadline - time.monotonic()):
                print(f"validator node-check: resumed {node_name(facts)}", file=sys.stderr)
        except RuntimeError as e:
            error_line(str(UserError(f"cannot resume: {e}", node_name(facts))))
    if ns.prom_file:
        write_metrics(ns.prom_file, report, code, time.monotonic() - t0)
    if ns.mode == "npd":
        print(npd_line(report, failing))
    elif ns.mode.startswith("slurm"):
        print(f"{report.title}: {'FAILED ' + drain_reason(failing) if failing else 'passed'}", file=sys.stderr)
    else:
        from validator.report import RenderOptions, render

        o.write_report(render(report, ns.fmt, RenderOptions(colour=sys.stdout.isatty(), fail_on=fail_on)), None)
    return code


def write_metrics(path: str, report: Report, code: int, seconds: float) -> None:
    """A textfile the collector cannot read is a warning, never a changed verdict."""
    from validator.report.prom import write_prom

    try:
        write_prom(path, report, "node-check", code, seconds)
    except UserError as e:
        print(f"validator node-check: warning: {e}", file=sys.stderr)


def npd_line(report: Report, failing: list[Finding]) -> str:
    """node-problem-detector shows the first line as the condition's message."""
    if not failing:
        rest = len(report.findings)
        return f"OK: {report.title} passed" + (f" ({rest} below the fail level)" if rest else "")
    first = failing[0]
    more = f" (+{len(failing) - 1} more)" if len(failing) > 1 else ""
    return f"{first.code} {first.message}{more}"[:NPD_LINE_MAX]
