"""`validator diagnose` end to end: formats, exit codes, one-line input errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from validator.__main__ import main

FIX = Path(__file__).parent.parent / "fixtures"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["diagnose", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_failure_table_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(FIX / "logs" / "torch-collective_mismatch_detail.log"), "--explain")
    assert rc == 1
    assert "COL001" in out and "initiating: rank 1 (confidence high)" in out
    assert "The run failed with a mismatched collective" in out


def test_json_has_the_diagnosis(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(FIX / "diagnose" / "fr-gloo"), "-f", "json")
    doc = json.loads(out)
    assert rc == 1
    assert doc["diagnosis"]["initiating_ranks"] == [1] and doc["diagnosis"]["code"] == "COL001"
    assert doc["findings"][0]["code"] == "COL001"


def test_junit(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(FIX / "diagnose" / "public" / "nccl-desync-report.log"), "-f", "junit")
    root = ET.fromstring(out.split("?>", 1)[1])
    assert rc == 1 and root.get("failures") == "1"
    assert any(tc.get("name", "").startswith("COL002") for tc in root)


def test_healthy_run_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(FIX / "logs" / "torch-ok.log"))
    assert rc == 0 and "no failure found" in out


def test_fail_on_never(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, _ = run(capsys, str(FIX / "logs" / "torch-missing_node.log"), "--fail-on", "never")
    assert rc == 0


def test_missing_path_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "/nonexistent/rank0.log")
    assert rc == 2 and out == ""
    assert err.strip() == "validator: error: /nonexistent/rank0.log: no such file or directory"


def test_bad_trace_line_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = tmp_path / "trace_rank0.jsonl"
    t.write_text('{"kind": "header", "format": "validator-trace", "rank": 0}\nnot json\n{"kind": "end"}\n')
    rc, _, err = run(capsys, str(t))
    assert rc == 2 and f"{t}:2: not a trace line" in err


def test_binary_file_is_incomplete_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "core.bin").write_bytes(b"\x00\x01\x02" * 100)
    (tmp_path / "rank0.log").write_text("[rank0]: step 1 loss 2.0\n")
    rc, out, _ = run(capsys, str(tmp_path))
    assert rc == 3 and "UNPARSED" in out and "core.bin" in out
    rc, _, _ = run(capsys, str(tmp_path), "--allow-incomplete")
    assert rc == 0
    (tmp_path / "rank1.log").write_text("[rank1]: RuntimeError: boom\n")
    rc, _, _ = run(capsys, str(tmp_path))
    assert rc == 1  # a diagnosed failure outranks the unreadable file


def test_glob_and_gz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    for r in range(3):
        text = f"[rank{r}]: RuntimeError: [x/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 6000ms for recv operation to complete\n"
        if r == 1:
            text = "[rank1]: ValueError: bad shard\n"
        (tmp_path / f"rank{r}.log.gz").write_bytes(gzip.compress(text.encode()))
    rc, out, _ = run(capsys, str(tmp_path / "rank*.log.gz"))
    assert rc == 1 and "DGN010" in out and "initiating: rank 1 (confidence high)" in out


def test_codes_are_documented() -> None:
    from validator.docs import explain_text
    from validator.registry import registry

    codes = [c for c in registry() if c.startswith(("COL", "DGN"))]
    assert {"COL001", "COL002", "COL003", "DGN001", "DGN004", "DGN008"} <= set(codes)
    for code in codes:
        text = explain_text(code)
        assert "What it checks: " in text and "How to fix: " in text and "Why it matters: " in text
