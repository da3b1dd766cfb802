"""Every case of the real-log corpus (tests/corpus/diagnose/): the failure class right, the
initiating rank right where the log determines it, no false attribution (a rank named with
medium/high confidence where the log names none, or a wrong one) and no host named other than the
label's, where the label names one."""

from __future__ import annotations

import pytest

from .corpus import CORPUS, Label, labels, score

# The only place a case may be excused, each with the specific reason.
XFAIL: dict[str, str] = {
    "14-no-socket-interface-single-process.log": "rank 0 follows from 'RANK and WORLD_SIZE in environ: 0/1', a print "
    "of the user's script; a host-level interface error names the host, not a rank",
}

LABELS = labels()


def test_corpus_is_consistent() -> None:
    files = [lb.file for lb in LABELS]
    assert len(files) == len(set(files)), "a case is labelled twice"
    assert sorted(files) == sorted(p.name for p in (CORPUS / "cases").iterdir()), "cases and labels differ"
    assert len({lb.source for lb in LABELS}) == len(LABELS), "two cases from one thread"
    for lb in LABELS:
        assert lb.evidence in (CORPUS / "cases" / lb.file).read_text(encoding="utf-8", errors="replace"), lb.file
    assert set(XFAIL) <= set(files), "an excused case is not in the corpus"


def test_the_blind_sets_are_run() -> None:
    """The held-out sets that joined the corpus (issue 25: n, 19 cases; p, 30) are run as every other case."""
    assert sum(lb.file.startswith("n") for lb in LABELS) == 19
    assert sum(lb.file.startswith("p") for lb in LABELS) == 30


@pytest.mark.parametrize("label", LABELS, ids=[lb.file for lb in LABELS])
def test_case(label: Label, request: pytest.FixtureRequest) -> None:
    if label.file in XFAIL:
        request.applymarker(pytest.mark.xfail(reason=XFAIL[label.file], strict=True))
    s = score(label)
    assert not s.problems, f"{label.file} ({label.source}): {'; '.join(s.problems)} -- {s.summary[:200]}"
