"""diagnose is honest about what it read (issue 21 item 8): nothing readable is exit 3 with one line
naming what was not read, never "no failure found"; a directory it cannot list is named; error lines
no rule knows are an unrecognised failure quoting file:line; the combined ``--tee`` log and the
``--log-dir`` tree of one run give the same answer."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from validator.__main__ import main
from validator.diagnose.run import diagnose_paths

TEE = Path(__file__).parent.parent / "fixtures" / "diagnose" / "tee-exit"
NOBODY = 65534


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["diagnose", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_empty_directory_is_exit_3_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "logs").mkdir()
    rc, out, err = run(capsys, str(tmp_path / "logs"))
    assert (rc, out) == (3, "")
    assert err == f"validator: error: nothing read: {tmp_path / 'logs'} (an empty directory)\n"


def test_empty_file_binary_and_fifo_are_exit_3_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rank0.log").write_bytes(b"")
    (tmp_path / "shot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    os.mkfifo(tmp_path / "pipe.log")
    for fmt in ("table", "json"):
        rc, out, err = run(capsys, str(tmp_path), "-f", fmt)
        assert (rc, out) == (3, ""), fmt
        assert len(err.splitlines()) == 1 and "no failure found" not in err
        assert "pipe.log (skipped: a FIFO" in err and "shot.png (binary file" in err
        assert "rank0.log (an empty file)" in err


def test_nuls_alone_are_no_log_and_text_after_them_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Red-teamed: a file of NULs was read as a log with no failure (exit 0), and a 2 GiB sparse one was read in full.
    NULs alone are a binary file (exit 3); a copytruncate'd log (NULs, then its lines) is still read."""
    (tmp_path / "rank0.log").write_bytes(b"\x00" * (1 << 20))
    with open(tmp_path / "rank1.log", "wb") as f:
        f.truncate(2 << 30)  # a hole to the end: nothing to read
    rc, out, err = run(capsys, str(tmp_path))
    assert (rc, out) == (3, "") and "rank0.log (binary file" in err and "rank1.log (binary file" in err, err
    (tmp_path / "rank1.log").unlink()
    (tmp_path / "rank0.log").write_bytes(b"\x00" * 100_000 + b"RuntimeError: CUDA error: an illegal memory access\n")
    rc, out, err = run(capsys, str(tmp_path))
    assert rc == 1 and "DGN008" in out, out + err


def test_wrong_path_stays_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, str(tmp_path / "nope"))
    assert (rc, out) == (2, "") and err == f"validator: error: {tmp_path / 'nope'}: no such file or directory\n"


def test_an_empty_directory_beside_logs_is_a_note(tmp_path: Path) -> None:
    (tmp_path / "dumps").mkdir()
    (tmp_path / "rank0.log").write_text("[rank0]: step 1 loss 2.0\n")
    report, diag = diagnose_paths([str(tmp_path / "rank0.log"), str(tmp_path / "dumps")], require_input=True)
    assert diag.primary is None and report.exit_code() == 0
    assert any("dumps: an empty directory" in n for n in diag.notes)


def test_healthy_log_is_still_no_failure(tmp_path: Path) -> None:
    log = tmp_path / "node0.log"
    log.write_text("+ torchrun --rdzv_conf=timeout=20 --max-restarts=0 train.py\n"
                   "INFO rdzv_configs : {'timeout': 900, 'join_timeout': 30}\n[done] rank=0 step 3\n")  # fmt: skip
    report, diag = diagnose_paths([str(log)], require_input=True)
    assert diag.primary is None and report.exit_code() == 0


def test_unrecognised_error_lines_are_quoted_with_file_and_line(tmp_path: Path) -> None:
    """Lines that say abort or timeout in words, which no family knows: DGN013, nobody named."""
    log = tmp_path / "job.log"
    log.write_text("step 1 loss 0.3\nabort: shard server went away\nworker timeout reached, giving up\n")
    report, diag = diagnose_paths([str(log)], require_input=True)
    p = diag.primary
    assert p is not None and (p.code, p.culprits, p.confidence) == ("DGN013", [], "unknown")
    assert "job.log:2: abort: shard server went away" in p.summary
    assert [e.source for e in p.evidence] == ["job.log:2", "job.log:3"]
    assert report.exit_code() == 1


