"""Entry point of the ``validator`` console script and ``python -m validator``.

``validator preflight`` runs on the launch path of every rank, so it skips the typer/rich CLI
(start-up time, multiplied by thousands of processes) and goes straight to its own parser.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["preflight"]:
        from validator.preflight.main import main as preflight

        return preflight(args[1:])
    from validator.cli import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
