"""The report says nothing empty: no "expected X, got X", and another cause that only names
ranks that failed as a consequence is context (info), not a warning (issue 11 item 5)."""

from __future__ import annotations

from validator.diagnose.events import Cause, Diagnosis
from validator.diagnose.report import to_report
from validator.model import Severity


def _diag(others: list[Cause], collateral: list[int]) -> Diagnosis:
    primary = Cause(
        code="COL002",
        summary="rank 2 skipped all_reduce #3",
        culprits=[2],
        confidence="high",
        reason="traces",
        expected="all_reduce",
        actual="all_reduce",
    )
    return Diagnosis("rank skipped a collective", primary, others, collateral, [0, 1, 2, 3], {})


def test_expected_equal_to_actual_is_not_printed() -> None:
    report = to_report(_diag([], [0, 1, 3]), 4, [], [], "t")
    first = report.findings[0]
    assert first.expected is None and first.actual is None
    other = Cause(
        code="COL001",
        summary="x",
        culprits=[1],
        confidence="low",
        reason="r",
        expected="all_reduce",
        actual="all_gather",
    )
    report = to_report(_diag([other], []), 4, [], [], "t")
    assert (report.findings[1].expected, report.findings[1].actual) == ("all_reduce", "all_gather")


def test_other_causes_on_collateral_ranks_are_info() -> None:
    on_collateral = Cause(
        code="COL003", summary="ranks 0,1 timed out", culprits=[0, 1], confidence="high", reason="watchdog"
    )
    elsewhere = Cause(
        code="DGN009", summary="rank 2 ran out of memory", culprits=[2], confidence="medium", reason="oom"
    )
    report = to_report(_diag([on_collateral, elsewhere], [0, 1, 3]), 4, [], [], "t")
    severities = {f.code: f.severity for f in report.findings}
    assert severities["COL003"] == Severity.INFO
    assert severities["DGN009"] == Severity.WARNING
