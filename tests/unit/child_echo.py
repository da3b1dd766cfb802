"""A stage child for tests/unit/test_procs.py (``python -m tests.unit.child_echo``): does what its spec says."""

from __future__ import annotations

import contextlib
import json
import sys
import time

from validator.procs import spec_in


def main() -> int:
    spec = spec_in()
    if spec.get("warn"):  # torch's C++ warning with its stack frames: a store client refused
        import datetime

        import torch.distributed as dist

        with contextlib.suppress(Exception):  # the refusal is the point
            dist.TCPStore("127.0.0.1", int(spec["warn"]), 2, False, timeout=datetime.timedelta(seconds=1))
    sys.stdout.write("chatter before the answer\n")
    sys.stdout.flush()
    time.sleep(float(spec.get("sleep", 0)))
    sys.stdout.write(json.dumps({"echo": spec.get("echo"), "parent": spec["parent"]}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
