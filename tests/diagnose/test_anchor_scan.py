"""The scanner (issue 25): one Aho-Corasick pass over bounded windows of each chunk. Whatever the
chunk and window sizes, the lines handed over are the lines that hold an anchor, with their file
line numbers."""

from __future__ import annotations

import io
import random

import pytest

from validator.diagnose import anchors as scan
from validator.diagnose.anchors import ANCHORS, anchored
from validator.diagnose.filescan import tee_streams

OTHER = (b"ERROR", b"FAIL", b"Fail", b"IMEOUT", b"BORT", b"XCEPTION", b"imed out", b"Error")  # overlapping anchors


def _reference(data: bytes, anchors: tuple[bytes, ...]) -> list[tuple[int, bytes]]:
    """(line number, line) of every line holding an anchor: the definition, one line at a time."""
    return [(n, ln) for n, ln in enumerate(data.split(b"\n"), 1) if any(a in ln for a in anchors)]


def _near_misses(anchors: tuple[bytes, ...]) -> list[bytes]:
    """Each anchor with one byte changed, or cut by one byte: no hit unless another anchor is in it."""
    out = []
    for a in anchors:
        out += [a[:i] + b"#" + a[i + 1 :] for i in range(len(a))] + [a[1:], a[:-1]]
    return [m for m in out if not any(x in m for x in anchors)]


def _log(rnd: random.Random, anchors: tuple[bytes, ...], lines: int) -> bytes:
    pieces = [*anchors, *_near_misses(anchors), b"\x01", b"\x02", "é".encode(), b"step 12 loss 0.5", b" "]
    out = []
    for n in range(lines):
        if rnd.random() < 0.7:  # long stretches without a hit: line numbers carried over many chunks
            out.append(b"noise line %d of the training output" % n)
        else:
            out.append(b"%d " % n + b" ".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 4))))
    return b"\n".join(out) + b"\n"


@pytest.mark.parametrize("window", [scan.WINDOW, 64, 30])
def test_lines_handed_over_are_the_lines_holding_an_anchor(monkeypatch: pytest.MonkeyPatch, window: int) -> None:
    """Windows of 64 and 30 bytes cut most lines, and an anchor across a cut is found in the next."""
    monkeypatch.setattr(scan, "WINDOW", window)
    monkeypatch.setattr(scan, "FIRST_WINDOW", min(window, scan.FIRST_WINDOW))
    rnd = random.Random(25)
    for anchors in (ANCHORS, OTHER):
        for _ in range(20):
            data = _log(rnd, anchors, 400)
            want = _reference(data, anchors)
            assert want
            for chunk in (1 << 22, 1000, 37):
                got = [(h.line, h.raw) for h in anchored(io.BytesIO(data), anchors, chunk=chunk)]
                assert got == want, chunk


def test_a_near_miss_is_no_hit() -> None:
    lines = _near_misses(ANCHORS)
    assert b"#ARN" in lines and b"WAR" in lines  # "WARN" with its W changed, and cut
    lines = [b"[rank3]: " + s + b" 42" for s in lines]
    lines = [s for s in lines if not any(a in s for a in ANCHORS)]  # none made whole by its neighbours
    data = b"\n".join(lines) + b"\n[rank3]: NCCL WARN x\n"
    assert [(h.line, h.raw) for h in anchored(io.BytesIO(data))] == [(len(lines) + 1, b"[rank3]: NCCL WARN x")]


def test_an_anchor_across_a_window_cut_inside_a_long_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "WINDOW", 1000)
    monkeypatch.setattr(scan, "FIRST_WINDOW", 1000)
    for at in range(990, 1010):
        data = b"x" * at + b"death signal" + b"y" * 3000 + b"\nz\n"
        assert [h.line for h in anchored(io.BytesIO(data))] == [1], at


def test_a_flood_of_one_line_is_a_few_hits() -> None:
    for anchor in (b"rror", b"NCCL version", b"death signal"):
        data = b"before\n" + (b"[rank1]: " + anchor + b" here\n") * 5000 + b"after\n[rank1]: " + anchor + b" again\n"
        hits = [(h.line, h.repeats) for h in anchored(io.BytesIO(data), chunk=1 << 16)]
        assert hits[0][0] == 2 and hits[-1] == (5003, 0)
        assert sum(1 + r for _, r in hits[:-1]) == 5000  # every copy counted, a few hits per chunk at most
        assert len(hits) < 10


def test_an_empty_anchor_is_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        list(anchored(io.BytesIO(b"a\n"), (b"rror", b"")))


def test_tee_streams_on_the_first_line_and_after() -> None:
    head = b"[default0]:a\n[default1]:b\n[rank2]:c\n[epoch5]:d\nx [default4]:e\n[gpu7:3]:f"
    assert tee_streams(head) == {(None, 0), (None, 1), ("gpu7", 3)}
