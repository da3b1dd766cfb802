"""`python -m validator.nodecheck`: node-check without the typer CLI (a faster start in prologs)."""

from __future__ import annotations

import sys

from validator.nodecheck.main import main

sys.exit(main(sys.argv[1:]))