@pytest.fixture
def shared_tree() -> Iterator[Path]:
    """A tree another user can walk (pytest's tmp_path is root's alone)."""
    top = Path(tempfile.mkdtemp(prefix="cv-honest-"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _as_nobody(argv: list[str]) -> tuple[int, str]:
    """Run the CLI in a forked child that dropped root: the kernel refuses what nobody cannot read."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, straight to _exit
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            sys.stdout = sys.stderr = open(w, "w", closefd=False)  # noqa: SIM115 - flushed below
            rc = main(argv)
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001 - whatever happens, the forked child must reach _exit
            rc = 99
        os._exit(rc)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), text


@pytest.mark.skipif(os.geteuid() != 0, reason="drops root to make a directory unreadable")
def test_unreadable_subdirectory_is_named(shared_tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = shared_tree / "logs"
    (logs / "node1").mkdir(parents=True)
    logs.chmod(0o755)
    (logs / "rank0.log").write_text("[rank0]: step 1 loss 2.0\n")
    (logs / "rank0.log").chmod(0o644)
    (logs / "node1" / "rank1.log").write_text("[rank1]: RuntimeError: bad shard\n")
    (logs / "node1").chmod(0o700)  # root's: nobody cannot list it
    (logs / "up").symlink_to("..")  # a link back up is read once, not looped
    rc, out, _ = run(capsys, str(logs), "-f", "json")  # as root: read, and the imports are loaded
    assert rc == 1 and json.loads(out)["diagnosis"]["initiating_ranks"] == [1]
    rc, text = _as_nobody(["diagnose", str(logs), "-f", "json"])
    doc = json.loads(text[: text.rindex("}") + 1])
    assert rc == 3, text
    assert doc["outcomes"] == [
        {"target": str(logs / "node1"), "status": "unparsed", "detail": "cannot read directory: Permission denied"}
    ]
    assert doc["diagnosis"]["code"] is None
    rc, text = _as_nobody(["diagnose", str(logs)])
    assert rc == 3 and f"UNPARSED {logs / 'node1'}: cannot read directory: Permission denied" in text, text


@pytest.mark.skipif(os.geteuid() != 0, reason="drops root to make a directory unreadable")
def test_only_an_unreadable_directory_is_nothing_read(shared_tree: Path) -> None:
    (shared_tree / "logs").mkdir(mode=0o700)
    (shared_tree / "logs" / "rank0.log").write_text("[rank0]: RuntimeError: boom\n")
    rc, text = _as_nobody(["diagnose", str(shared_tree / "logs")])
    assert (rc, text) == (3, f"validator: error: nothing read: {shared_tree / 'logs'} (cannot read directory: "
                             "Permission denied)\n")  # fmt: skip


def _tee_and_tree() -> dict[str, list[str]]:
    return {"tee": [str(TEE / "console.log")], "tree": [str(TEE / "tree"), str(TEE / "agent.log")]}


def test_tee_log_and_log_dir_tree_agree_on_the_rank_that_exited() -> None:
    """Real torchrun run (worker.py SCENARIO=exit BAD_RANK=2, --tee=3 and --log-dir at once): rank 2
    ran out of data and exited 0; rank 1 and 3 lost their peer, torchrun SIGTERMed 0 before it said
    anything. Both shapes: COL002 rank 2, 4 participants, no NCCL advice."""
    for shape, paths in _tee_and_tree().items():
        report, diag = diagnose_paths(paths, require_input=True)
        p = diag.primary
        assert p is not None and (p.code, p.culprits, p.confidence) == ("COL002", [2], "medium"), (shape, p)
        assert "exit code 0" in p.summary, shape
        assert report.participants == 4, shape


def test_tee_log_knows_a_rank_that_printed_nothing(tmp_path: Path) -> None:
    """torchrun's local ranks run from 0: [default3]: means a local rank 2, as the tree's empty
    attempt_0/2/ files do, even when rank 2's line is cut out."""
    lines = (TEE / "console.log").read_bytes().splitlines(keepends=True)
    cut = tmp_path / "console.log"
    cut.write_bytes(b"".join(x for x in lines if not x.startswith(b"[default2]:")))
    assert len(cut.read_bytes()) < len(b"".join(lines))
    _, diag = diagnose_paths([str(cut)])
    assert diag.primary is not None and (diag.primary.code, diag.primary.culprits) == ("COL002", [2])
