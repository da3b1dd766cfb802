"""`validator diagnose` and `validator rehearse`: parse options, call the stage, print, exit."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from validator import cliopts
from validator.cliopts_typer import DIAGNOSE_FORMAT, FAIL_ON, OUTPUT, output_path
from validator.diagnose.events import Diagnosis
from validator.model import Outcome, Report

NOT_RUN = "the process groups failed (PRE011), so no rank ran the script: nothing else to diagnose"
EXPLAIN = Annotated[
    bool, typer.Option("--explain", help="also print the verdict as prose (stderr with --format json/junit)")
]


def _emit(report: Report, diag: Diagnosis, fmt: str, output: str | None, explain: bool, verdict: str = "") -> None:
    from validator.diagnose.report import explain as prose
    from validator.diagnose.report import verdict_text
    from validator.report import RenderOptions, render
    from validator.report.text import visible

    report.diagnosis = diag.to_json()
    text = render(report, fmt, RenderOptions(verdict=verdict or verdict_text(diag) if fmt == "table" else None))
    if explain:
        told = "\n".join(map(visible, prose(diag).split("\n")))  # it quotes the logs: escaped like the table
        if fmt == "table":
            text += "\n" + told
        else:
            sys.stderr.write(told)
    cliopts.write_report(text, output)
    for err in report.input_errors:
        print(f"validator: {err}", file=sys.stderr)


def diagnose(
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="PATH...", help="logs, Flight Recorder dumps, rehearsal traces: files, directories, globs, .gz"
        ),
    ],
    fmt: DIAGNOSE_FORMAT = "table",
    fail_on: FAIL_ON = "error",
    output: OUTPUT = None,
    explain: EXPLAIN = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", metavar="N", help="worker processes for large inputs (default: CPUs)")
    ] = None,
    allow_incomplete: Annotated[
        bool, typer.Option("--allow-incomplete", help="exit 0/1 even if some files could not be read")
    ] = False,
) -> None:
    """Name the rank that started a failed run: failure class, initiating rank and host, evidence.

    Reads the logs of all ranks (torchrun, srun, NCCL_DEBUG, c10d; one per rank or combined),
    Flight Recorder dumps (pickle or JSON) and `validator rehearse` traces. Exit 0: no failure
    found; 1: a failure at or above --fail-on; 2: bad input; 3: some files unreadable, or nothing
    read at all (one line naming what was not read)."""
    from validator.diagnose.run import diagnose_paths

    level = cliopts.fail_level(fail_on)
    report, diag = diagnose_paths(paths, jobs, require_input=True)
    _emit(report, diag, fmt, output_path(output), explain)
    raise typer.Exit(report.exit_code(level, allow_incomplete))


def rehearse(
    command: Annotated[
        list[str],
        typer.Argument(metavar="-- COMMAND...", help="the launch command, after --: torchrun ... train.py ARGS"),
    ],
    max_seconds: Annotated[
        float, typer.Option("--max-seconds", metavar="SECONDS", help="stop the rehearsal after this long")
    ] = 300.0,
    stall_seconds: Annotated[
        float,
        typer.Option(
            "--stall-seconds", metavar="SECONDS", help="stop when no rank records a call for this long (0: never)"
        ),
    ] = 60.0,
    trace_dir: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--trace-dir", metavar="DIR", help="keep the traces and output here"),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option("--backend", metavar="NAME", help="force this backend in init_process_group (gloo for CPU)"),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="also show the command's output on stderr as it runs")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", hidden=True, help="the default now; kept for scripts")
    ] = False,
    fmt: DIAGNOSE_FORMAT = "table",
    fail_on: FAIL_ON = "error",
    output: OUTPUT = None,
    explain: EXPLAIN = False,
    layout: Annotated[str | None, typer.Option("--layout", metavar="tp=N,pp=N,...", help=cliopts.LAYOUT_HELP)] = None,
) -> None:
    """Run a few steps with every collective recorded and report the first divergence.

    `validator rehearse -- torchrun --nproc-per-node=4 train.py --steps 3` runs the job (CPU and
    gloo at small world size work) with `python -m validator.trace` in front of the script, then
    compares the ranks' call sequences by majority: "rank 3 skipped all_reduce #41 at train.py:88".
    A job with a parallel layout (its configuration, or --layout) first has every rank create the
    layout's process groups and run a collective in each (PRE011/PRE012, docs/layout.md).
    """
    from validator.diagnose import rehearse as rh
    from validator.diagnose.run import diagnose_paths

    level = cliopts.fail_level(fail_on)
    groups = rh.layout_groups(command, layout)  # a layout that cannot be made: exit 2 before anything starts
    directory = rh.fresh_dir(trace_dir) if trace_dir else rh.temp_dir()
    keep = False
    try:
        result = rh.run(command, directory, max_seconds, stall_seconds, backend, verbose and not quiet, groups)
        # the stop signal in the output is ours, not the scheduler's: left out before the causes are weighed (it
        # outranked the divergence the traces show)
        ours = frozenset({"agent.death_signal", "slurm.cancelled"}) if result.stopped else frozenset()
        report, diag = diagnose_paths([directory], title="cluster-validator rehearse", ours=ours)
        told = rh.groups_verdict(directory, result) if groups else ([], [])
        report.findings[:0] = told[0]
        failed = any(f.code == "PRE011" for f in told[0])
        if failed:  # the ranks stopped there, before the script: the log holds only their own exits
            report.findings = told[0]
            diag.primary, diag.others, diag.collateral = None, [], []
            diag.notes.append(NOT_RUN)
        if result.stopped and diag.primary is None:
            report.outcomes.append(
                Outcome(" ".join(command[:3]), "timeout", f"stopped: {result.stopped}; no divergence seen")
            )
        elif result.returncode not in (0, None) and diag.primary is None and not failed:
            report.outcomes.append(
                Outcome(" ".join(command[:3]), "error", f"exit code {result.returncode}; no divergence seen")
            )
        code = report.exit_code(level)
        keep = trace_dir is not None or code != 0  # a failed rehearsal keeps its evidence, and says where
        state = f"stopped ({result.stopped})" if result.stopped else f"exited {result.returncode}"
        where = (
            f"traces and the command's output ({rh.LOG}) in {directory}"
            if keep
            else "nothing kept (--trace-dir DIR keeps it)"
        )
        for line in told[1]:
            print(f"validator: {line}", file=sys.stderr)
        print(f"validator: rehearsal {state} after {result.seconds:.1f} s; {where}", file=sys.stderr)
        _emit(report, diag, fmt, output_path(output), explain, f"verdict: {NOT_RUN}" if failed else "")
    finally:
        if trace_dir is None and not keep:
            rh.cleanup(directory)
    raise typer.Exit(code)
