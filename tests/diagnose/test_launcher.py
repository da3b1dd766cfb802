"""Our own launcher's failures (issue 11): a 4-rank gloo job under real torchrun where rank 2
skips an all_reduce, raises, calls all_gather where the others call all_reduce, hangs, is
killed, or skips an all_reduce and exits 0. Each run writes both log shapes at once: the combined ``--tee`` console log
(``[default2]:[rank2]:`` prefixes) and the ``--log-dir`` tree (``attempt_0/2/stderr.log``),
diagnosed with torchrun's own console lines (its failure summary goes there).

The five runs start together (ports 29661-29669, short collective timeouts) so the torch imports
overlap; every process runs in its own session and is killed by pid at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from validator.diagnose.codes import CODES
from validator.diagnose.events import Diagnosis
from validator.diagnose.run import diagnose_paths

from .conftest import TORCHRUN, WORKER, _kill, _start

pytestmark = pytest.mark.slow
BAD = 2
SCENARIOS = {"skip": 29661, "raise": 29663, "mismatch": 29665, "hang": 29667, "kill": 29669, "exit": 29671}
LIMIT_S = 100


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    if not TORCHRUN.exists():
        pytest.skip("torchrun not installed in this environment")
    base = tmp_path_factory.mktemp("launcher")
    env0 = dict(os.environ, OMP_NUM_THREADS="1", PG_TIMEOUT_S="5", PYTHONUNBUFFERED="1", BAD_RANK=str(BAD))
    env0.pop("TORCHELASTIC_RUN_ID", None)
    procs: list[subprocess.Popen[bytes]] = []
    dirs: dict[str, Path] = {}
    for name, port in SCENARIOS.items():
        d = base / name
        d.mkdir()
        cmd = [str(TORCHRUN), "--nproc-per-node=4", "--master-addr=127.0.0.1", f"--master-port={port}",
               "--max-restarts=0", "--tee=3", f"--log-dir={d / 'tree'}", str(WORKER)]  # fmt: skip
        procs.append(_start(cmd, dict(env0, SCENARIO=name), d / "console.log"))
        dirs[name] = d
    deadline = time.monotonic() + LIMIT_S
    try:
        for p in procs:
            try:
                p.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(p)
        assert [p.returncode for p in procs] == [1] * len(procs)  # every run failed, as torchrun says
        yield dirs
    finally:
        for p in procs:
            _kill(p)
        shutil.rmtree(base, ignore_errors=True)


def shapes(d: Path) -> dict[str, list[str]]:
    """The combined log alone; the --log-dir tree with torchrun's own console lines (what the
    console holds with --redirects instead of --tee: the lines without a [defaultN]: prefix)."""
    tree = d / "tree"
    assert list(tree.glob("*/attempt_0/2/stderr.log")), "torchrun --log-dir wrote no per-rank files"
    lines = (d / "console.log").read_bytes().splitlines(keepends=True)
    agent = d / "agent.log"
    agent.write_bytes(b"".join(x for x in lines if not x.startswith(b"[default")))
    # the workers' lines taken out; a run where torchrun stopped every other worker before it printed (a loaded
    # machine: the killed rank's peers had no time for their traceback) has none to take out
    assert agent.stat().st_size <= (d / "console.log").stat().st_size
    return {"tee": [str(d / "console.log")], "tree": [str(tree), str(agent)]}


def verdicts(d: Path) -> dict[str, Diagnosis]:
    return {shape: diagnose_paths(paths)[1] for shape, paths in shapes(d).items()}


def test_raise_names_the_rank_and_its_line(runs: dict[str, Path]) -> None:
    for shape, diag in verdicts(runs["raise"]).items():
        p = diag.primary
        assert p is not None and (p.code, p.culprits, p.confidence) == ("DGN010", [BAD], "high"), shape
        assert any("worker.py" in s for s in p.stack), shape
        assert BAD not in diag.collateral, shape


def test_mismatch_names_both_sides(runs: dict[str, Path]) -> None:
    for shape, diag in verdicts(runs["mismatch"]).items():
        p = diag.primary
        assert p is not None and (p.code, p.culprits) == ("COL001", [BAD]), (shape, p and p.summary)
        assert "rank 2 in all_gather" in p.summary and "ranks 0-1,3 in all_reduce" in p.summary, shape
        assert p.expected != p.actual, shape


def test_hang_the_silent_rank_is_the_suspect(runs: dict[str, Path]) -> None:
    for shape, diag in verdicts(runs["hang"]).items():
        p = diag.primary
        # known from torchrun's summary only (its lines could be outside an excerpt): low; with its own
        # log file that shows no timeout: medium
        assert p is not None and (p.code, p.culprits) == ("COL002", [BAD]), (shape, p and p.summary)
        assert p.confidence in ("low", "medium"), shape
        assert set(diag.collateral) == {0, 1, 3}, shape


def test_kill_names_the_killed_rank(runs: dict[str, Path]) -> None:
    for shape, diag in verdicts(runs["kill"]).items():
        p = diag.primary
        assert p is not None and (p.code, p.culprits) == ("DGN011", [BAD]), (shape, p and p.summary)
        assert "SIGKILL" in p.summary, shape


def test_exit_tee_and_tree_name_the_rank_that_exited(runs: dict[str, Path]) -> None:
    """Rank 2 runs out of data and exits 0 while the others wait in an all_reduce (issue 21: the
    --tee log said "NCCL or network error" with 3 participants, the tree COL002 rank 2)."""
    got = verdicts(runs["exit"])
    for shape, diag in got.items():
        p = diag.primary
        assert p is not None and (p.code, p.culprits) == ("COL002", [BAD]), (shape, p and p.summary)
        assert p.confidence == "medium" and BAD not in diag.collateral, shape
    assert got["tee"].ranks_seen == got["tree"].ranks_seen == [0, 1, 2, 3]


def test_skip_without_dumps_names_nobody_and_gives_gloo_advice(runs: dict[str, Path]) -> None:
    """Every rank times out, the skipping one too (its next all_reduce pairs with the others'
    first): logs alone cannot tell, so nobody is named with confidence (a rank torchrun stopped
    before it printed is at most a low-confidence suspect), never the earliest by timestamp; the
    fix fits gloo (no TORCH_NCCL_* variables)."""
    assert "TORCH_NCCL" in CODES["COL003"].hint
    for shape, diag in verdicts(runs["skip"]).items():
        p = diag.primary
        assert p is not None and p.code in ("COL003", "COL002") and p.confidence in ("unknown", "low"), (shape, p)
        assert "timestamp" not in p.reason, shape
        assert "TORCH_NCCL" not in (p.fix or CODES[p.code].hint), shape
        if p.code == "COL003":
            assert p.culprits == [] and "gloo" in p.fix, shape
