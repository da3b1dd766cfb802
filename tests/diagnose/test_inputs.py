"""How inputs are listed and named: evidence paths keep their directories (issue 11 item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from validator.diagnose.inputs import display_names, file_rank, log_files


def _tree(tmp_path: Path) -> Path:
    for r in (2, 3):
        d = tmp_path / "logs" / f"rank{r}"
        d.mkdir(parents=True)
        (d / "stderr.log").write_text("x\n")
    return tmp_path / "logs"


def test_names_below_the_directory_given(tmp_path: Path) -> None:
    logs = _tree(tmp_path)
    files = log_files([str(logs)])
    assert sorted(display_names(files, [str(logs)]).values()) == ["rank2/stderr.log", "rank3/stderr.log"]


def test_names_of_files_and_globs(tmp_path: Path) -> None:
    logs = _tree(tmp_path)
    two = [str(logs / "rank2" / "stderr.log"), str(logs / "rank3" / "stderr.log")]
    assert sorted(display_names(two, two).values()) == ["rank2/stderr.log", "rank3/stderr.log"]
    one = two[:1]
    assert display_names(one, one) == {one[0]: "stderr.log"}
    pattern = str(logs / "*" / "stderr.log")
    assert sorted(display_names(log_files([pattern]), [pattern]).values()) == ["rank2/stderr.log", "rank3/stderr.log"]


def test_relative_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    files = log_files(["logs"])
    assert sorted(display_names(files, ["logs"]).values()) == ["rank2/stderr.log", "rank3/stderr.log"]


def test_log_dir_tree_rank_from_the_path() -> None:
    assert file_rank("/x/run_abc/attempt_0/3/stderr.log") == 3
    assert file_rank("/x/run_abc/attempt_0/3/error.json") == 3
    assert file_rank("/x/run_abc/attempt_0/3/other.log") is None
    assert file_rank("/x/train_rank_5.out") == 5
