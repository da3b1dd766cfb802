"""Option parsing for `validator preflight` (argparse: no typer/rich on every rank's launch path)."""

from __future__ import annotations

import argparse
import sys

from validator.errors import EXIT_INTERRUPTED, UserError
from validator.model import Severity

USAGE = "validator preflight [options] [-- COMMAND ...]"
EPILOG = """With COMMAND, a pass execs it in place (srun validator preflight -- torchrun ... train.py);
without, it is a gate (init container, &&). Exit: 0 pass, 1 findings, 2 usage, 3 participants missing."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="validator preflight", usage=USAGE, epilog=EPILOG,
                                 description="Every rank or node rehearses the rendezvous; all agree on one verdict.")  # fmt: skip
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for everyone (default 60)")
    ap.add_argument("--coordinator", metavar="HOST:PORT", help="rendezvous here instead of MASTER_ADDR:MASTER_PORT")
    ap.add_argument("--job-id", help="job identity every participant must present (default: SLURM_JOB_ID, rdzv id)")
    ap.add_argument("--secret-file", help="shared secret for HMAC (default: env VALIDATOR_SECRET)")
    ap.add_argument("--expect", type=int, help="participants to wait for (default: WORLD_SIZE, or --nnodes)")
    ap.add_argument("--hosts", help="expected hosts in node-rank order, to name missing ones (default: SLURM nodelist)")
    ap.add_argument("--profile", help="launch profile YAML")
    ap.add_argument("--format", dest="fmt", choices=("table", "json"), default="table", help="json: report on stdout")
    ap.add_argument("--output", "-o", help="also write the JSON report to this file")
    ap.add_argument("--termination-log", nargs="?", const="/dev/termination-log", metavar="PATH",
                    help="write a one-line summary here (default /dev/termination-log: kubectl describe pod)")  # fmt: skip
    ap.add_argument("--fail-on", default="error", help="error, warning, info or never (default error)")
    ap.add_argument("--select", action="append", default=[], help="only these codes or prefixes")
    ap.add_argument("--ignore", action="append", default=[], help="skip these codes or prefixes")
    ap.add_argument("--allow-incomplete", action="store_true", help="missing participants do not fail (exit 0)")
    ap.add_argument("--net-check", action="store_true", help="also test the NCCL/Gloo interfaces in a ring")
    ap.add_argument("--smoke", action="store_true", help="after a pass, a tiny all_reduce with torch")
    ap.add_argument("--verbose", "-v", action="store_true", help="print the full report on every participant")
    ap.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")
    ap.add_argument("--prom-file", help="also write Prometheus textfile metrics here")
    return ap


def split(values: list[str]) -> list[str]:
    return [v.strip() for x in values for v in x.split(",") if v.strip()]


def main(argv: list[str]) -> int:
    from validator.preflight.plan import Options
    from validator.preflight.run import execute

    args, command = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    ns = parser().parse_args(args)
    try:
        opts = Options(
            command=command, timeout=ns.timeout, coordinator=ns.coordinator, job_id=ns.job_id,
            secret_file=ns.secret_file, expect=ns.expect, hosts=ns.hosts, profile=ns.profile, fmt=ns.fmt,
            output=ns.output, fail_on=None if ns.fail_on == "never" else Severity.parse(ns.fail_on),
            select=split(ns.select), ignore=split(ns.ignore), allow_incomplete=ns.allow_incomplete,
            net_check=ns.net_check, smoke=ns.smoke, verbose=ns.verbose, quiet=ns.quiet,
            termination_log=ns.termination_log, prom_file=ns.prom_file,
        )  # fmt: skip
        return execute(opts)
    except UserError as e:
        print(f"validator preflight: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("validator preflight: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
