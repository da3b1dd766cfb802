"""Flight Recorder dumps: safe loading, pickle and JSON, matching by majority per group."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from validator.diagnose.flightrec import analyze, load_dump, load_plain_pickle
from validator.diagnose.run import diagnose_paths
from validator.errors import UserError

FR = Path(__file__).parent.parent / "fixtures" / "diagnose" / "fr-gloo"


def entry(
    seq: int, op: str = "all_reduce", size: int = 4, dtype: str = "Float", pg: str = "0", frames: bool = True
) -> dict[str, Any]:
    e: dict[str, Any] = {
        "record_id": seq - 1, "pg_id": 0, "process_group": (pg, "default_pg"), "collective_seq_id": seq, "p2p_seq_id": 0,
        "op_id": seq, "profiling_name": f"nccl:{op}", "time_created_ns": 1_000 + seq, "input_sizes": [[size]],
        "input_dtypes": [dtype], "output_sizes": [[size]], "output_dtypes": [dtype], "state": "completed",
        "retired": True, "timeout_ms": 600000, "is_p2p": False,
    }  # fmt: skip
    if frames:
        e["frames"] = [{"name": op, "filename": "/x/torch/distributed/distributed_c10d.py", "line": 1},
                       {"name": "main", "filename": "train.py", "line": 80 + seq}]  # fmt: skip
    return e


def dump(entries: list[dict[str, Any]], ranks: str = "[0, 1, 2, 3]") -> dict[str, Any]:
    return {"version": "2.10", "comm_lib_version": "2.21.5", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
            "pg_status": {"0": {"last_enqueued_collective": len(entries)}}, "entries": entries}  # fmt: skip


def write(tmp: Path, docs: dict[int, dict[str, Any]], fmt: str = "pickle") -> None:
    for r, d in docs.items():
        path = tmp / f"nccl_trace_rank_{r}"
        if fmt == "pickle":
            path.write_bytes(pickle.dumps(d))
        else:
            path.with_suffix(".json").write_text(json.dumps(d))


class Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch PWNED",))


def test_crafted_pickle_fails_safely(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "nccl_trace_rank_0"
    evil.write_bytes(pickle.dumps({"version": "2.10", "entries": [Boom()]}))
    with pytest.raises(UserError, match=r"refusing to load (posix|os)\.system"):
        load_dump(str(evil), "fr-pickle")
    assert not (tmp_path / "PWNED").exists()
    report, _ = diagnose_paths([str(evil)])
    assert report.exit_code() == 2 and "nccl_trace_rank_0" in report.input_errors[0]
    assert not (tmp_path / "PWNED").exists()


def test_plain_unpickler_reads_plain_data() -> None:
    data = {"a": [1, 2.5, None, True], "b": ("x", b"y")}
    assert load_plain_pickle(pickle.dumps(data)) == data


def test_real_gloo_json_dumps() -> None:
    dumps = [load_dump(str(p), "fr-json") for p in sorted(FR.glob("*.json"))]
    assert [d.rank for d in dumps] == [0, 1, 2, 3]
    assert dumps[0].pg_ranks == {"0": [0, 1, 2, 3]}  # gloo's "" key read as the default group
    ((d, members),) = analyze(dumps).divergences
    assert d.culprits == [1] and d.majority == [0, 2, 3] and members == [0, 1, 2, 3]


def test_rank0_odd_one_out_is_named_not_the_others(tmp_path: Path) -> None:
    """torchfrtrace takes rank 0 as the reference and blames 1, 2, 3 here (reference §4.3)."""
    docs = {r: dump([entry(1), entry(2, dtype="BFloat16" if r == 0 else "Float")]) for r in range(4)}
    write(tmp_path, docs)
    _report, diag = diagnose_paths([str(tmp_path)])
    assert diag.primary is not None and diag.primary.culprits == [0] and diag.primary.code == "COL001"
    assert "train.py:82 in main" in diag.primary.stack  # the culprit's Python stack, innermost last
    assert "at train.py:82" in diag.primary.summary


def test_missing_entry_and_missing_dump(tmp_path: Path) -> None:
    docs = {r: dump([entry(1), entry(2), entry(3)][: 2 if r == 2 else 3]) for r in (0, 1, 2)}  # rank 3: no dump
    write(tmp_path, docs, fmt="json")
    report, diag = diagnose_paths([str(tmp_path)])
    assert diag.primary is not None and diag.primary.code == "COL002" and diag.primary.culprits == [2]
    assert any("no Flight Recorder dump from rank 3" in n for n in diag.notes)
    assert any(f.code == "DGN021" for f in report.findings)


def test_dump_without_rank_in_name(tmp_path: Path) -> None:
    p = tmp_path / "trace.json"
    p.write_text(json.dumps(dump([entry(1)])))
    with pytest.raises(UserError, match="cannot tell the rank"):
        load_dump(str(p), "fr-json")
