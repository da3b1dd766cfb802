"""torchrun --log-dir trees from real runs: ranks from the path, evidence paths that keep their
directories, and a failed job never reads as "no failure found" (issue 11 items 2 and 5)."""

from __future__ import annotations

import pytest

from validator.diagnose.run import diagnose_paths

from .conftest import Scenario

pytestmark = pytest.mark.slow


def test_raise_in_a_log_dir_tree(torch_scenarios: dict[str, Scenario]) -> None:
    sc = torch_scenarios["raise_logdir"]
    assert sc.returncodes == [1]
    report, d = diagnose_paths([str(sc.dir / "logs")])
    assert d.primary is not None and d.primary.culprits == [1]
    sources = [e.source for e in d.primary.evidence]
    assert sources and all("attempt_0/1/" in s for s in sources), sources
    assert report.exit_code() == 1


def test_skip_in_a_log_dir_tree_is_not_a_clean_run(torch_scenarios: dict[str, Scenario]) -> None:
    sc = torch_scenarios["skip_logdir"]
    assert sc.returncodes == [1]
    report, d = diagnose_paths([str(sc.dir / "logs")])
    assert d.primary is not None, "a job that exited 1 read as no failure"
    assert set(d.ranks_seen) == {0, 1, 2}
    assert all("/stderr.log:" in e.source or "/stdout.log:" in e.source for e in d.primary.evidence)
    assert report.exit_code() == 1
