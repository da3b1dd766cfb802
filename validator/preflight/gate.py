"""The coordinator's policy during the gather (coordinator.Policy), for the preflight and its door:
decide early on a failure no late arrival can fix, and say on stderr what it is waiting for."""

from __future__ import annotations

import operator
import sys

from validator.preflight.plan import HEALABLE, Options, Plan
from validator.preflight.verdict import codes

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from validator.model import Facts, Finding
    from validator.preflight.coordinator import Coordinator
    from validator.profiles import Profile


class Gate:
    """The coordinator's policy during the gather (coordinator.Policy): decide early on a failure
    no late arrival can fix, and say on stderr what it is waiting for."""

    def __init__(self, opts: Options, p: Plan, profile: Profile | None) -> None:
        self.opts, self.p, self.profile = opts, p, profile
        self.checked: tuple[list[Facts], list[Finding]] | None = None  # the last facts checked, and what was found

    def findings(self, facts: list[Facts]) -> list[Finding]:
        """The checks' findings over ``facts``, computed once for the same arrivals: what was
        checked while waiting (nodes missing until the deadline) is not checked again after it."""
        kept = self.checked
        if kept is not None and len(kept[0]) == len(facts) and all(map(operator.is_, kept[0], facts)):
            return list(kept[1])
        from validator.checks import run_checks

        found = run_checks(facts, self.profile, codes(self.opts), "preflight")
        self.checked = (facts, found)
        return list(found)

    def decisive(self, facts: list[Facts]) -> bool:
        """A failure no late arrival can fix. Checked whenever arrivals pause, whatever --fail-on:
        the coordinator is idle then, and the verdict at the deadline reuses the findings."""
        fail_on = self.opts.fail_on
        found = self.findings(facts)
        return fail_on is not None and any(f.severity >= fail_on and f.code not in HEALABLE for f in found)

    def flooded(self, c: Coordinator) -> None:
        from validator.preflight.refusals import FLOOD_WAIT_S

        sys.stderr.write(f"validator: port {c.port} is flooded ({c.rejected.flood_text()}); the verdict "
                         f"waits up to {FLOOD_WAIT_S:g} s for it to stop\n")  # fmt: skip
        sys.stderr.flush()

    def waiting(self, c: Coordinator) -> None:
        from validator.targets import fold_hosts, fold_ranks

        p = self.p
        if p.keyed:
            absent = sorted(c.waiting)
            what = f"{'rank' if p.mode == 'rank' else 'node rank'} {fold_ranks(absent[:10000])}"
            hosts = [p.names[k] for k in absent[:10000] if p.mode == "node" and k < len(p.names)]
            what += f" ({fold_hosts(hosts)})" if hosts else ""
        else:
            n = c.missing_count()
            what = f"{n} more node{'s' if n != 1 else ''}"
            if p.minimum < p.expected and c.expect.settle:
                what += (f" (--nnodes={p.minimum}:{p.expected}: passes with {p.minimum} once arrivals pause; "
                         "later nodes are checked at the door)")  # fmt: skip
            elif p.minimum < p.expected:
                what += f" (--nnodes={p.minimum}:{p.expected}: passes with {p.minimum} after the last call)"
        arrived = len(c.arrivals)
        unit = "ranks" if p.mode == "rank" else "nodes"
        sys.stderr.write(f"validator: waiting for {what} ({arrived}/{p.expected} {unit} arrived, "
                         f"{c.remaining():.0f} s left)\n")  # fmt: skip
        sys.stderr.flush()
