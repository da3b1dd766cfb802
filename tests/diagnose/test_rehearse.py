"""Rehearsal: command rewriting (fast) and the recorder in a real one-rank gloo group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from validator.diagnose.rehearse import wrap
from validator.errors import UserError


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["torchrun", "--nproc-per-node=4", "train.py", "--lr", "3"],
         ["torchrun", "--nproc-per-node=4", "-m", "validator.trace", "train.py", "--lr", "3"]),
        (["torchrun", "--nnodes", "2", "--standalone", "-m", "pkg.train", "x"],
         ["torchrun", "--nnodes", "2", "--standalone", "-m", "validator.trace", "-m", "pkg.train", "x"]),
        (["python", "-u", "train.py", "a"], ["python", "-u", "-m", "validator.trace", "train.py", "a"]),
        (["python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "t.py"],
         ["python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "validator.trace", "t.py"]),
    ],
)  # fmt: skip
def test_wrap(argv: list[str], expected: list[str]) -> None:
    assert wrap(argv) == expected


def test_wrap_refuses_what_it_cannot_wrap() -> None:
    with pytest.raises(UserError):
        wrap(["torchrun", "--no-python", "./a.out"])
    with pytest.raises(UserError):
        wrap(["srun", "python", "t.py"])


SCRIPT = """
import datetime, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29631", rank=0, world_size=1, timeout=datetime.timedelta(seconds=10))
g = dist.new_group([0])
dist.all_reduce(torch.ones(3, 4))
out = [torch.zeros(2)]
dist.all_gather(out, torch.ones(2), group=g)
dist.broadcast(torch.ones(1, dtype=torch.int64), src=0)
dist.all_gather_object([None], {"x": 1})
dist.barrier()
raise ValueError("stop here")
"""


@pytest.mark.slow
def test_recorder_in_a_real_process(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(SCRIPT)
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", OMP_NUM_THREADS="1", VALIDATOR_TRACE_DIR=str(tmp_path / "tr"))
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root
    p = subprocess.run(
        [sys.executable, "-m", "validator.trace", "job.py"], cwd=tmp_path, env=env, capture_output=True, timeout=60
    )
    assert p.returncode == 1 and b"ValueError: stop here" in p.stderr
    lines = [json.loads(x) for x in (tmp_path / "tr" / "trace_rank0.jsonl").read_text().splitlines()]
    calls = [x for x in lines if x["kind"] == "call"]
    assert [c["op"] for c in calls] == [
        "new_group",
        "all_reduce",
        "all_gather",
        "broadcast",
        "all_gather_object",
        "barrier",
    ]
    ar = calls[1]
    assert ar["shapes"] == [[3, 4]] and ar["dtypes"] == ["float32"] and ar["site"] == "job.py:5" and ar["pg"] == "0"
    assert calls[2]["pg"] != "0" and calls[2]["seq"] == 1  # numbered per process group
    assert calls[3]["peer"] == 0 and calls[3]["dtypes"] == ["int64"]
    assert calls[4]["shapes"] == []  # objects are not compared by shape
    assert any(x["kind"] == "group" and x["ranks"] == [0] for x in lines)
    end = [x for x in lines if x["kind"] == "exception"]
    assert end and end[0]["type"] == "ValueError" and end[0]["site"] == "job.py:11"
