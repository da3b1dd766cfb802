"""Entry point of the ``validator`` console script and ``python -m validator``.

``validator preflight`` runs on the launch path of every rank, and ``validator node-check`` in every
Slurm prolog, so they skip the typer/rich CLI (start-up time, multiplied by thousands of processes)
and go straight to their own parsers.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for name in ("stdout", "stderr"):  # started with it closed (a daemon's wrapper: >&-): Python gives None
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 - the process's stream, for its lifetime
    if args[:1] == ["preflight"]:
        from validator.preflight.main import main as preflight

        return preflight(args[1:])
    if args[:1] == ["node-check"]:
        from validator.nodecheck.main import main as node_check

        return node_check(args[1:])
    from validator.cli import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
