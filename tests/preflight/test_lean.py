"""What a participant loads. Every rank but the coordinator runs `validator preflight` on the
launch path, so it loads the standard library, the agent, the facts parser and the preflight
client only: never the CLI (typer, rich), asyncio, the checks, the typed model, profiles (yaml),
the report, ClusterShell, dataclasses or typing. Real processes on loopback, each under a wrapper that
writes the names in its sys.modules when it exits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import PYTHON
from tests.preflight.conftest import base_env, collect, ranks

# The coordinator's (and the CLI's) alone: a participant that loads one of these pays for it
# once per rank at launch.
COORDINATOR_ONLY = (
    "asyncio", "ssl", "dataclasses", "inspect", "typer", "rich", "click", "yaml", "ClusterShell",
    "validator.model", "validator.checks", "validator.profiles", "validator.report", "validator.codes",
    "validator.preflight.coordinator", "validator.preflight.connection", "validator.preflight.refusals",
    "validator.preflight.gate", "validator.preflight.door",  # the gather's policy; late nodes of an elastic range
    "shutil", "encodings.idna", "random", "validator.targets",  # host folding: a passing verdict names nobody
    "typing",  # ~2 ms a rank, and NamedTuples ~1 ms a class: annotations only under `TYPE_CHECKING = False`
)  # fmt: skip

WRAPPER = """import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from validator.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def loaded(names: list[str], prefix: str) -> bool:
    return any(n == prefix or n.startswith(prefix + ".") for n in names)


def test_a_participant_loads_nothing_only_the_coordinator_needs(tmp_path: Path, port: int) -> None:
    outs = [tmp_path / f"modules{r}.json" for r in range(2)]
    procs = [
        (subprocess.Popen([PYTHON, "-c", WRAPPER, str(out), "preflight", "--timeout", "30", "--quiet"],
                          env=base_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), None, 0.0)
        for out, env in zip(outs, ranks(2, port), strict=True)
    ]  # fmt: skip
    done = collect(procs, limit=60)
    assert [r.rc for r in done] == [0, 0], [r.err[-2000:] for r in done]
    coordinator, participant = (json.loads(out.read_text()) for out in outs)
    assert loaded(coordinator, "asyncio") and loaded(coordinator, "validator.checks"), "the wrapper sees imports"
    assert loaded(participant, "validator.preflight.participant"), participant
    assert [m for m in COORDINATOR_ONLY if loaded(participant, m)] == []
