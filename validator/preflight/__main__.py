"""`python -m validator.preflight` (e.g. `torchrun ... -m validator.preflight`): one participant per rank."""

from __future__ import annotations

import sys

from validator.preflight.main import main

sys.exit(main(sys.argv[1:]))
