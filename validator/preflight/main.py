"""Option parsing for `validator preflight` (argparse: no typer/rich on every rank's launch path)."""

from __future__ import annotations

import argparse
import os
import sys

from validator import cliopts as o
from validator.errors import EXIT_INTERRUPTED, UserError

USAGE = "validator preflight [OPTIONS] [-- COMMAND...]"
DESCRIPTION = "Every rank or node rehearses the rendezvous; all agree on one verdict."
EPILOG = """With COMMAND, a pass execs it in place (srun validator preflight -- torchrun ... train.py);
without, it is a gate (init container, &&). Exit: 0 pass, 1 findings, 2 usage, 3 participants missing."""


def parser() -> argparse.ArgumentParser:
    ap = o.lean_parser("validator preflight", USAGE, DESCRIPTION, EPILOG)
    ap.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                    help="seconds to wait for everyone (default 60)")  # fmt: skip
    ap.add_argument("--coordinator", metavar="HOST:PORT", help="rendezvous here instead of MASTER_ADDR:MASTER_PORT")
    ap.add_argument("--job-id", metavar="ID",
                    help="job identity every participant must present (default: SLURM_JOB_ID, rdzv id)")  # fmt: skip
    ap.add_argument("--secret-file", metavar=o.FILE_METAVAR,
                    help="shared secret for HMAC (default: env VALIDATOR_SECRET)")  # fmt: skip
    ap.add_argument(
        "--expect", type=int, metavar="N", help="participants to wait for (default: WORLD_SIZE, or --nnodes)"
    )
    ap.add_argument("--hosts", metavar="HOSTLIST",
                    help="expected hosts in node-rank order, to name missing ones (default: SLURM nodelist)")  # fmt: skip
    ap.add_argument("--profile", "-p", metavar=o.FILE_METAVAR, help=o.PROFILE_HELP)
    ap.add_argument("--layout", metavar="tp=N,pp=N,...", help=o.LAYOUT_HELP)
    ap.add_argument("--format", "-f", dest="fmt", choices=o.LEAN_FORMATS, default="table", metavar=o.FORMAT_METAVAR,
                    help=o.format_help(o.LEAN_FORMATS) + " (json: the report on stdout; default table)")  # fmt: skip
    ap.add_argument("--output", "-o", metavar=o.FILE_METAVAR, help="also write the JSON report to FILE")
    ap.add_argument("--termination-log", nargs="?", const="/dev/termination-log", metavar="PATH",
                    help="write a one-line summary here (default /dev/termination-log: kubectl describe pod)")  # fmt: skip
    ap.add_argument("--fail-on", default="error", type=str.lower, choices=o.FAIL_LEVELS, metavar=o.LEVEL_METAVAR,
                    help=o.FAIL_ON_HELP + " (default error)")  # fmt: skip
    ap.add_argument("--select", action="append", default=[], metavar=o.CODES_METAVAR, help=o.SELECT_HELP)
    ap.add_argument("--ignore", action="append", default=[], metavar=o.CODES_METAVAR, help=o.IGNORE_HELP)
    ap.add_argument("--allow-incomplete", action="store_true", help="missing participants do not fail (exit 0)")
    ap.add_argument(
        "--net-check",
        action="store_true",
        help="also connect and measure between the nodes on the NCCL/Gloo address (two rings): unreachable pairs, slow links, slow nodes",
    )
    ap.add_argument("--net-check-pairs", default="rings", metavar=o.NET_PAIRS_METAVAR, help=o.NET_PAIRS_HELP)
    ap.add_argument("--probes", action="store_true",
                    help="also run the compute and memory probes on every host and name one slower than its "
                         "peers (PRB001/PRB002), with how to exclude it")  # fmt: skip
    ap.add_argument("--smoke", action="store_true", help="after a pass, a tiny all_reduce with torch")
    ap.add_argument("--groups", action="store_true",
                    help="after a pass, every rank creates the layout's process groups (TP, PP, DP, ...) and runs "
                         "collectives in each with a deadline (per rank, or per node around torchrun; docs/layout.md)")  # fmt: skip
    ap.add_argument("--verbose", "-v", action="store_true", help="print the full report on every participant")
    ap.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line (the coordinator too)")
    ap.add_argument("--prom-file", metavar=o.FILE_METAVAR, help=o.PROM_HELP)
    return ap


def main(argv: list[str]) -> int:
    from validator.preflight.plan import Options
    from validator.preflight.run import execute

    args, command = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    try:
        ns = o.parse_lean(parser(), args)
        if ns.layout:  # every participant's facts carry it (facts/layout.py reads VALIDATOR_LAYOUT)
            from validator.facts.layout import parse_explicit

            if errs := parse_explicit(ns.layout, "--layout")["errors"]:
                raise UserError(errs[0])
            os.environ["VALIDATOR_LAYOUT"] = ns.layout
        opts = Options(
            command=command, timeout=ns.timeout, coordinator=ns.coordinator, job_id=ns.job_id,
            secret_file=ns.secret_file, expect=ns.expect, hosts=ns.hosts, profile=ns.profile, fmt=ns.fmt,
            output=ns.output, fail_on=o.fail_level(ns.fail_on),
            select=o.split_codes(ns.select), ignore=o.split_codes(ns.ignore), allow_incomplete=ns.allow_incomplete,
            net_check=ns.net_check, net_check_pairs=o.net_pairs(ns.net_check_pairs, ns.net_check), probes=ns.probes, smoke=ns.smoke, groups=ns.groups, verbose=ns.verbose, quiet=ns.quiet,
            termination_log=ns.termination_log, prom_file=ns.prom_file,
        )  # fmt: skip
        return execute(opts)
    except UserError as e:
        print(f"validator preflight: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("validator preflight: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
