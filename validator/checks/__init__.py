"""All fact checks, gathered from the families' tables, and the runner that turns hits into findings."""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import TYPE_CHECKING

from validator.checks import gpu, gpuhealth, ib, k8s, layout, meta, net, profile, rank, rdzv, software, system
from validator.checks.base import Check, Hit, Job
from validator.codes import Code, table
from validator.errors import UserError
from validator.model import Facts, Finding

if TYPE_CHECKING:  # annotations only: profiles load where one is given
    from validator.profiles import Profile

# Every fact-check family's table, and VAL900; adding a check touches only its family module.
CODES: dict[str, Code] = table(
    *rank.CODES.values(),
    *k8s.CODES.values(),
    *rdzv.CODES.values(),
    *gpu.CODES.values(),
    *gpuhealth.CODES.values(),
    *net.CODES.values(),
    *ib.CODES.values(),
    *software.CODES.values(),
    *system.CODES.values(),
    *profile.CODES.values(),
    *layout.CODES.values(),
    *meta.CODES.values(),
)
CHECKS: dict[str, Check] = {c.code: c for c in CODES.values() if isinstance(c, Check)}


def select(codes: Iterable[str], select: list[str], ignore: list[str], known: Iterable[str]) -> list[str]:
    """Filter codes by prefix, flake8-style: ``--select RNK,RDZ001 --ignore RNK009``."""
    known = list(known)
    for prefix in [*select, *ignore]:
        if not any(k.startswith(prefix.upper()) for k in known):
            raise UserError(f"unknown check code or prefix {prefix!r} (see `validator explain --list`)")
    out = []
    for code in codes:
        if select and not any(code.startswith(p.upper()) for p in select):
            continue
        if any(code.startswith(p.upper()) for p in ignore):
            continue
        out.append(code)
    return out


def to_finding(job: Job, chk: Check, hit: Hit) -> Finding:
    ranks = hit.ranks if hit.ranks is not None else sorted({r for i in hit.members if (r := job.rank(i)) is not None})
    hosts = hit.hosts if hit.hosts is not None else list(dict.fromkeys(job.host(i) for i in hit.members))
    return chk.finding(hit.message, ranks=ranks, hosts=hosts, expected=hit.expected, actual=hit.actual, fix=hit.fix,
                       verify=hit.verify, severity=hit.severity)  # fmt: skip


def run_checks(
    facts: list[Facts],
    profile: Profile | None = None,
    codes: Iterable[str] | None = None,
    context: str = "check",
) -> list[Finding]:
    """Run the checks over all participants. A check that raises becomes a VAL900 finding
    naming it; the others still run."""
    job = Job(facts, profile, context)
    findings: list[Finding] = []
    # The facts of 100,000 ranks are millions of objects without cycles; a cyclic collection
    # triggered by the checks' own allocations would walk them all, several times.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for code in CHECKS if codes is None else [c for c in codes if c in CHECKS]:
            findings.extend(_run_one(job, code))
    finally:
        if collecting:
            gc.enable()
    return sorted(findings, key=lambda f: (-f.severity, f.code))


def _run_one(job: Job, code: str) -> list[Finding]:
    chk = CHECKS[code]
    try:
        return [to_finding(job, chk, hit) for hit in chk.fn(job)]
    except Exception as e:  # noqa: BLE001 - a buggy check becomes a VAL900 finding, the others still run
        return [meta.crashed.finding(f"check {code} raised {type(e).__name__}: {e}")]
