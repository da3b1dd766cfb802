"""The streaming scanner: only anchor lines, right line numbers, blocks across chunk borders."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

from validator.diagnose.anchors import anchored
from validator.diagnose.filescan import scan_file

LOG = b"".join(
    [b"step %d loss 1.0\n" % i for i in range(50)]
    + [b"[rank1]: Traceback (most recent call last):\n", b'[rank0]: step 51 loss 1.0\n',
       b'[rank1]:   File "/w/train.py", line 88, in main\n', b"[rank1]:     dist.all_reduce(x)\n",
       b"[rank1]: RuntimeError: boom\n"]
    + [b"step %d loss 1.0\n" % i for i in range(60, 80)]
)  # fmt: skip


def test_hits_have_file_line_numbers_for_any_chunk_size() -> None:
    for chunk in (7, 64, 1 << 20):
        got = [(h.line, h.raw) for h in anchored(io.BytesIO(LOG), chunk=chunk)]
        assert got == [
            (51, b"[rank1]: Traceback (most recent call last):\n"[:-1]),
            (55, b"[rank1]: RuntimeError: boom"),
        ]


def test_traceback_across_chunks_gives_the_call_site(tmp_path: Path, monkeypatch: object) -> None:
    import validator.diagnose.anchors as anchors

    p = tmp_path / "rank1.log"
    p.write_bytes(LOG)
    for chunk in (16, 100, 1 << 22):
        setattr(anchors, "CHUNK", chunk)  # noqa: B010 - the default chunk is read at call time below
        res = scan_file(str(p))
        exc = [e for e in res.events if e.kind == "py.exception"]
        assert len(exc) == 1, chunk
        assert exc[0].rank == 1 and exc[0].source == "rank1.log:55"
        assert exc[0].stack == ["/w/train.py:88 in main"]
    setattr(anchors, "CHUNK", 1 << 22)  # noqa: B010


def test_gzip_and_plain_read_the_same(tmp_path: Path) -> None:
    plain, gz = tmp_path / "a.log", tmp_path / "b.log.gz"
    plain.write_bytes(LOG)
    gz.write_bytes(gzip.compress(LOG))
    a, b = scan_file(str(plain)), scan_file(str(gz))
    assert [(e.kind, e.source.split(":")[1]) for e in a.events] == [(e.kind, e.source.split(":")[1]) for e in b.events]
    assert a.events


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    data = gzip.compress(LOG * 50)
    p = tmp_path / "cut.log.gz"
    p.write_bytes(data[: len(data) - 40])
    res = scan_file(str(p))
    assert res.error is not None
    assert res.events  # the part before the cut is still diagnosed


def test_torchrun_summary_block(tmp_path: Path) -> None:
    src = Path(__file__).parent.parent / "fixtures" / "diagnose" / "torchrun-summary.log"
    res = scan_file(str(src))
    fails = [e for e in res.events if e.kind == "summary.failure"]
    roots = [e for e in fails if e.data["root"]]
    assert len(roots) == 1 and roots[0].ident.rank == 1 and roots[0].data["exit"] == 1
    assert {e.data.get("signal") for e in fails if not e.data["root"]} == {"SIGTERM"}
    # lines inside the block (its traceback field) are not read a second time as events
    assert not [e for e in res.events if e.kind == "py.exception" and e.rank is None]


NOISE = b"""node17:12345:12399 [5] NCCL INFO Channel 03/0 : 5[5] -> 6[6] via P2P/CUMEM/read
node17:12345:12399 [5] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
[rank5]:[I1130 09:39:26.201103723 ProcessGroupNCCL.cpp:1234] [PG ID 0 PG GUID 0(default_pg) Rank 5] ProcessGroupNCCL initialization options: size: 1024, global rank: 5
[default5]:step 1234 | loss 2.3456 | lr 3.0e-04 | grad_norm 1.234 | tokens/s 123456 | elapsed 12.3ms
2026-11-30 09:39:26,201 - INFO - train.py:88 - iteration 1234/100000 consumed samples 5000 throughput 123.4
[default5]:  data loader worker 3 prefetched 8 batches in 41.2 ms (queue depth 4)
[rank5]:[W1130 09:39:26.201103723 Utils.hpp:165] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())
"""


def test_anchors_skip_ordinary_training_output() -> None:
    """Speed depends on the anchors missing the usual noise (a short anchor such as 'fault'
    would hit every 'default_pg' line)."""
    assert list(anchored(io.BytesIO(NOISE * 100))) == []
