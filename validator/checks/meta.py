"""VAL: the validator's own view: facts that could not be collected, and its own errors."""

from __future__ import annotations

from collections.abc import Iterator

from validator.checks.base import Hit, Job, check
from validator.codes import Code, code, table
from validator.model import Severity


@check("VAL001", Severity.WARNING, "Some facts could not be collected")
def collector_errors(job: Job) -> Iterator[Hit]:
    """Every collector of the agent ran without error on every node (an error is recorded in the
    facts, never raised).

    Checks that need the missing facts stay silent for those nodes, so a problem there can go
    unnoticed.

    Read the error: usually a missing tool (iproute2), a permission, or a broken GPU driver
    (NVML errors are worth a drain on their own).
    """
    groups: dict[str, list[int]] = {}
    for i, errors in zip(job.node_reps, job.node_column("errors"), strict=True):
        for collector, err in errors.items():
            groups.setdefault(f"{collector}: {err}", []).extend(job.node_of(i))
    for what, members in groups.items():
        yield Hit(
            what,
            members,
            expected="no error",
            actual=what.split(":", 1)[0],
            fix="see the error; install the missing tool or fix the driver",
            verify="validator probe --json   # on each named host: errors is empty",
        )


crashed = code(
    "VAL900",
    Severity.ERROR,
    "Check crashed",
    """The validator's own code ran without error: a check (named in the finding) raised an
    exception instead of judging the facts.

    A bug in the validator, usually facts of a shape it did not expect. The other checks still
    ran and their findings stand, but what the crashed check looks for was not checked.

    Report the bug with the finding's message and the facts files (`validator probe --json` on
    the named hosts); until it is fixed, `--ignore` the crashed check's code to silence it.""",
    hint="report this bug with the facts files",
)

CODES: dict[str, Code] = table(collector_errors, crashed)
