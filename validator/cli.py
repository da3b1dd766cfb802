"""Command line: parse options, call the pipeline, print, exit. No logic lives here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from validator import __version__, cliopts, pipeline
from validator.cliopts_typer import (
    FAIL_ON,
    FORMAT,
    IGNORE,
    NET_CHECK_PAIRS,
    OUTPUT,
    PROFILE,
    PROM_FILE,
    SELECT,
    Command,
    output_path,
)
from validator.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UserError

app = typer.Typer(
    name="validator",
    help="Pre-launch validator and post-mortem for distributed training jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
profiles_app = typer.Typer(
    help="Launch profiles (YAML expectations).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(profiles_app, name="profiles")
baseline_app = typer.Typer(
    help="Probe baselines per hardware type, kept in launch profiles.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(baseline_app, name="baseline")


def version_callback(value: bool) -> None:
    if value:
        print(f"cluster-validator {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Pre-launch validator and post-mortem for distributed training jobs."""


@app.command(cls=Command)
def probe(
    command: Annotated[
        list[str] | None,
        typer.Argument(metavar="[-- COMMAND...]", help="the launch command, after --", show_default=False),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the facts as JSON")] = False,
    raw: Annotated[
        bool, typer.Option("--raw", help="print the agent's raw output (for bug reports, fixtures)")
    ] = False,
    no_port_probe: Annotated[bool, typer.Option("--no-port-probe", help="do not test-bind MASTER_PORT")] = False,
) -> None:
    """Collect this node's facts (launch contract, GPUs, interfaces, versions, limits).

    Save one file per rank or node, then run `validator check` on all of them.
    """
    if raw:
        from validator.agent.probe import collect

        print(json.dumps(collect(command or [], port_check=not no_port_probe)))
        return
    facts = pipeline.probe_local(command or None, port_check=not no_port_probe)
    if as_json:
        from validator.schema import self_check

        self_check(facts, "facts")
        print(json.dumps(facts))
    else:
        from validator.report.text import render_facts

        sys.stdout.write(render_facts(facts))


@app.command(cls=Command)
def check(
    files: Annotated[
        list[str],
        typer.Argument(metavar="FILE...", help="facts files from `validator probe --json` (JSON, array or JSON Lines)"),
    ],
    profile: PROFILE = None,
    fmt: FORMAT = "table",
    fail_on: FAIL_ON = "error",
    select: SELECT = None,
    ignore: IGNORE = None,
    output: OUTPUT = None,
    layout: Annotated[str | None, typer.Option("--layout", metavar="tp=N,pp=N,...", help=cliopts.LAYOUT_HELP)] = None,
) -> None:
    """Check the facts of all ranks or nodes of a job against each other (and a profile)."""
    codes = pipeline.resolve_codes(cliopts.split_codes(select), cliopts.split_codes(ignore))
    level = cliopts.fail_level(fail_on)
    report = pipeline.check_files(files, profile, codes, layout)
    from validator.report import RenderOptions, render

    ran = pipeline.ran_codes(codes)
    options = RenderOptions(colour=output is None and sys.stdout.isatty(), codes=ran, fail_on=level)
    cliopts.write_report(render(report, fmt, options), output_path(output))
    for err in report.input_errors:
        print(f"validator: {err}", file=sys.stderr)
    raise typer.Exit(report.exit_code(level))


@app.command(cls=Command)
def explain(
    code: Annotated[
        str | None,
        typer.Argument(metavar="[CODE]", help="a finding code such as RNK001", show_default=False),
    ] = None,
    list_all: Annotated[bool, typer.Option("--list", help="list every code")] = False,
) -> None:
    """What a finding code checks, why it matters, how to fix it and verify the fix."""
    from validator.docs import explain_text, list_codes

    if list_all or not code:
        sys.stdout.write(list_codes())
        return
    sys.stdout.write(explain_text(code))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def preflight(ctx: typer.Context) -> None:
    """Every rank or node rehearses the rendezvous; all agree on one verdict, then the job starts.

    `validator preflight --help` for its options (it has its own lean parser: it runs on every rank).
    """
    from validator.preflight.main import main as preflight_main

    raise typer.Exit(preflight_main(list(ctx.args)))


@app.command(
    "node-check",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def node_check(ctx: typer.Context) -> None:
    """Check this node alone (GPUs, versions, InfiniBand, limits, NCCL, clock) for Slurm prologs,
    health checks and node-problem-detector.

    `validator node-check --help` for its options (lean parser: it runs in every prolog).
    """
    from validator.nodecheck.main import main as node_check_main

    raise typer.Exit(node_check_main(list(ctx.args)))


@app.command(cls=Command)
def schema(
    kind: Annotated[str, typer.Argument(metavar="KIND", help="facts or report")],
) -> None:
    """Print the JSON Schema of the facts document or of the reports (docs/schema/)."""
    from validator.schema import text

    sys.stdout.write(text(kind))


@profiles_app.command("validate", cls=Command)
def profiles_validate(
    files: Annotated[list[str], typer.Argument(metavar="FILE...", help="profile YAML files")],
) -> None:
    """Check launch profiles: unknown keys and wrong types are reported with file and line.

    Every file is checked; exit 2 if any is bad.
    """
    from validator.profiles import load_profile

    bad = 0
    for f in files:
        try:
            p = load_profile(f)
        except UserError as e:
            print(f"validator: error: {e}", file=sys.stderr)
            bad += 1
            continue
        print(f"{f}: ok ({p.name}; pins {', '.join(p.pinned()) or 'nothing'})")
    if bad:
        raise typer.Exit(EXIT_USAGE)


@app.command(cls=Command)
def scan(
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[TARGET...]", help="hostlists (node[001-128], gpu-a[1-2]-b) and @FILE (one host per line)"
        ),
    ] = None,
    slurm: Annotated[bool, typer.Option("--slurm", help="scan the current allocation through one srun step")] = False,
    slurm_nodes: Annotated[
        str | None,
        typer.Option("--slurm-nodes", metavar="HOSTLIST", help="with --slurm: only these nodes of the allocation"),
    ] = None,
    partition: Annotated[
        str | None,
        typer.Option(
            "--partition", metavar="NAME", help="also scan every node of this SLURM partition (sinfo), over SSH"
        ),
    ] = None,
    k8s: Annotated[bool, typer.Option("--k8s", help="scan the pods -l selects, through kubectl exec")] = False,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", metavar="NAMESPACE", help="with --k8s: the pods' namespace"),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option("--context", metavar="CONTEXT", help="with --k8s: this kubeconfig context"),
    ] = None,
    local: Annotated[bool, typer.Option("--local", help="scan this machine through a local python3")] = False,
    openssh: Annotated[
        bool,
        typer.Option(
            "--openssh",
            help="reach TARGETS through the system ssh client (BatchMode), logging in as `ssh HOST` does: ControlMaster, Kerberos, ProxyJump, wrappers",
        ),
    ] = False,
    profile: PROFILE = None,
    fanout: Annotated[int, typer.Option(metavar="N", help="SSH connections in flight at once")] = 64,
    connect_timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="seconds to get an SSH session, per host")
    ] = 10.0,
    timeout: Annotated[float, typer.Option(metavar="SECONDS", help="seconds the agent may run, per host")] = 60.0,
    fmt: FORMAT = "table",
    output: OUTPUT = None,
    drain_list: Annotated[
        Path | None,
        typer.Option("--drain-list", metavar="FILE", help="write the hosts to drain to FILE, one per line"),
    ] = None,
    net_check: Annotated[
        bool,
        typer.Option(
            "--net-check",
            help="connect and measure between the nodes on the address NCCL or Gloo would use (two rings): names unreachable pairs, slow links and slow nodes",
        ),
    ] = False,
    net_timeout: Annotated[float, typer.Option(metavar="SECONDS", help="seconds per net-check connection")] = 3.0,
    net_check_pairs: NET_CHECK_PAIRS = "rings",
    probes: Annotated[
        bool,
        typer.Option(
            "--probes",
            help="measure compute and memory bandwidth on every node, judge against the peers, confirm suspects alone: names slow nodes",
        ),
    ] = False,
    allow_incomplete: Annotated[
        bool, typer.Option("--allow-incomplete", help="hosts without facts do not fail the scan (no exit 3)")
    ] = False,
    accept_new_host_keys: Annotated[
        bool,
        typer.Option("--accept-new-host-keys", help="accept and record unknown host keys (changed ones stay refused)"),
    ] = False,
    ssh_config: Annotated[
        list[str] | None,
        typer.Option(
            "--ssh-config",
            "-F",
            metavar="FILE",
            help="ssh_config file(s) instead of ~/.ssh/config and /etc/ssh/ssh_config (one with --openssh)",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user", "-l", metavar="USER", help="remote user (default: ssh config); with --k8s: the label selector"
        ),
    ] = None,
    selector: Annotated[
        str | None,
        typer.Option("--selector", metavar="SELECTOR", help="with --k8s: the pods' label selector (also -l)"),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            "-e",
            metavar="NAME=VALUE",
            help="a variable the job will set (e.g. NCCL_SOCKET_IFNAME=^docker,lo); repeat",
        ),
    ] = None,
    python: Annotated[str, typer.Option(metavar="PATH", help="python interpreter on the nodes")] = "python3",
    fail_on: FAIL_ON = "error",
    select: SELECT = None,
    ignore: IGNORE = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="one line per host on stderr as it answers")] = False,
    prom_file: PROM_FILE = None,
) -> None:
    """Check many nodes at once over SSH (or one srun step, or kubectl exec) and say which ones to drain."""
    from validator import scan as scanning

    pairs = [e.partition("=") for e in env or []]
    bad = [name for name, eq, _ in pairs if not eq or not name]
    if bad:
        raise UserError(f"expected NAME=VALUE, got {bad[0]!r}", "--env")
    level = cliopts.fail_level(fail_on)
    opts = scanning.ScanOptions(
        targets=targets or [],
        slurm=slurm,
        slurm_nodes=slurm_nodes,
        partition=partition,
        k8s=k8s,
        selector=selector or (user if k8s else None),  # -l: kubectl's selector under --k8s, ssh's user otherwise
        namespace=namespace,
        context=context,
        local=local,
        openssh=openssh,
        profile=profile,
        codes=pipeline.resolve_codes(cliopts.split_codes(select), cliopts.split_codes(ignore)),
        fail_on=level,
        fanout=fanout,
        connect_timeout=connect_timeout,
        timeout=timeout,
        ssh_config=ssh_config,
        user=None if k8s else user,
        accept_new_host_keys=accept_new_host_keys,
        env={name: value for name, _, value in pairs},
        python=python,
        net_check=net_check,
        net_timeout=net_timeout,
        net_check_pairs=cliopts.net_pairs(net_check_pairs, net_check),
        probes=probes,
        progress=sys.stderr.isatty(),
        verbose=verbose,
    )
    result = scanning.scan(opts)
    for warning in result.warnings:
        print(f"validator: warning: {warning}", file=sys.stderr)
    from validator.report import RenderOptions

    ran = pipeline.ran_codes(opts.codes, net_check=result.net_check is not None, probes=result.probes is not None)
    options = RenderOptions(colour=output is None and sys.stdout.isatty(), codes=ran, fail_on=level)
    cliopts.write_report(scanning.render_scan(result, fmt, options), output_path(output))
    if drain_list is not None:
        scanning.write_drain_list(result, str(drain_list))
    code = (
        EXIT_INTERRUPTED
        if result.interrupted
        else EXIT_USAGE
        if result.failed
        else result.report.exit_code(level, allow_incomplete)
    )
    if prom_file is not None:
        from validator.report.prom import write_prom

        write_prom(str(prom_file), result.report, "scan", code, result.elapsed_s)
    if result.interrupted:
        print("validator: interrupted; the report covers the hosts that answered", file=sys.stderr)
    elif result.failed:
        print(f"validator: error: {result.failed}", file=sys.stderr)
    raise typer.Exit(code)


from validator.diagnose.cli import diagnose, rehearse  # noqa: E402  (post-mortem commands live with their stage)

app.command(cls=Command)(diagnose)
app.command(cls=Command)(rehearse)

from validator.baseline import record  # noqa: E402  (the probes' baselines: their own module)

baseline_app.command("record", cls=Command)(record)


def run(argv: list[str]) -> int:
    """Run the CLI; user errors become one line on stderr and exit 2, never a traceback."""
    try:
        app(args=argv, prog_name="validator")  # standalone: click reports its own usage errors (exit 2)
    except UserError as e:
        print(f"validator: error: {e}", file=sys.stderr)
        return e.exit_code
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_USAGE)
    except KeyboardInterrupt:
        print("validator: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK
