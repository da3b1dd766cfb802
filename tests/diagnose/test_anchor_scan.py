"""The scanner's two kinds of pass (issue 25): a bytes.find per anchor of common bytes, one regex
pass over a translated copy for all the others. Whatever the plan, the lines handed over are the
lines that hold an anchor, with their file line numbers."""

from __future__ import annotations

import io
import random

from validator.diagnose.anchors import ANCHORS, _plan, anchored
from validator.diagnose.filescan import tee_streams

OTHER = (b"ERROR", b"FAIL", b"Fail", b"IMEOUT", b"BORT", b"XCEPTION", b"imed out")  # a second anchor set


def _reference(data: bytes, anchors: tuple[bytes, ...]) -> list[tuple[int, bytes]]:
    """(line number, line) of every line holding an anchor: the definition, one line at a time."""
    return [(n, ln) for n, ln in enumerate(data.split(b"\n"), 1) if any(a in ln for a in anchors)]


def _stand_ins(anchors: tuple[bytes, ...]) -> list[bytes]:
    """Each anchor of the joint pass with its pivot byte replaced by another pivot byte: the
    translated copy reads them as the anchor, the real bytes do not."""
    plan = _plan(anchors)
    pivots = [b for b in range(256) if plan.table[b] == 1]
    out = []
    for a in anchors:
        if a in plan.finds:
            continue
        for i, b in enumerate(a):
            if plan.table[b] == 1:
                out += [a[:i] + bytes([p]) + a[i + 1 :] for p in pivots if p != b]
    return out


def _log(rnd: random.Random, anchors: tuple[bytes, ...], lines: int) -> bytes:
    pieces = [*anchors, *_stand_ins(anchors), b"\x01", b"\x02", "é".encode(), b"step 12 loss 0.5", b" "]
    out = []
    for n in range(lines):
        if rnd.random() < 0.7:  # long stretches without a hit: line numbers carried over many chunks
            out.append(b"noise line %d of the training output" % n)
        else:
            out.append(b"%d " % n + b" ".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 4))))
    return b"\n".join(out) + b"\n"


def test_lines_handed_over_are_the_lines_holding_an_anchor() -> None:
    rnd = random.Random(25)
    for anchors in (ANCHORS, OTHER):
        assert _stand_ins(anchors), "the joint pass has anchors whose pivot another byte can stand in for"
        for _ in range(20):
            data = _log(rnd, anchors, 400)
            want = _reference(data, anchors)
            assert want
            for chunk in (1 << 22, 1000, 37):
                got = [(h.line, h.raw) for h in anchored(io.BytesIO(data), anchors, chunk=chunk)]
                assert got == want, chunk


def test_a_stand_in_for_a_pivot_is_no_hit() -> None:
    lines = [s for s in _stand_ins(ANCHORS) if not any(a in s for a in ANCHORS)]
    assert b"fARN" in lines or b"xARN" in lines  # "WARN" with another pivot byte where its W is
    data = b"".join(b"[rank3]: " + s + b" 42\n" for s in lines) + b"[rank3]: NCCL WARN x\n"
    assert [(h.line, h.raw) for h in anchored(io.BytesIO(data))] == [(len(lines) + 1, b"[rank3]: NCCL WARN x")]


def test_a_flood_of_one_line_is_one_hit_in_either_pass() -> None:
    plan = _plan(ANCHORS)
    joint = next(a for a in ANCHORS if a not in plan.finds)
    for anchor in (plan.finds[0], joint):
        data = b"before\n" + (b"[rank1]: " + anchor + b" here\n") * 5000 + b"after\n[rank1]: " + anchor + b" again\n"
        hits = [(h.line, h.repeats) for h in anchored(io.BytesIO(data), chunk=1 << 16)]
        assert hits[0][0] == 2 and hits[-1] == (5003, 0)
        assert sum(1 + r for _, r in hits[:-1]) == 5000  # every copy counted, a few hits per chunk at most
        assert len(hits) < 10


def test_every_anchor_is_searched_and_few_on_their_own() -> None:
    """A pass of its own costs about a quarter of all the others together: an anchor made only of
    the commonest bytes of logs (space, vowels, digits) slows every scan."""
    plan = _plan(ANCHORS)
    assert plan.joint is not None and plan.exact is not None
    for a in ANCHORS:
        assert a in plan.finds or plan.exact.search(a) is not None, a
    assert len(plan.finds) <= 4, plan.finds


def test_tee_streams_on_the_first_line_and_after() -> None:
    head = b"[default0]:a\n[default1]:b\n[rank2]:c\n[epoch5]:d\nx [default4]:e\n[gpu7:3]:f"
    assert tee_streams(head) == {(None, 0), (None, 1), ("gpu7", 3)}
